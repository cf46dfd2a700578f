/** Conversions shared by the LangChain-backed providers (OpenAI-compatible, Anthropic). */
import {
  AIMessage,
  HumanMessage,
  SystemMessage,
  type AIMessageChunk,
  type BaseMessage,
} from '@langchain/core/messages';
import { isPlainObject } from '../../../core/values.js';
import type { ChatMessage, ChatReply, ChatToolCall, ChatToolDef } from '../types.js';

export function toLangChainMessages(messages: ChatMessage[]): BaseMessage[] {
  return messages.map((m) =>
    m.role === 'system'
      ? new SystemMessage(m.content)
      : m.role === 'user'
        ? new HumanMessage(m.content)
        : new AIMessage(m.content),
  );
}

/**
 * Reply text, the provider's own token counts (0 when the endpoint reports none; the cached ones
 * null when it does not say) and its tool calls.
 */
export function fromLangChainReply(reply: AIMessageChunk | AIMessage): ChatReply {
  const usage = reply.usage_metadata;
  const details = usage?.input_token_details;
  const count = (n: unknown) => (typeof n === 'number' && Number.isFinite(n) && n >= 0 ? Math.round(n) : undefined);
  const cached = count(details?.cache_read);
  const written = count(details?.cache_creation);
  const toolCalls = toolCallsOf(reply);
  return {
    text: reply.text,
    usage: {
      promptTokens: usage?.input_tokens ?? 0,
      completionTokens: usage?.output_tokens ?? 0,
      cachedPromptTokens: cached ?? null,
      ...(written ? { cacheWriteTokens: written } : {}),
    },
    ...(toolCalls.length > 0 ? { toolCalls } : {}),
  };
}

/**
 * The reply's tool calls as plain data, in the order the model made them: parsed ones with
 * their arguments, ones whose arguments were not JSON (LangChain's `invalid_tool_calls`, or
 * parsed to something other than an object) with the error and the raw text.
 */
function toolCallsOf(reply: AIMessageChunk | AIMessage): ChatToolCall[] {
  const out: ChatToolCall[] = [];
  for (const c of reply.tool_calls ?? []) {
    const id = c.id ? { id: c.id } : {};
    const args: unknown = c.args;
    if (isPlainObject(args)) out.push({ ...id, name: c.name, args });
    else
      out.push({
        ...id,
        name: c.name,
        rawArgs: JSON.stringify(args) ?? String(args),
        error: 'the arguments are not a JSON object',
      });
  }
  for (const c of reply.invalid_tool_calls ?? []) {
    out.push({
      ...(c.id ? { id: c.id } : {}),
      name: c.name ?? '',
      rawArgs: c.args ?? '',
      error: jsonError(c.args ?? '') ?? firstLine(c.error),
    });
  }
  // LangChain lists the parsed calls, then the invalid ones: restore the model's order where the
  // raw OpenAI calls are kept (additional_kwargs.tool_calls), so cmd_ids and commands follow it.
  const raw: unknown = reply.additional_kwargs?.tool_calls;
  if (Array.isArray(raw) && out.length > 1) {
    const order = new Map(
      raw.map((r: unknown, i) => [isPlainObject(r) && typeof r.id === 'string' ? r.id : undefined, i] as const),
    );
    const at = (c: ChatToolCall) => (c.id !== undefined ? (order.get(c.id) ?? raw.length) : raw.length);
    out.sort((a, b) => at(a) - at(b));
  }
  return out;
}

/** JSON.parse's own short message for text that is not JSON (LangChain's wraps it in a page of advice). */
function jsonError(text: string): string | undefined {
  try {
    JSON.parse(text);
    return undefined;
  } catch (err) {
    return `not valid JSON: ${(err as Error).message}`;
  }
}

const firstLine = (s: string | undefined) => (s ?? '').trim().split('\n')[0] || 'the arguments are not valid JSON';

/** What the tool-calling APIs accept as a function name. */
const toolNamePattern = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * The definitions to bind, in OpenAI's function format (ChatOpenAI and ChatAnthropic both take
 * it). A name the APIs would refuse is left out rather than failing the whole call: the model
 * still sees that tool described in its prompt and can call it with a `tool.call` command.
 */
export function bindableTools(
  tools: readonly ChatToolDef[] | undefined,
): Array<{ type: 'function'; function: ChatToolDef }> {
  return (tools ?? [])
    .filter((t) => toolNamePattern.test(t.name))
    .map((t) => ({
      type: 'function',
      function: { name: t.name, description: t.description, parameters: t.parameters },
    }));
}
