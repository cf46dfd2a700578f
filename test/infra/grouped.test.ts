/** Group commit: requests made together go together, those made while a group runs go together after it. */
import { describe, expect, it } from 'vitest';
import { grouped } from '../../db/grouped.js';

describe('grouped', () => {
  it('groups requests made together, then what comes while a group runs; a lone request runs alone', async () => {
    const groups: number[][] = [];
    const double = grouped(async (xs: number[]) => {
      groups.push(xs);
      await new Promise((r) => setTimeout(r, 10));
      return xs.map((x) => x * 2);
    });
    // 1 and 2 made together; 3 and 4 while their group runs; 5 alone, after.
    const first = [double(1), double(2)];
    const later = new Promise((r) => setTimeout(r, 2)).then(() => Promise.all([double(3), double(4)]));
    expect(await Promise.all(first)).toEqual([2, 4]);
    expect(await later).toEqual([6, 8]);
    expect(await double(5)).toBe(10);
    expect(groups).toEqual([[1, 2], [3, 4], [5]]);
  });

  it('fails every request of a group whose run fails, and the next group runs anew', async () => {
    let calls = 0;
    const flaky = grouped(async (xs: string[]) => {
      if (calls++ === 1) throw new Error('database away');
      return xs.map((x) => x.toUpperCase());
    });
    const settled = await Promise.allSettled([flaky('a'), flaky('b'), flaky('c')]);
    // 'a', 'b', 'c' made together: one group, the first run, which succeeds; 'd' and 'e' the second, which fails.
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    const failed = await Promise.allSettled([flaky('d'), flaky('e')]);
    expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(await flaky('f')).toBe('F');
  });
});
