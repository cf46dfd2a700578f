/**
 * Learning activities (SPEC §6, §7) on the `mindloop` queue: save / load (rehydration) /
 * feedback counting, and the scheduled maintenance jobs — learning decay, memory pruning and
 * process-log cleanup. Refusals by the store's guards are non-retryable `Forbidden` failures
 * whose message says which guard and why (the refusal is already in `learning_events`).
 */
import { z } from 'zod';
import { sql } from 'drizzle-orm';
import { agentIdSchema } from '../core/ids.js';
import { learningsSection, type Derivation } from '../core/learnings.js';
import type { Db } from '../db/client.js';
import { ErrorType, nonRetryable } from './errors.js';
import {
  decayLearnings,
  loadLearnings,
  LearningRefusedError,
  recordFeedback,
  saveLearning,
  type FeedbackInput,
  type SaveLearningInput,
  type StoreLimits,
} from './learning-store.js';
import type { LearningSink } from './learning-sink.js';

export interface LearningDeps {
  db: Db;
  limits?: StoreLimits;
}

function asFailure(err: unknown): unknown {
  if (err instanceof LearningRefusedError) return nonRetryable(ErrorType.Forbidden, err.message, { code: err.code });
  return err;
}

/** The sink campaigns and tool generation promote learnings through (activities/learning-sink.ts). */
export function createLearningSink(deps: LearningDeps): LearningSink {
  return async (l) => {
    const r = await saveLearning(deps.db, { shardType: l.shardType, predicate: l.predicate, args: l.args, source: l.source, agentId: l.agentId }, deps.limits);
    return { id: r.id, reinforced: r.reinforced };
  };
}

const decayInput = z.strictObject({
  shardType: z.string().min(1).optional(),
  factor: z.number().gt(0).max(1).optional(),
  staleAfterDays: z.number().min(0).max(3650).optional(),
  deleteBelow: z.number().min(0).max(1).optional(),
  /** ISO time of the run (the workflow's clock); default the database's now(). */
  now: z.iso.datetime({ offset: true }).optional(),
});
export type DecayInput = z.infer<typeof decayInput>;

const cleanupInput = z.strictObject({ olderThanDays: z.number().int().min(0).max(3650), now: z.iso.datetime({ offset: true }).optional() });

function parse<T>(schema: z.ZodType<T>, what: string, v: unknown): T {
  const r = schema.safeParse(v);
  if (!r.success) throw nonRetryable(ErrorType.InvalidInput, `${what}: ${r.error.issues.map((i) => `${i.path.join('.') || '(input)'}: ${i.message}`).join('; ')}`);
  return r.data;
}

export function createLearningActivities(deps: LearningDeps) {
  const { db } = deps;
  return {
    /** Save (or reinforce) a learning; a guard refusal fails non-retryably with the reason. */
    async saveLearning(input: SaveLearningInput & { derivation?: Derivation | null }): Promise<{ id: number; reinforced: boolean; confidence: number }> {
      try {
        return await saveLearning(db, input, deps.limits);
      } catch (err) {
        throw asFailure(err);
      }
    },

    /**
     * Rehydration: an agent's learnings above the threshold (confidence > 0.3), by confidence
     * then recency, and the context section they make.
     */
    async loadLearnings(input: { agentId?: string; shardType?: string; limit?: number }): Promise<{
      learnings: Array<{ id: number; predicate: string; args: Record<string, unknown>; confidence: number; shardType: string }>;
      section: string;
    }> {
      if (!input.agentId && !input.shardType) throw nonRetryable(ErrorType.InvalidInput, 'loadLearnings: give agentId or shardType');
      const rows = await loadLearnings(db, { agentId: input.agentId, shardType: input.shardType, limit: input.limit ?? 50 });
      const learnings = rows.map((l) => ({ id: l.id, predicate: l.predicate, args: l.args, confidence: l.confidence, shardType: l.shardType }));
      return { learnings, section: learningsSection(learnings) };
    },

    /** Count one accept/reject; at the threshold a rule derives a learning (see core/learnings.ts). */
    async recordFeedback(input: FeedbackInput) {
      try {
        return await recordFeedback(db, input, deps.limits);
      } catch (err) {
        throw asFailure(err);
      }
    },

    /** The decay job: × factor for learnings not reinforced for 7 days, delete below 0.1; logs the counts. */
    async decayLearningsJob(input: DecayInput = {}): Promise<{ decayed: number; deleted: number; ms: number }> {
      const o = parse(decayInput, 'decayLearningsJob', input);
      const t0 = performance.now();
      const r = await decayLearnings(db, { ...o, now: o.now ? new Date(o.now) : undefined });
      const ms = Math.round(performance.now() - t0);
      process.stdout.write(`learning decay${o.shardType ? ` (${o.shardType})` : ''}: ${r.decayed} decayed, ${r.deleted} deleted in ${ms} ms\n`);
      return { ...r, ms };
    },

    /** Agents whose loop runs (the hourly abstracts job visits each). */
    async listActiveAgents(): Promise<string[]> {
      const r = await db.execute<{ id: string }>(sql`select id from agents where status = 'running' order by id`);
      return r.rows.map((x) => x.id);
    },

    /**
     * Memory pruning: per agent, archive the oldest unpinned recent responses and diary
     * entries beyond its `lru_limit` (context 7 config, default 500); written to its process log.
     */
    async pruneMemory(input: { agentId: string }): Promise<{ archivedResponses: number; archivedDiary: number; limit: number }> {
      const agentId = parse(agentIdSchema, 'pruneMemory: agentId', input.agentId);
      const cfg = await db.execute<{ value: unknown }>(sql`select value from agent_config where agent_id = ${agentId} and key = 'lru_limit'`);
      const raw = cfg.rows[0]?.value;
      const limit = typeof raw === 'number' && Number.isInteger(raw) && raw >= 10 ? raw : 500;
      const responses = await db.execute(sql`update llm_recent_responses set archived_at = now()
        where id in (select id from llm_recent_responses where agent_id = ${agentId} and archived_at is null
                     order by created_at desc, id desc offset ${limit})`);
      const diary = await db.execute(sql`update diary_entries set archived_at = now()
        where id in (select id from diary_entries where agent_id = ${agentId} and archived_at is null and not pinned
                     order by created_at desc, id desc offset ${limit})`);
      const out = { archivedResponses: responses.rowCount ?? 0, archivedDiary: diary.rowCount ?? 0, limit };
      await db.execute(sql`insert into process_log (agent_id, process_id, kind, name, status, message, payload, closed_at)
        values (${agentId}, ${`schedule/prune/${new Date().toISOString()}`}, 'schedule', 'memory pruning', 'close',
                ${`archived ${out.archivedResponses} responses and ${out.archivedDiary} diary entries beyond lru_limit ${limit}`}, ${JSON.stringify(out)}::jsonb, now())`);
      return out;
    },

    /** Process-log cleanup: delete closed entries older than N days. */
    async cleanupProcessLog(input: { olderThanDays: number; now?: string }): Promise<{ deleted: number }> {
      const o = parse(cleanupInput, 'cleanupProcessLog', input);
      const now = o.now ? sql`${o.now}::timestamptz` : sql`now()`;
      const r = await db.execute(sql`delete from process_log where closed_at is not null and closed_at < ${now} - make_interval(days => ${o.olderThanDays})`);
      process.stdout.write(`process-log cleanup: ${r.rowCount ?? 0} closed entries older than ${o.olderThanDays} days deleted\n`);
      return { deleted: r.rowCount ?? 0 };
    },
  };
}

export type LearningActivities = ReturnType<typeof createLearningActivities>;
