/**
 * `mindloop schedules apply|list|trigger` as processes against a real Temporal dev server
 * (which has Schedules): apply creates the four maintenance schedules and, run again, updates
 * them (idempotent, a paused one stays paused); list shows them; trigger starts the decay
 * workflow at once; an unknown schedule name exits 2 naming the known ones.
 */
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maintenanceSchedules } from '../../workers/schedules.js';
import { toolPath } from '../helpers/env.js';
import { repoRoot, run } from '../helpers/spawn.js';

const cli = `${repoRoot}/bin/mindloop.mjs`;
let env: TestWorkflowEnvironment;

beforeAll(async () => {
  env = await TestWorkflowEnvironment.createLocal({ server: { executable: { type: 'existing-path', path: toolPath('temporal') } } });
}, 120_000);
afterAll(async () => {
  await env?.teardown();
});

const ml = (...args: string[]) => run(process.execPath, [cli, ...args], { TEMPORAL_ADDRESS: env.address, TEMPORAL_NAMESPACE: 'default' });

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
    const rows = JSON.parse(list.stdout) as Array<{ id: string; workflowType: string; paused: boolean; nextActionTimes: string[] }>;
    expect(rows.map((r) => [r.id, r.workflowType, r.paused])).toEqual([
      ['maintenance/learning-decay', 'learningDecayWorkflow', false],
      ['maintenance/abstracts-digest', 'abstractsDigestWorkflow', true],
      ['maintenance/memory-pruning', 'memoryPruningWorkflow', false],
      ['maintenance/process-log-cleanup', 'processLogCleanupWorkflow', false],
    ]);
    // Daily and hourly: the next decay within a day, the next pruning within 6 hours.
    const inMs = (id: string) => new Date(rows.find((r) => r.id === id)!.nextActionTimes[0]!).getTime() - Date.now();
    expect(inMs('maintenance/learning-decay')).toBeLessThanOrEqual(86_400_000);
    expect(inMs('maintenance/memory-pruning')).toBeLessThanOrEqual(6 * 3_600_000);

    const trig = await ml('schedules', 'trigger', 'learning-decay');
    expect(trig.code, trig.stderr).toBe(0);
    expect(trig.stdout).toContain('triggered maintenance/learning-decay');
    await expect
      .poll(async () => (await env.client.schedule.getHandle('maintenance/learning-decay').describe()).info.recentActions.length, { timeout: 20_000, interval: 200 })
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
});
