/**
 * Error types activities throw. Workflows and retry presets refer to these names;
 * the non-retryable ones are listed in workflows/lib/activity-options.ts.
 */
import { ApplicationFailure } from '@temporalio/activity';
import { activityContext } from './heartbeat.js';
import type { z } from 'zod';
import { classifyError, rootMessage } from '../core/failure.js';
import { formatIssues } from '../core/zod-issues.js';
import { LifeforceExhaustedError } from './llm/errors.js';

export const ErrorType = {
  InvalidInput: 'InvalidInput',
  NotFound: 'NotFound',
  Forbidden: 'Forbidden',
  BudgetExceeded: 'BudgetExceeded',
  /** A dependency (database, engine, endpoint) is away: retried until it returns. */
  Unavailable: 'Unavailable',
  /** The request itself is wrong (the database refused its data): retrying repeats it. */
  InvalidRequest: 'InvalidRequest',
  /** An error of no known kind (a bug, a provider's odd failure) that persisted over a few attempts. */
  Unexpected: 'Unexpected',
  /** No LLM of the role answers: the workflow enters Core Outage instead of retrying. */
  LlmUnavailable: 'LlmUnavailable',
  /** A lifeforce budget cannot cover the operation: it did not run; the workflow pauses or asks for more. */
  LifeforceExhausted: 'LifeforceExhausted',
} as const;
export type ErrorType = (typeof ErrorType)[keyof typeof ErrorType];

/** A failure the retry policy must not repeat (bad input, missing row, refused action). */
export function nonRetryable(type: ErrorType, message: string, details?: unknown): ApplicationFailure {
  return ApplicationFailure.create({
    type,
    message,
    nonRetryable: true,
    details: details === undefined ? [] : [details],
  });
}

/** `input` parsed by `schema`, or a non-retryable InvalidInput naming `what` and every issue. */
export function parseInput<S extends z.ZodType>(what: string, schema: S, input: unknown): z.output<S> {
  const r = schema.safeParse(input);
  if (!r.success) throw nonRetryable(ErrorType.InvalidInput, `${what}: ${formatIssues(r.error)}`);
  return r.data;
}

/** A failure worth another attempt under the activity's retry policy (a race, a dependency away). */
export function retryable(type: ErrorType, message: string, details?: unknown): ApplicationFailure {
  return ApplicationFailure.create({
    type,
    message,
    nonRetryable: false,
    details: details === undefined ? [] : [details],
  });
}

/**
 * Wrap every activity of a family so that what it throws says which side of the line it is
 * on (core/failure.ts): an infrastructure error becomes a retryable `Unavailable`, an error of
 * the request itself a non-retryable `InvalidRequest` (retrying repeats it), and anything else
 * is rethrown as it is. The message is kept, so callers and tests read the same text.
 */
export function classifyActivityErrors<T extends Record<string, unknown>>(activities: T): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(activities)) {
    if (typeof fn !== 'function') {
      wrapped[name] = fn;
      continue;
    }
    wrapped[name] = async (...args: unknown[]) => {
      try {
        return await (fn as (...a: unknown[]) => Promise<unknown>)(...args);
      } catch (err) {
        throw classifiedFailure(err);
      }
    };
  }
  return wrapped as T;
}

/** The ApplicationFailure an activity should throw for `err` (or `err` itself when already one, or unclassified). */
export function classifiedFailure(err: unknown): unknown {
  if (err instanceof ApplicationFailure) return err;
  if (err instanceof LifeforceExhaustedError)
    return nonRetryable(ErrorType.LifeforceExhausted, err.message, err.details);
  if (err instanceof Error && err.name === 'CancelledFailure') return err;
  const kind = classifyError(err);
  if (kind === 'unknown') {
    // Not known to be an outage: a few attempts, then reported, even under a preset that
    // retries without a limit (those exist for outages only).
    const attempt = activityAttempt();
    if (attempt < maxUnknownAttempts) return err;
    const message = rootMessage(err, 2_000);
    return ApplicationFailure.create({
      type: ErrorType.Unexpected,
      message: `${message} (after ${attempt} attempts)`,
      nonRetryable: true,
    });
  }
  // The driver's own message, not the wrapper's: Drizzle's names the whole query and its
  // parameters, which may hold megabytes of model text.
  const message = rootMessage(err, 2_000);
  return kind === 'infra'
    ? ApplicationFailure.create({ type: ErrorType.Unavailable, message, nonRetryable: false })
    : ApplicationFailure.create({ type: ErrorType.InvalidRequest, message, nonRetryable: true });
}

/** Attempts an error of no known kind gets before it is reported instead of retried. */
const maxUnknownAttempts = 5;

/** The running attempt; 1 outside an activity (a test calling the function directly). */
function activityAttempt(): number {
  return activityContext()?.info.attempt ?? 1;
}
