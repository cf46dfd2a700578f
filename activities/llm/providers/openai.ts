/**
 * Any OpenAI-compatible Chat Completions endpoint: OpenAI, Ollama, vLLM, llama.cpp server,
 * LM Studio. `base_url` selects it; a row without `api_key_env` is a local server that
 * needs no key.
 */
import { ChatOpenAICompletions } from '@langchain/openai';
import type { LlmRegistryEntry } from '../../../db/schema/llm.js';
import type { ChatModel } from '../types.js';
import { resolveApiKey, type EnvSource } from './keys.js';
import { bindableTools, fromLangChainReply, toLangChainMessages } from './langchain.js';

export function createOpenAiChatModel(row: LlmRegistryEntry, env: EnvSource): ChatModel {
  const baseURL = row.baseUrl ?? undefined;
  return {
    id: `openai:${row.model}@${baseURL ?? 'https://api.openai.com/v1'}`,
    async invoke(messages, params, signal, meta) {
      // Local servers ignore the key, but the SDK refuses to start without one.
      const apiKey = resolveApiKey(row, env) ?? 'not-needed';
      // Why Completions, not ChatOpenAI: ChatOpenAI switches some model names to the
      // Responses API, which Ollama/vLLM/llama.cpp do not serve.
      const model = new ChatOpenAICompletions({
        model: row.model,
        apiKey,
        configuration: { baseURL },
        // Failover between registry rows is the router's job; an SDK-level retry would only
        // delay it (LangChain's default is 6 retries with backoff).
        maxRetries: 0,
        temperature: params.temperature,
        topP: params.topP,
        presencePenalty: params.presencePenalty,
        frequencyPenalty: params.frequencyPenalty,
        maxTokens: params.maxTokens,
      });
      // Native tool calling: the tools go to the API as functions; the reply's tool_calls
      // come back in ChatReply.toolCalls (the caller turns them into `tool.call` commands).
      const tools = bindableTools(meta?.tools);
      const runnable = tools.length > 0 ? model.bindTools(tools) : model;
      const reply = await runnable.invoke(toLangChainMessages(messages), {
        signal,
        stop: params.stop,
        response_format: params.jsonSchema
          ? { type: 'json_schema', json_schema: { name: 'reply', schema: params.jsonSchema } }
          : undefined,
      });
      return fromLangChainReply(reply);
    },
  };
}
