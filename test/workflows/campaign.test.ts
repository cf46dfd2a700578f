/**
 * campaignWorkflow on the time-skipping server with typed activity fakes: phases in order
 * with progress by query, learnings promoted (phase_success per phase type, avoid_error per
 * failed task), pause/resume, cancel by signal and by Temporal cancellation (compensation in
 * reverse order, the task running at cancel time included), a failing checkpoint, child-workflow
 * tasks (a sub-campaign, its cancellation and compensation), the workflow id convention
 * `campaign/<campaignId>`, bad input, and a start the way the Temporal UI / CLI does it.
 * (Real activities, Postgres and a worker killed mid-phase: test/integration/campaign.test.ts.)
 */
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import { describe, expect, it } from 'vitest';
import { toolPath } from '../helpers/env.js';
import { run } from '../helpers/spawn.js';
import type { CampaignLearning, createCampaignActivities } from '../../activities/campaigns.js';
import { checkCriteria, type CampaignInput } from '../../core/campaign.js';
import {
  campaignProgressQuery,
  type CampaignProgress,
  type CampaignResult,
  type campaignWorkflow,
} from '../../workflows/campaign.js';
import { untilQuery, withWorker, type WorkerSpec } from '../helpers/harness.js';
import { timeSkippingSuite } from '../helpers/temporal.js';
import { unlimitedLifeforce } from '../helpers/scripted.js';
import { until, waitFor } from '../helpers/wait.js';

type Activities = ReturnType<typeof createCampaignActivities>;

const suite = timeSkippingSuite();

interface Fake {
  ran: string[];
  compensated: string[];
  /** `<campaignId>:p<i>/t<j>` of each compensation (parent and child campaigns share the fakes). */
  undone: string[];
  /** Gates whose activity saw the cancel request. */
  aborted: Set<string>;
  learnings: CampaignLearning[];
  campaignStatus: string[];
  phaseStatus: Array<{ ordinal: number; status: string }>;
  gates: Map<string, () => void>;
  activities: Activities;
}

/**
 * Fakes: task type `ok` returns `{ n }`, `boom` throws, `gate` blocks (heartbeating, so it
 * sees cancellation) until the test opens its gate, `stubborn` is a gate that notes the cancel
 * request but ignores it (it commits its effect and completes). `validateCheckpoint` passes
 * unless the phase type is `strict`.
 */
function fakes(): Fake {
  const f: Fake = {
    ran: [],
    compensated: [],
    undone: [],
    aborted: new Set(),
    learnings: [],
    campaignStatus: [],
    phaseStatus: [],
    gates: new Map(),
    activities: {} as Activities,
  };
  f.activities = {
    async campaignStarted() {
      return { status: 'running' as const, lifeforce: null };
    },
    async recordCampaign(input) {
      f.campaignStatus.push(input.status);
    },
    async recordPhase(input) {
      f.phaseStatus.push({ ordinal: input.ordinal, status: input.status });
    },
    async runCampaignTask(input) {
      f.ran.push(input.key.replace(/^.*\/(p\d+\/t\d+)$/, '$1'));
      if (input.type === 'boom')
        throw ApplicationFailure.nonRetryable(
          `disk full on ${String(input.args.host ?? 'host-7')} after 3 tries`,
          'CampaignTaskFailed',
        );
      if (input.type === 'gate' || input.type === 'stubborn') {
        const name = String(input.args.gate);
        const ctx = Context.current();
        await new Promise<void>((resolve, reject) => {
          const beat = setInterval(() => ctx.heartbeat(), 100);
          f.gates.set(name, () => {
            clearInterval(beat);
            resolve();
          });
          ctx.cancellationSignal.addEventListener('abort', () => {
            f.aborted.add(name);
            if (input.type === 'stubborn') return;
            clearInterval(beat);
            reject(ctx.cancellationSignal.reason);
          });
        });
      }
      return { n: f.ran.length, type: input.type };
    },
    async compensateCampaignTask(input) {
      f.compensated.push(input.key.replace(/^.*\/(p\d+\/t\d+)$/, '$1'));
      f.undone.push(`${input.campaignId}:${input.key.replace(/^.*\/(p\d+\/t\d+)$/, '$1')}`);
      return { compensated: true, by: input.compensation?.type ?? `${input.type}.compensate` };
    },
    async validateCheckpoint(input) {
      if (input.phase.type === 'strict')
        return { pass: false, reason: 'the validator found no evidence', by: 'validator' as const };
      return checkCriteria(input.checkpoint.criteria, input.outcomes);
    },
    async promoteCampaignLearning(input) {
      f.learnings.push(input);
      return { id: f.learnings.length };
    },
  };
  return f;
}

let seq = 0;
/** A worker on a queue of its own with the fakes' activities. */
const fakeWorker = (f: Fake): WorkerSpec => ({
  taskQueue: `campaign-${++seq}`,
  workflowBundle: suite.bundle,
  activities: { ...f.activities, ...unlimitedLifeforce },
});

function start(taskQueue: string, input: CampaignInput) {
  return suite.env.client.workflow.start<typeof campaignWorkflow>('campaignWorkflow', {
    taskQueue,
    workflowId: `campaign/${input.campaignId}`,
    args: [input],
  });
}

/** `h`'s progress once `pred` holds (20 s, every 50 ms). */
const untilProgress = (h: WorkflowHandle, pred: (p: CampaignProgress) => boolean, what: string) =>
  untilQuery(h, campaignProgressQuery, pred, what, 20_000, 50);

/** The release of gate `name`, once a task reached it (20 s). */
const waitForGate = (f: Fake, name: string) => waitFor(`gate ${name}`, 20_000, () => f.gates.get(name), 20);

const task = (name: string, type = 'ok', args: Record<string, unknown> = {}) => ({
  name,
  kind: 'activity' as const,
  type,
  args,
});

describe('campaignWorkflow (time-skipping, fakes)', () => {
  it('runs phases in order, reports progress, and promotes phase_success per phase type', async () => {
    const f = fakes();
    const result = await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, {
        campaignId: `c-ok-${seq}`,
        agentId: 'ada',
        title: 'write the report',
        phases: [
          {
            name: 'research',
            type: 'research',
            objectives: ['find sources'],
            tasks: [task('a'), task('b', 'gate', { gate: 'g1' })],
            checkpoint: { criteria: { expect: [{ task: 'a', path: 'type', equals: 'ok' }] } },
          },
          { name: 'write', type: 'build', tasks: [task('c')] },
        ],
      });
      const open = await waitForGate(f, 'g1');
      const p = await h.query<CampaignProgress>('progress');
      expect(p).toMatchObject({
        status: 'running',
        phase: { index: 1, total: 2, name: 'research' },
        task: { index: 2, total: 2, name: 'b' },
        completedPhases: [],
      });
      open();
      return h.result();
    });
    expect(result.status).toBe('completed');
    expect(result.phases.map((p) => [p.name, p.verdict.pass])).toEqual([
      ['research', true],
      ['write', true],
    ]);
    expect(f.ran).toEqual(['p0/t0', 'p0/t1', 'p1/t0']);
    expect(f.learnings.map((l) => [l.predicate, l.args])).toEqual([
      ['phase_success', { phase_type: 'research' }],
      ['phase_success', { phase_type: 'build' }],
    ]);
    expect(f.learnings[0]).toMatchObject({
      agentId: 'ada',
      shardType: 'campaign',
      source: expect.stringMatching(/^c-ok-/),
    });
    expect(f.phaseStatus.filter((s) => s.status === 'completed').map((s) => s.ordinal)).toEqual([0, 1]);
    expect(f.campaignStatus.at(-1)).toBe('completed');
    expect(f.compensated).toEqual([]);
  });

  it('a failed task becomes an avoid_error learning; the campaign fails and undoes its work newest first', async () => {
    const f = fakes();
    const err = await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, {
        campaignId: `c-fail-${seq}`,
        agentId: 'ada',
        title: 'deploy',
        shardType: 'ops',
        phases: [
          { name: 'prepare', type: 'prepare', tasks: [task('a'), task('b')] },
          { name: 'ship', type: 'deploy', tasks: [task('c'), task('d', 'boom', { host: 'host-12' }), task('e')] },
        ],
      });
      return h.result().then(
        () => null,
        (e: unknown) => e,
      );
    });
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    expect((cause as ApplicationFailure).type).toBe('CampaignFailed');
    expect((cause as ApplicationFailure).message).toMatch(
      /phase 'ship' checkpoint failed: 1 of 3 tasks succeeded, 3 required/,
    );
    // e never ran: once d failed the checkpoint could not pass.
    expect(f.ran).toEqual(['p0/t0', 'p0/t1', 'p1/t0', 'p1/t1']);
    expect(f.compensated).toEqual(['p1/t0', 'p0/t1', 'p0/t0']);
    expect(f.learnings.map((l) => [l.predicate, l.args, l.shardType])).toEqual([
      ['phase_success', { phase_type: 'prepare' }, 'ops'],
      ['avoid_error', { task_type: 'boom', error: 'disk full on host-N after N tries' }, 'ops'],
    ]);
    expect(f.campaignStatus.slice(-2)).toEqual(['compensating', 'failed']);
  });

  it('tolerates a failed task when minSucceeded allows it', async () => {
    const f = fakes();
    const result = await withWorker(suite.env, fakeWorker(f), async (q) =>
      (
        await start(q, {
          campaignId: `c-tol-${seq}`,
          agentId: 'ada',
          title: 'best effort',
          phases: [
            {
              name: 'scan',
              type: 'scan',
              tasks: [task('a', 'boom'), task('b')],
              checkpoint: { criteria: { minSucceeded: 1 } },
            },
          ],
        })
      ).result(),
    );
    expect(result.status).toBe('completed');
    expect(f.learnings.map((l) => l.predicate)).toEqual(['avoid_error', 'phase_success']);
  });

  it('pauses before the next task and resumes on signal', async () => {
    const f = fakes();
    await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, {
        campaignId: `c-pause-${seq}`,
        agentId: 'ada',
        title: 'p',
        phases: [{ name: 'one', type: 'x', tasks: [task('a', 'gate', { gate: 'p1' }), task('b'), task('c')] }],
      });
      const open = await waitForGate(f, 'p1');
      await h.signal('pause');
      open();
      await untilProgress(h, (p) => p.status === 'paused', 'paused');
      // Paused for a simulated day: nothing more runs.
      await suite.env.sleep(24 * 3_600_000);
      expect(f.ran).toEqual(['p0/t0']);
      expect((await h.query<CampaignProgress>('progress')).task).toMatchObject({ index: 1 });
      await h.signal('resume');
      expect((await h.result()).status).toBe('completed');
    });
    expect(f.ran).toEqual(['p0/t0', 'p0/t1', 'p0/t2']);
    expect(f.campaignStatus).toContain('paused');
  });

  it('cancel by signal stops the running task and compensates it and the completed ones in reverse order', async () => {
    const f = fakes();
    const result = await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, {
        campaignId: `c-cancel-${seq}`,
        agentId: 'ada',
        title: 'c',
        phases: [
          {
            name: 'one',
            type: 'x',
            tasks: [task('a'), { ...task('b'), compensation: { type: 'note', args: { text: 'undo b' } } }],
          },
          { name: 'two', type: 'y', tasks: [task('c'), task('d', 'gate', { gate: 'c1' }), task('e')] },
        ],
      });
      await waitForGate(f, 'c1');
      await h.signal('cancel', { reason: 'the user changed their mind' });
      return h.result();
    });
    // d was running when the cancel came (it may have committed its effect): compensated once, first.
    expect(result).toMatchObject({
      status: 'cancelled',
      compensated: ['two/d', 'two/c', 'one/b', 'one/a'],
      uncompensated: [],
    });
    expect(f.compensated).toEqual(['p1/t1', 'p1/t0', 'p0/t1', 'p0/t0']);
    expect(f.ran).not.toContain('p1/t2');
    expect(f.campaignStatus.slice(-2)).toEqual(['compensating', 'cancelled']);
  });

  it('cancellation from Temporal also compensates, and the workflow ends cancelled', async () => {
    const f = fakes();
    const err = await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, {
        campaignId: `c-tcancel-${seq}`,
        agentId: 'ada',
        title: 'c',
        phases: [{ name: 'one', type: 'x', tasks: [task('a'), task('b', 'gate', { gate: 't1' })] }],
      });
      await waitForGate(f, 't1');
      await h.cancel();
      return h.result().then(
        () => null,
        (e: unknown) => e,
      );
    });
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect((err as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    expect(f.compensated).toEqual(['p0/t1', 'p0/t0']);
    expect(f.campaignStatus.at(-1)).toBe('cancelled');
  });

  it('a task that ignores the cancel and commits its effect is awaited, then compensated exactly once; nothing after it starts', async () => {
    const f = fakes();
    const result = await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, {
        campaignId: `c-stubborn-${seq}`,
        agentId: 'ada',
        title: 's',
        phases: [{ name: 'one', type: 'x', tasks: [task('a'), task('b', 'stubborn', { gate: 's1' }), task('c')] }],
      });
      const open = await waitForGate(f, 's1');
      await h.signal('cancel', { reason: 'stop' });
      await until(() => f.aborted.has('s1'), 'the stubborn task aborted', 20_000, 20);
      // The workflow waits for the task to stop: nothing is compensated while it still runs.
      expect(f.compensated).toEqual([]);
      open();
      return h.result();
    });
    expect(result).toMatchObject({ status: 'cancelled', compensated: ['one/b', 'one/a'] });
    expect(f.compensated).toEqual(['p0/t1', 'p0/t0']);
    expect(f.ran).toEqual(['p0/t0', 'p0/t1']);
  });

  it('cancelling a campaign while a sub-campaign runs cancels the child, which compensates its own started work', async () => {
    const f = fakes();
    const parentId = `c-par-${++seq}`;
    const childId = `c-kid-${seq}`;
    const result = await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, {
        campaignId: parentId,
        agentId: 'ada',
        title: 'parent',
        phases: [
          {
            name: 'delegate',
            type: 'delegate',
            tasks: [
              task('prep'),
              {
                name: 'sub',
                kind: 'workflow',
                type: 'campaignWorkflow',
                args: {
                  campaignId: childId,
                  agentId: 'ada',
                  title: 'child',
                  phases: [{ name: 'inner', type: 'inner', tasks: [task('x'), task('y', 'gate', { gate: 'kid' })] }],
                },
              },
            ],
          },
        ],
      });
      await waitForGate(f, 'kid');
      // A sub-campaign runs under its own business id.
      expect(
        (await suite.env.client.workflow.getHandle(`campaign/${childId}`).query<CampaignProgress>('progress'))
          .campaignId,
      ).toBe(childId);
      await h.signal('cancel', { reason: 'abandon' });
      return h.result();
    });
    expect(result).toMatchObject({
      status: 'cancelled',
      compensated: ['delegate/sub', 'delegate/prep'],
      uncompensated: [],
    });
    // The child undid its running and its completed task, once each; then the parent undid prep.
    expect(f.undone).toEqual([`${childId}:p0/t1`, `${childId}:p0/t0`, `${parentId}:p0/t0`]);
  });

  it('a completed sub-campaign without a compensation is listed as not undone; one with a compensation runs it', async () => {
    const f = fakes();
    const child = (id: string) => ({
      campaignId: id,
      agentId: 'ada',
      title: 'child',
      phases: [{ name: 'inner', type: 'inner', tasks: [task('x')] }],
    });
    const parentId = `c-par2-${++seq}`;
    const result = await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, {
        campaignId: parentId,
        agentId: 'ada',
        title: 'parent',
        phases: [
          {
            name: 'delegate',
            type: 'delegate',
            tasks: [
              { name: 'plain', kind: 'workflow', type: 'campaignWorkflow', args: child(`c-plain-${seq}`) },
              {
                name: 'undoable',
                kind: 'workflow',
                type: 'campaignWorkflow',
                args: child(`c-undo-${seq}`),
                compensation: { type: 'note', args: { text: 'revert the sub-campaign' } },
              },
              task('hold', 'gate', { gate: 'par2' }),
            ],
          },
        ],
      });
      await waitForGate(f, 'par2');
      await h.signal('cancel', { reason: 'abandon' });
      return h.result();
    });
    expect(result.status).toBe('cancelled');
    expect(result.compensated).toEqual(['delegate/hold', 'delegate/undoable']);
    expect(result.uncompensated).toEqual([
      {
        task: 'delegate/plain',
        reason: 'child workflow campaignWorkflow completed and declares no compensation: not undone',
      },
    ]);
    expect(f.undone).toEqual([`${parentId}:p0/t2`, `${parentId}:p0/t1`]);
  });

  it('the workflow id must be campaign/<campaignId>; without a campaignId the id is taken from the workflow id', async () => {
    const f = fakes();
    await withWorker(suite.env, fakeWorker(f), async (q) => {
      const input = { agentId: 'ada', title: 'ids', phases: [{ name: 'one', type: 'x', tasks: [task('a')] }] };
      const bad = await suite.env.client.workflow.start('campaignWorkflow', {
        taskQueue: q,
        workflowId: `campaign/elsewhere-${seq}`,
        args: [{ ...input, campaignId: `mine-${seq}` }],
      });
      const err = await bad.result().then(
        () => null,
        (e: unknown) => e,
      );
      const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
      expect(cause.type).toBe('InvalidInput');
      expect(cause.nonRetryable).toBe(true);
      expect(cause.message).toContain(
        `campaignId: 'mine-${seq}' does not match the workflow id 'campaign/elsewhere-${seq}'`,
      );

      const noId = await suite.env.client.workflow.start('campaignWorkflow', {
        taskQueue: q,
        workflowId: `ui-run-${seq}`,
        args: [input],
      });
      const err2 = await noId.result().then(
        () => null,
        (e: unknown) => e,
      );
      expect(((err2 as WorkflowFailedError).cause as ApplicationFailure).message).toContain(
        `campaignId: required when the workflow id is not campaign/<campaignId> (workflow id 'ui-run-${seq}')`,
      );

      const derived = await suite.env.client.workflow.start('campaignWorkflow', {
        taskQueue: q,
        workflowId: `campaign/derived-${seq}`,
        args: [input],
      });
      expect(await derived.result()).toMatchObject({ campaignId: `derived-${seq}`, status: 'completed' });
    });
    expect(f.ran).toEqual(['p0/t0']);
    expect(f.learnings[0]).toMatchObject({ source: expect.stringMatching(/^derived-/) });
  });

  it('starts from the Temporal UI / CLI with JSON: good JSON runs, bad JSON fails at once, non-retryable, naming the fields', async () => {
    const f = fakes();
    const temporal = toolPath('temporal');
    await withWorker(suite.env, fakeWorker(f), async (q) => {
      const ui = (workflowId: string, json: string) =>
        run(temporal, [
          'workflow',
          'start',
          '--address',
          suite.env.address,
          '--task-queue',
          q,
          '--type',
          'campaignWorkflow',
          '--workflow-id',
          workflowId,
          '--input',
          json,
        ]);
      const good = await ui(
        `campaign/ui-ok-${seq}`,
        JSON.stringify({
          agentId: 'ada',
          title: 'from the UI',
          phases: [{ name: 'one', type: 'ui', tasks: [{ name: 'a', type: 'ok' }] }],
        }),
      );
      expect(good.code, good.stderr).toBe(0);
      expect(await suite.env.client.workflow.getHandle(`campaign/ui-ok-${seq}`).result()).toMatchObject({
        campaignId: `ui-ok-${seq}`,
        status: 'completed',
      });

      const badJson = await ui(
        `campaign/ui-bad-${seq}`,
        JSON.stringify({
          campaignId: `ui-bad-${seq}`,
          agentId: 'ada',
          title: '',
          phases: [{ name: 'one', type: 'ui', tasks: [] }],
          extra: 1,
        }),
      );
      expect(badJson.code, badJson.stderr).toBe(0);
      const started = Date.now();
      const err = await suite.env.client.workflow
        .getHandle(`campaign/ui-bad-${seq}`)
        .result()
        .catch((e: unknown) => e);
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(err).toBeInstanceOf(WorkflowFailedError);
      const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
      expect(cause.nonRetryable).toBe(true);
      expect(cause.type).toBe('InvalidInput');
      expect(cause.message).toContain('campaignWorkflow: invalid input');
      expect(cause.message).toContain('title:');
      expect(cause.message).toContain('phases.0.tasks:');
      expect(cause.message).toContain('extra');

      const wrongId = await ui(
        `ui-wrong-${seq}`,
        JSON.stringify({
          campaignId: `ui-x-${seq}`,
          agentId: 'ada',
          title: 't',
          phases: [{ name: 'one', type: 'ui', tasks: [{ name: 'a', type: 'ok' }] }],
        }),
      );
      expect(wrongId.code, wrongId.stderr).toBe(0);
      const err2 = await suite.env.client.workflow
        .getHandle(`ui-wrong-${seq}`)
        .result()
        .catch((e: unknown) => e);
      expect(((err2 as WorkflowFailedError).cause as ApplicationFailure).message).toContain(
        `campaignId: 'ui-x-${seq}' does not match the workflow id 'ui-wrong-${seq}'`,
      );
    });
    expect(f.ran).toEqual(['p0/t0']);
  }, 60_000);

  it('a checkpoint the validator rejects fails the campaign with its reason', async () => {
    const f = fakes();
    const err = await withWorker(suite.env, fakeWorker(f), async (q) =>
      (
        await start(q, {
          campaignId: `c-strict-${seq}`,
          agentId: 'ada',
          title: 's',
          phases: [
            {
              name: 'audit',
              type: 'strict',
              tasks: [task('a')],
              checkpoint: { validator: { role: 'validator' }, criteria: { description: 'evidence attached' } },
            },
          ],
        })
      )
        .result()
        .then(
          () => null,
          (e: unknown) => e,
        ),
    );
    expect(((err as WorkflowFailedError).cause as ApplicationFailure).message).toContain(
      "phase 'audit' checkpoint failed: the validator found no evidence",
    );
    expect(f.learnings).toEqual([]);
    expect(f.phaseStatus.find((s) => s.status === 'failed')).toEqual({ ordinal: 0, status: 'failed' });
  });

  it('runs a child workflow task (a sub-campaign) and uses its result', async () => {
    const f = fakes();
    const result = await withWorker(suite.env, fakeWorker(f), async (q) =>
      (
        await start(q, {
          campaignId: `c-parent-${seq}`,
          agentId: 'ada',
          title: 'parent',
          phases: [
            {
              name: 'delegate',
              type: 'delegate',
              tasks: [
                {
                  name: 'sub',
                  kind: 'workflow',
                  type: 'campaignWorkflow',
                  args: {
                    campaignId: `c-child-${seq}`,
                    agentId: 'ada',
                    title: 'child',
                    phases: [{ name: 'inner', type: 'inner', tasks: [task('x')] }],
                  },
                },
              ],
              checkpoint: { criteria: { expect: [{ task: 'sub', path: 'status', equals: 'completed' }] } },
            },
          ],
        })
      ).result(),
    );
    expect(result.status).toBe('completed');
    expect(f.learnings.map((l) => l.args)).toEqual([{ phase_type: 'inner' }, { phase_type: 'delegate' }]);
  });

  it('refuses bad input at once, naming the fields', async () => {
    const f = fakes();
    const err = await withWorker(suite.env, fakeWorker(f), async (q) =>
      (
        await suite.env.client.workflow.start('campaignWorkflow', {
          taskQueue: q,
          workflowId: `campaign/bad-${seq}`,
          args: [
            {
              campaignId: 'has space',
              agentId: 'ada',
              title: '',
              phases: [{ name: 'p', type: 't', tasks: [{ name: 'x', kind: 'workflow', type: 'rm -rf' }] }],
            },
          ],
        })
      )
        .result()
        .then(
          () => null,
          (e: unknown) => e,
        ),
    );
    const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause.type).toBe('InvalidInput');
    expect(cause.nonRetryable).toBe(true);
    expect(cause.message).toContain('campaignId:');
    expect(cause.message).toContain('title:');
    expect(cause.message).toContain(
      "phases.0.tasks.0.type: a workflow task's type must be one of: campaignWorkflow, toolGenerationWorkflow",
    );
    expect(f.ran).toEqual([]);
  });
});

// Types only: the result type is what the client sees.
export type { CampaignResult };
