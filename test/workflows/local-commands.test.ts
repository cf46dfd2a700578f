/**
 * The tick's commands as a local activity (time-skipping server, fakes): after a local think,
 * the commands are applied in the same workflow task (no applyCommands activity task); after a
 * think through the activity, through the activity; a local run that fails is run again through
 * the activity in the same tick, its outcome kept. Every history replays.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import type { ApplyCommandsInput } from '../../activities/tick/apply-commands.js';
import type { CommandOutcome } from '../../core/loop-types.js';
import type { AgentStatus, agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import { runReplayedLoop } from '../helpers/harness.js';
import { autoPassReflexes, fakeThought } from '../helpers/scripted.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

const suite = timeSkippingSuite();

interface Run {
  /** Per applyCommands call, in order: its tick and whether it ran as a local activity. */
  calls: Array<{ tick: number; local: boolean }>;
  status: AgentStatus;
  /** applyCommands activity tasks in the history. */
  scheduled: number;
}

let seq = 0;
async function run(
  input: Omit<Parameters<typeof agentLoopWorkflow>[0], 'agentId'>,
  apply: (i: ApplyCommandsInput, n: number) => void,
  modelMs = 5,
): Promise<Run> {
  const calls: Run['calls'] = [];
  const { status, history } = await runReplayedLoop(
    suite,
    { agentId: `local-commands-${++seq}`, ...input },
    {
      async think(i) {
        return fakeThought(i, { modelMs, commands: [{ cmdId: `c${i.tick}`, type: 'diary.add', args: {} }] });
      },
      async tickReflexes(i) {
        return autoPassReflexes(i);
      },
      async applyCommands(i): Promise<CommandOutcome[]> {
        calls.push({ tick: i.tick, local: Context.current().info.isLocal });
        apply(i, calls.length);
        return i.commands.map((c) => ({
          cmdId: c.cmdId,
          type: c.type,
          status: 'applied',
          message: 'ok',
          duplicate: false,
          effects: [],
        }));
      },
    },
  );
  const scheduled = (history.events ?? []).filter(
    (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'applyCommands',
  ).length;
  return { calls, status, scheduled };
}

const kinds = (r: Run) => r.calls.map((c) => (c.local ? 'local' : 'activity'));

describe("the tick's commands as a local activity", () => {
  it('a paced loop on a fast model: commands applied in the workflow task after each local think', async () => {
    const r = await run({ maxTicks: 12, settings: { delayMs: 1000 } }, () => {});
    expect(r.calls.map((c) => c.tick)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    // Tick 1 thinks through the activity (no answer time yet), and so do its commands; a paced
    // loop on a fast model thinks locally at every tick after it.
    expect(kinds(r)).toEqual(['activity', ...Array<string>(11).fill('local')]);
    expect(r.scheduled).toBe(1);
    expect(r.status.counters.ticks).toBe(12);
    expect(r.status.counters.tickFailures).toBe(0);
  });

  it('a model slower than the local think allows keeps the activity for the commands too', async () => {
    const r = await run({ maxTicks: 3, settings: { delayMs: 1000 } }, () => {}, 5_000);
    expect(kinds(r)).toEqual(['activity', 'activity', 'activity']);
    expect(r.scheduled).toBe(3);
  });

  it('a local run that fails is run again through the activity in the same tick; the tick goes on', async () => {
    const r = await run({ maxTicks: 4, settings: { delayMs: 1000 } }, (_, n) => {
      if (n === 3) throw ApplicationFailure.create({ nonRetryable: true, message: 'a local commands failure' });
    });
    expect(r.calls).toEqual([
      { tick: 1, local: false },
      { tick: 2, local: true },
      { tick: 3, local: true },
      { tick: 3, local: false },
      { tick: 4, local: true },
    ]);
    expect(r.status.counters.ticks).toBe(4);
    expect(r.status.counters.tickFailures).toBe(0);
  });
});
