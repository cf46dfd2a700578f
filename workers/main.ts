/**
 * A worker process for chosen task queues, attached to a running stack:
 *   npm run worker -- --queue sandbox [--queue speech]
 * A speech queue (`speech`, `speech-gpu`, `speech-cpu`) starts the Python speech engine as a
 * child polling it (runtime/speech-worker.ts); asked for and not running, it is an error.
 * It starts no servers: Temporal is TEMPORAL_ADDRESS (default the local dev server) and
 * Postgres is DATABASE_URL (default the PGlite socket of a running `npm start`).
 * A worker that polls `mindloop` applies the maintenance schedules at start (idempotent: a
 * paused schedule stays paused); `--no-schedules` leaves them alone.
 */
import { parseArgs } from 'node:util';
import { loadEnvOrExit, envSchema, type TaskQueueName } from '../env.js';
import { startStack } from '../runtime/stack.js';
import { StartRefused } from '../runtime/start-ports.js';
import { installRuntime, onStopSignal, startWorkers } from './run.js';
import { applySchedulesAtStart } from './schedules.js';
import { startWorkerBus } from './bus.js';

const usage =
  'usage: npm run worker -- [--queue mindloop|sandbox|speech|speech-gpu|speech-cpu]... [--no-schedules] (default queues: MINDLOOP_QUEUES)';

function parseCli(argv: string[], fallback: TaskQueueName[]): { queues: TaskQueueName[]; noSchedules: boolean } {
  let values;
  try {
    values = parseArgs({
      args: argv,
      options: {
        queue: { type: 'string', multiple: true },
        'no-schedules': { type: 'boolean' },
        help: { type: 'boolean' },
      },
      strict: true,
    }).values;
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${usage}\n`);
    process.exit(2);
  }
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  const noSchedules = values['no-schedules'] ?? false;
  if (!values.queue) return { queues: fallback, noSchedules };
  const parsed = envSchema.shape.MINDLOOP_QUEUES.safeParse(values.queue.join(','));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    process.stderr.write(
      `${issue?.code === 'custom' ? `--queue ${values.queue.join(',')}: ${issue.message}` : `unknown queue in --queue ${values.queue.join(',')}`}\n${usage}\n`,
    );
    process.exit(2);
  }
  return { queues: parsed.data, noSchedules };
}

const env = loadEnvOrExit();
const { queues, noSchedules } = parseCli(process.argv.slice(2), env.MINDLOOP_QUEUES);
installRuntime(env.LOG_LEVEL);
const stack = await startStack({ env, embedded: false, log: (l) => process.stdout.write(`${l}\n`) }).catch(
  (err: unknown) => {
    if (!(err instanceof StartRefused)) throw err;
    process.stderr.write(`worker: cannot start: ${err.message}\n`);
    process.exit(1);
  },
);
// The bus (NATS_URL, or the one answering locally) goes with the workflows' queue: heartbeats, agent events and commands.
const log = (l: string) => process.stdout.write(`${l}\n`);
const busStart = queues.includes('mindloop') ? await startWorkerBus(env, stack.temporal, log) : undefined;
const workerBus = busStart && !('off' in busStart) ? busStart : undefined;
const running = await startWorkers(env, stack, queues, { events: workerBus?.events });
await applySchedulesAtStart(stack.temporal, {
  queues,
  disabled: noSchedules,
  log: (l) => process.stdout.write(`${l}\n`),
});
if (busStart) log(`bus: ${'off' in busStart ? busStart.off : busStart.summary}`);
const speech = running.speech;
if (speech.state === 'missing' || speech.state === 'failed') {
  process.stderr.write(`speech (${speech.setting}): ${speech.reason}\n`);
  await workerBus?.stop();
  await running.shutdown();
  await stack.stop();
  process.exit(1);
}
const polled = [
  ...running.workers.keys(),
  ...(speech.state === 'running'
    ? [`${speech.worker.queue} (speech engine, pid ${speech.worker.pid}, log ${speech.worker.logFile})`]
    : []),
];
process.stdout.write(
  `worker polling ${polled.join(', ')} on ${stack.temporal.address} (${stack.temporal.namespace}); Ctrl-C stops it\n`,
);
onStopSignal(async () => {
  await workerBus?.stop();
  await running.shutdown();
  await stack.stop();
});
await running.done;
