/**
 * The LLM layer's own types: one chat interface every provider implements, and what a routed
 * call returns. Plain data only, so results cross the activity boundary as JSON.
 */
import type { LlmRegistryEntry, llmProviders, llmRoles } from '../../db/schema/llm.js';

export type LlmProvider = (typeof llmProviders)[number];
/** Roles a chat call can be routed by (`embedder` rows are not chat models). */
export type ChatRole = Exclude<(typeof llmRoles)[number], 'embedder'>;
export const chatRoles = ['agent', 'oversight', 'validator', 'emotion', 'novelty', 'task'] as const satisfies readonly ChatRole[];

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
}

/** One provider endpoint, built from an `llm_registry` row. */
export interface ChatModel {
  /** Human-readable identity, e.g. `openai:gpt-4o-mini@https://api.openai.com/v1`. */
  id: string;
  invoke(messages: ChatMessage[], params: ChatParams, signal?: AbortSignal, meta?: ChatMeta): Promise<{ text: string; usage: TokenUsage }>;
}

/** What the call is for (the router's `purpose`): seen by the scripted test double, ignored by real models. */
export interface ChatMeta {
  purpose?: string;
}

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
  usage: TokenUsage;
  costUsd: number;
  latencyMs: number;
  /** The candidates that failed before this one answered, in order. */
  attempts: ChatAttempt[];
  /** True when the answer came from `llm_calls` (same idempotency key), not from the model. */
  replayed: boolean;
  /** The `llm_calls` row holding the reply (pass this id around instead of the text). */
  callId: number;
}
