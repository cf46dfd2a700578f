/**
 * Task priority on the embedded dev server: under a backlog on one activity task queue, the work
 * of agents with more lifeforce (a lower `priorityFor` key) is taken first; a child workflow
 * started with a priority carries it.
 *
 * The backlog is built before any activity worker polls: each workflow schedules its activity on
 * a queue nobody polls yet, and the test waits until the server holds all of them. Only then does
 * a worker with one activity slot start, so the order it runs them in is the order matching hands
 * them out, not the order they arrived.
 */
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { NativeConnection } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { priorityFor, type PriorityInput } from '../../core/priority.js';
import { startDevServer, type DevServer } from '../../runtime/temporal-dev-server.js';
import type {
  PriorityFixtureActivities,
  prioritizedActivityWorkflow,
  prioritizedChildWorkflow,
} from '../fixtures/workflows/index.js';
import { freePort, tempDir, toolPath } from '../helpers/env.js';
import { startWorkers, withWorker, type RunningWorkers } from '../helpers/harness.js';
import { bundle, fixtureWorkflowsPath } from '../helpers/temporal.js';
import { waitFor } from '../helpers/worker-process.js';

const data = tempDir('priority');
const workflowQueue = 'priority-workflows';
const activityQueue = 'priority-activities';
let server: DevServer;
let client: Client;
let connection: NativeConnection;
let workflowWorker: RunningWorkers;

beforeAll(async () => {
  const port = await freePort();
  server = await startDevServer({
    binary: toolPath('temporal'),
    dataDir: data.path,
    port,
    uiPort: 0,
    namespace: 'default',
    ui: false,
  });
  client = new Client({ connection: await Connection.connect({ address: server.address }) });
  connection = await NativeConnection.connect({ address: server.address });
  workflowWorker = await startWorkers(connection, [
    { taskQueue: workflowQueue, workflowBundle: await bundle(fixtureWorkflowsPath) },
  ]);
});

afterAll(async () => {
  await workflowWorker?.stop();
  await connection?.close();
  await client?.connection.close();
  await server?.stop();
  data.remove();
});

/** Twelve agents over every band (core/priority.ts), listed from the lowest priority up. */
const agents: Array<{ label: string; lifeforce: PriorityInput }> = [
  { label: 'spent', lifeforce: { available: 0, capacity: 100 } },
  { label: 'overdrawn', lifeforce: { available: -5, capacity: 100 } },
  { label: 'nearly-spent', lifeforce: { available: 10, capacity: 100 } },
  { label: 'low', lifeforce: { available: 1, capacity: 50 } },
  { label: 'third', lifeforce: { available: 30, capacity: 100 } },
  { label: 'under-half', lifeforce: { available: 45, capacity: 100 } },
  { label: 'unlimited', lifeforce: { available: null, capacity: null } },
  { label: 'half', lifeforce: { available: 50, capacity: 100 } },
  { label: 'marked-urgent', lifeforce: { available: 0, capacity: 100, explicit: 1 } },
  { label: 'three-quarters', lifeforce: { available: 75, capacity: 100 } },
  { label: 'full', lifeforce: { available: 100, capacity: 100 } },
  { label: 'topped-up', lifeforce: { available: 250, capacity: 100 } },
];

/** The activity task queue's backlog, per priority key, as the server reports it. */
async function backlogByKey(): Promise<Record<string, number>> {
  const res = await client.workflowService.describeTaskQueue({
    namespace: 'default',
    taskQueue: { name: activityQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    reportStats: true,
  });
  return Object.fromEntries(
    Object.entries(res.statsByPriorityKey ?? {}).map(([key, stats]) => [
      key,
      Number(stats.approximateBacklogCount ?? 0),
    ]),
  );
}

describe('task priority', () => {
  it('a backlog of activities is taken by priority key, the fullest lifeforce first', async () => {
    const keyOf = new Map(agents.map((a) => [a.label, priorityFor(a.lifeforce).priorityKey]));
    // Every band is present, and the agents start worst first: FIFO would run them backwards.
    expect(new Set(keyOf.values())).toEqual(new Set([1, 2, 3, 4, 5]));
    const handles: WorkflowHandle<typeof prioritizedActivityWorkflow>[] = [];
    for (const agent of agents) {
      handles.push(
        await client.workflow.start<typeof prioritizedActivityWorkflow>('prioritizedActivityWorkflow', {
          taskQueue: workflowQueue,
          workflowId: `priority/${agent.label}`,
          args: [{ label: agent.label, taskQueue: activityQueue, priority: priorityFor(agent.lifeforce) }],
        }),
      );
    }
    // Every activity is scheduled, and matching holds all of them in its backlog.
    for (const handle of handles) {
      await waitFor(`${handle.workflowId}'s activity scheduled`, 30_000, async () =>
        (await handle.describe()).raw.pendingActivities?.length === 1 ? true : undefined,
      );
    }
    const expectedBacklog: Record<string, number> = {};
    for (const key of keyOf.values()) expectedBacklog[key] = (expectedBacklog[key] ?? 0) + 1;
    await waitFor(
      'the backlog of every priority key',
      30_000,
      async () => {
        const backlog = await backlogByKey();
        return JSON.stringify(backlog) === JSON.stringify(expectedBacklog) ? backlog : undefined;
      },
      250,
    );

    const ran: string[] = [];
    const activities: PriorityFixtureActivities = {
      async recordRun(label) {
        ran.push(label);
      },
    };
    // One activity slot and one poller: the worker takes the backlog one task at a time, in the
    // order matching hands it out.
    const activityWorker = {
      taskQueue: activityQueue,
      activities,
      maxConcurrentActivityTaskExecutions: 1,
      maxConcurrentActivityTaskPolls: 1,
    };
    await withWorker(connection, activityWorker, () => Promise.all(handles.map((h) => h.result())));

    expect(ran).toHaveLength(agents.length);
    const keys = ran.map((label) => keyOf.get(label)!);
    expect(keys, `ran: ${ran.join(', ')}`).toEqual([...keys].sort((a, b) => a - b));
  }, 120_000);

  it("a child workflow started with a priority reports it, over the parent's", async () => {
    const childId = 'priority/child';
    const parent = await client.workflow.start<typeof prioritizedChildWorkflow>('prioritizedChildWorkflow', {
      taskQueue: workflowQueue,
      workflowId: 'priority/parent',
      priority: priorityFor({ available: 0, capacity: 100 }),
      args: [{ childId, priority: priorityFor({ available: 90, capacity: 100 }) }],
    });
    await parent.result();
    expect((await parent.describe()).priority?.priorityKey).toBe(5);
    expect((await client.workflow.getHandle(childId).describe()).priority?.priorityKey).toBe(1);
  });
});
