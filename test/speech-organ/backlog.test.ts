/**
 * A backlog of speech jobs while no speech worker polls: each job waits on the CPU queue (its
 * status says no speech worker polls), at the task priority of its agent's lifeforce. When one
 * worker comes, it takes them by priority, then by arrival — not in the order they arrived.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WorkflowHandle } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import { join } from 'node:path';
import { defaultPrices, speechCost } from '../../core/lifeforce.js';
import { priorityKeyFor } from '../../core/priority.js';
import type { SpeechStatus, speechWorkflow } from '../../workflows/speech.js';
import { waitFor } from '../helpers/worker-process.js';
import {
  agentWithLifeforce,
  fakeEngine,
  speechLedger,
  speechTestStack,
  writeWav,
  type SpeechTestStack,
} from './helpers.js';

let s: SpeechTestStack;
let engine: Worker | undefined;

beforeAll(async () => {
  s = await speechTestStack('speech-backlog');
});

afterAll(async () => {
  if (engine?.getState() === 'RUNNING') engine.shutdown();
  await s?.stop();
});

/** Listed in the order they are started: worst lifeforce first, so arrival order alone would run them backwards. */
const agents: Array<{ id: string; lifeforce: { capacity: number; available: number } | null }> = [
  { id: 'spent', lifeforce: { capacity: 100, available: 3 } },
  { id: 'third', lifeforce: { capacity: 100, available: 30 } },
  { id: 'unlimited-a', lifeforce: null },
  { id: 'half', lifeforce: { capacity: 100, available: 60 } },
  { id: 'unlimited-b', lifeforce: null },
  { id: 'full', lifeforce: { capacity: 100, available: 100 } },
];

/** The speech-cpu activity backlog per priority key, as the server reports it. */
async function backlogByKey(): Promise<Record<string, number>> {
  const res = await s.temporal.client.workflowService.describeTaskQueue({
    namespace: 'default',
    taskQueue: { name: 'speech-cpu', kind: 1 },
    taskQueueType: 2,
    reportStats: true,
  });
  return Object.fromEntries(
    Object.entries(res.statsByPriorityKey ?? {}).map(([key, stats]) => [
      key,
      Number(stats.approximateBacklogCount ?? 0),
    ]),
  );
}

describe('a speech backlog is taken by lifeforce priority, then arrival', () => {
  it('parks the jobs while no worker polls, then one worker takes them in priority order', async () => {
    const audioPath = writeWav(join(s.dataDir, 'in', 'two-seconds.wav'), 2);
    const handles: Array<WorkflowHandle<typeof speechWorkflow>> = [];
    for (const a of agents) {
      await agentWithLifeforce(s.db, a.id, a.lifeforce);
      handles.push(
        await s.temporal.client.workflow.start<typeof speechWorkflow>('speechWorkflow', {
          taskQueue: 'mindloop',
          workflowId: `speech/${a.id}/backlog`,
          // Parked long enough that no job asks for a route again while the backlog builds.
          args: [{ kind: 'transcribe', agentId: a.id, audioPath, timing: { parkedMs: 10 * 60_000 } }],
        }),
      );
      // Arrival order is start order: each job is on the queue before the next starts.
      await waitFor(`${a.id}'s job on the queue`, 30_000, async () =>
        (await handles.at(-1)!.describe()).raw.pendingActivities?.length === 1 ? true : undefined,
      );
    }
    // The hold is taken before the route: what each budget has left then sets its key.
    const keyOf = new Map(
      agents.map((a) => [
        a.id,
        priorityKeyFor(
          a.lifeforce
            ? { available: a.lifeforce.available - speechCost(defaultPrices, 2), capacity: a.lifeforce.capacity }
            : { available: null, capacity: null },
        ),
      ]),
    );
    expect(new Set(keyOf.values()).size).toBeGreaterThanOrEqual(4);

    for (const h of handles) {
      const st = await h.query<SpeechStatus>('status');
      expect(st.phase).toBe('waiting');
      expect(st.route).toMatchObject({ state: 'none', queue: 'speech-cpu' });
      expect(st.waiting!.reason).toMatch(/no speech worker polls speech-gpu or speech-cpu/);
      expect(st.lifeforce).toMatchObject({
        seconds: 2,
        held: speechCost(defaultPrices, 2),
        charged: null,
        priorityKey: keyOf.get(st.agentId),
      });
    }
    const expected: Record<string, number> = {};
    for (const key of keyOf.values()) expected[key] = (expected[key] ?? 0) + 1;
    await waitFor(
      'the backlog by priority key',
      30_000,
      async () => {
        const backlog = await backlogByKey();
        return JSON.stringify(backlog) === JSON.stringify(expected) ? backlog : undefined;
      },
      250,
    );

    const ran: string[] = [];
    engine = await fakeEngine({
      connection: s.temporal.connection,
      queue: 'speech-cpu',
      backend: 'fake-cpu',
      ran,
      oneAtATime: true,
      transcribe: () => ({ duration_s: 2 }),
    });
    const results = await engine.runUntil(Promise.all(handles.map((h) => h.result())));

    const order = ran.map((id) => id.split('/')[1]!);
    const byPriorityThenArrival = [...agents.map((a) => a.id)].sort(
      (a, b) =>
        keyOf.get(a)! - keyOf.get(b)! || agents.findIndex((x) => x.id === a) - agents.findIndex((x) => x.id === b),
    );
    expect(order).toEqual(byPriorityThenArrival);
    expect(order.indexOf('unlimited-a')).toBeLessThan(order.indexOf('unlimited-b'));

    for (const r of results)
      expect(r).toMatchObject({
        kind: 'transcribe',
        queue: 'speech-cpu',
        backend: 'fake-cpu',
        delivered: 'stored',
        charged: speechCost(defaultPrices, 2),
      });
    for (const a of agents) {
      const ledger = await speechLedger(s.db, a.id);
      expect(ledger.map((e) => [e.kind, e.amount])).toEqual([
        ['reserve', speechCost(defaultPrices, 2)],
        ['settle', speechCost(defaultPrices, 2)],
      ]);
    }
  }, 120_000);

  it('a job that waits long continues as new, keeping its one hold, and completes when a worker comes', async () => {
    await agentWithLifeforce(s.db, 'patient', { capacity: 100, available: 100 });
    const audioPath = writeWav(join(s.dataDir, 'in', 'patient.wav'), 1);
    const h = await s.temporal.client.workflow.start<typeof speechWorkflow>('speechWorkflow', {
      taskQueue: 'mindloop',
      workflowId: 'speech/patient/long-wait',
      // No worker polls now: every round gives up after a second; two rounds a run.
      args: [
        {
          kind: 'transcribe',
          agentId: 'patient',
          audioPath,
          timing: { queuedMs: 1000, parkedMs: 1000, roundsPerRun: 2 },
        },
      ],
    });
    const firstRun = h.firstExecutionRunId;
    const later = await waitFor(
      'a run after continue-as-new',
      60_000,
      async () => {
        const d = await s.temporal.client.workflow.getHandle(h.workflowId).describe();
        return d.runId !== firstRun ? d : undefined;
      },
      250,
    );
    expect(later.status.name).toBe('RUNNING');
    const st = await s.temporal.client.workflow.getHandle(h.workflowId).query<SpeechStatus>('status');
    expect(st.waiting!.attempts).toBeGreaterThanOrEqual(2);
    expect(st.waiting!.reason).toMatch(/no speech worker took the job from speech-cpu within 1 s/);
    expect(st.lifeforce).toMatchObject({ seconds: 1, held: speechCost(defaultPrices, 1) });

    const worker = await fakeEngine({ connection: s.temporal.connection, queue: 'speech-cpu', backend: 'fake-cpu' });
    const r = await worker.runUntil(s.temporal.client.workflow.getHandle<typeof speechWorkflow>(h.workflowId).result());
    expect(r).toMatchObject({ kind: 'transcribe', text: 'heard patient.wav', queue: 'speech-cpu' });
    const ledger = await speechLedger(s.db, 'patient');
    expect(ledger.map((e) => [e.kind, e.amount])).toEqual([
      ['reserve', speechCost(defaultPrices, 1)],
      ['settle', speechCost(defaultPrices, 1)],
    ]);
  }, 120_000);
});
