/**
 * drizzle-kit configuration. `npm run db:generate` (drizzle-kit generate) needs no database;
 * `drizzle-kit push/migrate/studio` read DATABASE_URL through env.ts.
 */
import { defineConfig } from 'drizzle-kit';
import { parseEnv } from './env.js';

const env = parseEnv();

export default defineConfig({
  dialect: 'postgresql',
  schema: './db/schema/index.ts',
  out: './db/migrations',
  // Must match db/migrate.ts so drizzle-kit and the app read the same journal table.
  migrations: { schema: 'drizzle', table: '__migrations' },
  dbCredentials: { url: (env.success ? env.data.DATABASE_URL : undefined) ?? '' },
  strict: true,
  verbose: true,
});
