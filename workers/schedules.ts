/**
 * The maintenance Temporal Schedules, created idempotently at start (`npm start`, and
 * a worker process that polls `mindloop`, unless started with `--no-schedules`) and by
 * `npx mindloop schedules apply`: learning decay daily, the abstracts digest hourly,
 * memory pruning every 6 hours, process-log cleanup daily. Applying again converges spec,
 * action and policies but keeps the schedule's state, so a schedule paused in the UI stays paused.
 */
import {
  Client,
  Connection,
  ScheduleAlreadyRunning,
  ScheduleOverlapPolicy,
  type ConnectionOptions,
  type ScheduleOptions,
} from '@temporalio/client';
import { workflowFailover } from '../workflows/lib/activity-options.js';
import { maintenanceScheduleText } from '../workflows/lib/ui-text.js';

interface MaintenanceSchedule {
  id: string;
  workflowType: string;
  every: string;
  /** Offset within the interval, so the jobs do not all start at once. */
  offset?: string;
  args: unknown[];
  note: string;
}

export const maintenanceSchedules: readonly MaintenanceSchedule[] = [
  {
    id: 'maintenance/learning-decay',
    workflowType: 'learningDecayWorkflow',
    every: '1 day',
    offset: '3 hours',
    args: [{ factor: 0.9, staleAfterDays: 7, deleteBelow: 0.1 }],
    note: 'learnings × 0.9 when not reinforced for 7 days; deleted below 0.1',
  },
  {
    id: 'maintenance/abstracts-digest',
    workflowType: 'abstractsDigestWorkflow',
    every: '1 hour',
    offset: '5 minutes',
    args: [{}],
    note: 'per running agent: an abstract of recent responses by its abstracts_strategy',
  },
  {
    id: 'maintenance/memory-pruning',
    workflowType: 'memoryPruningWorkflow',
    every: '6 hours',
    offset: '20 minutes',
    args: [{}],
    note: 'per running agent: archive beyond lru_limit',
  },
  {
    id: 'maintenance/process-log-cleanup',
    workflowType: 'processLogCleanupWorkflow',
    every: '1 day',
    offset: '4 hours',
    args: [{ olderThanDays: 30 }],
    note: 'delete closed process-log entries older than 30 days',
  },
  {
    id: 'maintenance/embeddings-backfill',
    workflowType: 'embeddingsBackfillWorkflow',
    every: '1 hour',
    offset: '35 minutes',
    args: [{}],
    note: "per running agent: embed the memory rows that have no vector under the agent's embedder",
  },
];

function options(s: MaintenanceSchedule, taskQueue: string): ScheduleOptions {
  return {
    scheduleId: s.id,
    spec: { intervals: [{ every: s.every, offset: s.offset }] },
    action: {
      type: 'startWorkflow',
      workflowType: s.workflowType,
      args: s.args,
      taskQueue,
      workflowId: s.id,
      workflowRunTimeout: '1 hour',
      ...workflowFailover,
      ...maintenanceScheduleText(s),
    },
    policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 hour', pauseOnFailure: false },
    state: { note: s.note },
  };
}

/** Create each schedule, or bring an existing one to this definition (its paused state kept). */
export async function applySchedules(
  client: Client,
  o: { taskQueue?: string; schedules?: readonly MaintenanceSchedule[] } = {},
): Promise<Array<{ id: string; action: 'created' | 'updated' }>> {
  const taskQueue = o.taskQueue ?? scheduleTaskQueue;
  const out: Array<{ id: string; action: 'created' | 'updated' }> = [];
  for (const s of o.schedules ?? maintenanceSchedules) {
    const opts = options(s, taskQueue);
    try {
      await client.schedule.create(opts);
      out.push({ id: s.id, action: 'created' });
    } catch (err) {
      if (!(err instanceof ScheduleAlreadyRunning)) throw err;
      await client.schedule.getHandle(s.id).update((prev) => ({
        spec: opts.spec,
        action: opts.action,
        policies: opts.policies,
        state: {
          paused: prev.state.paused,
          note: prev.state.note ?? s.note,
          remainingActions: prev.state.remainingActions,
        },
      }));
      out.push({ id: s.id, action: 'updated' });
    }
  }
  return out;
}

/** The queue the maintenance workflows run on: a worker polling it applies the schedules at start. */
const scheduleTaskQueue = 'mindloop';

/**
 * A worker's start: when it polls the schedules' queue (and `disabled` is not set), apply the
 * schedules idempotently. Never fails the start: an error is logged with how to retry. Returns
 * what was applied, or null when skipped or failed.
 */
export async function applySchedulesAtStart(
  temporal: { connection: ConnectionOptions; namespace: string },
  o: { queues: readonly string[]; disabled?: boolean; log: (line: string) => void },
): Promise<Array<{ id: string; action: 'created' | 'updated' }> | null> {
  if (!o.queues.includes(scheduleTaskQueue)) return null;
  if (o.disabled) {
    o.log('schedules: not applied at start (--no-schedules); `npx mindloop schedules apply` applies them');
    return null;
  }
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect(temporal.connection);
    return await applySchedulesLogged(new Client({ connection, namespace: temporal.namespace }), o.log);
  } catch (err) {
    o.log(`schedules not applied: ${(err as Error).message} (retry: npx mindloop schedules apply)`);
    return null;
  } finally {
    await connection?.close();
  }
}

/** Apply the schedules and log what happened; an error is logged with how to retry, never thrown. */
export async function applySchedulesLogged(
  client: Client,
  log: (line: string) => void,
): Promise<Array<{ id: string; action: 'created' | 'updated' }> | null> {
  try {
    const applied = await applySchedules(client, { taskQueue: scheduleTaskQueue });
    log(`schedules: ${applied.map((s) => `${s.id} (${s.action})`).join(', ')}`);
    return applied;
  } catch (err) {
    log(`schedules not applied: ${(err as Error).message} (retry: npx mindloop schedules apply)`);
    return null;
  }
}

interface ScheduleRow {
  id: string;
  workflowType: string;
  paused: boolean;
  note: string | null;
  nextActionTimes: string[];
  recentActions: number;
}

/** The maintenance schedules as the server describes them (missing ones are left out). */
export async function describeSchedules(
  client: Client,
  schedules: readonly MaintenanceSchedule[] = maintenanceSchedules,
): Promise<ScheduleRow[]> {
  const rows: ScheduleRow[] = [];
  for (const s of schedules) {
    try {
      const d = await client.schedule.getHandle(s.id).describe();
      rows.push({
        id: s.id,
        workflowType: d.action.workflowType,
        paused: d.state.paused,
        note: d.state.note ?? null,
        nextActionTimes: d.info.nextActionTimes.slice(0, 2).map((t) => t.toISOString()),
        recentActions: d.info.recentActions.length,
      });
    } catch (err) {
      if ((err as Error).name !== 'ScheduleNotFoundError') throw err;
    }
  }
  return rows;
}

/**
 * Do `act` to a schedule (trigger, backfill) and wait for the workflow run it starts: the first
 * of the schedule's recent actions that was not there before. Returns its workflow id and result.
 */
export async function awaitScheduledRun<T = unknown>(
  client: Client,
  scheduleId: string,
  act: () => Promise<unknown>,
  timeoutMs = 30_000,
): Promise<{ workflowId: string; result: T }> {
  const handle = client.schedule.getHandle(scheduleId);
  // A run is its id and first run id: a backfill repeated for one time reuses the workflow id.
  const key = (a: { action: { workflow: { workflowId: string; firstExecutionRunId: string } } }) =>
    `${a.action.workflow.workflowId}/${a.action.workflow.firstExecutionRunId}`;
  const before = new Set((await handle.describe()).info.recentActions.map(key));
  await act();
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const fresh = (await handle.describe()).info.recentActions.find((a) => !before.has(key(a)));
    if (fresh) {
      const { workflowId, firstExecutionRunId } = fresh.action.workflow;
      return { workflowId, result: (await client.workflow.getHandle(workflowId, firstExecutionRunId).result()) as T };
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${scheduleId}: no run started within ${timeoutMs} ms`);
}
