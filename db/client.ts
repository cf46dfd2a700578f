/**
 * The one database code path: a `pg` pool wrapped by Drizzle. The embedded PGlite socket
 * and a real Postgres are reached the same way, by connection string.
 */
import pg from 'pg';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import * as schema from './schema/index.js';

export type Schema = typeof schema;
export type Db = NodePgDatabase<Schema>;

export interface DbHandle {
  db: Db;
  pool: pg.Pool;
  close(): Promise<void>;
}

/** Open a pool and a Drizzle handle over it. */
export function createDb(connectionString: string, opts: { max?: number } = {}): DbHandle {
  const pool = new pg.Pool({ connectionString, max: opts.max ?? 10, idleTimeoutMillis: 30_000 });
  // An idle client losing its socket (server restart) must not crash the process.
  pool.on('error', (err) => process.stderr.write(`db pool: ${err.message}\n`));
  // Nor one checked out between two statements (inside a transaction): the pool listens only to
  // its idle clients. Its holder's next statement fails, and the activity is retried.
  pool.on('connect', (client) => client.on('error', (err) => process.stderr.write(`db client: ${err.message}\n`)));
  const db = drizzle(pool, { schema });
  return { db, pool, close: () => pool.end() };
}
