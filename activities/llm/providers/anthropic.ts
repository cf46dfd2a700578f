/** Anthropic's Messages API through LangChain's ChatAnthropic. */
import { ChatAnthropic } from '@langchain/anthropic';
import { SystemMessage, type BaseMessage } from '@langchain/core/messages';
import type { LlmRegistryEntry } from '../../../db/schema/llm.js';
import { ErrorType, nonRetryable } from '../../errors.js';
import type { ChatMessage, ChatModel } from '../types.js';
import { resolveApiKey, type EnvSource } from './keys.js';
import { bindableTools, fromLangChainReply, toLangChainMessages } from './langchain.js';

const defaultBaseUrl = 'https://api.anthropic.com';
const defaultMaxTokens = 1024;

export function createAnthropicChatModel(row: LlmRegistryEntry, env: EnvSource): ChatModel {
  // Explicit, so ChatAnthropic never falls back to ANTHROPIC_BASE_URL from process.env.
  const baseUrl = row.baseUrl ?? defaultBaseUrl;
  return {
    id: `anthropic:${row.model}@${baseUrl}`,
    async invoke(messages, params, signal, meta) {
      const apiKey = resolveApiKey(row, env);
      if (!apiKey)
        throw nonRetryable(ErrorType.InvalidInput, `llm_registry #${row.id} (anthropic) names no api_key_env`);
      const model = new ChatAnthropic({
        model: row.model,
        apiKey,
        anthropicApiUrl: baseUrl,
        maxRetries: 0, // failover is the router's job
        temperature: params.temperature,
        topP: params.topP,
        maxTokens: params.maxTokens ?? defaultMaxTokens,
        stopSequences: params.stop,
        // Anthropic has no presence/frequency penalties; they are dropped.
      });
      // Native tool calling (tool_use blocks come back as ChatReply.toolCalls).
      const tools = bindableTools(meta?.tools);
      const runnable = tools.length > 0 ? model.bindTools(tools) : model;
      const reply = await runnable.invoke(anthropicMessages(messages, params.jsonSchema), { signal });
      return fromLangChainReply(reply);
    },
  };
}

/** The cache breakpoint on the prompt's stable prefix: Anthropic caches the tools and the system text up to it. */
export const anthropicCacheControl = { type: 'ephemeral' } as const;

/**
 * Anthropic takes the system prompt first, as text blocks. A leading system message is the
 * prompt's stable prefix: its block carries the cache breakpoint, so a later call with the same
 * tools and leading block reads them from the cache. The other system messages, and the JSON
 * schema (the Messages API has no response_format; the caller validates with zod), follow in
 * blocks of their own after the breakpoint.
 */
export function anthropicMessages(
  messages: ChatMessage[],
  jsonSchema: Record<string, unknown> | undefined,
): BaseMessage[] {
  const [first] = messages;
  const stable = first?.role === 'system' ? first.content : undefined;
  const others = messages.slice(stable === undefined ? 0 : 1);
  const system = others.filter((m) => m.role === 'system').map((m) => m.content);
  if (jsonSchema)
    system.push(`Reply with one JSON value only, matching this JSON schema:\n${JSON.stringify(jsonSchema)}`);
  const blocks = [
    ...(stable !== undefined ? [{ type: 'text' as const, text: stable, cache_control: anthropicCacheControl }] : []),
    ...(system.length > 0 ? [{ type: 'text' as const, text: system.join('\n\n') }] : []),
  ];
  const rest = toLangChainMessages(others.filter((m) => m.role !== 'system'));
  return blocks.length > 0 ? [new SystemMessage({ content: blocks }), ...rest] : rest;
}
