/** Anthropic's Messages API through LangChain's ChatAnthropic. */
import { ChatAnthropic } from '@langchain/anthropic';
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
      const reply = await runnable.invoke(toLangChainMessages(anthropicMessages(messages, params.jsonSchema)), {
        signal,
      });
      return fromLangChainReply(reply);
    },
  };
}

/**
 * Anthropic takes one system prompt, first: merge the system messages, and state the JSON
 * schema there (the Messages API has no response_format; the caller validates with zod).
 */
function anthropicMessages(messages: ChatMessage[], jsonSchema: Record<string, unknown> | undefined): ChatMessage[] {
  const system = messages.filter((m) => m.role === 'system').map((m) => m.content);
  if (jsonSchema)
    system.push(`Reply with one JSON value only, matching this JSON schema:\n${JSON.stringify(jsonSchema)}`);
  const rest = messages.filter((m) => m.role !== 'system');
  return system.length > 0 ? [{ role: 'system', content: system.join('\n\n') }, ...rest] : rest;
}
