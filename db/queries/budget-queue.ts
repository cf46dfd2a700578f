/**
 * Each budget's changes, one after another per process: a change waits for those of its budget
 * queued before it (`serially`), and requests of one kind made while they wait go together when
 * their turn comes (`inTurn`: the holds and settles of a tick's model calls).
 * Changes inside a transaction are neither queued nor batched: its lock orders them.
 */
import { sqlStateOf } from '../../core/failure.js';
import type { Db } from '../client.js';

export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

/** A transaction handle (drizzle's has `rollback`): changes inside one are neither cached nor queued. */
export const inTransaction = (db: Db | Tx): boolean => 'rollback' in db;

/**
 * Run a change again when Postgres broke a deadlock or a serialization conflict by aborting it
 * (40P01, 40001): two processes closing the same hold at once (a settle racing a retried
 * settle or the sweep) can each hold what the other waits for. Every change is keyed, so a
 * second attempt either does the work or finds it done.
 */
export async function afterDeadlocks<T>(fn: () => Promise<T>, attempts = 4): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      const code = sqlStateOf(err);
      if (i >= attempts || (code !== '40P01' && code !== '40001')) throw err;
    }
  }
}

/** Per database handle: the tail of each budget's queue of changes. */
const queues = new WeakMap<object, Map<string, Promise<unknown>>>();

/**
 * Run `fn` after the changes of this budget already queued in this process (none inside a
 * transaction: its lock orders it, and queueing it could wait on a change that waits on that lock).
 */
export function serially<T>(db: Db | Tx, budgetId: string, fn: () => Promise<T>): Promise<T> {
  if (inTransaction(db)) return fn();
  let m = queues.get(db);
  if (!m) queues.set(db, (m = new Map()));
  const prev = m.get(budgetId) ?? Promise.resolve();
  const attempt = () => afterDeadlocks(fn);
  const run = prev.then(attempt, attempt);
  const tail = run.then(
    () => undefined,
    () => undefined,
  );
  m.set(budgetId, tail);
  void tail.then(() => {
    if (m.get(budgetId) === tail) m.delete(budgetId);
  });
  return run;
}

/** A request waiting for its budget's turn, and how to answer it. */
export interface Waiting<Q, R> {
  req: Q;
  resolve: (r: R) => void;
  reject: (err: unknown) => void;
}

/** Per database handle: the requests of each kind and budget waiting for their turn, taken together when it comes. */
const waiting = new WeakMap<object, Map<string, Waiting<never, never>[]>>();

/**
 * Queue `req` on its budget (`serially`) with the requests of the same kind made before its turn
 * comes: a lone request waits for nothing but the changes queued before it, and requests made
 * while one runs (the reflexes' model calls of a tick) go together after it; `run` gets them all
 * and answers each.
 */
export function inTurn<Q, R>(
  db: Db | Tx,
  kind: 'reserve' | 'settle',
  budgetId: string,
  req: Q,
  run: (batch: Waiting<Q, R>[]) => Promise<void>,
): Promise<R> {
  return new Promise<R>((resolve, reject) => {
    let m = waiting.get(db) as Map<string, Waiting<Q, R>[]> | undefined;
    if (!m) waiting.set(db, (m = new Map()) as Map<string, Waiting<never, never>[]>);
    const queue = m;
    const id = `${kind}:${budgetId}`;
    const batch = queue.get(id);
    if (batch) {
      batch.push({ req, resolve, reject });
      return;
    }
    const mine: Waiting<Q, R>[] = [{ req, resolve, reject }];
    queue.set(id, mine);
    void serially(db, budgetId, async () => {
      if (queue.get(id) === mine) queue.delete(id);
      await run(mine);
    });
  });
}

/** Answers `group` with what `work` returns for it, one result each; its failure fails them all. */
export async function answer<Q, R>(group: Waiting<Q, R>[], work: () => Promise<R[]>): Promise<void> {
  try {
    const results = await afterDeadlocks(work);
    group.forEach((w, i) => w.resolve(results[i]!));
  } catch (err) {
    for (const w of group) w.reject(err);
  }
}
