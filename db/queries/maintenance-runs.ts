/**
 * The maintenance run ledger: a job's work for a period and the ledger row that says it was
 * done commit together, and a repeat for the same (job, period, scope) does nothing.
 */
import { and, desc, eq, sql } from 'drizzle-orm';
import type { MaintenanceJob } from '../../core/maintenance-period.js';
import type { Db } from '../client.js';
import { maintenanceRuns, wholeScope, type MaintenanceRun } from '../schema/index.js';

export type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

interface RunKey {
  job: MaintenanceJob;
  periodKey: string;
  /** Default `*`; an agent id or shard for a job run per agent or per shard. */
  scope?: string;
  workflowId?: string;
}

/** The outcome of a ledgered run: the work's result, or the first run's when this one was a repeat. */
type LedgeredRun<T> =
  { repeat: false; doneAt: string; result: T } | { repeat: true; doneAt: string | null; by: string | null; result: T };

/**
 * Run `work` once per (job, period, scope). The ledger row is claimed first, in the work's
 * transaction: a concurrent run for the same key waits on that row and then finds it done; a
 * crash or a failure of the work rolls the claim back with the work, so the period stays open
 * for a retry.
 */
export async function runOncePerPeriod<T extends object>(
  db: Db,
  key: RunKey,
  work: (tx: Tx) => Promise<T>,
): Promise<LedgeredRun<T>> {
  const scope = key.scope ?? wholeScope;
  return db.transaction(async (tx) => {
    const [claimed] = await tx
      .insert(maintenanceRuns)
      .values({ job: key.job, periodKey: key.periodKey, scope, workflowId: key.workflowId ?? null })
      .onConflictDoNothing()
      .returning({ id: maintenanceRuns.id });
    if (!claimed) {
      const [done] = await tx
        .select()
        .from(maintenanceRuns)
        .where(
          and(
            eq(maintenanceRuns.job, key.job),
            eq(maintenanceRuns.periodKey, key.periodKey),
            eq(maintenanceRuns.scope, scope),
          ),
        );
      return {
        repeat: true,
        doneAt: done?.finishedAt?.toISOString() ?? null,
        by: done?.workflowId ?? null,
        result: (done?.result ?? {}) as T,
      };
    }
    const result = await work(tx);
    // clock_timestamp(): the time the work ended, not the transaction's start (now()).
    const [row] = await tx
      .update(maintenanceRuns)
      .set({ finishedAt: sql`clock_timestamp()`, result: result as Record<string, unknown> })
      .where(eq(maintenanceRuns.id, claimed.id))
      .returning({ finishedAt: maintenanceRuns.finishedAt });
    return { repeat: false, doneAt: row!.finishedAt!.toISOString(), result };
  });
}

/** The ledger, newest first (a job's, or all). */
export async function listMaintenanceRuns(
  db: Db,
  o: { job?: MaintenanceJob; limit?: number } = {},
): Promise<MaintenanceRun[]> {
  return db
    .select()
    .from(maintenanceRuns)
    .where(o.job ? eq(maintenanceRuns.job, o.job) : undefined)
    .orderBy(desc(maintenanceRuns.id))
    .limit(o.limit ?? 50);
}
