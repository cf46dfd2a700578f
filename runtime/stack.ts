/**
 * Brings up what the workers need: Temporal (the embedded dev server unless TEMPORAL_ADDRESS
 * is set) and Postgres (embedded PGlite unless DATABASE_URL is set), with migrations applied.
 */
import { join, resolve } from 'node:path';
import type { Env } from '../env.js';
import { createDb, type DbHandle } from '../db/client.js';
import { runMigrations } from '../db/migrate.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './embedded-postgres.js';
import { startDevServer, waitForTemporal, type DevServer } from './temporal-dev-server.js';
import { temporalConnectionOptions, type TemporalConnectionConfig } from './temporal-connection.js';
import { installHint, resolveTool } from './tools.js';
import { StartRefused } from './start-ports.js';

interface StackOptions {
  env: Env;
  /** Start the embedded services where the env names none (npm start, tests). Default true. */
  embedded?: boolean;
  /** The dev server's Web UI; off in tests. */
  ui?: boolean;
  log?: (line: string) => void;
}

export interface Stack {
  temporal: { address: string; namespace: string; connection: TemporalConnectionConfig; embedded?: DevServer };
  database: { url: string; embedded?: EmbeddedPostgres };
  db: DbHandle;
  stop(): Promise<void>;
}

/** Start (or connect to) Temporal and Postgres, migrate, and return handles. */
export async function startStack(opts: StackOptions): Promise<Stack> {
  const { env } = opts;
  const embedded = opts.embedded ?? true;
  const log = opts.log ?? (() => {});
  const dataDir = resolve(env.MINDLOOP_DATA_DIR);
  const cleanups: Array<() => Promise<void>> = [];
  let stopping: Promise<void> | undefined;
  // In reverse order of start; callable many times (signal handler and normal exit both call it).
  const stop = () =>
    (stopping ??= (async () => {
      for (const fn of cleanups.reverse()) {
        try {
          await fn();
        } catch (err) {
          log(`stop: ${(err as Error).message}`);
        }
      }
    })());

  try {
    // Postgres first: it is quick, and workflows resumed by Temporal need it at once.
    let pgEmbedded: EmbeddedPostgres | undefined;
    let databaseUrl = env.DATABASE_URL;
    if (!databaseUrl) {
      if (!embedded) databaseUrl = `postgres://postgres@127.0.0.1:${env.PGLITE_PORT}/postgres?sslmode=disable`;
      else {
        pgEmbedded = await startEmbeddedPostgres({ dataDir: join(dataDir, 'pglite'), port: env.PGLITE_PORT });
        cleanups.push(() => pgEmbedded!.stop());
        databaseUrl = pgEmbedded.url;
        log(`postgres: embedded PGlite at ${pgEmbedded.dataDir}, served on ${databaseUrl}`);
      }
    }
    // pglite-socket multiplexes clients message by message: two clients' extended-protocol
    // messages (Parse/Bind/Execute/Sync) can interleave and clobber each other's unnamed
    // statement. One connection per process keeps the embedded database correct.
    const db = createDb(databaseUrl, {
      max: pgEmbedded || (!env.DATABASE_URL && !embedded) ? 1 : env.DATABASE_POOL_MAX,
    });
    cleanups.push(() => db.close());
    await runMigrations(db.pool).catch((err: NodeJS.ErrnoException) => {
      // Nothing listening, or no such host: a set-up to fix, said in one line.
      if (!['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ETIMEDOUT'].includes(err.code ?? '')) throw err;
      throw new StartRefused(
        `no Postgres answers at ${withoutPassword(databaseUrl!)} (${err.code}): ${
          env.DATABASE_URL
            ? 'start it, or correct DATABASE_URL'
            : 'start `npm start` (its embedded database) or set DATABASE_URL'
        }`,
      );
    });
    log('postgres: migrations applied');

    let devServer: DevServer | undefined;
    let address = env.TEMPORAL_ADDRESS;
    if (!address) {
      if (!embedded) address = `127.0.0.1:${env.TEMPORAL_PORT}`;
      else {
        const binary = resolveTool('temporal', {
          toolsDir: env.MINDLOOP_TOOLS_DIR,
          envOverrides: { temporal: env.TEMPORAL_CLI_PATH },
        });
        if (!binary)
          throw new StartRefused(`the Temporal CLI is not installed: ${installHint}, or set TEMPORAL_ADDRESS`);
        devServer = await startDevServer({
          binary,
          dataDir,
          port: env.TEMPORAL_PORT,
          uiPort: env.TEMPORAL_UI_PORT,
          namespace: env.TEMPORAL_NAMESPACE,
          ui: opts.ui ?? true,
        });
        cleanups.push(() => devServer!.stop());
        address = devServer.address;
        log(`temporal: dev server at ${address}, history in ${devServer.dbFile}`);
      }
    }
    if (!devServer) await waitForTemporal(address, 30_000);

    return {
      temporal: {
        address,
        namespace: env.TEMPORAL_NAMESPACE,
        connection: temporalConnectionOptions(env, address),
        embedded: devServer,
      },
      database: { url: databaseUrl, embedded: pgEmbedded },
      db,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** A connection string fit to print: its password replaced by `***`. */
function withoutPassword(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(DATABASE_URL)';
  }
}
