/**
 * The embeddings backfill (hourly, per running agent): every memory row of the agent that has
 * no vector under its embedder's model, or one of an older text or of another size, is embedded
 * and indexed, newest first, in batches, heartbeating. A search embeds only the few newest rows
 * itself; this job does the rest. Once per period and agent (the run ledger): a second run for
 * the same hour changes nothing and says so. An agent whose embedder is away (or turned off) is
 * reported in the result and its rows are left for the next period; the job never fails for it.
 */
import { eq, and } from 'drizzle-orm';
import { z } from 'zod';
import { periodFromKey, repeatNote } from '../../core/maintenance-period.js';
import type { Db } from '../../db/client.js';
import { runOncePerPeriod } from '../../db/queries/maintenance-runs.js';
import { maintenanceRuns } from '../../db/schema/index.js';
import { nonRetryable, ErrorType } from '../errors.js';
import { heartbeat } from '../heartbeat.js';
import type { AgentEmbedders } from './agent-embedder.js';
import { catchUp, memoryVectorKinds } from './memory-index.js';

export interface EmbeddingDeps {
  db: Db;
  /** The agents' embedders; without them every agent is reported as having none. */
  embedders?: AgentEmbedders;
}

export interface BackfillResult {
  /** The embedder's model, or null when the agent had none. */
  model: string | null;
  /** Rows given a new or replaced vector. */
  indexed: number;
  /** Rows left for the next period (the run's time was up). */
  more: boolean;
  /** Why nothing was embedded (no embedder, or it failed), else null. */
  skipped: string | null;
  period: string;
  repeat: boolean;
  doneAt: string | null;
  note: string;
}

const input = z.strictObject({
  agentId: z.string().min(1),
  period: z.string().min(1),
  workflowId: z.string().min(1).optional(),
  /** Rows embedded per batch (default 64). */
  batch: z.number().int().min(1).max(1000).optional(),
  /** How long one run embeds before it leaves the rest for the next period (default 20 minutes). */
  budgetMs: z
    .number()
    .int()
    .min(1)
    .max(25 * 60_000)
    .optional(),
});
export type BackfillInput = z.input<typeof input>;

const job = 'embeddings-backfill' as const;

/** Embeds what the agent's memory lacks, in batches, until done or `budgetMs` is up. */
export async function backfillAgent(
  db: Db,
  agentId: string,
  embedders: AgentEmbedders | undefined,
  o: { batch?: number; budgetMs?: number; onBatch?: (indexed: number) => void } = {},
): Promise<Pick<BackfillResult, 'model' | 'indexed' | 'more' | 'skipped'>> {
  if (!embedders) return { model: null, indexed: 0, more: false, skipped: 'this worker has no embedders' };
  const choice = await embedders.forAgent(db, agentId);
  if (!choice.ok) return { model: null, indexed: 0, more: false, skipped: `${choice.why}: ${choice.reason}` };
  const { embedder } = choice;
  const until = performance.now() + (o.budgetMs ?? 20 * 60_000);
  let indexed = 0;
  let more = true;
  try {
    while (more && performance.now() < until) {
      const r = await catchUp(db, agentId, embedder, memoryVectorKinds, o.batch ?? 64);
      indexed += r.indexed;
      more = r.more;
      o.onBatch?.(indexed);
      if (r.indexed === 0) break;
    }
  } catch (err) {
    // The embedder failed (away, or vectors of the wrong size): what is done stays done.
    const why = err instanceof Error ? err.message : String(err);
    return { model: embedder.model, indexed, more: true, skipped: `away: ${why}` };
  }
  return { model: embedder.model, indexed, more, skipped: null };
}

export function createEmbeddingActivities(deps: EmbeddingDeps) {
  const { db, embedders } = deps;
  return {
    /** The hourly backfill for one agent, once per period (see the module's comment). */
    async embeddingsBackfillJob(raw: BackfillInput): Promise<BackfillResult> {
      const parsed = input.safeParse(raw);
      if (!parsed.success) throw nonRetryable(ErrorType.InvalidInput, `embeddingsBackfillJob: ${parsed.error.message}`);
      const o = parsed.data;
      const p = periodFromKey(job, o.period);
      if (!p) throw nonRetryable(ErrorType.InvalidInput, `${job}: "${o.period}" is not one of its period keys`);
      const repeat = (first: Partial<BackfillResult>, doneAt: string | null): BackfillResult => ({
        model: first.model ?? null,
        indexed: 0,
        more: first.more ?? false,
        skipped: first.skipped ?? null,
        period: p.key,
        repeat: true,
        doneAt,
        note: repeatNote(job, p.key, doneAt),
      });
      // Done already: nothing is embedded again (the ledger below would say so too, after the work).
      const [done] = await db
        .select()
        .from(maintenanceRuns)
        .where(
          and(eq(maintenanceRuns.job, job), eq(maintenanceRuns.periodKey, p.key), eq(maintenanceRuns.scope, o.agentId)),
        );
      if (done?.finishedAt) return repeat(done.result as Partial<BackfillResult>, done.finishedAt.toISOString());

      // The embedding runs outside the ledger's transaction (minutes of it); it is idempotent, so
      // a run that races this one finds the rows done and the ledger row taken.
      heartbeat({ indexed: 0 });
      const work = await backfillAgent(db, o.agentId, embedders, {
        batch: o.batch,
        budgetMs: o.budgetMs,
        onBatch: (indexed) => heartbeat({ indexed }),
      });
      const run = await runOncePerPeriod(
        db,
        { job, periodKey: p.key, scope: o.agentId, workflowId: o.workflowId },
        () => Promise.resolve(work),
      );
      if (run.repeat) return repeat(run.result, run.doneAt);
      const note = work.skipped
        ? `${job} for ${p.key}: nothing embedded (${work.skipped}); the rows are left for the next period`
        : `${job} for ${p.key}: ${work.indexed} vectors (${work.model})${work.more ? ', more left for the next period' : ''}`;
      process.stdout.write(`${note} (${o.agentId})\n`);
      return { ...work, period: p.key, repeat: false, doneAt: run.doneAt, note };
    },
  };
}
