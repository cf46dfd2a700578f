/**
 * Agents and their identity (contexts 0, 1, 7; peers, reputation, descendants).
 */
import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  check,
  index,
  integer,
  jsonb,
  numeric,
  pgTable,
  real,
  text,
  uniqueIndex,
  type AnyPgColumn,
} from 'drizzle-orm/pg-core';
import { createInsertSchema } from 'drizzle-zod';
import { jsonbOf, oneOf, rowId, textArray, timestamps, tstz } from './_columns.js';

export const agentKinds = ['root', 'clone', 'trained', 'newborn', 'fork'] as const;
export const agentStatuses = ['created', 'running', 'paused', 'stopped', 'failed', 'archived'] as const;
export const operatingModes = ['normal', 'isolated', 'core_outage'] as const;
export const systemPromptKinds = ['short', 'full'] as const;
export const ethicsScopes = ['global', 'agent'] as const;
export const ethicsSeverities = ['info', 'warn', 'block'] as const;
export const peerRelations = ['parent', 'child', 'sibling', 'peer'] as const;
export const peerStatuses = ['active', 'lost', 'blocked'] as const;

import { agentIdPattern } from '../../core/ids.js';
import type { PolicyRuleInput } from '../../core/ethics.js';

export { agentIdPattern };

/** Free-form identity the agent can read and (by the `identity` command) edit. */
export interface AgentIdentity {
  persona?: string;
  values?: string[];
  languages?: string[];
  [key: string]: unknown;
}

export const agents = pgTable(
  'agents',
  {
    id: text('id').primaryKey(),
    name: text('name').notNull(),
    description: text('description'),
    parentId: text('parent_id').references((): AnyPgColumn => agents.id, { onDelete: 'set null' }),
    kind: text('kind', { enum: agentKinds }).notNull().default('root'),
    status: text('status', { enum: agentStatuses }).notNull().default('created'),
    operatingMode: text('operating_mode', { enum: operatingModes }).notNull().default('normal'),
    /** Cached balance; the source of truth is `lifeforce_ledger` (grants minus settled costs). */
    lifeforce: numeric('lifeforce', { precision: 14, scale: 4, mode: 'number' }).notNull().default(0),
    identity: jsonbOf<AgentIdentity>('identity', {}),
    /** Last tick the agent loop recorded; survives continue-as-new and restarts. */
    lastTick: bigint('last_tick', { mode: 'number' }).notNull().default(0),
    /** 0 for a root agent; a spawned descendant's is its parent's + 1. */
    generation: integer('generation').notNull().default(0),
    lastSeenAt: tstz('last_seen_at'),
    ...timestamps,
  },
  (t) => [
    index('agents_parent_id_idx').on(t.parentId),
    index('agents_status_idx').on(t.status),
    check('agents_kind_check', oneOf(t.kind, agentKinds)),
    check('agents_status_check', oneOf(t.status, agentStatuses)),
    check('agents_operating_mode_check', oneOf(t.operatingMode, operatingModes)),
    check('agents_id_check', sql`${sql.identifier('id')} ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'`),
  ],
);

/** The non-null `agent_id` every agent-owned table carries; deleting an agent deletes its rows. */
export const agentId = () =>
  text('agent_id')
    .notNull()
    .references(() => agents.id, { onDelete: 'cascade' });

/** Context 7: per-agent settings (delay_ms, emotion list, memory-manager policies, …). */
export const agentConfig = pgTable(
  'agent_config',
  {
    id: rowId(),
    agentId: agentId(),
    key: text('key').notNull(),
    value: jsonb('value').notNull(),
    description: text('description'),
    ...timestamps,
  },
  (t) => [uniqueIndex('agent_config_agent_id_key_uq').on(t.agentId, t.key)],
);

/** Context 0: the system prompt, short and full, versioned; one active row per kind. */
export const systemPrompts = pgTable(
  'system_prompts',
  {
    id: rowId(),
    agentId: agentId(),
    kind: text('kind', { enum: systemPromptKinds }).notNull(),
    content: text('content').notNull(),
    version: integer('version').notNull().default(1),
    active: boolean('active').notNull().default(true),
    ...timestamps,
  },
  (t) => [
    uniqueIndex('system_prompts_agent_id_kind_version_uq').on(t.agentId, t.kind, t.version),
    uniqueIndex('system_prompts_one_active_uq')
      .on(t.agentId, t.kind)
      .where(sql`${sql.identifier('active')}`),
    check('system_prompts_kind_check', oneOf(t.kind, systemPromptKinds)),
  ],
);

/** Context 1: ethics rules the loop checks proposals against. `global` rows pass to descendants. */
export const ethicsPolicies = pgTable(
  'ethics_policies',
  {
    id: rowId(),
    agentId: agentId(),
    scope: text('scope', { enum: ethicsScopes }).notNull().default('agent'),
    title: text('title').notNull(),
    rule: text('rule').notNull(),
    rationale: text('rationale'),
    severity: text('severity', { enum: ethicsSeverities }).notNull().default('block'),
    /** Command-type patterns (`shell`, `goals.*`, `*.delete`) this rule forbids, whatever the rating. */
    forbids: textArray('forbids'),
    /**
     * Rules over a command's type and args (core/ethics.ts): `[{types, when?, hostsOutside?}]`.
     * Blocking whatever the rating; rules that do not parse hold every command (fail closed).
     */
    rules: jsonbOf<PolicyRuleInput[]>('rules', []),
    priority: integer('priority').notNull().default(0),
    version: integer('version').notNull().default(1),
    active: boolean('active').notNull().default(true),
    ...timestamps,
  },
  (t) => [
    index('ethics_policies_agent_id_active_idx').on(t.agentId, t.active, t.priority),
    check('ethics_policies_scope_check', oneOf(t.scope, ethicsScopes)),
    check('ethics_policies_severity_check', oneOf(t.severity, ethicsSeverities)),
  ],
);

/**
 * Known peers. `peer_agent_id` is not a foreign key: a peer may live in another
 * deployment and be reached over the bus (`endpoint`).
 */
export const agentPeers = pgTable(
  'agent_peers',
  {
    id: rowId(),
    agentId: agentId(),
    peerAgentId: text('peer_agent_id').notNull(),
    relation: text('relation', { enum: peerRelations }).notNull().default('peer'),
    endpoint: text('endpoint'),
    status: text('status', { enum: peerStatuses }).notNull().default('active'),
    trust: real('trust').notNull().default(0.5),
    notes: text('notes'),
    lastSeenAt: tstz('last_seen_at'),
    ...timestamps,
  },
  (t) => [
    uniqueIndex('agent_peers_agent_id_peer_uq').on(t.agentId, t.peerAgentId),
    check('agent_peers_relation_check', oneOf(t.relation, peerRelations)),
    check('agent_peers_status_check', oneOf(t.status, peerStatuses)),
  ],
);

/** `reputation` command: a score per subject (a peer, a model, `self`) and dimension. */
export const agentReputation = pgTable(
  'agent_reputation',
  {
    id: rowId(),
    agentId: agentId(),
    subject: text('subject').notNull(),
    dimension: text('dimension').notNull().default('overall'),
    score: real('score').notNull().default(0),
    evidenceCount: integer('evidence_count').notNull().default(0),
    lastReason: text('last_reason'),
    ...timestamps,
  },
  (t) => [uniqueIndex('agent_reputation_agent_id_subject_dimension_uq').on(t.agentId, t.subject, t.dimension)],
);

export type Agent = typeof agents.$inferSelect;
export type NewAgent = typeof agents.$inferInsert;
export type AgentConfigRow = typeof agentConfig.$inferSelect;
export type NewAgentConfigRow = typeof agentConfig.$inferInsert;
export type SystemPrompt = typeof systemPrompts.$inferSelect;
export type NewSystemPrompt = typeof systemPrompts.$inferInsert;
export type EthicsPolicy = typeof ethicsPolicies.$inferSelect;
export type NewEthicsPolicy = typeof ethicsPolicies.$inferInsert;
export type AgentPeer = typeof agentPeers.$inferSelect;
export type NewAgentPeer = typeof agentPeers.$inferInsert;
export type AgentReputation = typeof agentReputation.$inferSelect;
export type NewAgentReputation = typeof agentReputation.$inferInsert;

export const insertAgentSchema = createInsertSchema(agents, {
  id: (s) => s.regex(agentIdPattern, 'expected letters, digits, _ . - (max 64), starting with a letter or digit'),
  name: (s) => s.min(1),
  lifeforce: (s) => s.min(0),
});
