/**
 * nerveDecide on the real Postgres with the real router (a scripted `agent` row): the LLM
 * decides in deliberate mode and the table in reflex (no call); each decision holds and settles
 * its state's cost on the nerve's budget (carved from the agent's on first use) and the router
 * charges the call to the same budget; a retry with the same key decides nothing twice; an
 * unreadable reply is a bad decision that stays put; a budget that cannot cover a decision fails
 * it as the non-retryable LifeforceExhausted; promotions and demotions are logged and undone.
 */
import { ApplicationFailure } from '@temporalio/common';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLlmRouter, type ScriptedReplyFn } from '../../activities/llm/index.js';
import { createNerveActivities, type NerveDecideInput } from '../../activities/nerves.js';
import { budgetIds, defaultPrices, lfRound, llmCost } from '../../core/lifeforce.js';
import type { Observation } from '../../core/nerves/nerve.js';
import { carveBudget, ensureBudget } from '../../db/queries/lifeforce.js';
import { nerveRuleRows, undoRuleEvent } from '../../db/queries/nerves.js';
import { agents, lifeforceBudgets, lifeforceLedger, llmCalls, llmRegistry, nerveDecisions, nerveRuleEvents } from '../../db/schema/index.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { collisionModel } from '../helpers/nerves.js';

let h: MigratedDatabase;
let script: ScriptedReplyFn = () => 'stay';
let acts: ReturnType<typeof createNerveActivities>;

const groundTruth = collisionModel();

beforeAll(async () => {
  h = await migratedDatabase('mindloop_nerves', 4);
  acts = createNerveActivities({ db: h.db, llm: createLlmRouter({ db: h.db, env: {}, toolsDir: repoToolsDir, scriptedReply: (i) => script(i) }), prices: defaultPrices });
});
afterAll(async () => {
  await h?.dispose();
});

async function seedAgent(id: string, nerveLf: number | null = 100): Promise<void> {
  await h.db.insert(agents).values({ id, name: id });
  await h.db.insert(llmRegistry).values({ agentId: id, name: 'nerve-model', provider: 'scripted', model: 'scripted-nerve', role: 'agent', priority: 1 });
  if (nerveLf === null) return;
  await ensureBudget(h.db, { id: budgetIds.agent(id), agentId: id, scope: 'agent', settings: { capacity: 10_000 } });
  const carved = await carveBudget(h.db, { parentId: budgetIds.agent(id), id: budgetIds.nerve(id, 'collision'), agentId: id, scope: 'nerve', amount: nerveLf });
  expect(carved.ok).toBe(true);
}

const approaching: Observation = { t: 3, distanceM: 12, closingSpeedMps: 6, bearingDeg: 5, obstacle: true };
const decide = (agentId: string, key: string, extra: Partial<NerveDecideInput> = {}) =>
  acts.nerveDecide({ agentId, nerve: 'collision', state: 'EVALUATE', observation: approaching, mode: 'deliberate', key, at: Date.UTC(2026, 10, 24, 12), ...extra });
const settledOn = async (budgetId: string) =>
  (await h.db.select().from(lifeforceLedger).where(and(eq(lifeforceLedger.budgetId, budgetId), eq(lifeforceLedger.kind, 'settle')))).reduce((s, e) => s + e.amount, 0);

describe('nerveDecide', () => {
  it('asks the LLM in deliberate mode, charges the state and the call to the nerve budget, and decides once per key', async () => {
    script = groundTruth;
    await seedAgent('deli');
    const r = await decide('deli', 'deli/1');
    expect(r).toMatchObject({ action: 'evade', to: 'EVADE', decidedBy: 'llm', mode: 'deliberate', modeAfter: 'deliberate', outcome: 'ok', events: [], replayed: false });
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
    expect(row).toMatchObject({ action: null, toState: 'EVALUATE', outcome: 'bad', reply: 'I am not sure what to do here.' });
  });

  it('promotes a rule after consistent choices, decides by the table in reflex without the LLM, and demotes it on a bad outcome', async () => {
    // A model that is consistently wrong here: it would keep watching an obstacle 12 m away closing at 6 m/s.
    script = () => 'stay';
    await seedAgent('learner');
    const learning = { promoteAfter: 3, agreement: 0.95, coverage: 0.95, window: 100 };
    const results = [];
    for (let i = 1; i <= 3; i++) results.push(await decide('learner', `learner/${i}`, { learning }));
    expect(results.map((r) => r.outcome)).toEqual(['bad', 'bad', 'bad']);
    expect(results[2]!.events).toMatchObject([{ kind: 'promote', state: 'EVALUATE', bucket: 'near_fast', action: 'stay', support: 3, agreement: 1 }]);
    expect(results[2]!.modeAfter).toBe('reflex');

    const calls = await h.db.$count(llmCalls, eq(llmCalls.agentId, 'learner'));
    const reflex = await decide('learner', 'learner/4', { learning, mode: 'auto' });
    expect(reflex).toMatchObject({ action: 'stay', decidedBy: 'table', mode: 'reflex', outcome: 'bad', modeAfter: 'deliberate' });
    expect(reflex.events).toMatchObject([{ kind: 'demote', state: 'EVALUATE', bucket: 'near_fast', action: 'stay', removed: { rule: { action: 'stay', support: 3 }, counts: { stay: 3 } } }]);
    expect(await h.db.$count(llmCalls, eq(llmCalls.agentId, 'learner'))).toBe(calls);
    const [rule] = await nerveRuleRows(h.db, 'learner', 'collision');
    expect(rule).toMatchObject({ action: null, counts: {}, support: 0 });
    expect(rule!.demotedAt).not.toBeNull();

    // Undo the demotion: the rule and its counters come back; an undo is logged and cannot repeat.
    const events = await h.db.select().from(nerveRuleEvents).where(eq(nerveRuleEvents.agentId, 'learner')).orderBy(nerveRuleEvents.id);
    const decisionKeys = new Map((await h.db.select().from(nerveDecisions).where(eq(nerveDecisions.agentId, 'learner'))).map((d) => [d.id, d.idempotencyKey]));
    expect(events.map((e) => [e.kind, decisionKeys.get(e.decisionId!)])).toEqual([
      ['promote', 'learner/3'],
      ['demote', 'learner/4'],
    ]);
    const undone = await undoRuleEvent(h.db, events[1]!.id);
    expect(undone).toMatchObject({ ok: true, event: { kind: 'demote' } });
    expect((await nerveRuleRows(h.db, 'learner', 'collision'))[0]).toMatchObject({ action: 'stay', support: 3, counts: { stay: 3 } });
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
    expect(r).toMatchObject({ action: 'detect', to: 'DETECT', decidedBy: 'table', mode: 'reflex', outcome: 'ok', lf: 0.01 });
  });

  it('carves the nerve budget from the agent on first use', async () => {
    script = groundTruth;
    await seedAgent('nobudget', null);
    const r = await decide('nobudget', 'nobudget/1');
    expect(r.outcome).toBe('ok');
    const [budget] = await h.db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, budgetIds.nerve('nobudget', 'collision')));
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
    expect((refused as ApplicationFailure).details?.[0]).toMatchObject({ budgetId: budgetIds.nerve('poor', 'collision'), reason: 'balance', needed: 0.03 });
    // IDLE costs 0.01, but the call's worst case does not fit: the hold goes back.
    const byCall = await decide('poor', 'poor/2', { state: 'IDLE' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(byCall).toMatchObject({ type: 'LifeforceExhausted', nonRetryable: true });
    const [budget] = await h.db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, budgetIds.nerve('poor', 'collision')));
    expect(budget).toMatchObject({ reserved: 0, spent: 0, balance: 0.02 });
    expect(await h.db.$count(nerveDecisions, eq(nerveDecisions.agentId, 'poor'))).toBe(0);
  });
});
