/**
 * Closing the database pool never hangs on a client still in use: a holder awaiting a statement
 * that does not finish (here a long sleep; in the outage tests, a server that went away) gets its
 * connection closed after the grace period, its statement fails, and the close returns.
 */
import { expect, it } from 'vitest';
import { createDb } from '../../db/client.js';
import { freshPostgresDatabase } from '../helpers/env.js';

it('closes a pool whose client is still in use: the holder fails, the close returns', async () => {
  const fresh = await freshPostgresDatabase('mindloop_pool_close');
  try {
    const h = createDb(fresh.url, { max: 2 });
    const client = await h.pool.connect();
    const stuck = client.query('select pg_sleep(60)').then(
      () => 'finished',
      (err: Error) => `failed: ${err.message}`,
    );
    await h.close();
    expect(await stuck).toMatch(/^failed: /);
  } finally {
    await fresh.drop();
  }
}, 30_000);
