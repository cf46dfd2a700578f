/**
 * Processes and reflexes: the process log, the command log (the
 * idempotency record of command application), anti-stagnation bookkeeping, thinking methods.
 */
import { sql } from 'drizzle-orm';
import { bigint, boolean, check, index, integer, jsonb, pgTable, real, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { createInsertSchema } from 'drizzle-zod';
import { agentId } from './agents.js';
import { bigintRef, createdAt, jsonbOf, oneOf, rowId, tags, timestamps, tstz } from './_columns.js';

export const processStatuses = ['ok', 'warning', 'error', 'timeout', 'offline', 'close'] as const;
export const commandStatuses = ['applied', 'rejected', 'unvalidated', 'error', 'unknown'] as const;
export const stagnationClasses = ['no_new_data', 'monotone_context', 'repeated_thoughts', 'fatigue'] as const;

/** Results of external processes (sandbox runs, llm_task loops, memory manager, schedules…). */
export const processLog = pgTable(
  'process_log',
  {
    id: rowId(),
    agentId: agentId(),
    processId: text('process_id').notNull(),
    kind: text('kind').notNull(),
    name: text('name'),
    status: text('status', { enum: processStatuses }).notNull(),
    message: text('message'),
    payload: jsonb('payload').$type<Record<string, unknown>>(),
    tick: bigint('tick', { mode: 'number' }),
    /** Closed entries leave the context; cleanup deletes old closed ones. */
    closedAt: tstz('closed_at'),
    ...timestamps,
  },
  (t) => [
    // The context query: this agent's entries that are still open.
    index('process_log_agent_id_open_idx')
      .on(t.agentId, t.createdAt)
      .where(sql`${sql.identifier('closed_at')} is null`),
    index('process_log_agent_id_process_id_idx').on(t.agentId, t.processId),
    index('process_log_closed_at_idx').on(t.closedAt),
    check('process_log_status_check', oneOf(t.status, processStatuses)),
  ],
);

/**
 * Every parsed command of every tick. UNIQUE (agent_id, tick, cmd_id) is the idempotency key
 * of command application: a retried activity finds the first attempt's row instead of
 * applying the command twice.
 */
export const commandLog = pgTable(
  'command_log',
  {
    id: rowId(),
    agentId: agentId(),
    tick: bigint('tick', { mode: 'number' }).notNull(),
    cmdId: text('cmd_id').notNull(),
    type: text('type').notNull(),
    args: jsonbOf<Record<string, unknown>>('args', {}),
    description: text('description'),
    status: text('status', { enum: commandStatuses }).notNull(),
    reason: text('reason'),
    result: jsonb('result'),
    /** The tick's validation rating and the threshold the command type required. */
    rating: real('rating'),
    threshold: real('threshold'),
    workflowId: text('workflow_id'),
    /** Marks for later review, e.g. `emergency_consensus` (decided in isolated mode, no peer to ask). */
    tags: tags(),
    ...timestamps,
  },
  (t) => [
    uniqueIndex('command_log_agent_id_tick_cmd_id_uq').on(t.agentId, t.tick, t.cmdId),
    index('command_log_agent_id_type_idx').on(t.agentId, t.type),
    index('command_log_agent_id_status_idx').on(t.agentId, t.status),
    check('command_log_status_check', oneOf(t.status, commandStatuses)),
  ],
);

/** Break-loop strategies with their running before/after effect (cheap ones first). */
export const stagnationStrategies = pgTable(
  'stagnation_strategies',
  {
    id: rowId(),
    agentId: agentId(),
    name: text('name').notNull(),
    class: text('class', { enum: stagnationClasses }).notNull(),
    description: text('description'),
    /** Relative cost; the cheapest applicable strategy is tried first. */
    cost: real('cost').notNull().default(1),
    uses: integer('uses').notNull().default(0),
    /** Running mean of (novelty after − novelty before). */
    meanEffect: real('mean_effect').notNull().default(0),
    enabled: boolean('enabled').notNull().default(true),
    params: jsonbOf<Record<string, unknown>>('params', {}),
    lastUsedAt: tstz('last_used_at'),
    ...timestamps,
  },
  (t) => [
    uniqueIndex('stagnation_strategies_agent_id_name_uq').on(t.agentId, t.name),
    index('stagnation_strategies_agent_id_class_cost_idx').on(t.agentId, t.class, t.cost),
    check('stagnation_strategies_class_check', oneOf(t.class, stagnationClasses)),
  ],
);

/** One row per anti-stagnation intervention (reflex-lite or strategy) and its measured effect. */
export const antiStagnationMetrics = pgTable(
  'anti_stagnation_metrics',
  {
    id: rowId(),
    agentId: agentId(),
    tick: bigint('tick', { mode: 'number' }).notNull(),
    diagnosis: text('diagnosis', { enum: stagnationClasses }),
    /** `reflex_lite` or the strategy's name. */
    action: text('action').notNull(),
    strategyId: bigintRef('strategy_id').references(() => stagnationStrategies.id, { onDelete: 'set null' }),
    noveltyBefore: real('novelty_before'),
    noveltyAfter: real('novelty_after'),
    effect: real('effect'),
    /** Reflex parameters in force (temperature, penalties, top_p, rephrase). */
    params: jsonbOf<Record<string, unknown>>('params', {}),
    evaluatedAt: tstz('evaluated_at'),
    ...createdAt,
  },
  (t) => [
    index('anti_stagnation_metrics_agent_id_tick_idx').on(t.agentId, t.tick),
    index('anti_stagnation_metrics_strategy_id_idx').on(t.strategyId),
    check('anti_stagnation_metrics_diagnosis_check', oneOf(t.diagnosis, stagnationClasses)),
  ],
);

/** Named ways of thinking the agent can switch to (`thinking_methods` command). */
export const thinkingMethods = pgTable(
  'thinking_methods',
  {
    id: rowId(),
    agentId: agentId(),
    name: text('name').notNull(),
    description: text('description'),
    /** Instructions injected into the context while the method is active. */
    prompt: text('prompt').notNull(),
    tags: tags(),
    uses: integer('uses').notNull().default(0),
    meanRating: real('mean_rating'),
    active: boolean('active').notNull().default(false),
    enabled: boolean('enabled').notNull().default(true),
    ...timestamps,
  },
  (t) => [uniqueIndex('thinking_methods_agent_id_name_uq').on(t.agentId, t.name)],
);

export type ProcessLogEntry = typeof processLog.$inferSelect;
export type NewProcessLogEntry = typeof processLog.$inferInsert;
export type CommandLogEntry = typeof commandLog.$inferSelect;
export type NewCommandLogEntry = typeof commandLog.$inferInsert;
export type StagnationStrategy = typeof stagnationStrategies.$inferSelect;
export type NewStagnationStrategy = typeof stagnationStrategies.$inferInsert;
export type AntiStagnationMetric = typeof antiStagnationMetrics.$inferSelect;
export type NewAntiStagnationMetric = typeof antiStagnationMetrics.$inferInsert;
export type ThinkingMethod = typeof thinkingMethods.$inferSelect;
export type NewThinkingMethod = typeof thinkingMethods.$inferInsert;

export const insertCommandLogSchema = createInsertSchema(commandLog, {
  cmdId: (s) => s.min(1),
  type: (s) => s.min(1),
  tick: (s) => s.min(0),
});
