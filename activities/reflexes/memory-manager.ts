/**
 * The memory manager, run by the reflexes every few ticks (the short tier, `manageMemory`) and by
 * the scheduled pruning job (every tier, `pruneTiers`). Each decision — which row, kept or
 * archived, why, its retention — is one `process_log` row (kind `memory_manager`); an archived row
 * comes back with `restoreArchived` (db/queries/archive.ts).
 */
import { and, eq, inArray, isNull, lt, sql } from 'drizzle-orm';
import { emotionIntensity } from '../../core/emotions.js';
import {
  defaultMemoryPolicy,
  planMemory,
  planTier,
  type MemoryDecision,
  type MemoryEntry,
  type MemoryPolicy,
} from '../../core/memory-manager.js';
import type { Db } from '../../db/client.js';
import {
  concepts,
  diaryEntries,
  goals,
  links,
  llmMemory,
  llmRecentResponses,
  processLog,
} from '../../db/schema/index.js';

type Q = Db | Parameters<Parameters<Db['transaction']>[0]>[0];

const num = (v: unknown, d: number) => (typeof v === 'number' && Number.isFinite(v) ? v : d);

/** The policy from the agent's config keys (novelty_threshold, lru_limit, emotion_weight, goal_focus, diversity_boost). */
export function memoryPolicyOf(cfg: Record<string, unknown>): MemoryPolicy {
  return {
    noveltyThreshold: num(cfg.novelty_threshold, defaultMemoryPolicy.noveltyThreshold),
    lruLimit: num(cfg.lru_limit, defaultMemoryPolicy.lruLimit),
    emotionWeight: num(cfg.emotion_weight, defaultMemoryPolicy.emotionWeight),
    goalFocus: num(cfg.goal_focus, defaultMemoryPolicy.goalFocus),
    diversityBoost: num(cfg.diversity_boost, defaultMemoryPolicy.diversityBoost),
    useWeight: defaultMemoryPolicy.useWeight,
  };
}

/** A long-term row's keep score halves for every 14 days it goes unused. */
export const memoryHalfLifeMs = 14 * 24 * 3_600_000;

/**
 * The caps of the long-term tiers, from `lru_limit` (L): the diary and the notebook keep L rows
 * each, concepts 2·L, links 4·L (a graph has more edges than nodes).
 */
export function tierCaps(lruLimit: number) {
  return { diary: lruLimit, note: lruLimit, concept: 2 * lruLimit, link: 4 * lruLimit };
}

async function activeGoalTags(q: Q, agentId: string): Promise<string[]> {
  const rows = await q
    .select({ tags: goals.tags })
    .from(goals)
    .where(and(eq(goals.agentId, agentId), eq(goals.status, 'active')));
  return rows.flatMap((g) => g.tags);
}

/** The table a tier's rows live in, as `process_log` names it. */
const tierTables = {
  reply: 'llm_recent_responses',
  diary: 'diary_entries',
  note: 'llm_memory',
  concept: 'concepts',
  link: 'links',
} as const;
type Tier = keyof typeof tierTables;

interface LogContext {
  agentId: string;
  processId: string;
  tick?: number;
  policy: MemoryPolicy;
  extra?: Record<string, unknown>;
}

/** One `process_log` row per decision, 500 to a statement. */
async function logDecisions(q: Q, tier: Tier, plan: readonly MemoryDecision[], c: LogContext): Promise<void> {
  const table = tierTables[tier];
  const now = new Date();
  const rows = plan.map((d) => ({
    agentId: c.agentId,
    processId: c.processId,
    kind: 'memory_manager',
    name: `${d.action} ${table} #${d.id}`,
    status: 'close' as const,
    closedAt: now,
    ...(c.tick !== undefined ? { tick: c.tick } : {}),
    message: `${d.action} ${table} #${d.id}: ${d.reason} (retention ${d.retention}${d.keepScore !== undefined ? `, keep score ${d.keepScore}` : ''})`,
    payload: {
      table,
      kind: tier,
      id: d.id,
      action: d.action,
      reason: d.reason,
      retention: d.retention,
      ...(d.keepScore !== undefined ? { keepScore: d.keepScore } : {}),
      policy: c.policy,
      ...c.extra,
    },
  }));
  for (let i = 0; i < rows.length; i += 500) await q.insert(processLog).values(rows.slice(i, i + 500));
}

/** The memory manager over the short tier: archive by retention and LRU, log every decision. */
export async function manageMemory(
  tx: Q,
  agentId: string,
  tick: number,
  cfg: Record<string, unknown>,
): Promise<string[]> {
  const policy = memoryPolicyOf(cfg);
  // One after another: `tx` is a transaction, one connection.
  const rows = await tx
    .select({
      id: llmRecentResponses.id,
      tick: llmRecentResponses.tick,
      lastUsedTick: llmRecentResponses.lastUsedTick,
      novelty: llmRecentResponses.novelty,
      emotions: llmRecentResponses.emotions,
      tags: llmRecentResponses.tags,
    })
    .from(llmRecentResponses)
    // The newest ticks are still the context's; only evaluated rows are judged.
    .where(
      and(
        eq(llmRecentResponses.agentId, agentId),
        isNull(llmRecentResponses.archivedAt),
        lt(llmRecentResponses.tick, tick - 5),
        sql`${llmRecentResponses.novelty} is not null`,
      ),
    );
  // LRU: a reply was last used when a context last showed it (the think activity sets
  // last_used_tick), or when it was written if no context has shown it since.
  const plan = planMemory(
    rows.map((r) => ({
      id: r.id,
      novelty: r.novelty,
      emotion: emotionIntensity(r.emotions),
      tags: r.tags,
      pinned: false,
      lastUsed: Math.max(r.tick, r.lastUsedTick ?? 0),
    })),
    await activeGoalTags(tx, agentId),
    policy,
  );
  const archive = plan.filter((d) => d.action === 'archive').map((d) => d.id);
  if (archive.length)
    await tx.update(llmRecentResponses).set({ archivedAt: new Date() }).where(inArray(llmRecentResponses.id, archive));
  await logDecisions(tx, 'reply', plan, { agentId, processId: 'memory-manager', tick, policy });
  return [`memory_manager: ${archive.length} archived, ${plan.length - archive.length} kept`];
}

export interface TierCounts {
  archivedResponses: number;
  archivedDiary: number;
  archivedNotes: number;
  archivedConcepts: number;
  archivedLinks: number;
  limit: number;
}

const ms = (d: Date | null | undefined) => d?.getTime() ?? 0;
/** priority −100…100 → 0–1 (only a positive priority adds weight). */
const priorityWeight = (p: number) => Math.min(1, Math.max(0, p) / 100);
/** A concept's or link's weight 0–100 (default 1) → 0–1: weight 10 and above is full. */
const graphWeight = (w: number) => Math.min(1, Math.max(0, w) / 10);

/** A long-term row as the plan reads it: last used when it was written or last read, its reads counted. */
function usedEntry(
  r: { id: number; tags: string[]; createdAt: Date; lastAccessedAt: Date | null; accessCount: number },
  o: { emotion?: number; pinned?: boolean; weight: number },
): MemoryEntry {
  return {
    id: r.id,
    novelty: 0,
    emotion: o.emotion ?? 0,
    tags: r.tags,
    pinned: o.pinned ?? false,
    lastUsed: Math.max(ms(r.createdAt), ms(r.lastAccessedAt)),
    uses: r.accessCount,
    weight: o.weight,
  };
}

/**
 * Every tier of one agent, by use. Replies: the newest `lru_limit` by last use (the last tick a
 * context showed them, else their own). Diary, notebook, concepts and links: each capped
 * (`tierCaps`), ranked by keep score — retention from reads (`access_count`), emotion (diary),
 * priority (diary, notebook), weight (concepts, links), goal tags and rare tags, decayed by the
 * time since the row was last read (`last_accessed_at`, else written). Pinned rows stay, outside the cap. A
 * concept archived takes its live links with it (reason `endpoint`): a link is only shown
 * between two live concepts. Every decision is logged; every archived row is restorable.
 */
export async function pruneTiers(q: Q, agentId: string, opts: { processId: string; now?: Date }): Promise<TierCounts> {
  const cfgRows = await q.execute<{ key: string; value: unknown }>(
    sql`select key, value from agent_config where agent_id = ${agentId}`,
  );
  const cfg = Object.fromEntries(cfgRows.rows.map((r) => [r.key, r.value]));
  const rawLimit = cfg.lru_limit;
  const limit = typeof rawLimit === 'number' && Number.isInteger(rawLimit) && rawLimit >= 10 ? rawLimit : 500;
  const policy = { ...memoryPolicyOf(cfg), lruLimit: limit };
  const caps = tierCaps(limit);
  const now = opts.now ?? new Date();
  const goalTags = await activeGoalTags(q, agentId);
  const limits = (cap: number) => ({ cap, halfLife: memoryHalfLifeMs, now: now.getTime() });
  const log = (tier: Tier, plan: readonly MemoryDecision[], extra?: Record<string, unknown>) =>
    logDecisions(q, tier, plan, { agentId, processId: opts.processId, policy, extra });
  const archivedIds = (plan: readonly MemoryDecision[]) => plan.filter((d) => d.action === 'archive').map((d) => d.id);

  // Replies: LRU by use (no retention threshold here: the reflexes judge novelty as they go).
  const replies = await q
    .select({
      id: llmRecentResponses.id,
      tick: llmRecentResponses.tick,
      lastUsedTick: llmRecentResponses.lastUsedTick,
    })
    .from(llmRecentResponses)
    .where(and(eq(llmRecentResponses.agentId, agentId), isNull(llmRecentResponses.archivedAt)));
  const replyPlan = planMemory(
    replies.map((r) => ({
      id: r.id,
      novelty: null,
      emotion: 0,
      tags: [],
      pinned: false,
      lastUsed: Math.max(r.tick, r.lastUsedTick ?? 0),
    })),
    [],
    { ...policy, noveltyThreshold: 0 },
  );
  const replyIds = archivedIds(replyPlan);
  if (replyIds.length)
    await q.update(llmRecentResponses).set({ archivedAt: now }).where(inArray(llmRecentResponses.id, replyIds));
  await log('reply', replyPlan, { cap: limit });

  const diary = await q
    .select()
    .from(diaryEntries)
    .where(and(eq(diaryEntries.agentId, agentId), isNull(diaryEntries.archivedAt)));
  const diaryPlan = planTier(
    diary.map((r) =>
      usedEntry(r, { emotion: emotionIntensity(r.emotions), pinned: r.pinned, weight: priorityWeight(r.priority) }),
    ),
    goalTags,
    policy,
    limits(caps.diary),
  );
  const diaryIds = archivedIds(diaryPlan);
  if (diaryIds.length) await q.update(diaryEntries).set({ archivedAt: now }).where(inArray(diaryEntries.id, diaryIds));
  await log('diary', diaryPlan, { cap: caps.diary });

  const notes = await q
    .select()
    .from(llmMemory)
    .where(and(eq(llmMemory.agentId, agentId), isNull(llmMemory.archivedAt)));
  const notePlan = planTier(
    notes.map((r) => usedEntry(r, { pinned: r.pinned, weight: priorityWeight(r.priority) })),
    goalTags,
    policy,
    limits(caps.note),
  );
  const noteIds = archivedIds(notePlan);
  if (noteIds.length) await q.update(llmMemory).set({ archivedAt: now }).where(inArray(llmMemory.id, noteIds));
  await log('note', notePlan, { cap: caps.note });

  const conceptRows = await q
    .select()
    .from(concepts)
    .where(and(eq(concepts.agentId, agentId), isNull(concepts.archivedAt)));
  const conceptPlan = planTier(
    conceptRows.map((r) => usedEntry(r, { weight: graphWeight(r.weight) })),
    goalTags,
    policy,
    limits(caps.concept),
  );
  const conceptIds = archivedIds(conceptPlan);
  if (conceptIds.length) await q.update(concepts).set({ archivedAt: now }).where(inArray(concepts.id, conceptIds));
  await log('concept', conceptPlan, { cap: caps.concept });

  const linkRows = await q
    .select()
    .from(links)
    .where(and(eq(links.agentId, agentId), isNull(links.archivedAt)));
  const gone = new Set(conceptIds);
  const orphaned = linkRows.filter((l) => gone.has(l.fromConceptId) || gone.has(l.toConceptId));
  const linkPlan = planTier(
    linkRows
      .filter((l) => !gone.has(l.fromConceptId) && !gone.has(l.toConceptId))
      .map((r) => usedEntry({ ...r, tags: [] }, { weight: graphWeight(r.weight) })),
    goalTags,
    policy,
    limits(caps.link),
  );
  const linkIds = [...orphaned.map((l) => l.id), ...archivedIds(linkPlan)];
  if (linkIds.length) await q.update(links).set({ archivedAt: now }).where(inArray(links.id, linkIds));
  await log(
    'link',
    orphaned.map((l) => ({ id: l.id, action: 'archive', reason: 'endpoint', retention: 0 })),
    { cap: caps.link, concepts: [...new Set(orphaned.flatMap((l) => [l.fromConceptId, l.toConceptId]))] },
  );
  await log('link', linkPlan, { cap: caps.link });

  return {
    archivedResponses: replyIds.length,
    archivedDiary: diaryIds.length,
    archivedNotes: noteIds.length,
    archivedConcepts: conceptIds.length,
    archivedLinks: linkIds.length,
    limit,
  };
}
