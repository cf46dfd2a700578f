import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { scoreToUnit, trustFromRatings, trustToScore } from '../../core/society/trust.js';

describe('trust from the history of ratings', () => {
  it('starts neutral, rises with good ratings, falls with bad ones, and recent ratings weigh more', () => {
    expect(trustFromRatings([])).toBe(0.5);
    expect(trustFromRatings([3])).toBeGreaterThan(0.5);
    expect(trustFromRatings([3])).toBeLessThan(1);
    expect(trustFromRatings([-3, -3])).toBeLessThan(trustFromRatings([-3]));
    expect(trustFromRatings([-3, 3])).toBeGreaterThan(trustFromRatings([3, -3]));
    expect(trustFromRatings(Array(30).fill(3))).toBeGreaterThan(0.9);
  });

  it('stays in 0…1 for any history, and trustToScore maps back into −3…+3', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -3, max: 3 }), { maxLength: 60 }), (scores) => {
        const t = trustFromRatings(scores);
        expect(t).toBeGreaterThanOrEqual(0);
        expect(t).toBeLessThanOrEqual(1);
        const s = trustToScore(t);
        expect(s).toBeGreaterThanOrEqual(-3);
        expect(s).toBeLessThanOrEqual(3);
      }),
    );
    expect(scoreToUnit(-3)).toBe(0);
    expect(scoreToUnit(3)).toBe(1);
  });
});
