/**
 * The learning store: plain functions over the `learnings`,
 * `learning_events` and `preference_counts` tables, used by the learning activities, the
 * campaign / tool-generation sink, the CLI and the bench.
 *
 * Guards: every save passes the predicate allow-list and typed args (core/learnings.ts), at
 * most `maxSavesPerMinute` accepted saves per shard per minute and `maxPerShard` learnings per
 * shard. A refusal is written to `learning_events` (committed) and then thrown as a
 * `LearningRefusedError`: never dropped silently. Saves of one shard serialise on an advisory
 * lock, so the limits hold across workers. An import (a restore of an export) is one bulk
 * operation: guarded and capped, but neither limited by nor counted in the per-minute rate.
 */
import { and, desc, eq, gt, or, sql, type SQL } from 'drizzle-orm';
import { getTableConfig, type PgTable } from 'drizzle-orm/pg-core';
import {
  agentShard,
  derive,
  feedbackSchema,
  learningDefaults,
  patternKey,
  shardSchema,
  validateLearning,
  type Derivation,
  type Feedback,
  type LoadedLearning,
} from '../../core/learnings.js';
import { configKeys } from '../../core/catalogue.js';
import { formatIssues } from '../../core/zod-issues.js';
import type { Db } from '../client.js';
import { statements } from '../prepared.js';
import type { Tx } from './maintenance-runs.js';
import { learningEvents, learnings, preferenceCounts, type Learning } from '../schema/index.js';

type RefusalCode = 'guard' | 'rate_limit' | 'cap';

/** A save the store refused; `code` says which guard, the message says why. */
export class LearningRefusedError extends Error {
  override name = 'LearningRefusedError';
  constructor(
    readonly code: RefusalCode,
    message: string,
  ) {
    super(message);
  }
}

export interface StoreLimits {
  /** Accepted saves per shard per minute (default 10); `Infinity` turns the limit off (bench, import). */
  maxSavesPerMinute?: number;
  /** Learnings per shard (default 1000). */
  maxPerShard?: number;
}

export interface SaveLearningInput {
  shardType: string;
  predicate: string;
  args: unknown;
  /** The campaign id, `feedback`, `tool/<agent>/<name>`, … */
  source?: string | null;
  agentId?: string | null;
  derivation?: Derivation | null;
}

interface SaveResult {
  id: number;
  reinforced: boolean;
  confidence: number;
}

type Refusal = { refused: RefusalCode; reason: string };

/** Save a learning, or reinforce it (+0.1, max 1.0, learned_at refreshed) when it exists. */
export async function saveLearning(db: Db, input: SaveLearningInput, limits: StoreLimits = {}): Promise<SaveResult> {
  const maxRate = limits.maxSavesPerMinute ?? learningDefaults.maxSavesPerMinute;
  const maxShard = limits.maxPerShard ?? learningDefaults.maxPerShard;
  const shard = shardSchema.safeParse(input.shardType);
  const shardType = shard.success ? shard.data : String(input.shardType ?? '');
  const agentId = input.agentId ?? null;
  const source = input.source ?? null;

  const result = await db.transaction(async (tx) => {
    const refuse = async (code: RefusalCode, reason: string): Promise<Refusal> => {
      await tx.execute(sql`insert into learning_events (shard_type, agent_id, outcome, fact_predicate, fact_args, source, reason)
        values (${shardType || '(none)'}, ${agentId}, 'refused', ${String(input.predicate ?? '').slice(0, 200)}, ${jsonOrNull(input.args)}::jsonb, ${source}, ${`${code}: ${reason}`})`);
      return { refused: code, reason };
    };
    if (!shard.success)
      return refuse('guard', `bad shard '${shardType}': ${shard.error.issues[0]?.message ?? 'invalid'}`);
    const guard = validateLearning(input.predicate, input.args);
    if (!guard.ok) return refuse('guard', guard.reason);

    await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`learnings:${shardType}`}))`);
    const argsJson = JSON.stringify(guard.args);
    // One round trip for the three guard reads: does it exist, saves this minute, shard size.
    // The rate counts single saves; an import's one summary event (predicate `(import)`) is not one.
    const probe = await tx.execute<{ exists: boolean; recent: number; size: number }>(sql`select
        exists (select 1 from learnings where shard_type = ${shardType} and fact_predicate = ${guard.predicate} and fact_args = ${argsJson}::jsonb) as exists,
        ${Number.isFinite(maxRate) ? sql`(select count(*)::int from learning_events where shard_type = ${shardType} and outcome in ('saved', 'reinforced') and fact_predicate <> ${importEventPredicate} and created_at > now() - interval '1 minute')` : sql`0`} as recent,
        ${Number.isFinite(maxShard) ? sql`(select count(*)::int from learnings where shard_type = ${shardType})` : sql`0`} as size`);
    const { exists, recent, size } = probe.rows[0]!;
    if (Number.isFinite(maxRate) && recent >= maxRate) {
      return refuse(
        'rate_limit',
        `shard '${shardType}' already saved ${maxRate} learnings in the last minute (limit ${maxRate}/min)`,
      );
    }
    if (!exists && Number.isFinite(maxShard) && size >= maxShard) {
      return refuse('cap', `shard '${shardType}' holds ${maxShard} learnings (the maximum); decay or clear it first`);
    }
    // The upsert and its event row in one statement.
    const up = await tx.execute<{ id: string; confidence: number; reinforced: boolean }>(sql`
      with up as (
        insert into learnings (shard_type, agent_id, fact_predicate, fact_args, source_campaign, derivation)
        values (${shardType}, ${agentId}, ${guard.predicate}, ${argsJson}::jsonb, ${source}, ${input.derivation ? JSON.stringify(input.derivation) : null}::jsonb)
        on conflict (shard_type, fact_predicate, fact_args) do update set
          confidence = least(1.0, round((learnings.confidence + ${learningDefaults.reinforceStep})::numeric, 6)),
          learned_at = now(),
          reinforcements = learnings.reinforcements + 1,
          source_campaign = coalesce(excluded.source_campaign, learnings.source_campaign),
          agent_id = coalesce(excluded.agent_id, learnings.agent_id),
          derivation = coalesce(learnings.derivation, excluded.derivation)
        returning id, confidence, (xmax <> 0) as reinforced
      ), ev as (
        insert into learning_events (shard_type, agent_id, outcome, fact_predicate, fact_args, learning_id, source)
        select ${shardType}, ${agentId}, case when up.reinforced then 'reinforced' else 'saved' end, ${guard.predicate}, ${argsJson}::jsonb, up.id, ${source} from up
      )
      select id, confidence, reinforced from up`);
    const row = up.rows[0]!;
    const reinforced = Boolean(row.reinforced);
    return { id: Number(row.id), reinforced, confidence: Number(row.confidence) } satisfies SaveResult;
  });
  if ('refused' in result)
    throw new LearningRefusedError(result.refused, `learning refused (${result.refused}): ${result.reason}`);
  return result;
}

/** The predicate of an import's summary event in `learning_events` (no real predicate has parentheses). */
const importEventPredicate = '(import)';

function jsonOrNull(v: unknown): string | null {
  try {
    return v === undefined ? null : JSON.stringify(v);
  } catch {
    return null;
  }
}

const toLoaded = (l: Learning): LoadedLearning & Learning => ({
  ...l,
  predicate: l.factPredicate,
  args: l.factArgs as Record<string, unknown>,
});

/**
 * Learnings above the threshold (confidence > 0.3), by confidence then recency: of one shard,
 * or an agent's (its own shard `agent:<id>` and the learnings it taught elsewhere).
 */
export async function loadLearnings(
  db: Db,
  sel: { shardType?: string; agentId?: string; above?: number; limit?: number },
): Promise<Array<LoadedLearning & Learning>> {
  const above = sel.above ?? learningDefaults.loadAbove;
  // An agent's own, as every tick reads them: the prepared statement.
  if (sel.agentId && sel.above === undefined) {
    const rows = await learningStatements(db).agentLoad.execute({
      agentId: sel.agentId,
      shard: agentShard(sel.agentId),
      limit: sel.limit ?? 1000,
    });
    return rows.map(toLoaded);
  }
  const scope = sel.agentId
    ? or(eq(learnings.agentId, sel.agentId), eq(learnings.shardType, agentShard(sel.agentId)))
    : sel.shardType
      ? eq(learnings.shardType, sel.shardType)
      : undefined;
  const rows = await db
    .select()
    .from(learnings)
    .where(and(gt(learnings.confidence, above), scope))
    .orderBy(desc(learnings.confidence), desc(learnings.learnedAt), desc(learnings.id))
    .limit(sel.limit ?? 1000);
  return rows.map(toLoaded);
}

const learningStatements = statements('learnings', (q, name) => ({
  agentLoad: q
    .select()
    .from(learnings)
    .where(
      and(
        gt(learnings.confidence, learningDefaults.loadAbove),
        or(eq(learnings.agentId, sql.placeholder('agentId')), eq(learnings.shardType, sql.placeholder('shard'))),
      ),
    )
    .orderBy(desc(learnings.confidence), desc(learnings.learnedAt), desc(learnings.id))
    .limit(sql.placeholder('limit'))
    .prepare(name('agent_load')),
}));

/** Every learning of a shard (any confidence), by confidence then recency: `learnings list --all`. */
export async function listLearnings(db: Db, shardType: string, o: { all?: boolean } = {}): Promise<Learning[]> {
  return db
    .select()
    .from(learnings)
    .where(
      and(eq(learnings.shardType, shardType), o.all ? undefined : gt(learnings.confidence, learningDefaults.loadAbove)),
    )
    .orderBy(desc(learnings.confidence), desc(learnings.learnedAt), desc(learnings.id));
}

interface LearningStats {
  shard: string;
  total_learnings: number;
  avg_confidence: number;
  by_predicate: Record<string, number>;
  refused_last_day: number;
}

/** Store statistics: total, mean confidence, counts by predicate (and recent refusals). */
export async function learningStats(db: Db, shardType: string): Promise<LearningStats> {
  const r = await db.execute<{ p: string; n: number; s: number }>(
    sql`select fact_predicate as p, count(*)::int as n, sum(confidence)::float8 as s from learnings where shard_type = ${shardType} group by 1 order by 1`,
  );
  const refused = await db.execute<{ n: number }>(
    sql`select count(*)::int as n from learning_events where shard_type = ${shardType} and outcome = 'refused' and created_at > now() - interval '1 day'`,
  );
  const total = r.rows.reduce((a, x) => a + x.n, 0);
  const sum = r.rows.reduce((a, x) => a + Number(x.s), 0);
  return {
    shard: shardType,
    total_learnings: total,
    avg_confidence: total ? Math.round((sum / total) * 1000) / 1000 : 0,
    by_predicate: Object.fromEntries(r.rows.map((x) => [x.p, x.n])),
    refused_last_day: refused.rows[0]?.n ?? 0,
  };
}

/** One exported learning: exactly what import restores. */
interface ExportedLearning {
  shard_type: string;
  fact_predicate: string;
  fact_args: unknown;
  learned_at: string;
  source_campaign: string | null;
  confidence: number;
  reinforcements: number;
  derivation: Record<string, unknown> | null;
}

export async function exportLearnings(db: Db, shardType: string): Promise<ExportedLearning[]> {
  const rows = await db
    .select()
    .from(learnings)
    .where(eq(learnings.shardType, shardType))
    .orderBy(desc(learnings.confidence), desc(learnings.learnedAt), learnings.factPredicate, learnings.id);
  return rows.map((l) => ({
    shard_type: l.shardType,
    fact_predicate: l.factPredicate,
    fact_args: l.factArgs,
    learned_at: l.learnedAt.toISOString(),
    source_campaign: l.sourceCampaign,
    confidence: l.confidence,
    reinforcements: l.reinforcements,
    derivation: l.derivation ?? null,
  }));
}

/**
 * Import exported learnings into `shardType` (the file's shard_type is replaced by it). All
 * records are checked first — allow-list, typed args, confidence in [0,1], a date — and one
 * bad record refuses the whole import, naming it; the shard cap holds. An existing learning
 * takes the imported values (a restore), so export → clear → import → export is identical.
 * One bulk operation in one transaction: not subject to the per-minute save rate (nor counted
 * in it: its one summary event is skipped by the rate), so 50 or 1000 records import whole.
 */
export async function importLearnings(
  db: Db,
  shardType: string,
  records: unknown,
  limits: StoreLimits = {},
): Promise<{ imported: number; updated: number }> {
  const shard = shardSchema.safeParse(shardType);
  if (!shard.success) throw new LearningRefusedError('guard', `bad shard '${shardType}'`);
  if (!Array.isArray(records))
    throw new LearningRefusedError(
      'guard',
      'import: expected a JSON array of learnings (the output of `learnings export`)',
    );
  const checked = records.map((r, i) => {
    const rec = (r ?? {}) as Partial<ExportedLearning>;
    const where = `record ${i}`;
    if (typeof rec !== 'object' || Array.isArray(rec))
      throw new LearningRefusedError('guard', `import: ${where} is not an object`);
    const g = validateLearning(String(rec.fact_predicate), rec.fact_args);
    if (!g.ok) throw new LearningRefusedError('guard', `import: ${where}: ${g.reason}`);
    const confidence = rec.confidence ?? 1;
    if (typeof confidence !== 'number' || !(confidence >= 0 && confidence <= 1))
      throw new LearningRefusedError('guard', `import: ${where}: confidence must be a number in [0, 1]`);
    const learnedAt = rec.learned_at === undefined ? new Date() : new Date(rec.learned_at);
    if (Number.isNaN(learnedAt.getTime()))
      throw new LearningRefusedError('guard', `import: ${where}: learned_at is not a date`);
    const reinforcements = rec.reinforcements ?? 0;
    if (!Number.isInteger(reinforcements) || reinforcements < 0)
      throw new LearningRefusedError('guard', `import: ${where}: reinforcements must be a non-negative integer`);
    return {
      predicate: g.predicate,
      args: g.args,
      confidence,
      learnedAt,
      reinforcements,
      source: rec.source_campaign ?? null,
      derivation: rec.derivation ?? null,
    };
  });
  const maxShard = limits.maxPerShard ?? learningDefaults.maxPerShard;
  return db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`learnings:${shard.data}`}))`);
    let imported = 0;
    let updated = 0;
    for (const c of checked) {
      const r = await tx.execute<{ inserted: boolean }>(sql`
        insert into learnings (shard_type, fact_predicate, fact_args, learned_at, source_campaign, confidence, reinforcements, derivation)
        values (${shard.data}, ${c.predicate}, ${JSON.stringify(c.args)}::jsonb, ${c.learnedAt.toISOString()}::timestamptz, ${c.source}, ${c.confidence}, ${c.reinforcements}, ${c.derivation ? JSON.stringify(c.derivation) : null}::jsonb)
        on conflict (shard_type, fact_predicate, fact_args) do update set
          learned_at = excluded.learned_at, source_campaign = excluded.source_campaign, confidence = excluded.confidence,
          reinforcements = excluded.reinforcements, derivation = excluded.derivation
        returning (xmax = 0) as inserted`);
      if (r.rows[0]?.inserted) imported++;
      else updated++;
    }
    const n = await tx.execute<{ n: number }>(
      sql`select count(*)::int as n from learnings where shard_type = ${shard.data}`,
    );
    if ((n.rows[0]?.n ?? 0) > maxShard) {
      // Thrown inside the transaction: nothing of this import stays.
      throw new LearningRefusedError(
        'cap',
        `import: shard '${shard.data}' would hold ${n.rows[0]?.n} learnings (maximum ${maxShard}); nothing imported`,
      );
    }
    await tx.execute(sql`insert into learning_events (shard_type, outcome, fact_predicate, source, reason)
      values (${shard.data}, 'saved', ${importEventPredicate}, 'import', ${`imported ${imported}, updated ${updated}`})`);
    return { imported, updated };
  });
}

/**
 * `insert into <table> (…) select … from <table> s <rest>`: every column of the table (a column
 * added later is copied too) but its identity id, `set` giving the expressions that change.
 */
function copyRows(table: PgTable, set: Record<string, SQL>, rest: SQL): SQL {
  const columns = getTableConfig(table).columns.filter((c) => !c.generated && c.name !== 'id');
  const name = sql.identifier(getTableConfig(table).name);
  return sql`insert into ${name} (${sql.join(
    columns.map((c) => sql.identifier(c.name)),
    sql`, `,
  )})
    select ${sql.join(
      columns.map((c) => set[c.name] ?? sql`s.${sql.identifier(c.name)}`),
      sql`, `,
    )} from ${name} s ${rest}`;
}

/**
 * A clone's copy of `parent`'s learnings, inside the clone's transaction: every learning the
 * parent loads (its own shard and those it taught in shared shards, at any confidence) becomes
 * the clone's, in its own shard `agent:<target>`, and the events of the parent's shard are
 * copied there with their learning ids remapped. A shared shard holds one row per fact, so the
 * copy of a learning taught there goes to the clone's shard; a fact the parent has twice is
 * copied once, the more confident. The parent's learnings are only read.
 */
export async function copyLearnings(
  tx: Tx,
  p: { parent: string; target: string },
): Promise<{ learnings: number; learning_events: number }> {
  const from = agentShard(p.parent);
  const to = agentShard(p.target);
  const copied = await tx.execute(
    copyRows(
      learnings,
      { shard_type: sql`${to}::text`, agent_id: sql`${p.target}::text` },
      sql`where s.id in (select distinct on (fact_predicate, fact_args) id from learnings
        where agent_id = ${p.parent} or shard_type = ${from}
        order by fact_predicate, fact_args, confidence desc, learned_at desc, id)`,
    ),
  );
  const events = await tx.execute(
    copyRows(
      learningEvents,
      {
        shard_type: sql`${to}::text`,
        agent_id: sql`case when s.agent_id = ${p.parent} then ${p.target} else s.agent_id end`,
        learning_id: sql`n.id`,
      },
      sql`left join learnings o on o.id = s.learning_id
        left join learnings n on n.shard_type = ${to} and n.fact_predicate = o.fact_predicate and n.fact_args = o.fact_args
        where s.shard_type = ${from}`,
    ),
  );
  return { learnings: copied.rowCount ?? 0, learning_events: events.rowCount ?? 0 };
}

interface DecayOptions {
  /** One shard, or all. */
  shardType?: string;
  factor?: number;
  staleAfterDays?: number;
  deleteBelow?: number;
  /** The decay's "now" (the workflow's clock in scheduled runs); default the database's now(). */
  now?: Date;
  /**
   * Start of the scheduled period this decay is for: a learning already decayed for this
   * period or a later one is left alone, so a repeated run cannot decay it twice.
   */
  period?: Date;
}

/**
 * The decay job: one UPDATE (× factor for learnings not reinforced for `staleAfterDays`) and
 * one DELETE (below `deleteBelow`), in one transaction. Set-based: its cost is two statements
 * whatever the table's size. Takes the pool's handle or an open transaction (the run ledger's).
 */
export async function decayLearnings(db: Db | Tx, o: DecayOptions = {}): Promise<{ decayed: number; deleted: number }> {
  const factor = o.factor ?? learningDefaults.decayFactor;
  if (!(factor > 0 && factor <= 1))
    throw new LearningRefusedError('guard', `decay factor must be in (0, 1], got ${factor}`);
  const staleDays = o.staleAfterDays ?? learningDefaults.staleAfterDays;
  const floor = o.deleteBelow ?? learningDefaults.deleteBelow;
  const now = o.now ? sql`${o.now.toISOString()}::timestamptz` : sql`now()`;
  const shard = o.shardType ? sql`and shard_type = ${o.shardType}` : sql``;
  const period = o.period ? sql`${o.period.toISOString()}::timestamptz` : undefined;
  const once = period ? sql`and (last_decayed_for is null or last_decayed_for < ${period})` : sql``;
  const mark = period ? sql`, last_decayed_for = ${period}` : sql``;
  return db.transaction(async (tx) => {
    const up = await tx.execute(sql`update learnings set confidence = confidence * ${factor} ${mark}
      where learned_at < ${now} - make_interval(days => ${staleDays}) ${shard} ${once}`);
    const del = await tx.execute(sql`delete from learnings where confidence < ${floor} ${shard}`);
    return { decayed: up.rowCount ?? 0, deleted: del.rowCount ?? 0 };
  });
}

/** Delete every learning of a shard (the CLI asks for --confirm first). */
export async function clearLearnings(db: Db, shardType: string): Promise<{ deleted: number }> {
  const r = await db.delete(learnings).where(eq(learnings.shardType, shardType));
  return { deleted: r.rowCount ?? 0 };
}

export interface FeedbackInput extends Feedback {
  agentId: string;
  /** Default: the agent's own shard `agent:<id>`. */
  shardType?: string;
  /** Occurrences that make a signal (default: the agent's `learning_threshold` config, else 3). */
  threshold?: number;
  /** Where the feedback came from: `cli`, `note:<id>`, `outcome:<tick>/<cmd>`. */
  source?: string;
}

export interface FeedbackResult {
  pattern: string;
  count: number;
  /** The threshold this count was compared with. */
  threshold: number;
  /** The learning derived at or beyond the threshold (created or reinforced). */
  learning?: SaveResult & { predicate: string; args: Record<string, unknown>; rule: string };
  /** The store refused the derived learning (rate limit, cap): logged in learning_events. */
  refused?: string;
}

/** The agent's `learning_threshold` config (context 7, `config.set`), else the default 3. */
export async function agentThreshold(db: Db, agentId: string): Promise<number> {
  const r = await db.execute<{ value: unknown }>(
    sql`select value from agent_config where agent_id = ${agentId} and key = 'learning_threshold'`,
  );
  const v = configKeys.learning_threshold.schema.safeParse(r.rows[0]?.value);
  return v.success ? v.data : learningDefaults.threshold;
}

/**
 * Count one accept/reject (`action:reason` / `action`) for an agent and shard; at the
 * threshold the rule table derives a learning, saved (or reinforced on later counts).
 */
export async function recordFeedback(db: Db, f: FeedbackInput, limits: StoreLimits = {}): Promise<FeedbackResult> {
  const fb = feedbackSchema.safeParse({ kind: f.kind, action: f.action, reason: f.reason });
  if (!fb.success) {
    throw new LearningRefusedError('guard', `bad feedback: ${formatIssues(fb.error, '(feedback)')}`);
  }
  const shardType = f.shardType ?? agentShard(f.agentId);
  const known = await db.execute(sql`select 1 from agents where id = ${f.agentId}`);
  if (known.rows.length === 0) throw new LearningRefusedError('guard', `unknown agent '${f.agentId}'`);
  const pattern = patternKey(fb.data);
  const [row] = await db
    .insert(preferenceCounts)
    .values({ agentId: f.agentId, shard: shardType, kind: fb.data.kind, pattern, count: 1 })
    .onConflictDoUpdate({
      target: [preferenceCounts.agentId, preferenceCounts.shard, preferenceCounts.kind, preferenceCounts.pattern],
      set: { count: sql`${preferenceCounts.count} + 1`, lastSeenAt: sql`now()` },
    })
    .returning();
  const count = row!.count;
  const threshold = f.threshold ?? (await agentThreshold(db, f.agentId));
  const derived = derive({ kind: fb.data.kind, pattern, count }, threshold);
  if (!derived) return { pattern, count, threshold };
  try {
    const saved = await saveLearning(
      db,
      {
        shardType,
        predicate: derived.predicate,
        args: derived.args,
        agentId: f.agentId,
        source: f.source ?? 'feedback',
        derivation: derived.derivation,
      },
      limits,
    );
    if (!row!.promotedAt)
      await db
        .update(preferenceCounts)
        .set({ promotedAt: sql`now()` })
        .where(eq(preferenceCounts.id, row!.id));
    return {
      pattern,
      count,
      threshold,
      learning: { ...saved, predicate: derived.predicate, args: derived.args, rule: derived.derivation.rule },
    };
  } catch (err) {
    if (err instanceof LearningRefusedError) return { pattern, count, threshold, refused: err.message };
    throw err;
  }
}

/** `learnings why <id>`: the learning, the rule and counts that produced it, and today's counts. */
export async function explainLearning(
  db: Db,
  id: number,
): Promise<{
  learning: Learning;
  derivation: Derivation | null;
  counts: Array<{ agentId: string; kind: string; pattern: string; count: number; promotedAt: Date | null }>;
} | null> {
  const [l] = await db.select().from(learnings).where(eq(learnings.id, id));
  if (!l) return null;
  const derivation = (l.derivation ?? null) as Derivation | null;
  const counts = derivation
    ? await db
        .select({
          agentId: preferenceCounts.agentId,
          kind: preferenceCounts.kind,
          pattern: preferenceCounts.pattern,
          count: preferenceCounts.count,
          promotedAt: preferenceCounts.promotedAt,
        })
        .from(preferenceCounts)
        .where(
          and(
            eq(preferenceCounts.shard, l.shardType),
            eq(preferenceCounts.pattern, derivation.pattern),
            eq(preferenceCounts.kind, derivation.kind),
          ),
        )
    : [];
  return { learning: l, derivation, counts };
}
