/**
 * The reversible sides of what the tick's reflexes (activities/tick/reflexes.ts) decide:
 * restoring an archived row, resolving a fact-check. The pieces the reflexes record and ask
 * through live beside this file (record.ts, peers.ts, stagnation.ts, memory-manager.ts).
 */
import type { Db } from '../../db/client.js';
import { restorableTables, restoreArchived, type RestoreInput } from '../../db/queries/archive.js';
import { resolveFact, type ResolveFactInput } from '../../db/queries/facts.js';
import { ErrorType, nonRetryable } from '../errors.js';

/** Reflex activities, built from a database. */
export function createReflexActivities(deps: { db: Db }) {
  return {
    /** Restore an archived row of a memory tier (the memory manager's decisions are reversible). */
    restoreMemory: (input: RestoreInput) => {
      if (!restorableTables.includes(input.table))
        throw nonRetryable(
          ErrorType.InvalidInput,
          `restore: unknown table ${String(input.table)} (expected ${restorableTables.join(', ')})`,
        );
      return restoreArchived(deps.db, input);
    },

    /** Record a fact-check's outcome (verified/rejected) and close its task. */
    resolveFact: async (input: ResolveFactInput): Promise<{ ok: boolean }> => ({
      ok: (await resolveFact(deps.db, input)).ok,
    }),
  };
}
