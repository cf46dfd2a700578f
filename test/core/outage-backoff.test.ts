import { describe, expect, it } from 'vitest';
import { outageBackoffMs } from '../../core/failure.js';

describe('outageBackoffMs', () => {
  it('waits 2 s, doubling each attempt, at most 60 s', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 1_000].map(outageBackoffMs)).toEqual([
      2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000,
    ]);
  });

  it('treats an attempt below 1 as the first', () => {
    expect(outageBackoffMs(0)).toBe(2_000);
    expect(outageBackoffMs(-3)).toBe(2_000);
  });
});
