/** Requests made in one turn of the event loop go to `run` together, each answered in order. */
import { describe, expect, it } from 'vitest';
import { perTurn } from '../../db/per-turn.js';

describe('perTurn', () => {
  it('sends what one turn asks for in one batch, and what comes after in the next', async () => {
    const batches: number[][] = [];
    const double = perTurn(async (xs: number[]) => {
      batches.push(xs);
      return xs.map((x) => x * 2);
    });
    const first = Promise.all([double(1), double(2), double(3)]);
    // Microtasks of this turn join it too.
    const late = Promise.resolve().then(() => double(4));
    expect(await first).toEqual([2, 4, 6]);
    expect(await late).toBe(8);
    expect(await double(5)).toBe(10);
    expect(batches).toEqual([[1, 2, 3, 4], [5]]);
  });

  it('fails every request of a batch whose run fails, and the next batch runs anew', async () => {
    let calls = 0;
    const flaky = perTurn(async (xs: string[]) => {
      if (calls++ === 0) throw new Error('database away');
      return xs.map((x) => x.toUpperCase());
    });
    const failed = await Promise.allSettled([flaky('a'), flaky('b')]);
    expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(await flaky('c')).toBe('C');
  });
});
