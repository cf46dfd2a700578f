/**
 * Successor forks end to end on the real stack: the Temporal dev server, the real Postgres, the
 * real fork activities on `mindloop` and the real DockerSandbox on `sandbox` (in-process
 * workers), driven by the `mindloop` CLI as separate processes:
 * - `forks demo` evaluates the demo patch (abstracts strategy swap) to an APPROVE at the gate;
 *   `forks approve <id>` applies it to the parent; a second answer is refused with the reason;
 * - `forks reject <id>` discards: the parent stays byte for byte what it was;
 * - a tool implementation swap runs its tests only in the Docker sandbox: passing tests give
 *   APPROVE; tests that fill the disk budget give REJECT `budget_exceeded: disk`; tests that
 *   spin past the CPU-time budget give REJECT `budget_exceeded: cpu`;
 * - cancelling a tool_tests fork while its tests run in the sandbox leaves no container, no copy
 *   and no verdict, and the parent as it was.
 */
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { CancelledFailure } from '@temporalio/common';
import { NativeConnection } from '@temporalio/worker';
import type Docker from 'dockerode';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyActivityErrors } from '../../activities/errors.js';
import { createForkActivities } from '../../activities/forks/index.js';
import { createLifeforceActivities } from '../../activities/lifeforce.js';
import { defaultPrices } from '../../core/lifeforce.js';
import { createSandboxActivities } from '../../activities/sandbox.js';
import { agentConfig, agents, forks, forkToolRegistry, verdicts } from '../../db/schema/index.js';
import { startStack, type Stack } from '../../runtime/stack.js';
import { DockerSandbox, LABEL_KEY } from '../../sandbox/docker-sandbox.js';
import type { SuccessorForkResult, successorForkWorkflow } from '../../workflows/successor-fork.js';
import { dockerSkipped, requireDocker } from '../helpers/docker.js';
import { freePort, freshPostgresDatabase, tempDir, testEnv } from '../helpers/env.js';
import { startWorkers, type RunningWorkers } from '../helpers/harness.js';
import { countRows, seedForkableAgent, snapshotAgent } from '../helpers/fork-fixture.js';
import { repoRoot, run } from '../helpers/spawn.js';
import { bundle as bundleWorkflows, productWorkflowsPath, stopStackTest } from '../helpers/temporal.js';
import { until } from '../helpers/wait.js';

const data = tempDir('forks-e2e');
let stack: Stack;
let client: Client;
let dbUrl: string;
let dropDb: () => Promise<void>;
let docker: Docker;
let workers: RunningWorkers | undefined;
let connection: NativeConnection;

beforeAll(async () => {
  const fresh = await freshPostgresDatabase('mindloop_forks_e2e');
  dbUrl = fresh.url;
  dropDb = fresh.drop;
  docker = await requireDocker();
  stack = await startStack({
    env: testEnv({ MINDLOOP_DATA_DIR: data.path, TEMPORAL_PORT: await freePort(), DATABASE_URL: dbUrl }),
    ui: false,
  });
  client = new Client({ connection: await Connection.connect(stack.temporal.connection) });
  connection = await NativeConnection.connect(stack.temporal.connection);
  const workflowBundle = await bundleWorkflows(productWorkflowsPath);
  workers = await startWorkers(connection, [
    {
      taskQueue: 'mindloop',
      workflowBundle,
      activities: classifyActivityErrors({
        ...createForkActivities({ db: stack.db.db, dataDir: data.path }),
        ...createLifeforceActivities({ db: stack.db.db, prices: defaultPrices }),
      }),
    },
    { taskQueue: 'sandbox', activities: createSandboxActivities({ docker, sandbox: new DockerSandbox(docker) }) },
  ]);
}, 180_000);
afterAll(async () => {
  await stopStackTest({ runs: [workers?.stop()], connections: [connection, client?.connection], stack, dropDb, data });
}, 60_000);

const ml = (...args: string[]) =>
  run(
    process.execPath,
    [`${repoRoot}/bin/mindloop.mjs`, ...args],
    { DATABASE_URL: dbUrl, TEMPORAL_ADDRESS: stack.temporal.address, MINDLOOP_DATA_DIR: data.path },
    150_000,
  );

async function strategyOf(agentId: string) {
  const [r] = await stack.db.db
    .select()
    .from(agentConfig)
    .where(and(eq(agentConfig.agentId, agentId), eq(agentConfig.key, 'abstracts_strategy')));
  return r?.value;
}
async function forkGone(forkId: string) {
  expect(
    await stack.db.db
      .select()
      .from(agents)
      .where(eq(agents.id, `fk.${forkId}`)),
  ).toEqual([]);
  expect(await countRows(stack.db.db, `fk.${forkId}`)).toBe(0);
  expect(
    await stack.db.db
      .select()
      .from(forkToolRegistry)
      .where(eq(forkToolRegistry.agentId, `fk.${forkId}`)),
  ).toEqual([]);
  const [f] = await stack.db.db.select().from(forks).where(eq(forks.id, forkId));
  expect(f?.cleanedAt).toBeInstanceOf(Date);
}
const forkIdIn = (stdout: string) => {
  const m = /\(fork\/(demo-[a-z0-9]+)\)/.exec(stdout);
  if (!m) throw new Error(`no fork id in: ${stdout}`);
  return m[1]!;
};

describe.skipIf(dockerSkipped)('successor forks on the real stack, through the CLI', () => {
  it('`forks demo` reaches APPROVE at the gate; `forks approve` applies it to the parent, once', async () => {
    const demo = await ml('forks', 'demo', '--timeout-s', '120');
    expect(demo.code, demo.stderr).toBe(0);
    const id = forkIdIn(demo.stdout);
    expect(demo.stdout).toContain('forking fork-demo: abstracts strategy recency → keyword_cluster');
    expect(demo.stdout).toMatch(/verdict {6}APPROVE \(confidence 0\.\d+\), not applied/);
    expect(demo.stdout).toMatch(/artifact {5}evaluation\.json/);
    expect(demo.stdout).toContain(`awaiting the human gate: \`npx mindloop forks approve ${id}\``);
    // Progress on stderr: the phases as the fork went through them, the last one the gate.
    expect(demo.stderr).toMatch(/^ +\d+\.\d s {2}awaiting_approval/m);
    await forkGone(id);
    expect(await strategyOf('fork-demo')).toBe('recency');

    const approve = await ml('forks', 'approve', id, '--by', 'tester');
    expect(approve.code, approve.stderr).toBe(0);
    expect(approve.stdout.trim()).toBe(`fork ${id}: gate approved; applied abstracts_strategy = keyword_cluster`);
    expect(await strategyOf('fork-demo')).toBe('keyword_cluster');
    const [v] = await stack.db.db.select().from(verdicts).where(eq(verdicts.forkId, id));
    expect(v).toMatchObject({ verdict: 'APPROVE', appliedBy: 'tester', appliedAt: expect.any(Date) });
    const r = (await client.workflow.getHandle(`fork/${id}`).result()) as SuccessorForkResult;
    expect(r).toMatchObject({ gate: 'approved', applied: 'abstracts_strategy = keyword_cluster' });

    // The gate is closed: a second answer fails with the reason and changes nothing.
    const again = await ml('forks', 'reject', id);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`no fork workflow fork/${id} is running (finished, or the deadline passed`);
    expect(await strategyOf('fork-demo')).toBe('keyword_cluster');
    const show = await ml('forks', 'show', id);
    expect(show.stdout).toContain(`gate approved by tester`);
  }, 240_000);

  it('`forks reject` discards the APPROVE: nothing is applied, the parent is byte for byte unchanged', async () => {
    await seedForkableAgent(stack.db.db, 'rej-parent');
    const before = await snapshotAgent(stack.db.db, 'rej-parent');
    const demo = await ml('forks', 'demo', '--agent', 'rej-parent', '--timeout-s', '120');
    expect(demo.code, demo.stderr).toBe(0);
    const id = forkIdIn(demo.stdout);
    expect(demo.stdout).toMatch(/verdict {6}APPROVE/);
    expect(await snapshotAgent(stack.db.db, 'rej-parent')).toBe(before);

    const reject = await ml('forks', 'reject', id, '--by', 'tester');
    expect(reject.code, reject.stderr).toBe(0);
    expect(reject.stdout.trim()).toBe(`fork ${id}: gate rejected; nothing applied`);
    expect(await client.workflow.getHandle(`fork/${id}`).result()).toMatchObject({
      verdict: 'APPROVE',
      gate: 'rejected',
      applied: null,
    });
    expect(await snapshotAgent(stack.db.db, 'rej-parent')).toBe(before);
    const [v] = await stack.db.db.select().from(verdicts).where(eq(verdicts.forkId, id));
    expect(v?.appliedAt).toBeNull();
    await forkGone(id);

    const unknown = await ml('forks', 'approve', 'no-such-fork');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no fork workflow fork/no-such-fork is running');
  }, 240_000);

  it('a tool swap runs its tests in the Docker sandbox: pass → APPROVE; filling the disk budget → REJECT budget_exceeded: disk', async () => {
    await seedForkableAgent(stack.db.db, 'tool-parent');
    const tests =
      "import { add } from './tool.mjs';\nif (add(2, 3) !== 5) process.exit(1);\nconsole.log('in sandbox as uid', process.getuid());\n";
    const start = (id: string, patch: Record<string, unknown>, budget?: Record<string, number>) =>
      client.workflow.execute<typeof successorForkWorkflow>('successorForkWorkflow', {
        taskQueue: 'mindloop',
        workflowId: `fork/${id}`,
        args: [
          {
            agentId: 'tool-parent',
            patch: patch as never,
            evaluation: { kind: 'tool_tests' },
            budget,
            approvalDeadlineMs: 1000,
          },
        ],
      });
    const good = await start('e2e-tool-ok', {
      kind: 'tool',
      tool: 'adder',
      implementation: 'export const add = (a, b) => a + b;',
      tests,
    });
    expect(good).toMatchObject({ verdict: 'APPROVE', gate: 'expired', applied: null });
    expect(good.evaluationSummary).toMatch(/^tool tests passed in the sandbox in \d+ ms$/);
    const report = good.artifacts.find((a) => a.name === 'tool-tests.json');
    expect(report).toBeDefined();

    const filler =
      "import { writeFileSync } from 'node:fs';\nwriteFileSync('big.bin', Buffer.alloc(8 << 20, 1));\nconsole.log('wrote 8 MiB');\n";
    const full = await start(
      'e2e-tool-disk',
      { kind: 'tool', tool: 'adder', implementation: 'export const add = (a, b) => a + b;', tests: filler },
      { diskBytes: 4 << 20 },
    );
    expect(full.verdict).toBe('REJECT');
    expect(full.evaluationSummary).toMatch(/^budget_exceeded: disk/);
    const [f] = await stack.db.db.select().from(forks).where(eq(forks.id, 'e2e-tool-disk'));
    expect(f?.status).toBe('budget_exceeded');
    await forkGone('e2e-tool-ok');
    await forkGone('e2e-tool-disk');
    // No container of either run is left behind.
    const left = await docker.listContainers({ all: true, filters: { label: [LABEL_KEY] } });
    expect(left.filter((c) => /^fork\/e2e-tool-/.test(c.Labels[LABEL_KEY] ?? ''))).toEqual([]);
  }, 240_000);

  it('tests that spin past the CPU-time budget → REJECT budget_exceeded: cpu (cpus only throttles)', async () => {
    await seedForkableAgent(stack.db.db, 'cpu-parent');
    const r = await client.workflow.execute<typeof successorForkWorkflow>('successorForkWorkflow', {
      taskQueue: 'mindloop',
      workflowId: 'fork/e2e-tool-cpu',
      args: [
        {
          agentId: 'cpu-parent',
          patch: {
            kind: 'tool',
            tool: 'adder',
            implementation: 'export const add = (a, b) => a + b;',
            tests: 'for (;;) {}\n',
          },
          evaluation: { kind: 'tool_tests' },
          budget: { wallMs: 60_000, diskBytes: 64 << 20, cpus: 1, cpuSeconds: 1 },
        },
      ],
    });
    expect(r).toMatchObject({ verdict: 'REJECT', confidence: 1, gate: 'not_applicable' });
    expect(r.evaluationSummary).toMatch(/^budget_exceeded: cpu \(sandbox run stopped after \d+ ms\)$/);
    // Stopped by the CPU-time limit, well before the wall clock.
    expect(Number(/after (\d+) ms/.exec(r.evaluationSummary)![1])).toBeLessThan(30_000);
    const [f] = await stack.db.db.select().from(forks).where(eq(forks.id, 'e2e-tool-cpu'));
    expect(f?.status).toBe('budget_exceeded');
    await forkGone('e2e-tool-cpu');
  }, 120_000);

  it('cancelled while its tests run in the sandbox: no container, no copy, no verdict; the parent untouched', async () => {
    await seedForkableAgent(stack.db.db, 'cancel-parent');
    const before = await snapshotAgent(stack.db.db, 'cancel-parent');
    const id = 'e2e-tool-cancel';
    const key = `fork/${id}/tool-tests`;
    const containers = () => docker.listContainers({ all: true, filters: { label: [`${LABEL_KEY}=${key}`] } });
    const h = await client.workflow.start<typeof successorForkWorkflow>('successorForkWorkflow', {
      taskQueue: 'mindloop',
      workflowId: `fork/${id}`,
      args: [
        {
          agentId: 'cancel-parent',
          patch: {
            kind: 'tool',
            tool: 'adder',
            implementation: 'export const add = (a, b) => a + b;',
            tests: "console.log('testing');\nawait new Promise((r) => setTimeout(r, 120_000));\n",
          },
          evaluation: { kind: 'tool_tests' },
          budget: { wallMs: 300_000, diskBytes: 64 << 20 },
        },
      ],
    });
    // Wait until the tests run in their container, with the copy in place.
    await until(
      async () => (await containers()).some((c) => c.State === 'running'),
      `a running container labelled ${key}`,
      60_000,
      200,
    );
    expect(await countRows(stack.db.db, `fk.${id}`)).toBeGreaterThan(50);

    await h.cancel();
    const err = await h.result().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect((err as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    // Once the fork reports cancelled, its container is already gone (not left for the reaper).
    expect(await containers()).toEqual([]);
    await forkGone(id);
    const [f] = await stack.db.db.select().from(forks).where(eq(forks.id, id));
    expect(f?.status).toBe('cancelled');
    expect(await stack.db.db.select().from(verdicts).where(eq(verdicts.forkId, id))).toEqual([]);
    expect(await snapshotAgent(stack.db.db, 'cancel-parent')).toBe(before);
  }, 180_000);
});
