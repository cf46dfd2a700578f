/**
 * nerveWorkflow on the time-skipping server with the real nerve activities on the real
 * Postgres and the real router (a scripted `agent` row that reads the prompt back). A run on a
 * repetitive stream goes deliberate → hybrid → reflex with a model answering the ground truth
 * (across continue-as-new); a model that is wrong in one case gets a rule promoted, demoted at
 * its first bad decision, and the mode steps back; a budget that runs out pauses the run in
 * phase `exhausted` until a grant and a `resume` signal; a bad input fails at once.
 *
 * The reflex arc: a forced reflex decides in workflow code, one arm and one flush activity per
 * lease of 50 decisions, each lease reserved once and settled once at its decisions' costs; a
 * rule that decides badly is demoted before the next decision; a flush that fails after its work
 * is retried without recording, learning or charging twice; a scant budget leases what it
 * covers and pauses when it cannot cover one decision.
 */
import { Context } from '@temporalio/activity';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLlmRouter, type ScriptedReplyFn } from '../../activities/llm/index.js';
import { classifyActivityErrors } from '../../activities/errors.js';
import { createNerveActivities, type NerveFlushReflexInput } from '../../activities/nerves.js';
import { workflowIds } from '../../core/ids.js';
import { budgetIds, lfRound } from '../../core/lifeforce.js';
import { collisionBuckets, collisionMachine, collisionPolicy } from '../../core/nerves/collision.js';
import { carveBudget, ensureBudget, grantLifeforce } from '../../db/queries/lifeforce.js';
import {
  agents,
  lifeforceBudgets,
  lifeforceLedger,
  llmCalls,
  llmRegistry,
  nerveDecisions,
  nerveRuleEvents,
  nerveRules,
} from '../../db/schema/index.js';
import {
  nerveResumeSignal,
  nerveStatusQuery,
  type NerveWorkflowInput,
  type nerveWorkflow,
} from '../../workflows/nerve.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { startWorkers, untilQuery, type RunningWorkers } from '../helpers/harness.js';
import { collisionModel } from '../helpers/nerves.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

const suite = timeSkippingSuite();
let h: MigratedDatabase;
let workers: RunningWorkers | undefined;
/** The model of the current test. */
let script: ScriptedReplyFn = collisionModel();
/** Which flushes fail once, after their work is done (a worker that died before answering). */
let flushFailsOnce: (input: NerveFlushReflexInput) => boolean = () => false;
const taskQueue = 'nerve-test';

beforeAll(async () => {
  h = await migratedDatabase('mindloop_nerve_wf', 4);
  const llm = createLlmRouter({ db: h.db, env: {}, toolsDir: repoToolsDir, scriptedReply: (i) => script(i) });
  // Classified as the worker classifies them: a budget that cannot cover a decision is `LifeforceExhausted`.
  const real = classifyActivityErrors(createNerveActivities({ db: h.db, llm }));
  const activities: typeof real = {
    ...real,
    async nerveFlushReflex(input) {
      const r = await real.nerveFlushReflex(input);
      if (Context.current().info.attempt === 1 && flushFailsOnce(input))
        throw new Error('the worker died before the flush answered');
      return r;
    },
  };
  workers = await startWorkers(suite.env, [{ taskQueue, workflowBundle: suite.bundle, activities }]);
}, 180_000);
afterAll(async () => {
  await workers?.stop();
  await h?.dispose();
});

async function seedAgent(id: string, nerveLf: number): Promise<void> {
  await h.db.insert(agents).values({ id, name: id });
  await h.db.insert(llmRegistry).values({
    agentId: id,
    name: 'nerve-model',
    provider: 'scripted',
    model: 'scripted-nerve',
    role: 'agent',
    priority: 1,
  });
  await ensureBudget(h.db, { id: budgetIds.agent(id), agentId: id, scope: 'agent', settings: { capacity: 100_000 } });
  const carved = await carveBudget(h.db, {
    parentId: budgetIds.agent(id),
    id: budgetIds.nerve(id, 'collision'),
    agentId: id,
    scope: 'nerve',
    amount: nerveLf,
  });
  expect(carved.ok).toBe(true);
}

/** The collision nerve's rules, all promoted: the ground truth, except where `wrong` names another action. */
async function seedRules(agentId: string, wrong: Record<string, string> = {}): Promise<void> {
  const promotedAt = new Date(Date.UTC(2026, 10, 1));
  await h.db.insert(nerveRules).values(
    Object.keys(collisionMachine.states).flatMap((state) =>
      collisionBuckets.map((bucket) => {
        const action = wrong[`${state}/${bucket}`] ?? collisionPolicy(state, bucket);
        return {
          agentId,
          nerve: 'collision',
          state,
          bucket,
          action,
          support: 20,
          agreement: 1,
          counts: { [action]: 20 },
          promotedAt,
        };
      }),
    ),
  );
}

/** Activities the run scheduled, by type (a retry is the same scheduled activity). */
async function activityCalls(handle: WorkflowHandle): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const e of (await handle.fetchHistory()).events ?? []) {
    const name = e.activityTaskScheduledEventAttributes?.activityType?.name;
    if (name) counts[name] = (counts[name] ?? 0) + 1;
  }
  return counts;
}

const decisionsOf = (agentId: string) =>
  h.db.select().from(nerveDecisions).where(eq(nerveDecisions.agentId, agentId)).orderBy(asc(nerveDecisions.id));
const nerveLedger = (agentId: string) =>
  h.db
    .select()
    .from(lifeforceLedger)
    .where(eq(lifeforceLedger.budgetId, budgetIds.nerve(agentId, 'collision')))
    .orderBy(asc(lifeforceLedger.id));
const nerveBudget = async (agentId: string) =>
  (
    await h.db
      .select()
      .from(lifeforceBudgets)
      .where(eq(lifeforceBudgets.id, budgetIds.nerve(agentId, 'collision')))
  )[0]!;
const noModel: ScriptedReplyFn = () => {
  throw new Error('the LLM must not be asked');
};

/**
 * The ledger of a run that decided on reflex arcs: one reserve per lease and one settle of it,
 * each settle the sum of the costs of the decisions recorded under that lease, and everything the
 * run counted settled (nothing left reserved).
 */
async function expectLeasesSettled(agentId: string, tallyLf: number): Promise<{ leases: number }> {
  const ledger = await nerveLedger(agentId);
  const leases = ledger.filter((e) => e.kind === 'reserve' && e.idempotencyKey.startsWith('nerve-arc:'));
  const settles = ledger.filter((e) => e.kind === 'settle');
  expect(settles.map((e) => e.reservationKey)).toEqual(leases.map((e) => e.idempotencyKey));
  const rows = await decisionsOf(agentId);
  for (const settle of settles) {
    const decided = rows.filter((d) => d.ledgerKey === settle.reservationKey);
    expect(settle.amount, settle.reservationKey!).toBe(lfRound(decided.reduce((sum, d) => sum + d.lf, 0)));
  }
  const budget = await nerveBudget(agentId);
  expect(lfRound(budget.spent)).toBe(tallyLf);
  expect(lfRound(settles.reduce((sum, e) => sum + e.amount, 0))).toBe(tallyLf);
  expect(budget.reserved).toBe(0);
  return { leases: leases.length };
}

const start = (input: NerveWorkflowInput) =>
  suite.env.client.workflow.start<typeof nerveWorkflow>('nerveWorkflow', {
    taskQueue,
    workflowId: workflowIds.nerve(input.agentId, input.nerve),
    args: [input],
  });

/** The modes of an agent's decisions in order, runs of the same mode collapsed. */
async function modeRuns(agentId: string): Promise<string[]> {
  const rows = await h.db
    .select({ mode: nerveDecisions.mode })
    .from(nerveDecisions)
    .where(eq(nerveDecisions.agentId, agentId))
    .orderBy(asc(nerveDecisions.id));
  return rows.map((r) => r.mode).filter((m, i, all) => i === 0 || all[i - 1] !== m);
}

describe('nerveWorkflow (time-skipping, Postgres, scripted model)', () => {
  it('goes deliberate → hybrid → reflex on a repetitive stream with a model that answers the ground truth', async () => {
    script = collisionModel();
    await seedAgent('steady', 1_000);
    const handle = await start({
      agentId: 'steady',
      nerve: 'collision',
      seed: 5,
      steps: 240,
      scenario: 'repetitive',
      promoteAfter: 3,
      stepsPerRun: 100,
    });
    const s = await handle.result();
    expect(s).toMatchObject({ phase: 'done', step: 240, mode: 'reflex', pauses: 0, organs: ['sensors'] });
    expect(s.tally).toMatchObject({ decisions: 240, bad: 0, invalid: 0, demotions: 0 });
    expect(s.tally.promotions).toBeGreaterThan(5);
    for (const m of ['deliberate', 'hybrid', 'reflex'] as const) expect(s.tally.byMode[m], m).toBeGreaterThan(0);
    expect(await modeRuns('steady')).toEqual(['deliberate', 'hybrid', 'reflex']);
    // The table's decisions were made on reflex arcs, recorded under their leases.
    const byTable = (await decisionsOf('steady')).filter((d) => d.decidedBy === 'table');
    expect(byTable.length).toBe(s.tally.byDecider.table);
    expect(byTable.every((d) => d.ledgerKey?.startsWith('nerve-arc:'))).toBe(true);
    // Only the LLM's decisions called it; the rest was rules and the table.
    expect(await h.db.$count(llmCalls, eq(llmCalls.agentId, 'steady'))).toBe(s.tally.byDecider.llm);
    expect(s.tally.byDecider.rule + s.tally.byDecider.table).toBeGreaterThan(s.tally.byDecider.llm);
    // Every LF the run counted was spent on the nerve's budget: the states' costs and the calls the router charged.
    const [budget] = await h.db
      .select()
      .from(lifeforceBudgets)
      .where(eq(lifeforceBudgets.id, budgetIds.nerve('steady', 'collision')));
    expect(lfRound(budget!.spent)).toBe(s.tally.lf);
    expect(budget!.reserved).toBe(0);
    // It continued as new under its step cap (runs of 100, 100 and 40 steps).
    const firstRun = await suite.env.client.workflow
      .getHandle(handle.workflowId, handle.firstExecutionRunId)
      .fetchHistory();
    expect(firstRun.events?.at(-1)?.workflowExecutionContinuedAsNewEventAttributes).toBeTruthy();
  });

  it('demotes a rule learned from a consistently wrong model at its first bad decision, and the mode steps back', async () => {
    // Wrong in one case: it keeps watching an obstacle 8–20 m away closing fast, instead of evading.
    script = collisionModel((state, bucket) => (state === 'EVALUATE' && bucket === 'near_fast' ? 'stay' : undefined));
    await seedAgent('misled', 1_000);
    const s = await (
      await start({
        agentId: 'misled',
        nerve: 'collision',
        seed: 5,
        steps: 240,
        scenario: 'repetitive',
        promoteAfter: 3,
        coverage: 1,
      })
    ).result();
    expect(s.phase).toBe('done');
    expect(s.tally.demotions).toBeGreaterThan(0);
    const events = await h.db
      .select()
      .from(nerveRuleEvents)
      .where(
        and(
          eq(nerveRuleEvents.agentId, 'misled'),
          eq(nerveRuleEvents.state, 'EVALUATE'),
          eq(nerveRuleEvents.bucket, 'near_fast'),
        ),
      )
      .orderBy(asc(nerveRuleEvents.id));
    expect(events.slice(0, 2).map((e) => [e.kind, e.action])).toEqual([
      ['promote', 'stay'],
      ['demote', 'stay'],
    ]);
    // The demoting decision was the rule's, and the next one in that case is the LLM's again.
    const inCase = await h.db
      .select()
      .from(nerveDecisions)
      .where(
        and(
          eq(nerveDecisions.agentId, 'misled'),
          eq(nerveDecisions.state, 'EVALUATE'),
          eq(nerveDecisions.bucket, 'near_fast'),
        ),
      )
      .orderBy(asc(nerveDecisions.id));
    const demoting = inCase.findIndex((d) => d.id === events[1]!.decisionId);
    expect(inCase[demoting]).toMatchObject({
      decidedBy: expect.stringMatching(/rule|table/),
      outcome: 'bad',
      action: 'stay',
    });
    expect(inCase[demoting + 1]).toMatchObject({ decidedBy: 'llm' });
    // Reflex needs every case covered (coverage 1): the demotion stepped the nerve back to hybrid.
    const runs = await modeRuns('misled');
    expect(runs.slice(0, 3)).toEqual(['deliberate', 'hybrid', 'reflex']);
    expect(runs.slice(3)).toContain('hybrid');
  });

  it('pauses in phase exhausted when the budget runs out, and goes on after a grant and resume', async () => {
    script = collisionModel();
    await seedAgent('frugal', 1);
    const handle = await start({ agentId: 'frugal', nerve: 'collision', seed: 11, steps: 30 });
    const status = await untilQuery(
      handle,
      nerveStatusQuery,
      (s) => s.phase === 'exhausted',
      'the exhausted phase',
      10_000,
      50,
    );
    expect(status).toMatchObject({ phase: 'exhausted', pauses: 1 });
    expect(status.exhausted?.reason).toMatch(/lifeforce exhausted/);
    expect(status.step).toBeLessThan(30);
    // Still paused: nothing happens without a resume.
    await new Promise((r) => setTimeout(r, 300));
    expect((await handle.query(nerveStatusQuery)).step).toBe(status.step);
    expect(
      await grantLifeforce(h.db, {
        budgetId: budgetIds.nerve('frugal', 'collision'),
        amount: 100,
        key: 'grant:frugal',
        reason: 'test',
      }),
    ).toBe(true);
    await handle.signal(nerveResumeSignal);
    const s = await handle.result();
    expect(s).toMatchObject({ phase: 'done', step: 30, pauses: 1, exhausted: null });
    expect(s.tally.decisions).toBe(30);
    expect(await h.db.$count(nerveDecisions, eq(nerveDecisions.agentId, 'frugal'))).toBe(30);
  });

  it('decides a forced reflex in workflow code: one arm and one flush per lease, each lease settled at its decisions’ costs', async () => {
    script = noModel;
    await seedAgent('reflexive', 1_000);
    await seedRules('reflexive');
    const handle = await start({
      agentId: 'reflexive',
      nerve: 'collision',
      seed: 5,
      steps: 120,
      scenario: 'repetitive',
      mode: 'reflex',
    });
    const s = await handle.result();
    expect(s).toMatchObject({ phase: 'done', step: 120, mode: 'reflex', setting: 'reflex' });
    expect(s.tally).toMatchObject({
      decisions: 120,
      bad: 0,
      byMode: { deliberate: 0, hybrid: 0, reflex: 120 },
      byDecider: { llm: 0, rule: 0, table: 120 },
    });
    // 120 decisions, 6 activities: leases of 50, 50 and 20, each armed once and flushed once.
    expect(await activityCalls(handle)).toEqual({ nerveArmReflex: 3, nerveFlushReflex: 3 });
    expect((await nerveLedger('reflexive')).filter((e) => e.kind === 'reserve').map((e) => e.amount)).toEqual([
      2.5, 2.5, 1,
    ]);
    expect(await expectLeasesSettled('reflexive', s.tally.lf)).toEqual({ leases: 3 });
    const rows = await decisionsOf('reflexive');
    expect(rows).toHaveLength(120);
    expect(rows.every((d) => d.decidedBy === 'table' && d.mode === 'reflex' && d.outcome === 'ok')).toBe(true);
    expect(rows.map((d) => d.idempotencyKey)).toEqual(
      rows.map((_, i) => `${handle.workflowId}/${handle.firstExecutionRunId}/${i}`),
    );
  });

  it('demotes a rule at its first bad decision before the next decision, and re-arms without it', async () => {
    script = noModel;
    await seedAgent('rash', 1_000);
    // A wrong rule: an obstacle 20–50 m ahead closing fast is ignored (the truth is to look at it).
    await seedRules('rash', { 'IDLE/mid_fast': 'stay' });
    const handle = await start({
      agentId: 'rash',
      nerve: 'collision',
      seed: 5,
      steps: 60,
      scenario: 'repetitive',
      mode: 'reflex',
    });
    const s = await handle.result();
    expect(s.tally).toMatchObject({ decisions: 60, bad: 1, demotions: 1, byDecider: { llm: 0, table: 60 } });
    const rows = await decisionsOf('rash');
    const bad = rows.findIndex((d) => d.outcome === 'bad');
    expect(rows[bad]).toMatchObject({ state: 'IDLE', bucket: 'mid_fast', action: 'stay', decidedBy: 'table' });
    // The next reading is the same case (the nerve stayed IDLE): the rule is gone, the fallback looks.
    expect(rows[bad + 1]).toMatchObject({
      state: 'IDLE',
      bucket: 'mid_fast',
      action: 'detect',
      decidedBy: 'table',
      outcome: 'ok',
    });
    const events = await h.db.select().from(nerveRuleEvents).where(eq(nerveRuleEvents.agentId, 'rash'));
    expect(events).toMatchObject([
      { kind: 'demote', state: 'IDLE', bucket: 'mid_fast', action: 'stay', decisionId: rows[bad]!.id },
    ]);
    // The demotion cut the first lease short: one more lease than 60 decisions take at 50 a lease.
    const calls = await activityCalls(handle);
    expect(calls).toEqual({
      nerveArmReflex: 1 + Math.ceil((60 - bad - 1) / 50),
      nerveFlushReflex: 1 + Math.ceil((60 - bad - 1) / 50),
    });
    expect(await expectLeasesSettled('rash', s.tally.lf)).toEqual({ leases: calls.nerveArmReflex });
  });

  it('retries a flush that failed after its work, recording, learning and charging nothing twice', async () => {
    script = noModel;
    await seedAgent('shaky', 1_000);
    await seedRules('shaky', { 'IDLE/mid_fast': 'stay' });
    // The flush with the demoting decision does everything, then its worker dies before answering.
    flushFailsOnce = (input) => input.agentId === 'shaky' && input.decisions.some((d) => d.outcome === 'bad');
    try {
      const handle = await start({
        agentId: 'shaky',
        nerve: 'collision',
        seed: 5,
        steps: 60,
        scenario: 'repetitive',
        mode: 'reflex',
      });
      const s = await handle.result();
      expect(s).toMatchObject({ phase: 'done', step: 60 });
      expect(s.tally).toMatchObject({ decisions: 60, bad: 1, demotions: 1 });
      // The retried flush is the same scheduled activity, started a second time.
      const history = (await handle.fetchHistory()).events ?? [];
      expect(history.some((e) => (e.activityTaskStartedEventAttributes?.attempt ?? 0) === 2)).toBe(true);
      const calls = await activityCalls(handle);
      expect(calls.nerveFlushReflex).toBe(calls.nerveArmReflex);
      expect(await h.db.$count(nerveDecisions, eq(nerveDecisions.agentId, 'shaky'))).toBe(60);
      expect(await h.db.$count(nerveRuleEvents, eq(nerveRuleEvents.agentId, 'shaky'))).toBe(1);
      expect(await expectLeasesSettled('shaky', s.tally.lf)).toEqual({ leases: calls.nerveArmReflex });
    } finally {
      flushFailsOnce = () => false;
    }
  });

  it('leases what a scant budget covers, pauses when it cannot cover one decision, and goes on after a grant and resume', async () => {
    script = noModel;
    await seedAgent('meagre', 0.3);
    await seedRules('meagre');
    const handle = await start({
      agentId: 'meagre',
      nerve: 'collision',
      seed: 5,
      steps: 40,
      scenario: 'repetitive',
      mode: 'reflex',
    });
    const status = await untilQuery(
      handle,
      nerveStatusQuery,
      (s) => s.phase === 'exhausted',
      'the exhausted phase',
      10_000,
      50,
    );
    expect(status).toMatchObject({ phase: 'exhausted', pauses: 1, exhausted: { needed: 0.05 } });
    expect(status.step).toBeGreaterThan(0);
    expect(status.step).toBeLessThan(40);
    // 0.3 LF leased 6 decisions at 0.05, and each later lease what was left.
    const leases = (await nerveLedger('meagre')).filter((e) => e.kind === 'reserve');
    expect(leases[0]).toMatchObject({ amount: 0.3 });
    expect(leases.every((e) => e.amount <= 0.3)).toBe(true);
    expect(
      await grantLifeforce(h.db, {
        budgetId: budgetIds.nerve('meagre', 'collision'),
        amount: 100,
        key: 'grant:meagre',
        reason: 'test',
      }),
    ).toBe(true);
    await handle.signal(nerveResumeSignal);
    const s = await handle.result();
    expect(s).toMatchObject({ phase: 'done', step: 40, pauses: 1, exhausted: null });
    expect(s.tally).toMatchObject({ decisions: 40, byDecider: { table: 40 } });
    await expectLeasesSettled('meagre', s.tally.lf);
  });

  it('fails at once on a bad input, naming the field', async () => {
    const err = await (
      await start({ agentId: 'bad-input', nerve: 'collision', seed: -1, steps: 0 } as NerveWorkflowInput)
    )
      .result()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect(String((err as WorkflowFailedError).cause?.message)).toMatch(/seed.*steps|steps.*seed/s);
  });
});
