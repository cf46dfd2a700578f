/** The tests' one polling loop (test/helpers/wait.ts): what it returns, what it retries, what a timeout says. */
import { describe, expect, it } from 'vitest';
import { readUntil, until, waitFor } from '../helpers/wait.js';

describe('waitFor', () => {
  it('returns the first value the probe gives, asking again after undefined and after an error', async () => {
    const answers = [undefined, new Error('no worker yet'), 0];
    let asked = 0;
    const v = await waitFor(
      'a number',
      2000,
      () => {
        const a = answers[asked++];
        if (a instanceof Error) throw a;
        return a;
      },
      1,
    );
    expect(v).toBe(0);
    expect(asked).toBe(3);
  });

  it('times out naming what it waited for and the last error', async () => {
    await expect(waitFor('the worker', 50, () => Promise.reject(new Error('connection refused')), 5)).rejects.toThrow(
      'timed out after 50 ms waiting for the worker: connection refused',
    );
    await expect(waitFor('nothing', 30, () => undefined, 5)).rejects.toThrow(
      /^timed out after 30 ms waiting for nothing$/,
    );
  });
});

describe('until and readUntil', () => {
  it('until resolves once the predicate holds', async () => {
    let n = 0;
    await until(() => ++n === 3, 'the third call', 2000, 1);
    expect(n).toBe(3);
  });

  it('readUntil returns the value that satisfied it, and a timeout shows the last value read', async () => {
    let tick = 0;
    expect(
      await readUntil(
        'tick 2',
        2000,
        async () => ({ tick: ++tick }),
        (s) => s.tick === 2,
        1,
      ),
    ).toEqual({ tick: 2 });
    await expect(
      readUntil(
        'phase idle',
        30,
        async () => ({ phase: 'thinking' }),
        (s) => s.phase === 'idle',
        5,
      ),
    ).rejects.toThrow('timed out after 30 ms waiting for phase idle: last read {"phase":"thinking"}');
  });
});
