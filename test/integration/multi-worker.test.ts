/**
 * Several worker processes share the agents and outlive the loss of any one of them, on the real
 * Temporal dev server and the real Postgres: three `workers/main.ts --queue mindloop` processes
 * run twelve agents whose scripted model answers at once. The worker holding the most agents (by
 * the identity on their last workflow task) is SIGKILLed mid-run, then the one of the two left
 * holding the most, so that one worker ends with all twelve. After each kill every agent ticks
 * again within the time the server takes to notice the lost worker (derived below from the
 * options the code runs with) and goes on ticking on the workers left; no loop fails or is
 * terminated, and no tick is lost or thought twice: one reply row and one answered think call
 * per tick, ticks 1..n without a gap.
 */
import { hostname } from 'node:os';
import type { Client } from '@temporalio/client';
import { msToNumber, tsToMs } from '@temporalio/common/lib/time.js';
import { temporal } from '@temporalio/proto';
import { and, asc, eq, like } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workflowIds } from '../../core/ids.js';
import { agents, llmCalls, llmRecentResponses, llmRegistry } from '../../db/schema/index.js';
import type { AgentLoopResult, AgentStatus, agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import { dbActivity, llmActivity, workflowFailover } from '../../workflows/lib/activity-options.js';
import { stickyQueueScheduleToStartMs } from '../../workers/failover.js';
import { startKillableStack, waitFor, type KillableStack } from '../helpers/worker-process.js';

const agentCount = 12;
const agentIds = Array.from({ length: agentCount }, (_, i) => `mw-${String(i + 1).padStart(2, '0')}`);
/** The loop's pause between ticks: short, so a stall stands out against the usual gap. */
const paceMs = 500;
/** Ticks every agent makes before a kill, and after it before the next. */
const ticksPerPhase = 3;
/** Room for a tick's own steps on a busy 2-CPU machine (other test files run beside this one). */
const busyMachineMs = 15_000;
/** How long the server may take to record a call the killed worker made as it died. */
const answeredWithinMs = 3_000;

const { EventType, TimeoutType } = temporal.api.enums.v1;

let ks: KillableStack;
let client: Client;
const workers: Array<{ name: string; child: ReturnType<KillableStack['spawnWorker']>; identity: string }> = [];
type WorkerProc = (typeof workers)[number];

beforeAll(async () => {
  ks = await startKillableStack('multi-worker');
  client = ks.client;
}, 180_000);
afterAll(async () => {
  for (const w of workers) if (alive(w)) w.child.kill('SIGKILL');
  await ks?.stop();
});

const db = () => ks.stack.db.db;
const alive = (w: WorkerProc) => w.child.exitCode === null && w.child.signalCode === null;
const ms = (d: string | number | undefined) => msToNumber(d ?? 0);
const seconds = (v: number) => `${(v / 1000).toFixed(1)} s`;
const nameOf = (identity: string | undefined) => workers.find((w) => w.identity === identity)?.name ?? '?';

/**
 * How long a lost worker can hold an agent up. The server does not watch workers: it finds
 * their work gone by timeouts.
 * - An activity running there (the tick's think, or a database step) fails after the think's
 *   heartbeat timeout (a database step's too: every activity heartbeats), and its retry waits the first retry
 *   interval before a worker left takes it.
 * - The loop's next workflow task is for the dead worker's sticky queue (it holds the loop in
 *   its cache). Waiting there, it goes to the shared queue after the sticky schedule-to-start
 *   timeout (workers/failover.ts sets it); handed to the dead worker (the server may not have dropped its polls
 *   yet: the histories show both) or running there, it is
 *   given again after the workflow task timeout (read from the execution).
 * An agent can meet both in a row (its think retried on a worker left, whose completion then
 * waits on the dead worker's sticky queue), so the bound is their sum, plus room for a busy machine.
 */
function stallBound(workflowTaskTimeoutMs: number) {
  const lostActivityMs =
    Math.max(ms(llmActivity.heartbeatTimeout), ms(dbActivity.heartbeatTimeout)) +
    Math.max(ms(llmActivity.retry?.initialInterval), ms(dbActivity.retry?.initialInterval));
  const lostWorkflowTaskMs = Math.max(stickyQueueScheduleToStartMs, workflowTaskTimeoutMs);
  return { lostActivityMs, lostWorkflowTaskMs, totalMs: lostActivityMs + lostWorkflowTaskMs + busyMachineMs };
}

function startWorker(name: string): WorkerProc {
  const child = ks.spawnWorker();
  // The SDK's default identity (workers/queues.ts gives none): what the history records of it.
  const w = { name, child, identity: `${child.pid}@${hostname()}` };
  workers.push(w);
  return w;
}

async function untilPolling(w: WorkerProc): Promise<void> {
  const state = await waitFor(
    `${w.name} polling`,
    150_000,
    async () => (!alive(w) ? 'exited' : w.child.output().stdout.includes('worker polling') ? 'polling' : undefined),
    250,
  );
  if (state === 'exited') throw new Error(`${w.name} exited: ${w.child.output().stderr}`);
}

async function kill(w: WorkerProc): Promise<number> {
  const exited = new Promise((r) => w.child.once('exit', r));
  w.child.kill('SIGKILL');
  await exited;
  return Date.now();
}

interface TickRow {
  tick: number;
  at: number;
}

/** Each agent's recorded ticks (one reply row each), in order, with when they were recorded. */
async function tickRows(): Promise<Map<string, TickRow[]>> {
  const rows = await db()
    .select({ agentId: llmRecentResponses.agentId, tick: llmRecentResponses.tick, at: llmRecentResponses.createdAt })
    .from(llmRecentResponses)
    .where(like(llmRecentResponses.agentId, 'mw-%'))
    .orderBy(asc(llmRecentResponses.agentId), asc(llmRecentResponses.tick));
  const byAgent = new Map<string, TickRow[]>(agentIds.map((id) => [id, []]));
  for (const r of rows) byAgent.get(r.agentId)?.push({ tick: r.tick, at: r.at.getTime() });
  return byAgent;
}

const history = async (agentId: string) =>
  (await client.workflow.getHandle(workflowIds.agent(agentId)).fetchHistory()).events ?? [];

/** The worker that completed the agent's last workflow task: it holds the loop in its cache, and the loop's next task is queued for it. */
async function holderOf(agentId: string): Promise<string | undefined> {
  const events = await history(agentId);
  for (let i = events.length - 1; i >= 0; i--) {
    const done = events[i]!.workflowTaskCompletedEventAttributes;
    if (done) return done.identity ?? undefined;
  }
  return undefined;
}

/** What an agent's history shows since `since`: who ran its workflow tasks and activities, activities retried, workflow tasks timed out (queued, running). */
async function historySince(agentId: string, since: number) {
  const events = (await history(agentId)).filter((e) => tsToMs(e.eventTime) > since);
  const completedBy = new Set(
    events.flatMap((e) =>
      e.workflowTaskCompletedEventAttributes?.identity ? [e.workflowTaskCompletedEventAttributes.identity] : [],
    ),
  );
  const activitiesBy = new Set(
    events.flatMap((e) =>
      e.activityTaskStartedEventAttributes?.identity ? [e.activityTaskStartedEventAttributes.identity] : [],
    ),
  );
  const retried = events.filter(
    (e) =>
      e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED &&
      (e.activityTaskStartedEventAttributes?.attempt ?? 1) > 1,
  ).length;
  const timedOut = events.flatMap((e) =>
    e.workflowTaskTimedOutEventAttributes ? [e.workflowTaskTimedOutEventAttributes.timeoutType] : [],
  );
  const stickyTimeouts = timedOut.filter((t) => t === TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START).length;
  return { completedBy, activitiesBy, retried, stickyTimeouts, runningTimeouts: timedOut.length - stickyTimeouts };
}

async function executionStatuses(): Promise<string[]> {
  return Promise.all(
    agentIds.map(async (id) => (await client.workflow.getHandle(workflowIds.agent(id)).describe()).status.name),
  );
}

/**
 * SIGKILL the live worker holding the most agents; every agent must tick again within the
 * bound and then `ticksPerPhase` times more, the workers left doing all of it. Prints a table.
 */
async function loseBusiestWorker(
  label: string,
  boundMs: number,
): Promise<{ victim: WorkerProc; survivors: WorkerProc[] }> {
  const live = workers.filter(alive);
  const holders = new Map(await Promise.all(agentIds.map(async (id) => [id, await holderOf(id)] as const)));
  const held = (w: WorkerProc) => agentIds.filter((id) => holders.get(id) === w.identity);
  const victim = live.reduce((a, b) => (held(b).length > held(a).length ? b : a));
  const survivors = live.filter((w) => w !== victim);
  // The victim holds loops (their workflow state is in its cache, their next task is queued for it).
  expect(held(victim).length).toBeGreaterThan(0);
  const killedAt = await kill(victim);

  // A reply whose statement was running as the worker died may still commit: it was recorded before the kill.
  const after = (rows: TickRow[]) => rows.filter((r) => r.at > killedAt);
  await waitFor(
    `${label}: every agent ${ticksPerPhase} ticks past the kill`,
    boundMs + 60_000,
    async () => {
      const rows = await tickRows();
      return agentIds.every((id) => after(rows.get(id)!).length >= ticksPerPhase) ? true : undefined;
    },
    250,
  );
  const rows = await tickRows();
  const table = await Promise.all(
    agentIds.map(async (id) => {
      const all = rows.get(id)!;
      const around = all.filter((r) => r.at > killedAt - 5_000);
      const gaps = around.slice(1).map((r, i) => r.at - around[i]!.at);
      // What the dead worker sent just before it died may be recorded a moment after: give the server that moment.
      const since = await historySince(id, killedAt + answeredWithinMs);
      return {
        id,
        heldBy: nameOf(holders.get(id)),
        nowOn: nameOf(await holderOf(id)),
        ticksBefore: all.length - after(all).length,
        ticksAfter: after(all).length,
        resumedMs: after(all)[0]!.at - killedAt,
        maxGapMs: Math.max(...gaps),
        ...since,
      };
    }),
  );
  const retried = table.reduce((n, r) => n + r.retried, 0);
  const sticky = table.reduce((n, r) => n + r.stickyTimeouts, 0);
  const running = table.reduce((n, r) => n + r.runningTimeouts, 0);
  console.log(
    [
      `${label}: SIGKILLed ${victim.name} (pid ${victim.child.pid}), which held ${held(victim).length} of ${agentCount} agents; ${survivors.map((w) => w.name).join(' and ')} left. ` +
        `Since the kill: ${retried} activities retried on a worker left, ${sticky} workflow tasks timed out waiting on its sticky queue and ${running} handed to it and never answered; stall bound ${seconds(boundMs)}.`,
      `agent  held by  now on  ticks before  ticks after  resumed after  max gap around the kill`,
      ...table.map(
        (r) =>
          `${r.id}  ${r.heldBy.padEnd(7)}  ${r.nowOn.padEnd(6)}  ${String(r.ticksBefore).padStart(12)}  ${String(r.ticksAfter).padStart(11)}  ${seconds(r.resumedMs).padStart(13)}  ${seconds(r.maxGapMs).padStart(23)}`,
      ),
    ].join('\n'),
  );

  const survivorIds = new Set(survivors.map((w) => w.identity));
  for (const r of table) {
    expect(r.resumedMs, `${r.id} resumed after the kill`).toBeLessThanOrEqual(boundMs);
    expect(r.maxGapMs, `${r.id}'s longest gap between ticks around the kill`).toBeLessThanOrEqual(boundMs);
    // Only the workers left ran its workflow tasks and activities since.
    expect(
      [...r.completedBy].filter((i) => !survivorIds.has(i)),
      r.id,
    ).toEqual([]);
    expect(
      [...r.activitiesBy].filter((i) => !survivorIds.has(i)),
      r.id,
    ).toEqual([]);
  }
  expect(survivors.every(alive)).toBe(true);
  expect(await executionStatuses()).toEqual(agentIds.map(() => 'RUNNING'));
  return { victim, survivors };
}

describe('several workers share the agents', () => {
  it('three workers run twelve agents; losing one, then another, stalls no agent past the timeouts and loses or repeats no tick', async () => {
    const started = Date.now();
    for (const id of agentIds) {
      await db().insert(agents).values({ id, name: id });
      await db()
        .insert(llmRegistry)
        .values({
          agentId: id,
          name: 'mind',
          provider: 'scripted',
          model: 'scripted',
          role: 'agent',
          priority: 1,
          params: { replies: ['Thinking on.', 'One more thought.', 'Still here.'] },
        });
    }
    for (const name of ['w1', 'w2', 'w3']) startWorker(name);
    await Promise.all(workers.map(untilPolling));
    const workersUpS = (Date.now() - started) / 1000;

    const handles = await Promise.all(
      agentIds.map((agentId) =>
        client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
          taskQueue: 'mindloop',
          workflowId: workflowIds.agent(agentId),
          args: [{ agentId, reflexes: false, settings: { delayMs: paceMs } }],
          ...workflowFailover,
        }),
      ),
    );
    const described = await handles[0]!.describe();
    const bound = stallBound(tsToMs(described.raw.executionConfig?.defaultWorkflowTaskTimeout));
    expect(bound.lostActivityMs).toBeGreaterThan(0);
    expect(bound.lostWorkflowTaskMs).toBeGreaterThan(0);
    await waitFor(
      `every agent ${ticksPerPhase} ticks`,
      90_000,
      async () => {
        const rows = await tickRows();
        return agentIds.every((id) => rows.get(id)!.length >= ticksPerPhase) ? true : undefined;
      },
      250,
    );

    const first = await loseBusiestWorker('kill 1 of 2', bound.totalMs);
    expect(first.survivors).toHaveLength(2);
    const second = await loseBusiestWorker('kill 2 of 2', bound.totalMs);
    expect(second.survivors).toHaveLength(1);
    const [last] = second.survivors;
    // The last worker holds every loop now.
    expect(new Set(await Promise.all(agentIds.map(holderOf)))).toEqual(new Set([last!.identity]));

    // Every loop still counts its ticks itself, none failed along the way; `stop` completes each.
    const statuses = await Promise.all(handles.map((h) => h.query<AgentStatus>('status')));
    expect(statuses.map((s) => s.counters.tickFailures)).toEqual(agentIds.map(() => 0));
    await Promise.all(handles.map((h) => h.signal('stop')));
    const results: AgentLoopResult[] = await Promise.all(handles.map((h) => h.result()));
    expect(await executionStatuses()).toEqual(agentIds.map(() => 'COMPLETED'));

    // No tick lost or recorded twice: ticks 1..n, one reply row each, one answered think call each.
    const rows = await tickRows();
    for (const [i, id] of agentIds.entries()) {
      const ticks = rows.get(id)!.map((r) => r.tick);
      expect(ticks, id).toEqual(Array.from({ length: ticks.length }, (_, k) => k + 1));
      expect(results[i]).toMatchObject({ agentId: id, ticks: ticks.length, reason: 'stopped' });
      const thinks = await db()
        .select({ requestKey: llmCalls.requestKey })
        .from(llmCalls)
        .where(and(eq(llmCalls.agentId, id), eq(llmCalls.purpose, 'think'), eq(llmCalls.ok, true)));
      const thoughtTicks = thinks
        .map((c) => Number(/:(\d+):think$/.exec(c.requestKey ?? '')?.[1]))
        .sort((a, b) => a - b);
      expect(thoughtTicks, `${id}: answered think calls by tick`).toEqual(ticks);
    }
    console.log(
      `multi-worker: workers up in ${workersUpS.toFixed(1)} s; ${results.reduce((n, r) => n + r.ticks, 0)} ticks in all; ${((Date.now() - started) / 1000).toFixed(1)} s in all; the last worker: ${last!.name}`,
    );
  }, 300_000);
});
