/**
 * The deterministic test double: no model at all. Replies come from the row's
 * `params.replies` (cycled) or from a function the tests inject; tokens are counted as
 * ceil(chars / 4), so accounting is reproducible. Also what benchmarks use as an instant LLM.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure } from '@temporalio/activity';
import { z } from 'zod';
import { formatIssues } from '../../../core/zod-issues.js';
import type { LlmRegistryEntry } from '../../../db/schema/llm.js';
import { ErrorType, nonRetryable } from '../../errors.js';
import type { ChatMessage, ChatMeta, ChatModel, ChatParams, TokenUsage } from '../types.js';

/** Produces the reply for one call; `callIndex` counts this model's calls from 0. */
export type ScriptedReplyFn = (input: {
  messages: ChatMessage[];
  params: ChatParams;
  callIndex: number;
  registryId?: number;
  /** The router's purpose: 'think' for the tick's reply, 'emotion', 'novelty', 'validation'… for the reflexes. */
  purpose?: string;
}) => string | Promise<string>;

interface ScriptedOptions {
  replies?: string[];
  reply?: ScriptedReplyFn;
  /** Simulated latency (abortable), to exercise timeouts and heartbeats. */
  delayMs?: number;
  /** When set, every call fails with this message: a scripted outage. */
  error?: string;
  registryId?: number;
  name?: string;
}

/** The row's `params` a scripted row understands (other keys are ignored). */
const scriptedParams = z.object({
  replies: z.array(z.string()).min(1).optional(),
  delayMs: z.number().int().min(0).optional(),
  error: z.string().min(1).optional(),
});

/** Deterministic token count used by the scripted model. */
export function scriptedTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

export class ScriptedChatModel implements ChatModel {
  readonly id: string;
  private callIndex = 0;

  constructor(private readonly opts: ScriptedOptions = {}) {
    this.id = `scripted:${opts.name ?? 'replies'}`;
  }

  /** A scripted model configured by an `llm_registry` row (`params.replies`, `delayMs`, `error`). */
  static fromRow(row: LlmRegistryEntry, reply?: ScriptedReplyFn): ScriptedChatModel {
    const parsed = scriptedParams.safeParse(row.params);
    if (!parsed.success)
      throw nonRetryable(
        ErrorType.InvalidInput,
        `llm_registry #${row.id}: bad scripted params: ${formatIssues(parsed.error, 'params')}`,
      );
    return new ScriptedChatModel({ ...parsed.data, reply, registryId: row.id, name: row.model });
  }

  async invoke(
    messages: ChatMessage[],
    params: ChatParams,
    signal?: AbortSignal,
    meta?: ChatMeta,
  ): Promise<{ text: string; usage: TokenUsage }> {
    signal?.throwIfAborted();
    if (this.opts.delayMs) await sleep(this.opts.delayMs, undefined, { signal });
    // A scripted outage: the endpoint is away, as a real provider's connection error says.
    if (this.opts.error)
      throw ApplicationFailure.create({ type: ErrorType.Unavailable, message: this.opts.error, nonRetryable: false });
    const callIndex = this.callIndex++;
    let text: string;
    if (this.opts.reply) {
      text = await this.opts.reply({
        messages,
        params,
        callIndex,
        registryId: this.opts.registryId,
        ...(meta?.purpose ? { purpose: meta.purpose } : {}),
      });
    } else {
      const replies = this.opts.replies ?? [];
      text = replies.length > 0 ? replies[callIndex % replies.length]! : `Scripted reply ${callIndex + 1}.`;
    }
    const prompt = messages.map((m) => m.content).join('\n');
    return { text, usage: { promptTokens: scriptedTokens(prompt), completionTokens: scriptedTokens(text) } };
  }
}
