/**
 * Applies the drizzle-kit migrations in db/migrations/. Run on every start (idempotent);
 * `npm run db:migrate` runs it alone against DATABASE_URL.
 */
import { fileURLToPath } from 'node:url';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import { createDb, type Db } from './client.js';

export const migrationsFolder = fileURLToPath(new URL('./migrations', import.meta.url));

/** Bring the database at `db` up to the latest migration. */
export async function runMigrations(db: Db): Promise<void> {
  await migrate(db, { migrationsFolder, migrationsSchema: 'drizzle', migrationsTable: '__migrations' });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const url = process.env.DATABASE_URL;
  if (!url) {
    process.stderr.write('db:migrate needs DATABASE_URL (the embedded stack migrates by itself on npm start)\n');
    process.exit(2);
  }
  const handle = createDb(url, { max: 1 });
  await runMigrations(handle.db);
  await handle.close();
  process.stdout.write('migrations applied\n');
}
