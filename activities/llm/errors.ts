/**
 * The one failure the LLM layer reports to workflows: no candidate of the role answered.
 */
import { ApplicationFailure } from '@temporalio/activity';
import { clipText } from '../../core/sanitize.js';
import type { ChatAttempt, ChatRole } from './types.js';

/** ApplicationFailure type name; the workflow treats it as "enter Core Outage". */
export const LlmUnavailable = 'LlmUnavailable' as const;

/** Every enabled, non-excluded candidate of the role failed (or there was none). */
export class LlmUnavailableError extends Error {
  readonly type = LlmUnavailable;

  constructor(
    readonly agentId: string,
    readonly role: ChatRole,
    readonly attempts: ChatAttempt[],
  ) {
    super(
      attempts.length === 0
        ? `no LLM for agent ${agentId}, role ${role}: llm_registry has no enabled, non-excluded row`
        : `no LLM answered for agent ${agentId}, role ${role}: ` +
            attempts.map((a) => `#${a.registryId} ${a.model}: ${a.error}`).join('; '),
    );
    this.name = 'LlmUnavailableError';
  }
}

/** ApplicationFailure type name; the workflow pauses (or escalates for more) instead of retrying. */
export const LifeforceExhausted = 'LifeforceExhausted' as const;

/** A budget cannot cover an operation's worst case: the operation did not run. */
export class LifeforceExhaustedError extends Error {
  readonly type = LifeforceExhausted;

  constructor(
    readonly budgetId: string,
    readonly reason: string,
    readonly needed: number,
    readonly available: number | null,
    readonly agentId?: string,
  ) {
    super(
      `lifeforce exhausted: budget ${budgetId} cannot cover ${needed} LF (${reason}; available ${available ?? 'unlimited'} LF)`,
    );
    this.name = 'LifeforceExhaustedError';
  }

  /** What the workflow reads from the failure's details. */
  get details(): LifeforceShortfall {
    return { budgetId: this.budgetId, reason: this.reason, needed: this.needed, available: this.available };
  }
}

/** The details of a `LifeforceExhausted` failure. */
export interface LifeforceShortfall {
  budgetId: string;
  reason: string;
  needed: number;
  available: number | null;
}

/** A short, single-line description of any thrown value, for llm_calls.error and messages. */
export function describeError(err: unknown, max = 300): string {
  let text: string;
  if (err instanceof Error) {
    // The useful part is often a cause or two down (`Connection error.` ← `fetch failed` ← ECONNREFUSED).
    const causes: string[] = [];
    for (let c = err.cause, depth = 0; c instanceof Error && depth < 3; c = c.cause, depth++) causes.push(c.message);
    // A plain Error or one of ours (an ApplicationFailure) says enough by its message.
    const named = err.name !== 'Error' && !(err instanceof ApplicationFailure);
    text = `${named ? `${err.name}: ` : ''}${err.message}${causes.length ? ` (${causes.join(': ')})` : ''}`;
  } else {
    text = String(err);
  }
  return clipText(text.replace(/\s+/g, ' ').trim(), max);
}
