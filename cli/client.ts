/** Temporal and Postgres for CLI commands: the same address resolution as the workers. */
import { Client, WorkflowUpdateFailedError, type Connection } from '@temporalio/client';
import type { Db } from '../db/client.js';
import { loadEnvOrExit } from '../env.js';
import { connectTemporal, databaseUrl, explainDbError } from '../runtime/operator.js';

/** Connect, run `fn`, close. A Temporal that does not answer is a one-line error with the fix. */
export async function withClient<T>(fn: (client: Client) => Promise<T>): Promise<T> {
  const env = loadEnvOrExit();
  const connection: Connection = await connectTemporal(env);
  try {
    return await fn(new Client({ connection, namespace: env.TEMPORAL_NAMESPACE }));
  } finally {
    await connection.close();
  }
}

/**
 * A Temporal client for this environment's namespace, on a new connection. Commands reach
 * `@temporalio/client` through this module: the CLI's build loads it only when a command needs it.
 */
export async function temporalClient(): Promise<Client> {
  const env = loadEnvOrExit();
  return new Client({ connection: await connectTemporal(env), namespace: env.TEMPORAL_NAMESPACE });
}

/** An update the workflow refused, as the reason it gave; any other error as it is. */
export function updateRefusal(err: unknown): unknown {
  return err instanceof WorkflowUpdateFailedError ? new Error(err.cause?.message ?? err.message) : err;
}

/** Open the database for one command, run `fn`, close. */
export async function withDb<T>(fn: (db: Db) => Promise<T>): Promise<T> {
  const env = loadEnvOrExit();
  // The database client (pg and the whole schema) is loaded by the commands that use it only.
  const { createDb } = await import('../db/client.js');
  const h = createDb(databaseUrl(env), { max: 1 });
  try {
    return await fn(h.db);
  } catch (err) {
    throw explainDbError(err, env);
  } finally {
    await h.close();
  }
}

/** A clear error unless the agent exists. */
export async function requireAgent(db: Db, agentId: string): Promise<void> {
  const [{ eq }, { agents }] = await Promise.all([import('drizzle-orm'), import('../db/schema/agents.js')]);
  const [known] = await db.select({ id: agents.id }).from(agents).where(eq(agents.id, agentId));
  if (!known) throw new Error(`no agent '${agentId}' (\`mindloop status <agent>\` or the agents table lists them)`);
}
