/**
 * Statements rendered once per database handle. Drizzle renders a query builder's SQL every
 * time it runs (the selection, the conditions, every name escaped): a few hundred microseconds
 * for a select with a few conditions, and a tick runs about twenty of them. A statement built
 * here is rendered once, with placeholders (`sql.placeholder`) for what changes from call to
 * call; each call only fills them in and sends it.
 *
 * They are sent unnamed, so the server parses each again: the embedded PGlite serves every
 * client connection from one session, where two clients preparing one name would collide.
 */
import type { Queryable } from './queries/abstracts.js';

/** The name Drizzle's `prepare` gets: an unnamed statement. */
export const unnamed = '';

/** `build` run once per database handle (a transaction is a handle of its own); its statements are kept with it. */
export function statements<T extends object>(build: (db: Queryable) => T): (db: Queryable) => T {
  const built = new WeakMap<Queryable, T>();
  return (db) => {
    let s = built.get(db);
    if (!s) built.set(db, (s = build(db)));
    return s;
  };
}
