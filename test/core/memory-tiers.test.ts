/** The long-term tiers' policy (core/memory-manager.ts planTier): use, weight and idleness decide what a full tier keeps. */
import { describe, expect, it } from 'vitest';
import {
  defaultMemoryPolicy,
  keepScore,
  planTier,
  retention,
  useScore,
  type MemoryEntry,
} from '../../core/memory-manager.js';

const day = 86_400_000;
const now = 100 * day;
const limits = (cap: number) => ({ cap, halfLife: 14 * day, now });
const entry = (id: number, o: Partial<MemoryEntry> = {}): MemoryEntry => ({
  id,
  novelty: 0,
  emotion: 0,
  tags: [],
  pinned: false,
  lastUsed: now - id * day,
  ...o,
});

describe('planTier', () => {
  it('keeps the cap of highest keep score; pinned rows stay outside the cap', () => {
    const rows = [entry(1), entry(2), entry(3, { pinned: true }), entry(4), entry(5)];
    const plan = planTier(rows, [], defaultMemoryPolicy, limits(2));
    expect(plan.map((d) => [d.id, d.action, d.reason])).toEqual([
      [1, 'keep', 'retained'],
      [2, 'keep', 'retained'],
      [3, 'keep', 'pinned'],
      [4, 'archive', 'least_kept'],
      [5, 'archive', 'least_kept'],
    ]);
  });

  it('an old row read often outranks a newer unread one; emotion and weight count too', () => {
    const read = entry(30, { uses: 3, lastUsed: now - day });
    const plan = planTier([read, entry(5)], [], defaultMemoryPolicy, limits(1));
    expect(plan.find((d) => d.id === 30)!.action).toBe('keep');
    for (const extra of [{ emotion: 0.8 }, { weight: 0.8 }])
      expect(planTier([entry(10, extra), entry(5)], [], defaultMemoryPolicy, limits(1))[0]!.action).toBe('keep');
  });

  it('more uses never lower retention; longer idleness never raises the keep score', () => {
    let last = -1;
    for (let uses = 0; uses < 20; uses++) {
      const r = retention({ novelty: 0, emotion: 0, uses }, false, false, defaultMemoryPolicy);
      expect(r).toBeGreaterThanOrEqual(last);
      last = r;
    }
    expect(useScore(0)).toBe(0);
    expect(useScore(2)).toBeCloseTo(0.5);
    expect(keepScore(0.5, now - 30 * day, limits(1))).toBeLessThan(keepScore(0.5, now - day, limits(1)));
    expect(keepScore(0, now, limits(1))).toBe(0.1);
  });
});
