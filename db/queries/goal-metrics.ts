/**
 * What the goal metrics (core/goal-metrics.ts) read: every goal of one agent with the count of its
 * tasks and of its unfinished tasks, in one statement (rendered once per handle); the tick's
 * context reads the same query within its own statement (activities/tick/context.ts).
 */
import { and, asc, eq, sql } from 'drizzle-orm';
import { finishedTaskStatuses, goalMetrics, type GoalMetricRow, type GoalMetrics } from '../../core/goal-metrics.js';
import { statements } from '../prepared.js';
import { goals, tasks } from '../schema/index.js';
import type { Queryable } from './abstracts.js';

/** The longest title a row carries: the metrics show titles in lists, never in full. */
const titleChars = 120;

const finished = sql.raw(finishedTaskStatuses.map((s) => `'${s}'`).join(', '));

/**
 * Every goal of one agent (placeholder `agentId`), oldest first, with its task counts; the
 * computed columns named, so that the query can also be read as json (`goalMetricRowsOf`).
 */
export function goalMetricRowsQuery(q: Queryable) {
  return q
    .select({
      id: goals.id,
      title: sql<string>`left(${goals.title}, ${sql.raw(String(titleChars))})`.as('title'),
      status: goals.status,
      startedAt: goals.startedAt,
      createdAt: goals.createdAt,
      completedAt: goals.completedAt,
      failedAt: goals.failedAt,
      interruptions: goals.interruptions,
      tasks: sql<number>`count(${tasks.id})::int`.as('tasks'),
      openTasks: sql<number>`(count(${tasks.id}) filter (where ${tasks.status} not in (${finished})))::int`.as(
        'open_tasks',
      ),
    })
    .from(goals)
    .leftJoin(tasks, and(eq(tasks.goalId, goals.id), eq(tasks.agentId, goals.agentId)))
    .where(eq(goals.agentId, sql.placeholder('agentId')))
    .groupBy(goals.id)
    .orderBy(asc(goals.id));
}

/** `jsonRows(goalMetricRowsQuery(…))` (db/json-rows.ts) read back as its rows. */
export function goalMetricRowsOf(json: unknown): GoalMetricRow[] {
  const date = (v: unknown) => (v == null ? null : new Date(v as string));
  return (json as Array<Record<string, unknown>>).map((r) => ({
    id: Number(r.id),
    title: r.title as string,
    status: r.status as string,
    startedAt: date(r.started_at),
    createdAt: date(r.created_at)!,
    completedAt: date(r.completed_at),
    failedAt: date(r.failed_at),
    interruptions: Number(r.interruptions),
    tasks: Number(r.tasks),
    openTasks: Number(r.open_tasks),
  }));
}

const goalMetricStatements = statements('goal_metrics', (q, name) => ({
  rows: goalMetricRowsQuery(q).prepare(name('rows')),
}));

/** Every goal of the agent, oldest first, with its task counts. */
export async function goalMetricRows(q: Queryable, agentId: string): Promise<GoalMetricRow[]> {
  return goalMetricStatements(q).rows.execute({ agentId });
}

/** The agent's goal metrics. */
export async function agentGoalMetrics(q: Queryable, agentId: string): Promise<GoalMetrics> {
  return goalMetrics(await goalMetricRows(q, agentId));
}
