import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import type { createActivities } from '../../activities/index.js';
import { withWorker } from '../helpers/harness.js';
import { fixtureWorkflowsPath, timeSkippingSuite } from '../helpers/temporal.js';

type Activities = ReturnType<typeof createActivities>;

const suite = timeSkippingSuite(fixtureWorkflowsPath);

/** Run `fn` while a worker for the fixture workflows polls `taskQueue`. */
function withFixtureWorker<T>(taskQueue: string, activities: Partial<Activities>, fn: () => Promise<T>): Promise<T> {
  return withWorker(suite.env, { taskQueue, workflowBundle: suite.bundle, activities }, fn);
}

describe('time-skipping test server (.tools binary)', () => {
  it('sleeps a simulated day without waiting a day', async () => {
    const day = 24 * 60 * 60 * 1000;
    const wallStart = performance.now();
    const result = await withFixtureWorker('ts-sleep', {}, () =>
      suite.env.client.workflow.execute('sleepWorkflow', {
        taskQueue: 'ts-sleep',
        workflowId: 'sleep-a-day',
        args: [day],
      }),
    );
    const wallMs = performance.now() - wallStart;
    expect(result.after - result.before).toBeGreaterThanOrEqual(day);
    // Not a speed target: a real sleep would take 86 400 s; anything near that means time did not skip.
    expect(wallMs).toBeLessThan(10_000);
    console.log(`simulated ${(result.after - result.before) / 3.6e6} h in ${wallMs.toFixed(0)} ms of wall time`);
  });

  it('provisions an agent through a typed activity fake', async () => {
    const calls: unknown[] = [];
    const activities: Partial<Activities> = {
      async ensureAgent(input) {
        calls.push(input);
        return { agentId: input.agentId, name: input.name, created: true, createdAt: new Date(0).toISOString() };
      },
    };
    const out = await withFixtureWorker('ts-provision', activities, () =>
      suite.env.client.workflow.execute('provisionAgentWorkflow', {
        taskQueue: 'ts-provision',
        workflowId: 'provision/fake',
        args: [{ agentId: 'fake', name: '  Fake  ' }],
      }),
    );
    expect(out).toMatchObject({ agentId: 'fake', name: 'Fake', created: true });
    expect(calls).toEqual([{ agentId: 'fake', name: 'Fake' }]);
  });

  it('rejects a malformed input at once, non-retryable, naming every bad field', async () => {
    const err = await withFixtureWorker('ts-bad-input', {}, () =>
      suite.env.client.workflow.execute('provisionAgentWorkflow', {
        taskQueue: 'ts-bad-input',
        workflowId: 'provision/bad',
        args: [{ agentId: 'Not Valid!', name: 42 }],
      }),
    ).catch((e: unknown) => e);
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
