/**
 * The think as a local activity (time-skipping server, fakes): after a model that answered
 * within `localThinkMaxModelMs`, the next tick thinks inside its workflow task (a marker in
 * history, no activity task); an unpaced loop goes through the activity once every
 * `localThinksInARow + 1` ticks, or sooner once its local thinks held the workflow task
 * `localHoldMaxMs`; a slow model always does; a local think that finds no LLM
 * enters Core Outage like the activity does, and the retry goes through the activity; one cut
 * by its worker's shutdown is the same tick again, not a failed one. Every history replays.
 */
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import type { ThinkInput, ThinkResult } from '../../activities/tick/think.js';
import {
  localHoldMaxMs,
  localThinkMaxModelMs,
  localThinksInARow,
  type AgentStatus,
  type agentLoopWorkflow,
} from '../../workflows/agent-loop/index.js';
import { runReplayedLoop } from '../helpers/harness.js';
import { fakeThought } from '../helpers/scripted.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

const suite = timeSkippingSuite();

interface Run {
  thinks: ThinkInput[];
  processLog: string[];
  status: AgentStatus;
  /** Per think, in history order: 'activity' or 'local'. */
  kinds: Array<'activity' | 'local'>;
}

let seq = 0;
async function run(
  input: Omit<Parameters<typeof agentLoopWorkflow>[0], 'agentId'>,
  reply: (i: ThinkInput, n: number) => Partial<ThinkResult> | Error,
): Promise<Run> {
  const thinks: ThinkInput[] = [];
  const processLog: string[] = [];
  const { status, history } = await runReplayedLoop(
    suite,
    { agentId: `local-think-${++seq}`, ...input },
    {
      async think(i) {
        thinks.push(i);
        const r = reply(i, thinks.length);
        if (r instanceof Error) throw r;
        return fakeThought(i, r);
      },
      async logProcess(i) {
        processLog.push(i.status);
      },
      async probeLlm() {
        return { ok: true, model: 'scripted:fake' };
      },
    },
  );
  const kinds: Run['kinds'] = [];
  for (const e of history.events ?? []) {
    if (e.activityTaskScheduledEventAttributes?.activityType?.name === 'think') kinds.push('activity');
    if (e.markerRecordedEventAttributes?.markerName === 'core_local_activity') kinds.push('local');
  }
  return { thinks, processLog, status, kinds };
}

const fast = { modelMs: 5 };

describe('the think as a local activity', () => {
  it('an unpaced loop on a fast model: local thinks, the activity once every localThinksInARow + 1 ticks', async () => {
    const r = await run({ maxTicks: 20, reflexes: false, settings: { delayMs: 0 } }, () => fast);
    expect(r.thinks.map((t) => t.tick)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    // The first tick knows no answer time yet; then runs of local thinks, each closed by the activity.
    const expected = Array.from({ length: 20 }, (_, i) => (i % (localThinksInARow + 1) === 0 ? 'activity' : 'local'));
    expect(r.kinds).toEqual(expected);
  });

  it('an unpaced loop whose thinks take long (under load) goes through the activity once they held the task localHoldMaxMs', async () => {
    const each = Math.ceil(localHoldMaxMs / 3) + 1;
    const r = await run({ maxTicks: 9, reflexes: false, settings: { delayMs: 0 } }, () => ({ ...fast, thinkMs: each }));
    // Three local thinks pass localHoldMaxMs: the fourth tick after them is an activity again.
    expect(r.kinds).toEqual(['activity', 'local', 'local', 'local', 'activity', 'local', 'local', 'local', 'activity']);
  });

  it('a paced loop on a fast model thinks locally at every tick after the first', async () => {
    const r = await run({ maxTicks: 12, reflexes: false, settings: { delayMs: 1000 } }, () => fast);
    expect(r.kinds).toEqual(['activity', ...Array<'local'>(11).fill('local')]);
  });

  it('a model slower than localThinkMaxModelMs keeps the activity', async () => {
    let n = 0;
    const r = await run({ maxTicks: 6, reflexes: false, settings: { delayMs: 0 } }, () => ({
      modelMs: ++n === 3 ? 5 : localThinkMaxModelMs + 1,
    }));
    // Only the tick after the one fast answer thinks locally.
    expect(r.kinds).toEqual(['activity', 'activity', 'activity', 'local', 'activity', 'activity']);
  });

  it('a local think that finds no LLM enters Core Outage; the retry goes through the activity', async () => {
    const down = ApplicationFailure.create({
      type: 'LlmUnavailable',
      nonRetryable: true,
      message: 'all 1 candidates failed',
    });
    const r = await run({ maxTicks: 6, reflexes: false, settings: { delayMs: 1000 } }, (_i, n) =>
      n === 4 ? down : fast,
    );
    expect(r.thinks.map((t) => t.tick)).toEqual([1, 2, 3, 4, 4, 5, 6]);
    expect(r.status.counters.outages).toBe(1);
    expect(r.status.operatingMode).toBe('normal');
    expect(r.processLog).toEqual(['offline', 'close']);
    // Tick 4 failed locally (its marker records the failure); its retry after the outage goes
    // through the activity, which answers fast, so ticks 5 and 6 are local again.
    expect(r.kinds).toEqual(['activity', 'local', 'local', 'local', 'activity', 'local', 'local']);
  });

  it('a local think cut by its worker shutting down is the same tick again, through the activity, not a failed tick', async () => {
    // What the SDK gives the workflow for a local activity still running when its worker shuts
    // down (it is not retried: the worker that would retry it is going).
    const shutdown = ApplicationFailure.create({
      type: 'WorkerShutdown',
      nonRetryable: true,
      message: 'Worker is shutting down and this activity did not complete in time',
    });
    const r = await run({ maxTicks: 6, reflexes: false, settings: { delayMs: 1000 } }, (_i, n) =>
      n === 4 ? shutdown : fast,
    );
    expect(r.thinks.map((t) => t.tick)).toEqual([1, 2, 3, 4, 4, 5, 6]);
    // No tick_failure ('error'): only the note that the step waited and went on ('close').
    expect(r.processLog).toEqual(['close']);
    expect(r.status.counters.ticks).toBe(6);
    expect(r.status.counters.degraded).toBe(1);
    expect(r.kinds).toEqual(['activity', 'local', 'local', 'local', 'activity', 'local', 'local']);
  });

  it("so is a think activity whose last attempt its worker's shutdown cut (a slow model, restarted workers)", async () => {
    const shutdown = ApplicationFailure.create({
      type: 'WorkerShutdown',
      nonRetryable: true,
      message: 'Worker is shutting down and this activity did not complete in time',
    });
    const r = await run({ maxTicks: 4, reflexes: false, settings: { delayMs: 1000 } }, (_i, n) =>
      n === 2 ? shutdown : { modelMs: localThinkMaxModelMs + 1 },
    );
    expect(r.thinks.map((t) => t.tick)).toEqual([1, 2, 2, 3, 4]);
    expect(r.processLog).toEqual(['close']);
    expect(r.kinds).toEqual(['activity', 'activity', 'activity', 'activity', 'activity']);
  });
});
