/**
 * agentLoopWorkflow's Isolated mode on the time-skipping server with typed activity fakes: the
 * think activity reports the peers it found each tick; the loop enters the mode after
 * `isolationTicks` ticks with none reachable, tags what it applies meanwhile, leaves when a peer
 * is reachable again, keeps it across continue-as-new, and Core Outage takes precedence. (With
 * Postgres, real activities and two real agent loops: test/integration/peers.test.ts.)
 */
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import type { createActivities } from '../../activities/index.js';
import type { ThinkInput, ThinkResult } from '../../activities/tick/think.js';
import type { PeerObservation } from '../../core/society/isolation.js';
import type { AgentStatus, agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import { startLoop, withWorker } from '../helpers/harness.js';
import { autoPassReflexes, fakeThought, unlimitedLifeforce } from '../helpers/scripted.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

type Activities = ReturnType<typeof createActivities>;

const suite = timeSkippingSuite();

interface Seen {
  thinks: number[];
  applied: Array<{ tick: number; tags: string[] | undefined }>;
  log: Array<{ kind: string; status: string; message: string; mode: string | undefined; tick: number }>;
  statuses: AgentStatus[];
}

const unreachable = (known = 2, isolationTicks = 3): PeerObservation => ({
  known,
  reachable: 0,
  reachableIds: [],
  isolationTicks,
});
const reachable = (ids: string[] = ['peer-b'], isolationTicks = 3): PeerObservation => ({
  known: 2,
  reachable: ids.length,
  reachableIds: ids,
  isolationTicks,
});

/** Fakes whose think reports `peers(n)` on its n-th call (or throws what it returns). */
function fakes(peers: (n: number) => PeerObservation | Error | undefined): {
  seen: Seen;
  activities: Partial<Activities>;
} {
  const seen: Seen = { thinks: [], applied: [], log: [], statuses: [] };
  let probes = 0;
  const activities: Partial<Activities> = {
    ...unlimitedLifeforce,
    async loopStarted() {
      return { interruptedTaskLoops: [], config: {} };
    },
    async loopStopped() {},
    async think(input: ThinkInput): Promise<ThinkResult> {
      seen.thinks.push(input.tick);
      const p = peers(seen.thinks.length);
      if (p instanceof Error) throw p;
      return fakeThought(input, {
        // One command each tick, so that every tick's decisions reach applyCommands.
        commands: [{ cmdId: 'c1', type: 'diary.add', args: { title: `t${input.tick}`, content: 'x' } }],
        ...(p ? { peers: p } : {}),
      });
    },
    async applyCommands(input) {
      seen.applied.push({ tick: input.tick, tags: input.tags });
      return input.commands.map((c) => ({
        cmdId: c.cmdId,
        type: c.type,
        status: 'applied' as const,
        message: 'ok',
        duplicate: false,
        effects: [],
      }));
    },
    async logProcess(input) {
      seen.log.push({
        kind: input.kind,
        status: input.status,
        message: input.message,
        mode: input.mode,
        tick: input.tick,
      });
    },
    async probeLlm() {
      probes++;
      return { ok: true, model: 'scripted:fake' };
    },
    tickReflexes: autoPassReflexes,
  };
  return { seen, activities };
}

let seq = 0;
async function run(
  f: ReturnType<typeof fakes>,
  input: Omit<Parameters<typeof agentLoopWorkflow>[0], 'agentId'>,
  watch?: (s: AgentStatus) => void,
) {
  const taskQueue = `isolation-${++seq}`;
  return withWorker(suite.env, { taskQueue, workflowBundle: suite.bundle, activities: f.activities }, async () => {
    const h = await startLoop(suite.env.client, taskQueue, {
      agentId: `isolated-${seq}`,
      settings: { delayMs: 1000 },
      ...input,
    });
    const result = await h.result();
    const status = await h.query<AgentStatus>('status');
    watch?.(status);
    return { result, status, handle: h };
  });
}

describe('Isolated mode (time-skipping, fakes)', () => {
  it('enters after isolationTicks ticks with no peer reachable, tags what it applies meanwhile, and leaves when a peer answers', async () => {
    // Ticks 1..5: both known peers unreachable; from tick 6 one is back.
    const f = fakes((n) => (n <= 5 ? unreachable() : reachable()));
    const { status } = await run(f, { maxTicks: 7 });
    expect(f.seen.applied.map((a) => [a.tick, a.tags ?? []])).toEqual([
      [1, []],
      [2, []],
      [3, ['emergency_consensus']], // the third tick in a row without a peer decides alone
      [4, ['emergency_consensus']],
      [5, ['emergency_consensus']],
      [6, []], // a peer is back: normal again, before this tick's commands
      [7, []],
    ]);
    expect(f.seen.log.filter((l) => l.kind === 'isolation').map((l) => [l.tick, l.status, l.mode])).toEqual([
      [3, 'warning', 'isolated'],
      [6, 'close', 'normal'],
    ]);
    expect(f.seen.log[0]!.message).toBe(
      'isolated: none of 2 known peer(s) reachable for 3 tick(s); going on alone, applied commands tagged emergency_consensus',
    );
    expect(f.seen.log[1]!.message).toBe(
      'no longer isolated: 1 peer(s) reachable again (peer-b); isolated since tick 3',
    );
    expect(status.operatingMode).toBe('normal');
    expect(status.isolation).toEqual({
      unreachableTicks: 0,
      since: null,
      sinceTick: null,
      known: 2,
      reachable: ['peer-b'],
    });
  });

  it('the status query shows the mode while isolated; an agent without peers, or with peers in reach, is never isolated', async () => {
    const f = fakes(() => unreachable(3, 2));
    const { status } = await run(f, { maxTicks: 4 });
    expect(status.operatingMode).toBe('isolated');
    expect(status.isolation).toMatchObject({ unreachableTicks: 4, sinceTick: 2, known: 3, reachable: [] });
    expect(status.isolation.since).not.toBeNull();

    for (const peers of [() => unreachable(0), () => reachable(), () => undefined]) {
      const g = fakes(peers);
      const r = await run(g, { maxTicks: 4 });
      expect(r.status.operatingMode).toBe('normal');
      expect(g.seen.applied.every((a) => a.tags === undefined)).toBe(true);
      expect(g.seen.log.filter((l) => l.kind === 'isolation')).toEqual([]);
    }
  });

  it('keeps the mode and its streak across continue-as-new', async () => {
    const f = fakes((n) => (n <= 5 ? unreachable(1, 2) : reachable()));
    const { status } = await run(f, { maxTicks: 6, ticksPerRun: 2 });
    expect(status.counters.continuedAsNew).toBeGreaterThanOrEqual(2);
    expect(f.seen.applied.map((a) => a.tags?.length ?? 0)).toEqual([0, 1, 1, 1, 1, 0]);
    expect(f.seen.log.filter((l) => l.kind === 'isolation').map((l) => [l.tick, l.status])).toEqual([
      [2, 'warning'],
      [6, 'close'],
    ]);
  });

  it('Core Outage takes precedence: an isolated agent whose LLM fails is in outage, and isolated again after it', async () => {
    const down = ApplicationFailure.create({
      type: 'LlmUnavailable',
      nonRetryable: true,
      message: 'all 1 candidates failed',
    });
    // Think calls: 1, 2 unreachable (isolated at tick 2); 3 fails (outage); 4 = tick 3 again, still alone; 5 = tick 4, peer back.
    const f = fakes((n) => (n === 3 ? down : n <= 4 ? unreachable(1, 2) : reachable()));
    const { status } = await run(f, { maxTicks: 4 });
    expect(f.seen.thinks).toEqual([1, 2, 3, 3, 4]);
    expect(f.seen.log.map((l) => [l.kind, l.status, l.mode])).toEqual([
      ['isolation', 'warning', 'isolated'],
      ['core_outage', 'offline', 'core_outage'],
      ['core_outage', 'close', 'isolated'], // back to isolated, not to normal
      ['isolation', 'close', 'normal'],
    ]);
    expect(f.seen.applied.map((a) => [a.tick, a.tags?.length ?? 0])).toEqual([
      [1, 0],
      [2, 1],
      [3, 1],
      [4, 0],
    ]);
    expect(status.operatingMode).toBe('normal');
    expect(status.counters.outages).toBe(1);
  });
});
