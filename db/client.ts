/**
 * The one database code path: a `pg` pool wrapped by Drizzle. The embedded PGlite socket
 * and a real Postgres are reached the same way, by connection string.
 */
import { randomBytes } from 'node:crypto';
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

/** Whether `p` settles within `ms`. */
function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  return Promise.race([
    p.then(
      () => true,
      () => true,
    ),
    new Promise<false>((r) => setTimeout(() => r(false), ms).unref()),
  ]);
}

/**
 * End the pool. A client still checked out (its holder awaiting a server that went away) would
 * hold `pool.end()` for ever: after the grace period its socket is destroyed, which fails what
 * it awaits, and the close returns in any case a moment later.
 */
async function closePool(pool: pg.Pool): Promise<void> {
  const ended = pool.end();
  if (await within(ended, closeGraceMs)) return;
  const held =
    (pool as unknown as { _clients?: Array<pg.Client & { connection?: { stream?: { destroy(): void } } }> })._clients ??
    [];
  process.stderr.write(
    `db pool: ${held.length} client(s) still in use ${closeGraceMs} ms after close; closing their connections\n`,
  );
  for (const c of held) {
    c.end().catch(() => undefined);
    c.connection?.stream?.destroy();
  }
  await within(ended, 2_000);
}

/** Names this process's clients give their statements on a shared session (below). */
const processTag = randomBytes(3).toString('hex');
let clientsOpened = 0;

/**
 * A pool client that keeps named statements (db/prepared.ts: parsed and planned once per
 * connection, then only bound and run). On a real Postgres each connection is a session of its
 * own. PGlite, behind its socket, serves every connection from one session: a name prepared by
 * one client would collide with the same name from the next ("prepared statement … already
 * exists"), so there each client adds a tag of its own to the names it prepares and drops them
 * when it closes. The server is asked what it is once, when the connection opens.
 */
class SessionAwareClient extends pg.Client {
  private sharedSession = true;
  /** The suffix of this client's statement names on a shared session. */
  private readonly tag = `_${processTag}${(++clientsOpened).toString(36)}`;
  /** Statements sent on this connection and not yet answered. */
  private unanswered = 0;
  /** Told of a statement sent while this connection still runs another (see `query`). */
  onOverlap: (sql: string) => void = reportOverlap;

  override connect(): Promise<pg.Client>;
  override connect(callback: (err: Error | null, client?: pg.Client) => void): void;
  override connect(callback?: (err: Error | null, client?: pg.Client) => void): Promise<pg.Client> | void {
    const ready = super
      .connect()
      .then(() => super.query<{ v: string }>('select version() as v'))
      .then((r) => {
        this.sharedSession = /pglite/i.test(r.rows[0]?.v ?? '');
        return this;
      })
      .catch((err: Error) => {
        // The pool does not end a client that failed to connect: a socket left open here would leak.
        this.end().catch(() => undefined);
        throw err;
      });
    if (!callback) return ready;
    ready.then((c) => callback(null, c), callback);
  }

  /**
   * On a shared session, drop the statements this client prepared before it goes: the session
   * outlives it, and would keep them (and their plans) for ever.
   */
  override end(): Promise<void>;
  override end(callback: (err: Error) => void): void;
  override end(callback?: (err: Error) => void): Promise<void> | void {
    const parsed = (this as unknown as { connection: { parsedStatements: Record<string, string> } }).connection
      .parsedStatements;
    const names = this.sharedSession ? Object.keys(parsed) : [];
    if (names.length === 0) return callback ? super.end(callback) : super.end();
    for (const n of names) delete parsed[n];
    const dropped = within(super.query(names.map((n) => `deallocate "${n}"`).join('; ')), 1_000);
    const ended = dropped.then(() => super.end());
    if (!callback) return ended;
    ended.then(() => callback(undefined as unknown as Error), callback);
  }

  override query(...args: unknown[]): never {
    const [config] = args;
    // A connection runs one statement at a time; pg queues the rest (pg 9 will refuse them). A
    // statement sent before the last one answered is almost always `Promise.all` over a
    // transaction's handle: nothing runs in parallel there, so the code should say so. The
    // count is ours: pg's own queue fields are deprecated, and reading them printed a warning in
    // every process.
    if (this.unanswered > 0) this.onOverlap(statementText(config));
    if (this.sharedSession && config && typeof config === 'object' && 'name' in config && !('submit' in config)) {
      const { name } = config as { name?: string };
      if (name) args[0] = { ...config, name: name + this.tag };
    }
    return this.counted(args);
  }

  /**
   * Send a statement, counting it until it answers. The count drops before the caller hears
   * the answer, so a statement sent from that answer's continuation is not an overlap. A
   * submittable (a cursor, a stream) is sent uncounted: its end is its own events.
   */
  private counted(args: unknown[]): never {
    const send = super.query as (...a: unknown[]) => never;
    const last = args.length - 1;
    const callback = args[last];
    if (typeof callback === 'function') {
      args[last] = (...reply: unknown[]) => {
        this.unanswered--;
        return (callback as (...r: unknown[]) => unknown)(...reply);
      };
      const sent = send.apply(this, args);
      this.unanswered++;
      return sent;
    }
    const sent: unknown = send.apply(this, args);
    if (typeof (sent as { then?: unknown } | undefined)?.then === 'function') {
      this.unanswered++;
      const answered = () => void this.unanswered--;
      (sent as Promise<unknown>).then(answered, answered);
    }
    return sent as never;
  }
}

function statementText(config: unknown): string {
  const text =
    typeof config === 'string'
      ? config
      : config && typeof config === 'object' && 'text' in config
        ? String(config.text)
        : '(no text)';
  return text.replace(/\s+/g, ' ').slice(0, 200);
}

const overlapsReported = new Set<string>();

/** Say once per statement that it was sent on a busy connection (where, the text tells). */
function reportOverlap(sql: string): void {
  if (overlapsReported.has(sql)) return;
  overlapsReported.add(sql);
  process.stderr.write(
    `db: a statement sent while its connection still ran another (Promise.all inside a transaction?): ${sql}\n`,
  );
}

function toldOfOverlaps(listener: (sql: string) => void): typeof SessionAwareClient {
  return class extends SessionAwareClient {
    override onOverlap = listener;
  };
}

/**
 * Open a pool and a Drizzle handle over it. `onOverlap` is told of each statement sent on a
 * connection still running another (default: one stderr line per statement text).
 */
export function createDb(
  connectionString: string,
  opts: { max?: number; onOverlap?: (sql: string) => void } = {},
): DbHandle {
  const Client = opts.onOverlap ? toldOfOverlaps(opts.onOverlap) : SessionAwareClient;
  const pool = new pg.Pool({ connectionString, max: opts.max ?? 10, idleTimeoutMillis: 30_000, Client });
  // An idle client losing its socket (server restart) must not crash the process.
  pool.on('error', (err) => process.stderr.write(`db pool: ${err.message}\n`));
  // Nor one checked out between two statements (inside a transaction): the pool listens only to
  // its idle clients. Its holder's next statement fails, and the activity is retried.
  pool.on('connect', (client) => client.on('error', (err) => process.stderr.write(`db client: ${err.message}\n`)));
  const db = drizzle(pool, { schema });
  return { db, pool, close: () => closePool(pool) };
}
