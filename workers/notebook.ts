/**
 * The notebook in the worker process (`npm start`): the web page on MINDLOOP_NOTEBOOK_HOST:PORT,
 * reading the stack's database and talking to its Temporal. Its live feed comes from the bus when
 * the process has one (every worker on the root), else from this process's worker, which the
 * caller gives `feedSink(feed)` as its event sink. A notebook that cannot start (the port taken,
 * a non-local bind without a token) is one line in the summary: the workers run without it.
 */
import { Client, Connection } from '@temporalio/client';
import { secretSource, type Env } from '../env.js';
import type { Bus } from '../runtime/bus.js';
import { feedFromBus, startNotebook, type TickFeed } from '../runtime/notebook/index.js';
import { explainDbError } from '../runtime/operator.js';
import type { Stack } from '../runtime/stack.js';

export interface WorkerNotebook {
  /** One line for the start-up summary: where the page is, or why there is none. */
  summary: string;
  stop(): Promise<void>;
}

const none = (summary: string): WorkerNotebook => ({ summary, stop: async () => undefined });

/** Serve the notebook for this process; never throws (a failure is its summary). */
export async function startWorkerNotebook(
  env: Env,
  stack: Stack,
  feed: TickFeed,
  bus: Bus | undefined,
  log: (line: string) => void,
): Promise<WorkerNotebook> {
  if (env.MINDLOOP_NOTEBOOK_PORT === 'off') return none('off (MINDLOOP_NOTEBOOK_PORT=off)');
  const fromBus = bus ? feedFromBus(feed, bus) : undefined;
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect(stack.temporal.connection);
    const client = new Client({ connection, namespace: stack.temporal.namespace });
    const token = env.MINDLOOP_NOTEBOOK_TOKEN;
    const server = await startNotebook({
      db: stack.db.db,
      client,
      temporal: { address: stack.temporal.address, namespace: stack.temporal.namespace },
      feed,
      feedSource: bus ? 'bus' : 'in-process',
      host: env.MINDLOOP_NOTEBOOK_HOST,
      port: env.MINDLOOP_NOTEBOOK_PORT,
      ...(token ? { token } : {}),
      explainDbError: (err) => explainDbError(err, env),
      log,
      models: { env: secretSource(), toolsDir: env.MINDLOOP_TOOLS_DIR },
    });
    const open = connection;
    return {
      summary: `${server.url}${token ? '?token=$MINDLOOP_NOTEBOOK_TOKEN (once; a cookie keeps it)' : ''} — agents, live ticks, inbox; live from ${bus ? 'the bus' : 'this process'}`,
      async stop() {
        await server.close();
        fromBus?.stop();
        await open.close();
      },
    };
  } catch (err) {
    fromBus?.stop();
    await connection?.close();
    log(`notebook not started: ${(err as Error).message}`);
    return none(`not started: ${(err as Error).message}`);
  }
}
