/**
 * Zod at the workflow edge: a bad input (typed by hand in the Temporal UI, say) fails the
 * workflow at once with a non-retryable error that names every bad field.
 */
import { ApplicationFailure } from '@temporalio/workflow';
import type { z } from 'zod';
import { formatIssues } from '../../core/zod-issues.js';

export const InvalidInputError = 'InvalidInput';

/** Parse `input` or throw `ApplicationFailure.nonRetryable` listing `field: problem` pairs. */
export function parseWorkflowInput<S extends z.ZodType>(workflow: string, schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  // One `field: problem` line per issue.
  const fields = formatIssues(result.error, '(input)', { separator: '\u0000' }).split('\u0000');
  throw ApplicationFailure.create({
    type: InvalidInputError,
    nonRetryable: true,
    message: `${workflow}: invalid input — ${fields.join('; ')}`,
    details: [fields],
  });
}
