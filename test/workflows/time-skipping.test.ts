import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { createActivities } from '../../activities/index.js';
import { bundle as bundleWorkflows, createTimeSkippingEnv, fixtureWorkflowsPath } from '../helpers/temporal.js';

type Activities = ReturnType<typeof createActivities>;

let env: TestWorkflowEnvironment;
let bundle: WorkflowBundleWithSourceMap;

beforeAll(async () => {
  env = await createTimeSkippingEnv();
  bundle = await bundleWorkflows(fixtureWorkflowsPath);
});
afterAll(async () => {
  await env?.teardown();
});

function worker(taskQueue: string, activities: Partial<Activities> = {}) {
  return Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle: bundle, activities });
}

describe('time-skipping test server (.tools binary)', () => {
  it('sleeps a simulated day without waiting a day', async () => {
    const w = await worker('ts-sleep');
    const day = 24 * 60 * 60 * 1000;
    const wallStart = performance.now();
    const result = await w.runUntil(
      env.client.workflow.execute('sleepWorkflow', { taskQueue: 'ts-sleep', workflowId: 'sleep-a-day', args: [day] }),
    );
    const wallMs = performance.now() - wallStart;
    expect(result.after - result.before).toBeGreaterThanOrEqual(day);
    // Not a speed target: a real sleep would take 86 400 s; anything near that means time did not skip.
    expect(wallMs).toBeLessThan(10_000);
    console.log(`simulated ${(result.after - result.before) / 3.6e6} h in ${wallMs.toFixed(0)} ms of wall time`);
  });

  it('provisions an agent through a typed activity fake', async () => {
    const calls: unknown[] = [];
    const w = await worker('ts-provision', {
      async ensureAgent(input) {
        calls.push(input);
        return { agentId: input.agentId, name: input.name, created: true, createdAt: new Date(0).toISOString() };
      },
    });
    const out = await w.runUntil(
      env.client.workflow.execute('provisionAgentWorkflow', {
        taskQueue: 'ts-provision',
        workflowId: 'provision/fake',
        args: [{ agentId: 'fake', name: '  Fake  ' }],
      }),
    );
    expect(out).toMatchObject({ agentId: 'fake', name: 'Fake', created: true });
    expect(calls).toEqual([{ agentId: 'fake', name: 'Fake' }]);
  });

  it('rejects a malformed input at once, non-retryable, naming every bad field', async () => {
    const w = await worker('ts-bad-input');
    const err = await w
      .runUntil(
        env.client.workflow.execute('provisionAgentWorkflow', {
          taskQueue: 'ts-bad-input',
          workflowId: 'provision/bad',
          args: [{ agentId: 'Not Valid!', name: 42 }],
        }),
      )
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause;
    expect(cause).toBeInstanceOf(ApplicationFailure);
    const failure = cause as ApplicationFailure;
    expect(failure.type).toBe('InvalidInput');
    expect(failure.nonRetryable).toBe(true);
    expect(failure.message).toMatch(/agentId: letters, digits/);
    expect(failure.message).toMatch(/name: .*string/i);
  });
});
