/**
 * A test double of the Sandbox contract (sandbox/sandbox.ts) WITHOUT isolation: it writes the
 * files to a temp dir and runs the command there as a plain child process, with the wall-clock
 * budget enforced (kill → `budget_exceeded: wall_time`). For workflow tests of what happens
 * around a sandbox run; the isolation itself is tested against sandbox/docker-sandbox.ts.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { Sandbox, SandboxRunRequest, SandboxRunResult } from '../../sandbox/sandbox.js';

export class LocalProcessSandbox implements Sandbox {
  readonly runs: SandboxRunRequest[] = [];

  async run(req: SandboxRunRequest, opts: { signal?: AbortSignal } = {}): Promise<SandboxRunResult> {
    this.runs.push(req);
    const dir = mkdtempSync(join(tmpdir(), 'mindloop-localsandbox-'));
    const started = Date.now();
    try {
      for (const [path, content] of Object.entries(req.files ?? {})) {
        mkdirSync(dirname(join(dir, path)), { recursive: true });
        writeFileSync(join(dir, path), content);
      }
      const wallMs = req.budget?.wallMs ?? 60_000;
      const [cmd, ...args] = req.command;
      // Its own process group, killed whole: `node --test` runs each test file in a child,
      // which a kill of the parent alone would leave running (a busy loop, for good).
      const child = spawn(cmd === 'node' ? process.execPath : cmd!, args, {
        cwd: dir,
        env: { PATH: process.env.PATH ?? '', ...req.env },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      const killGroup = () => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          // already gone
        }
      };
      opts.signal?.addEventListener('abort', killGroup, { once: true });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      let killed = false;
      const timer = setTimeout(() => {
        killed = true;
        killGroup();
      }, wallMs);
      const exitCode = await new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', killGroup);
      killGroup(); // whatever the command left behind in its group
      return {
        key: req.key,
        status: killed ? 'budget_exceeded' : exitCode === 0 ? 'ok' : 'error',
        exceeded: killed ? 'wall_time' : undefined,
        exitCode: killed ? null : exitCode,
        stdout,
        stderr,
        truncated: false,
        oomKilled: false,
        durationMs: Date.now() - started,
        imageId: 'local-process',
      };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  async reapOrphans(): Promise<number> {
    return 0;
  }
}
