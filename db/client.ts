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

/** How long closing waits for clients still checked out before it closes their connections. */
const closeGraceMs = 5_000;

/**
 * End the pool. A client still checked out (its holder awaiting a server that went away) would
 * hold `pool.end()` for ever: after the grace period its connection is closed, which fails what
 * it awaits, and the pool ends.
 */
async function closePool(pool: pg.Pool): Promise<void> {
  const ended = pool.end();
  const inTime = await Promise.race([ended.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), closeGraceMs).unref())]);
  if (inTime) return;
  const held = (pool as unknown as { _clients?: pg.Client[] })._clients ?? [];
  process.stderr.write(`db pool: ${held.length} client(s) still in use ${closeGraceMs} ms after close; closing their connections\n`);
  await Promise.allSettled(held.map((c) => c.end()));
  await ended;
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
  return { db, pool, close: () => closePool(pool) };
}
