/**
 * Group commit for one kind of write: the first request runs at once; those made while it runs
 * wait and go together, in one call of `run`, when it is done, and so on. Requests made at once
 * (the `llm_calls` rows of the reflexes' model calls of a tick) take two statements instead of one
 * each, and a lone request waits for nothing. `run` answers each request, in order; its failure
 * fails every request of its group.
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
      if (!busy) void drain();
    });
}
