/**
 * The embedded database: PGlite (Postgres in WASM) on a directory under the data dir, served
 * on a local TCP socket by pglite-socket, so every process and test reaches it with the same
 * `pg` + Drizzle code as a real Postgres. Both run in a thread of their own
 * (embedded-postgres-thread.mjs), beside the worker's activities rather than in their way.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { pidAlive } from './pid.js';
import { StartRefused } from './start-ports.js';

interface EmbeddedPostgresOptions {
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
      throw new StartRefused(
        `the embedded database ${dir} is in use by process ${owner}; stop it first or set DATABASE_URL`,
      );
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
  const host = opts.host ?? '127.0.0.1';
  const thread = new Worker(new URL('./embedded-postgres-thread.mjs', import.meta.url), {
    workerData: {
      dataDir: inMemory ? undefined : dataDir,
      host,
      port: opts.port,
      maxConnections: opts.maxConnections ?? 32,
    },
  });
  type Reply =
    { kind: 'ready'; conn: string } | { kind: 'failed'; message: string; code?: string } | { kind: 'stopped' };
  const next = () =>
    new Promise<Reply>((ok, fail) => {
      const onError = (err: Error) => fail(err);
      const onExit = (code: number) => fail(new Error(`the embedded Postgres thread exited (${code})`));
      thread.once('error', onError).once('exit', onExit);
      thread.once('message', (m: Reply) => {
        thread.off('error', onError).off('exit', onExit);
        ok(m);
      });
    });
  let started: Reply;
  try {
    started = await next();
  } catch (err) {
    release();
    throw err;
  }
  if (started.kind !== 'ready') {
    release();
    await thread.terminate();
    if (started.kind === 'failed' && started.code === 'EADDRINUSE') {
      throw new StartRefused(
        `port ${opts.port} is taken: set PGLITE_PORT to another port, or DATABASE_URL to use a real Postgres`,
      );
    }
    throw new Error(
      `the embedded Postgres did not start: ${started.kind === 'failed' ? started.message : started.kind}`,
    );
  }
  // A thread that fails later (a WASM abort) shows in the log; its clients' statements fail.
  thread.on('error', (err) => process.stderr.write(`embedded postgres: ${err.message}\n`));
  thread.on('exit', (code) => {
    if (!stopped) process.stderr.write(`embedded postgres: its thread exited (${code}) before it was stopped\n`);
  });
  // The server resolves port 0 to the real one once listening.
  const conn = started.conn;
  const port = Number(conn.slice(conn.lastIndexOf(':') + 1));
  let stopped: Promise<void> | undefined;
  return {
    url: `postgres://postgres@${host}:${port}/postgres?sslmode=disable`,
    port,
    dataDir,
    stop: () =>
      (stopped ??= (async () => {
        const done = next().catch(() => undefined);
        thread.postMessage('stop');
        // The thread closes the server and the database (which flushes to disk), then says so.
        await Promise.race([done, new Promise((r) => setTimeout(r, 30_000).unref())]);
        await thread.terminate();
        release();
      })()),
  };
}
