/**
 * temporal-baseline: what Temporal itself costs on the embedded stack, the yardstick every
 * later benchmark is divided by. Activity round trip = a workflow schedules a no-op activity
 * and is woken with its result (as the workflow clock sees it); workflow round trip = a
 * client starts a no-op workflow and gets its result.
 */
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker, bundleWorkflowCode } from '@temporalio/worker';
import type { Stack } from '../runtime/stack.js';
import { summarize } from './lib.js';
import { failoverWorkerOptions } from '../workers/failover.js';

export interface BaselineFigures {
  activity_rt_p50_ms: number;
  activity_rt_p99_ms: number;
  activity_rt_mean_ms: number;
  workflow_rt_p50_ms: number;
  workflow_rt_p99_ms: number;
  activity_calls: number;
  workflow_runs: number;
}

/**
 * A worker for the benchmark workflows (bench/workflows.ts; by default a no-op activity) on its own
 * task queue, while `fn` runs.
 */
export async function withBaselineWorker<T>(
  stack: Stack,
  fn: (client: Client, taskQueue: string) => Promise<T>,
  o: { maxCachedWorkflows?: number; activities?: object } = {},
): Promise<T> {
  const taskQueue = `bench-baseline-${process.pid}`;
  const connection = await NativeConnection.connect(stack.temporal.connection);
  const workflowBundle = await bundleWorkflowCode({
    workflowsPath: fileURLToPath(new URL('./workflows.ts', import.meta.url)),
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
  });
  const worker = await Worker.create({
    connection,
    namespace: stack.temporal.namespace,
    taskQueue,
    ...failoverWorkerOptions,
    workflowBundle,
    activities: o.activities ?? { async noop() {} },
    ...(o.maxCachedWorkflows ? { maxCachedWorkflows: o.maxCachedWorkflows } : {}),
  });
  const clientConn = await Connection.connect(stack.temporal.connection);
  const client = new Client({ connection: clientConn, namespace: stack.temporal.namespace });
  try {
    return await worker.runUntil(() => fn(client, taskQueue));
  } finally {
    await clientConn.close();
    await connection.close();
  }
}

/** No-op activity calls in one workflow and no-op workflow runs; `smoke` the fewest that give a figure of each. */
export const baselineSizes = { full: { activities: 500, workflows: 200 }, smoke: { activities: 20, workflows: 5 } };

/** Measure on a running stack; reusable by other benchmarks that report ratios to it. */
export async function measureBaseline(stack: Stack, opts = baselineSizes.full): Promise<BaselineFigures> {
  return withBaselineWorker(stack, async (client, taskQueue) => {
    // Warm-up: first tasks pay for bundle load and connection set-up.
    await client.workflow.execute('activityRoundTripsWorkflow', {
      taskQueue,
      workflowId: `warm-${Date.now()}`,
      args: [20],
    });

    const marks: number[] = await client.workflow.execute('activityRoundTripsWorkflow', {
      taskQueue,
      workflowId: `activity-rt-${Date.now()}`,
      args: [opts.activities],
    });
    const activityRt = marks.slice(1).map((t, i) => t - marks[i]!);

    const workflowRt: number[] = [];
    for (let i = 0; i < opts.workflows; i++) {
      const t0 = performance.now();
      await client.workflow.execute('noopWorkflow', { taskQueue, workflowId: `noop-${Date.now()}-${i}` });
      workflowRt.push(performance.now() - t0);
    }
    const a = summarize(activityRt);
    const w = summarize(workflowRt);
    return {
      activity_rt_p50_ms: a.p50,
      activity_rt_p99_ms: a.p99,
      activity_rt_mean_ms: a.mean,
      workflow_rt_p50_ms: w.p50,
      workflow_rt_p99_ms: w.p99,
      activity_calls: a.n,
      workflow_runs: w.n,
    };
  });
}
