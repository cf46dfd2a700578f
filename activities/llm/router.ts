/**
 * Routes a chat call to an agent's LLMs for a role: candidates from `llm_registry` by
 * priority, failover on error or timeout, one `llm_calls` row per attempt, and replay of a
 * stored answer when the same idempotency key comes again.
 */
import { randomUUID } from 'node:crypto';
import { and, asc, eq, inArray, sql } from 'drizzle-orm';
import { z } from 'zod';
import { defaultMaxReplyBytes, sanitizeAnswer, sanitizeText } from '../../core/sanitize.js';
import type { Db } from '../../db/client.js';
import { llmCalls, llmRegistry, type LlmCall, type LlmRegistryEntry } from '../../db/schema/llm.js';
import { describeError, LlmUnavailableError } from './errors.js';
import { createAnthropicChatModel } from './providers/anthropic.js';
import type { EnvSource } from './providers/keys.js';
import { createLocalChatModel } from './providers/local.js';
import { createOpenAiChatModel } from './providers/openai.js';
import { ScriptedChatModel, type ScriptedReplyFn } from './providers/scripted.js';
import type { ChatAttempt, ChatMessage, ChatModel, ChatModelFactory, ChatParams, ChatReply, ChatResult, ChatRole, ChatToolCall, ChatToolDef, LlmProvider } from './types.js';

export interface LlmRouterDeps {
  db: Db;
  /** Where API keys are looked up by the row's `api_key_env` (the composition root passes the process env). */
  env: EnvSource;
  /** Locates the local GGUF model (`.tools/`). */
  toolsDir: string;
  /** Replace the chat model built for a provider (tests, custom clients). */
  factories?: Partial<Record<LlmProvider, ChatModelFactory>>;
  /** Per-attempt timeout; a row's `params.timeoutMs` wins. Default 60 s. */
  timeoutMs?: number;
  /** CPU threads for the local model (default: half the cores). */
  localThreads?: number;
  /** Reply function for `scripted` rows (default: the row's `params.replies`). */
  scriptedReply?: ScriptedReplyFn;
  /** Cap on one answer (text and tool calls), in UTF-8 bytes; a row's `params.maxReplyBytes` wins. Default 256 KB. */
  maxReplyBytes?: number;
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
export function rowsFor(registry: readonly LlmRegistryEntry[], role: ChatRole, registryId?: number): LlmRegistryEntry[] {
  if (registryId !== undefined) return registry.filter((r) => r.id === registryId);
  // A validator is a row with role 'validator' or any row flagged `validator`.
  return registry.filter((r) => (role === 'validator' ? r.role === 'validator' || r.validator : r.role === role));
}

export const defaultLlmTimeoutMs = 60_000;
/** `last_ok_at` is refreshed at most this often, to keep a write off every tick. */
const okRefreshMs = 60_000;
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
  if (!parsed.success) throw new Error(`llm_registry #${row.id}: bad params: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

function costOf(row: Pick<LlmRegistryEntry, 'costPer1kInput' | 'costPer1kOutput'>, usage: { promptTokens: number; completionTokens: number }): number {
  const usd = (usage.promptTokens / 1000) * row.costPer1kInput + (usage.completionTokens / 1000) * row.costPer1kOutput;
  return Math.round(usd * 1e6) / 1e6; // the column's scale
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
    costUsd: ok.costUsd,
    latencyMs: ok.latencyMs ?? 0,
    attempts: failed.map((r) => ({ registryId: r.registryId ?? 0, model: r.model, error: r.error ?? 'unknown error' })),
    replayed: true,
    callId: ok.id,
    ...(toolCalls ? { toolCalls } : {}),
    ...(truncated.success ? { truncated: truncated.data } : {}),
  };
}

/** Build the router; keep one per process (it caches chat models per registry row). */
export function createLlmRouter(deps: LlmRouterDeps): LlmRouter {
  const { db } = deps;
  const models = new Map<string, ChatModel>();

  const defaultFactories: Record<LlmProvider, ChatModelFactory> = {
    openai: (row) => createOpenAiChatModel(row, deps.env),
    anthropic: (row) => createAnthropicChatModel(row, deps.env),
    local: (row) => createLocalChatModel(row, { toolsDir: deps.toolsDir, threads: deps.localThreads }),
    scripted: (row) => ScriptedChatModel.fromRow(row, deps.scriptedReply),
  };

  /** One model per row configuration: the scripted model's cycle and the local model's load persist. */
  function modelFor(row: LlmRegistryEntry): ChatModel {
    const key = JSON.stringify([row.id, row.provider, row.model, row.baseUrl, row.apiKeyEnv, row.params]);
    let model = models.get(key);
    if (!model) {
      const factory = deps.factories?.[row.provider] ?? defaultFactories[row.provider];
      model = factory(row);
      if (models.size >= maxCachedModels) models.clear();
      models.set(key, model);
    }
    return model;
  }

  async function registry(agentId: string): Promise<LlmRegistryEntry[]> {
    const usable = and(eq(llmRegistry.agentId, agentId), eq(llmRegistry.enabled, true), eq(llmRegistry.excluded, false));
    return db.select().from(llmRegistry).where(usable).orderBy(asc(llmRegistry.priority), asc(llmRegistry.id));
  }

  async function candidates(agentId: string, role: ChatRole, registryId?: number): Promise<LlmRegistryEntry[]> {
    return rowsFor(await registry(agentId), role, registryId);
  }

  async function previousCalls(requestKeys: string[]): Promise<LlmCall[]> {
    if (requestKeys.length === 0) return [];
    return db.select().from(llmCalls).where(inArray(llmCalls.requestKey, requestKeys)).orderBy(asc(llmCalls.id));
  }

  async function recordHealth(row: LlmRegistryEntry, error: string | undefined): Promise<void> {
    // `updated_at` stays: it marks configuration changes, not traffic.
    if (error === undefined) {
      const fresh = row.lastOkAt !== null && Date.now() - row.lastOkAt.getTime() < okRefreshMs;
      if (row.consecutiveFailures === 0 && fresh) return;
      await db
        .update(llmRegistry)
        .set({ lastOkAt: sql`now()`, consecutiveFailures: 0, updatedAt: sql`${llmRegistry.updatedAt}` })
        .where(eq(llmRegistry.id, row.id));
    } else {
      await db
        .update(llmRegistry)
        .set({
          lastErrorAt: sql`now()`,
          lastError: error,
          consecutiveFailures: sql`${llmRegistry.consecutiveFailures} + 1`,
          updatedAt: sql`${llmRegistry.updatedAt}`,
        })
        .where(eq(llmRegistry.id, row.id));
    }
  }

  async function chat(req: ChatRequest): Promise<ChatResult> {
    const requestKey = req.idempotencyKey;
    if (requestKey !== undefined) {
      const previous = req.preloaded ? req.preloaded.previous.filter((r) => r.requestKey === requestKey) : await previousCalls([requestKey]);
      const ok = previous.find((r) => r.ok);
      if (ok) return resultFromRow(ok, previous.filter((r) => !r.ok && r.id < ok.id));
    }

    const rows = req.preloaded ? rowsFor(req.preloaded.registry, req.role, req.registryId) : await candidates(req.agentId, req.role, req.registryId);
    const attempts: ChatAttempt[] = [];
    for (const row of rows) {
      req.signal?.throwIfAborted();
      const started = performance.now();
      const base = {
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
      };
      let model: ChatModel | undefined;
      let timeout: { ms: number; signal: AbortSignal } | undefined;
      let answer: (ChatReply & { params: ChatParams; maxReplyBytes: number }) | undefined;
      try {
        model = modelFor(row);
        const { timeoutMs, maxReplyBytes, ...defaults } = rowParams(row);
        const params: ChatParams = { ...defaults, ...req.params };
        const ms = timeoutMs ?? deps.timeoutMs ?? defaultLlmTimeoutMs;
        timeout = { ms, signal: AbortSignal.timeout(ms) };
        const signal = req.signal ? AbortSignal.any([req.signal, timeout.signal]) : timeout.signal;
        const reply = await model.invoke(req.messages, params, signal, { purpose: req.purpose, ...(req.tools?.length ? { tools: req.tools } : {}) });
        answer = { ...reply, params, maxReplyBytes: maxReplyBytes ?? deps.maxReplyBytes ?? defaultMaxReplyBytes };
      } catch (err) {
        const cancelled = req.signal?.aborted === true;
        // An error message may quote the endpoint's body: sanitised like any model text.
        const error = sanitizeText(
          cancelled ? `cancelled: ${describeError(req.signal?.reason)}` : timeout?.signal.aborted ? `timed out after ${timeout.ms} ms` : describeError(err),
        );
        await db.insert(llmCalls).values({
          ...base,
          latencyMs: Math.round(performance.now() - started),
          ok: false,
          error,
          metadata: model ? { endpoint: model.id } : null,
        });
        // The caller gave up (activity cancelled): no failover, no health penalty.
        if (cancelled) throw req.signal?.reason ?? err;
        await recordHealth(row, error);
        attempts.push({ registryId: row.id, model: row.model, error });
        continue;
      }

      // Outside the try: a database error here is not the model's failure and must not
      // trigger failover; it propagates and the activity is retried (the key finds the answer).
      // Model text enters here, once: sanitised and capped before anything stores or returns it.
      const { usage, params } = answer;
      const { text, toolCalls, truncated } = sanitizeAnswer({ text: answer.text, toolCalls: answer.toolCalls }, answer.maxReplyBytes);
      const latencyMs = Math.round(performance.now() - started);
      const costUsd = costOf(row, usage);
      const okRow = {
        ...base,
        promptTokens: usage.promptTokens,
        completionTokens: usage.completionTokens,
        costUsd,
        latencyMs,
        ok: true,
        reply: text,
        // The tool calls are part of the answer: a replay by the key must return them too.
        metadata: { endpoint: model.id, jsonSchema: params.jsonSchema !== undefined, ...(toolCalls.length ? { toolCalls } : {}), ...(truncated ? { truncated } : {}) },
      };
      // The partial unique index on (request_key) where ok: did a racing attempt of the same
      // call (a retry started while this one still ran) answer first?
      const [inserted] = await db.insert(llmCalls).values(okRow).onConflictDoNothing().returning({ id: llmCalls.id });
      await recordHealth(row, undefined);
      if (!inserted) {
        // Its answer wins, so every caller sees one reply; this one's tokens are still spent.
        await db.insert(llmCalls).values({ ...okRow, requestKey: null, metadata: { ...okRow.metadata, duplicateOf: requestKey } });
        const [winner] = await db.select().from(llmCalls).where(and(eq(llmCalls.requestKey, requestKey ?? ''), eq(llmCalls.ok, true)));
        if (!winner) throw new Error(`llm_calls: the answer recorded for ${requestKey} vanished`);
        return resultFromRow(winner, []);
      }
      return {
        text,
        registryId: row.id,
        provider: row.provider,
        model: row.model,
        usage,
        costUsd,
        latencyMs,
        attempts,
        replayed: false,
        callId: inserted.id,
        ...(toolCalls.length ? { toolCalls } : {}),
        ...(truncated ? { truncated } : {}),
      };
    }
    throw new LlmUnavailableError(req.agentId, req.role, attempts);
  }

  return { chat, candidates: (agentId, role) => candidates(agentId, role), registry, previousCalls };
}
