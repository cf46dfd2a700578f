/**
 * spawnWorkflow on the time-skipping server, its activities typed fakes and the agent loop a
 * stand-in (test/fixtures/workflows/spawn.ts): a child is born and its loop started; a refusal
 * completes the workflow as `refused`; a budget the parent cannot give and a failed copy undo
 * the child; an outage of the database is waited out; a cancellation mid-copy rolls back; a
 * resumed spawn finds its child's loop running; bad input fails at once naming the fields.
 * (The activities on Postgres: test/activities/spawn.test.ts; a real worker killed mid-copy:
 * test/integration/spawn.test.ts.)
 */
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import type { createSpawnActivities, SpawnBegun, SpawnFunded } from '../../activities/society/spawn.js';
import { workflowIds } from '../../core/ids.js';
import type { SpawnInput, SpawnResult } from '../../core/society/spawn.js';
import type { agentLoopWorkflow } from '../fixtures/workflows/spawn.js';
import { loopInputQuery, wakesQuery } from '../fixtures/workflows/spawn.js';
import type { SpawnState, spawnWorkflow } from '../../workflows/spawn.js';
import { withWorker } from '../helpers/harness.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

type Activities = ReturnType<typeof createSpawnActivities>;
type FinishInput = Parameters<Activities['spawnFinish']>[0];

const suite = timeSkippingSuite('../fixtures/workflows/spawn.ts');

interface Fake {
  calls: string[];
  finished: FinishInput[];
  activities: Activities;
}

const unavailable = () =>
  ApplicationFailure.create({
    type: 'Unavailable',
    message: 'connect ECONNREFUSED 127.0.0.1:5432',
    nonRetryable: false,
  });

function fakes(o: { begun?: SpawnBegun; funded?: SpawnFunded; copy?: () => Promise<void> } = {}): Fake {
  const f: Fake = { calls: [], finished: [], activities: {} as Activities };
  f.activities = {
    async spawnBegin() {
      f.calls.push('begin');
      return o.begun ?? { status: 'copying', generation: 1, resumed: false };
    },
    async spawnCopy() {
      f.calls.push('copy');
      await o.copy?.();
      return { copied: { diary_entries: 3, ethics_policies: 1 }, rows: 4, spawnMs: 12 };
    },
    async spawnFund() {
      f.calls.push('fund');
      return o.funded ?? { ok: true, budget: 100 };
    },
    async spawnFinish(input) {
      f.calls.push(`finish:${input.outcome}`);
      f.finished.push(input);
      return { status: input.outcome };
    },
  };
  return f;
}

let seq = 0;
/** Run the spawn on a fresh queue (with the parent's stand-in loop running) and hand its handle to `during`. */
async function run<T>(
  f: Fake,
  input: Partial<SpawnInput>,
  during: (h: Awaited<ReturnType<typeof startSpawn>>, parent: string) => Promise<T>,
  o: { childRunning?: boolean } = {},
): Promise<T> {
  const taskQueue = `spawn-${++seq}`;
  const parentId = input.parentId ?? `parent-${seq}`;
  const name = `child-${seq}`;
  return withWorker(suite.env, { taskQueue, workflowBundle: suite.bundle, activities: f.activities }, async () => {
    await suite.env.client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
      taskQueue,
      workflowId: workflowIds.agent(parentId),
      args: [{ agentId: parentId }],
    });
    // The child's loop from an earlier run of the spawn.
    if (o.childRunning)
      await suite.env.client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
        taskQueue,
        workflowId: workflowIds.agent(name),
        args: [{ agentId: name, first: true }],
      });
    const h = await startSpawn(taskQueue, { parentId, type: 'trained', name, ...input });
    try {
      return await during(h, parentId);
    } finally {
      for (const id of [parentId, h.childId])
        await suite.env.client.workflow
          .getHandle(workflowIds.agent(id))
          .terminate('test over')
          .catch(() => undefined);
    }
  });
}

async function startSpawn(taskQueue: string, input: SpawnInput & { parentId: string }) {
  const h = await suite.env.client.workflow.start<typeof spawnWorkflow>('spawnWorkflow', {
    taskQueue,
    workflowId: workflowIds.spawn(input.parentId, String(input.name)),
    args: [input],
  });
  return Object.assign(h, { childId: String(input.name) });
}

describe('spawnWorkflow', () => {
  it('admits, copies, funds, starts the child’s own loop, tells and wakes the parent', async () => {
    const f = fakes();
    await run(
      f,
      { goals: ['map the garden'], budget: 100, requestedBy: { workflowId: 'agent/x', tick: 3, cmdId: 's' } },
      async (h, parentId) => {
        const r = await h.result();
        expect(r).toEqual<SpawnResult>({
          parentId,
          childId: h.childId,
          type: 'trained',
          status: 'running',
          generation: 1,
          copied: { diary_entries: 3, ethics_policies: 1 },
          rows: 4,
          spawnMs: 12,
          budget: 100,
        });
        expect(f.calls).toEqual(['begin', 'copy', 'fund', 'finish:running']);
        expect(f.finished[0]).toMatchObject({
          parentId,
          childId: h.childId,
          workflowId: h.workflowId,
          admitted: true,
          outcome: 'running',
        });
        expect(f.finished[0]!.note).toMatch(
          /trained descendant child-\d+ \(generation 1\) is born .* 4 rows inherited, 100 LF carved from yours/,
        );
        const child = suite.env.client.workflow.getHandle(workflowIds.agent(h.childId));
        expect(await child.query(loopInputQuery)).toEqual({ agentId: h.childId, name: h.childId });
        // Started as the spawn's child, abandoned to outlive it (that it runs on: test/integration/spawn.test.ts).
        const described = await child.describe();
        expect(described.type).toBe('agentLoopWorkflow');
        expect(described.parentExecution?.workflowId).toBe(h.workflowId);
        const started = (await h.fetchHistory()).events?.find(
          (e) => e.startChildWorkflowExecutionInitiatedEventAttributes,
        )?.startChildWorkflowExecutionInitiatedEventAttributes;
        expect(started?.parentClosePolicy).toBe(2); // PARENT_CLOSE_POLICY_ABANDON
        expect(await suite.env.client.workflow.getHandle(workflowIds.agent(parentId)).query(wakesQuery)).toBe(1);
        expect((await h.query<SpawnState>('spawnState')).phase).toBe('done');
      },
    );
  });

  it('a refusal completes the workflow as refused, copies nothing, and tells the parent why', async () => {
    const f = fakes({
      begun: {
        status: 'refused',
        reason: 'limit: p has 5 descendants and may have at most 5 (config max_descendants)',
        generation: 1,
      },
    });
    await run(f, {}, async (h) => {
      const r = await h.result();
      expect(r).toMatchObject({ status: 'refused', reason: expect.stringMatching(/^limit: /), generation: 1 });
      expect(f.calls).toEqual(['begin', 'finish:refused']);
      expect(f.finished[0]!.note).toMatch(/was refused: limit: p has 5 descendants/);
      // The admission recorded the refusal: the end only tells the parent.
      expect(f.finished[0]!.admitted).toBe(false);
      expect((await h.describe()).status.name).toBe('COMPLETED');
      await expect(suite.env.client.workflow.getHandle(workflowIds.agent(h.childId)).describe()).rejects.toThrow();
    });
  });

  it('a budget the parent cannot give undoes the copied child: refused, no loop', async () => {
    const f = fakes({ funded: { ok: false, reason: 'lifeforce: p cannot give 500 LF (exhausted; 20 available)' } });
    await run(f, { budget: 500 }, async (h) => {
      expect(await h.result()).toMatchObject({
        status: 'refused',
        reason: expect.stringMatching(/^lifeforce: /),
        rows: 4,
      });
      expect(f.calls).toEqual(['begin', 'copy', 'fund', 'finish:refused']);
      await expect(suite.env.client.workflow.getHandle(workflowIds.agent(h.childId)).describe()).rejects.toThrow();
    });
  });

  it('a copy that fails for a reason of its own is rolled back with that reason', async () => {
    const f = fakes({
      copy: async () => {
        throw ApplicationFailure.create({
          type: 'InvalidRequest',
          message: 'duplicate key value violates unique constraint "agents_pkey"',
          nonRetryable: true,
        });
      },
    });
    await run(f, {}, async (h) => {
      expect(await h.result()).toMatchObject({ status: 'rolled_back', reason: expect.stringContaining('agents_pkey') });
      expect(f.calls).toEqual(['begin', 'copy', 'finish:rolled_back']);
      expect(f.finished[0]!.note).toMatch(/was rolled back: duplicate key/);
    });
  });

  it('waits out a database outage during the copy, showing it, then completes', async () => {
    let failures = 0;
    const f = fakes({
      copy: async () => {
        if (failures++ < 5) throw unavailable();
      },
    });
    await run(f, {}, async (h) => {
      let seenDegraded: SpawnState['degraded'] = null;
      for (let i = 0; i < 200 && !seenDegraded; i++) {
        seenDegraded = (await h.query<SpawnState>('spawnState')).degraded;
        if ((await h.describe()).status.name !== 'RUNNING') break;
      }
      expect(await h.result()).toMatchObject({ status: 'running' });
      expect(f.calls.filter((c) => c === 'copy')).toHaveLength(6);
      expect(seenDegraded).toMatchObject({ step: 'spawnCopy', lastError: expect.stringContaining('ECONNREFUSED') });
      expect((await h.query<SpawnState>('spawnState')).degraded).toBeNull();
    });
  });

  it('cancelled mid-copy: the unborn child is rolled back and the workflow ends cancelled', async () => {
    let release!: () => void;
    let copying!: () => void;
    const inCopy = new Promise<void>((r) => (copying = r));
    const f = fakes({
      copy: () => {
        copying();
        return new Promise<void>((r) => (release = r));
      },
    });
    await run(f, {}, async (h) => {
      await inCopy;
      await h.cancel();
      const err = await h.result().then(
        () => undefined,
        (e: unknown) => e,
      );
      release();
      expect(err).toBeInstanceOf(WorkflowFailedError);
      expect((await h.describe()).status.name).toBe('CANCELLED');
      expect(f.calls).toEqual(['begin', 'copy', 'finish:rolled_back']);
      expect(f.finished[0]).toMatchObject({ outcome: 'rolled_back', reason: 'the spawn was cancelled' });
      await expect(suite.env.client.workflow.getHandle(workflowIds.agent(h.childId)).describe()).rejects.toThrow();
    });
  });

  it('a spawn resumed after its run ended with the child’s loop started finds that loop running', async () => {
    const f = fakes({ begun: { status: 'ready', generation: 2, resumed: true } });
    await run(
      f,
      {},
      async (h) => {
        expect(await h.result()).toMatchObject({ status: 'running', generation: 2 });
        expect(f.calls).toEqual(['begin', 'copy', 'fund', 'finish:running']);
        expect(await suite.env.client.workflow.getHandle(workflowIds.agent(h.childId)).query(loopInputQuery)).toEqual({
          agentId: h.childId,
          first: true,
        });
      },
      { childRunning: true },
    );
  });

  it('bad input fails at once, naming every bad field', async () => {
    const f = fakes();
    const taskQueue = `spawn-bad-${++seq}`;
    await withWorker(suite.env, { taskQueue, workflowBundle: suite.bundle, activities: f.activities }, async () => {
      const h = await suite.env.client.workflow.start<typeof spawnWorkflow>('spawnWorkflow', {
        taskQueue,
        workflowId: 'spawn-bad',
        args: [{ parentId: 'p', type: 'twin', name: 'a b', budget: -5 } as unknown as SpawnInput],
      });
      const err = await h.result().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(WorkflowFailedError);
      const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
      expect(cause.type).toBe('InvalidInput');
      expect(cause.message).toMatch(
        /^spawnWorkflow: invalid input — type: .*; name: a name that becomes the child's id.*; budget: a positive amount of LF/,
      );
    });
    expect(f.calls).toEqual([]);
  });
});
