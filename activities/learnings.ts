/**
 * Learning activities on the `mindloop` queue: save / load (rehydration) / feedback counting,
 * and the scheduled maintenance jobs — learning decay, the abstracts digest, memory pruning and
 * process-log cleanup, each at most once per period when given one (the run ledger). Refusals by the store's guards are non-retryable `Forbidden` failures
 * whose message says which guard and why (the refusal is already in `learning_events`).
 */
import type { AgentEmbedders } from './embeddings/agent-embedder.js';
import { z } from 'zod';
import { sql } from 'drizzle-orm';
import { agentIdSchema } from '../core/ids.js';
import { learningsSection, type Derivation } from '../core/learnings.js';
import { periodFromKey, repeatNote, type MaintenanceJob, type MaintenancePeriod } from '../core/maintenance-period.js';
import type { Db } from '../db/client.js';
import { makeAutoAbstract, type AutoAbstractResult } from '../db/queries/abstracts.js';
import { runOncePerPeriod, type Tx } from '../db/queries/maintenance-runs.js';
import { ErrorType, nonRetryable, parseInput } from './errors.js';
import {
  decayLearnings,
  loadLearnings,
  LearningRefusedError,
  recordFeedback,
  saveLearning,
  type FeedbackInput,
  type SaveLearningInput,
  type StoreLimits,
} from '../db/queries/learnings.js';
import type { LearningSink } from './learning-sink.js';
import { pruneTiers, type TierCounts } from './reflexes/memory-manager.js';
import { tellFeedbackLearning, tellLearning, type AgentEventSink } from './agent-events.js';

interface LearningDeps {
  db: Db;
  /** The agents' embedders (memory by meaning); without them memory compares words only. */
  embedders?: AgentEmbedders;
  limits?: StoreLimits;
  /** Told of each learning saved in an agent's name, once it is stored. */
  events?: AgentEventSink;
}

function asFailure(err: unknown): unknown {
  if (err instanceof LearningRefusedError) return nonRetryable(ErrorType.Forbidden, err.message, { code: err.code });
  return err;
}

/** The sink campaigns and tool generation promote learnings through (activities/learning-sink.ts). */
export function createLearningSink(deps: LearningDeps): LearningSink {
  return async (l) => {
    const r = await saveLearning(
      deps.db,
      { shardType: l.shardType, predicate: l.predicate, args: l.args, source: l.source, agentId: l.agentId },
      deps.limits,
    );
    tellLearning(deps.events, l.agentId, {
      shardType: l.shardType,
      predicate: l.predicate,
      args: l.args,
      confidence: r.confidence,
      reinforced: r.reinforced,
    });
    return { id: r.id, reinforced: r.reinforced };
  };
}

/**
 * Set by the maintenance workflows: the period the run is for (its key,
 * core/maintenance-period.ts) and the workflow id. With a period the job runs at most once
 * per period (the run ledger); without one (a direct call) it runs as asked.
 */
const scheduledRun = { period: z.string().min(1).max(40).optional(), workflowId: z.string().max(1000).optional() };

const decayInput = z.strictObject({
  shardType: z.string().min(1).optional(),
  factor: z.number().gt(0).max(1).optional(),
  staleAfterDays: z.number().min(0).max(3650).optional(),
  deleteBelow: z.number().min(0).max(1).optional(),
  /** ISO time of the run (the workflow's clock); default the database's now(). */
  now: z.iso.datetime({ offset: true }).optional(),
  ...scheduledRun,
});
type DecayInput = z.infer<typeof decayInput>;

const cleanupInput = z.strictObject({
  olderThanDays: z.number().int().min(0).max(3650),
  now: z.iso.datetime({ offset: true }).optional(),
  ...scheduledRun,
});
const perAgentInput = z.strictObject({ agentId: agentIdSchema, ...scheduledRun });

/** What a ledgered job adds to its result: the period, and whether this run was a repeat. */
interface PeriodRun {
  period: string;
  repeat: boolean;
  /** When the period's work was done (by this run, or by the first). */
  doneAt: string | null;
  note: string;
}

function periodOrFail(job: MaintenanceJob, key: string): MaintenancePeriod {
  const p = periodFromKey(job, key);
  if (!p) throw nonRetryable(ErrorType.InvalidInput, `${job}: "${key}" is not one of its period keys`);
  return p;
}

/**
 * Run a job's work for a period once (the run ledger, one transaction with the work). A
 * repeat changes nothing and answers `unchanged(first run's result)` with the note saying so.
 */
async function ledgered<T extends object>(
  db: Db,
  p: MaintenancePeriod,
  scope: string | undefined,
  workflowId: string | undefined,
  work: (tx: Tx) => Promise<T>,
  unchanged: (first: T) => T,
): Promise<T & PeriodRun> {
  const run = await runOncePerPeriod(db, { job: p.job, periodKey: p.key, scope, workflowId }, work);
  if (run.repeat)
    return {
      ...unchanged(run.result),
      period: p.key,
      repeat: true,
      doneAt: run.doneAt,
      note: repeatNote(p.job, p.key, run.doneAt),
    };
  return { ...run.result, period: p.key, repeat: false, doneAt: run.doneAt, note: `${p.job} for ${p.key}: done` };
}

export function createLearningActivities(deps: LearningDeps) {
  return { ...learningStoreActivities(deps), ...learningMaintenanceActivities(deps) };
}

/** The store as an agent's loop uses it: save, load (rehydration) and feedback counting. */
function learningStoreActivities(deps: LearningDeps) {
  const { db } = deps;
  return {
    /** Save (or reinforce) a learning; a guard refusal fails non-retryably with the reason. */
    async saveLearning(
      input: SaveLearningInput & { derivation?: Derivation | null },
    ): Promise<{ id: number; reinforced: boolean; confidence: number }> {
      let r;
      try {
        r = await saveLearning(db, input, deps.limits);
      } catch (err) {
        throw asFailure(err);
      }
      tellLearning(deps.events, input.agentId, {
        shardType: input.shardType,
        predicate: input.predicate,
        args: input.args,
        confidence: r.confidence,
        reinforced: r.reinforced,
      });
      return r;
    },

    /**
     * Rehydration: an agent's learnings above the threshold (confidence > 0.3), by confidence
     * then recency, and the context section they make.
     */
    async loadLearnings(input: { agentId?: string; shardType?: string; limit?: number }): Promise<{
      learnings: Array<{
        id: number;
        predicate: string;
        args: Record<string, unknown>;
        confidence: number;
        shardType: string;
      }>;
      section: string;
    }> {
      if (!input.agentId && !input.shardType)
        throw nonRetryable(ErrorType.InvalidInput, 'loadLearnings: give agentId or shardType');
      const rows = await loadLearnings(db, {
        agentId: input.agentId,
        shardType: input.shardType,
        limit: input.limit ?? 50,
      });
      const learnings = rows.map((l) => ({
        id: l.id,
        predicate: l.predicate,
        args: l.args,
        confidence: l.confidence,
        shardType: l.shardType,
      }));
      return { learnings, section: learningsSection(learnings) };
    },

    /** Count one accept/reject; at the threshold a rule derives a learning (see core/learnings.ts). */
    async recordFeedback(input: FeedbackInput) {
      let r;
      try {
        r = await recordFeedback(db, input, deps.limits);
      } catch (err) {
        throw asFailure(err);
      }
      tellFeedbackLearning(deps.events, input, r);
      return r;
    },
  };
}

/** The scheduled maintenance jobs, each at most once per period when given one. */
function learningMaintenanceActivities({ db }: LearningDeps) {
  return {
    /**
     * The decay job: × factor for learnings not reinforced for 7 days, delete below 0.1; logs
     * the counts. With a period: once per period (and shard, when one is given).
     */
    async decayLearningsJob(
      input: DecayInput = {},
    ): Promise<{ decayed: number; deleted: number; ms: number } & Partial<PeriodRun>> {
      const o = parseInput('decayLearningsJob', decayInput, input);
      const t0 = performance.now();
      const opts = {
        shardType: o.shardType,
        factor: o.factor,
        staleAfterDays: o.staleAfterDays,
        deleteBelow: o.deleteBelow,
        now: o.now ? new Date(o.now) : undefined,
      };
      const what = `learning decay${o.shardType ? ` (${o.shardType})` : ''}`;
      if (o.period === undefined) {
        const r = await decayLearnings(db, opts);
        const ms = Math.round(performance.now() - t0);
        process.stdout.write(`${what}: ${r.decayed} decayed, ${r.deleted} deleted in ${ms} ms\n`);
        return { ...r, ms };
      }
      const p = periodOrFail('learning-decay', o.period);
      const run = await ledgered(
        db,
        p,
        o.shardType,
        o.workflowId,
        (tx) => decayLearnings(tx, { ...opts, period: new Date(p.start) }),
        () => ({ decayed: 0, deleted: 0 }),
      );
      const ms = Math.round(performance.now() - t0);
      const note = run.repeat
        ? run.note
        : `${what} for ${p.key}: ${run.decayed} decayed, ${run.deleted} deleted in ${ms} ms`;
      process.stdout.write(`${note}\n`);
      return { ...run, note, ms };
    },

    /** Agents whose loop runs (the hourly abstracts job visits each). */
    async listActiveAgents(): Promise<string[]> {
      const r = await db.execute<{ id: string }>(sql`select id from agents where status = 'running' order by id`);
      return r.rows.map((x) => x.id);
    },

    /**
     * Memory pruning: per agent, the memory manager over every tier — replies, diary, notebook,
     * concepts, links — each capped from its `lru_limit` (default 500) and ranked by use; each
     * decision and a summary written to its process log.
     */
    async pruneMemory(input: {
      agentId: string;
      period?: string;
      workflowId?: string;
    }): Promise<PruneResult & Partial<PeriodRun>> {
      const o = parseInput('pruneMemory', perAgentInput, input);
      if (o.period === undefined) return pruneAgent(db, o.agentId, `schedule/prune/${new Date().toISOString()}`);
      const p = periodOrFail('memory-pruning', o.period);
      const run = await ledgered(
        db,
        p,
        o.agentId,
        o.workflowId,
        (tx) => pruneAgent(tx, o.agentId, `schedule/prune/${p.key}`),
        (first) => ({
          ...first,
          archivedResponses: 0,
          archivedDiary: 0,
          archivedNotes: 0,
          archivedConcepts: 0,
          archivedLinks: 0,
        }),
      );
      if (run.repeat) process.stdout.write(`${run.note} (${o.agentId})\n`);
      return run;
    },

    /** The hourly digest for one agent: an automatic abstract of its new responses, once per period. */
    async abstractsDigestJob(input: {
      agentId: string;
      period: string;
      workflowId?: string;
    }): Promise<AutoAbstractResult & PeriodRun> {
      const o = parseInput('abstractsDigestJob', perAgentInput, input);
      const p = periodOrFail('abstracts-digest', o.period ?? '');
      const run = await ledgered(
        db,
        p,
        o.agentId,
        o.workflowId,
        (tx) => makeAutoAbstract(tx, { agentId: o.agentId, trigger: 'interval' }),
        (first) => ({
          ...first,
          created: false,
          responses: 0,
        }),
      );
      if (run.repeat) process.stdout.write(`${run.note} (${o.agentId})\n`);
      return run;
    },

    /** Process-log cleanup: delete closed entries older than N days; with a period, once per period. */
    async cleanupProcessLog(input: {
      olderThanDays: number;
      now?: string;
      period?: string;
      workflowId?: string;
    }): Promise<{ deleted: number } & Partial<PeriodRun>> {
      const o = parseInput('cleanupProcessLog', cleanupInput, input);
      const cleanup = async (q: Db | Tx) => {
        const now = o.now ? sql`${o.now}::timestamptz` : sql`now()`;
        const r = await q.execute(
          sql`delete from process_log where closed_at is not null and closed_at < ${now} - make_interval(days => ${o.olderThanDays})`,
        );
        return { deleted: r.rowCount ?? 0 };
      };
      if (o.period === undefined) {
        const r = await cleanup(db);
        process.stdout.write(
          `process-log cleanup: ${r.deleted} closed entries older than ${o.olderThanDays} days deleted\n`,
        );
        return r;
      }
      const p = periodOrFail('process-log-cleanup', o.period);
      const run = await ledgered(db, p, undefined, o.workflowId, cleanup, () => ({ deleted: 0 }));
      process.stdout.write(
        `${run.repeat ? run.note : `process-log cleanup for ${p.key}: ${run.deleted} closed entries older than ${o.olderThanDays} days deleted`}\n`,
      );
      return run;
    },
  };
}

type PruneResult = TierCounts;

/**
 * The scheduled memory manager for one agent: every tier by use (activities/reflexes/memory-manager.ts
 * `pruneTiers`, each decision logged), then one summary row in its process log.
 */
async function pruneAgent(q: Db | Tx, agentId: string, processId: string): Promise<PruneResult> {
  const out = await pruneTiers(q, agentId, { processId });
  const message =
    `archived ${out.archivedResponses} responses and ${out.archivedDiary} diary entries, ` +
    `${out.archivedNotes} notebook entries, ${out.archivedConcepts} concepts and ${out.archivedLinks} links ` +
    `(lru_limit ${out.limit}; by use, emotion, weight, goals and diversity)`;
  await q.execute(sql`insert into process_log (agent_id, process_id, kind, name, status, message, payload, closed_at)
    values (${agentId}, ${processId}, 'schedule', 'memory pruning', 'close',
            ${message}, ${JSON.stringify(out)}::jsonb, now())`);
  return out;
}
