/**
 * The reflexes as a local activity (time-skipping server, fakes): after a local think, the
 * tick's reflexes run in the same workflow task when their last run through the activity took
 * at most `localReflexMaxMs`; at most `localThinksInARow` in a row, then once through the
 * activity; slow ones always go through the activity; a local run that fails is run again
 * through the activity in the same tick, its verdict kept. Every history replays.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import type { TickReflexesInput } from '../../activities/reflexes/types.js';
import {
  localReflexMaxMs,
  localThinksInARow,
  type AgentStatus,
  type agentLoopWorkflow,
} from '../../workflows/agent-loop/index.js';
import { runReplayedLoop } from '../helpers/harness.js';
import { autoPassReflexes, fakeThought } from '../helpers/scripted.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

const suite = timeSkippingSuite();

interface Run {
  /** Per reflexes call, in order: its tick and whether it ran as a local activity. */
  reflexes: Array<{ tick: number; local: boolean }>;
  status: AgentStatus;
  /** tickReflexes activity tasks in the history. */
  scheduled: number;
}

let seq = 0;
async function run(
  input: Omit<Parameters<typeof agentLoopWorkflow>[0], 'agentId'>,
  reflexes: (i: TickReflexesInput, n: number) => Promise<void>,
): Promise<Run> {
  const calls: Run['reflexes'] = [];
  const { status, history } = await runReplayedLoop(
    suite,
    { agentId: `local-reflexes-${++seq}`, ...input },
    {
      async think(i) {
        return fakeThought(i, { modelMs: 5 });
      },
      async tickReflexes(i) {
        calls.push({ tick: i.tick, local: Context.current().info.isLocal });
        await reflexes(i, calls.length);
        return autoPassReflexes(i);
      },
    },
  );
  const scheduled = (history.events ?? []).filter(
    (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'tickReflexes',
  ).length;
  return { reflexes: calls, status, scheduled };
}

const kinds = (r: Run) => r.reflexes.map((c) => (c.local ? 'local' : 'activity'));

describe('the reflexes as a local activity', () => {
  it('a paced loop on fast models: local reflexes after a local think, the activity once every localThinksInARow + 1', async () => {
    const r = await run({ maxTicks: 12, settings: { delayMs: 1000 } }, async () => {});
    expect(r.reflexes.map((c) => c.tick)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    // Tick 1 thinks through the activity (no answer time yet), so its reflexes do too.
    const expected = ['activity', ...Array<string>(localThinksInARow).fill('local'), 'activity', 'local', 'local'];
    expect(kinds(r)).toEqual(expected);
    expect(r.scheduled).toBe(2);
    expect(r.status.counters.ticks).toBe(12);
  });

  it('reflexes slower than localReflexMaxMs keep the activity', async () => {
    const r = await run({ maxTicks: 4, settings: { delayMs: 1000 } }, async () => {
      await new Promise((resolve) => setTimeout(resolve, localReflexMaxMs + 100));
    });
    expect(kinds(r)).toEqual(['activity', 'activity', 'activity', 'activity']);
    expect(r.scheduled).toBe(4);
  });

  it('a local run that fails is run again through the activity in the same tick; the tick goes on', async () => {
    const r = await run({ maxTicks: 5, settings: { delayMs: 1000 } }, async (i, n) => {
      if (n === 3) throw ApplicationFailure.create({ nonRetryable: true, message: 'a local reflexes failure' });
    });
    // Tick 3's local run failed; its second run, through the activity, gave the verdict.
    expect(r.reflexes).toEqual([
      { tick: 1, local: false },
      { tick: 2, local: true },
      { tick: 3, local: true },
      { tick: 3, local: false },
      { tick: 4, local: true },
      { tick: 5, local: true },
    ]);
    expect(r.status.counters.ticks).toBe(5);
    expect(r.status.counters.tickFailures).toBe(0);
    expect(r.status.lastVerdict?.validationMode).toBe('auto_pass');
  });
});
