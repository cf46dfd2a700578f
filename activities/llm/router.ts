/**
 * Routes a chat call to an agent's LLMs for a role: candidates from `llm_registry` by
 * priority, failover on error or timeout, one `llm_calls` row per attempt, and replay of a
 * stored answer when the same idempotency key comes again.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { clipText, defaultMaxReplyBytes, sanitizeAnswer, sanitizeText } from '../../core/sanitize.js';
import { formatIssues } from '../../core/zod-issues.js';
import type { Db } from '../../db/client.js';
import { budgetIds, defaultPrices, llmCost, llmWorstCase, type PriceTable } from '../../core/lifeforce.js';
import {
  answeredCall,
  insertAnsweredCall,
  llmCallsByKeys,
  recordRowHealth,
  usableRegistry,
} from '../../db/queries/llm.js';
import { openHolds, release, reserveOpen, settle, settleHold, type Hold } from '../../db/queries/lifeforce.js';
import { activityContext } from '../heartbeat.js';
import { llmCalls, type LlmCall, type LlmRegistryEntry } from '../../db/schema/llm.js';
import { ErrorType, nonRetryable } from '../errors.js';
import { describeError, LifeforceExhaustedError, LlmUnavailableError } from './errors.js';
import { createAnthropicChatModel } from './providers/anthropic.js';
import type { EnvSource } from './providers/keys.js';
import { createLocalChatModel } from './providers/local.js';
import { createOpenAiChatModel } from './providers/openai.js';
import { ScriptedChatModel, type ScriptedReplyFn } from './providers/scripted.js';
import type {
  ChatAttempt,
  ChatMessage,
  ChatModel,
  ChatModelFactory,
  ChatParams,
  ChatReply,
  ChatResult,
  ChatRole,
  ChatToolCall,
  ChatToolDef,
  LlmProvider,
  TokenUsage,
} from './types.js';

export interface LlmRouterDeps {
  db: Db;
  /** Where API keys are looked up by the row's `api_key_env` (the composition root passes the process env). */
  env: EnvSource;
  /** Locates the local GGUF model (`.tools/`). */
  toolsDir: string;
  /** Replace the chat model built for a provider (tests, custom clients). */
  factories?: Partial<Record<LlmProvider, ChatModelFactory>>;
  /** Per-attempt timeout; a row's `params.timeoutMs` wins, and a local row's follows its measured speed. Default 60 s. */
  timeoutMs?: number;
  /** CPU threads for the local model (default: half the cores). */
  localThreads?: number;
  /** Reply function for `scripted` rows (default: the row's `params.replies`). */
  scriptedReply?: ScriptedReplyFn;
  /** Cap on one answer (text and tool calls), in UTF-8 bytes; a row's `params.maxReplyBytes` wins. Default 256 KB. */
  maxReplyBytes?: number;
  /** Lifeforce: the price table, and whether calls go through the ledger (default on; the bench turns it off to measure it). */
  lifeforce?: LedgerSwitch;
}

/** Whether calls are charged to the ledger, at what prices. Mutable: a bench flips `enabled` between blocks. */
export interface LedgerSwitch {
  enabled: boolean;
  prices: PriceTable;
}

export interface ChatRequest {
  agentId: string;
  role: ChatRole;
  messages: ChatMessage[];
  /** Override the registry row's sampling `params` for this call. */
  params?: ChatParams;
  tick?: number;
  /** Workflow id + tick + purpose: a repeated call with it returns the stored answer. */
  idempotencyKey?: string;
  signal?: AbortSignal;
  workflowId?: string;
  /** What the call is for (think, emotion, novelty, validate, …), for accounting. */
  purpose?: string;
  /** Call this registry row only (e.g. one validator), no failover. */
  registryId?: number;
  /**
   * Tools to bind natively (OpenAI-compatible and Anthropic rows); their calls come back in
   * `ChatResult.toolCalls`. The local model and the scripted double ignore them.
   */
  tools?: ChatToolDef[];
  /**
   * A caller making several calls at once (the reflexes) loads what the router would look up
   * per call in one query each: the agent's usable rows (`registry`) and the earlier rows of
   * its idempotency keys (`previousCalls`).
   */
  preloaded?: { registry: LlmRegistryEntry[]; previous: LlmCall[] };
  /** The budget charged (default the agent's) and the time of the call in ms (the workflow's clock; default now). */
  lifeforce?: { budgetId?: string; at?: number };
}

export interface LlmRouter {
  chat(req: ChatRequest): Promise<ChatResult>;
  /** The rows a call for this role would try, in order. */
  candidates(agentId: string, role: ChatRole): Promise<LlmRegistryEntry[]>;
  /** All the agent's usable rows, in the order calls try them (for `preloaded`). */
  registry(agentId: string): Promise<LlmRegistryEntry[]>;
  /** The `llm_calls` rows of these idempotency keys, oldest first (for `preloaded`). */
  previousCalls(requestKeys: string[]): Promise<LlmCall[]>;
}

/** The rows a call for `role` (or for one `registryId`) tries, from the agent's usable rows in order. */
export function rowsFor(
  registry: readonly LlmRegistryEntry[],
  role: ChatRole,
  registryId?: number,
): LlmRegistryEntry[] {
  if (registryId !== undefined) return registry.filter((r) => r.id === registryId);
  // A validator is a row with role 'validator' or any row flagged `validator`.
  return registry.filter((r) => (role === 'validator' ? r.role === 'validator' || r.validator : r.role === role));
}

export const defaultLlmTimeoutMs = 60_000;
const maxCachedModels = 256;

const chatParamsSchema = z.object({
  temperature: z.number().min(0).max(2).optional(),
  topP: z.number().gt(0).max(1).optional(),
  presencePenalty: z.number().min(-2).max(2).optional(),
  frequencyPenalty: z.number().min(-2).max(2).optional(),
  maxTokens: z.number().int().min(1).optional(),
  stop: z.array(z.string().min(1)).max(16).optional(),
  jsonSchema: z.record(z.string(), z.unknown()).optional(),
});
const rowParamsSchema = chatParamsSchema.extend({
  timeoutMs: z.number().int().min(1).optional(),
  maxReplyBytes: z.number().int().min(1024).optional(),
});

/** The row's default sampling parameters; keys the row's provider uses itself are ignored here. */
function rowParams(row: LlmRegistryEntry): ChatParams & { timeoutMs?: number; maxReplyBytes?: number } {
  const picked: Record<string, unknown> = {};
  for (const key of Object.keys(rowParamsSchema.shape)) {
    if (row.params[key] !== undefined) picked[key] = row.params[key];
  }
  const parsed = rowParamsSchema.safeParse(picked);
  if (!parsed.success)
    throw nonRetryable(
      ErrorType.InvalidInput,
      `llm_registry #${row.id}: bad params: ${formatIssues(parsed.error, 'params')}`,
    );
  return parsed.data;
}

function costOf(
  row: Pick<LlmRegistryEntry, 'costPer1kInput' | 'costPer1kOutput' | 'costPer1kCachedInput'>,
  usage: TokenUsage,
): number {
  const cached = Math.min(usage.promptTokens, Math.max(0, usage.cachedPromptTokens ?? 0));
  const usd =
    ((usage.promptTokens - cached) / 1000) * row.costPer1kInput +
    (cached / 1000) * (row.costPer1kCachedInput ?? row.costPer1kInput) +
    (usage.completionTokens / 1000) * row.costPer1kOutput;
  return Math.round(usd * 1e6) / 1e6; // the column's scale
}

/** The tokens a result is charged for: its usage and, where the provider said, the cached share of its prompt. */
const chargedUsage = (r: Pick<ChatResult, 'usage' | 'cachedPromptTokens'>) => ({
  ...r.usage,
  cachedPromptTokens: r.cachedPromptTokens ?? null,
});

/** The `llm_calls` columns of a reply's prompt-cache split: both null when the provider did not say. */
function cacheColumns(usage: TokenUsage): { cachedPromptTokens: number | null; uncachedPromptTokens: number | null } {
  const cached = usage.cachedPromptTokens;
  if (cached === undefined || cached === null) return { cachedPromptTokens: null, uncachedPromptTokens: null };
  const kept = Math.min(usage.promptTokens, Math.max(0, cached));
  return { cachedPromptTokens: kept, uncachedPromptTokens: usage.promptTokens - kept };
}

const toolCallSchema = z.object({
  id: z.string().optional(),
  name: z.string(),
  args: z.record(z.string(), z.unknown()).optional(),
  rawArgs: z.string().optional(),
  error: z.string().optional(),
});

/** The tool calls recorded with a reply (`metadata.toolCalls`); none when absent or unreadable. */
export function recordedToolCalls(row: Pick<LlmCall, 'metadata'>): ChatToolCall[] | undefined {
  const parsed = z.array(toolCallSchema).safeParse(row.metadata?.toolCalls);
  return parsed.success && parsed.data.length > 0 ? parsed.data : undefined;
}

const truncatedSchema = z.object({ originalBytes: z.number(), keptBytes: z.number(), droppedToolCalls: z.number() });

function resultFromRow(ok: LlmCall, failed: LlmCall[]): ChatResult {
  const toolCalls = recordedToolCalls(ok);
  const truncated = truncatedSchema.safeParse(ok.metadata?.truncated);
  return {
    text: ok.reply ?? '',
    registryId: ok.registryId ?? 0,
    provider: ok.provider ?? 'scripted',
    model: ok.model,
    usage: { promptTokens: ok.promptTokens, completionTokens: ok.completionTokens },
    ...(ok.cachedPromptTokens !== null ? { cachedPromptTokens: ok.cachedPromptTokens } : {}),
    costUsd: ok.costUsd,
    latencyMs: ok.latencyMs ?? 0,
    attempts: failed.map((r) => ({ registryId: r.registryId ?? 0, model: r.model, error: r.error ?? 'unknown error' })),
    replayed: true,
    callId: ok.id,
    ...(toolCalls ? { toolCalls } : {}),
    ...(truncated.success ? { truncated: truncated.data } : {}),
  };
}

/** One router's state: its dependencies and the chat models it built, one per row configuration. */
interface Router {
  deps: LlmRouterDeps;
  factories: Record<LlmProvider, ChatModelFactory>;
  models: Map<string, ChatModel>;
}

/** The columns every llm_calls row of one attempt shares. */
type AttemptBase = Omit<typeof llmCalls.$inferInsert, 'ok'>;

/** A model's answer, with the parameters it was asked with and the cap on what is kept of it. */
type Answer = ChatReply & { params: ChatParams; maxReplyBytes: number };

/** One model per row configuration: the scripted model's cycle and the local model's load persist. */
function modelFor(router: Router, row: LlmRegistryEntry): ChatModel {
  const key = JSON.stringify([row.id, row.provider, row.model, row.baseUrl, row.apiKeyEnv, row.params]);
  let model = router.models.get(key);
  if (!model) {
    const factory = router.deps.factories?.[row.provider] ?? router.factories[row.provider];
    model = factory(row);
    if (router.models.size >= maxCachedModels) router.models.clear();
    router.models.set(key, model);
  }
  return model;
}

/** The stored answer of the request's idempotency key (with the failed attempts before it), if any. */
async function storedAnswer(
  router: Router,
  req: ChatRequest,
): Promise<{ result: ChatResult; chargeKeys: { answered?: string; all: string[] } } | undefined> {
  const requestKey = req.idempotencyKey;
  if (requestKey === undefined) return undefined;
  const previous = req.preloaded
    ? req.preloaded.previous.filter((r) => r.requestKey === requestKey)
    : await llmCallsByKeys(router.deps.db, [requestKey]);
  const ok = previous.find((r) => r.ok);
  if (!ok) return undefined;
  const keyOf = (r: LlmCall) => (typeof r.metadata?.chargeKey === 'string' ? r.metadata.chargeKey : undefined);
  return {
    result: resultFromRow(
      ok,
      previous.filter((r) => !r.ok && r.id < ok.id),
    ),
    chargeKeys: { answered: keyOf(ok), all: previous.map(keyOf).filter((k): k is string => k !== undefined) },
  };
}

/**
 * Ask one row's model, under the row's (or the router's) timeout. A failure is recorded (an
 * llm_calls row, the row's health) and returned as its message; a cancelled caller is thrown
 * to, with no failover and no health penalty.
 */
async function askRow(
  router: Router,
  req: ChatRequest,
  row: LlmRegistryEntry,
  base: AttemptBase,
  started: number,
): Promise<{ model: ChatModel; answer: Answer } | { error: string }> {
  const { deps } = router;
  let model: ChatModel | undefined;
  let timeout: { ms: number; signal: AbortSignal } | undefined;
  try {
    model = modelFor(router, row);
    const { timeoutMs, maxReplyBytes, ...defaults } = rowParams(row);
    const params: ChatParams = { ...defaults, ...req.params };
    // The local model's time follows its measured speed (a busy machine makes it slow, not out).
    const ms = timeoutMs ?? model.timeoutMs?.(req.messages, params) ?? deps.timeoutMs ?? defaultLlmTimeoutMs;
    timeout = { ms, signal: AbortSignal.timeout(ms) };
    const signal = req.signal ? AbortSignal.any([req.signal, timeout.signal]) : timeout.signal;
    const reply = await model.invoke(req.messages, params, signal, {
      purpose: req.purpose,
      ...(req.tools?.length ? { tools: req.tools } : {}),
    });
    return {
      model,
      answer: { ...reply, params, maxReplyBytes: maxReplyBytes ?? deps.maxReplyBytes ?? defaultMaxReplyBytes },
    };
  } catch (err) {
    const cancelled = req.signal?.aborted === true;
    // An error message may quote the endpoint's body: sanitised like any model text.
    const error = sanitizeText(
      cancelled
        ? `cancelled: ${describeError(req.signal?.reason)}`
        : timeout?.signal.aborted
          ? `timed out after ${timeout.ms} ms`
          : describeError(err),
    );
    await deps.db.insert(llmCalls).values({
      ...base,
      latencyMs: Math.round(performance.now() - started),
      ok: false,
      error,
      metadata: model || base.metadata ? { ...base.metadata, ...(model ? { endpoint: model.id } : {}) } : null,
    });
    // The caller gave up (activity cancelled): no failover, no health penalty.
    if (cancelled) throw req.signal?.reason ?? err;
    await recordRowHealth(deps.db, row, error);
    return { error };
  }
}

/**
 * Keep a row's answer: sanitised and capped (model text enters here, once), recorded under the
 * request's key, the row's health refreshed. A racing attempt of the same call (a retry started
 * while this one still ran) that answered first wins, so every caller sees one reply; this
 * one's tokens are still recorded, detached from the key.
 */
async function keepAnswer(
  router: Router,
  req: ChatRequest,
  row: LlmRegistryEntry,
  base: AttemptBase,
  started: number,
  answered: { model: ChatModel; answer: Answer },
  attempts: ChatAttempt[],
): Promise<ChatResult> {
  const { db } = router.deps;
  const { model, answer } = answered;
  const { usage, params } = answer;
  const cache = cacheColumns(usage);
  const { text, toolCalls, truncated } = sanitizeAnswer(
    { text: answer.text, toolCalls: answer.toolCalls },
    answer.maxReplyBytes,
  );
  const latencyMs = Math.round(performance.now() - started);
  const costUsd = costOf(row, usage);
  const okRow = {
    ...base,
    promptTokens: usage.promptTokens,
    completionTokens: usage.completionTokens,
    ...cache,
    costUsd,
    latencyMs,
    ok: true,
    reply: text,
    // The tool calls are part of the answer: a replay by the key must return them too.
    metadata: {
      ...base.metadata,
      endpoint: model.id,
      jsonSchema: params.jsonSchema !== undefined,
      ...(toolCalls.length ? { toolCalls } : {}),
      ...(truncated ? { truncated } : {}),
      ...(answer.local ? { local: answer.local } : {}),
      ...(usage.cacheWriteTokens ? { cacheWriteTokens: usage.cacheWriteTokens } : {}),
    },
  };
  // The partial unique index on (request_key) where ok decides which attempt answered first.
  const insertedId = await insertAnsweredCall(db, okRow);
  await recordRowHealth(db, row, undefined);
  if (insertedId === null) {
    const requestKey = req.idempotencyKey;
    await db
      .insert(llmCalls)
      .values({ ...okRow, requestKey: null, metadata: { ...okRow.metadata, duplicateOf: requestKey } });
    const winner = await answeredCall(db, requestKey ?? '');
    if (!winner) throw nonRetryable(ErrorType.Unexpected, `llm_calls: the answer recorded for ${requestKey} vanished`);
    return resultFromRow(winner, []);
  }
  return {
    text,
    registryId: row.id,
    provider: row.provider,
    model: row.model,
    usage: { promptTokens: usage.promptTokens, completionTokens: usage.completionTokens },
    ...(cache.cachedPromptTokens !== null ? { cachedPromptTokens: cache.cachedPromptTokens } : {}),
    costUsd,
    latencyMs,
    attempts,
    replayed: false,
    callId: insertedId,
    ...(toolCalls.length ? { toolCalls } : {}),
    ...(truncated ? { truncated } : {}),
  };
}

/** The stored answer of the key, or the first row of the role that answers; LlmUnavailableError when none does. */
async function chat(router: Router, req: ChatRequest): Promise<ChatResult> {
  const stored = await storedAnswer(router, req);
  if (stored) {
    // The attempt that answered may have died before settling: its retry settles it (once).
    if (router.deps.lifeforce?.enabled && req.idempotencyKey !== undefined)
      await closeRequestHolds(router, req, stored.result, stored.chargeKeys);
    return stored.result;
  }
  const requestKey = req.idempotencyKey;
  const rows = req.preloaded
    ? rowsFor(req.preloaded.registry, req.role, req.registryId)
    : rowsFor(await usableRegistry(router.deps.db, req.agentId), req.role, req.registryId);
  const attempts: ChatAttempt[] = [];
  for (const row of rows) {
    req.signal?.throwIfAborted();
    const started = performance.now();
    const charge = await reserveCall(router, req, row);
    const base: AttemptBase = {
      agentId: req.agentId,
      registryId: row.id,
      workflowId: req.workflowId,
      tick: req.tick,
      role: req.role,
      purpose: req.purpose,
      provider: row.provider,
      model: row.model,
      // Unique per attempt: a call's attempts (and a retried activity's) each get a row.
      idempotencyKey: `${requestKey ?? `${req.agentId}/${req.role}`}#${randomUUID()}`,
      requestKey,
      // The hold this attempt charges: a retry that finds the answer settles exactly it.
      ...(charge ? { metadata: { chargeKey: charge.key } } : {}),
    };
    let asked: Awaited<ReturnType<typeof askRow>>;
    try {
      asked = await askRow(router, charge ? { ...req, params: charge.params } : req, row, base, started);
    } catch (err) {
      // Cancelled by its caller: no retry comes for this call, so its hold goes back now. (A
      // timeout or a lost worker is retried under the same key, which settles the hold.)
      if (charge && activityContext()?.cancellationDetails?.cancelRequested)
        await release(router.deps.db, charge.key, 'cancelled');
      throw err;
    }
    if ('error' in asked) {
      if (charge) await release(router.deps.db, charge.key, `failed: ${clipText(asked.error, 200)}`);
      attempts.push({ registryId: row.id, model: row.model, error: asked.error });
      continue;
    }
    // Outside askRow's catch: a database error here is not the model's failure and must not
    // trigger failover; it propagates and the activity is retried (the key finds the answer).
    const result = await keepAnswer(router, req, row, base, started, asked, attempts);
    if (!charge) return result;
    const cost = llmCost(router.deps.lifeforce!.prices, row, chargedUsage(result));
    const meta = { callId: result.callId, model: row.model };
    // A hold this attempt took settles in one statement; one found from an earlier attempt, by reading it.
    const closed = charge.hold
      ? await settleHold(router.deps.db, charge.hold, cost, meta)
      : await settle(router.deps.db, charge.key, cost, meta);
    // A retry: an earlier attempt may have died holding another row's worst case.
    if (requestKey !== undefined && (activityContext()?.info.attempt ?? 1) > 1)
      await closeRequestHolds(router, req, result, {
        answered: charge.key,
        all: rows.map((r) => callChargeKey(requestKey, r.id)),
      });
    return closed.replayed
      ? result
      : {
          ...result,
          lifeforce: { budgetId: charge.budgetId, charged: closed.charged, available: closed.available ?? null },
        };
  }
  throw new LlmUnavailableError(req.agentId, req.role, attempts);
}

/**
 * The request key of the one model call an activity makes with no key of its own (a probe, a
 * bare `llmChat`): its workflow run and activity id, which every retry of that activity keeps, so
 * a retry finds the first attempt's answer and hold instead of paying again. Undefined outside an
 * activity (a test's or the CLI's direct call).
 */
export function activityRequestKey(purpose: string): string | undefined {
  const info = activityContext()?.info;
  const run = info?.workflowExecution;
  return info && run ? `${run.workflowId}/${run.runId}/${info.activityId}/${purpose}` : undefined;
}

/** The ledger key of one row's attempt at a call: a retried activity reserves under the same key. */
export function callChargeKey(requestKey: string, registryId: number): string {
  return `llm:${requestKey}@${registryId}`;
}

/**
 * Hold the call's worst case on its budget before the model runs (every prompt byte a token,
 * the full output cap, which the call is then held to): its key and the call's parameters with
 * that cap, or null with the ledger off.
 * A budget that cannot cover it throws LifeforceExhaustedError: the call does not run.
 */
async function reserveCall(
  router: Router,
  req: ChatRequest,
  row: LlmRegistryEntry,
): Promise<{ key: string; budgetId: string; params: ChatParams; hold?: Hold } | null> {
  const ledger = router.deps.lifeforce;
  if (!ledger?.enabled) return null;
  const maxTokens = req.params?.maxTokens ?? rowParams(row).maxTokens ?? ledger.prices.defaultMaxOutputTokens;
  const budgetId = req.lifeforce?.budgetId ?? budgetIds.agent(req.agentId);
  const base = {
    budgetId,
    amount: llmWorstCase(ledger.prices, row, req.messages, maxTokens),
    operation: 'llm_call',
    at: req.lifeforce?.at,
    ttlMs: ledger.prices.reservationTtlMs,
    tick: req.tick,
    reason: req.purpose,
    metadata: { model: row.model, registryId: row.id, role: req.role },
  };
  const key =
    req.idempotencyKey !== undefined ? callChargeKey(req.idempotencyKey, row.id) : `llm:${req.agentId}/${randomUUID()}`;
  const held = await reserveOpen(router.deps.db, { ...base, key });
  if (!held.ok) throw new LifeforceExhaustedError(held.budgetId, held.reason, held.needed, held.available, req.agentId);
  // The cap the reservation assumed is the one the model runs under.
  return { key: held.key, budgetId, params: { ...req.params, maxTokens }, ...(held.hold ? { hold: held.hold } : {}) };
}

/**
 * Close what a request's earlier attempts left held: the answering attempt's hold is settled
 * with the answer's cost (once, whoever comes first), every other open hold of the request —
 * a row an attempt that died was asking — is released. Only retries and replays come here.
 */
async function closeRequestHolds(
  router: Router,
  req: ChatRequest,
  answer: ChatResult,
  keys: { answered?: string; all: string[] },
): Promise<void> {
  const { db, lifeforce } = router.deps;
  const requestKey = req.idempotencyKey!;
  const registry = req.preloaded?.registry ?? (await usableRegistry(db, req.agentId));
  const answered = keys.answered ?? callChargeKey(requestKey, answer.registryId);
  const candidates = new Set([
    answered,
    ...keys.all,
    ...rowsFor(registry, req.role, req.registryId).map((r) => callChargeKey(requestKey, r.id)),
  ]);
  const open = await openHolds(db, [...candidates]);
  const price = registry.find((r) => r.id === answer.registryId) ?? {
    costPer1kInput: 0,
    costPer1kOutput: 0,
    costPer1kCachedInput: null,
  };
  for (const key of open) {
    if (key === answered)
      await settle(db, key, llmCost(lifeforce!.prices, price, chargedUsage(answer)), {
        callId: answer.callId,
        model: answer.model,
      });
    else await release(db, key, 'another attempt of the same call answered');
  }
}

/** Build the router; keep one per process (it caches chat models per registry row). */
export function createLlmRouter(deps: LlmRouterDeps): LlmRouter {
  const router: Router = {
    deps: { ...deps, lifeforce: deps.lifeforce ?? { enabled: true, prices: defaultPrices } },
    models: new Map(),
    factories: {
      openai: (row) => createOpenAiChatModel(row, deps.env),
      anthropic: (row) => createAnthropicChatModel(row, deps.env),
      local: (row) => createLocalChatModel(row, { toolsDir: deps.toolsDir, threads: deps.localThreads }),
      scripted: (row) => ScriptedChatModel.fromRow(row, deps.scriptedReply),
    },
  };
  return {
    chat: (req) => chat(router, req),
    candidates: async (agentId, role) => rowsFor(await usableRegistry(deps.db, agentId), role),
    registry: (agentId) => usableRegistry(deps.db, agentId),
    previousCalls: (requestKeys) => llmCallsByKeys(deps.db, requestKeys),
  };
}
