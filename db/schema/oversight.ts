/**
 * The three tiers (human, oversight, agent): escalations, the dual decision log, and the append-only
 * message table between human, oversight and agent.
 */
import { bigint, boolean, check, index, jsonb, pgTable, text } from 'drizzle-orm/pg-core';
import { escalationCategories } from '../../core/escalation.js';
import { agentId } from './agents.js';
import { tasks } from './goals.js';
import { bigintRef, createdAt, jsonbOf, oneOf, rowId, textArray, timestamps, tstz } from './_columns.js';

export { escalationCategories };
export const escalationStatuses = [
  'open',
  'in_progress',
  'awaiting_human',
  'resolved',
  'rejected',
  'timed_out',
  'cancelled',
] as const;
/** Who settled it: conflict rules put a human veto above oversight; `default` = the timeout default. */
export const deciders = ['human', 'oversight', 'default'] as const;
export const oversightAnswers = ['approve', 'nudge', 'reject', 'none'] as const;
export const humanAnswers = ['approve', 'reject', 'nudge', 'veto', 'none'] as const;
export const decisionOutcomes = ['pending', 'executed', 'blocked', 'waiting', 'failed'] as const;
export const tiers = ['human', 'oversight', 'agent'] as const;

/** Escalation ids are business keys (the workflow is `escalation/<id>`). */
export const escalations = pgTable(
  'escalations',
  {
    id: text('id').primaryKey(),
    agentId: agentId(),
    task: text('task').notNull(),
    taskId: bigintRef('task_id').references(() => tasks.id, { onDelete: 'set null' }),
    category: text('category', { enum: escalationCategories }).notNull().default('general'),
    context: jsonbOf<Record<string, unknown>>('context', {}),
    whatITried: text('what_i_tried'),
    status: text('status', { enum: escalationStatuses }).notNull().default('open'),
    solution: text('solution'),
    teachingMoment: text('teaching_moment'),
    /** Tool names granted with the answer (rows land in `discovered_tools`). */
    grantedTools: textArray('granted_tools'),
    deadlineAt: tstz('deadline_at'),
    decidedBy: text('decided_by', { enum: deciders }),
    workflowId: text('workflow_id'),
    resolvedAt: tstz('resolved_at'),
    ...timestamps,
  },
  (t) => [
    index('escalations_agent_id_status_idx').on(t.agentId, t.status, t.createdAt),
    index('escalations_status_deadline_idx').on(t.status, t.deadlineAt),
    check('escalations_category_check', oneOf(t.category, escalationCategories)),
    check('escalations_status_check', oneOf(t.status, escalationStatuses)),
    check('escalations_decided_by_check', oneOf(t.decidedBy, deciders)),
  ],
);

/** What the agent proposed, what oversight and the human answered, and what happened. */
export const decisionLog = pgTable(
  'decision_log',
  {
    id: rowId(),
    agentId: agentId(),
    tick: bigint('tick', { mode: 'number' }),
    proposal: jsonb('proposal').$type<Record<string, unknown>>().notNull(),
    oversightAnswer: text('oversight_answer', { enum: oversightAnswers }).notNull().default('none'),
    /** The nudge or the reason; nudges become learning moments. */
    oversightComment: text('oversight_comment'),
    humanAnswer: text('human_answer', { enum: humanAnswers }).notNull().default('none'),
    humanComment: text('human_comment'),
    outcome: text('outcome', { enum: decisionOutcomes }).notNull().default('pending'),
    dangerFlags: textArray('danger_flags'),
    escalationId: text('escalation_id').references(() => escalations.id, { onDelete: 'set null' }),
    /** Taken in Isolated mode without peers: to be reviewed later. */
    emergencyConsensus: boolean('emergency_consensus').notNull().default(false),
    reviewedAt: tstz('reviewed_at'),
    ...timestamps,
  },
  (t) => [
    index('decision_log_agent_id_created_at_idx').on(t.agentId, t.createdAt),
    index('decision_log_escalation_id_idx').on(t.escalationId),
    check('decision_log_oversight_answer_check', oneOf(t.oversightAnswer, oversightAnswers)),
    check('decision_log_human_answer_check', oneOf(t.humanAnswer, humanAnswers)),
    check('decision_log_outcome_check', oneOf(t.outcome, decisionOutcomes)),
  ],
);

/** Append-only conversation between the tiers (nothing updates or deletes these rows). */
export const partnershipMessages = pgTable(
  'partnership_messages',
  {
    id: rowId(),
    agentId: agentId(),
    fromTier: text('from_tier', { enum: tiers }).notNull(),
    toTier: text('to_tier', { enum: tiers }).notNull(),
    /** question, answer, teaching, nudge, approval, veto, info, … */
    kind: text('kind').notNull(),
    body: text('body').notNull(),
    escalationId: text('escalation_id').references(() => escalations.id, { onDelete: 'set null' }),
    metadata: jsonbOf<Record<string, unknown>>('metadata', {}),
    /** Writer's key (escalation workflow + step): a retried write finds its first row. */
    idempotencyKey: text('idempotency_key').unique('partnership_messages_idempotency_key_uq'),
    ...createdAt,
  },
  (t) => [
    index('partnership_messages_agent_id_created_at_idx').on(t.agentId, t.createdAt),
    index('partnership_messages_escalation_id_idx').on(t.escalationId),
    check('partnership_messages_from_tier_check', oneOf(t.fromTier, tiers)),
    check('partnership_messages_to_tier_check', oneOf(t.toTier, tiers)),
  ],
);

export type Escalation = typeof escalations.$inferSelect;
export type NewEscalation = typeof escalations.$inferInsert;
export type DecisionLogEntry = typeof decisionLog.$inferSelect;
export type NewDecisionLogEntry = typeof decisionLog.$inferInsert;
export type PartnershipMessage = typeof partnershipMessages.$inferSelect;
export type NewPartnershipMessage = typeof partnershipMessages.$inferInsert;
