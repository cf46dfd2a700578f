/**
 * State-machine tools at run time: each agent's current state per tool (so it
 * survives continue-as-new and restarts: it lives here, not in workflow state), and every
 * transition attempt — allowed, refused as invalid, refused as undiscovered or held for a
 * danger zone — as an append-only log.
 */
import { boolean, check, index, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { agentId } from './agents.js';
import { createdAt, jsonbOf, oneOf, rowId, textArray, timestamps } from './_columns.js';

export const toolTransitionResults = ['ok', 'invalid_action', 'undiscovered', 'held', 'error'] as const;

export const toolStates = pgTable(
  'tool_states',
  {
    id: rowId(),
    agentId: agentId(),
    tool: text('tool').notNull(),
    state: text('state').notNull(),
    /** Tool-private session data (the last query's shape, …); small. */
    data: jsonbOf<Record<string, unknown>>('data', {}),
    ...timestamps,
  },
  (t) => [uniqueIndex('tool_states_agent_id_tool_uq').on(t.agentId, t.tool)],
);

export const toolTransitions = pgTable(
  'tool_transitions',
  {
    id: rowId(),
    agentId: agentId(),
    tool: text('tool').notNull(),
    action: text('action').notNull(),
    fromState: text('from_state'),
    toState: text('to_state'),
    result: text('result', { enum: toolTransitionResults }).notNull(),
    args: jsonb('args').$type<Record<string, unknown>>(),
    error: text('error'),
    dangerFlags: textArray('danger_flags'),
    /** Set when the action ran because a human approved it (escalation id). */
    approvedBy: text('approved_by'),
    /** Caller's key (workflow id + tick + cmd id): a retried call finds its first row. */
    idempotencyKey: text('idempotency_key').unique('tool_transitions_idempotency_key_uq'),
    /** What the action returned (a retry returns it again). */
    output: jsonb('output').$type<Record<string, unknown>>(),
    discovered: boolean('discovered').notNull().default(true),
    ...createdAt,
  },
  (t) => [
    index('tool_transitions_agent_id_created_at_idx').on(t.agentId, t.createdAt),
    check('tool_transitions_result_check', oneOf(t.result, toolTransitionResults)),
  ],
);

export type ToolState = typeof toolStates.$inferSelect;
export type ToolTransition = typeof toolTransitions.$inferSelect;
