/**
 * Choosing what a context shows by meaning. Pure and deterministic: the candidates come with unit
 * vectors (their texts' embeddings), the query is the vectors of what the agent works toward (its
 * goals and tasks, a concentration's tags and emotions), and every rule below breaks ties by id, so
 * the same rows and the same vectors give the same choice on every retry.
 *
 * - `diverseOrder`: the most diverse sample (greedy farthest point: each next pick is the candidate
 *   least similar to everything picked so far, starting from the newest).
 * - `rankByRelevance`: most relevant first (the highest cosine to any query vector).
 * - `fitBudget`: what fits a token budget, in rank order; the first candidate is always kept.
 */

/** A vector the embedder returned (unit length). */
export type Vector = ArrayLike<number>;

/** Tokens a text costs in a prompt, estimated as the scripted model counts them: ceil(chars / 4). */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/** The dot product of two unit vectors: their cosine (0 when the sizes differ, which never compares). */
export function similarity(a: Vector, b: Vector): number {
  if (a.length !== b.length) return 0;
  let dot = 0;
  for (let i = 0; i < a.length; i++) dot += a[i]! * b[i]!;
  return dot;
}

/** How relevant a vector is to a query: its highest cosine to any of the query's vectors (0 with no query). */
export function relevance(v: Vector, query: readonly Vector[]): number {
  let best = 0;
  for (const q of query) best = Math.max(best, similarity(v, q));
  return best;
}

/** The thresholds and budgets the context's selection uses. */
export const selectionDefaults = {
  /** Concentration: a reply counts as about a goal, tag or emotion at this cosine or above. */
  minCosine: 0.3,
  /** Concentration with an emotion filter: the reply's evaluator reading of that emotion is at least this strong (1–5). */
  minEmotionStrength: 3,
  /** Context 3: tokens of own replies per reply of `recent_responses` (a reply is shown cut at 600 characters). */
  replyTokens: 150,
  /** Context 3 shows at most this many times `recent_responses` replies, however short. */
  maxRepliesFactor: 2,
  /** Context 3's abstracts: tokens in all (three abstracts shown cut at 400 characters), and at most this many. */
  abstractTokens: 300,
  maxAbstracts: 6,
  /** Context 5: tokens of command results in all; a result that does not fit is listed without its text. */
  resultTokens: 2000,
  /** Meditation embeds at most this many of the old replies (spread over the history by tick number). */
  meditationPool: 200,
} as const;

export interface Ranked {
  id: number | string;
}

const compareIds = (a: number | string, b: number | string) =>
  typeof a === 'number' && typeof b === 'number' ? a - b : String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0;

/**
 * The candidates, most relevant to the query first; equal scores keep the candidates' given order
 * (callers give them newest first), then the lower id.
 */
export function rankByRelevance<T extends Ranked>(
  candidates: readonly T[],
  vectorOf: (c: T) => Vector,
  query: readonly Vector[],
): Array<T & { score: number }> {
  return candidates
    .map((c, i) => ({ c, i, score: relevance(vectorOf(c), query) }))
    .sort((a, b) => b.score - a.score || a.i - b.i || compareIds(a.c.id, b.c.id))
    .map(({ c, score }) => ({ ...c, score }));
}

/**
 * The most diverse `k` of the candidates (given newest first): the newest, then again and again the
 * candidate whose highest cosine to those already picked is lowest (max-min distance); ties go to
 * the earlier candidate in the given order. Returned in the order picked.
 */
export function diverseOrder<T extends Ranked>(candidates: readonly T[], vectorOf: (c: T) => Vector, k: number): T[] {
  if (k <= 0 || candidates.length === 0) return [];
  const vectors = candidates.map(vectorOf);
  const closest = candidates.map(() => -Infinity);
  const picked: number[] = [];
  const taken = new Set<number>();
  let next = 0;
  while (picked.length < Math.min(k, candidates.length)) {
    picked.push(next);
    taken.add(next);
    let best = -1;
    for (let i = 0; i < candidates.length; i++) {
      if (taken.has(i)) continue;
      closest[i] = Math.max(closest[i]!, similarity(vectors[i]!, vectors[next]!));
      if (best < 0 || closest[i]! < closest[best]!) best = i;
    }
    if (best < 0) break;
    next = best;
  }
  return picked.map((i) => candidates[i]!);
}

/**
 * What fits `budget` tokens, taken in the given (rank) order, at most `max`: the first is always
 * kept (even alone over the budget); each next one is kept when it still fits, else skipped (a
 * shorter one further down may fit). Returned in the given order.
 */
export function fitBudget<T>(ranked: readonly T[], tokensOf: (c: T) => number, budget: number, max = Infinity): T[] {
  const kept: T[] = [];
  let used = 0;
  for (const c of ranked) {
    if (kept.length >= max) break;
    const cost = tokensOf(c);
    if (kept.length > 0 && used + cost > budget) continue;
    kept.push(c);
    used += cost;
  }
  return kept;
}
