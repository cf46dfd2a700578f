/** Run a repo entry point as a child process and collect its output. */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

export const repoRoot = join(import.meta.dirname, '..', '..');
export const tsxBin = join(repoRoot, 'node_modules', '.bin', 'tsx');

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Spawn `cmd args` in the repo root with `env` added to a minimal environment. */
export function start(
  cmd: string,
  args: string[],
  env: Record<string, string> = {},
): ChildProcess & { output: () => Ran } {
  const child = spawn(cmd, args, {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  return Object.assign(child, { output: () => ({ code: child.exitCode, stdout, stderr }) });
}

/** Spawn and wait for exit (killed after `timeoutMs`). */
export async function run(
  cmd: string,
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 60_000,
): Promise<Ran> {
  const child = start(cmd, args, env);
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  await new Promise<void>((resolve) => child.once('exit', () => resolve()));
  clearTimeout(timer);
  return child.output();
}
