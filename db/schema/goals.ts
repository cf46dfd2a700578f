/**
 * Goals, their hierarchy, and tasks (`goals`, `goal_links`, `tasks`, auxiliary loops).
 */
import { sql } from 'drizzle-orm';
import { boolean, check, index, integer, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { agentId } from './agents.js';
import { bigintRef, oneOf, rowId, tags, timestamps, tstz } from './_columns.js';

export const goalStatuses = ['active', 'paused', 'completed', 'failed'] as const;
export const goalRelations = ['subgoal', 'depends_on', 'blocks', 'related'] as const;
export const taskStatuses = ['open', 'in_progress', 'blocked', 'done', 'failed', 'cancelled'] as const;
export const replStatuses = ['running', 'stopped', 'error'] as const;

export const goals = pgTable(
  'goals',
  {
    id: rowId(),
    agentId: agentId(),
    title: text('title').notNull(),
    description: text('description'),
    constraints: text('constraints'),
    successCriteria: text('success_criteria'),
    priority: integer('priority').notNull().default(0),
    status: text('status', { enum: goalStatuses }).notNull().default('active'),
    failureReason: text('failure_reason'),
    tags: tags(),
    /** Times the goal was paused or interrupted (goal metrics). */
    interruptions: integer('interruptions').notNull().default(0),
    startedAt: tstz('started_at').defaultNow(),
    completedAt: tstz('completed_at'),
    failedAt: tstz('failed_at'),
    ...timestamps,
  },
  (t) => [
    index('goals_agent_id_status_priority_idx').on(t.agentId, t.status, t.priority),
    check('goals_status_check', oneOf(t.status, goalStatuses)),
  ],
);

export const goalLinks = pgTable(
  'goal_links',
  {
    id: rowId(),
    agentId: agentId(),
    parentGoalId: bigintRef('parent_goal_id')
      .notNull()
      .references(() => goals.id, { onDelete: 'cascade' }),
    childGoalId: bigintRef('child_goal_id')
      .notNull()
      .references(() => goals.id, { onDelete: 'cascade' }),
    relation: text('relation', { enum: goalRelations }).notNull().default('subgoal'),
    ...timestamps,
  },
  (t) => [
    uniqueIndex('goal_links_parent_child_relation_uq').on(t.parentGoalId, t.childGoalId, t.relation),
    index('goal_links_agent_id_idx').on(t.agentId),
    index('goal_links_child_goal_id_idx').on(t.childGoalId),
    check('goal_links_relation_check', oneOf(t.relation, goalRelations)),
    check('goal_links_no_self_link', sql`${sql.identifier('parent_goal_id')} <> ${sql.identifier('child_goal_id')}`),
  ],
);

/** Tasks: pinned first, then by priority. A task may run its own auxiliary loop (child workflow). */
export const tasks = pgTable(
  'tasks',
  {
    id: rowId(),
    agentId: agentId(),
    goalId: bigintRef('goal_id').references(() => goals.id, { onDelete: 'set null' }),
    title: text('title').notNull(),
    description: text('description'),
    status: text('status', { enum: taskStatuses }).notNull().default('open'),
    priority: integer('priority').notNull().default(0),
    pinned: boolean('pinned').notNull().default(false),
    tags: tags(),
    replStatus: text('repl_status', { enum: replStatuses }),
    replWorkflowId: text('repl_workflow_id'),
    replRestarts: integer('repl_restarts').notNull().default(0),
    lastError: text('last_error'),
    /** Set when the auxiliary loop errored: the task waits for review. */
    frozen: boolean('frozen').notNull().default(false),
    completedAt: tstz('completed_at'),
    ...timestamps,
  },
  (t) => [
    index('tasks_agent_id_status_pinned_priority_idx').on(t.agentId, t.status, t.pinned, t.priority),
    index('tasks_goal_id_idx').on(t.goalId),
    index('tasks_agent_id_repl_status_idx').on(t.agentId, t.replStatus),
    check('tasks_status_check', oneOf(t.status, taskStatuses)),
    check('tasks_repl_status_check', oneOf(t.replStatus, replStatuses)),
  ],
);

export type Goal = typeof goals.$inferSelect;
export type NewGoal = typeof goals.$inferInsert;
export type GoalLink = typeof goalLinks.$inferSelect;
export type NewGoalLink = typeof goalLinks.$inferInsert;
export type Task = typeof tasks.$inferSelect;
export type NewTask = typeof tasks.$inferInsert;
