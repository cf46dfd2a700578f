/**
 * Error types activities throw (STYLE §7). Workflows and retry presets refer to these names;
 * the non-retryable ones are listed in workflows/lib/activity-options.ts.
 */
import { ApplicationFailure } from '@temporalio/activity';

export const ErrorType = {
  InvalidInput: 'InvalidInput',
  NotFound: 'NotFound',
  Forbidden: 'Forbidden',
  BudgetExceeded: 'BudgetExceeded',
  Unavailable: 'Unavailable',
  /** No LLM of the role answers: the workflow enters Core Outage instead of retrying. */
  LlmUnavailable: 'LlmUnavailable',
} as const;
export type ErrorType = (typeof ErrorType)[keyof typeof ErrorType];

/** A failure the retry policy must not repeat (bad input, missing row, refused action). */
export function nonRetryable(type: ErrorType, message: string, details?: unknown): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: true, details: details === undefined ? [] : [details] });
}
