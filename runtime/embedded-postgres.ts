/**
 * The embedded database: PGlite (Postgres in WASM) on a directory under the data dir, served
 * on a local TCP socket by pglite-socket, so every process and test reaches it with the same
 * `pg` + Drizzle code as a real Postgres.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { pidAlive } from './pid.js';

export interface EmbeddedPostgresOptions {
  /** Directory for the database files; 'memory://' for a throw-away instance. */
  dataDir: string;
  host?: string;
  /** 0 picks a free port. */
  port: number;
  /** pglite-socket multiplexes many `pg` clients over the single PGlite connection. */
  maxConnections?: number;
}

export interface EmbeddedPostgres {
  url: string;
  port: number;
  dataDir: string;
  stop(): Promise<void>;
}

/**
 * PGlite has no cross-process lock, and two processes on one directory corrupt it:
 * a pid file refuses a second owner while the first is alive.
 */
function takeLock(dir: string): () => void {
  const lockFile = join(dir, 'mindloop.lock');
  if (existsSync(lockFile)) {
    const owner = Number(readFileSync(lockFile, 'utf8').trim());
    if (owner && owner !== process.pid && pidAlive(owner)) {
      throw new Error(`the embedded database ${dir} is in use by process ${owner}; stop it first or set DATABASE_URL`);
    }
  }
  writeFileSync(lockFile, String(process.pid));
  return () => rmSync(lockFile, { force: true });
}

/** Open (or create) the PGlite database and serve it on a socket. */
export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const inMemory = opts.dataDir.startsWith('memory://');
  const dataDir = inMemory ? opts.dataDir : resolve(opts.dataDir);
  let release = () => {};
  if (!inMemory) {
    mkdirSync(dataDir, { recursive: true });
    release = takeLock(dataDir);
  }
  const db = await PGlite.create(inMemory ? undefined : dataDir);
  const host = opts.host ?? '127.0.0.1';
  const server = new PGLiteSocketServer({ db, host, port: opts.port, maxConnections: opts.maxConnections ?? 32 });
  try {
    await server.start();
  } catch (err) {
    await db.close();
    release();
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EADDRINUSE') {
      throw new Error(`port ${opts.port} is taken: set PGLITE_PORT to another port, or DATABASE_URL to use a real Postgres`);
    }
    throw err;
  }
  // The server resolves port 0 to the real one once listening.
  const conn = server.getServerConn();
  const port = Number(conn.slice(conn.lastIndexOf(':') + 1));
  let stopped: Promise<void> | undefined;
  return {
    url: `postgres://postgres@${host}:${port}/postgres?sslmode=disable`,
    port,
    dataDir,
    stop: () =>
      (stopped ??= (async () => {
        await server.stop();
        await db.close(); // flushes to disk
        release();
      })()),
  };
}
