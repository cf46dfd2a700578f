/**
 * Workers and waits for tests on a Temporal server: workers polling while a test body runs
 * (`withWorker`) or from a `beforeAll`/`beforeEach` to its end (`startWorkers`), an agent loop started
 * on a queue (`startLoop`), and a workflow's query read until it holds (`untilQuery`, `untilStatus`
 * for the agent loop). The servers are made in ./temporal.ts, the database in ./env.ts
 * (`migratedDatabase`), other waits in ./wait.ts.
 */
import type { Client, WorkflowHandle, WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import type { QueryDefinition } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import {
  NativeConnection,
  Worker,
  type NativeConnectionOptions,
  type WorkerOptions,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import type { createActivities } from '../../activities/index.js';
import { workflowIds } from '../../core/ids.js';
import type { TemporalConnectionConfig } from '../../runtime/temporal-connection.js';
import { failoverWorkerOptions } from '../../workers/failover.js';
import {
  statusQuery,
  type AgentLoopInput,
  type AgentStatus,
  type agentLoopWorkflow,
} from '../../workflows/agent-loop/index.js';
import { unlimitedLifeforce } from './scripted.js';
import { readUntil } from './wait.js';

/**
 * Where workers connect: a test environment (its `nativeConnection`), a dev server from
 * `startDevTemporal` (its `connection`), a connection, or connection options such as a stack's
 * `temporal.connection` (a connection is opened for the workers and closed after them).
 */
export type WorkerHost =
  | { nativeConnection: NativeConnection }
  | { connection: NativeConnection }
  | NativeConnection
  | NativeConnectionOptions;

/** One worker: the SDK's options without the connection; `taskQueue` defaults to a queue of its own. */
export type WorkerSpec = Omit<WorkerOptions, 'connection' | 'taskQueue'> & { taskQueue?: string };

let queueSeq = 0;

async function connect(host: WorkerHost): Promise<{ connection: NativeConnection; close(): Promise<void> }> {
  if (host instanceof NativeConnection) return { connection: host, close: async () => {} };
  if ('nativeConnection' in host) return { connection: host.nativeConnection, close: async () => {} };
  if ('connection' in host && host.connection instanceof NativeConnection)
    return { connection: host.connection, close: async () => {} };
  const connection = await NativeConnection.connect(host as NativeConnectionOptions);
  return { connection, close: () => connection.close() };
}

async function createWorkers(
  connection: NativeConnection,
  specs: readonly WorkerSpec[],
): Promise<{ workers: Worker[]; queues: string[] }> {
  const workers: Worker[] = [];
  const queues: string[] = [];
  for (const { taskQueue = `test-queue-${++queueSeq}`, ...options } of specs) {
    workers.push(await Worker.create({ ...failoverWorkerOptions, ...options, connection, taskQueue }));
    queues.push(taskQueue);
  }
  return { workers, queues };
}

/**
 * Run `fn` while the workers poll, and shut them down when it settles; `fn` is given the first
 * worker's task queue. A worker that fails fails the call.
 */
export async function withWorker<T>(
  host: WorkerHost,
  spec: WorkerSpec | readonly WorkerSpec[],
  fn: (taskQueue: string) => Promise<T>,
): Promise<T> {
  const specs = Array.isArray(spec) ? (spec as readonly WorkerSpec[]) : [spec as WorkerSpec];
  const conn = await connect(host);
  try {
    const { workers, queues } = await createWorkers(conn.connection, specs);
    const run = (i: number): Promise<T> => (i === workers.length ? fn(queues[0]!) : workers[i]!.runUntil(run(i + 1)));
    return await run(0);
  } finally {
    await conn.close();
  }
}

/** Workers polling until `stop()`, which fails when one of them failed. */
export interface RunningWorkers {
  workers: Worker[];
  stop(): Promise<void>;
}

/** Workers that poll from a `beforeAll`/`beforeEach` until `stop()` in its `afterAll`/`afterEach`. */
export async function startWorkers(host: WorkerHost, specs: readonly WorkerSpec[]): Promise<RunningWorkers> {
  const conn = await connect(host);
  const { workers } = await createWorkers(conn.connection, specs);
  const running = workers.map((w) => w.run());
  return {
    workers,
    async stop() {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      const ended = await Promise.allSettled(running);
      await conn.close();
      const failed = ended.find((r) => r.status === 'rejected');
      if (failed) throw failed.reason;
    },
  };
}

/** Start an agent loop on `taskQueue`, by default under its business id `agent/<agentId>`. */
export function startLoop(
  client: Client,
  taskQueue: string,
  input: AgentLoopInput,
  workflowId = workflowIds.agent(input.agentId),
): Promise<WorkflowHandleWithFirstExecutionRunId<typeof agentLoopWorkflow>> {
  return client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', { taskQueue, workflowId, args: [input] });
}

/** `query`'s answer once `pred` holds (every `pollMs`); the timeout names `what` and shows the last answer. */
export function untilQuery<R>(
  handle: WorkflowHandle,
  query: QueryDefinition<R, []>,
  pred: (r: R) => boolean,
  what: string,
  timeoutMs = 30_000,
  pollMs = 100,
): Promise<R> {
  return readUntil(what, timeoutMs, () => handle.query(query), pred, pollMs);
}

/** The agent loop's status once `pred` holds. */
export function untilStatus(
  handle: WorkflowHandle,
  pred: (s: AgentStatus) => boolean,
  what: string,
  timeoutMs = 30_000,
  pollMs = 100,
): Promise<AgentStatus> {
  return untilQuery(handle, statusQuery, pred, what, timeoutMs, pollMs);
}

/**
 * An agent loop run for `ticks` ticks on a stack's Temporal server, by a worker of its own with
 * the given activities; the loop's result. The worker and the client are closed after it.
 */
export async function runTicks(
  temporal: TemporalConnectionConfig,
  activities: object,
  input: { agentId: string; ticks: number },
): Promise<Awaited<ReturnType<typeof agentLoopWorkflow>>> {
  const { Connection, Client: TemporalClient } = await import('@temporalio/client');
  const { bundleWorkflows } = await import('../../workers/queues.js');
  const client = new TemporalClient({ connection: await Connection.connect(temporal) });
  try {
    return await withWorker(temporal, { workflowBundle: await bundleWorkflows(), activities }, async (queue) => {
      const h = await startLoop(client, queue, {
        agentId: input.agentId,
        maxTicks: input.ticks,
        settings: { delayMs: 0 },
      });
      return h.result();
    });
  } finally {
    await client.connection.close();
  }
}

/**
 * An agent loop run to its end on a time-skipping server by a worker of its own (queue
 * `<agentId>`), with `activities` over the plain ones a loop needs (unlimited lifeforce, its start
 * and stop, its process log); its status then, and its history, replayed through today's code
 * first (no nondeterminism).
 */
export async function runReplayedLoop(
  suite: { readonly env: TestWorkflowEnvironment; readonly bundle: WorkflowBundleWithSourceMap },
  input: AgentLoopInput,
  activities: Partial<ReturnType<typeof createActivities>>,
): Promise<{ status: AgentStatus; history: temporal.api.history.v1.IHistory }> {
  const { env, bundle } = suite;
  const all: Partial<ReturnType<typeof createActivities>> = {
    ...unlimitedLifeforce,
    async loopStarted() {
      return { interruptedTaskLoops: [], config: {} };
    },
    async loopStopped() {},
    async logProcess() {},
    ...activities,
  };
  const taskQueue = input.agentId;
  const [handle, status] = await withWorker(env, { taskQueue, workflowBundle: bundle, activities: all }, async () => {
    const h = await startLoop(env.client, taskQueue, input);
    await h.result();
    // A closed workflow's query is answered by a worker replaying it: this one, still running.
    return [h, await h.query(statusQuery)] as const;
  });
  const history = await handle.fetchHistory();
  await Worker.runReplayHistory({ workflowBundle: bundle }, history, handle.workflowId);
  return { status, history };
}
