/**
 * sandboxRun through a real Temporal server (the pinned dev server) and the real engine:
 * cancelling the workflow reaches the running container through the heartbeat and removes it;
 * a heartbeat timeout (the activity heartbeats slower than its heartbeatTimeout) does the same;
 * a retry after a worker died re-finds the container (tested in test/sandbox/docker-sandbox.test.ts).
 */
import { WorkflowFailedError } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandboxActivities } from '../../activities/sandbox.js';
import { DockerSandbox, LABEL_KEY } from '../../sandbox/docker-sandbox.js';
import type { sandboxRunWorkflow } from '../fixtures/sandbox/workflows.js';
import { dockerSkipped, requireDocker } from '../helpers/docker.js';
import { toolPath } from '../helpers/env.js';
import { withWorker, type WorkerSpec } from '../helpers/harness.js';
import { bundle as bundleWorkflows } from '../helpers/temporal.js';
import { until } from '../helpers/wait.js';

const runId = `${process.pid}-${Date.now()}`;

async function containers(docker: Docker, key: string): Promise<Docker.ContainerInfo[]> {
  return (await docker.listContainers({ all: true, filters: { label: [LABEL_KEY] } })).filter(
    (c) => c.Labels[LABEL_KEY] === key,
  );
}

describe.skipIf(dockerSkipped)('sandboxRun on a real Temporal server', () => {
  let env: TestWorkflowEnvironment;
  let bundle: WorkflowBundleWithSourceMap;
  let docker: Docker;
  beforeAll(async () => {
    docker = await requireDocker();
    [env, bundle] = await Promise.all([
      TestWorkflowEnvironment.createLocal({
        server: { executable: { type: 'existing-path', path: toolPath('temporal') } },
      }),
      bundleWorkflows('../fixtures/sandbox/workflows.ts'),
    ]);
  });
  afterAll(async () => {
    await env?.teardown();
  });

  /**
   * The fixture workflows on `wf`, and the sandbox activities over `sandbox` on `sandbox`; with
   * `ownBeatsOnly`, that worker has no heartbeat interceptor, so the run heartbeats only with its
   * progress (what a worker whose heartbeats are late looks like to the server).
   */
  const workers = (sandbox: DockerSandbox, o: { ownBeatsOnly?: boolean } = {}): WorkerSpec[] => [
    { taskQueue: 'wf', workflowBundle: bundle },
    {
      taskQueue: 'sandbox',
      activities: createSandboxActivities({ docker, sandbox }),
      ...(o.ownBeatsOnly ? { interceptors: { activity: [] } } : {}),
    },
  ];

  it('cancelling the workflow kills and removes the running container', async () => {
    const key = `sandbox-activity/${runId}/cancel`;
    await withWorker(env, workers(new DockerSandbox(docker, { progressMs: 300 })), async () => {
      const h = await env.client.workflow.start<typeof sandboxRunWorkflow>('sandboxRunWorkflow', {
        taskQueue: 'wf',
        workflowId: `sbx-cancel-${runId}`,
        args: [{ req: { key, command: ['sleep', '60'] }, heartbeatTimeoutMs: 5000, attempts: 1 }],
      });
      await until(
        async () => (await containers(docker, key)).some((c) => c.State === 'running'),
        `a running container labelled ${key}`,
        10_000,
        100,
      );
      const t = Date.now();
      await h.cancel();
      const err = await h.result().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WorkflowFailedError);
      expect(String((err as WorkflowFailedError).cause)).toMatch(/Cancel/i);
      await until(async () => (await containers(docker, key)).length === 0, `no container labelled ${key}`, 3000, 100);
      expect(Date.now() - t).toBeLessThan(5000);
    });
  });

  it('a heartbeat timeout kills and removes the container', async () => {
    const key = `sandbox-activity/${runId}/heartbeat`;
    // Heartbeats every 3 s against a 1 s heartbeat timeout: the server times the attempt out and
    // the next heartbeat tells the worker, which cancels the activity and so the container.
    await withWorker(
      env,
      workers(new DockerSandbox(docker, { progressMs: 3000 }), { ownBeatsOnly: true }),
      async () => {
        const h = await env.client.workflow.start<typeof sandboxRunWorkflow>('sandboxRunWorkflow', {
          taskQueue: 'wf',
          workflowId: `sbx-heartbeat-${runId}`,
          args: [{ req: { key, command: ['sleep', '60'] }, heartbeatTimeoutMs: 1000, attempts: 1 }],
        });
        const err = await h.result().catch((e: unknown) => e);
        expect(err).toBeInstanceOf(WorkflowFailedError);
        expect(
          JSON.stringify((err as WorkflowFailedError).cause?.cause ?? {}) +
            String((err as WorkflowFailedError).cause?.cause),
        ).toMatch(/heartbeat|HEARTBEAT/i);
        await until(
          async () => (await containers(docker, key)).length === 0,
          `no container labelled ${key}`,
          8000,
          100,
        );
      },
    );
  });
});
