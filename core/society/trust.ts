/**
 * Trust in a peer, from the history of ratings it was given (−3…+3 each). Recent ratings
 * weigh more (each older one by `decay`), and a prior of `priorWeight` ratings at the neutral
 * 0.5 (older than any rating, so it fades the same way) keeps one rating from swinging trust to
 * an extreme. Pure: the same history always gives
 * the same trust.
 */

const ratingRange = { min: -3, max: 3 } as const;
export const trustDefaults = { neutral: 0.5, decay: 0.85, priorWeight: 2 } as const;

/** Map a score in −3…+3 onto 0…1. */
export const scoreToUnit = (score: number): number => (score - ratingRange.min) / (ratingRange.max - ratingRange.min);

/** Trust in 0…1 from scores, oldest first. */
export function trustFromRatings(
  scores: readonly number[],
  opts: { decay?: number; priorWeight?: number } = {},
): number {
  const decay = opts.decay ?? trustDefaults.decay;
  const prior = opts.priorWeight ?? trustDefaults.priorWeight;
  // The prior is the oldest evidence of all: it fades as ratings come in.
  const priorW = prior * decay ** scores.length;
  let sum = trustDefaults.neutral * priorW;
  let weight = priorW;
  scores.forEach((s, i) => {
    const w = decay ** (scores.length - 1 - i);
    sum += w * scoreToUnit(Math.max(ratingRange.min, Math.min(ratingRange.max, s)));
    weight += w;
  });
  return Math.round((sum / weight) * 1000) / 1000;
}

/** The reputation score (−3…+3) that goes with a trust. */
export const trustToScore = (trust: number): number =>
  Math.round((trust * (ratingRange.max - ratingRange.min) + ratingRange.min) * 100) / 100;
