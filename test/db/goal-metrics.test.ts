/**
 * Goal metrics against a real Postgres: the one statement reads every goal of one agent with its
 * task counts (not another agent's, not tasks without a goal); the figures reach the notebook's
 * agent overview (JSON), `mindloop status`'s goals line, and one line of the agent's own context
 * beside its active goals (none for an agent without goals).
 */
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { formatExecution, formatGoals } from '../../cli/status.js';
import { goalMetrics, type GoalMetrics } from '../../core/goal-metrics.js';
import { agentGoalMetrics, goalMetricRows } from '../../db/queries/goal-metrics.js';
import { agents, goals, llmRegistry, tasks } from '../../db/schema/index.js';
import { TickFeed, notebookApp } from '../../runtime/notebook/index.js';
import type { AgentLoopStatus } from '../../runtime/operator.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { thinkInput, thinkScript } from '../helpers/scripted.js';

let handle: MigratedDatabase;
const t0 = Date.UTC(2026, 10, 20, 9);
const at = (minutes: number) => new Date(t0 + minutes * 60_000);
const hostile = '<img src=x onerror=alert(1)>';

/** Goals of `agentId`: one active with 3 tasks (2 open), one paused twice, two completed (60 and 180 min), one failed. */
async function seed(agentId: string): Promise<Record<string, number>> {
  await handle.db.insert(agents).values({ id: agentId, name: agentId });
  await handle.db
    .insert(llmRegistry)
    .values({ agentId, name: 'mind', provider: 'scripted', model: 'script', role: 'agent', priority: 1 });
  const rows = await handle.db
    .insert(goals)
    .values([
      { agentId, title: `ship ${hostile}`, status: 'active', priority: 5, startedAt: at(0) },
      { agentId, title: 'paused one', status: 'paused', interruptions: 2, startedAt: at(0) },
      { agentId, title: 'done fast', status: 'completed', startedAt: at(0), completedAt: at(60) },
      { agentId, title: 'done slow', status: 'completed', startedAt: at(10), completedAt: at(190) },
      { agentId, title: 'gave up', status: 'failed', startedAt: at(0), failedAt: at(30), failureReason: 'no' },
    ])
    .returning({ id: goals.id, title: goals.title });
  const id = Object.fromEntries(rows.map((r) => [r.title, r.id]));
  const active = id[`ship ${hostile}`]!;
  await handle.db.insert(tasks).values([
    { agentId, goalId: active, title: 'a', status: 'open' },
    { agentId, goalId: active, title: 'b', status: 'blocked' },
    { agentId, goalId: active, title: 'c', status: 'done' },
    { agentId, goalId: id['paused one']!, title: 'd', status: 'in_progress' },
    { agentId, goalId: id['done fast']!, title: 'e', status: 'done' },
    { agentId, goalId: id['done fast']!, title: 'f', status: 'cancelled' },
    // No goal: counted nowhere.
    { agentId, title: 'loose', status: 'open' },
  ]);
  return id;
}

beforeAll(async () => {
  handle = await migratedDatabase('goal_metrics');
});
afterAll(async () => {
  await handle?.dispose();
});

describe('goal metrics from the database', () => {
  let ids: Record<string, number>;
  let m: GoalMetrics;
  beforeAll(async () => {
    ids = await seed('gm');
    // Another agent's goal and tasks, and a task of its on gm's goal id, stay out of gm's figures.
    await handle.db.insert(agents).values({ id: 'other', name: 'other' });
    const [g] = await handle.db
      .insert(goals)
      .values({ agentId: 'other', title: 'theirs', status: 'completed', completedAt: at(5) })
      .returning({ id: goals.id });
    await handle.db.insert(tasks).values([
      { agentId: 'other', goalId: g!.id, title: 'x' },
      { agentId: 'other', goalId: ids['done slow']!, title: 'stray' },
    ]);
    m = await agentGoalMetrics(handle.db, 'gm');
  });

  it('reads every goal of the agent with its tasks and open tasks in one statement', async () => {
    const rows = await goalMetricRows(handle.db, 'gm');
    expect(rows.map((r) => [r.title, r.status, r.tasks, r.openTasks, r.interruptions])).toEqual([
      [`ship ${hostile}`, 'active', 3, 2, 0],
      ['paused one', 'paused', 1, 1, 2],
      ['done fast', 'completed', 2, 0, 0],
      ['done slow', 'completed', 0, 0, 0],
      ['gave up', 'failed', 0, 0, 0],
    ]);
    expect(rows[3]!.completedAt).toEqual(at(190));
    expect(rows[3]!.startedAt).toEqual(at(10));
    expect(await goalMetricRows(handle.db, 'nobody')).toEqual([]);
  });

  it('computes the figures from those rows', () => {
    expect(m).toMatchObject({
      total: 5,
      active: 1,
      paused: 1,
      completed: 2,
      failed: 1,
      closed: 3,
      interrupted: 1,
      interruptions: 2,
      tasks: 6,
      openTasks: 3,
      meanMsToAchieve: 120 * 60_000,
      medianMsToAchieve: 120 * 60_000,
      openTasksPerOpenGoal: 1.5,
    });
    expect(m.achievedShare).toBeCloseTo(2 / 3);
    expect(m.tasksPerGoal).toBeCloseTo(6 / 5);
  });

  it('mindloop status prints them in one line; none without goals; why, when the database cannot say', () => {
    const loop: AgentLoopStatus = {
      workflowId: 'agent/gm',
      execution: { status: 'RUNNING', runId: 'r', startTime: at(0).toISOString(), closeTime: null, reason: null },
      status: null,
      queryError: 'no answer',
    };
    const line =
      '  goals        1 active, 2 achieved of 3 closed (67 %), mean 2h00m to achieve (median 2h00m); 1 paused (2 interruptions), 1 failed; 1.2 tasks/goal, 1.5 open per open goal';
    expect(formatExecution(loop, m).split('\n')).toEqual(['  status query: no answer', line]);
    expect(formatExecution(loop)).toBe('  status query: no answer');
    expect(formatGoals(goalMetrics([]))).toBe('  goals        none');
    expect(formatGoals(new Error('database away\nmore'))).toBe('  goals        unavailable: database away');
  });

  it("the notebook's agent overview carries them, with the status line's summary", async () => {
    const client = {
      workflow: {
        getHandle: () => {
          throw new Error('no Temporal here');
        },
      },
    } as unknown as Client;
    const app = notebookApp(
      { db: handle.db, client, feed: new TickFeed(), feedSource: 'in-process', log: () => undefined },
      { host: '127.0.0.1' },
    );
    const res = await app.request('/api/agents/gm', { headers: { host: '127.0.0.1' } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { goals: GoalMetrics & { summary: string } };
    expect(body.goals.summary).toBe(line(m));
    expect(body.goals.total).toBe(5);
    expect(body.goals.perGoal.map((g) => [g.id, g.tasks, g.openTasks, g.msToAchieve])).toEqual([
      [ids[`ship ${hostile}`], 3, 2, null],
      [ids['paused one'], 1, 1, null],
      [ids['done fast'], 2, 0, 60 * 60_000],
      [ids['done slow'], 0, 0, 180 * 60_000],
      [ids['gave up'], 0, 0, null],
    ]);
    // The title travels as JSON text; the page makes a text node of it.
    expect(body.goals.perGoal[0]!.title).toBe(`ship ${hostile}`);
    const bare = await app.request('/api/agents/other', { headers: { host: '127.0.0.1' } });
    expect(((await bare.json()) as { goals: { total: number } }).goals.total).toBe(1);
  });
});

/** The summary the status line prints after `goals`. */
const line = (m: GoalMetrics) => formatGoals(m).replace(/^ {2}goals {8}/, '');

describe("the agent's context", () => {
  it('shows its goal record right after its active goals; an agent without goals gets no such line', async () => {
    await seed('gmctx');
    await handle.db.insert(agents).values({ id: 'nogoals', name: 'nogoals' });
    await handle.db
      .insert(llmRegistry)
      .values({ agentId: 'nogoals', name: 'mind', provider: 'scripted', model: 'script', role: 'agent', priority: 1 });
    const prompts: string[] = [];
    const acts = createActivities({
      db: handle.db,
      llm: {
        env: {},
        toolsDir: '',
        scriptedReply: thinkScript((messages) => {
          prompts.push(messages.map((x) => x.content).join('\n'));
          return 'A thought.';
        }),
      },
    });
    await acts.think(thinkInput('gmctx', 1));
    await acts.think(thinkInput('nogoals', 1));
    const [withGoals, without] = prompts.map((p) => p.split('## Context 3')[1]!.split('## Context 4')[0]!.split('\n'));
    const record = withGoals!.findIndex((l) => l.startsWith('Your goal record: '));
    expect(withGoals![record]).toBe(`Your goal record: ${line(await agentGoalMetrics(handle.db, 'gmctx'))}`);
    expect(withGoals!.slice(record - 2, record)).toEqual([
      'Active goals:',
      `- goal #${'' + (await activeId('gmctx'))} [p5] ship ${hostile}`,
    ]);
    expect(without!.some((l) => l.startsWith('Your goal record'))).toBe(false);
  });
});

async function activeId(agentId: string): Promise<number> {
  const rows = await goalMetricRows(handle.db, agentId);
  return rows.find((r) => r.status === 'active')!.id;
}
