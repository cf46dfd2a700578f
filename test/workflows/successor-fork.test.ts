/**
 * successorForkWorkflow on the time-skipping server with the REAL fork activities on a real
 * Postgres (fresh database, migrations applied), a scripted validator model for the judge, and
 * the sandbox-queue activity backed by a local-process test double of the Sandbox contract
 * (isolation itself is tested in test/sandbox/).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { and, eq } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { classifyActivityErrors } from '../../activities/errors.js';
import { createForkActivities } from '../../activities/forks/index.js';
import { createLifeforceActivities } from '../../activities/lifeforce.js';
import { createLlmRouter } from '../../activities/llm/index.js';
import { createSandboxActivities } from '../../activities/sandbox.js';
import { canonicalJson, forkPatchSchema, type SuccessorForkInput } from '../../core/fork.js';
import { defaultPrices } from '../../core/lifeforce.js';
import { configureBudget } from '../../db/queries/lifeforce.js';
import {
  agentConfig,
  agents,
  forks,
  forkToolRegistry,
  lifeforceBudgets,
  lifeforceLedger,
  llmCalls,
  toolRegistry,
  verdicts,
} from '../../db/schema/index.js';
import {
  approveForkUpdate,
  forkStateQuery,
  rejectForkUpdate,
  type ForkState,
  type SuccessorForkResult,
  type successorForkWorkflow,
} from '../../workflows/successor-fork.js';
import { migratedDatabase, tempDir, type MigratedDatabase } from '../helpers/env.js';
import { countRows, seedForkableAgent, snapshotAgent } from '../helpers/fork-fixture.js';
import { startWorkers, type RunningWorkers } from '../helpers/harness.js';
import { LocalProcessSandbox } from '../helpers/local-sandbox.js';
import { bundle as bundleWorkflows, createTimeSkippingEnv, productWorkflowsPath } from '../helpers/temporal.js';

let env: TestWorkflowEnvironment;
let bundle: WorkflowBundleWithSourceMap;
let handle: MigratedDatabase;
const data = tempDir('forks');
const sandbox = new LocalProcessSandbox();
/**
 * Test switches: make the evaluation block (heartbeating) until it is cancelled; make it fail
 * (a non-retryable activity error); make recording the verdict fail (the workflow fails).
 */
const hooks = { blockEvaluation: false, failEvaluation: false, failRecord: false, evaluationBlocked: false };

beforeAll(async () => {
  handle = await migratedDatabase('mindloop_forks', 10);
  bundle = await bundleWorkflows(productWorkflowsPath);
}, 120_000);
afterAll(async () => {
  await handle?.dispose();
  data.remove();
});

function forkActivities() {
  const real = createForkActivities({
    db: handle.db,
    llm: createLlmRouter({ db: handle.db, env: {}, toolsDir: '' }),
    dataDir: data.path,
  });
  // Classified as the worker classifies them: a budget that cannot cover a call is `LifeforceExhausted`.
  return classifyActivityErrors({
    ...real,
    ...createLifeforceActivities({ db: handle.db, prices: defaultPrices }),
    async forkEvaluateAbstracts(input: { forkId: string; budgetId?: string }) {
      if (hooks.failEvaluation)
        throw ApplicationFailure.create({ type: 'TestBoom', nonRetryable: true, message: 'evaluation blew up' });
      if (hooks.blockEvaluation) {
        hooks.evaluationBlocked = true;
        const ctx = Context.current();
        await new Promise<never>((_, reject) => {
          const beat = setInterval(() => ctx.heartbeat(), 100);
          ctx.cancellationSignal.addEventListener('abort', () => {
            clearInterval(beat);
            reject(ctx.cancellationSignal.reason);
          });
        });
      }
      return real.forkEvaluateAbstracts(input);
    },
    async forkRecordVerdict(input: Parameters<typeof real.forkRecordVerdict>[0]) {
      if (hooks.failRecord)
        throw ApplicationFailure.create({ type: 'TestBoom', nonRetryable: true, message: 'verdict store down' });
      return real.forkRecordVerdict(input);
    },
  });
}

let workers: RunningWorkers | undefined;
// One time-skipping server per test: when that server refuses a workflow's completion (a
// cancellation racing an activity that just finished, under load) it keeps a time-skipping lock
// for good, and every later timer on it would wait in real time. A test's server goes with it.
beforeEach(async () => {
  env = await createTimeSkippingEnv();
  workers = await startWorkers(env, [
    { taskQueue: 'mindloop', workflowBundle: bundle, activities: forkActivities() },
    { taskQueue: 'sandbox', activities: createSandboxActivities({ docker: {} as never, sandbox }) },
  ]);
}, 120_000);
afterEach(async () => {
  await workers?.stop();
  await env?.teardown();
}, 60_000);

const strategyPatch = { kind: 'strategy', strategy: 'keyword_cluster' } as const;
const replay = { kind: 'abstracts_replay', lastN: 30, window: 10 } as const;

function start(id: string, input: SuccessorForkInput): Promise<WorkflowHandle<typeof successorForkWorkflow>> {
  return env.client.workflow.start('successorForkWorkflow', {
    taskQueue: 'mindloop',
    workflowId: `fork/${id}`,
    args: [input],
  });
}

/** The workflow's result once it has closed, waited for without unlocking time skipping. */
async function closedResult(h: WorkflowHandle): Promise<unknown> {
  const deadline = Date.now() + 60_000;
  while ((await h.describe()).status.name === 'RUNNING') {
    if (Date.now() > deadline) throw new Error(`${h.workflowId} still running after 60 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return h.result();
}

async function phase(h: WorkflowHandle, want: ForkState['phase'], timeoutMs = 30_000): Promise<ForkState> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await h.query(forkStateQuery);
    if (s.phase === want) return s;
    if (Date.now() > deadline) throw new Error(`fork stayed in phase ${s.phase}, wanted ${want}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function verdictOf(forkId: string) {
  const [v] = await handle.db.select().from(verdicts).where(eq(verdicts.forkId, forkId));
  return v;
}
async function forkRow(forkId: string) {
  const [f] = await handle.db.select().from(forks).where(eq(forks.id, forkId));
  return f!;
}
async function forkGone(forkId: string) {
  expect(
    await handle.db
      .select()
      .from(agents)
      .where(eq(agents.id, `fk.${forkId}`)),
  ).toEqual([]);
  expect(await countRows(handle.db, `fk.${forkId}`)).toBe(0);
  expect(
    await handle.db
      .select()
      .from(forkToolRegistry)
      .where(eq(forkToolRegistry.agentId, `fk.${forkId}`)),
  ).toEqual([]);
  expect((await forkRow(forkId)).cleanedAt).toBeInstanceOf(Date);
}
async function lfBudget(id: string) {
  const [b] = await handle.db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, id));
  return b!;
}
/** Reservations on the budget that no settle or release closed. */
async function openReservations(budgetId: string): Promise<string[]> {
  const entries = await handle.db.select().from(lifeforceLedger).where(eq(lifeforceLedger.budgetId, budgetId));
  const closed = new Set(entries.filter((e) => e.reservationKey).map((e) => e.reservationKey));
  return entries.filter((e) => e.kind === 'reserve' && !closed.has(e.idempotencyKey)).map((e) => e.idempotencyKey);
}
async function strategyOf(agentId: string) {
  const [r] = await handle.db
    .select()
    .from(agentConfig)
    .where(and(eq(agentConfig.agentId, agentId), eq(agentConfig.key, 'abstracts_strategy')));
  return r?.value;
}

async function failureOf(p: Promise<unknown>): Promise<Error> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowFailedError);
  return (err as WorkflowFailedError).cause as Error;
}

describe('successorForkWorkflow', () => {
  it('rejects bad input at once with a non-retryable error naming the fields', async () => {
    const bad = await failureOf(
      env.client.workflow.execute('successorForkWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'fork/bad-1',
        args: [
          {
            agentId: 'has space',
            patch: { kind: 'strategy', strategy: 'zip' },
            evaluation: { kind: 'abstracts_replay' },
            budget: { costUsd: -1 },
          },
        ],
      }),
    );
    expect(bad).toBeInstanceOf(ApplicationFailure);
    expect((bad as ApplicationFailure).type).toBe('InvalidInput');
    expect((bad as ApplicationFailure).nonRetryable).toBe(true);
    expect(bad.message).toMatch(/agentId: .*patch\.strategy: .*budget\.costUsd: /);

    const mismatch = await failureOf(
      env.client.workflow.execute('successorForkWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'fork/bad-2',
        args: [{ agentId: 'x', patch: strategyPatch, evaluation: { kind: 'tool_tests' } }],
      }),
    );
    expect(mismatch.message).toContain('tool_tests cannot evaluate a strategy patch');

    // Waited out by polling, not by `result()`: that unlocks the test server's time skipping,
    // and skipped time can time out an activity still running on a loaded machine; the test
    // server then keeps a time-skipping lock for it forever and the later tests' timers never
    // fire. This fork fails in its first activity, so it needs no skipped time.
    const missing = await failureOf(
      start('bad-3', { agentId: 'nobody', patch: strategyPatch, evaluation: replay }).then(closedResult),
    );
    expect((missing.cause as Error | undefined)?.message ?? missing.message).toContain('agent nobody does not exist');
    expect(await handle.db.select().from(agents).where(eq(agents.id, 'fk.bad-3'))).toEqual([]);
  });

  it('evaluates the demo patch end to end: APPROVE stored with patch_hash and artifacts, copy destroyed, parent untouched byte for byte; reject discards', async () => {
    await seedForkableAgent(handle.db, 'p-demo');
    const before = await snapshotAgent(handle.db, 'p-demo');
    // The copy holds every row the parent had when it spawned (the parent's ledger grows after: it funds the fork).
    const rowsAtSpawn = await countRows(handle.db, 'p-demo');
    const h = await start('demo-1', { agentId: 'p-demo', patch: strategyPatch, evaluation: replay });
    const s = await phase(h, 'awaiting_approval');
    expect(s).toMatchObject({ verdict: 'APPROVE', gate: 'pending' });
    expect(s.rows).toBe(rowsAtSpawn);

    const v = (await verdictOf('demo-1'))!;
    const canonical = canonicalJson(forkPatchSchema.parse(strategyPatch));
    expect(canonical).toBe('{"kind":"strategy","strategy":"keyword_cluster","target":"abstracts"}');
    expect(v).toMatchObject({
      verdict: 'APPROVE',
      agentId: 'p-demo',
      patchHash: createHash('sha256').update(canonical).digest('hex'),
      appliedAt: null,
    });
    expect(v.confidence).toBeGreaterThan(0.5);
    expect(v.evaluationSummary).toMatch(/^3 windows; parent: coverage .*patched: coverage/);
    expect(v.artifacts.map((a) => a.name)).toEqual(['evaluation.json', 'verdict.json']);
    for (const a of v.artifacts) {
      const text = readFileSync(fileURLToPath(a.uri!), 'utf8');
      expect(createHash('sha256').update(text).digest('hex')).toBe(a.sha256);
    }
    const report = JSON.parse(readFileSync(fileURLToPath(v.artifacts[0]!.uri!), 'utf8')) as {
      baselineStrategy: string;
      candidateStrategy: string;
      windows: unknown[];
    };
    expect([report.baselineStrategy, report.candidateStrategy, report.windows.length]).toEqual([
      'recency',
      'keyword_cluster',
      3,
    ]);

    await forkGone('demo-1');
    expect((await forkRow('demo-1')).status).toBe('completed');
    // Its lifeforce: the evaluation's fixed cost (no judge), charged to its own budget, closed at
    // cleanup; the parent (unlimited until configured) paid exactly that through its carve.
    expect((await forkRow('demo-1')).usage).toMatchObject({ lifeforce: defaultPrices.lfPerForkEvaluation });
    expect(await lfBudget('fork:demo-1')).toMatchObject({
      spent: defaultPrices.lfPerForkEvaluation,
      reserved: 0,
      closedAt: expect.any(Date),
    });
    expect(await lfBudget('agent:p-demo')).toMatchObject({
      capacity: null,
      spent: defaultPrices.lfPerForkEvaluation,
      reserved: 0,
    });
    expect(await snapshotAgent(handle.db, 'p-demo')).toBe(before);

    expect(await h.executeUpdate(rejectForkUpdate, { args: [{ by: 'bob' }] })).toEqual({
      gate: 'rejected',
      applied: null,
    });
    const r = await h.result();
    expect(r).toMatchObject({ verdict: 'APPROVE', gate: 'rejected', applied: null });
    expect(await snapshotAgent(handle.db, 'p-demo')).toBe(before);
    expect(await forkRow('demo-1')).toMatchObject({ gate: 'rejected', gateBy: 'bob' });
    // A second answer after the gate closed is refused.
    await expect(h.executeUpdate(approveForkUpdate, { args: [{}] })).rejects.toThrow();
  });

  it('copies every row with references remapped inside the copy', async () => {
    await seedForkableAgent(handle.db, 'p-copy');
    const acts = createForkActivities({ db: handle.db, dataDir: data.path });
    const r = await acts.forkSpawn({
      forkId: 'copy-1',
      workflowId: 'fork/copy-1',
      agentId: 'p-copy',
      patch: strategyPatch as never,
      evaluation: replay as never,
      budget: {} as never,
      startedAtMs: Date.now(),
    });
    expect(r.rows).toBe(await countRows(handle.db, 'p-copy'));
    expect(await countRows(handle.db, 'fk.copy-1')).toBe(r.rows);
    // A retry finds the first attempt's copy.
    expect(
      (
        await acts.forkSpawn({
          forkId: 'copy-1',
          workflowId: 'fork/copy-1',
          agentId: 'p-copy',
          patch: strategyPatch as never,
          evaluation: replay as never,
          budget: {} as never,
          startedAtMs: Date.now(),
        })
      ).rows,
    ).toBe(r.rows);
    const { rows } = await handle.pool.query<{ bad: number }>(
      `select
        (select count(*) from goal_links l join goals g on g.id = l.parent_goal_id where l.agent_id = 'fk.copy-1' and g.agent_id <> 'fk.copy-1') +
        (select count(*) from tasks t join goals g on g.id = t.goal_id where t.agent_id = 'fk.copy-1' and g.agent_id <> 'fk.copy-1') +
        (select count(*) from links l join concepts c on c.id in (l.from_concept_id, l.to_concept_id) where l.agent_id = 'fk.copy-1' and c.agent_id <> 'fk.copy-1') +
        (select count(*) from unverified_facts f join llm_recent_responses r on r.id = f.response_id where f.agent_id = 'fk.copy-1' and r.agent_id <> 'fk.copy-1') +
        (select count(*) from llm_calls c join llm_registry r on r.id = c.registry_id where c.agent_id = 'fk.copy-1' and r.agent_id <> 'fk.copy-1') +
        (select count(*) from campaign_phases p join campaigns c on c.id = p.campaign_id where p.agent_id = 'fk.copy-1' and c.agent_id <> 'fk.copy-1') +
        (select count(*) from decision_log d join escalations e on e.id = d.escalation_id where d.agent_id = 'fk.copy-1' and e.agent_id <> 'fk.copy-1') +
        (select count(*) from abstracts a, jsonb_array_elements_text(a.sources->'responses') s(id) join llm_recent_responses r on r.id = s.id::bigint where a.agent_id = 'fk.copy-1' and r.agent_id <> 'fk.copy-1')
        as bad`,
    );
    expect(Number(rows[0]!.bad)).toBe(0);
    const copied = await handle.pool.query<{ n: number }>(
      `select count(*)::int as n from abstracts a, jsonb_array_elements_text(a.sources->'responses') s(id) where a.agent_id = 'fk.copy-1'`,
    );
    expect(copied.rows[0]!.n).toBe(3);
    expect((await acts.forkCleanup({ forkId: 'copy-1' })).removedAgent).toBe(true);
    expect((await acts.forkCleanup({ forkId: 'copy-1' })).removedAgent).toBe(false);
    await forkGone('copy-1');
  });

  it('approve applies the patch to the parent (once); the deadline applies nothing', async () => {
    await seedForkableAgent(handle.db, 'p-appr');
    await seedForkableAgent(handle.db, 'p-late');
    const h = await start('appr-1', { agentId: 'p-appr', patch: strategyPatch, evaluation: replay });
    await phase(h, 'awaiting_approval');
    expect(await strategyOf('p-appr')).toBe('recency');
    expect(await h.executeUpdate(approveForkUpdate, { args: [{ by: 'alice' }] })).toEqual({
      gate: 'approved',
      applied: 'abstracts_strategy = keyword_cluster',
    });
    expect(await h.result()).toMatchObject({ gate: 'approved', applied: 'abstracts_strategy = keyword_cluster' });
    expect(await strategyOf('p-appr')).toBe('keyword_cluster');
    expect(await verdictOf('appr-1')).toMatchObject({ appliedBy: 'alice', appliedAt: expect.any(Date) });
    // Re-running the gate activity (a retry) does not apply twice.
    const acts = createForkActivities({ db: handle.db, dataDir: data.path });
    expect(await acts.forkGate({ forkId: 'appr-1', decision: 'approved', by: 'alice' })).toEqual({
      gate: 'approved',
      applied: 'alice',
    });

    const late = await start('late-1', {
      agentId: 'p-late',
      patch: strategyPatch,
      evaluation: replay,
      approvalDeadlineMs: 3_600_000,
    });
    expect(await late.result()).toMatchObject({ verdict: 'APPROVE', gate: 'expired', applied: null });
    expect(await strategyOf('p-late')).toBe('recency');
    expect(await forkRow('late-1')).toMatchObject({ gate: 'expired', gateBy: 'deadline' });
    expect((await verdictOf('late-1'))!.appliedAt).toBeNull();
  });

  it('wall-time budget: the evaluation is stopped and the verdict is REJECT with the reason', async () => {
    await seedForkableAgent(handle.db, 'p-wall');
    hooks.blockEvaluation = true;
    try {
      const h = await start('wall-1', {
        agentId: 'p-wall',
        patch: strategyPatch,
        evaluation: replay,
        budget: { wallMs: 3000 },
      });
      const r = await h.result();
      expect(r).toMatchObject({
        verdict: 'REJECT',
        confidence: 1,
        gate: 'not_applicable',
        evaluationSummary: 'budget_exceeded: wall_time (3000 ms)',
      });
    } finally {
      hooks.blockEvaluation = false;
      hooks.evaluationBlocked = false;
    }
    expect(await verdictOf('wall-1')).toMatchObject({
      verdict: 'REJECT',
      evaluationSummary: 'budget_exceeded: wall_time (3000 ms)',
    });
    expect((await forkRow('wall-1')).status).toBe('budget_exceeded');
    await forkGone('wall-1');
  });

  it('model-cost budget: the judge spends on the fork until the budget runs out → REJECT', async () => {
    await seedForkableAgent(handle.db, 'p-cost', { validatorCostPer1k: 1 });
    // Lifeforce far above the dollar budget: the model-cost check is what stops it.
    const r = await (
      await start('cost-1', {
        agentId: 'p-cost',
        patch: strategyPatch,
        evaluation: { ...replay, judge: true },
        budget: { costUsd: 0.01, lifeforce: 1_000_000 },
      })
    ).result();
    expect(r.verdict).toBe('REJECT');
    expect(r.evaluationSummary).toMatch(/^budget_exceeded: cost \(spent \$0\.\d+ > \$0\.01\)$/);
    const f = await forkRow('cost-1');
    expect(f.status).toBe('budget_exceeded');
    expect(Number((f.usage as { costUsd: number }).costUsd)).toBeGreaterThan(0.01);
    // The parent paid nothing: its calls are the two it was seeded with.
    expect(await handle.db.select().from(llmCalls).where(eq(llmCalls.agentId, 'p-cost'))).toHaveLength(2);
    await forkGone('cost-1');
  });

  it('cancel mid-evaluation: nothing of the fork is left', async () => {
    await seedForkableAgent(handle.db, 'p-cancel');
    const before = await snapshotAgent(handle.db, 'p-cancel');
    hooks.blockEvaluation = true;
    try {
      const h = await start('cancel-1', { agentId: 'p-cancel', patch: strategyPatch, evaluation: replay });
      await phase(h, 'evaluating');
      // Cancelled once the evaluation itself runs, not while the budget's carve (a short activity)
      // may be completing: the time-skipping server refuses a workflow's cancellation of an
      // activity that completed in the same task, and that workflow then never moves again.
      for (let i = 0; !hooks.evaluationBlocked; i++) {
        if (i > 600) throw new Error('the evaluation never started');
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(await countRows(handle.db, 'fk.cancel-1')).toBeGreaterThan(50);
      await h.cancel();
      const err = await failureOf(h.result());
      expect(err).toBeInstanceOf(CancelledFailure);
    } finally {
      hooks.blockEvaluation = false;
      hooks.evaluationBlocked = false;
    }
    await forkGone('cancel-1');
    expect((await forkRow('cancel-1')).status).toBe('cancelled');
    expect(await verdictOf('cancel-1')).toBeUndefined();
    expect(await snapshotAgent(handle.db, 'p-cancel')).toBe(before);
  });

  it('failure after spawn: an evaluation that errors is a REJECT, and a workflow that fails still destroys its copy; parent untouched', async () => {
    await seedForkableAgent(handle.db, 'p-fail');
    const before = await snapshotAgent(handle.db, 'p-fail');
    try {
      hooks.failEvaluation = true;
      const r = await (
        await start('fail-eval-1', { agentId: 'p-fail', patch: strategyPatch, evaluation: replay })
      ).result();
      expect(r).toMatchObject({
        verdict: 'REJECT',
        gate: 'not_applicable',
        evaluationSummary: 'evaluation failed: evaluation blew up',
      });
      expect((await forkRow('fail-eval-1')).status).toBe('failed');
      await forkGone('fail-eval-1');
      hooks.failEvaluation = false;

      hooks.failRecord = true;
      const h = await start('fail-rec-1', { agentId: 'p-fail', patch: strategyPatch, evaluation: replay });
      const err = await failureOf(h.result());
      expect((err.cause as Error | undefined)?.message ?? err.message).toContain('verdict store down');
    } finally {
      hooks.failEvaluation = false;
      hooks.failRecord = false;
    }
    // The copy existed (the evaluation ran on it) and is gone; no verdict; the parent is as it was.
    expect((await forkRow('fail-rec-1')).readyAt).toBeInstanceOf(Date);
    expect((await forkRow('fail-rec-1')).status).toBe('failed');
    await forkGone('fail-rec-1');
    expect(await verdictOf('fail-rec-1')).toBeUndefined();
    expect(await snapshotAgent(handle.db, 'p-fail')).toBe(before);
  });

  it('tool swap: tests run in the sandbox; pass → APPROVE (applied as the next registry version), fail → REJECT', async () => {
    await seedForkableAgent(handle.db, 'p-tool');
    await handle.db.insert(toolRegistry).values({
      name: 'adder',
      kind: 'generated',
      implementation: 'export const add = (a, b) => a - b;',
      tests: '',
      status: 'active',
    });
    const tests =
      "import { add } from './tool.mjs';\nif (add(2, 3) !== 5) { console.error('add(2, 3) = ' + add(2, 3)); process.exit(1); }\nconsole.log('ok');\n";
    const good = await start('tool-1', {
      agentId: 'p-tool',
      patch: { kind: 'tool', tool: 'adder', implementation: 'export const add = (a, b) => a + b;', tests },
      evaluation: { kind: 'tool_tests' },
    });
    await phase(good, 'awaiting_approval');
    expect(await good.executeUpdate(approveForkUpdate, { args: [{ by: 'carol' }] })).toEqual({
      gate: 'approved',
      applied: 'tool adder v2',
    });
    const bad = await (
      await start('tool-2', {
        agentId: 'p-tool',
        patch: { kind: 'tool', tool: 'adder', implementation: 'export const add = (a, b) => a * b;', tests },
        evaluation: { kind: 'tool_tests' },
      })
    ).result();
    expect(bad.verdict).toBe('REJECT');
    expect(bad.evaluationSummary).toContain('add(2, 3) = 6');
    // The default budget (1 h, 10 GiB) is above the sandbox caps: the verdict says so.
    expect(bad.caveats).toEqual([
      "sandbox cap: the tool tests ran with 600 s of wall time, not the budget's 3600 s",
      "sandbox cap: the tool tests had 256 MiB of disk, not the budget's 10 GiB",
    ]);
    // A CPU-time budget reaches the sandbox run; within the caps there is no caveat.
    const cpu = await (
      await start('tool-3', {
        agentId: 'p-tool',
        patch: { kind: 'tool', tool: 'adder', implementation: 'export const add = (a, b) => a + b;', tests },
        evaluation: { kind: 'tool_tests' },
        budget: { wallMs: 120_000, diskBytes: 32 << 20, cpus: 1, cpuSeconds: 7 },
        approvalDeadlineMs: 1000,
      })
    ).result();
    expect(cpu).toMatchObject({
      verdict: 'APPROVE',
      gate: 'expired',
      caveats: ['only the tests shipped with the patch were run'],
    });
    expect(
      sandbox.runs.map((r) => [
        r.key,
        r.command.join(' '),
        Object.keys(r.files ?? {})
          .sort()
          .join(','),
      ]),
    ).toEqual([
      ['fork/tool-1/tool-tests', 'node tool.test.mjs', 'tool.mjs,tool.test.mjs'],
      ['fork/tool-2/tool-tests', 'node tool.test.mjs', 'tool.mjs,tool.test.mjs'],
      ['fork/tool-3/tool-tests', 'node tool.test.mjs', 'tool.mjs,tool.test.mjs'],
    ]);
    expect(sandbox.runs.map((r) => r.budget)).toEqual([
      { wallMs: 600_000, cpus: 2, diskBytes: 256 << 20, cpuSeconds: 1200 },
      { wallMs: 600_000, cpus: 2, diskBytes: 256 << 20, cpuSeconds: 1200 },
      { wallMs: 120_000, cpus: 1, diskBytes: 32 << 20, cpuSeconds: 7 },
    ]);
    const [tool] = await handle.db.select().from(toolRegistry).where(eq(toolRegistry.name, 'adder'));
    expect(tool).toMatchObject({ version: 2, implementation: 'export const add = (a, b) => a + b;' });
    await forkGone('tool-1');
    await forkGone('tool-2');
    await forkGone('tool-3');
  });

  it('verifier: an independent second fork audits the first and the caveat says whether it agreed', async () => {
    await seedForkableAgent(handle.db, 'p-verify');
    const h = await start('ver-1', {
      agentId: 'p-verify',
      patch: strategyPatch,
      evaluation: replay,
      verify: true,
      approvalDeadlineMs: 1000,
    });
    const r: SuccessorForkResult = await h.result();
    expect(r.caveats).toContain('verifier: independent fork agreed (APPROVE)');
    expect(await forkRow('ver-1.vf')).toMatchObject({ auditsForkId: 'ver-1', status: 'completed', gate: null });
    expect((await verdictOf('ver-1.vf'))!.verdict).toBe('APPROVE');
    await forkGone('ver-1.vf');
    expect(existsSync(`${data.path}/forks/ver-1.vf/verdict.json`)).toBe(true);
  });

  it('lifeforce: a budget too small for the evaluation → REJECT budget_exceeded: lifeforce; the rest returns to the parent; the ledger balances', async () => {
    await seedForkableAgent(handle.db, 'p-lf', { validatorCostPer1k: 1 });
    await configureBudget(handle.db, 'p-lf', { capacity: 1000 });
    const fixed = defaultPrices.lfPerForkEvaluation;
    // The fixed cost fits; the judge's first call (its worst case, at $1 per 1 000 prompt tokens) does not.
    const r = await (
      await start('lf-1', {
        agentId: 'p-lf',
        patch: strategyPatch,
        evaluation: { ...replay, judge: true },
        budget: { lifeforce: fixed + 5 },
      })
    ).result();
    expect(r).toMatchObject({ verdict: 'REJECT', confidence: 1, gate: 'not_applicable' });
    expect(r.evaluationSummary).toMatch(
      /^budget_exceeded: lifeforce \(budget fork:lf-1 cannot cover [\d.]+ LF \(balance; available 5 LF\)\)$/,
    );
    expect(await verdictOf('lf-1')).toMatchObject({ verdict: 'REJECT', evaluationSummary: r.evaluationSummary });
    const f = await forkRow('lf-1');
    expect(f.status).toBe('budget_exceeded');
    expect(f.usage).toMatchObject({ lifeforce: fixed });
    await forkGone('lf-1');

    // The fork spent its fixed cost and nothing more; its budget is closed; the parent paid exactly that.
    expect(await lfBudget('fork:lf-1')).toMatchObject({
      spent: fixed,
      funded: fixed,
      reserved: 0,
      balance: 0,
      parentId: 'agent:p-lf',
      closedAt: expect.any(Date),
    });
    expect(await lfBudget('agent:p-lf')).toMatchObject({ spent: fixed, reserved: 0, balance: 1000 - fixed });
    expect(
      await handle.db.select().from(lifeforceLedger).where(eq(lifeforceLedger.reservationKey, 'carve:fork:lf-1')),
    ).toMatchObject([{ kind: 'settle', amount: fixed }]);
    expect(await openReservations('fork:lf-1')).toEqual([]);
    expect(await openReservations('agent:p-lf')).toEqual([]);
    // The refused judge call never reached the model.
    expect(await handle.db.select().from(llmCalls).where(eq(llmCalls.agentId, 'fk.lf-1'))).toEqual([]);
  });

  it('lifeforce: a parent that cannot fund the fork → REJECT budget_exceeded: lifeforce, nothing evaluated, nothing spent', async () => {
    await seedForkableAgent(handle.db, 'p-lf-poor');
    await configureBudget(handle.db, 'p-lf-poor', { capacity: 5 });
    // The default budget: $5 of model cost, 5 000 LF.
    const r = await (await start('lf-2', { agentId: 'p-lf-poor', patch: strategyPatch, evaluation: replay })).result();
    expect(r).toMatchObject({ verdict: 'REJECT', artifacts: [], caveats: ['the evaluation did not start'] });
    expect(r.evaluationSummary).toBe(
      'budget_exceeded: lifeforce (fork:lf-2 not carved: budget agent:p-lf-poor cannot cover 5000 LF (balance; available 5 LF))',
    );
    expect(await forkRow('lf-2')).toMatchObject({
      status: 'budget_exceeded',
      usage: expect.not.objectContaining({ patchApplied: expect.anything() }),
    });
    await forkGone('lf-2');
    expect(await handle.db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, 'fork:lf-2'))).toEqual([]);
    expect(await lfBudget('agent:p-lf-poor')).toMatchObject({ spent: 0, reserved: 0, balance: 5 });
  });
});
