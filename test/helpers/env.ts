/** Shared test plumbing: pinned binaries, free ports, env objects, a fresh Postgres database. */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createDb, type DbHandle } from '../../db/client.js';
import { runMigrations } from '../../db/migrate.js';
import { parseEnv, type Env } from '../../env.js';
import { startEmbeddedPostgres } from '../../runtime/embedded-postgres.js';
import { installHint, resolveTool, type ToolName } from '../../runtime/tools.js';

export const repoToolsDir = join(import.meta.dirname, '..', '..', '.tools');

/** Path of a pinned binary; fails the test with the fix when it is missing. */
export function toolPath(name: ToolName): string {
  const path = resolveTool(name, {
    toolsDir: process.env.MINDLOOP_TOOLS_DIR ?? repoToolsDir,
    envOverrides: {
      temporal: process.env.TEMPORAL_CLI_PATH,
      'temporal-test-server': process.env.TEMPORAL_TEST_SERVER_PATH,
    },
  });
  if (!path) throw new Error(`${name} is not installed: ${installHint}`);
  return path;
}

/** A TCP port nobody listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** A throw-away directory, removed by the returned function. */
export function tempDir(prefix: string): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), `mindloop-${prefix}-`));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** A validated Env for tests (only the given variables, plus the repo's tools dir). */
export function testEnv(vars: Record<string, string | number | undefined>): Env {
  const source = Object.fromEntries(
    Object.entries({ MINDLOOP_TOOLS_DIR: repoToolsDir, ...vars }).map(([k, v]) => [
      k,
      v === undefined ? undefined : String(v),
    ]),
  );
  const parsed = parseEnv(source);
  if (!parsed.success) throw new Error(`bad test env: ${parsed.error.message}`);
  return parsed.data;
}

export const adminDatabaseUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** Create a fresh database on the real Postgres; returns its URL and a drop function. */
export async function freshPostgresDatabase(prefix: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${process.pid}_${Date.now()}`.replace(/[^a-z0-9_]/gi, '_').toLowerCase();
  const admin = new pg.Client({ connectionString: adminDatabaseUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminDatabaseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: adminDatabaseUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

export interface MigratedDatabase extends DbHandle {
  url: string;
  /** Close the pool and drop the database. */
  dispose(): Promise<void>;
}

/** A fresh database on the real Postgres with the migrations applied, and a Drizzle handle on it. */
export async function migratedDatabase(prefix: string, max = 4): Promise<MigratedDatabase> {
  const fresh = await freshPostgresDatabase(prefix);
  // A statement sent on a connection still running another (Promise.all over a transaction's
  // handle) fails the file when the database is disposed, naming the statements.
  const overlaps = new Set<string>();
  const handle = createDb(fresh.url, { max, onOverlap: (sql) => overlaps.add(sql) });
  await runMigrations(handle.pool);
  return {
    ...handle,
    url: fresh.url,
    async dispose() {
      await handle.close();
      await fresh.drop();
      if (overlaps.size)
        throw new Error(
          `statements sent on a busy connection (run them one after another):\n${[...overlaps].join('\n')}`,
        );
    },
  };
}

/**
 * A fresh in-memory PGlite served as `npm start` serves the embedded database (its own thread, on
 * a socket), with the migrations applied and a Drizzle handle of `max` connections.
 */
export async function migratedPglite(max = 1): Promise<MigratedDatabase> {
  const embedded = await startEmbeddedPostgres({ dataDir: 'memory://', port: 0 });
  const handle = createDb(embedded.url, { max });
  try {
    await runMigrations(handle.pool);
  } catch (err) {
    await handle.close();
    await embedded.stop();
    throw err;
  }
  return {
    ...handle,
    url: embedded.url,
    async dispose() {
      await handle.close();
      await embedded.stop();
    },
  };
}
