/** The path of libjemalloc.so.2 on this machine, or null. */
export function jemallocPath(): string | null;
/** What a worker process's environment adds to run on jemalloc (LD_PRELOAD), or nothing. */
export function allocatorEnv(env?: NodeJS.ProcessEnv): { LD_PRELOAD?: string };
