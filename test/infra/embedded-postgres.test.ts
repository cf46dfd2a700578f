/**
 * The embedded PGlite runs in a thread of its own: a long statement does not stop the process's
 * main thread (where the worker's activities run). A port that is taken gets the fix in its
 * error, and leaves the data dir free for the next start, which sees the rows of the last.
 */
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';
import { startEmbeddedPostgres } from '../../runtime/embedded-postgres.js';
import { tempDir } from '../helpers/env.js';

const data = tempDir('embedded-pg');
afterAll(() => data.remove());

async function query<T extends pg.QueryResultRow>(url: string, text: string): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<T>(text)).rows;
  } finally {
    await c.end();
  }
}

it('keeps the main thread free while it runs a long statement', async () => {
  const db = await startEmbeddedPostgres({ dataDir: 'memory://', port: 0 });
  try {
    let beats = 0;
    const timer = setInterval(() => beats++, 10);
    const t0 = performance.now();
    const [row] = await query<{ n: string }>(
      db.url,
      'select count(*) as n from generate_series(1, 3000000) g join generate_series(1, 1) h on true',
    );
    const ms = performance.now() - t0;
    clearInterval(timer);
    expect(row?.n).toBe('3000000');
    // In the main thread the statement would have held every timer until it ended.
    expect(ms).toBeGreaterThan(200);
    expect(beats).toBeGreaterThan((ms / 10) * 0.5);
  } finally {
    await db.stop();
  }
}, 60_000);

it('says how to fix a port that is taken, and leaves the data dir to the next start', async () => {
  const dir = join(data.path, 'pglite');
  const squatter: Server = createServer();
  await new Promise<void>((r) => squatter.listen(0, '127.0.0.1', r));
  const taken = (squatter.address() as { port: number }).port;
  try {
    await expect(startEmbeddedPostgres({ dataDir: dir, port: taken })).rejects.toThrow(
      `port ${taken} is taken: set PGLITE_PORT to another port, or DATABASE_URL to use a real Postgres`,
    );
  } finally {
    squatter.close();
  }
  const first = await startEmbeddedPostgres({ dataDir: dir, port: 0 });
  await query(first.url, "create table kept (v text); insert into kept values ('still here')");
  await first.stop();
  const second = await startEmbeddedPostgres({ dataDir: dir, port: 0 });
  try {
    expect(await query<{ v: string }>(second.url, 'select v from kept')).toEqual([{ v: 'still here' }]);
  } finally {
    await second.stop();
  }
}, 120_000);
