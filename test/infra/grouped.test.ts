/** Group commit: the first request runs at once, those made meanwhile go together after it. */
import { describe, expect, it } from 'vitest';
import { grouped } from '../../db/grouped.js';

describe('grouped', () => {
  it('runs a lone request at once, and groups what comes while one runs', async () => {
    const groups: number[][] = [];
    const double = grouped(async (xs: number[]) => {
      groups.push(xs);
      await new Promise((r) => setTimeout(r, 10));
      return xs.map((x) => x * 2);
    });
    expect(await Promise.all([double(1), double(2), double(3)])).toEqual([2, 4, 6]);
    expect(await double(4)).toBe(8);
    expect(groups).toEqual([[1], [2, 3], [4]]);
  });

  it('fails every request of a group whose run fails, and the next group runs anew', async () => {
    let calls = 0;
    const flaky = grouped(async (xs: string[]) => {
      if (calls++ === 1) throw new Error('database away');
      return xs.map((x) => x.toUpperCase());
    });
    const settled = await Promise.allSettled([flaky('a'), flaky('b'), flaky('c')]);
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected']);
    expect(await flaky('d')).toBe('D');
  });
});
