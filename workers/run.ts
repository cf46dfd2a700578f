/**
 * Runs a set of queue workers in this process until a signal, then stops them in order:
 * the speech engine and the workers drain → Temporal connection → the stack's children (dev
 * server, PGlite). `mindloop` and `sandbox` are TypeScript workers here; a speech queue is the
 * Python speech engine, started as a child process (runtime/speech-worker.ts).
 */
import {
  DefaultLogger,
  NativeConnection,
  Runtime,
  type LogEntry,
  type LogLevel,
  type Worker,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { readFileSync } from 'node:fs';
import { secretSource, type Env, type TaskQueueName } from '../env.js';
import { parseDangerConfig, type DangerRule } from '../core/danger-zones.js';
import type { Stack } from '../runtime/stack.js';
import type { AgentEventSink } from '../activities/agent-events.js';
import { disposeLocalModels } from '../activities/llm/index.js';
import { createMcpPool } from '../activities/mcp/index.js';
import { createQueueWorker, tsQueues, type TsQueueName } from './queues.js';
import {
  findSpeechEngine,
  isSpeechQueueSetting,
  speechInstallHint,
  startSpeechWorker,
  type SpeechQueueSetting,
  type SpeechWorker,
} from '../runtime/speech-worker.js';

let runtimeInstalled = false;

/** The danger-zone rules of MINDLOOP_DANGER_RULES (a JSON file), or the defaults; a bad file fails the start naming the field. */
export function loadDangerRules(path: string | undefined): DangerRule[] | undefined {
  if (!path) return undefined;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`MINDLOOP_DANGER_RULES: cannot read ${path}: ${(err as Error).message}`);
  }
  try {
    return parseDangerConfig(text);
  } catch (err) {
    throw new Error(`MINDLOOP_DANGER_RULES (${path}): ${(err as Error).message}`);
  }
}

// Lines the SDK prints on every start that say nothing a user can act on.
const benignSdkLines = [/^No Nexus services registered/, /^No workflows registered/, /^Worker state changed/];

/** One short line per SDK log entry: `time level [queue] message {meta}`. */
function sdkLogLine(entry: LogEntry): void {
  if (benignSdkLines.some((re) => re.test(entry.message))) return;
  const { taskQueue, sdkComponent: _c, ...rest } = (entry.meta ?? {}) as Record<string, unknown>;
  const meta = Object.keys(rest).length ? ` ${JSON.stringify(rest)}` : '';
  const time = new Date(Number(entry.timestampNanos / 1_000_000n)).toISOString().slice(11, 23);
  const line = `${time} ${entry.level.padEnd(5)} ${taskQueue ? `[${String(taskQueue)}] ` : ''}${entry.message}${meta}\n`;
  (entry.level === 'ERROR' || entry.level === 'WARN' ? process.stderr : process.stdout).write(line);
}

/** Install the SDK runtime once: our log level, and no SDK signal handlers (we stop in order ourselves). */
export function installRuntime(level: LogLevel): void {
  if (runtimeInstalled) return;
  Runtime.install({ logger: new DefaultLogger(level, sdkLogLine), shutdownSignals: [] });
  runtimeInstalled = true;
}

/** The speech engine of this process: not asked for, not installed, failed to start, or running. */
type SpeechStart =
  | { state: 'off' }
  | { state: 'missing' | 'failed'; setting: SpeechQueueSetting; reason: string }
  | { state: 'running'; setting: SpeechQueueSetting; worker: SpeechWorker };

export interface RunningWorkers {
  connection: NativeConnection;
  /** The TypeScript workers (mindloop, sandbox). */
  workers: Map<TsQueueName, Worker>;
  speech: SpeechStart;
  /** Resolves when every worker (and the speech engine) has stopped. */
  done: Promise<void>;
  shutdown(): Promise<void>;
}

/** Start the speech engine for `setting`, or say why it is not running. */
async function startSpeech(env: Env, stack: Stack, setting: SpeechQueueSetting): Promise<SpeechStart> {
  if (stack.temporal.connection.tls || stack.temporal.connection.apiKey) {
    return {
      state: 'failed',
      setting,
      reason:
        'the speech engine connects to Temporal without TLS or an API key; run it on a host that reaches the frontend plainly',
    };
  }
  const engine = findSpeechEngine(env.MINDLOOP_TOOLS_DIR);
  if (!engine) return { state: 'missing', setting, reason: `the speech engine is not installed: ${speechInstallHint}` };
  try {
    const worker = await startSpeechWorker({
      engine,
      address: stack.temporal.address,
      namespace: stack.temporal.namespace,
      queue: setting,
      dataDir: env.MINDLOOP_DATA_DIR,
    });
    return { state: 'running', setting, worker };
  } catch (err) {
    return { state: 'failed', setting, reason: (err as Error).message };
  }
}

/** Create and start one worker per queue. */
export async function startWorkers(
  env: Env,
  stack: Stack,
  queues: readonly TaskQueueName[],
  opts: { workflowBundle?: WorkflowBundleWithSourceMap; events?: AgentEventSink } = {},
): Promise<RunningWorkers> {
  const connection = await NativeConnection.connect(stack.temporal.connection);
  const workers = new Map<TsQueueName, Worker>();
  // MCP servers are the worker's: started on first use, stopped with it.
  const mcp = createMcpPool(stack.db.db, { env: secretSource() });
  const speechSetting = queues.find(isSpeechQueueSetting);
  let speech: SpeechStart = { state: 'off' };
  try {
    for (const queue of queues.filter((q): q is TsQueueName => (tsQueues as readonly string[]).includes(q))) {
      workers.set(
        queue,
        await createQueueWorker(queue, {
          connection,
          namespace: stack.temporal.namespace,
          db: stack.db.db,
          dockerHost: env.DOCKER_HOST,
          toolGeneration: { mode: env.MINDLOOP_MODE, allowOverride: env.MINDLOOP_ALLOW_TOOLGEN },
          dangerRules: loadDangerRules(env.MINDLOOP_DANGER_RULES),
          llm: {
            env: secretSource(),
            toolsDir: env.MINDLOOP_TOOLS_DIR,
            timeoutMs: env.MINDLOOP_LLM_TIMEOUT_MS,
            maxReplyBytes: env.MINDLOOP_LLM_MAX_REPLY_BYTES,
            localThreads: env.MINDLOOP_LOCAL_LLM_THREADS,
            lifeforce: { enabled: true, prices: env.MINDLOOP_LIFEFORCE_PRICES },
          },
          workflowBundle:
            opts.workflowBundle ??
            (env.MINDLOOP_WORKFLOW_BUNDLE ? { codePath: env.MINDLOOP_WORKFLOW_BUNDLE } : undefined),
          ...(opts.events ? { events: opts.events } : {}),
          dataDir: env.MINDLOOP_DATA_DIR,
          maxCachedWorkflows: env.MINDLOOP_WORKFLOW_CACHE,
          mcp,
        }),
      );
    }
    if (speechSetting) speech = await startSpeech(env, stack, speechSetting);
  } catch (err) {
    await mcp.close();
    await connection.close();
    throw err;
  }
  const speechExit = speech.state === 'running' ? speech.worker.exited.then(() => undefined) : Promise.resolve();
  const done = Promise.all([...[...workers.values()].map((w) => w.run()), speechExit]).then(() => undefined);
  let stopping: Promise<void> | undefined;
  const shutdown = () =>
    (stopping ??= (async () => {
      for (const w of workers.values()) if (w.getState() === 'RUNNING') w.shutdown();
      if (speech.state === 'running') await speech.worker.stop();
      await done.catch(() => undefined);
      await mcp.close();
      await connection.close();
      await disposeLocalModels();
    })());
  return { connection, workers, speech, done, shutdown };
}

/**
 * Calls `stop` once on SIGINT/SIGTERM/SIGHUP. One Ctrl-C reaches us several times (the
 * terminal's, then npm's and tsx's relays), so only a Ctrl-C pressed again after a pause
 * forces the exit.
 */
export function onStopSignal(stop: (signal: NodeJS.Signals) => Promise<void>): void {
  let firstAt = 0;
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(sig, () => {
      if (firstAt) {
        if (sig === 'SIGINT' && Date.now() - firstAt > 2000) {
          process.stderr.write('\nforced exit (the next start cleans up what was left)\n');
          process.exit(130);
        }
        return;
      }
      firstAt = Date.now();
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
