/** Compile `entryPoints` (output name → source path) into `outdir` as the worker's build is compiled. */
export function compileWorkerEntries(entryPoints: Record<string, string>, outdir: string): Promise<unknown>;
/** Entry `entry` of build `name` when that build is fresh, else null. */
export function freshEntry(name: 'cli' | 'worker', entry: string): string | null;
