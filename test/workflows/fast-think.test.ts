/**
 * The fast think: an agent whose model answered the last tick within `fastThinkMaxLlmMs` thinks
 * the next tick in a local activity; an unpaced loop hands its held workflow task back through an
 * ordinary think once `fastThinkHoldMs` of local thinks have run; a local think that fails hands
 * the same tick to the ordinary activity. On the time-skipping server with typed activity fakes.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import type { createActivities } from '../../activities/index.js';
import type { ThinkInput, ThinkResult } from '../../activities/tick/think.js';
import { fastThinkHoldMs, fastThinkMaxLlmMs } from '../../workflows/lib/activity-options.js';
import type { AgentStatus, agentLoopWorkflow } from '../../workflows/agent-loop.js';
import { fakeThought, unlimitedLifeforce } from '../helpers/scripted.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

type Activities = ReturnType<typeof createActivities>;

const suite = timeSkippingSuite();

interface Attempt {
  tick: number;
  local: boolean;
}

/** Fakes whose think says how fast its model was; `fail` throws from chosen attempts. */
function fakes(o: { llmMs: number; elapsedMs: number; fail?: (a: Attempt) => boolean }) {
  const attempts: Attempt[] = [];
  const failures: string[] = [];
  const activities: Partial<Activities> = {
    async loopStarted() {
      return { interruptedTaskLoops: [], config: {} };
    },
    ...unlimitedLifeforce,
    async loopStopped() {},
    async logProcess(input) {
      if (input.kind === 'tick_failure') failures.push(input.message);
    },
    async think(input: ThinkInput): Promise<ThinkResult> {
      const attempt = { tick: input.tick, local: Context.current().info.isLocal };
      attempts.push(attempt);
      if (o.fail?.(attempt)) throw ApplicationFailure.create({ type: 'Unavailable', message: 'database away for a moment' });
      return fakeThought(input, { llmMs: o.llmMs, elapsedMs: o.elapsedMs });
    },
  };
  return { attempts, failures, activities };
}

let seq = 0;
async function run(f: ReturnType<typeof fakes>, input: Omit<Parameters<typeof agentLoopWorkflow>[0], 'agentId'>): Promise<{ status: AgentStatus; localMarkers: number }> {
  const taskQueue = `fast-${++seq}`;
  const worker = await Worker.create({ connection: suite.env.nativeConnection, taskQueue, workflowBundle: suite.bundle, activities: f.activities });
  return worker.runUntil(async () => {
    const h = await suite.env.client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', { taskQueue, workflowId: `agent/fast-${seq}`, args: [{ agentId: `fast-${seq}`, reflexes: false, ...input }] });
    await h.result();
    const status = await h.query<AgentStatus>('status');
    const events = (await h.fetchHistory()).events ?? [];
    return { status, localMarkers: events.filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity').length };
  });
}

const pattern = (attempts: Attempt[]) => attempts.map((a) => (a.local ? 'L' : 'A')).join('');

describe('the fast think', () => {
  it('an unpaced loop on a fast model thinks locally, and hands its task back with an ordinary think once the hold is spent', async () => {
    const elapsedMs = 100;
    const f = fakes({ llmMs: 5, elapsedMs });
    const { status, localMarkers } = await run(f, { maxTicks: 9, settings: { delayMs: 0 } });
    // The first think tells the model's speed; then local thinks while the held time stays under the hold.
    const perHold = Math.ceil(fastThinkHoldMs / elapsedMs);
    const cycle = `A${'L'.repeat(perHold)}`;
    expect(pattern(f.attempts)).toBe(cycle.repeat(3).slice(0, 9));
    expect(localMarkers).toBe(f.attempts.filter((a) => a.local).length);
    expect(status.tick).toBe(9);
    expect(f.failures).toEqual([]);
  });

  it('a paced loop thinks every tick after the first locally: each pace ends the workflow task', async () => {
    const f = fakes({ llmMs: 5, elapsedMs: fastThinkHoldMs * 2 });
    await run(f, { maxTicks: 5, settings: { delayMs: 1000 } });
    expect(pattern(f.attempts)).toBe('ALLLL');
  });

  it('a slow model is never thought locally', async () => {
    const f = fakes({ llmMs: fastThinkMaxLlmMs + 1, elapsedMs: 10 });
    const { localMarkers } = await run(f, { maxTicks: 4, settings: { delayMs: 0 } });
    expect(pattern(f.attempts)).toBe('AAAA');
    expect(localMarkers).toBe(0);
  });

  it('a local think that fails hands the same tick to the ordinary activity: no tick lost, none failed', async () => {
    const f = fakes({ llmMs: 5, elapsedMs: 1, fail: (a) => a.local && a.tick === 3 });
    const { status } = await run(f, { maxTicks: 5, settings: { delayMs: 1000 } });
    expect(f.attempts).toEqual([
      { tick: 1, local: false },
      { tick: 2, local: true },
      { tick: 3, local: true },
      { tick: 3, local: false },
      { tick: 4, local: true },
      { tick: 5, local: true },
    ]);
    expect(status.tick).toBe(5);
    expect(f.failures).toEqual([]);
  });
});
