/**
 * Runs a set of queue workers in this process until a signal, then stops them in order:
 * workers drain → Temporal connection → the stack's children (dev server, PGlite).
 */
import { DefaultLogger, NativeConnection, Runtime, type LogLevel, type Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { Env, TaskQueueName } from '../env.js';
import type { Stack } from '../runtime/stack.js';
import { createQueueWorker } from './queues.js';

let runtimeInstalled = false;

/** Install the SDK runtime once: our log level, and no SDK signal handlers (we stop in order ourselves). */
export function installRuntime(level: LogLevel): void {
  if (runtimeInstalled) return;
  Runtime.install({ logger: new DefaultLogger(level), shutdownSignals: [] });
  runtimeInstalled = true;
}

export interface RunningWorkers {
  connection: NativeConnection;
  workers: Map<TaskQueueName, Worker>;
  /** Resolves when every worker has stopped. */
  done: Promise<void>;
  shutdown(): Promise<void>;
}

/** Create and start one worker per queue. */
export async function startWorkers(
  env: Env,
  stack: Stack,
  queues: readonly TaskQueueName[],
  opts: { workflowBundle?: WorkflowBundleWithSourceMap } = {},
): Promise<RunningWorkers> {
  const connection = await NativeConnection.connect(stack.temporal.connection);
  const workers = new Map<TaskQueueName, Worker>();
  try {
    for (const queue of queues) {
      workers.set(
        queue,
        await createQueueWorker(queue, {
          connection,
          namespace: stack.temporal.namespace,
          db: stack.db.db,
          dockerHost: env.DOCKER_HOST,
          workflowBundle: opts.workflowBundle,
        }),
      );
    }
  } catch (err) {
    await connection.close();
    throw err;
  }
  const done = Promise.all([...workers.values()].map((w) => w.run())).then(() => undefined);
  let stopping: Promise<void> | undefined;
  const shutdown = () =>
    (stopping ??= (async () => {
      for (const w of workers.values()) if (w.getState() === 'RUNNING') w.shutdown();
      await done.catch(() => undefined);
      await connection.close();
    })());
  return { connection, workers, done, shutdown };
}

/** Calls `stop` once on SIGINT/SIGTERM/SIGHUP; a second Ctrl-C forces exit. */
export function onStopSignal(stop: (signal: NodeJS.Signals) => Promise<void>): void {
  let stopping = false;
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(sig, () => {
      if (stopping) {
        process.stderr.write('\nforced exit\n');
        process.exit(130);
      }
      stopping = true;
      stop(sig).then(
        () => process.exit(0),
        (err: unknown) => {
          process.stderr.write(`stop failed: ${String(err)}\n`);
          process.exit(1);
        },
      );
    });
  }
}
