/**
 * Group commit for one kind of write: requests made together (before the first one's microtask
 * runs: the `llm_calls` rows of a tick's reflexes, whose model calls answer together) go in one
 * call of `run`; those made while it runs wait and go together when it is done, and so on. A lone
 * request waits for one microtask, nothing else. `run` answers each
 * request, in order; its failure fails every request of its group.
 */
export function grouped<Q, R>(run: (reqs: Q[]) => Promise<R[]>): (req: Q) => Promise<R> {
  let waiting: Array<{ req: Q; resolve: (r: R) => void; reject: (err: unknown) => void }> = [];
  let busy = false;
  const drain = async () => {
    busy = true;
    while (waiting.length > 0) {
      const group = waiting;
      waiting = [];
      try {
        const results = await run(group.map((w) => w.req));
        group.forEach((w, i) => w.resolve(results[i]!));
      } catch (err) {
        for (const w of group) w.reject(err);
      }
    }
    busy = false;
  };
  return (req) =>
    new Promise<R>((resolve, reject) => {
      waiting.push({ req, resolve, reject });
      if (busy) return;
      busy = true;
      queueMicrotask(() => void drain());
    });
}
