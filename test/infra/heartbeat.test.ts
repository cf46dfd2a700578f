/**
 * Every activity heartbeats while it runs (the worker's interceptor), carrying the progress the
 * activity last reported; a local activity does not heartbeat.
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import { describe, expect, it } from 'vitest';
import { heartbeat, heartbeatInterceptor, withHeartbeat } from '../../activities/heartbeat.js';

const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function env(info: ConstructorParameters<typeof MockActivityEnvironment>[0] = {}) {
  const e = new MockActivityEnvironment(info, { logger: quiet, interceptors: [heartbeatInterceptor(10)] });
  const beats: unknown[] = [];
  e.on('heartbeat', (d: unknown) => beats.push(d));
  return { e, beats };
}

describe('heartbeats', () => {
  it('an activity that never heartbeats itself heartbeats while it runs, and stops when it ends', async () => {
    const { e, beats } = env();
    expect(await e.run(async () => (await sleep(120), 'done'))).toBe('done');
    const n = beats.length;
    expect(n).toBeGreaterThanOrEqual(4);
    expect(beats.every((d) => d === undefined)).toBe(true);
    await sleep(60);
    expect(beats.length).toBe(n);
  });

  it("the interceptor's beats carry the progress the activity reported last, and withHeartbeat's details while its work runs", async () => {
    const { e, beats } = env();
    await e.run(async () => {
      heartbeat({ window: 1 });
      await sleep(60);
      await withHeartbeat(() => sleep(60), { details: { waitingFor: 'llm' } });
      await sleep(60);
    });
    expect(beats[0]).toEqual({ window: 1 });
    const kinds = [...new Set(beats.map((d) => JSON.stringify(d)))];
    // In order: the progress, the wait's details, the progress again once the wait is over.
    expect(kinds).toEqual([JSON.stringify({ window: 1 }), JSON.stringify({ waitingFor: 'llm' })]);
    expect(beats.at(-1)).toEqual({ window: 1 });
  });

  it('a local activity does not heartbeat (its workflow task is its lease), and withHeartbeat still gives it its cancellation signal', async () => {
    const { e, beats } = env({ isLocal: true });
    const signal = await e.run(async () => {
      heartbeat({ window: 1 });
      await sleep(60);
      return withHeartbeat(async (s) => s);
    });
    expect(beats).toEqual([]);
    expect(signal).toBeInstanceOf(AbortSignal);
  });

  it('outside an activity, heartbeat does nothing and withHeartbeat runs the work without a signal', async () => {
    heartbeat({ window: 1 });
    expect(await withHeartbeat(async (s) => s)).toBeUndefined();
  });
});
