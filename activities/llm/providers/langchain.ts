/** Conversions shared by the LangChain-backed providers (OpenAI-compatible, Anthropic). */
import { AIMessage, HumanMessage, SystemMessage, type AIMessageChunk, type BaseMessage } from '@langchain/core/messages';
import type { ChatMessage, TokenUsage } from '../types.js';

export function toLangChainMessages(messages: ChatMessage[]): BaseMessage[] {
  return messages.map((m) =>
    m.role === 'system' ? new SystemMessage(m.content) : m.role === 'user' ? new HumanMessage(m.content) : new AIMessage(m.content),
  );
}

/** Reply text and the provider's own token counts (0 when the endpoint reports none). */
export function fromLangChainReply(reply: AIMessageChunk | AIMessage): { text: string; usage: TokenUsage } {
  const usage = reply.usage_metadata;
  return {
    text: reply.text,
    usage: { promptTokens: usage?.input_tokens ?? 0, completionTokens: usage?.output_tokens ?? 0 },
  };
}
