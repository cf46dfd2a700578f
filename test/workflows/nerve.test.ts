/**
 * nerveWorkflow on the time-skipping server with the real nerve activities on the real
 * Postgres and the real router (a scripted `agent` row that reads the prompt back). A run on a
 * repetitive stream goes deliberate → hybrid → reflex with a model answering the ground truth
 * (across continue-as-new); a model that is wrong in one case gets a rule promoted, demoted at
 * its first bad decision, and the mode steps back; a budget that runs out pauses the run in
 * phase `exhausted` until a grant and a `resume` signal; a bad input fails at once.
 */
import { WorkflowFailedError } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLlmRouter, type ScriptedReplyFn } from '../../activities/llm/index.js';
import { createNerveActivities } from '../../activities/nerves.js';
import { workflowIds } from '../../core/ids.js';
import { budgetIds, lfRound } from '../../core/lifeforce.js';
import { carveBudget, ensureBudget, grantLifeforce } from '../../db/queries/lifeforce.js';
import { agents, lifeforceBudgets, llmCalls, llmRegistry, nerveDecisions, nerveRuleEvents } from '../../db/schema/index.js';
import { nerveResumeSignal, nerveStatusQuery, type NerveWorkflowInput, type nerveWorkflow } from '../../workflows/nerve.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { collisionModel } from '../helpers/nerves.js';
import { bundle as bundleWorkflows, createTimeSkippingEnv, productWorkflowsPath } from '../helpers/temporal.js';

let env: TestWorkflowEnvironment;
let h: MigratedDatabase;
let workers: Promise<void>;
let shutdown: () => void;
/** The model of the current test. */
let script: ScriptedReplyFn = collisionModel();
const taskQueue = 'nerve-test';

beforeAll(async () => {
  let bundle;
  [h, env, bundle] = await Promise.all([migratedDatabase('mindloop_nerve_wf', 4), createTimeSkippingEnv(), bundleWorkflows(productWorkflowsPath)]);
  const llm = createLlmRouter({ db: h.db, env: {}, toolsDir: repoToolsDir, scriptedReply: (i) => script(i) });
  const worker = await Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle: bundle, activities: createNerveActivities({ db: h.db, llm }) });
  workers = worker.run();
  shutdown = () => worker.shutdown();
}, 180_000);
afterAll(async () => {
  shutdown?.();
  await workers;
  await env?.teardown();
  await h?.dispose();
});

async function seedAgent(id: string, nerveLf: number): Promise<void> {
  await h.db.insert(agents).values({ id, name: id });
  await h.db.insert(llmRegistry).values({ agentId: id, name: 'nerve-model', provider: 'scripted', model: 'scripted-nerve', role: 'agent', priority: 1 });
  await ensureBudget(h.db, { id: budgetIds.agent(id), agentId: id, scope: 'agent', settings: { capacity: 100_000 } });
  const carved = await carveBudget(h.db, { parentId: budgetIds.agent(id), id: budgetIds.nerve(id, 'collision'), agentId: id, scope: 'nerve', amount: nerveLf });
  expect(carved.ok).toBe(true);
}

const start = (input: NerveWorkflowInput) =>
  env.client.workflow.start<typeof nerveWorkflow>('nerveWorkflow', { taskQueue, workflowId: workflowIds.nerve(input.agentId, input.nerve), args: [input] });

/** The modes of an agent's decisions in order, runs of the same mode collapsed. */
async function modeRuns(agentId: string): Promise<string[]> {
  const rows = await h.db.select({ mode: nerveDecisions.mode }).from(nerveDecisions).where(eq(nerveDecisions.agentId, agentId)).orderBy(asc(nerveDecisions.id));
  return rows.map((r) => r.mode).filter((m, i, all) => i === 0 || all[i - 1] !== m);
}

describe('nerveWorkflow (time-skipping, Postgres, scripted model)', () => {
  it('goes deliberate → hybrid → reflex on a repetitive stream with a model that answers the ground truth', async () => {
    script = collisionModel();
    await seedAgent('steady', 1_000);
    const handle = await start({ agentId: 'steady', nerve: 'collision', seed: 5, steps: 240, scenario: 'repetitive', promoteAfter: 3, stepsPerRun: 100 });
    const s = await handle.result();
    expect(s).toMatchObject({ phase: 'done', step: 240, mode: 'reflex', pauses: 0, organs: ['sensors'] });
    expect(s.tally).toMatchObject({ decisions: 240, bad: 0, invalid: 0, demotions: 0 });
    expect(s.tally.promotions).toBeGreaterThan(5);
    for (const m of ['deliberate', 'hybrid', 'reflex'] as const) expect(s.tally.byMode[m], m).toBeGreaterThan(0);
    expect(await modeRuns('steady')).toEqual(['deliberate', 'hybrid', 'reflex']);
    // Only the LLM's decisions called it; the rest was rules and the table.
    expect(await h.db.$count(llmCalls, eq(llmCalls.agentId, 'steady'))).toBe(s.tally.byDecider.llm);
    expect(s.tally.byDecider.rule + s.tally.byDecider.table).toBeGreaterThan(s.tally.byDecider.llm);
    // Every LF the run counted was spent on the nerve's budget: the states' costs and the calls the router charged.
    const [budget] = await h.db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, budgetIds.nerve('steady', 'collision')));
    expect(lfRound(budget!.spent)).toBe(s.tally.lf);
    expect(budget!.reserved).toBe(0);
    // It continued as new under its step cap (runs of 100, 100 and 40 steps).
    const firstRun = await env.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId).fetchHistory();
    expect(firstRun.events?.at(-1)?.workflowExecutionContinuedAsNewEventAttributes).toBeTruthy();
  });

  it('demotes a rule learned from a consistently wrong model at its first bad decision, and the mode steps back', async () => {
    // Wrong in one case: it keeps watching an obstacle 8–20 m away closing fast, instead of evading.
    script = collisionModel((state, bucket) => (state === 'EVALUATE' && bucket === 'near_fast' ? 'stay' : undefined));
    await seedAgent('misled', 1_000);
    const s = await (await start({ agentId: 'misled', nerve: 'collision', seed: 5, steps: 240, scenario: 'repetitive', promoteAfter: 3, coverage: 1 })).result();
    expect(s.phase).toBe('done');
    expect(s.tally.demotions).toBeGreaterThan(0);
    const events = await h.db.select().from(nerveRuleEvents).where(and(eq(nerveRuleEvents.agentId, 'misled'), eq(nerveRuleEvents.state, 'EVALUATE'), eq(nerveRuleEvents.bucket, 'near_fast'))).orderBy(asc(nerveRuleEvents.id));
    expect(events.slice(0, 2).map((e) => [e.kind, e.action])).toEqual([
      ['promote', 'stay'],
      ['demote', 'stay'],
    ]);
    // The demoting decision was the rule's, and the next one in that case is the LLM's again.
    const inCase = await h.db.select().from(nerveDecisions).where(and(eq(nerveDecisions.agentId, 'misled'), eq(nerveDecisions.state, 'EVALUATE'), eq(nerveDecisions.bucket, 'near_fast'))).orderBy(asc(nerveDecisions.id));
    const demoting = inCase.findIndex((d) => d.id === events[1]!.decisionId);
    expect(inCase[demoting]).toMatchObject({ decidedBy: expect.stringMatching(/rule|table/), outcome: 'bad', action: 'stay' });
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
    let status = await handle.query(nerveStatusQuery);
    for (let i = 0; i < 200 && status.phase !== 'exhausted'; i++) {
      await new Promise((r) => setTimeout(r, 50));
      status = await handle.query(nerveStatusQuery);
    }
    expect(status).toMatchObject({ phase: 'exhausted', pauses: 1 });
    expect(status.exhausted?.reason).toMatch(/lifeforce exhausted/);
    expect(status.step).toBeLessThan(30);
    // Still paused: nothing happens without a resume.
    await new Promise((r) => setTimeout(r, 300));
    expect((await handle.query(nerveStatusQuery)).step).toBe(status.step);
    expect(await grantLifeforce(h.db, { budgetId: budgetIds.nerve('frugal', 'collision'), amount: 100, key: 'grant:frugal', reason: 'test' })).toBe(true);
    await handle.signal(nerveResumeSignal);
    const s = await handle.result();
    expect(s).toMatchObject({ phase: 'done', step: 30, pauses: 1, exhausted: null });
    expect(s.tally.decisions).toBe(30);
    expect(await h.db.$count(nerveDecisions, eq(nerveDecisions.agentId, 'frugal'))).toBe(30);
  });

  it('fails at once on a bad input, naming the field', async () => {
    const err = await (await start({ agentId: 'bad-input', nerve: 'collision', seed: -1, steps: 0 } as NerveWorkflowInput)).result().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect(String((err as WorkflowFailedError).cause?.message)).toMatch(/seed.*steps|steps.*seed/s);
  });
});
