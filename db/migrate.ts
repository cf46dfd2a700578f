/**
 * Applies the drizzle-kit migrations in db/migrations/. Run on every start (idempotent);
 * `npm run db:migrate` runs it alone against DATABASE_URL.
 */
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import type pg from 'pg';
import { createDb } from './client.js';

export const migrationsFolder = fileURLToPath(new URL('./migrations', import.meta.url));

// Any constant shared by every Mindloop process: several workers starting at once take turns.
const migrationLockKey = 0x6d696e64; // 'mind'

/** Bring the database up to the latest migration, under an advisory lock on one connection. */
export async function runMigrations(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('select pg_advisory_lock($1)', [migrationLockKey]);
    try {
      await migrate(drizzle(client), {
        migrationsFolder,
        migrationsSchema: 'drizzle',
        migrationsTable: '__migrations',
      });
    } finally {
      await client.query('select pg_advisory_unlock($1)', [migrationLockKey]);
    }
  } finally {
    client.release();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const url = process.env.DATABASE_URL;
  if (!url) {
    process.stderr.write('db:migrate needs DATABASE_URL (the embedded stack migrates by itself on npm start)\n');
    process.exit(2);
  }
  const handle = createDb(url, { max: 1 });
  await runMigrations(handle.pool);
  await handle.close();
  process.stdout.write('migrations applied\n');
}
