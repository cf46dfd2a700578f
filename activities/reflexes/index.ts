/**
 * The reflex activities: the tick's reflexes (emotions, novelty and anti-stagnation,
 * validation; activities/reflexes/tick-reflexes.ts), and the reversible sides of what they
 * decide (restoring an archived row, resolving a fact-check).
 */
import { restorableTables, restoreArchived, type RestoreInput } from '../../db/queries/archive.js';
import { resolveFact, type ResolveFactInput } from '../../db/queries/facts.js';
import { ErrorType, nonRetryable } from '../errors.js';
import { tickReflexes, type ReflexDeps, type TickReflexesInput } from './tick-reflexes.js';

export type { ReflexDeps, TickReflexesInput, TickReflexesResult } from './tick-reflexes.js';


/** Reflex activities, built from a database, an LLM router and the tick snapshots. */
export function createReflexActivities(deps: ReflexDeps) {
  return {
    /** Emotions, novelty and anti-stagnation, validation for one tick of the main loop; idempotent on the response row. */
    tickReflexes: (input: TickReflexesInput) => tickReflexes(deps, input),

    /** Restore an archived row of a memory tier (the memory manager's decisions are reversible). */
    restoreMemory: (input: RestoreInput) => {
      if (!restorableTables.includes(input.table)) throw nonRetryable(ErrorType.InvalidInput, `restore: unknown table ${String(input.table)} (expected ${restorableTables.join(', ')})`);
      return restoreArchived(deps.db, input);
    },

    /** Record a fact-check's outcome (verified/rejected) and close its task. */
    resolveFact: async (input: ResolveFactInput): Promise<{ ok: boolean }> => ({ ok: (await resolveFact(deps.db, input)).ok }),
  };
}
