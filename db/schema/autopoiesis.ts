/**
 * Autopoiesis: the learning store, preference counts, the tool catalogue,
 * which tools each agent has discovered, and the audit trail of generated tools.
 */
import { sql } from 'drizzle-orm';
import { check, index, integer, jsonb, pgTable, real, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { agentId, agents } from './agents.js';
import { escalations } from './oversight.js';
import { bigintRef, createdAt, jsonbOf, oneOf, rowId, timestamps, tstz } from './_columns.js';

export const preferenceKinds = ['accept', 'reject'] as const;
export const toolKinds = ['builtin', 'generated', 'designed'] as const;
export const toolStatuses = ['draft', 'testing', 'active', 'deprecated', 'rejected'] as const;
export const discoveryVias = ['teaching', 'escalation', 'design'] as const;
export const generatedToolOutcomes = [
  'registered',
  'rejected_static',
  'failed_tests',
  'rejected_policy',
  'error',
] as const;

/** A learning's arguments: JSON; the allow-list and typed args live in `core/`. */
export type LearningArgs = Record<string, unknown> | unknown[];

/**
 * Long-term learnings. UNIQUE (shard_type, fact_predicate, fact_args): one fact
 * per shard (jsonb equality, so
 * key order does not matter); saving an existing one reinforces it. `agent_id` is nullable:
 * a learning may belong to a shard rather than one agent. `derivation` explains a learning
 * derived from preference counts (`learnings why <id>`).
 */
export const learnings = pgTable(
  'learnings',
  {
    id: rowId(),
    agentId: text('agent_id').references(() => agents.id, { onDelete: 'cascade' }),
    shardType: text('shard_type').notNull(),
    factPredicate: text('fact_predicate').notNull(),
    factArgs: jsonb('fact_args').$type<LearningArgs>().notNull(),
    learnedAt: tstz('learned_at').notNull().defaultNow(),
    sourceCampaign: text('source_campaign'),
    confidence: real('confidence').notNull().default(1.0),
    reinforcements: integer('reinforcements').notNull().default(0),
    /** The rule, pattern, count and threshold that produced it; null for campaign/tool/imported learnings. */
    derivation: jsonb('derivation').$type<Record<string, unknown>>(),
    /** Start of the last decay period that decayed it: a period decays a learning at most once. */
    lastDecayedFor: tstz('last_decayed_for'),
    ...createdAt,
  },
  (t) => [
    uniqueIndex('learnings_shard_predicate_args_uq').on(t.shardType, t.factPredicate, t.factArgs),
    // Loading: confidence > 0.3, by confidence then recency, per shard.
    index('learnings_shard_confidence_idx').on(t.shardType, t.confidence, t.learnedAt),
    index('learnings_agent_id_idx').on(t.agentId),
    index('learnings_learned_at_idx').on(t.learnedAt),
    check('learnings_confidence_check', sql`${sql.identifier('confidence')} between 0 and 1`),
  ],
);

export const learningEventOutcomes = ['saved', 'reinforced', 'refused'] as const;

/**
 * Every save attempt on the learning store, accepted or refused (guard, rate limit, cap):
 * the rate limit counts accepted ones per shard per minute, and nothing is dropped silently.
 */
export const learningEvents = pgTable(
  'learning_events',
  {
    id: rowId(),
    shardType: text('shard_type').notNull(),
    agentId: text('agent_id').references(() => agents.id, { onDelete: 'set null' }),
    outcome: text('outcome', { enum: learningEventOutcomes }).notNull(),
    factPredicate: text('fact_predicate').notNull(),
    factArgs: jsonb('fact_args'),
    learningId: bigintRef('learning_id'),
    source: text('source'),
    /** Why a save was refused. */
    reason: text('reason'),
    ...createdAt,
  },
  (t) => [
    index('learning_events_shard_created_at_idx').on(t.shardType, t.createdAt),
    check('learning_events_outcome_check', oneOf(t.outcome, learningEventOutcomes)),
  ],
);

/** Accept/reject counts per pattern (`action:reason` or `action`); at the threshold a rule fires. */
export const preferenceCounts = pgTable(
  'preference_counts',
  {
    id: rowId(),
    agentId: agentId(),
    shard: text('shard').notNull(),
    kind: text('kind', { enum: preferenceKinds }).notNull(),
    pattern: text('pattern').notNull(),
    count: integer('count').notNull().default(0),
    /** When the pattern crossed the threshold and became a learning. */
    promotedAt: tstz('promoted_at'),
    lastSeenAt: tstz('last_seen_at').notNull().defaultNow(),
    ...timestamps,
  },
  (t) => [
    uniqueIndex('preference_counts_agent_shard_kind_pattern_uq').on(t.agentId, t.shard, t.kind, t.pattern),
    check('preference_counts_kind_check', oneOf(t.kind, preferenceKinds)),
  ],
);

/** A state-machine tool definition: states, allowed transitions, initial state. */
export interface ToolSpec {
  states?: string[];
  initial?: string;
  transitions?: Record<string, string[]>;
  [key: string]: unknown;
}

/** The tool catalogue, shared by all agents; which agent may use a tool is `discovered_tools`. */
export const toolRegistry = pgTable(
  'tool_registry',
  {
    id: rowId(),
    name: text('name').notNull().unique('tool_registry_name_uq'),
    description: text('description'),
    /** The capability it provides (what a generated tool was written for). */
    capability: text('capability'),
    version: integer('version').notNull().default(1),
    kind: text('kind', { enum: toolKinds }).notNull(),
    spec: jsonbOf<ToolSpec>('spec', {}),
    implementation: text('implementation'),
    tests: text('tests'),
    status: text('status', { enum: toolStatuses }).notNull().default('draft'),
    /** An agent id, `oversight` or `human`. */
    createdBy: text('created_by'),
    ...timestamps,
  },
  (t) => [
    index('tool_registry_kind_status_idx').on(t.kind, t.status),
    check('tool_registry_kind_check', oneOf(t.kind, toolKinds)),
    check('tool_registry_status_check', oneOf(t.status, toolStatuses)),
  ],
);

export const discoveredTools = pgTable(
  'discovered_tools',
  {
    id: rowId(),
    agentId: agentId(),
    toolId: bigintRef('tool_id')
      .notNull()
      .references(() => toolRegistry.id, { onDelete: 'cascade' }),
    via: text('via', { enum: discoveryVias }).notNull(),
    escalationId: text('escalation_id').references(() => escalations.id, { onDelete: 'set null' }),
    discoveredAt: tstz('discovered_at').notNull().defaultNow(),
    uses: integer('uses').notNull().default(0),
    lastUsedAt: tstz('last_used_at'),
  },
  (t) => [
    uniqueIndex('discovered_tools_agent_id_tool_id_uq').on(t.agentId, t.toolId),
    index('discovered_tools_tool_id_idx').on(t.toolId),
    check('discovered_tools_via_check', oneOf(t.via, discoveryVias)),
  ],
);

/** Every tool the agent generated (Ouroboros), kept for audit whatever the outcome. */
export const generatedToolsAudit = pgTable(
  'generated_tools_audit',
  {
    id: rowId(),
    agentId: agentId(),
    toolName: text('tool_name').notNull(),
    toolId: bigintRef('tool_id').references(() => toolRegistry.id, { onDelete: 'set null' }),
    /** The capability the original intent needed. */
    intent: text('intent').notNull(),
    implementation: text('implementation').notNull(),
    tests: text('tests'),
    /** `{ ok, violations: [...] }` from the static safety check. */
    safetyCheck: jsonbOf<Record<string, unknown>>('safety_check', {}),
    testResult: jsonb('test_result').$type<Record<string, unknown>>(),
    outcome: text('outcome', { enum: generatedToolOutcomes }).notNull(),
    /** `development`, or `production` with the admin override that allowed it. */
    mode: text('mode').notNull().default('development'),
    approvedBy: text('approved_by'),
    /** The generation run's key (workflow id + run + step): a retried write finds its first row. */
    idempotencyKey: text('idempotency_key').unique('generated_tools_audit_idempotency_key_uq'),
    ...createdAt,
  },
  (t) => [
    index('generated_tools_audit_agent_id_created_at_idx').on(t.agentId, t.createdAt),
    index('generated_tools_audit_tool_name_idx').on(t.toolName),
    check('generated_tools_audit_outcome_check', oneOf(t.outcome, generatedToolOutcomes)),
  ],
);

export type Learning = typeof learnings.$inferSelect;
export type NewLearning = typeof learnings.$inferInsert;
export type LearningEvent = typeof learningEvents.$inferSelect;
export type PreferenceCount = typeof preferenceCounts.$inferSelect;
export type NewPreferenceCount = typeof preferenceCounts.$inferInsert;
export type Tool = typeof toolRegistry.$inferSelect;
export type NewTool = typeof toolRegistry.$inferInsert;
export type DiscoveredTool = typeof discoveredTools.$inferSelect;
export type NewDiscoveredTool = typeof discoveredTools.$inferInsert;
export type GeneratedToolAudit = typeof generatedToolsAudit.$inferSelect;
export type NewGeneratedToolAudit = typeof generatedToolsAudit.$inferInsert;
