/**
 * What workflows need of lifeforce: the budget settings an agent starts with, and reading a
 * `LifeforceExhausted` failure (an operation its budget could not cover; nothing ran).
 */
import { ApplicationFailure } from '@temporalio/workflow';
import { activityCause } from './infra.js';
import type { LifeforceShortfall } from '../../activities/llm/errors.js';

export { budgetSettingsSchema } from '../../core/lifeforce-settings.js';
export type { LifeforceShortfall };

/** The shortfall of a failed activity refused by the ledger, or null for any other failure. */
export function lifeforceShortfallOf(err: unknown): LifeforceShortfall | null {
  const cause = activityCause(err);
  if (!(cause instanceof ApplicationFailure) || cause.type !== 'LifeforceExhausted') return null;
  const d = cause.details?.[0] as Partial<LifeforceShortfall> | undefined;
  return {
    budgetId: typeof d?.budgetId === 'string' ? d.budgetId : 'unknown',
    reason: typeof d?.reason === 'string' ? d.reason : 'balance',
    needed: typeof d?.needed === 'number' ? d.needed : 0,
    available: typeof d?.available === 'number' ? d.available : null,
  };
}
