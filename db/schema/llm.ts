/**
 * LLM registry (per-role choice, failover, validators and their trust), per-call token/cost
 * accounting, and the exact prompt of each main-loop tick.
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
} from 'drizzle-orm/pg-core';
import { agentId } from './agents.js';
import type { StoredPromptMessage } from '../../core/tick-prompt.js';
import { bigintRef, createdAt, jsonbOf, oneOf, rowId, timestamps, tstz } from './_columns.js';
import { llmProviders, llmRoles } from './_llm-kinds.js';
import { models } from './models.js';

export { llmProviders, llmRoles };
export const llmTiers = ['small', 'medium', 'large'] as const;

/** Provider parameters passed through to the chat model (temperature, top_p, …). */
export type LlmParams = Record<string, unknown>;

export const llmRegistry = pgTable(
  'llm_registry',
  {
    id: rowId(),
    agentId: agentId(),
    name: text('name').notNull(),
    provider: text('provider', { enum: llmProviders }).notNull(),
    model: text('model').notNull(),
    baseUrl: text('base_url'),
    /** The NAME of the environment variable holding the key; the key itself is never stored. */
    apiKeyEnv: text('api_key_env'),
    /** The catalogue entry this row was assigned from; null for rows written directly. */
    modelName: text('model_name').references(() => models.name, { onDelete: 'restrict' }),
    role: text('role', { enum: llmRoles }).notNull().default('agent'),
    /** Failover order within a role: lower first. */
    priority: integer('priority').notNull().default(100),
    validator: boolean('validator').notNull().default(false),
    trust: real('trust').notNull().default(1.0),
    excluded: boolean('excluded').notNull().default(false),
    excludedReason: text('excluded_reason'),
    /** Lifeforce pricing tier. */
    tier: text('tier', { enum: llmTiers }),
    costPer1kInput: numeric('cost_per_1k_input', { precision: 12, scale: 6, mode: 'number' }).notNull().default(0),
    costPer1kOutput: numeric('cost_per_1k_output', { precision: 12, scale: 6, mode: 'number' }).notNull().default(0),
    /** USD per 1 000 prompt tokens read from the provider's prompt cache; null: `cost_per_1k_input`. */
    costPer1kCachedInput: numeric('cost_per_1k_cached_input', { precision: 12, scale: 6, mode: 'number' }),
    contextWindow: integer('context_window'),
    enabled: boolean('enabled').notNull().default(true),
    params: jsonbOf<LlmParams>('params', {}),
    lastOkAt: tstz('last_ok_at'),
    lastErrorAt: tstz('last_error_at'),
    lastError: text('last_error'),
    consecutiveFailures: integer('consecutive_failures').notNull().default(0),
    ...timestamps,
  },
  (t) => [
    uniqueIndex('llm_registry_agent_id_name_uq').on(t.agentId, t.name),
    index('llm_registry_agent_id_role_priority_idx').on(t.agentId, t.role, t.priority),
    index('llm_registry_model_name_idx').on(t.modelName),
    check('llm_registry_provider_check', oneOf(t.provider, llmProviders)),
    check('llm_registry_role_check', oneOf(t.role, llmRoles)),
    check('llm_registry_tier_check', oneOf(t.tier, llmTiers)),
    check('llm_registry_trust_check', sql`${sql.identifier('trust')} >= 0`),
  ],
);

/**
 * One row per model attempt (ok or failed), so failover and outages are accounted too.
 * `idempotency_key` is unique per attempt; `request_key` is the caller's key (workflow id +
 * tick + purpose) shared by a call's attempts, and at most one ok row carries it: a retried
 * activity finds that row and its `reply` instead of calling the model again.
 */
export const llmCalls = pgTable(
  'llm_calls',
  {
    id: rowId(),
    agentId: agentId(),
    registryId: bigintRef('registry_id').references(() => llmRegistry.id, { onDelete: 'set null' }),
    workflowId: text('workflow_id'),
    tick: bigint('tick', { mode: 'number' }),
    role: text('role', { enum: llmRoles }).notNull(),
    /** What the call was for: think, emotion, novelty, validate, abstract, llm_task, … */
    purpose: text('purpose'),
    provider: text('provider', { enum: llmProviders }),
    model: text('model').notNull(),
    promptTokens: integer('prompt_tokens').notNull().default(0),
    completionTokens: integer('completion_tokens').notNull().default(0),
    /**
     * Of `prompt_tokens`, those the provider read from its prompt cache and those it did not (a cache
     * write counts as uncached); null when the provider does not say.
     */
    cachedPromptTokens: integer('cached_prompt_tokens'),
    uncachedPromptTokens: integer('uncached_prompt_tokens'),
    costUsd: numeric('cost_usd', { precision: 12, scale: 6, mode: 'number' }).notNull().default(0),
    latencyMs: integer('latency_ms'),
    ok: boolean('ok').notNull(),
    error: text('error'),
    idempotencyKey: text('idempotency_key').notNull().unique('llm_calls_idempotency_key_uq'),
    requestKey: text('request_key'),
    /** The model's reply text (ok rows), replayed on a retry with the same `request_key`. */
    reply: text('reply'),
    metadata: jsonb('metadata').$type<Record<string, unknown>>(),
    ...createdAt,
  },
  (t) => [
    index('llm_calls_agent_id_created_at_idx').on(t.agentId, t.createdAt),
    index('llm_calls_agent_id_tick_idx').on(t.agentId, t.tick),
    index('llm_calls_registry_id_idx').on(t.registryId),
    index('llm_calls_request_key_idx').on(t.requestKey),
    // Two racing attempts of one activity (heartbeat timeout while the first still runs) must
    // not both record an answer: the loser reads the winner's row.
    uniqueIndex('llm_calls_request_key_ok_uq')
      .on(t.requestKey)
      .where(sql`${sql.identifier('ok')}`),
    check('llm_calls_role_check', oneOf(t.role, llmRoles)),
    check('llm_calls_provider_check', oneOf(t.provider, llmProviders)),
  ],
);

/**
 * The messages a main-loop tick sent its model (think), once per (agent, tick): written in the
 * statement that records the tick's reply, so a retry keeps the first. Bounded by
 * core/tick-prompt.ts: each row's text is capped, and an agent keeps its last ticks' rows only
 * (the same statement deletes the older ones). Not copied to forks and clones: a record of what
 * the parent's model was shown, not state the copy thinks from.
 */
export const tickPrompts = pgTable(
  'tick_prompts',
  {
    id: rowId(),
    agentId: agentId(),
    tick: bigint('tick', { mode: 'number' }).notNull(),
    messages: jsonb('messages').$type<StoredPromptMessage[]>().notNull(),
    /** Characters of the whole prompt as sent (the stored text may be cut: see `messages[].chars`). */
    chars: integer('chars').notNull(),
    /** Prompt tokens as the model's provider counted them (the scripted model: ceil(chars / 4)). */
    promptTokens: integer('prompt_tokens').notNull(),
    ...createdAt,
  },
  (t) => [uniqueIndex('tick_prompts_agent_id_tick_uq').on(t.agentId, t.tick)],
);

export type LlmRegistryEntry = typeof llmRegistry.$inferSelect;
export type NewLlmRegistryEntry = typeof llmRegistry.$inferInsert;
export type LlmCall = typeof llmCalls.$inferSelect;
export type NewLlmCall = typeof llmCalls.$inferInsert;
