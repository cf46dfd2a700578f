/**
 * Successor forks and their verdicts. Ids are business keys (`fork/<id>`).
 * Cleanup destroys the fork's state but never these rows: the verdict and artifacts stay.
 */
import { sql } from 'drizzle-orm';
import {
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  real,
  text,
  uniqueIndex,
  type AnyPgColumn,
} from 'drizzle-orm/pg-core';
import { agentId, agents } from './agents.js';
import { bigintRef, jsonbOf, oneOf, rowId, timestamps, tstz } from './_columns.js';

export const forkStatuses = [
  'pending',
  'spawning',
  'running',
  'evaluating',
  'completed',
  'failed',
  'cancelled',
  'budget_exceeded',
] as const;
export const verdictValues = ['APPROVE', 'REJECT', 'NEEDS_REVISION'] as const;
export const forkGates = ['pending', 'approved', 'rejected', 'expired'] as const;

/** An architecture patch: a prompt, config constant, strategy or tool implementation swap, or a module. */
export interface ForkPatch {
  kind: string;
  target: string;
  value: unknown;
  [key: string]: unknown;
}
/** Defaults: 1 h wall, $5 model cost, 10 GB disk, 2 CPU cores. */
export interface ForkBudget {
  wallMs?: number;
  costUsd?: number;
  diskBytes?: number;
  cpus?: number;
  lifeforce?: number;
}
export interface ForkArtifact {
  name: string;
  uri?: string;
  sha256?: string;
  bytes?: number;
  [key: string]: unknown;
}

export const forks = pgTable(
  'forks',
  {
    id: text('id').primaryKey(),
    /** The parent agent (never written by the fork). */
    agentId: agentId(),
    /** The isolated copy: an `agents` row of kind `fork` (scoped copy) … */
    forkAgentId: text('fork_agent_id').references((): AnyPgColumn => agents.id, { onDelete: 'set null' }),
    /** … or the Postgres schema holding the copy. */
    schemaName: text('schema_name'),
    patch: jsonb('patch').$type<ForkPatch>().notNull(),
    /** sha256 hex of the canonical patch. */
    patchHash: text('patch_hash').notNull(),
    /** The evaluation task run inside the sandbox. */
    evaluation: jsonbOf<Record<string, unknown>>('evaluation', {}),
    budget: jsonbOf<ForkBudget>('budget', {}),
    /** What the fork spent (same keys as the budget). */
    usage: jsonbOf<ForkBudget>('usage', {}),
    status: text('status', { enum: forkStatuses }).notNull().default('pending'),
    error: text('error'),
    /** Set when this fork is the independent verifier of another fork's verdict. */
    auditsForkId: text('audits_fork_id').references((): AnyPgColumn => forks.id, { onDelete: 'set null' }),
    workflowId: text('workflow_id'),
    startedAt: tstz('started_at'),
    finishedAt: tstz('finished_at'),
    cleanedAt: tstz('cleaned_at'),
    /** When the isolated copy was complete (spawn time = ready_at − started_at). */
    readyAt: tstz('ready_at'),
    /** The human gate on an APPROVE: pending until approved, rejected or lapsed at the deadline. */
    gate: text('gate', { enum: forkGates }),
    gateBy: text('gate_by'),
    gateAt: tstz('gate_at'),
    ...timestamps,
  },
  (t) => [
    index('forks_agent_id_status_idx').on(t.agentId, t.status),
    index('forks_patch_hash_idx').on(t.patchHash),
    check('forks_status_check', oneOf(t.status, forkStatuses)),
    check('forks_gate_check', oneOf(t.gate, forkGates)),
    check('forks_patch_hash_check', sql`${sql.identifier('patch_hash')} ~ '^[0-9a-f]{64}$'`),
  ],
);

/** One verdict per fork. Applying it needs the human gate (`applied_at`, `applied_by`). */
export const verdicts = pgTable(
  'verdicts',
  {
    id: rowId(),
    agentId: agentId(),
    forkId: text('fork_id')
      .notNull()
      .references(() => forks.id, { onDelete: 'cascade' }),
    verdict: text('verdict', { enum: verdictValues }).notNull(),
    confidence: real('confidence').notNull(),
    patchHash: text('patch_hash').notNull(),
    evaluationSummary: text('evaluation_summary').notNull(),
    caveats: jsonbOf<string[]>('caveats', []),
    artifacts: jsonbOf<ForkArtifact[]>('artifacts', []),
    appliedAt: tstz('applied_at'),
    appliedBy: text('applied_by'),
    auditedByForkId: text('audited_by_fork_id').references(() => forks.id, { onDelete: 'set null' }),
    ...timestamps,
  },
  (t) => [
    uniqueIndex('verdicts_fork_id_uq').on(t.forkId),
    index('verdicts_agent_id_created_at_idx').on(t.agentId, t.createdAt),
    index('verdicts_patch_hash_idx').on(t.patchHash),
    check('verdicts_verdict_check', oneOf(t.verdict, verdictValues)),
    check('verdicts_confidence_check', sql`${sql.identifier('confidence')} between 0 and 1`),
  ],
);

/**
 * The fork's copy of the tool registry (the registry is global, so the copy is scoped to the
 * fork's agent id and goes with it: deleting the fork agent at cleanup cascades here). A tool
 * patch is applied to this copy, never to `tool_registry`, until the human gate approves.
 */
export const forkToolRegistry = pgTable(
  'fork_tool_registry',
  {
    id: rowId(),
    /** The fork's agent id (`fk.<forkId>`). */
    agentId: agentId(),
    /** The `tool_registry` row this was copied from; null for a tool the patch adds. */
    toolId: bigintRef('tool_id'),
    name: text('name').notNull(),
    version: integer('version').notNull(),
    kind: text('kind').notNull(),
    status: text('status').notNull(),
    spec: jsonbOf<Record<string, unknown>>('spec', {}),
    implementation: text('implementation'),
    tests: text('tests'),
    /** Set when the fork's patch replaced this tool's implementation. */
    patched: boolean('patched').notNull().default(false),
    ...timestamps,
  },
  (t) => [uniqueIndex('fork_tool_registry_agent_id_name_uq').on(t.agentId, t.name)],
);

export type Fork = typeof forks.$inferSelect;
export type NewFork = typeof forks.$inferInsert;
export type Verdict = typeof verdicts.$inferSelect;
export type NewVerdict = typeof verdicts.$inferInsert;
