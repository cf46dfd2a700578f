/**
 * The lifeforce ledger under worker crashes: settled spend never exceeds the budget, every
 * reservation is settled or released, no operation is charged twice. The real Temporal dev
 * server and Postgres, the agent loop on a worker process (`workers/main.ts --queue mindloop`)
 * whose scripted model takes 1.5 s a call; the worker is SIGKILLed 10 times in the middle of a
 * tick's LLM call (while the model runs, once its answer is recorded but not charged, once it is
 * charged but the tick's reply not recorded) and a new one started each time. Then the loop runs
 * until its budget refuses a call (or its tick cap), the sweep runs, and the database must show
 * the invariants.
 *
 * A dead worker's activity is retried once the server notices it: after the heartbeat timeout
 * (10 s), and its workflow task after the sticky queue's timeout. Most kills here tell the server
 * at once instead (the attempt failed by id, the sticky queue reset), which starts the same retry
 * sooner; every fifth kill waits for the timeouts, as a real crash does.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { and, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { budgetIds, checkInvariant, defaultPrices } from '../../core/lifeforce.js';
import { createDb, type DbHandle } from '../../db/client.js';
import { ensureBudget, stateOf, sweepReservations } from '../../db/queries/lifeforce.js';
import {
  agentConfig,
  agents,
  lifeforceBudgets,
  lifeforceLedger,
  llmCalls,
  llmRegistry,
} from '../../db/schema/index.js';
import type { AgentStatus, agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import { sleep, startKillableStack, waitFor, type KillableStack } from '../helpers/worker-process.js';

const agentId = 'lf-crash';
const budgetId = budgetIds.agent(agentId);
const callDelayMs = 1500;
/**
 * Where each kill lands: `call` while the model runs (after the given ms), `answered` once the
 * answer is recorded but not yet settled (the settle waits on a lock the test holds on the
 * budget row), `settled` once it is settled but the tick's reply not yet recorded (waiting on
 * the agent's row).
 */
type Window = { at: 'call'; afterMs: number } | { at: 'answered' } | { at: 'settled' };
const killsAt: Window[] = [
  { at: 'call', afterMs: 100 },
  { at: 'answered' },
  { at: 'settled' },
  { at: 'call', afterMs: 900 },
  { at: 'answered' },
  { at: 'call', afterMs: 1100 },
  { at: 'settled' },
  { at: 'answered' },
  { at: 'call', afterMs: 500 },
  { at: 'settled' },
];
/** Enough for the kills and a few ticks more, then a call is refused (a tick costs ~7–9 LF and reserves ~30–40: the prompt grows with the catalogue). */
const capacity = 180;
const maxTicks = 60;

let ks: KillableStack;
let client: Client;
let handle: DbHandle;

beforeAll(async () => {
  ks = await startKillableStack('lf-crash');
  ({ client } = ks);
  handle = createDb(ks.dbUrl, { max: 4 });
}, 180_000);
afterAll(async () => {
  await handle?.close();
  await ks?.stop();
});

/** The newest llm_call reservation of the agent with no close entry, not one of `skip`. */
async function openReservation(skip: ReadonlySet<string>): Promise<string | undefined> {
  const rows = await handle.db.execute<{ key: string }>(sql`
    select r.idempotency_key as key from lifeforce_ledger r
    where r.budget_id = ${budgetId} and r.kind = 'reserve' and r.operation = 'llm_call'
      and not exists (select 1 from lifeforce_ledger c where c.idempotency_key = 'close:' || r.idempotency_key)
    order by r.id desc`);
  return rows.rows.map((r) => r.key).find((k) => !skip.has(k));
}

async function isOpen(key: string): Promise<boolean> {
  const [close] = await handle.db
    .select({ id: lifeforceLedger.id })
    .from(lifeforceLedger)
    .where(eq(lifeforceLedger.idempotencyKey, `close:${key}`));
  return close === undefined;
}

/** The request key of a call's reservation `llm:<request key>@<registry id>`. */
const requestKeyOf = (reservationKey: string) => reservationKey.slice('llm:'.length, reservationKey.lastIndexOf('@'));

async function answered(reservationKey: string): Promise<boolean> {
  const [row] = await handle.db
    .select({ id: llmCalls.id })
    .from(llmCalls)
    .where(and(eq(llmCalls.requestKey, requestKeyOf(reservationKey)), eq(llmCalls.ok, true)));
  return row !== undefined;
}

/**
 * Bring the worker to the window and hold it there: a row lock the call's next step waits on
 * (the budget row for its settle; the agent's row, not its key, for the tick's reply, so the
 * ledger's foreign keys still pass). Returns the lock's release.
 */
async function holdAt(w: Window, key: string): Promise<() => Promise<void>> {
  if (w.at === 'call') {
    await sleep(w.afterMs);
    return async () => undefined;
  }
  const conn = await handle.pool.connect();
  await conn.query('begin');
  if (w.at === 'answered') await conn.query('select 1 from lifeforce_budgets where id = $1 for update', [budgetId]);
  else await conn.query('select 1 from agents where id = $1 for no key update', [agentId]);
  await waitFor(
    `${key} ${w.at}`,
    30_000,
    async () => ((w.at === 'answered' ? await answered(key) : !(await isOpen(key))) ? true : undefined),
    50,
  );
  return async () => {
    await conn.query('rollback');
    conn.release();
  };
}

/** Tell the server the dead worker's work is gone: its started activities fail (and are retried), its sticky queue is dropped. */
async function expedite(h: WorkflowHandle): Promise<void> {
  await client.workflowService.resetStickyTaskQueue({ namespace: 'default', execution: { workflowId: h.workflowId } });
  const d = await h.describe();
  for (const a of d.raw.pendingActivities ?? []) {
    if (a.state !== temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED || !a.activityId)
      continue;
    await client.activity
      .fail({ workflowId: h.workflowId, runId: d.runId, activityId: a.activityId }, new Error('worker killed'))
      .catch(() => undefined);
  }
}

async function seedAgent(): Promise<void> {
  const db = handle.db;
  await db.insert(agents).values({ id: agentId, name: agentId });
  await db.insert(llmRegistry).values({
    agentId,
    name: 'slow',
    provider: 'scripted',
    model: 'scripted-slow',
    role: 'agent',
    priority: 1,
    costPer1kInput: 0.002,
    costPer1kOutput: 0.004,
    params: {
      replies: ['Thinking it over.', 'Still thinking.', 'One more thought.'],
      delayMs: callDelayMs,
      maxTokens: 64,
    },
  });
  // The ledger is what is tested: memory compares words, so no kill lands in the embedder's load.
  await db.insert(agentConfig).values({ agentId, key: 'semantic_memory', value: 'off' });
  await ensureBudget(db, { id: budgetId, agentId, scope: 'agent', settings: { capacity } });
}

/** What the database says after the run: asserts the invariants, returns the counts. */
async function checkLedger(killed: ReadonlySet<string>) {
  const db = handle.db;
  const budgets = await db.select().from(lifeforceBudgets);
  const ledger = await db.select().from(lifeforceLedger);

  // (a) every budget: balance + reserved + spent = funded, spent ≤ funded, spent = Σ settle, nothing held.
  for (const b of budgets) {
    expect(checkInvariant(stateOf(b)), b.id).toBeNull();
    expect(b.spent, b.id).toBeLessThanOrEqual(b.funded);
    const settled = ledger
      .filter((e) => e.budgetId === b.id && e.kind === 'settle')
      .reduce((sum, e) => sum + e.amount, 0);
    expect(b.spent, b.id).toBeCloseTo(settled, 4);
    expect(b.reserved, b.id).toBe(0);
  }
  const agentBudget = budgets.find((b) => b.id === budgetId)!;
  expect(agentBudget.funded).toBe(capacity);

  // (b) every reservation closed exactly once (settle or release, `close:<key>`), no close without one.
  const reserves = ledger.filter((e) => e.kind === 'reserve');
  const closes = ledger.filter((e) => e.kind === 'settle' || e.kind === 'release');
  const reserveKeys = new Set(reserves.map((r) => r.idempotencyKey));
  for (const r of reserves)
    expect(
      closes.filter((c) => c.reservationKey === r.idempotencyKey),
      r.idempotencyKey,
    ).toHaveLength(1);
  for (const c of closes) {
    expect(reserveKeys.has(c.reservationKey ?? ''), `close of ${c.reservationKey}`).toBe(true);
    expect(c.idempotencyKey).toBe(`close:${c.reservationKey}`);
  }

  // (c) no call charged twice: one settle per call id, each an answered llm_calls row, one answer per request.
  const settles = closes.filter((c) => c.kind === 'settle');
  const callIds = settles.map((c) => c.metadata?.callId);
  expect(callIds.every((id) => typeof id === 'number')).toBe(true);
  expect(new Set(callIds).size).toBe(callIds.length);
  const okCalls = await db
    .select({ id: llmCalls.id, requestKey: llmCalls.requestKey })
    .from(llmCalls)
    .where(and(eq(llmCalls.agentId, agentId), eq(llmCalls.ok, true)));
  const okIds = new Set(okCalls.map((c) => c.id));
  for (const id of callIds) expect(okIds.has(id as number), `call #${String(id)} is an answered call`).toBe(true);
  const answers = okCalls.filter((c) => c.requestKey !== null);
  expect(new Set(answers.map((c) => c.requestKey)).size).toBe(answers.length);

  const releases = closes.filter((c) => c.kind === 'release');
  const bySweep = releases.filter((c) => c.reason?.startsWith('deadline passed')).length;
  return {
    reservations: reserves.length,
    settled: settles.length,
    killedThenSettledByRetry: [...killed].filter((k) => settles.some((c) => c.reservationKey === k)).length,
    releasedByFailure: releases.length - bySweep,
    releasedBySweep: bySweep,
    answeredCalls: answers.length,
    answeredNotCharged: answers.filter((c) => !callIds.includes(c.id)).length,
    spent: agentBudget.spent,
    funded: agentBudget.funded,
  };
}

const openReservationCount = async (): Promise<number> => {
  const r = await handle.db.execute<{ n: string }>(sql`
    select count(*) as n from lifeforce_ledger r where r.kind = 'reserve'
      and not exists (select 1 from lifeforce_ledger c where c.idempotency_key = 'close:' || r.idempotency_key)`);
  return Number(r.rows[0]?.n ?? 0);
};

describe('lifeforce under worker crashes', () => {
  it('10 SIGKILLs mid-call: spend within the budget, every reservation closed once, no call charged twice', async () => {
    const started = Date.now();
    await seedAgent();
    let worker = ks.spawnWorker();
    const killed = new Set<string>();
    const kills = { heldAtKill: 0, answeredAtKill: 0, log: [] as string[] };
    try {
      const h = await client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
        taskQueue: 'mindloop',
        workflowId: `agent/${agentId}`,
        args: [{ agentId, reflexes: false, maxTicks, settings: { delayMs: 0 } }],
      });
      for (const [i, w] of killsAt.entries()) {
        const key = await waitFor(`an open reservation before kill ${i + 1}`, 90_000, () => openReservation(killed));
        const release = await holdAt(w, key);
        if (await isOpen(key)) kills.heldAtKill++;
        if (await answered(key)) kills.answeredAtKill++;
        const exited = new Promise((r) => worker.once('exit', r));
        worker.kill('SIGKILL');
        await exited;
        await release();
        killed.add(key);
        kills.log.push(`${w.at}@${((Date.now() - started) / 1000).toFixed(1)}s`);
        worker = ks.spawnWorker();
        if (i % 5 !== 4) await expedite(h);
      }
      const killPhaseS = Math.round((Date.now() - started) / 1000);

      // Run on until the budget refuses a call, or the tick cap completes the loop.
      const end = await waitFor(
        'the budget exhausted or the loop done',
        120_000,
        async () => {
          const [b] = await handle.db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, budgetId));
          if (b?.exhaustedAt) return 'exhausted';
          return (await h.describe()).status.name === 'COMPLETED' ? 'completed' : undefined;
        },
        250,
      );
      const phase =
        end === 'exhausted'
          ? await waitFor('the exhausted phase', 30_000, async () =>
              (await h.query<AgentStatus>('status')).phase === 'exhausted' ? 'exhausted' : undefined,
            )
          : null;
      const execution = (await h.describe()).status.name;
      // No call may run while the sweep releases what is still open.
      const exited = new Promise((r) => worker.once('exit', r));
      worker.kill('SIGKILL');
      await exited;
      const openBeforeSweep = await openReservationCount();
      const sweptNow = await sweepReservations(handle.db, Date.now() + defaultPrices.reservationTtlMs + 1);

      const counts = await checkLedger(killed);
      // (d) the loop is running (exhausted, waiting for a grant) or completed its ticks; never failed.
      expect(['RUNNING', 'COMPLETED']).toContain(execution);
      if (end === 'exhausted') expect(phase).toBe('exhausted');

      const { log, ...atKill } = kills;
      const summary = {
        kills: killsAt.length,
        ...atKill,
        ...counts,
        openBeforeSweep,
        sweptNow,
        end,
        execution,
        killPhaseS,
        totalS: Math.round((Date.now() - started) / 1000),
        killLog: log,
      };
      console.log(`lifeforce crash test: ${JSON.stringify(summary)}`);
      // Each window was hit: a reservation held at every kill but the `settled` ones, an answer recorded at the `answered` and `settled` ones.
      expect(kills.heldAtKill).toBe(killsAt.filter((w) => w.at !== 'settled').length);
      expect(kills.answeredAtKill).toBeGreaterThanOrEqual(killsAt.filter((w) => w.at !== 'call').length);
      // The retries closed every reservation: the sweep had nothing left, and every answer was charged.
      expect(counts.killedThenSettledByRetry).toBe(killsAt.length);
      expect(openBeforeSweep).toBe(0);
      expect(counts.answeredNotCharged).toBe(0);
    } finally {
      if (worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL');
    }
  }, 240_000);
});
