/**
 * `npm start`: the all-in-one laptop runner. Starts the embedded stack (or attaches to the
 * Temporal cluster / Postgres named in the environment), runs one worker per task queue in this
 * process, starts (or resumes) the demo agent's loop, prints where everything is, and stops it all on Ctrl-C.
 * A second start reuses `.data/`: Temporal resumes whatever workflows were running.
 */
import { Client, Connection } from '@temporalio/client';
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadEnvOrExit } from '../env.js';
import { startStack } from '../runtime/stack.js';
import { checkStartPorts, StartRefused } from '../runtime/start-ports.js';
import { startAgentLoop } from '../runtime/workflow-starts.js';
import { resolveLocalModel } from '../runtime/tools.js';
import { installRuntime, onStopSignal, startWorkers } from './run.js';
import { applySchedulesLogged } from './schedules.js';
import { startWorkerBus } from './bus.js';
import { startWorkerNotebook, type WorkerNotebook } from './notebook.js';
import { TickFeed, feedSink } from '../runtime/notebook/index.js';

const env = loadEnvOrExit();
const log = (line: string) => process.stdout.write(`[mindloop] ${line}\n`);
// A port or data dir another process holds is said in one line, before anything starts.
const refusal = await checkStartPorts(env, { root: realpathSync(fileURLToPath(new URL('..', import.meta.url))) });
if (refusal) refuse(refusal);
installRuntime(env.LOG_LEVEL);

log('starting the embedded stack…');
const stack = await startStack({ env, log }).catch((err: unknown) =>
  err instanceof StartRefused ? refuse(`mindloop: cannot start: ${err.message}`) : Promise.reject(err),
);
// The bus: NATS_URL, the NATS answering locally, or a nats-server of our own (said in the summary).
const busStart = await startWorkerBus(env, stack.temporal, log, { embedded: true });
const workerBus = 'off' in busStart ? undefined : busStart;
// The notebook's live feed: the bus carries every worker's ticks; without one, this worker tells it directly.
const feed = new TickFeed(log);
const running = await startWorkers(env, stack, env.MINDLOOP_QUEUES, { events: workerBus?.events ?? feedSink(feed) });
let notebook: WorkerNotebook | undefined;
let shuttingDown = false;
onStopSignal(async (sig) => {
  shuttingDown = true;
  log(`${sig}: stopping workers, Temporal and Postgres…`);
  await notebook?.stop();
  await workerBus?.stop();
  await running.shutdown();
  await stack.stop();
  log('stopped cleanly; state is kept in ' + env.MINDLOOP_DATA_DIR);
});

// The demo agent: started once, then found again on every later start (its loop resumes).
const connection = await Connection.connect(stack.temporal.connection);
const client = new Client({ connection, namespace: stack.temporal.namespace });
try {
  const handle = await startAgentLoop(client, { agentId: 'demo', name: 'Demo' });
  log(`demo agent running as ${handle.workflowId}`);
} catch (err) {
  log(`demo agent not started: ${(err as Error).message}`);
}
// Maintenance schedules (decay, abstracts, pruning, cleanup): created once, converged on later starts.
await applySchedulesLogged(client, log);
await connection.close();
notebook = await startWorkerNotebook(env, stack, feed, workerBus?.bus, log);

const model = resolveLocalModel(env.MINDLOOP_TOOLS_DIR);
const speech = running.speech;
// The speech engine (Python) polls its queue as our child; a crash leaves speech jobs waiting, not failing.
if (speech.state === 'running')
  void speech.worker.exited.then(
    (code) =>
      !shuttingDown &&
      log(
        `the speech worker exited (${code ?? 'signal'}); speech jobs wait until one polls again (see ${speech.worker.logFile})`,
      ),
  );
const speechRow =
  speech.state === 'running'
    ? `${speech.worker.queue} — Python speech engine, pid ${speech.worker.pid}, log ${speech.worker.logFile}`
    : speech.state === 'off'
      ? 'off (MINDLOOP_QUEUES names no speech queue)'
      : `${speech.state === 'missing' ? 'not installed' : 'not started'}: ${speech.reason}`;
const rows: Array<[string, string]> = [
  [
    'Temporal',
    `${stack.temporal.address} (namespace ${stack.temporal.namespace})${stack.temporal.embedded ? ', embedded dev server' : ''}`,
  ],
  ['Temporal UI', stack.temporal.embedded?.uiUrl ?? '(the cluster’s own UI)'],
  [
    'Postgres',
    stack.database.embedded
      ? `${stack.database.url} (PGlite, ${stack.database.embedded.dataDir})`
      : redact(stack.database.url),
  ],
  ['Task queues', [...running.workers.keys(), ...(speech.state === 'running' ? [speech.worker.queue] : [])].join(', ')],
  ['Speech', speechRow],
  ['Bus', 'off' in busStart ? `${busStart.off} (\`npx mindloop doctor\`)` : busStart.summary],
  ['Notebook', notebook.summary],
  ['Local model', model ? `SmolLM2-135M-Instruct (${model})` : 'not installed (npm run setup)'],
  ['Demo agent', 'agent/demo — `npx mindloop note demo "hello"`, `npx mindloop status demo`'],
  ['Data', stack.temporal.embedded || stack.database.embedded ? env.MINDLOOP_DATA_DIR : '(external services)'],
];
const width = Math.max(...rows.map(([k]) => k.length));
process.stdout.write(`\n${rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`).join('\n')}\n\n`);
log('running — Ctrl-C stops everything; `npx mindloop --help` for the CLI');
await running.done.catch((err: unknown) => log(`a worker failed: ${String(err)}`));
shuttingDown = true;
await notebook?.stop();
await workerBus?.stop();
await running.shutdown();
await stack.stop();

function refuse(line: string): never {
  process.stderr.write(`${line}\n`);
  process.exit(1);
}

function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]+@/, '//$1:***@');
}
