import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { priorityFor, priorityKeyFor } from '../../core/priority.js';

const of100 = (available: number) => priorityKeyFor({ available, capacity: 100 });

describe('priorityKeyFor', () => {
  it('bands the fraction available / capacity: ≥ 0.75 → 1, ≥ 0.5 → 2, ≥ 0.25 → 3, > 0 → 4, spent → 5', () => {
    expect([100, 75, 74.99, 50, 49.99, 25, 24.99, 0.01, 0].map(of100)).toEqual([1, 1, 2, 2, 3, 3, 4, 4, 5]);
    expect(priorityKeyFor({ available: 3, capacity: 4 })).toBe(1);
    expect(priorityKeyFor({ available: 1, capacity: 1_000_000 })).toBe(4);
  });

  it('more left than the capacity is the first band', () => {
    expect(of100(250)).toBe(1);
    expect(of100(Number.POSITIVE_INFINITY)).toBe(1);
  });

  it('an unlimited budget is 2: ahead of the default 3, behind a full budget', () => {
    expect(priorityKeyFor({ available: null, capacity: null })).toBe(2);
    expect(priorityKeyFor({ available: null, capacity: 100 })).toBe(2);
    expect(priorityKeyFor({ available: 40, capacity: null })).toBe(2);
    expect(priorityKeyFor({ available: 40, capacity: Number.POSITIVE_INFINITY })).toBe(2);
  });

  it('clamps invalid amounts instead of throwing: NaN and negatives count as 0', () => {
    expect(of100(Number.NaN)).toBe(5);
    expect(of100(-20)).toBe(5);
    expect(priorityKeyFor({ available: 10, capacity: Number.NaN })).toBe(1);
    expect(priorityKeyFor({ available: 10, capacity: -5 })).toBe(1);
    expect(priorityKeyFor({ available: 0, capacity: 0 })).toBe(5);
    expect(priorityKeyFor({ available: Number.NaN, capacity: Number.NaN })).toBe(5);
  });

  it('an explicit priority wins, rounded and clamped into 1..5; NaN is ignored', () => {
    expect(priorityKeyFor({ available: 0, capacity: 100, explicit: 1 })).toBe(1);
    expect(priorityKeyFor({ available: 100, capacity: 100, explicit: 5 })).toBe(5);
    expect(priorityKeyFor({ available: null, capacity: null, explicit: 4 })).toBe(4);
    expect(priorityKeyFor({ available: 100, capacity: 100, explicit: 0 })).toBe(1);
    expect(priorityKeyFor({ available: 100, capacity: 100, explicit: 9 })).toBe(5);
    expect(priorityKeyFor({ available: 100, capacity: 100, explicit: 2.6 })).toBe(3);
    expect(priorityKeyFor({ available: 100, capacity: 100, explicit: -3 })).toBe(1);
    expect(priorityKeyFor({ available: 0, capacity: 100, explicit: Number.NaN })).toBe(5);
  });

  it('is always an integer 1..5, and never higher for more lifeforce of the same capacity', () => {
    const amount = fc.option(fc.double(), { nil: null });
    fc.assert(
      fc.property(amount, amount, fc.option(fc.double(), { nil: undefined }), (available, capacity, explicit) => {
        const key = priorityKeyFor({ available, capacity, explicit });
        expect(Number.isInteger(key) && key >= 1 && key <= 5).toBe(true);
      }),
    );
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1e9, noNaN: true }),
        fc.double({ min: 0, max: 1e9, noNaN: true }),
        fc.double({ min: 0.001, max: 1e9, noNaN: true }),
        (a, b, capacity) => {
          const [less, more] = a <= b ? [a, b] : [b, a];
          expect(priorityKeyFor({ available: more, capacity })).toBeLessThanOrEqual(
            priorityKeyFor({ available: less, capacity }),
          );
        },
      ),
    );
  });
});

describe('priorityFor', () => {
  it('is the SDK Priority shape as plain data', () => {
    const priority = priorityFor({ available: 80, capacity: 100 });
    expect(priority).toEqual({ priorityKey: 1 });
    expect(JSON.parse(JSON.stringify(priorityFor({ available: 1, capacity: 100, explicit: 3 })))).toEqual({
      priorityKey: 3,
    });
  });
});
