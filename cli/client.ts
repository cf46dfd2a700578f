/** Temporal and Postgres for CLI commands: the same address resolution as the workers. */
import { Client, Connection } from '@temporalio/client';
import { eq } from 'drizzle-orm';
import { createDb, type Db } from '../db/client.js';
import { agents } from '../db/schema/index.js';
import { loadEnvOrExit } from '../env.js';
import { temporalConnectionOptions } from '../runtime/stack.js';

/** Connect, run `fn`, close. A Temporal that does not answer is a one-line error with the fix. */
export async function withClient<T>(fn: (client: Client) => Promise<T>): Promise<T> {
  const env = loadEnvOrExit();
  const address = env.TEMPORAL_ADDRESS ?? `127.0.0.1:${env.TEMPORAL_PORT}`;
  let connection: Connection;
  try {
    connection = await Connection.connect({ ...temporalConnectionOptions(env, address), connectTimeout: 3000 });
  } catch (err) {
    throw new Error(`cannot reach Temporal at ${address} (${(err as Error).message}); is \`npm start\` running, or TEMPORAL_ADDRESS set?`);
  }
  try {
    return await fn(new Client({ connection, namespace: env.TEMPORAL_NAMESPACE }));
  } finally {
    await connection.close();
  }
}

/** Open the database for one command, run `fn`, close. */
export async function withDb<T>(fn: (db: Db) => Promise<T>): Promise<T> {
  const env = loadEnvOrExit();
  const url = env.DATABASE_URL ?? `postgres://postgres@127.0.0.1:${env.PGLITE_PORT}/postgres?sslmode=disable`;
  const h = createDb(url, { max: 1 });
  try {
    return await fn(h.db);
  } catch (err) {
    const code = (err as { code?: string }).code ?? ((err as { cause?: { code?: string } }).cause?.code);
    if (code === 'ECONNREFUSED') throw new Error(`cannot reach Postgres (${env.DATABASE_URL ? 'DATABASE_URL' : `embedded PGlite on :${env.PGLITE_PORT}`}); is \`npm start\` running, or DATABASE_URL set?`);
    if (code === '23503') throw new Error(`unknown agent: ${(err as { detail?: string }).detail ?? (err as Error).message}`);
    if (code === '42P01') throw new Error('tables are missing: run the migrations (`npm start` applies them, or `npm run db:migrate`)');
    throw err;
  } finally {
    await h.close();
  }
}

/** A clear error unless the agent exists. */
export async function requireAgent(db: Db, agentId: string): Promise<void> {
  const [known] = await db.select({ id: agents.id }).from(agents).where(eq(agents.id, agentId));
  if (!known) throw new Error(`no agent '${agentId}' (\`mindloop status <agent>\` or the agents table lists them)`);
}
