/**
 * A campaign spends from its own lifeforce budget `campaign:<id>`, carved from its agent's: on the
 * time-skipping server with the REAL campaign, lifeforce and LLM activities on a real Postgres
 * (fresh database) and a scripted LLM registry row with a price.
 * - the budget runs out mid-way: the campaign pauses (progress and row say which budget and what
 *   it lacked), nothing is overspent; a grant to `campaign:<id>` and `resume` → it completes;
 * - the agent cannot afford the carve: the campaign pauses until a grant to the agent and `resume`;
 * - the ledger afterwards: every reservation closed, spent ≤ funded, the campaign's budget closed
 *   and the agent's carve settled at what the campaign spent.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { CampaignInput } from '../../core/campaign.js';
import { budgetIds, defaultPrices, lfRound, llmCost, llmWorstCase } from '../../core/lifeforce.js';
import { configureBudget, grantLifeforce } from '../../db/queries/lifeforce.js';
import { agents, campaigns, lifeforceBudgets, lifeforceLedger, llmCalls, llmRegistry } from '../../db/schema/index.js';
import type { CampaignProgress, CampaignResult, campaignWorkflow } from '../../workflows/campaign.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { startWorkers, type RunningWorkers } from '../helpers/harness.js';
import { timeSkippingSuite } from '../helpers/temporal.js';
import { readUntil } from '../helpers/wait.js';

const suite = timeSkippingSuite();
let handle: MigratedDatabase;
let workers: RunningWorkers | undefined;
const taskQueue = 'campaign-lifeforce';

/** The scripted model's one reply: 12 characters, 3 tokens (scripted tokens are ceil(chars / 4)). */
const answer = 'abcdefghijkl';
/** $1 per 1 000 output tokens: 1 LF per output token at the default prices. */
const price = { costPer1kInput: 0, costPer1kOutput: 1 };

beforeAll(async () => {
  handle = await migratedDatabase('mindloop_campaign_lf', 10);
  workers = await startWorkers(suite.env, [
    {
      taskQueue,
      workflowBundle: suite.bundle,
      activities: createActivities({ db: handle.db, llm: { env: {}, toolsDir: '' }, learn: async () => ({ id: 1 }) }),
    },
  ]);
}, 120_000);
afterAll(async () => {
  await workers?.stop();
  await handle?.dispose();
});

/** An agent with a limited budget and one priced, scripted `task` model. */
async function seedAgent(agentId: string, capacity: number): Promise<void> {
  await handle.db.insert(agents).values({ id: agentId, name: agentId });
  await handle.db.insert(llmRegistry).values({
    agentId,
    name: 'priced',
    provider: 'scripted',
    model: 'priced',
    role: 'task',
    ...price,
    params: { replies: [answer] },
  });
  await configureBudget(handle.db, agentId, { capacity });
}

const ask = (name: string, prompt: string) => ({
  name,
  kind: 'activity' as const,
  type: 'llm.ask',
  args: { prompt, maxTokens: 8 },
});

function start(input: CampaignInput & { campaignId: string }): Promise<WorkflowHandle<typeof campaignWorkflow>> {
  return suite.env.client.workflow.start<typeof campaignWorkflow>('campaignWorkflow', {
    taskQueue,
    workflowId: `campaign/${input.campaignId}`,
    args: [input],
  });
}

/** `h`'s progress once `pred` holds (30 s, every 50 ms). */
const untilProgress = (h: WorkflowHandle, pred: (p: CampaignProgress) => boolean, what: string) =>
  readUntil(what, 30_000, () => h.query<CampaignProgress>('progress'), pred, 50);

async function budget(id: string) {
  const [row] = await handle.db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, id));
  return row!;
}

/** Reservations on the budget that no settle or release closed. */
async function openReservations(budgetId: string): Promise<string[]> {
  const entries = await handle.db.select().from(lifeforceLedger).where(eq(lifeforceLedger.budgetId, budgetId));
  const closed = new Set(entries.filter((e) => e.reservationKey).map((e) => e.reservationKey));
  return entries.filter((e) => e.kind === 'reserve' && !closed.has(e.idempotencyKey)).map((e) => e.idempotencyKey);
}

describe('campaign lifeforce budget', () => {
  it('runs out mid-way → paused with the budget and shortfall; a grant and resume → completed; the ledger balances', async () => {
    await seedAgent('spender', 100);
    const id = 'lf-run-out';
    const budgetId = budgetIds.campaign(id);
    // Each ask holds its worst case (every prompt byte a token, 8 output tokens) and is charged its actual (3 output tokens).
    const worst = llmWorstCase(defaultPrices, price, [{ content: 'one' }], 8);
    const actual = llmCost(defaultPrices, price, { promptTokens: 1, completionTokens: 3 });
    expect(worst).toBeGreaterThan(5);
    // The budget covers the first ask's worst case, but not the second's after paying for the first.
    const lifeforce = lfRound(worst + 1);
    expect(lifeforce - actual).toBeLessThan(worst);

    const h = await start({
      campaignId: id,
      agentId: 'spender',
      title: 'ask until the lifeforce runs out',
      budget: { lifeforce },
      phases: [
        {
          name: 'ask',
          type: 'inquiry',
          tasks: [
            ask('first', 'one'),
            ask('second', 'two'),
            { name: 'note', kind: 'activity', type: 'note', args: { text: 'asked twice' } },
          ],
        },
        { name: 'more', type: 'inquiry', tasks: [ask('third', 'six')] },
      ],
    });
    const paused = await untilProgress(h, (p) => p.status === 'paused', 'the lifeforce pause');
    expect(paused).toMatchObject({
      phase: { index: 1, name: 'ask' },
      task: { index: 2, name: 'second' },
      lifeforce: { budgetId, carved: lifeforce, unlimited: false },
      failedTasks: [],
    });
    expect(paused.pauseReason).toContain(
      `task second): budget ${budgetId} cannot cover ${worst} LF (balance; available ${lfRound(lifeforce - actual)} LF)`,
    );
    expect(paused.pauseReason).toContain(`mindloop lifeforce grant spender <LF> --budget ${budgetId}`);
    const [row] = await handle.db.select().from(campaigns).where(eq(campaigns.id, id));
    expect(row).toMatchObject({ status: 'paused', error: paused.pauseReason, budget: { lifeforce } });
    // Paused, nothing overspent: the first ask was charged its actual cost, the second never ran.
    expect(await budget(budgetId)).toMatchObject({ spent: actual, reserved: 0, funded: lifeforce });
    expect(await handle.db.select().from(llmCalls).where(eq(llmCalls.agentId, 'spender'))).toHaveLength(1);

    expect(
      await grantLifeforce(handle.db, {
        budgetId,
        amount: 20,
        key: `test-grant:${id}`,
        reason: 'test: more for the campaign',
      }),
    ).toBe(true);
    await h.signal('resume');
    const result: CampaignResult = await h.result();
    expect(result).toMatchObject({
      status: 'completed',
      phases: [
        { name: 'ask', verdict: { pass: true } },
        { name: 'more', verdict: { pass: true } },
      ],
    });
    const done = await h.query<CampaignProgress>('progress');
    expect(done).toMatchObject({ status: 'completed', pauseReason: null, failedTasks: [] });
    expect((await handle.db.select().from(campaigns).where(eq(campaigns.id, id)))[0]).toMatchObject({
      status: 'completed',
      error: null,
    });
    expect(await handle.db.select().from(llmCalls).where(eq(llmCalls.agentId, 'spender'))).toHaveLength(3);

    // The ledger: the three asks were charged to the campaign, each reservation closed, the budget
    // closed with what it spent as its funding, and the agent's carve settled at that spend (at
    // most what was carved; the rest was paid from the grant).
    const spent = lfRound(3 * actual);
    const child = await budget(budgetId);
    expect(child).toMatchObject({
      spent,
      reserved: 0,
      balance: 0,
      parentId: budgetIds.agent('spender'),
      closedAt: expect.any(Date),
    });
    expect(child.spent).toBeLessThanOrEqual(child.funded);
    expect(await openReservations(budgetId)).toEqual([]);
    const agentBudget = budgetIds.agent('spender');
    expect(await openReservations(agentBudget)).toEqual([]);
    const [carveSettle] = await handle.db
      .select()
      .from(lifeforceLedger)
      .where(and(eq(lifeforceLedger.reservationKey, `carve:${budgetId}`)));
    const used = Math.min(lifeforce, spent);
    expect(carveSettle).toMatchObject({ kind: 'settle', amount: used });
    // What the campaign had left — the rest of the carve and of the grant — went back to the agent.
    expect(await budget(agentBudget)).toMatchObject({ spent: used, reserved: 0, balance: lfRound(120 - spent) });
  }, 120_000);

  it('an agent that cannot afford the carve: paused until a grant to the agent and resume, then it runs', async () => {
    await seedAgent('poor', 5);
    const id = 'lf-carve';
    const h = await start({
      campaignId: id,
      agentId: 'poor',
      title: 'too dear',
      budget: { costUsd: 0.05 },
      phases: [{ name: 'ask', type: 'inquiry', tasks: [ask('only', 'one')] }],
    });
    const paused = await untilProgress(h, (p) => p.status === 'paused', 'the carve pause');
    // $0.05 at 1 000 LF per dollar.
    expect(paused.pauseReason).toContain(
      `carving ${budgetIds.campaign(id)}): budget agent:poor cannot cover 50 LF (balance; available 5 LF)`,
    );
    expect(paused).toMatchObject({ phase: { index: 0 }, lifeforce: null });
    expect((await handle.db.select().from(campaigns).where(eq(campaigns.id, id)))[0]).toMatchObject({
      status: 'paused',
      budget: { costUsd: 0.05 },
    });

    await grantLifeforce(handle.db, { budgetId: 'agent:poor', amount: 100, key: `test-grant:${id}`, reason: 'test' });
    await h.signal('resume');
    expect(await h.result()).toMatchObject({ status: 'completed' });
    const child = await budget(budgetIds.campaign(id));
    expect(child).toMatchObject({ capacity: 50, closedAt: expect.any(Date), reserved: 0 });
    expect(await budget('agent:poor')).toMatchObject({
      reserved: 0,
      spent: child.spent,
      balance: lfRound(105 - child.spent),
    });
    expect(await openReservations('agent:poor')).toEqual([]);
  }, 120_000);
});
