/**
 * The deployment's model catalogue (`models`): a person adds a model once by name — provider,
 * model id, address, the NAME of the variable holding its key, prices — and agents get it by
 * name (`assignModel`), which writes the agent's `llm_registry` row from the entry. Adding tests
 * the model first with a real call (./model-test.ts) and stores nothing that cannot answer. The
 * CLI (`mindloop models …`), the notebook's Models page and agent files all come through here.
 */
import { and, asc, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import { formatIssues } from '../core/zod-issues.js';
import type { Db } from '../db/client.js';
import {
  llmCalls,
  llmProviders,
  llmRegistry,
  llmRoles,
  models,
  type LlmRegistryEntry,
  type Model,
  type ModelTestResult,
} from '../db/schema/index.js';
import { keyOf, runModelTest, type ModelProblem, type ModelTestDeps } from './model-test.js';

export type LlmRole = (typeof llmRoles)[number];

/**
 * `mini`: the emotion and novelty mini-prompts the reflexes send after every reply. A catalogue
 * entry stores it as `emotion`; `assignModel` with role `mini` gives the agent both roles.
 */
export const modelRoles = [...llmRoles, 'mini'] as const;
export type ModelRole = (typeof modelRoles)[number];

/** Why the catalogue refused: bad input, no such entry, one by that name already, still assigned, or the model's test. */
export type CatalogueProblem = 'invalid' | 'not-found' | 'exists' | 'in-use' | ModelProblem;

/** A refusal the CLI prints and the notebook answers with: what is wrong, and the input field at fault when there is one. */
export class ModelCatalogueError extends Error {
  constructor(
    readonly problem: CatalogueProblem,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

export const modelNameSchema = z
  .string()
  .regex(
    /^[a-z0-9][a-z0-9._-]{0,63}$/,
    'a slug: lower-case letters, digits, . _ -, starting with a letter or digit, at most 64 characters',
  );

/** The name of an environment variable, never its value. */
export const envVarSchema = z
  .string()
  .max(128)
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'the NAME of an environment variable (letters, digits, _), not the key itself');

export const httpUrl = z
  .string()
  .trim()
  .max(2000)
  .refine((s) => {
    try {
      return ['http:', 'https:'].includes(new URL(s).protocol);
    } catch {
      return false;
    }
  }, 'an http(s) URL, e.g. http://127.0.0.1:11434/v1');

/** USD per million tokens; the registry's numeric(12,6) per-1k columns hold it. */
const price = z.number().min(0).max(100_000);

/** What `addModel` takes (the CLI's flags and the notebook's form). */
export const modelInput = z.strictObject({
  name: modelNameSchema,
  provider: z.enum(llmProviders),
  model: z.string().trim().min(1).max(200),
  baseUrl: httpUrl.nullish(),
  apiKeyEnv: envVarSchema.nullish(),
  role: z.enum(modelRoles).default('agent'),
  priceInPer1m: price.default(0),
  priceOutPer1m: price.default(0),
  /** USD per million prompt tokens read from the provider's cache; absent: the input price. */
  priceCachedInPer1m: price.nullish(),
  contextWindow: z.number().int().min(1).max(100_000_000).nullish(),
  params: z.record(z.string(), z.unknown()).default({}),
});
export type ModelInput = z.input<typeof modelInput>;

/** The catalogue role a model role is stored as. */
const storedRole = (role: ModelRole): LlmRole => (role === 'mini' ? 'emotion' : role);

/** The catalogue's dependencies: the database, and what a test call needs (the environment the keys are read from). */
export type CatalogueDeps = ModelTestDeps & { db: Db };

/** One entry, or null when the catalogue has none by that name. */
export async function getModel(db: Db, name: string): Promise<Model | null> {
  const [row] = await db.select().from(models).where(eq(models.name, name));
  return row ?? null;
}

async function requireModel(db: Db, name: string): Promise<Model> {
  const model = await getModel(db, name);
  if (!model)
    throw new ModelCatalogueError(
      'not-found',
      `no model '${name}' in the catalogue (\`mindloop models list\` shows them)`,
      'name',
    );
  return model;
}

/** The input, checked: a refusal names the field and why. */
export function parseModelInput(input: unknown): z.output<typeof modelInput> {
  const r = modelInput.safeParse(input);
  if (r.success) return r.data;
  const first = r.error.issues[0];
  throw new ModelCatalogueError('invalid', formatIssues(r.error), first?.path.map(String).join('.') || undefined);
}

/**
 * Add a model to the catalogue. Checked first: the fields, that the key's variable is set in this
 * process (when the provider needs a key, or one is named), and that no entry has the name. Then,
 * unless `test` is false, the model is tested with real calls and refused when it does not answer
 * (server unreachable, model not served, key refused), the error naming what is missing. The test's
 * findings are stored with the entry; a context length the server reports fills `context_window`
 * when the input gives none.
 */
export async function addModel(deps: CatalogueDeps, input: unknown, opts: { test?: boolean } = {}): Promise<Model> {
  const m = parseModelInput(input);
  if (m.apiKeyEnv && (m.provider === 'local' || m.provider === 'scripted'))
    throw new ModelCatalogueError(
      'invalid',
      `a ${m.provider} model takes no key: leave out the key variable`,
      'apiKeyEnv',
    );
  const key = keyOf({ provider: m.provider, baseUrl: m.baseUrl ?? null, apiKeyEnv: m.apiKeyEnv ?? null }, deps.env);
  if ('error' in key) throw new ModelCatalogueError('key', key.error, 'apiKeyEnv');
  if (await getModel(deps.db, m.name))
    throw new ModelCatalogueError(
      'exists',
      `the catalogue already has a model '${m.name}' (\`mindloop models remove ${m.name}\` first, or choose another name)`,
      'name',
    );
  const entry = {
    name: m.name,
    provider: m.provider,
    model: m.model,
    baseUrl: m.baseUrl ?? null,
    apiKeyEnv: m.apiKeyEnv ?? null,
    params: m.params,
  };
  let test: ModelTestResult | null = null;
  if (opts.test !== false) {
    // An embedder is tested by embedding a text, the others by chatting.
    const outcome = await runModelTest({ ...entry, role: storedRole(m.role) }, deps);
    if (!outcome.result.ok)
      throw new ModelCatalogueError(
        outcome.problem ?? 'failed',
        `model '${m.name}' not added: ${outcome.result.error}`,
        problemField[outcome.problem ?? 'failed'],
      );
    test = outcome.result;
  }
  const [row] = await deps.db
    .insert(models)
    .values({
      ...entry,
      role: storedRole(m.role),
      priceInPer1m: m.priceInPer1m,
      priceOutPer1m: m.priceOutPer1m,
      priceCachedInPer1m: m.priceCachedInPer1m ?? null,
      contextWindow: m.contextWindow ?? test?.contextLength ?? null,
      test,
      testedAt: test ? new Date() : null,
    })
    .onConflictDoNothing()
    .returning();
  // Another add of the same name got in while this one tested.
  if (!row) throw new ModelCatalogueError('exists', `the catalogue already has a model '${m.name}'`, 'name');
  return row;
}

/** The input field each failed test points at. */
const problemField: Record<ModelProblem, string> = {
  key: 'apiKeyEnv',
  unreachable: 'baseUrl',
  'no-such-model': 'model',
  failed: 'model',
};

/** A model with what agents did with it: their calls through rows assigned from it. */
export interface ModelWithUsage extends Model {
  /** Agents with a registry row from this entry. */
  agents: string[];
  calls: number;
  failures: number;
  /** Median latency of its calls, ms; null before the first. */
  p50LatencyMs: number | null;
  promptTokens: number;
  completionTokens: number;
  spendUsd: number;
}

/** Every entry by name, each with its usage figures from `llm_calls` (through `llm_registry.model_name`). */
export async function listModels(db: Db): Promise<ModelWithUsage[]> {
  const usage = db
    .select({
      name: llmRegistry.modelName,
      agents: sql<string[]>`array_agg(distinct ${llmRegistry.agentId})`.as('agents'),
      calls: sql<number>`count(${llmCalls.id})::int`.as('calls'),
      failures: sql<number>`(count(${llmCalls.id}) filter (where not ${llmCalls.ok}))::int`.as('failures'),
      p50: sql<number | null>`percentile_cont(0.5) within group (order by ${llmCalls.latencyMs})`.as('p50'),
      promptTokens: sql<number>`coalesce(sum(${llmCalls.promptTokens}), 0)::bigint`.as('prompt_tokens'),
      completionTokens: sql<number>`coalesce(sum(${llmCalls.completionTokens}), 0)::bigint`.as('completion_tokens'),
      spend: sql<string>`coalesce(sum(${llmCalls.costUsd}), 0)`.as('spend'),
    })
    .from(llmRegistry)
    .leftJoin(llmCalls, eq(llmCalls.registryId, llmRegistry.id))
    .where(sql`${llmRegistry.modelName} is not null`)
    .groupBy(llmRegistry.modelName)
    .as('usage');
  const rows = await db
    .select({
      model: models,
      agents: usage.agents,
      calls: usage.calls,
      failures: usage.failures,
      p50: usage.p50,
      promptTokens: usage.promptTokens,
      completionTokens: usage.completionTokens,
      spend: usage.spend,
    })
    .from(models)
    .leftJoin(usage, eq(usage.name, models.name))
    .orderBy(asc(models.name));
  return rows.map(({ model, ...u }) => ({
    ...model,
    agents: u.agents ?? [],
    calls: u.calls ?? 0,
    failures: u.failures ?? 0,
    p50LatencyMs: u.p50 === null ? null : Math.round(Number(u.p50)),
    promptTokens: Number(u.promptTokens ?? 0),
    completionTokens: Number(u.completionTokens ?? 0),
    spendUsd: Number(u.spend ?? 0),
  }));
}

/**
 * Test a catalogue model now (real calls: latency, JSON replies, tool calls, the context length
 * the server reports) and store what was found in `models.test`, failure included. Returns the
 * updated entry; its `test.ok` says whether it answered.
 */
export async function testModel(deps: CatalogueDeps, name: string): Promise<Model> {
  const model = await requireModel(deps.db, name);
  const { result } = await runModelTest(model, deps);
  const [row] = await deps.db
    .update(models)
    .set({
      test: result,
      testedAt: new Date(),
      ...(model.contextWindow === null && result.contextLength !== null ? { contextWindow: result.contextLength } : {}),
    })
    .where(eq(models.name, name))
    .returning();
  if (!row) throw new ModelCatalogueError('not-found', `model '${name}' was removed while it was tested`, 'name');
  return row;
}

/** Agents with a registry row assigned from `name`. */
async function agentsUsing(db: Db, name: string): Promise<string[]> {
  const rows = await db
    .selectDistinct({ agentId: llmRegistry.agentId })
    .from(llmRegistry)
    .where(eq(llmRegistry.modelName, name))
    .orderBy(asc(llmRegistry.agentId));
  return rows.map((r) => r.agentId);
}

const inUse = (name: string, agents: string[]) =>
  new ModelCatalogueError(
    'in-use',
    `model '${name}' is used by agent${agents.length > 1 ? 's' : ''} ${agents.join(', ')}: name another model in ${agents.length > 1 ? 'their files' : 'its file'} (models:) and apply ${agents.length > 1 ? 'them' : 'it'} first`,
    'name',
  );

/** Remove an entry; refused while any agent's registry row comes from it, naming those agents. */
export async function removeModel(db: Db, name: string): Promise<void> {
  await requireModel(db, name);
  const agents = await agentsUsing(db, name);
  if (agents.length) throw inUse(name, agents);
  try {
    await db.delete(models).where(eq(models.name, name));
  } catch (err) {
    // An assignment between the check and the delete: the foreign key (ON DELETE RESTRICT) refuses.
    if (pgCode(err) === '23503') throw inUse(name, await agentsUsing(db, name));
    throw err;
  }
}

const pgCode = (err: unknown): string | undefined => {
  for (
    let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0;
    e && depth < 3;
    e = e.cause as typeof e, depth++
  ) {
    if (typeof e.code === 'string') return e.code;
  }
  return undefined;
};

export interface AssignModelInput {
  agentId: string;
  /** The role to serve; default the entry's own role. `mini` gives both `emotion` and `novelty`. */
  role?: ModelRole;
  /** The catalogue entry's name. */
  modelName: string;
  /** Failover order within the role, lower first (default 100). */
  priority?: number;
  /** The validator's trust (default 1). */
  trust?: number;
  /** Flag the row a validator whatever its role (default: true for the `validator` role). */
  validator?: boolean;
}

/**
 * Give an agent a catalogue model for a role: its `llm_registry` row written from the entry
 * (provider, model, address, key variable, context window, params; prices converted from USD per
 * 1M tokens to the registry's per-1k columns), marked with `model_name`. The row is named after
 * the model (`<model>`) for the entry's own role and `<model>:<role>` for another, so one model
 * may serve an agent in several roles. Idempotent: assigning again rewrites the same row from the
 * entry as it is now. Refused when the agent already has a row by that name that did not come
 * from this entry. Returns the rows written (two for `mini`).
 */
export async function assignModel(db: Db, input: AssignModelInput): Promise<LlmRegistryEntry[]> {
  const model = await requireModel(db, input.modelName);
  const role = input.role ?? model.role;
  const roles: LlmRole[] = role === 'mini' ? ['emotion', 'novelty'] : [role];
  const out: LlmRegistryEntry[] = [];
  for (const r of roles) {
    const values = {
      agentId: input.agentId,
      name: registryNameOf(model, r),
      modelName: model.name,
      provider: model.provider,
      model: model.model,
      baseUrl: model.baseUrl,
      apiKeyEnv: model.apiKeyEnv,
      role: r,
      priority: input.priority ?? 100,
      trust: input.trust ?? 1,
      validator: input.validator ?? r === 'validator',
      costPer1kInput: per1k(model.priceInPer1m),
      costPer1kOutput: per1k(model.priceOutPer1m),
      costPer1kCachedInput: model.priceCachedInPer1m === null ? null : per1k(model.priceCachedInPer1m),
      contextWindow: model.contextWindow,
      params: model.params,
    };
    const { agentId: _a, name: _n, ...update } = values;
    const [row] = await db
      .insert(llmRegistry)
      .values(values)
      .onConflictDoUpdate({
        target: [llmRegistry.agentId, llmRegistry.name],
        set: { ...update, updatedAt: new Date() },
        setWhere: eq(llmRegistry.modelName, model.name),
      })
      .returning();
    if (!row)
      throw new ModelCatalogueError(
        'exists',
        `agent ${input.agentId} already has an llm_registry row named '${values.name}' that was not assigned from model '${model.name}'`,
        'modelName',
      );
    out.push(row);
  }
  return out;
}

/** The registry row's name for a model serving a role: the model's name for its own role, else `<model>:<role>`. */
export function registryNameOf(model: Pick<Model, 'name' | 'role'>, role: LlmRole): string {
  return role === model.role ? model.name : `${model.name}:${role}`;
}

/** USD per 1M tokens as the registry's USD per 1k, at its column's scale. */
const per1k = (perMillion: number): number => Math.round(perMillion * 1000) / 1e6;

/**
 * Take a catalogue model away from an agent: its rows from that entry (every role, or one), so
 * the entry can be removed. Their past calls stay in `llm_calls` (the row id cleared) but no
 * longer count in `listModels`. Returns how many rows went.
 */
export async function unassignModel(
  db: Db,
  input: { agentId: string; modelName: string; role?: LlmRole },
): Promise<number> {
  const rows = await db
    .delete(llmRegistry)
    .where(
      and(
        eq(llmRegistry.agentId, input.agentId),
        eq(llmRegistry.modelName, input.modelName),
        input.role ? eq(llmRegistry.role, input.role) : undefined,
      ),
    )
    .returning({ id: llmRegistry.id });
  return rows.length;
}
