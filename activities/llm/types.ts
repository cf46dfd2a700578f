/**
 * The LLM layer's own types: one chat interface every provider implements, and what a routed
 * call returns. Plain data only, so results cross the activity boundary as JSON.
 */
import type { LlmRegistryEntry, llmProviders, llmRoles } from '../../db/schema/llm.js';
import type { ReplyToolCall } from '../../core/reply-parser.js';

export type LlmProvider = (typeof llmProviders)[number];
/** Roles a chat call can be routed by (`embedder` rows are not chat models). */
export type ChatRole = Exclude<(typeof llmRoles)[number], 'embedder'>;
export const chatRoles = [
  'agent',
  'oversight',
  'validator',
  'emotion',
  'novelty',
  'task',
] as const satisfies readonly ChatRole[];
/** Providers that bind `ChatMeta.tools` natively; the others (local, scripted) keep the text path. */
export const nativeToolProviders: ReadonlySet<LlmProvider> = new Set<LlmProvider>(['openai', 'anthropic']);

/**
 * One message of a prompt. A leading system message is the prompt's stable prefix (a tick's
 * contexts 0–2): a provider with explicit prompt caching (Anthropic) marks it as a cache breakpoint.
 */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** Sampling parameters; a request's values override the registry row's `params`. */
export interface ChatParams {
  temperature?: number;
  topP?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  maxTokens?: number;
  stop?: string[];
  /** Ask for JSON matching this schema (OpenAI: response_format; local: a GBNF grammar). */
  jsonSchema?: Record<string, unknown>;
}

export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  /**
   * Of `promptTokens`, those the provider read from its prompt cache (OpenAI: cached_tokens;
   * Anthropic: cache_read_input_tokens); absent or null when the provider does not say.
   */
  cachedPromptTokens?: number | null;
  /** Of `promptTokens`, those written to the provider's prompt cache (Anthropic: cache_creation_input_tokens). */
  cacheWriteTokens?: number;
}

/** One provider endpoint, built from an `llm_registry` row. */
export interface ChatModel {
  /** Human-readable identity, e.g. `openai:gpt-4o-mini@https://api.openai.com/v1`. */
  id: string;
  invoke(messages: ChatMessage[], params: ChatParams, signal?: AbortSignal, meta?: ChatMeta): Promise<ChatReply>;
  /**
   * How long this call may take, when the model knows better than a fixed timeout (the local
   * model: from its measured speed). A row's `params.timeoutMs` still wins.
   */
  timeoutMs?(messages: ChatMessage[], params: ChatParams): number;
}

/** One model answer: the text, the provider's token counts, and the native tool calls it made. */
export interface ChatReply {
  text: string;
  usage: TokenUsage;
  /** Only from providers that bind `ChatMeta.tools` (OpenAI-compatible, Anthropic); absent otherwise. */
  toolCalls?: ChatToolCall[];
  /** The local model's measurement of the call (recorded in `llm_calls.metadata.local`). */
  local?: { evaluatedPromptTokens: number; promptEvalMs: number; genTokens: number; genMs: number };
}

/**
 * Besides the purpose (seen by the scripted test double, ignored by real models): the tools a
 * provider with native tool calling binds. The local model and the scripted double ignore
 * them (their prompt describes the tools as text).
 */
export interface ChatMeta {
  purpose?: string;
  tools?: ChatToolDef[];
}

/** A tool as plain JSON (OpenAI function format): crosses the activity boundary, bound with `bindTools`. */
export interface ChatToolDef {
  /** `^[a-zA-Z0-9_-]{1,64}$` (what the tool-calling APIs accept). */
  name: string;
  /** The state machine's current state and valid actions (core/state-machines.ts describeTool). */
  description: string;
  /** JSON Schema of the arguments. */
  parameters: Record<string, unknown>;
}

/**
 * A native tool call from a reply (the reply parser's own type: core/reply-parser.ts turns it
 * into a `tool.call` command, or a rejection when its arguments did not parse).
 */
export type ChatToolCall = ReplyToolCall;

/** Builds a chat model from a registry row (injectable per provider for tests). */
export type ChatModelFactory = (row: LlmRegistryEntry) => ChatModel;

export interface ChatAttempt {
  registryId: number;
  model: string;
  error: string;
}

export interface ChatResult {
  text: string;
  registryId: number;
  provider: LlmProvider;
  model: string;
  usage: { promptTokens: number; completionTokens: number };
  /** Of `usage.promptTokens`, those the provider read from its prompt cache; absent when it did not say. */
  cachedPromptTokens?: number;
  costUsd: number;
  latencyMs: number;
  /** The candidates that failed before this one answered, in order. */
  attempts: ChatAttempt[];
  /** True when the answer came from `llm_calls` (same idempotency key), not from the model. */
  replayed: boolean;
  /** The `llm_calls` row holding the reply (pass this id around instead of the text). */
  callId: number;
  /** Native tool calls of the reply (stored in the row's metadata, so a replay carries them too). */
  toolCalls?: ChatToolCall[];
  /** Set when the answer was over the reply cap and cut (also in the row's `metadata.truncated`). */
  truncated?: { originalBytes: number; keptBytes: number; droppedToolCalls: number };
  /** What the ledger charged for this answer and what the budget has left (absent with the ledger off, or on a replay). */
  lifeforce?: { budgetId: string; charged: number; available: number | null };
}
