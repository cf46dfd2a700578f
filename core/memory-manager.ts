/**
 * The memory manager's policy. The short tier (replies): five modes — novelty pruning, LRU,
 * emotion-weighted retention, goal focus, diversity boost — folded into one retention score,
 * then an LRU cap. The long-term tiers (diary, notebook, concepts, links) have no novelty: their
 * retention comes from use (how often a read showed the row), emotion, the writer's own weight
 * (priority, weight), goal focus and diversity, and what stays within a tier's cap is what has
 * the highest keep score, retention decayed by the time since the row was last used. Pure: the
 * activity loads rows, applies the decisions (archive, restorable) and logs each one in `process_log`.
 */
import { clamp01 } from './values.js';

export interface MemoryPolicy {
  /** Archive below this retention (0–1; `novelty_threshold`). */
  noveltyThreshold: number;
  /** Keep at most this many live entries (`lru_limit`). */
  lruLimit: number;
  emotionWeight: number;
  goalFocus: number;
  diversityBoost: number;
  /** Weight of use (a row read often) in retention. */
  useWeight: number;
}

export const defaultMemoryPolicy: MemoryPolicy = {
  noveltyThreshold: 0.35,
  lruLimit: 500,
  emotionWeight: 0.6,
  goalFocus: 0.7,
  diversityBoost: 0.8,
  useWeight: 0.6,
};

export interface MemoryEntry {
  id: number;
  /** 0–100, null when not evaluated (treated as fully novel). */
  novelty: number | null;
  /** 0–1 strongest emotion. */
  emotion: number;
  tags: readonly string[];
  pinned: boolean;
  /** Recency key: higher = used more recently (tick or epoch ms); for replies, the last tick a context showed them (else their own tick). */
  lastUsed: number;
  /** Times a read command showed the row (`access_count`); replies have none. */
  uses?: number;
  /** 0–1: the writer's own weight (a notebook or diary entry's priority, a concept's or link's weight). */
  weight?: number;
}

export interface MemoryDecision {
  id: number;
  action: 'keep' | 'archive';
  /** `endpoint`: a link archived with one of its concepts. */
  reason: 'pinned' | 'retained' | 'low_retention' | 'lru' | 'least_kept' | 'endpoint';
  retention: number;
  /** Long-term tiers: retention decayed by the time since last use (what the cap ranks by). */
  keepScore?: number;
}

/** 0–1 from an access count: 1 use ≈ 0.29, 2 = 0.5, 4 = 0.75; never 1. */
export function useScore(uses: number): number {
  return uses > 0 ? 1 - 2 ** (-uses / 2) : 0;
}

/**
 * Retention in [0, 1]: 1 − (1−n)(1−wₑ·e)(1−g·goal)(1−d·rare)(1−wᵤ·use)(1−weight). Each mode can
 * only raise it, so more novelty, stronger emotion, a goal tag, a rare tag, more reads or more
 * weight never turns a keep into an archive. A long-term row has no novelty: pass 0.
 */
export function retention(
  e: Pick<MemoryEntry, 'novelty' | 'emotion' | 'uses' | 'weight'>,
  goalMatch: boolean,
  rare: boolean,
  p: MemoryPolicy,
): number {
  const n = e.novelty === null ? 1 : clamp01(e.novelty / 100);
  const em = clamp01(e.emotion);
  const r =
    1 -
    (1 - n) *
      (1 - clamp01(p.emotionWeight) * em) *
      (1 - (goalMatch ? clamp01(p.goalFocus) : 0)) *
      (1 - (rare ? clamp01(p.diversityBoost) : 0)) *
      (1 - clamp01(p.useWeight ?? defaultMemoryPolicy.useWeight) * useScore(e.uses ?? 0)) *
      (1 - clamp01(e.weight ?? 0));
  return Math.round(clamp01(r) * 10_000) / 10_000;
}

/** Decide every entry: pinned kept; low retention archived; then the least recently used beyond the LRU cap. */
export function planMemory(
  entries: readonly MemoryEntry[],
  goalTags: readonly string[],
  p: MemoryPolicy = defaultMemoryPolicy,
): MemoryDecision[] {
  const goals = new Set(goalTags.map((t) => t.toLowerCase()));
  const tagCount = new Map<string, number>();
  for (const e of entries) for (const t of new Set(e.tags)) tagCount.set(t, (tagCount.get(t) ?? 0) + 1);
  const decisions = new Map<number, MemoryDecision>();
  const live: Array<MemoryEntry & { r: number }> = [];
  for (const e of entries) {
    const goalMatch = e.tags.some((t) => goals.has(t.toLowerCase()));
    const rare = e.tags.some((t) => tagCount.get(t) === 1);
    const r = retention(e, goalMatch, rare, p);
    if (e.pinned) decisions.set(e.id, { id: e.id, action: 'keep', reason: 'pinned', retention: r });
    else if (r < p.noveltyThreshold)
      decisions.set(e.id, { id: e.id, action: 'archive', reason: 'low_retention', retention: r });
    else live.push({ ...e, r });
  }
  const pinned = entries.filter((e) => e.pinned).length;
  const room = Math.max(0, p.lruLimit - pinned);
  // Most recently used first; ties by retention, then id (newest first).
  live.sort((a, b) => b.lastUsed - a.lastUsed || b.r - a.r || b.id - a.id);
  live.forEach((e, i) =>
    decisions.set(e.id, {
      id: e.id,
      action: i < room ? 'keep' : 'archive',
      reason: i < room ? 'retained' : 'lru',
      retention: e.r,
    }),
  );
  return entries.map((e) => decisions.get(e.id)!);
}

/** How a long-term tier is capped: at most `cap` live rows, ranked by keep score at `now`. */
export interface TierLimits {
  cap: number;
  /** Time since last use after which a row's keep score halves (same unit as `lastUsed`). */
  halfLife: number;
  now: number;
}

/** Keep score: (0.1 + 0.9·retention) · ½^(idle / halfLife), idle = now − lastUsed. */
export function keepScore(r: number, lastUsed: number, t: Pick<TierLimits, 'halfLife' | 'now'>): number {
  const idle = Math.max(0, t.now - lastUsed);
  return Math.round((0.1 + 0.9 * clamp01(r)) * 2 ** (-idle / Math.max(1, t.halfLife)) * 1_000_000) / 1_000_000;
}

/**
 * Decide a long-term tier: pinned rows kept (outside the cap); the others ranked by keep score
 * (ties: the newer id first), the first `cap` kept, the rest archived as
 * `least_kept`. No retention threshold: a row is only forgotten when the tier is full, and then
 * the least used, least felt, least weighty and longest idle goes first.
 */
export function planTier(
  entries: readonly MemoryEntry[],
  goalTags: readonly string[],
  p: MemoryPolicy,
  t: TierLimits,
): MemoryDecision[] {
  const goals = new Set(goalTags.map((g) => g.toLowerCase()));
  const tagCount = new Map<string, number>();
  for (const e of entries) for (const g of new Set(e.tags)) tagCount.set(g, (tagCount.get(g) ?? 0) + 1);
  const scored = entries.map((e) => {
    const r = retention(
      e,
      e.tags.some((g) => goals.has(g.toLowerCase())),
      e.tags.some((g) => tagCount.get(g) === 1),
      p,
    );
    return { e, r, k: keepScore(r, e.lastUsed, t) };
  });
  const room = Math.max(0, t.cap);
  const ranked = scored.filter((s) => !s.e.pinned).sort((a, b) => b.k - a.k || b.e.id - a.e.id);
  const kept = new Set(ranked.slice(0, room).map((s) => s.e.id));
  return scored.map(({ e, r, k }) => ({
    id: e.id,
    action: e.pinned || kept.has(e.id) ? ('keep' as const) : ('archive' as const),
    reason: e.pinned ? ('pinned' as const) : kept.has(e.id) ? ('retained' as const) : ('least_kept' as const),
    retention: r,
    keepScore: k,
  }));
}
