/**
 * The memory manager's policy for the short tier: five modes —
 * novelty pruning, LRU, emotion-weighted retention, goal focus, diversity boost — folded into
 * one retention score, then an LRU cap. Pure: the activity loads rows, applies the decisions
 * (archive, restorable) and logs each one in `process_log`.
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
}

export const defaultMemoryPolicy: MemoryPolicy = {
  noveltyThreshold: 0.35,
  lruLimit: 500,
  emotionWeight: 0.6,
  goalFocus: 0.7,
  diversityBoost: 0.8,
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
}

interface MemoryDecision {
  id: number;
  action: 'keep' | 'archive';
  reason: 'pinned' | 'retained' | 'low_retention' | 'lru';
  retention: number;
}

/**
 * Retention in [0, 1]: 1 − (1−n)(1−wₑ·e)(1−g·goal)(1−d·rare). Each mode can only raise it, so
 * more novelty, stronger emotion, a goal tag or a rare tag never turns a keep into an archive.
 */
export function retention(
  e: Pick<MemoryEntry, 'novelty' | 'emotion'>,
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
      (1 - (rare ? clamp01(p.diversityBoost) : 0));
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
