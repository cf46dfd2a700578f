/**
 * The deployment's model catalogue: models a person registers once by name (`mindloop models
 * add`) and assigns to agents' roles; an agent's `llm_registry` row names the entry it came from.
 */
import { sql } from 'drizzle-orm';
import { check, integer, jsonb, numeric, pgTable, text } from 'drizzle-orm/pg-core';
import { llmProviders, llmRoles } from './_llm-kinds.js';
import { jsonbOf, oneOf, timestamps, tstz } from './_columns.js';

/** What the last test call found (`mindloop models test`). `null` where the test could not tell. */
export interface ModelTestResult {
  ok: boolean;
  latencyMs: number;
  /** Whether a bound trivial tool was called natively. */
  toolCalls: boolean | null;
  /** Whether a reply asked for as JSON parsed as JSON. */
  jsonReply: boolean | null;
  /** The context length the server reports for the model. */
  contextLength: number | null;
  error?: string;
}

export const models = pgTable(
  'models',
  {
    /** A slug: lower-case letters, digits, `.`, `_` and `-`, at most 64 characters. */
    name: text('name').primaryKey(),
    provider: text('provider', { enum: llmProviders }).notNull(),
    model: text('model').notNull(),
    baseUrl: text('base_url'),
    /** The NAME of the environment variable holding the key; the key itself is never stored. */
    apiKeyEnv: text('api_key_env'),
    /** The role the model is meant for when assigned without one. */
    role: text('role', { enum: llmRoles }).notNull().default('agent'),
    /** USD per million tokens. */
    priceInPer1m: numeric('price_in_per_1m', { precision: 12, scale: 6, mode: 'number' }).notNull().default(0),
    priceOutPer1m: numeric('price_out_per_1m', { precision: 12, scale: 6, mode: 'number' }).notNull().default(0),
    /** USD per million prompt tokens the provider read from its prompt cache; null: the input price. */
    priceCachedInPer1m: numeric('price_cached_in_per_1m', { precision: 12, scale: 6, mode: 'number' }),
    contextWindow: integer('context_window'),
    params: jsonbOf<Record<string, unknown>>('params', {}),
    testedAt: tstz('tested_at'),
    test: jsonb('test').$type<ModelTestResult>(),
    ...timestamps,
  },
  (t) => [
    check('models_name_check', sql`${sql.identifier('name')} ~ '^[a-z0-9][a-z0-9._-]{0,63}$'`),
    check('models_provider_check', oneOf(t.provider, llmProviders)),
    check('models_role_check', oneOf(t.role, llmRoles)),
    check(
      'models_price_check',
      sql`${sql.identifier('price_in_per_1m')} >= 0 and ${sql.identifier('price_out_per_1m')} >= 0`,
    ),
    check('models_price_cached_check', sql`${sql.identifier('price_cached_in_per_1m')} >= 0`),
  ],
);

export type Model = typeof models.$inferSelect;
export type NewModel = typeof models.$inferInsert;
