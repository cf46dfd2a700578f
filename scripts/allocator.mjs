// The memory allocator of a worker process: jemalloc where the system has it (Debian's
// libjemalloc2), preloaded with LD_PRELOAD when the process starts. A worker's native parts (the
// Temporal core's threads, the embedder's runtime, V8's own allocations outside its heap)
// allocate and free from many threads; glibc's malloc keeps what they free in per-thread arenas,
// so the process grows with every agent it has started, long after they went idle. jemalloc hands
// it back: 2 000 idle agents held 712 MB of RSS with it against 1 059 MB without, on the same
// machine (`npm run bench -- tick`, docs/sizing.md). MINDLOOP_ALLOCATOR=system keeps glibc's.
// Plain Node: bootstrap.mjs runs it before anything is installed.
import { existsSync } from 'node:fs';

/** Where Debian-like systems put the library, by Node's name for the CPU. */
const multiarch = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' };

/** The path of libjemalloc.so.2 on this machine, or null. */
export function jemallocPath() {
  if (process.platform !== 'linux') return null;
  const dirs = [multiarch[process.arch] && `/usr/lib/${multiarch[process.arch]}`, '/usr/lib64', '/usr/lib'];
  for (const d of dirs.filter(Boolean)) if (existsSync(`${d}/libjemalloc.so.2`)) return `${d}/libjemalloc.so.2`;
  return null;
}

/**
 * What a worker process's environment adds so that it runs on jemalloc: `LD_PRELOAD` with the
 * library first (before what `env` preloads already), or nothing where it is missing, already
 * preloaded, or MINDLOOP_ALLOCATOR=system.
 */
export function allocatorEnv(env = process.env) {
  if (env.MINDLOOP_ALLOCATOR === 'system') return {};
  const lib = jemallocPath();
  if (!lib || (env.LD_PRELOAD ?? '').includes('libjemalloc')) return {};
  return { LD_PRELOAD: [lib, env.LD_PRELOAD].filter(Boolean).join(' ') };
}
