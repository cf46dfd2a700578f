/**
 * nerveDecide on the real Postgres with the real router (a scripted `agent` row): the LLM
 * decides in deliberate mode and the table in reflex (no call); each decision holds and settles
 * its state's cost on the nerve's budget (carved from the agent's on first use) and the router
 * charges the call to the same budget; a retry with the same key decides nothing twice; an
 * unreadable reply is a bad decision that stays put; a budget that cannot cover a decision fails
 * it as the non-retryable LifeforceExhausted; promotions and demotions are logged and undone.
 *
 * The reflex arc's two activities: nerveArmReflex leases K decisions at the costliest state's
 * cost (as many as the budget covers, LifeforceExhausted below one; the nerve budget carved on
 * first use; `auto` arms only where reflex is earned) and compiles the table; nerveFlushReflex
 * records the buffered decisions in one insert, demotes a rule that decided badly and settles the
 * lease at the decisions' costs, and a retry of either changes nothing; decisions whose lease the
 * sweep released before the flush are charged anew, once.
 */
import { ApplicationFailure } from '@temporalio/common';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLlmRouter, type ScriptedReplyFn } from '../../activities/llm/index.js';
import { classifyActivityErrors } from '../../activities/errors.js';
import {
  createNerveActivities,
  type NerveArmReflexInput,
  type NerveDecideInput,
  type NerveFlushReflexInput,
} from '../../activities/nerves.js';
import { budgetIds, defaultPrices, lfRound, llmCost } from '../../core/lifeforce.js';
import type { ArcDecision } from '../../core/nerves/arc.js';
import type { Observation } from '../../core/nerves/nerve.js';
import { carveBudget, ensureBudget, release } from '../../db/queries/lifeforce.js';
import { nerveRuleRows, undoRuleEvent } from '../../db/queries/nerves.js';
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
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { collisionModel } from '../helpers/nerves.js';

let h: MigratedDatabase;
let script: ScriptedReplyFn = () => 'stay';
let acts: ReturnType<typeof createNerveActivities>;

const groundTruth = collisionModel();

beforeAll(async () => {
  h = await migratedDatabase('mindloop_nerves', 4);
  // As the worker runs them: failures classified (activities/errors.ts).
  acts = classifyActivityErrors(
    createNerveActivities({
      db: h.db,
      llm: createLlmRouter({ db: h.db, env: {}, toolsDir: repoToolsDir, scriptedReply: (i) => script(i) }),
      prices: defaultPrices,
    }),
  );
});
afterAll(async () => {
  await h?.dispose();
});

async function seedAgent(id: string, nerveLf: number | null = 100): Promise<void> {
  await h.db.insert(agents).values({ id, name: id });
  await h.db.insert(llmRegistry).values({
    agentId: id,
    name: 'nerve-model',
    provider: 'scripted',
    model: 'scripted-nerve',
    role: 'agent',
    priority: 1,
  });
  if (nerveLf === null) return;
  await ensureBudget(h.db, { id: budgetIds.agent(id), agentId: id, scope: 'agent', settings: { capacity: 10_000 } });
  const carved = await carveBudget(h.db, {
    parentId: budgetIds.agent(id),
    id: budgetIds.nerve(id, 'collision'),
    agentId: id,
    scope: 'nerve',
    amount: nerveLf,
  });
  expect(carved.ok).toBe(true);
}

const approaching: Observation = { t: 3, distanceM: 12, closingSpeedMps: 6, bearingDeg: 5, obstacle: true };
const decide = (agentId: string, key: string, extra: Partial<NerveDecideInput> = {}) =>
  acts.nerveDecide({
    agentId,
    nerve: 'collision',
    state: 'EVALUATE',
    observation: approaching,
    mode: 'deliberate',
    key,
    at: Date.UTC(2026, 10, 24, 12),
    ...extra,
  });
const settledOn = async (budgetId: string) =>
  (
    await h.db
      .select()
      .from(lifeforceLedger)
      .where(and(eq(lifeforceLedger.budgetId, budgetId), eq(lifeforceLedger.kind, 'settle')))
  ).reduce((s, e) => s + e.amount, 0);

describe('nerveDecide', () => {
  it('asks the LLM in deliberate mode, charges the state and the call to the nerve budget, and decides once per key', async () => {
    script = groundTruth;
    await seedAgent('deli');
    const r = await decide('deli', 'deli/1');
    expect(r).toMatchObject({
      action: 'evade',
      to: 'EVADE',
      decidedBy: 'llm',
      mode: 'deliberate',
      modeAfter: 'deliberate',
      outcome: 'ok',
      events: [],
      replayed: false,
    });
    // The state's 0.03 LF and the call's tokens (scripted: ceil(chars / 4)), both settled on the nerve's budget.
    const [call] = await h.db.select().from(llmCalls).where(eq(llmCalls.requestKey, 'deli/1'));
    expect(call).toMatchObject({ purpose: 'nerve', role: 'agent', ok: true, reply: 'evade' });
    expect(r.lf).toBe(lfRound(0.03 + llmCost(defaultPrices, { costPer1kInput: 0, costPer1kOutput: 0 }, call!)));
    const nerveBudget = budgetIds.nerve('deli', 'collision');
    expect(lfRound(await settledOn(nerveBudget))).toBe(r.lf);

    const again = await decide('deli', 'deli/1');
    expect(again).toMatchObject({ action: 'evade', to: 'EVADE', decidedBy: 'llm', lf: r.lf, replayed: true });
    expect(await h.db.$count(nerveDecisions, eq(nerveDecisions.agentId, 'deli'))).toBe(1);
    expect(await h.db.$count(llmCalls, eq(llmCalls.requestKey, 'deli/1'))).toBe(1);
    expect(lfRound(await settledOn(nerveBudget))).toBe(r.lf);
  });

  it('records an unreadable reply as a bad decision that stays in its state', async () => {
    script = () => 'I am not sure what to do here.';
    await seedAgent('vague');
    const r = await decide('vague', 'vague/1');
    expect(r).toMatchObject({ action: null, to: 'EVALUATE', decidedBy: 'llm', outcome: 'bad' });
    const [row] = await h.db.select().from(nerveDecisions).where(eq(nerveDecisions.idempotencyKey, 'vague/1'));
    expect(row).toMatchObject({
      action: null,
      toState: 'EVALUATE',
      outcome: 'bad',
      reply: 'I am not sure what to do here.',
    });
  });

  it('promotes a rule after consistent choices, decides by the table in reflex without the LLM, and demotes it on a bad outcome', async () => {
    // A model that is consistently wrong here: it would keep watching an obstacle 12 m away closing at 6 m/s.
    script = () => 'stay';
    await seedAgent('learner');
    const learning = { promoteAfter: 3, agreement: 0.95, coverage: 0.95, window: 100 };
    const results = [];
    for (let i = 1; i <= 3; i++) results.push(await decide('learner', `learner/${i}`, { learning }));
    expect(results.map((r) => r.outcome)).toEqual(['bad', 'bad', 'bad']);
    expect(results[2]!.events).toMatchObject([
      { kind: 'promote', state: 'EVALUATE', bucket: 'near_fast', action: 'stay', support: 3, agreement: 1 },
    ]);
    expect(results[2]!.modeAfter).toBe('reflex');

    const calls = await h.db.$count(llmCalls, eq(llmCalls.agentId, 'learner'));
    const reflex = await decide('learner', 'learner/4', { learning, mode: 'auto' });
    expect(reflex).toMatchObject({
      action: 'stay',
      decidedBy: 'table',
      mode: 'reflex',
      outcome: 'bad',
      modeAfter: 'deliberate',
    });
    expect(reflex.events).toMatchObject([
      {
        kind: 'demote',
        state: 'EVALUATE',
        bucket: 'near_fast',
        action: 'stay',
        removed: { rule: { action: 'stay', support: 3 }, counts: { stay: 3 } },
      },
    ]);
    expect(await h.db.$count(llmCalls, eq(llmCalls.agentId, 'learner'))).toBe(calls);
    const [rule] = await nerveRuleRows(h.db, 'learner', 'collision');
    expect(rule).toMatchObject({ action: null, counts: {}, support: 0 });
    expect(rule!.demotedAt).not.toBeNull();

    // Undo the demotion: the rule and its counters come back; an undo is logged and cannot repeat.
    const events = await h.db
      .select()
      .from(nerveRuleEvents)
      .where(eq(nerveRuleEvents.agentId, 'learner'))
      .orderBy(nerveRuleEvents.id);
    const decisionKeys = new Map(
      (await h.db.select().from(nerveDecisions).where(eq(nerveDecisions.agentId, 'learner'))).map((d) => [
        d.id,
        d.idempotencyKey,
      ]),
    );
    expect(events.map((e) => [e.kind, decisionKeys.get(e.decisionId!)])).toEqual([
      ['promote', 'learner/3'],
      ['demote', 'learner/4'],
    ]);
    const undone = await undoRuleEvent(h.db, events[1]!.id);
    expect(undone).toMatchObject({ ok: true, event: { kind: 'demote' } });
    expect((await nerveRuleRows(h.db, 'learner', 'collision'))[0]).toMatchObject({
      action: 'stay',
      support: 3,
      counts: { stay: 3 },
    });
    expect(await undoRuleEvent(h.db, events[1]!.id)).toMatchObject({ ok: false });
    // And the promotion after it: the case has no rule again.
    expect(await undoRuleEvent(h.db, events[0]!.id)).toMatchObject({ ok: true });
    expect((await nerveRuleRows(h.db, 'learner', 'collision'))[0]).toMatchObject({ action: null, counts: { stay: 3 } });
  });

  it('takes the table fallback in a forced reflex where it has no rule, without the LLM', async () => {
    script = () => {
      throw new Error('the LLM must not be asked');
    };
    await seedAgent('reflexive');
    const r = await decide('reflexive', 'reflexive/1', { mode: 'reflex', state: 'IDLE' });
    expect(r).toMatchObject({
      action: 'detect',
      to: 'DETECT',
      decidedBy: 'table',
      mode: 'reflex',
      outcome: 'ok',
      lf: 0.01,
    });
  });

  it('carves the nerve budget from the agent on first use', async () => {
    script = groundTruth;
    await seedAgent('nobudget', null);
    const r = await decide('nobudget', 'nobudget/1');
    expect(r.outcome).toBe('ok');
    const [budget] = await h.db
      .select()
      .from(lifeforceBudgets)
      .where(eq(lifeforceBudgets.id, budgetIds.nerve('nobudget', 'collision')));
    expect(budget).toMatchObject({ scope: 'nerve', parentId: budgetIds.agent('nobudget'), capacity: null });
    expect(lfRound(budget!.spent)).toBe(r.lf);
  });

  it('fails as the non-retryable LifeforceExhausted when the budget cannot cover the decision or its call', async () => {
    script = groundTruth;
    await seedAgent('poor', 0.02);
    // 0.03 LF for EVALUATE: refused before anything runs.
    const refused = await decide('poor', 'poor/1').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(ApplicationFailure);
    expect(refused).toMatchObject({ type: 'LifeforceExhausted', nonRetryable: true });
    expect((refused as ApplicationFailure).details?.[0]).toMatchObject({
      budgetId: budgetIds.nerve('poor', 'collision'),
      reason: 'balance',
      needed: 0.03,
    });
    // IDLE costs 0.01, but the call's worst case does not fit: the hold goes back.
    const byCall = await decide('poor', 'poor/2', { state: 'IDLE' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(byCall).toMatchObject({ type: 'LifeforceExhausted', nonRetryable: true });
    const [budget] = await h.db
      .select()
      .from(lifeforceBudgets)
      .where(eq(lifeforceBudgets.id, budgetIds.nerve('poor', 'collision')));
    expect(budget).toMatchObject({ reserved: 0, spent: 0, balance: 0.02 });
    expect(await h.db.$count(nerveDecisions, eq(nerveDecisions.agentId, 'poor'))).toBe(0);
  });
});

/** A promoted rule for a case, written as the learning would have left it. */
async function seedRule(agentId: string, state: string, bucket: string, action: string): Promise<void> {
  await h.db.insert(nerveRules).values({
    agentId,
    nerve: 'collision',
    state,
    bucket,
    action,
    support: 20,
    agreement: 1,
    counts: { [action]: 20 },
    promotedAt: new Date(Date.UTC(2026, 10, 1)),
  });
}

const at = Date.UTC(2026, 10, 24, 12);
const arm = (agentId: string, key: string, extra: Partial<NerveArmReflexInput> = {}) =>
  acts.nerveArmReflex({ agentId, nerve: 'collision', mode: 'reflex', key, decisions: 50, at, ...extra });
const flush = (
  agentId: string,
  leaseKey: string,
  decisions: ArcDecision[],
  extra: Partial<NerveFlushReflexInput> = {},
) => acts.nerveFlushReflex({ agentId, nerve: 'collision', leaseKey, decisions, ...extra });
const ledgerOf = (budgetId: string) =>
  h.db.select().from(lifeforceLedger).where(eq(lifeforceLedger.budgetId, budgetId)).orderBy(lifeforceLedger.id);
/** Decisions as the workflow buffers them: `n` steps of a nerve cruising in IDLE with nothing sensed. */
const cruising = (prefix: string, n: number, from = 0): ArcDecision[] =>
  Array.from({ length: n }, (_, i) => ({
    key: `${prefix}/${from + i}`,
    state: 'IDLE',
    bucket: 'none',
    action: 'stay',
    to: 'IDLE',
    outcome: 'ok',
    lf: 0.01,
    at: at + i,
  }));

describe('nerveArmReflex', () => {
  it("leases K decisions at the costliest state's cost and compiles the table; a retry finds the same lease", async () => {
    await seedAgent('armed');
    await seedRule('armed', 'EVALUATE', 'near_fast', 'evade');
    const r = await arm('armed', 'wf/armed/run/0');
    expect(r).toEqual({
      armed: true,
      leaseKey: 'nerve-arc:wf/armed/run/0',
      decisions: 50,
      reserved: 2.5,
      perDecision: 0.05,
      table: {
        entries: { 'EVALUATE/near_fast': 'evade' },
        fallback: { IDLE: 'detect', DETECT: 'evaluate', EVALUATE: 'stay', EVADE: 'stay', RESUME: 'stay' },
      },
      mode: 'reflex',
    });
    const budgetId = budgetIds.nerve('armed', 'collision');
    const [hold] = (await ledgerOf(budgetId)).filter((e) => e.kind === 'reserve');
    expect(hold).toMatchObject({ idempotencyKey: 'nerve-arc:wf/armed/run/0', amount: 2.5, operation: 'nerve' });
    // Long enough for the lease's decisions and a worker's crash; the sweep returns it after.
    expect(hold!.deadline!.getTime()).toBe(at + 10 * 60_000);

    expect(await arm('armed', 'wf/armed/run/0')).toEqual(r);
    const [budget] = await h.db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, budgetId));
    expect(budget).toMatchObject({ reserved: 2.5, spent: 0 });
    expect((await ledgerOf(budgetId)).filter((e) => e.kind === 'reserve')).toHaveLength(1);
  });

  it('leases as many decisions as the budget covers, and fails as LifeforceExhausted below one', async () => {
    await seedAgent('scant', 0.12);
    expect(await arm('scant', 'scant/0')).toMatchObject({ armed: true, decisions: 2, reserved: 0.1 });
    const [budget] = await h.db
      .select()
      .from(lifeforceBudgets)
      .where(eq(lifeforceBudgets.id, budgetIds.nerve('scant', 'collision')));
    expect(budget).toMatchObject({ reserved: 0.1, balance: 0.02 });

    const refused = await arm('scant', 'scant/2').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(ApplicationFailure);
    expect(refused).toMatchObject({ type: 'LifeforceExhausted', nonRetryable: true });
    expect((refused as ApplicationFailure).details?.[0]).toMatchObject({
      budgetId: budgetIds.nerve('scant', 'collision'),
      reason: 'balance',
      needed: 0.05,
      available: 0.02,
    });
    expect((await ledgerOf(budgetIds.nerve('scant', 'collision'))).filter((e) => e.kind === 'reserve')).toHaveLength(1);
  });

  it('carves the nerve budget from the agent on first use', async () => {
    await seedAgent('arcfirst', null);
    expect(await arm('arcfirst', 'arcfirst/0', { decisions: 10 })).toMatchObject({
      armed: true,
      decisions: 10,
      reserved: 0.5,
    });
    const [budget] = await h.db
      .select()
      .from(lifeforceBudgets)
      .where(eq(lifeforceBudgets.id, budgetIds.nerve('arcfirst', 'collision')));
    expect(budget).toMatchObject({
      scope: 'nerve',
      parentId: budgetIds.agent('arcfirst'),
      capacity: null,
      reserved: 0.5,
    });
  });

  it('arms auto only where the rules have earned reflex, holding nothing otherwise', async () => {
    await seedAgent('novice');
    expect(await arm('novice', 'novice/0', { mode: 'auto' })).toEqual({ armed: false, mode: 'deliberate' });
    expect(await ledgerOf(budgetIds.nerve('novice', 'collision'))).toHaveLength(1); // the carve's funding only
    await seedRule('novice', 'IDLE', 'none', 'stay');
    expect(await arm('novice', 'novice/1', { mode: 'auto' })).toMatchObject({
      armed: true,
      mode: 'reflex',
      table: { entries: { 'IDLE/none': 'stay' } },
    });
  });

  it('leases anew under the next key when the key was leased and flushed before', async () => {
    await seedAgent('again');
    const first = await arm('again', 'again/7', { decisions: 3 });
    expect(first).toMatchObject({ armed: true, leaseKey: 'nerve-arc:again/7' });
    await flush('again', 'nerve-arc:again/7', []);
    const second = await arm('again', 'again/7', { decisions: 3 });
    expect(second).toMatchObject({ armed: true, leaseKey: 'nerve-arc:again/7#2', decisions: 3, reserved: 0.15 });
    // Its retry finds that lease, not a third.
    expect(await arm('again', 'again/7', { decisions: 3 })).toEqual(second);
  });
});

describe('nerveFlushReflex', () => {
  it('records the buffered decisions in one insert under the lease, settles it at their costs, and a retry changes nothing', async () => {
    await seedAgent('flusher');
    const lease = await arm('flusher', 'flusher/lease/0', { decisions: 10 });
    if (!lease.armed) throw new Error('not armed');
    const decisions = [
      ...cruising('flusher', 3),
      {
        key: 'flusher/3',
        state: 'IDLE',
        bucket: 'mid_fast',
        action: 'detect',
        to: 'DETECT',
        outcome: 'ok' as const,
        lf: 0.01,
        at,
      },
      {
        key: 'flusher/4',
        state: 'DETECT',
        bucket: 'mid_fast',
        action: 'evaluate',
        to: 'EVALUATE',
        outcome: 'ok' as const,
        lf: 0.02,
        at,
      },
    ];
    const r = await flush('flusher', lease.leaseKey, decisions);
    expect(r).toEqual({ recorded: 5, events: [], modeAfter: 'deliberate', charged: 0.06, replayed: false });
    const rows = await h.db
      .select()
      .from(nerveDecisions)
      .where(eq(nerveDecisions.agentId, 'flusher'))
      .orderBy(nerveDecisions.id);
    expect(rows.map((d) => d.idempotencyKey)).toEqual([
      'flusher/0',
      'flusher/1',
      'flusher/2',
      'flusher/3',
      'flusher/4',
    ]);
    for (const row of rows)
      expect(row).toMatchObject({
        decidedBy: 'table',
        mode: 'reflex',
        ledgerKey: lease.leaseKey,
        latencyMs: 0,
        reply: null,
      });
    expect(rows.map((d) => d.lf)).toEqual([0.01, 0.01, 0.01, 0.01, 0.02]);
    expect(rows.at(-1)).toMatchObject({
      state: 'DETECT',
      bucket: 'mid_fast',
      action: 'evaluate',
      toState: 'EVALUATE',
      outcome: 'ok',
    });
    const budgetId = budgetIds.nerve('flusher', 'collision');
    const settle = (await ledgerOf(budgetId)).filter((e) => e.kind === 'settle');
    expect(settle).toMatchObject([
      { idempotencyKey: `close:${lease.leaseKey}`, reservationKey: lease.leaseKey, amount: 0.06 },
    ]);
    let [budget] = await h.db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, budgetId));
    expect(budget).toMatchObject({ reserved: 0, spent: 0.06 });

    // The worker died before the answer reached the workflow: the retry records, learns and charges nothing twice.
    expect(await flush('flusher', lease.leaseKey, decisions)).toEqual({
      recorded: 0,
      events: [],
      modeAfter: 'deliberate',
      charged: 0.06,
      replayed: true,
    });
    expect(await h.db.$count(nerveDecisions, eq(nerveDecisions.agentId, 'flusher'))).toBe(5);
    expect((await ledgerOf(budgetId)).filter((e) => e.kind === 'settle')).toHaveLength(1);
    [budget] = await h.db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, budgetId));
    expect(budget).toMatchObject({ reserved: 0, spent: 0.06 });
  });

  it('demotes a rule that decided badly, once, and a retry answers with the same demotion', async () => {
    await seedAgent('demoter');
    await seedRule('demoter', 'IDLE', 'none', 'stay');
    // A wrong rule: ignoring an obstacle 20–50 m ahead closing fast (the truth is to look at it).
    await seedRule('demoter', 'IDLE', 'mid_fast', 'stay');
    const lease = await arm('demoter', 'demoter/lease/0', { decisions: 10 });
    if (!lease.armed) throw new Error('not armed');
    expect(lease.mode).toBe('reflex');
    const decisions: ArcDecision[] = [
      ...cruising('demoter', 2),
      {
        key: 'demoter/2',
        state: 'IDLE',
        bucket: 'mid_fast',
        action: 'stay',
        to: 'IDLE',
        outcome: 'bad',
        lf: 0.01,
        at: at + 2,
      },
    ];
    const r = await flush('demoter', lease.leaseKey, decisions);
    expect(r).toMatchObject({ recorded: 3, charged: 0.03, replayed: false, modeAfter: 'hybrid' });
    expect(r.events).toMatchObject([
      {
        kind: 'demote',
        state: 'IDLE',
        bucket: 'mid_fast',
        action: 'stay',
        support: 20,
        removed: { rule: { action: 'stay' }, counts: { stay: 20 } },
      },
    ]);
    const rules = await nerveRuleRows(h.db, 'demoter', 'collision');
    expect(rules.find((x) => x.bucket === 'mid_fast')).toMatchObject({ action: null, counts: {}, support: 0 });
    expect(rules.find((x) => x.bucket === 'none')).toMatchObject({ action: 'stay' });
    const [demoting] = await h.db.select().from(nerveDecisions).where(eq(nerveDecisions.idempotencyKey, 'demoter/2'));
    const logged = await h.db.select().from(nerveRuleEvents).where(eq(nerveRuleEvents.agentId, 'demoter'));
    expect(logged).toMatchObject([{ kind: 'demote', decisionId: demoting!.id }]);

    const again = await flush('demoter', lease.leaseKey, decisions);
    expect(again).toEqual({ ...r, recorded: 0, replayed: true });
    expect(await h.db.$count(nerveRuleEvents, eq(nerveRuleEvents.agentId, 'demoter'))).toBe(1);
    expect(await h.db.$count(nerveDecisions, eq(nerveDecisions.agentId, 'demoter'))).toBe(3);
  });

  it('charges the decisions anew, once, when the sweep released their lease before the flush came', async () => {
    await seedAgent('late');
    const lease = await arm('late', 'late/lease/0', { decisions: 5 });
    if (!lease.armed) throw new Error('not armed');
    // The workflow was away past the lease's deadline: the sweep gave it back.
    await release(h.db, lease.leaseKey, 'deadline passed');
    const decisions = cruising('late', 4);
    expect(await flush('late', lease.leaseKey, decisions)).toMatchObject({
      recorded: 4,
      charged: 0.04,
      replayed: true,
    });
    expect(await flush('late', lease.leaseKey, decisions)).toMatchObject({
      recorded: 0,
      charged: 0.04,
      replayed: true,
    });
    const ledger = await ledgerOf(budgetIds.nerve('late', 'collision'));
    expect(ledger.filter((e) => e.kind !== 'grant').map((e) => [e.kind, e.idempotencyKey, e.amount])).toEqual([
      ['reserve', lease.leaseKey, 0.25],
      ['release', `close:${lease.leaseKey}`, 0],
      ['reserve', `${lease.leaseKey}/late`, 0.04],
      ['settle', `close:${lease.leaseKey}/late`, 0.04],
    ]);
    const [budget] = await h.db
      .select()
      .from(lifeforceBudgets)
      .where(eq(lifeforceBudgets.id, budgetIds.nerve('late', 'collision')));
    expect(budget).toMatchObject({ reserved: 0, spent: 0.04 });
  });

  it('refuses a decision in a state the nerve does not have', async () => {
    const err = await flush('flusher', 'nerve-arc:x', [{ ...cruising('x', 1)[0]!, state: 'HOVER' }]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ type: 'InvalidInput', nonRetryable: true });
    expect(String((err as Error).message)).toMatch(/HOVER/);
  });
});
