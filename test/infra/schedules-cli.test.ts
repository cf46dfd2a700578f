/**
 * `mindloop schedules apply|list|trigger` as processes against a real Temporal dev server
 * (which has Schedules): apply creates the four maintenance schedules and, run again, updates
 * them (idempotent, a paused one stays paused); list shows them; trigger starts the decay
 * workflow at once; an unknown schedule name exits 2 naming the known ones. A worker that polls
 * `mindloop` applies them at its start (workers/main.ts, applySchedulesAtStart): idempotently,
 * not for other queues, not with `--no-schedules`, and an unreachable server does not fail it.
 */
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applySchedulesAtStart, describeSchedules, maintenanceSchedules } from '../../workers/schedules.js';
import { writeWorkflowBundle } from '../../workers/build-bundle.js';
import { freshPostgresDatabase, repoToolsDir, tempDir, toolPath } from '../helpers/env.js';
import { repoRoot, run, start } from '../helpers/spawn.js';
import { waitFor } from '../helpers/worker-process.js';

const cli = `${repoRoot}/bin/mindloop.mjs`;
let env: TestWorkflowEnvironment;

beforeAll(async () => {
  env = await TestWorkflowEnvironment.createLocal({
    server: { executable: { type: 'existing-path', path: toolPath('temporal') } },
  });
}, 120_000);
afterAll(async () => {
  await env?.teardown();
});

const ml = (...args: string[]) =>
  run(process.execPath, [cli, ...args], { TEMPORAL_ADDRESS: env.address, TEMPORAL_NAMESPACE: 'default' });

describe('mindloop schedules', () => {
  it('apply creates, apply again updates (a paused schedule stays paused), list shows them, trigger runs one', async () => {
    const first = await ml('schedules', 'apply', '--task-queue', 'nobody-polls');
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout.trim().split('\n')).toEqual(maintenanceSchedules.map((s) => `created ${s.id}`));

    await env.client.schedule.getHandle('maintenance/abstracts-digest').pause('paused in the UI');
    const second = await ml('schedules', 'apply', '--task-queue', 'nobody-polls');
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout.trim().split('\n')).toEqual(maintenanceSchedules.map((s) => `updated ${s.id}`));

    const list = await ml('schedules', 'list', '--json');
    expect(list.code, list.stderr).toBe(0);
    const rows = JSON.parse(list.stdout) as Array<{
      id: string;
      workflowType: string;
      paused: boolean;
      nextActionTimes: string[];
    }>;
    expect(rows.map((r) => [r.id, r.workflowType, r.paused])).toEqual([
      ['maintenance/learning-decay', 'learningDecayWorkflow', false],
      ['maintenance/abstracts-digest', 'abstractsDigestWorkflow', true],
      ['maintenance/memory-pruning', 'memoryPruningWorkflow', false],
      ['maintenance/process-log-cleanup', 'processLogCleanupWorkflow', false],
      ['maintenance/embeddings-backfill', 'embeddingsBackfillWorkflow', false],
    ]);
    // Daily and hourly: the next decay within a day, the next pruning within 6 hours.
    const inMs = (id: string) => new Date(rows.find((r) => r.id === id)!.nextActionTimes[0]!).getTime() - Date.now();
    expect(inMs('maintenance/learning-decay')).toBeLessThanOrEqual(86_400_000);
    expect(inMs('maintenance/memory-pruning')).toBeLessThanOrEqual(6 * 3_600_000);

    const trig = await ml('schedules', 'trigger', 'learning-decay');
    expect(trig.code, trig.stderr).toBe(0);
    expect(trig.stdout).toContain('triggered maintenance/learning-decay');
    await expect
      .poll(
        async () =>
          (await env.client.schedule.getHandle('maintenance/learning-decay').describe()).info.recentActions.length,
        { timeout: 20_000, interval: 200 },
      )
      .toBe(1);
    const d = await env.client.schedule.getHandle('maintenance/learning-decay').describe();
    const started = await env.client.workflow.getHandle(d.info.recentActions[0]!.action.workflow.workflowId).describe();
    expect(started).toMatchObject({ type: 'learningDecayWorkflow', taskQueue: 'nobody-polls' });
  }, 120_000);

  it('an unknown schedule exits 2 naming the known ones; without a server the error says how to fix it', async () => {
    const bad = await ml('schedules', 'trigger', 'lunch');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('unknown schedule "lunch" (known: maintenance/learning-decay');
    const dead = await run(process.execPath, [cli, 'schedules', 'list'], { TEMPORAL_ADDRESS: '127.0.0.1:1' });
    expect(dead.code).toBe(1);
    expect(dead.stderr).toContain('cannot reach Temporal at 127.0.0.1:1');
  }, 60_000);

  it('a worker polling mindloop applies them at start, idempotently; other queues, --no-schedules and an unreachable server do not', async () => {
    for (const sch of maintenanceSchedules)
      await env.client.schedule
        .getHandle(sch.id)
        .delete()
        .catch(() => undefined);
    const existing = async () => (await describeSchedules(env.client)).map((r) => r.id);
    const lines: string[] = [];
    const temporal = { connection: { address: env.address }, namespace: 'default' };
    const atStart = (queues: string[], disabled = false) =>
      applySchedulesAtStart(temporal, { queues, disabled, log: (l) => lines.push(l) });

    expect(await atStart(['sandbox', 'speech-gpu'])).toBeNull();
    expect(await atStart(['mindloop'], true)).toBeNull();
    expect(lines).toEqual([
      'schedules: not applied at start (--no-schedules); `npx mindloop schedules apply` applies them',
    ]);
    expect(await existing()).toEqual([]);

    expect(await atStart(['sandbox', 'mindloop'])).toEqual(
      maintenanceSchedules.map((x) => ({ id: x.id, action: 'created' })),
    );
    await env.client.schedule.getHandle('maintenance/memory-pruning').pause('paused in the UI');
    // A second worker (or a restart) converges them; the paused one stays paused.
    expect(await atStart(['mindloop'])).toEqual(maintenanceSchedules.map((x) => ({ id: x.id, action: 'updated' })));
    expect(lines.at(-1)).toBe(`schedules: ${maintenanceSchedules.map((x) => `${x.id} (updated)`).join(', ')}`);
    expect((await env.client.schedule.getHandle('maintenance/memory-pruning').describe()).state.paused).toBe(true);
    const decay = await env.client.schedule.getHandle('maintenance/learning-decay').describe();
    expect(decay.action).toMatchObject({ workflowType: 'learningDecayWorkflow', taskQueue: 'mindloop' });

    // A server that cannot be reached: logged with how to retry, and the worker goes on.
    const dead = await applySchedulesAtStart(
      { connection: { address: '127.0.0.1:1', connectTimeout: '2s' }, namespace: 'default' },
      { queues: ['mindloop'], log: (l) => lines.push(l) },
    );
    expect(dead).toBeNull();
    expect(lines.at(-1)).toMatch(/^schedules not applied: .+ \(retry: npx mindloop schedules apply\)$/);
  }, 60_000);

  it('the worker process (npm run worker -- --queue mindloop) applies them at start; --no-schedules skips it', async () => {
    const data = tempDir('schedules-worker');
    const fresh = await freshPostgresDatabase('mindloop_schedules_worker');
    try {
      const bundle = (await writeWorkflowBundle(`${data.path}/workflow-bundle.js`)).path;
      const worker = async (...flags: string[]) => {
        const child = start(process.execPath, ['--import', 'tsx', 'workers/main.ts', '--queue', 'mindloop', ...flags], {
          TEMPORAL_ADDRESS: env.address,
          DATABASE_URL: fresh.url,
          MINDLOOP_WORKFLOW_BUNDLE: bundle,
          MINDLOOP_TOOLS_DIR: repoToolsDir,
          LOG_LEVEL: 'ERROR',
        });
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        try {
          await waitFor('the worker to poll', 60_000, async () =>
            child.output().stdout.includes('worker polling mindloop')
              ? true
              : child.exitCode !== null
                ? Promise.reject(new Error(child.output().stderr))
                : undefined,
          );
        } finally {
          child.kill('SIGTERM');
          await exited;
        }
        return child.output().stdout;
      };
      await env.client.schedule.getHandle('maintenance/abstracts-digest').delete();
      const first = await worker();
      expect(first).toContain(
        'schedules: maintenance/learning-decay (updated), maintenance/abstracts-digest (created), maintenance/memory-pruning (updated)',
      );
      const skipped = await worker('--no-schedules');
      expect(skipped).toContain('schedules: not applied at start (--no-schedules)');
      expect(skipped).not.toContain('(updated)');
    } finally {
      await fresh.drop();
      data.remove();
    }
  }, 180_000);
});
