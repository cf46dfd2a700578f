/**
 * The embedded stack in-process: Temporal dev server (SQLite under a data dir) + Postgres
 * (PGlite on a socket, or the real server on :5432), migrations, workers, a workflow that
 * writes a row through an activity — and a second start over the same data dir.
 */
import { Client, Connection } from '@temporalio/client';
import { Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { agents } from '../../db/schema/index.js';
import { startStack, type Stack } from '../../runtime/stack.js';
import { startWorkers, type RunningWorkers } from '../../workers/run.js';
import { bundleWorkflows } from '../../workers/queues.js';
import { freePort, freshPostgresDatabase, tempDir, testEnv } from '../helpers/env.js';
import { bundle, fixtureWorkflowsPath } from '../helpers/temporal.js';
import { failoverWorkerOptions } from '../../workers/failover.js';

let productBundle: WorkflowBundleWithSourceMap;
let fixtureBundle: WorkflowBundleWithSourceMap;
beforeAll(async () => {
  [productBundle, fixtureBundle] = await Promise.all([bundleWorkflows(), bundle(fixtureWorkflowsPath)]);
});

interface Running {
  stack: Stack;
  workers: RunningWorkers;
  fixtureWorker: Worker;
  fixtureRun: Promise<void>;
  client: Client;
  stop(): Promise<void>;
}

describe.each([
  { label: 'embedded PGlite', realPostgres: false },
  { label: 'real Postgres (DATABASE_URL)', realPostgres: true },
])('embedded stack with $label', ({ realPostgres }) => {
  const data = tempDir('stack');
  let vars: Record<string, string | number | undefined>;
  let dropDb: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    vars = {
      MINDLOOP_DATA_DIR: data.path,
      TEMPORAL_PORT: await freePort(),
      PGLITE_PORT: await freePort(),
      LOG_LEVEL: 'WARN',
    };
    if (realPostgres) {
      const fresh = await freshPostgresDatabase('mindloop_stack');
      vars.DATABASE_URL = fresh.url;
      dropDb = fresh.drop;
    }
  });
  afterAll(async () => {
    await dropDb?.();
    data.remove();
  });

  async function up(): Promise<Running> {
    const env = testEnv(vars);
    const stack = await startStack({ env, ui: false });
    const workers = await startWorkers(env, stack, ['mindloop'], { workflowBundle: productBundle });
    // Test-only workflows run on their own queue with the product's activities.
    const fixtureWorker = await Worker.create({
      connection: workers.connection,
      namespace: stack.temporal.namespace,
      taskQueue: 'fixtures',
      ...failoverWorkerOptions,
      workflowBundle: fixtureBundle,
      activities: createActivities({ db: stack.db.db, llm: { env: {}, toolsDir: env.MINDLOOP_TOOLS_DIR } }),
    });
    const fixtureRun = fixtureWorker.run();
    const connection = await Connection.connect(stack.temporal.connection);
    const client = new Client({ connection, namespace: stack.temporal.namespace });
    return {
      stack,
      workers,
      fixtureWorker,
      fixtureRun,
      client,
      async stop() {
        await connection.close();
        fixtureWorker.shutdown();
        await fixtureRun;
        await workers.shutdown();
        await stack.stop();
      },
    };
  }

  it('runs a workflow whose activity writes a row, and reads the row back', async () => {
    const run = await up();
    try {
      expect(run.stack.temporal.embedded?.dbFile).toContain(data.path);
      expect(Boolean(run.stack.database.embedded)).toBe(!realPostgres);
      const result = await run.client.workflow.execute('provisionAgentWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'provision/first',
        args: [{ agentId: 'first', name: 'First agent' }],
      });
      expect(result).toMatchObject({ agentId: 'first', name: 'First agent', created: true });
      const rows = await run.stack.db.db.select().from(agents).where(eq(agents.id, 'first'));
      expect(rows).toHaveLength(1);
      expect(rows[0]!.name).toBe('First agent');

      // A workflow still sleeping when the stack goes down: the next start must finish it.
      await run.client.workflow.start('delayedProvisionWorkflow', {
        taskQueue: 'fixtures',
        workflowId: 'provision/late',
        args: [{ agentId: 'late', name: 'Late agent', delayMs: 3000 }],
      });
    } finally {
      await run.stop();
    }
  });

  it('a second start over the same data dir sees the first run’s rows and histories, and resumes running workflows', async () => {
    const run = await up();
    try {
      const first = await run.stack.db.db.select().from(agents).where(eq(agents.id, 'first'));
      expect(first.map((r) => r.name)).toEqual(['First agent']);

      const done = await run.client.workflow.getHandle('provision/first').describe();
      expect(done.status.name).toBe('COMPLETED');
      const history = await run.client.workflow.getHandle('provision/first').fetchHistory();
      expect(history.events?.length).toBeGreaterThan(5);

      const late = await run.client.workflow.getHandle('provision/late').result();
      expect(late).toMatchObject({ agentId: 'late', created: true });
      const lateRows = await run.stack.db.db.select().from(agents).where(eq(agents.id, 'late'));
      expect(lateRows).toHaveLength(1);

      // Provisioning again finds the row instead of writing a second one.
      const again = await run.client.workflow.execute('provisionAgentWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'provision/first-again',
        args: [{ agentId: 'first', name: 'Renamed?' }],
      });
      expect(again).toMatchObject({ agentId: 'first', name: 'First agent', created: false });
    } finally {
      await run.stop();
    }
  });
});
