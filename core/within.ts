/**
 * A time limit on work that may never settle (a server that hangs, an embedder that stalls): the
 * work's outcome, or `late()`'s error after `ms`. The timer is cleared when the work settles first
 * and never holds the process open; a rejection of the work after the limit is dropped.
 */
export async function within<T>(work: Promise<T>, ms: number, late: () => Error): Promise<T> {
  work.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(late()), ms);
    timer.unref();
  });
  try {
    return await Promise.race([work, limit]);
  } finally {
    clearTimeout(timer);
  }
}
