/**
 * Nerves (core/nerves/): every decision a nerve made, its learning per (state, bucket) case —
 * the LLM's counted choices and the rule once promoted — and the log of promotions, demotions
 * and their undos. The learning itself is core/nerves/modes.ts; the writes are db/queries/nerves.ts.
 */
import {
  bigint,
  check,
  doublePrecision,
  index,
  integer,
  jsonb,
  numeric,
  pgTable,
  text,
  uniqueIndex,
  type AnyPgColumn,
} from 'drizzle-orm/pg-core';
import { decidedByValues, nerveModes } from '../../core/nerves/modes.js';
import { agentId } from './agents.js';
import { createdAt, jsonbOf, oneOf, rowId, timestamps, tstz } from './_columns.js';

export const nerveOutcomes = ['ok', 'bad'] as const;
export const nerveEventKinds = ['promote', 'demote', 'undo'] as const;

/** Append-only: one row per decision, keyed by the caller's idempotency key. */
export const nerveDecisions = pgTable(
  'nerve_decisions',
  {
    id: rowId(),
    agentId: agentId(),
    nerve: text('nerve').notNull(),
    state: text('state').notNull(),
    bucket: text('bucket').notNull(),
    /** null: the reply named no valid action (the nerve stayed in its state). */
    action: text('action'),
    toState: text('to_state').notNull(),
    decidedBy: text('decided_by', { enum: decidedByValues }).notNull(),
    mode: text('mode', { enum: nerveModes }).notNull(),
    /** Judged against the ground truth; null when nothing judged it. */
    outcome: text('outcome', { enum: nerveOutcomes }),
    /** What the decision cost: its state's LF, plus the LLM call's as priced. */
    lf: numeric('lf', { precision: 14, scale: 4, mode: 'number' }).notNull().default(0),
    /** From the decision's start to its action being known. */
    latencyMs: integer('latency_ms').notNull(),
    /** The model's reply when it named no valid action (clipped). */
    reply: text('reply'),
    /** The ledger key the state's cost was held under. */
    ledgerKey: text('ledger_key'),
    idempotencyKey: text('idempotency_key').notNull().unique('nerve_decisions_idempotency_key_uq'),
    ...createdAt,
  },
  (t) => [
    index('nerve_decisions_agent_id_nerve_id_idx').on(t.agentId, t.nerve, t.id),
    check('nerve_decisions_decided_by_check', oneOf(t.decidedBy, decidedByValues)),
    check('nerve_decisions_mode_check', oneOf(t.mode, nerveModes)),
    check('nerve_decisions_outcome_check', oneOf(t.outcome, nerveOutcomes)),
  ],
);

/** One row per (agent, nerve, state, bucket) case decided: its counted choices and its rule (`action` set) once promoted. */
export const nerveRules = pgTable(
  'nerve_rules',
  {
    id: rowId(),
    agentId: agentId(),
    nerve: text('nerve').notNull(),
    state: text('state').notNull(),
    bucket: text('bucket').notNull(),
    /** The rule's action; null while the case has no rule. */
    action: text('action'),
    /** The rule's counted choices and agreement when promoted (0 without a rule). */
    support: integer('support').notNull().default(0),
    agreement: doublePrecision('agreement').notNull().default(0),
    /** The LLM's choices counted since the case last had its counters reset: action → count. */
    counts: jsonbOf<Record<string, number>>('counts', {}),
    promotedAt: tstz('promoted_at'),
    demotedAt: tstz('demoted_at'),
    ...timestamps,
  },
  (t) => [uniqueIndex('nerve_rules_agent_id_nerve_state_bucket_uq').on(t.agentId, t.nerve, t.state, t.bucket)],
);

/** Append-only: promotions, demotions and undos, each with what it changed. */
export const nerveRuleEvents = pgTable(
  'nerve_rule_events',
  {
    id: rowId(),
    agentId: agentId(),
    nerve: text('nerve').notNull(),
    kind: text('kind', { enum: nerveEventKinds }).notNull(),
    state: text('state').notNull(),
    bucket: text('bucket').notNull(),
    action: text('action').notNull(),
    support: integer('support').notNull(),
    agreement: doublePrecision('agreement').notNull(),
    /** The event an undo reversed. */
    undoes: bigint('undoes', { mode: 'number' }).references((): AnyPgColumn => nerveRuleEvents.id, {
      onDelete: 'set null',
    }),
    /** The decision that caused it (none for an undo). */
    decisionId: bigint('decision_id', { mode: 'number' }).references(() => nerveDecisions.id, { onDelete: 'set null' }),
    /** The event as core/nerves/modes.ts returned it (a demotion carries what it removed). */
    event: jsonb('event').$type<Record<string, unknown>>().notNull(),
    ...createdAt,
  },
  (t) => [
    index('nerve_rule_events_agent_id_nerve_id_idx').on(t.agentId, t.nerve, t.id),
    index('nerve_rule_events_decision_id_idx').on(t.decisionId),
    index('nerve_rule_events_undoes_idx').on(t.undoes),
    check('nerve_rule_events_kind_check', oneOf(t.kind, nerveEventKinds)),
  ],
);

export type NerveDecisionRow = typeof nerveDecisions.$inferSelect;
export type NerveRuleRow = typeof nerveRules.$inferSelect;
export type NerveRuleEventRow = typeof nerveRuleEvents.$inferSelect;
