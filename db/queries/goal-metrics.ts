/**
 * What the goal metrics (core/goal-metrics.ts) read: every goal of one agent with the count of its
 * tasks and of its unfinished tasks, in one statement (rendered once per handle, as the tick's
 * statements are: the context reads it at every tick).
 */
import { and, asc, eq, sql } from 'drizzle-orm';
import { finishedTaskStatuses, goalMetrics, type GoalMetricRow, type GoalMetrics } from '../../core/goal-metrics.js';
import { statements } from '../prepared.js';
import { goals, tasks } from '../schema/index.js';
import type { Queryable } from './abstracts.js';

/** The longest title a row carries: the metrics show titles in lists, never in full. */
const titleChars = 120;

const finished = sql.raw(finishedTaskStatuses.map((s) => `'${s}'`).join(', '));

const goalMetricStatements = statements('goal_metrics', (q, name) => ({
  rows: q
    .select({
      id: goals.id,
      title: sql<string>`left(${goals.title}, ${sql.raw(String(titleChars))})`,
      status: goals.status,
      startedAt: goals.startedAt,
      createdAt: goals.createdAt,
      completedAt: goals.completedAt,
      failedAt: goals.failedAt,
      interruptions: goals.interruptions,
      tasks: sql<number>`count(${tasks.id})::int`,
      openTasks: sql<number>`(count(${tasks.id}) filter (where ${tasks.status} not in (${finished})))::int`,
    })
    .from(goals)
    .leftJoin(tasks, and(eq(tasks.goalId, goals.id), eq(tasks.agentId, goals.agentId)))
    .where(eq(goals.agentId, sql.placeholder('agentId')))
    .groupBy(goals.id)
    .orderBy(asc(goals.id))
    .prepare(name('rows')),
}));

/** Every goal of the agent, oldest first, with its task counts. */
export async function goalMetricRows(q: Queryable, agentId: string): Promise<GoalMetricRow[]> {
  return goalMetricStatements(q).rows.execute({ agentId });
}

/** The agent's goal metrics. */
export async function agentGoalMetrics(q: Queryable, agentId: string): Promise<GoalMetrics> {
  return goalMetrics(await goalMetricRows(q, agentId));
}
