/**
 * The test call of a catalogue model (`mindloop models test`, and `models add` before it stores
 * one): what the server says of the model (is it there, its context length), then three real
 * calls through the provider code the agents use — a plain one (latency), one asking for JSON,
 * and one with a trivial tool bound. Nothing is written here; runtime/models.ts stores the result.
 */
import { describeError } from '../activities/llm/errors.js';
import type { EnvSource } from '../activities/llm/providers/keys.js';
import { nativeToolProviders, type ChatMessage, type ChatModel } from '../activities/llm/types.js';
import { isPlainObject } from '../core/values.js';
import type { LlmRegistryEntry } from '../db/schema/llm.js';
import type { Model, ModelTestResult } from '../db/schema/models.js';

/**
 * What a test needs to know of a model (a stored entry, or one about to be added). An `embedder`
 * is tested by embedding one text instead of chatting.
 */
export type ModelSpec = Pick<Model, 'name' | 'provider' | 'model' | 'baseUrl' | 'apiKeyEnv' | 'params'> & {
  role?: Model['role'];
};

/** An embedder's test also records the size of its vectors. */
export type EmbedderTestResult = ModelTestResult & { dimensions: number | null };

export interface ModelTestDeps {
  /** Where the key named by `api_key_env` is looked up (the process environment). */
  env: EnvSource;
  /** The local model's folder (`.tools/`); needed only to test a `local` model. */
  toolsDir?: string;
  /** Each request's limit (default 30 s). */
  timeoutMs?: number;
}

/** Why a model failed its test: its key, a server that does not answer, a server without the model, or the call itself. */
export type ModelProblem = 'key' | 'unreachable' | 'no-such-model' | 'failed';

export interface ModelTestOutcome {
  result: ModelTestResult;
  /** Set when `result.ok` is false. */
  problem?: ModelProblem;
}

export const defaultModelTestTimeoutMs = 30_000;
export const openAiDefaultBaseUrl = 'https://api.openai.com/v1';
export const anthropicDefaultBaseUrl = 'https://api.anthropic.com';

/** The tool the test binds; a model that calls it can call tools. */
const pingTool = {
  name: 'ping',
  description: 'Answers pong. Call it whenever you are asked to ping.',
  parameters: { type: 'object', properties: {}, additionalProperties: false },
};
const jsonSchema = {
  type: 'object',
  properties: { ok: { type: 'boolean' } },
  required: ['ok'],
  additionalProperties: false,
};

/**
 * Whether a model of this provider at this address needs a key: Anthropic always, OpenAI's own
 * API always; an OpenAI-compatible server elsewhere (Ollama, vLLM, llama.cpp) may need none.
 */
export function needsKey(provider: Model['provider'], baseUrl: string | null | undefined): boolean {
  if (provider === 'anthropic') return true;
  if (provider !== 'openai') return false;
  return !baseUrl || new URL(baseUrl).hostname === 'api.openai.com';
}

/** The key of the variable the model names: undefined when it names none, an error text when that variable is unset. */
export function keyOf(
  spec: Pick<ModelSpec, 'provider' | 'baseUrl' | 'apiKeyEnv'>,
  env: EnvSource,
): { key?: string } | { error: string } {
  if (!spec.apiKeyEnv) {
    return needsKey(spec.provider, spec.baseUrl)
      ? {
          error: `an ${spec.provider} model at ${spec.baseUrl ?? 'its default address'} needs a key: name the environment variable that holds it (--key-env)`,
        }
      : {};
  }
  const key = env[spec.apiKeyEnv];
  return key
    ? { key }
    : {
        error: `environment variable ${spec.apiKeyEnv} is not set in this process (it should hold the key of this ${spec.provider} model)`,
      };
}

/** Run the test; never throws for the model's own failures (they are the result). */
export async function runModelTest(spec: ModelSpec, deps: ModelTestDeps): Promise<ModelTestOutcome> {
  const started = performance.now();
  const fail = (problem: ModelProblem, error: string): ModelTestOutcome => ({
    problem,
    result: {
      ok: false,
      latencyMs: Math.round(performance.now() - started),
      toolCalls: null,
      jsonReply: null,
      contextLength: null,
      error,
    },
  });
  const key = keyOf(spec, deps.env);
  if ('error' in key) return fail('key', key.error);
  const timeoutMs = deps.timeoutMs ?? defaultModelTestTimeoutMs;
  if (spec.role === 'embedder') return runEmbedderTest(spec, deps, timeoutMs);
  const served = await servedModel(spec, key.key, timeoutMs);
  if (served.kind !== 'ok') return fail(served.kind, served.error);

  const chat = await chatModelOf(spec, deps);
  const ask = (messages: ChatMessage[], extra: { json?: boolean; tools?: boolean } = {}) =>
    chat.invoke(
      messages,
      { temperature: 0, maxTokens: 64, ...(extra.json ? { jsonSchema } : {}) },
      AbortSignal.timeout(timeoutMs),
      { purpose: 'model-test', ...(extra.tools ? { tools: [pingTool] } : {}) },
    );

  const callStarted = performance.now();
  try {
    await ask([{ role: 'user', content: 'Reply with the single word: pong' }]);
  } catch (err) {
    const error = describeError(err);
    return fail(classify(error), `the test call failed: ${error}`);
  }
  const latencyMs = Math.round(performance.now() - callStarted);
  const jsonReply = await ask(
    [
      { role: 'system', content: 'Reply with JSON only.' },
      { role: 'user', content: 'Reply with {"ok": true}.' },
    ],
    { json: true },
  ).then(
    (r) => isJsonObject(r.text),
    () => false,
  );
  const toolCalls = nativeToolProviders.has(spec.provider)
    ? await ask([{ role: 'user', content: 'Ping, using the ping tool.' }], { tools: true }).then(
        (r) => (r.toolCalls ?? []).some((c) => c.name === pingTool.name),
        () => false,
      )
    : null;
  return { result: { ok: true, latencyMs, toolCalls, jsonReply, contextLength: served.contextLength } };
}

/** An embedder's test: one text embedded through the code the agents would use; its vectors' size recorded. */
async function runEmbedderTest(spec: ModelSpec, deps: ModelTestDeps, timeoutMs: number): Promise<ModelTestOutcome> {
  const { testEmbedder } = await import('../activities/embeddings/catalogue.js');
  const t = await testEmbedder(spec, { env: deps.env, toolsDir: deps.toolsDir, timeoutMs });
  const base = { latencyMs: t.latencyMs, toolCalls: null, jsonReply: null, contextLength: null };
  if (t.ok) {
    const result: EmbedderTestResult = { ...base, ok: true, dimensions: t.dimensions };
    return { result };
  }
  const result: EmbedderTestResult = {
    ...base,
    ok: false,
    dimensions: null,
    error: `the test embedding failed: ${t.error}`,
  };
  return { problem: classify(t.error), result };
}

/** A failed call's text, read for what went wrong. */
function classify(error: string): ModelProblem {
  if (/model_not_found|not_found_error|model .*(does not exist|not found)|no such model/i.test(error))
    return 'no-such-model';
  if (
    /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ECONNRESET|fetch failed|Connection error|timed? ?out|aborted/i.test(
      error,
    )
  )
    return 'unreachable';
  if (/\b401\b|\b403\b|api key|authentication|unauthori[sz]ed/i.test(error)) return 'key';
  return 'failed';
}

function isJsonObject(text: string): boolean {
  // Some models fence their JSON even when asked for JSON only.
  const bare = text.trim().replace(/^```(?:json)?\s*|\s*```$/g, '');
  try {
    return isPlainObject(JSON.parse(bare));
  } catch {
    return false;
  }
}

/** The chat model the agents would get for this entry, from the router's own provider code. */
async function chatModelOf(spec: ModelSpec, deps: ModelTestDeps): Promise<ChatModel> {
  const row = registryRowOf(spec);
  switch (spec.provider) {
    case 'openai':
      return (await import('../activities/llm/providers/openai.js')).createOpenAiChatModel(row, deps.env);
    case 'anthropic':
      return (await import('../activities/llm/providers/anthropic.js')).createAnthropicChatModel(row, deps.env);
    case 'local': {
      if (!deps.toolsDir) throw new Error('testing a local model needs the tools folder (MINDLOOP_TOOLS_DIR)');
      return (await import('../activities/llm/providers/local.js')).createLocalChatModel(row, {
        toolsDir: deps.toolsDir,
      });
    }
    case 'scripted':
      return (await import('../activities/llm/providers/scripted.js')).ScriptedChatModel.fromRow(row);
  }
}

/** A registry row standing for the catalogue entry (no agent owns it; it is never stored). */
function registryRowOf(spec: ModelSpec): LlmRegistryEntry {
  const now = new Date();
  return {
    id: 0,
    agentId: '',
    name: spec.name,
    provider: spec.provider,
    model: spec.model,
    baseUrl: spec.baseUrl,
    apiKeyEnv: spec.apiKeyEnv,
    modelName: spec.name,
    role: 'agent',
    priority: 100,
    validator: false,
    trust: 1,
    excluded: false,
    excludedReason: null,
    tier: null,
    costPer1kInput: 0,
    costPer1kOutput: 0,
    costPer1kCachedInput: null,
    contextWindow: null,
    enabled: true,
    params: spec.params,
    lastOkAt: null,
    lastErrorAt: null,
    lastError: null,
    consecutiveFailures: 0,
    createdAt: now,
    updatedAt: now,
  };
}

type Served =
  { kind: 'ok'; contextLength: number | null } | { kind: 'unreachable' | 'no-such-model' | 'key'; error: string };

/**
 * What the server says of the model: OpenAI-compatible servers answer `GET /models/<id>` (OpenAI,
 * Ollama) or list their models at `GET /models` (vLLM, llama.cpp); Anthropic answers
 * `GET /v1/models/<id>`. A server that answers neither is not judged here: the test call decides.
 * Local and scripted models have no server.
 */
async function servedModel(spec: ModelSpec, key: string | undefined, timeoutMs: number): Promise<Served> {
  if (spec.provider !== 'openai' && spec.provider !== 'anthropic') return { kind: 'ok', contextLength: null };
  const anthropic = spec.provider === 'anthropic';
  const base = (spec.baseUrl ?? (anthropic ? anthropicDefaultBaseUrl : openAiDefaultBaseUrl)).replace(/\/+$/, '');
  const modelsUrl = anthropic ? `${base}/v1/models` : `${base}/models`;
  const headers: Record<string, string> = anthropic
    ? { 'x-api-key': key ?? '', 'anthropic-version': '2023-06-01' }
    : key
      ? { authorization: `Bearer ${key}` }
      : {};
  const get = async (url: string): Promise<{ status: number; body: unknown } | { error: string }> => {
    try {
      const res = await fetch(url, { headers, signal: AbortSignal.timeout(timeoutMs) });
      const text = await res.text();
      let body: unknown = null;
      try {
        body = JSON.parse(text);
      } catch {
        // Not JSON: a page, not an API; read as no answer about the model.
      }
      return { status: res.status, body };
    } catch (err) {
      const e = err as Error & { cause?: { code?: string } };
      return {
        error:
          e.name === 'TimeoutError' || e.name === 'AbortError'
            ? `no answer in ${timeoutMs} ms`
            : (e.cause?.code ?? describeError(err)),
      };
    }
  };
  const one = await get(`${modelsUrl}/${encodeURIComponent(spec.model)}`);
  if ('error' in one) return { kind: 'unreachable', error: `cannot reach ${base}: ${one.error}` };
  if (one.status === 401 || one.status === 403)
    return {
      kind: 'key',
      error: `${base} refused the key in ${spec.apiKeyEnv ?? '(no key variable)'}: HTTP ${one.status}${apiMessage(one.body)}`,
    };
  if (one.status === 200 && isPlainObject(one.body) && one.body.id !== undefined)
    return { kind: 'ok', contextLength: contextLengthOf(one.body) };
  const list = await get(modelsUrl);
  if ('error' in list) return { kind: 'unreachable', error: `cannot reach ${base}: ${list.error}` };
  const data = isPlainObject(list.body) && Array.isArray(list.body.data) ? list.body.data.filter(isPlainObject) : null;
  if (list.status === 200 && data) {
    const entry = data.find((m) => m.id === spec.model);
    if (entry) return { kind: 'ok', contextLength: contextLengthOf(entry) };
    const ids = data.map((m) => String(m.id));
    return {
      kind: 'no-such-model',
      error: `${base} does not serve model '${spec.model}' (it serves: ${ids.length ? `${ids.slice(0, 12).join(', ')}${ids.length > 12 ? ', …' : ''}` : 'no models'})`,
    };
  }
  if (one.status === 404 && anthropic)
    return { kind: 'no-such-model', error: `${base} does not serve model '${spec.model}'${apiMessage(one.body)}` };
  return { kind: 'ok', contextLength: null };
}

const apiMessage = (body: unknown): string => {
  const err = isPlainObject(body) ? body.error : undefined;
  return isPlainObject(err) && typeof err.message === 'string' ? `: ${err.message.slice(0, 200)}` : '';
};

/** The fields OpenAI-compatible servers put a model's context length in (vLLM, OpenRouter, llama.cpp, LM Studio, Anthropic). */
const contextFields = [
  'context_length',
  'max_model_len',
  'context_window',
  'max_context_length',
  'max_input_tokens',
  'n_ctx',
];

function contextLengthOf(entry: Record<string, unknown>): number | null {
  const nested = [entry, entry.meta, entry.top_provider].filter(isPlainObject);
  for (const o of nested) {
    for (const f of [...contextFields, 'n_ctx_train']) {
      const v = o[f];
      if (typeof v === 'number' && Number.isInteger(v) && v > 0) return v;
    }
  }
  return null;
}
