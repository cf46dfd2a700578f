/**
 * Zod at the workflow edge: a bad input (typed by hand in the Temporal UI, say) fails the
 * workflow at once with a non-retryable error that names every bad field.
 */
import { ApplicationFailure } from '@temporalio/workflow';
import type { z } from 'zod';

export const InvalidInputError = 'InvalidInput';

/** Parse `input` or throw `ApplicationFailure.nonRetryable` listing `field: problem` pairs. */
export function parseWorkflowInput<S extends z.ZodType>(workflow: string, schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const fields = result.error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(input)'}: ${i.message}`);
  throw ApplicationFailure.create({
    type: InvalidInputError,
    nonRetryable: true,
    message: `${workflow}: invalid input — ${fields.join('; ')}`,
    details: [fields],
  });
}
