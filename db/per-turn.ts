/**
 * Requests of one kind made in one turn of the event loop, sent together: the first waits for
 * the turn to end (`setImmediate`), then `run` gets every request made meanwhile and answers each,
 * in order. What the reflexes' model calls record at once (their `llm_calls` rows) goes in one
 * statement instead of one each. A failure of `run` fails every request of its batch.
 */
export function perTurn<Q, R>(run: (reqs: Q[]) => Promise<R[]>): (req: Q) => Promise<R> {
  let batch: Array<{ req: Q; resolve: (r: R) => void; reject: (err: unknown) => void }> | null = null;
  return (req) =>
    new Promise<R>((resolve, reject) => {
      if (batch) {
        batch.push({ req, resolve, reject });
        return;
      }
      const mine = [{ req, resolve, reject }];
      batch = mine;
      setImmediate(() => {
        batch = null;
        run(mine.map((w) => w.req)).then(
          (results) => mine.forEach((w, i) => w.resolve(results[i]!)),
          (err: unknown) => mine.forEach((w) => w.reject(err)),
        );
      });
    });
}
