/**
 * Loaded into the soak benchmark's worker process (`node --expose-gc --import
 * ./bench/soak-probe.mjs --import tsx workers/main.ts …`). Node gives every worker thread the
 * process's `--import`s, so it runs in the main thread and in each of the workflows' threads:
 * every SOAK_SAMPLE_MS each runs a full garbage collection of its own V8 heap and prints one
 * stdout line, `SOAK_MEM {json}`: its thread id, its heap in use and, from the main thread, the
 * process's RSS. Plain JavaScript, so it loads before tsx. The product's code is not changed for it.
 */
import { getHeapStatistics } from 'node:v8';
import { isMainThread, threadId } from 'node:worker_threads';

const everyMs = Number(process.env.SOAK_SAMPLE_MS ?? 10_000);
// Present only under --expose-gc: the heap after a full collection is what stays, not garbage not yet collected.
const gc = globalThis.gc;
setInterval(() => {
  gc?.();
  const line = {
    thread: threadId,
    at: Date.now(),
    heapUsed: getHeapStatistics().used_heap_size,
    gc: gc !== undefined,
    ...(isMainThread ? { rss: process.memoryUsage().rss } : {}),
  };
  process.stdout.write(`SOAK_MEM ${JSON.stringify(line)}\n`);
}, everyMs).unref();
