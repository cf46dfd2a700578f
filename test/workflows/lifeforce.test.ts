/**
 * An agent's lifeforce runs out (time-skipping Temporal, real activities on Postgres, a scripted
 * model with a price): the tick that its budget cannot cover does not run; the loop shows phase
 * `exhausted` and the search attribute MindloopLifeforce=exhausted, and
 * - with `pause`, waits — simulated days — for regeneration, then goes on;
 * - with `escalate`, asks a human through an escalation; the human's approval grants the
 *   lifeforce and the loop goes on at once.
 * In both, the ledger never lets the spend pass what the budget was given, and every hold is closed.
 */
import { and, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { checkInvariant } from '../../core/lifeforce.js';
import { stateOf } from '../../db/queries/lifeforce.js';
import {
  agents,
  escalations,
  lifeforceBudgets,
  lifeforceLedger,
  llmRegistry,
  processLog,
} from '../../db/schema/index.js';
import { statusQuery } from '../../workflows/agent-loop/index.js';
import { approveUpdate, escalationStatusQuery } from '../../workflows/escalation.js';
import { lifeforceSearchAttribute } from '../../workflows/lib/search-attributes.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { startLoop, untilQuery, untilStatus, withWorker } from '../helpers/harness.js';
import { timeSkippingSuite } from '../helpers/temporal.js';
import { thinkScript } from '../helpers/scripted.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import type { nerveWorkflow } from '../../workflows/nerve.js';

const suite = timeSkippingSuite();
let handle: MigratedDatabase;

beforeAll(async () => {
  handle = await migratedDatabase('mindloop_lifeforce_wf', 10);
}, 120_000);
afterAll(async () => {
  await handle?.dispose();
});

/** A scripted model that costs: $0.1 per 1k tokens each way, so one tick holds and spends real LF. */
async function pricedAgent(id: string): Promise<void> {
  await handle.db.insert(agents).values({ id, name: id });
  await handle.db.insert(llmRegistry).values({
    agentId: id,
    name: 'agent',
    provider: 'scripted',
    model: 'priced',
    role: 'agent',
    priority: 1,
    costPer1kInput: 0.1,
    costPer1kOutput: 0.1,
  });
}

/** Run `fn` while a worker with the real activities and a steady scripted model polls `taskQueue`. */
function withSteadyWorker<T>(taskQueue: string, fn: (taskQueue: string) => Promise<T>): Promise<T> {
  const scriptedReply = thinkScript((_m, i) => `Thought ${i + 1}: steady.`);
  const activities = createActivities({ db: handle.db, llm: { env: {}, toolsDir: repoToolsDir, scriptedReply } });
  return withWorker(suite.env, { taskQueue, workflowBundle: suite.bundle, activities }, fn);
}

/** Every budget of the agent keeps its invariant, agrees with its ledger, and has no hold open. */
async function ledgerBalances(agentId: string): Promise<void> {
  const rows = await handle.db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.agentId, agentId));
  expect(rows.length).toBeGreaterThan(0);
  for (const row of rows) {
    expect(checkInvariant(stateOf(row))).toBeNull();
    const [settled] = await handle.db
      .select({ total: sql<string>`coalesce(sum(${lifeforceLedger.amount}), 0)` })
      .from(lifeforceLedger)
      .where(and(eq(lifeforceLedger.budgetId, row.id), eq(lifeforceLedger.kind, 'settle')));
    expect(Number(settled!.total)).toBeCloseTo(row.spent, 4);
    expect(row.spent).toBeLessThanOrEqual(row.funded);
  }
  const open = await handle.db
    .execute(sql`select idempotency_key from lifeforce_ledger r where r.agent_id = ${agentId} and r.kind = 'reserve' and r.operation <> 'carve'
    and not exists (select 1 from lifeforce_ledger c where c.reservation_key = r.idempotency_key)`);
  expect(open.rows).toEqual([]);
}

describe('a nerve started by its agent', () => {
  it("nerve.start runs the nerve as the agent's child agent/<id>/nerve/<name>, on a budget carved from the agent's", async () => {
    await pricedAgent('reflexer');
    const spec = {
      taskQueue: 'lf-nerve',
      workflowBundle: suite.bundle,
      activities: createActivities({
        db: handle.db,
        llm: {
          env: {},
          toolsDir: repoToolsDir,
          scriptedReply: thinkScript((_m, i) =>
            i === 0
              ? `Reflexes next.\n${renderCommandBlock([{ cmdId: 'n1', type: 'nerve.start', args: { name: 'collision', steps: 30, seed: 3, mode: 'reflex' } }])}`
              : 'Watching.',
          ),
        },
      }),
    };
    await withWorker(suite.env, spec, async (taskQueue) => {
      const h = await startLoop(suite.env.client, taskQueue, {
        agentId: 'reflexer',
        maxTicks: 2,
        reflexes: false,
        settings: { delayMs: 1000, maxTokens: 200 },
        lifeforce: { capacity: 100_000 },
      });
      await h.result();
      const nerve = suite.env.client.workflow.getHandle<typeof nerveWorkflow>('agent/reflexer/nerve/collision');
      const done = await nerve.result();
      expect(done).toMatchObject({
        agentId: 'reflexer',
        nerve: 'collision',
        phase: 'done',
        step: 30,
        setting: 'reflex',
      });
      expect(done.tally.byDecider.llm).toBe(0);
      expect((await nerve.describe()).raw.workflowExecutionInfo?.parentExecution?.workflowId).toBe('agent/reflexer');
    });
    const [budget] = await handle.db
      .select()
      .from(lifeforceBudgets)
      .where(eq(lifeforceBudgets.id, 'nerve:reflexer/collision'));
    expect(budget).toMatchObject({ parentId: 'agent:reflexer', scope: 'nerve' });
    expect(budget!.spent).toBeGreaterThan(0);
    await ledgerBalances('reflexer');
  }, 120_000);
});

describe('an agent out of lifeforce', () => {
  it('pauses, visibly, until regeneration covers the next tick — days later — and never overspends', async () => {
    await pricedAgent('frugal');
    await withSteadyWorker('lf-pause', async (taskQueue) => {
      // Each tick holds ~1.3 k LF (its prompt bound, the whole command catalogue included, + the
      // 200-token cap) and spends less: 2 400 LF covers the first ticks, then 10 LF an hour needs
      // most of a day per tick. A hold above the capacity would wait for a grant, never for time.
      const h = await startLoop(suite.env.client, taskQueue, {
        agentId: 'frugal',
        maxTicks: 6,
        reflexes: false,
        settings: { delayMs: 1000, maxTokens: 200 },
        lifeforce: { capacity: 2400, regenPerHour: 10 },
      });
      const startedAt = Date.now();
      await h.result();
      const status = await h.query(statusQuery);
      expect(status.tick).toBe(6);
      expect(status.lifeforce).toMatchObject({ budgetId: 'agent:frugal', capacity: 2400, exhausted: null });
      // The waits happened in workflow time: the run spans days of it, in seconds of wall time.
      const describe = await h.describe();
      const spanHours = ((describe.closeTime?.getTime() ?? 0) - describe.startTime.getTime()) / 3.6e6;
      expect(spanHours).toBeGreaterThan(24);
      expect(Date.now() - startedAt).toBeLessThan(60_000);
      expect(describe.searchAttributes[lifeforceSearchAttribute.name]).toEqual(['ok']);
    });
    const log = await handle.db
      .select()
      .from(processLog)
      .where(and(eq(processLog.agentId, 'frugal'), eq(processLog.kind, 'lifeforce')));
    expect(log.filter((r) => r.status === 'warning').length).toBeGreaterThanOrEqual(1);
    expect(log.some((r) => /cannot cover .* LF \(balance/.test(r.message ?? ''))).toBe(true);
    await ledgerBalances('frugal');
  }, 120_000);

  it('escalates for a grant; a human approves, the grant lands, the loop goes on', async () => {
    await pricedAgent('needy');
    await withSteadyWorker('lf-escalate', async (taskQueue) => {
      const h = await startLoop(suite.env.client, taskQueue, {
        agentId: 'needy',
        maxTicks: 4,
        reflexes: false,
        settings: { delayMs: 1000, maxTokens: 200 },
        lifeforce: { capacity: 1000, onExhausted: 'escalate', askFor: 5000 },
      });
      // Exhausted after a tick or two: phase, search attribute and the escalation it started.
      const exhausted = await untilStatus(
        h,
        (s) => s.phase === 'exhausted' && Boolean(s.lifeforce?.exhausted?.escalationId),
        'the exhausted phase',
        60_000,
      );
      const escalationId = exhausted.lifeforce!.exhausted!.escalationId!;
      expect(exhausted.lifeforce!.exhausted).toMatchObject({ reason: 'balance', waitMs: null });
      expect((await h.describe()).searchAttributes[lifeforceSearchAttribute.name]).toEqual(['exhausted']);
      const esc = suite.env.client.workflow.getHandle(`escalation/${escalationId}`);
      const escStatus = await untilQuery(
        esc,
        escalationStatusQuery,
        (s) => s.phase === 'awaiting_human',
        'the escalation to wait for a human',
        60_000,
      );
      // No model decides a grant: the oversight was not asked.
      expect(escStatus.oversight).toBeNull();
      await esc.executeUpdate(approveUpdate, { args: [{ by: 'ops', comment: 'top up' }] });
      expect(await esc.result()).toMatchObject({
        outcome: 'approved',
        decidedBy: 'human',
        proposalOutcome: 'executed',
      });
      await h.result();
      expect((await h.query(statusQuery)).tick).toBe(4);
    });
    const [row] = await handle.db.select().from(escalations).where(eq(escalations.agentId, 'needy'));
    expect(row).toMatchObject({ status: 'resolved', decidedBy: 'human' });
    const grants = await handle.db
      .select()
      .from(lifeforceLedger)
      .where(and(eq(lifeforceLedger.budgetId, 'agent:needy'), eq(lifeforceLedger.kind, 'grant')));
    expect(grants.map((g) => g.amount)).toEqual(expect.arrayContaining([1000, 5000]));
    await ledgerBalances('needy');
  }, 120_000);
});
