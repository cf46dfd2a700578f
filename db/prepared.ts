/**
 * Statements rendered once per database handle. Drizzle renders a query builder's SQL every
 * time it runs (the selection, the conditions, every name escaped): a few hundred microseconds
 * for a select with a few conditions, and a tick runs about twenty of them. A statement built
 * here is rendered once, with placeholders (`sql.placeholder`) for what changes from call to
 * call; each call only fills them in and sends it.
 *
 * Each has a name (`ml_<scope>_<key>`): the server parses and plans it once per connection and
 * then only binds and runs it. On the embedded PGlite, whose connections share one session, each
 * pool client adds a tag of its own to the name (db/client.ts).
 */
import { createHash } from 'node:crypto';
import { Placeholder, sql, type Query, type SQLWrapper } from 'drizzle-orm';
import type { PgDialect, PgSession } from 'drizzle-orm/pg-core';
import type { QueryResult } from 'pg';
import type { Queryable } from './queries/abstracts.js';

const scopes = new Set<string>();

/**
 * `build` run once per database handle (a transaction is a handle of its own); its statements
 * are kept with it. `name(key)` is the name for Drizzle's `prepare`: one SQL text per name, the
 * same on every handle, so `scope` must be unique.
 */
export function statements<T extends object>(
  scope: string,
  build: (db: Queryable, name: (key: string) => string) => T,
): (db: Queryable) => T {
  if (scopes.has(scope)) throw new Error(`prepared statements: the scope ${scope} is taken`);
  scopes.add(scope);
  const name = (key: string) => {
    const n = `ml_${scope}_${key}`;
    // The server keeps 63 bytes of a name: two longer ones could become one. On PGlite a client
    // adds its tag (up to 13 characters) to it.
    if (n.length > 50) throw new Error(`prepared statement name too long: ${n}`);
    return n;
  };
  const built = new WeakMap<Queryable, T>();
  return (db) => {
    let s = built.get(db);
    if (!s) built.set(db, (s = build(db, name)));
    return s;
  };
}

/**
 * Run a statement built at the call, whose text takes one of a few shapes (a raw `sql` with as
 * many rows as the call has entries), under a name of its own text: the server parses and plans
 * each shape once per connection, as it does the statements above, where an unnamed one is
 * parsed and planned at every call (on the embedded PGlite, in WASM, the larger part of a small
 * write's cost). `query`: a raw `sql` or a query builder. Answers as `db.execute` does (column
 * names, driver values), whatever the builder would have mapped.
 */
export function executeNamed<T extends Record<string, unknown>>(
  db: Queryable,
  scope: string,
  query: SQLWrapper,
): Promise<QueryResult<T>> {
  // What `db.execute` does, with a name: Drizzle's own session and dialect.
  const { session, dialect } = db as unknown as { session: PgSession; dialect: PgDialect };
  const built = dialect.sqlToQuery(query.getSQL());
  const name = `ml_${scope}_${createHash('sha1').update(built.sql).digest('hex').slice(0, 16)}`;
  return session.prepareQuery(built, undefined, name, false).execute() as Promise<QueryResult<T>>;
}

/**
 * A statement of a few shapes (the parts a call includes), each rendered once with placeholders
 * and named `ml_<scope>_<shape>`: where `executeNamed` renders and hashes the text at every call,
 * a call here only fills in `values`. `build(db, shape)` renders a shape the first time it is
 * asked for; its text must depend on the shape alone (the dialect is the same on every handle).
 */
export function shapedStatement<S extends string>(
  scope: string,
  build: (db: Queryable, shape: S) => SQLWrapper,
): <T extends Record<string, unknown>>(
  db: Queryable,
  shape: S,
  values: Record<string, unknown>,
) => Promise<QueryResult<T>> {
  if (scopes.has(scope)) throw new Error(`prepared statements: the scope ${scope} is taken`);
  scopes.add(scope);
  const rendered = new Map<S, Query>();
  return (db, shape, values) => {
    const { session, dialect } = db as unknown as { session: PgSession; dialect: PgDialect };
    let query = rendered.get(shape);
    if (!query) rendered.set(shape, (query = dialect.sqlToQuery(build(db, shape).getSQL())));
    const name = `ml_${scope}_${shape}`;
    if (name.length > 50) throw new Error(`prepared statement name too long: ${name}`);
    return session.prepareQuery(query, undefined, name, false).execute(values) as Promise<never>;
  };
}

/**
 * `expr = any($ids)`: the ids as one array parameter, so that a statement's text is the same for
 * any number of them (an `in (…)` list has one text per length, each a statement of its own).
 */
export function anyOf(expr: SQLWrapper, ids: readonly number[] | Placeholder) {
  return sql`${expr} = any(${ids instanceof Placeholder ? ids : sql.param(ids)}::bigint[])`;
}
