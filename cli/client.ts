/** A Temporal client for CLI commands: the same address resolution as the workers. */
import { Client, Connection } from '@temporalio/client';
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
