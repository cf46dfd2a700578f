/**
 * The ledger's transactions against a real Postgres: idempotent reservations and closes,
 * carving and closing child budgets, the sweep, and — property-tested with operations racing
 * each other (the same keys from two "attempts" at once) — that the budget row always agrees
 * with its ledger, settled spend never exceeds the funding, and no operation is charged twice.
 */
import fc from 'fast-check';
import { and, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkInvariant } from '../../core/lifeforce.js';
import { createDb, type DbHandle } from '../../db/client.js';
import {
  budgetReport,
  carveBudget,
  closeBudget,
  configureBudget,
  ensureBudget,
  grantLifeforce,
  release,
  reserve,
  settle,
  settleHold,
  stateOf,
  type Hold,
  sweepReservations,
} from '../../db/queries/lifeforce.js';
import { agents, lifeforceBudgets, lifeforceLedger } from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';

let handle: MigratedDatabase;
/** A second pool: another worker process, with its own cache of budget versions. */
let other: DbHandle;
const t0 = Date.UTC(2026, 10, 24, 12);

beforeAll(async () => {
  handle = await migratedDatabase('lifeforce', 6);
  other = createDb(handle.url, { max: 3 });
  await handle.db.insert(agents).values([{ id: 'lf', name: 'lf' }]);
});
afterAll(async () => {
  await other?.close();
  await handle?.dispose();
});

/** The budget row agrees with its ledger: open reservations = reserved, settles = spent, grants (+ regeneration) = funded. */
async function reconcile(budgetId: string): Promise<void> {
  const db = handle.db;
  const [row] = await db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, budgetId));
  const problem = checkInvariant(stateOf(row!));
  if (problem) throw new Error(problem);
  const [sums] = await db
    .execute<{ open: string; settled: string; dup: string }>(
      sql`
    select
      coalesce(sum(amount) filter (where kind = 'reserve' and not exists (select 1 from lifeforce_ledger c where c.reservation_key = l.idempotency_key)), 0) as open,
      coalesce(sum(amount) filter (where kind = 'settle'), 0) as settled,
      (select count(*) from lifeforce_ledger d where d.budget_id = ${budgetId} and d.reservation_key is not null group by d.reservation_key having count(*) > 1 limit 1) as dup
    from lifeforce_ledger l where l.budget_id = ${budgetId}`,
    )
    .then((r) => r.rows);
  expect(Number(sums!.open)).toBeCloseTo(row!.reserved, 4);
  expect(Number(sums!.settled)).toBeCloseTo(row!.spent, 4);
  expect(sums!.dup).toBeNull();
}

describe('the lifeforce ledger', () => {
  it('reserves once per key, closes once, and refunds the difference', async () => {
    const db = handle.db;
    await ensureBudget(db, { id: 'agent:lf', agentId: 'lf', scope: 'agent', settings: { capacity: 100 }, at: t0 });
    const first = await reserve(db, {
      key: 'op-1',
      budgetId: 'agent:lf',
      amount: 30,
      operation: 'llm_call',
      ttlMs: 60_000,
      at: t0,
    });
    const again = await reserve(db, {
      key: 'op-1',
      budgetId: 'agent:lf',
      amount: 30,
      operation: 'llm_call',
      ttlMs: 60_000,
      at: t0,
    });
    expect(first).toMatchObject({ ok: true, replayed: false });
    expect(again).toMatchObject({ ok: true, replayed: true, closed: false });
    expect((await settle(db, 'op-1', 12)).charged).toBe(12);
    expect(await settle(db, 'op-1', 12)).toMatchObject({ replayed: true });
    expect(await release(db, 'op-1', 'late')).toMatchObject({ replayed: true });
    const report = await budgetReport(db, 'agent:lf', { at: t0 });
    expect(report).toMatchObject({ available: 88, budget: { spent: 12, reserved: 0 } });
    await reconcile('agent:lf');
  });

  it('refuses what the balance cannot cover, marks the budget exhausted, and a grant clears it', async () => {
    const db = handle.db;
    const refused = await reserve(db, {
      key: 'op-big',
      budgetId: 'agent:lf',
      amount: 500,
      operation: 'llm_call',
      ttlMs: 60_000,
      at: t0,
    });
    expect(refused).toMatchObject({ ok: false, reason: 'balance', needed: 500, available: 88 });
    const [row] = await db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, 'agent:lf'));
    expect(row!.exhaustedAt).not.toBeNull();
    expect(await grantLifeforce(db, { budgetId: 'agent:lf', amount: 500, key: 'grant-1', reason: 'test' })).toBe(true);
    expect(await grantLifeforce(db, { budgetId: 'agent:lf', amount: 500, key: 'grant-1', reason: 'test' })).toBe(false);
    expect(
      await reserve(db, {
        key: 'op-big',
        budgetId: 'agent:lf',
        amount: 500,
        operation: 'llm_call',
        ttlMs: 60_000,
        at: t0,
      }),
    ).toMatchObject({ ok: true });
    await release(db, 'op-big', 'test');
    await reconcile('agent:lf');
  });

  it('releases by the sweep what a dead worker held, after its deadline only', async () => {
    const db = handle.db;
    await reserve(db, { key: 'op-dead', budgetId: 'agent:lf', amount: 5, operation: 'sandbox', ttlMs: 60_000, at: t0 });
    expect(await sweepReservations(db, t0 + 30_000)).toBe(0);
    expect(await sweepReservations(db, t0 + 61_000)).toBe(1);
    // The retry that comes after the sweep finds the reservation closed: it must reserve anew.
    expect(
      await reserve(db, {
        key: 'op-dead',
        budgetId: 'agent:lf',
        amount: 5,
        operation: 'sandbox',
        ttlMs: 60_000,
        at: t0,
      }),
    ).toMatchObject({ ok: true, replayed: true, closed: true });
    await reconcile('agent:lf');
  });

  it('carves a child out of what the parent has left, never more, and returns the rest on close', async () => {
    const db = handle.db;
    await ensureBudget(db, { id: 'agent:carver', agentId: 'lf', scope: 'agent', settings: { capacity: 50 }, at: t0 });
    expect(
      await carveBudget(db, {
        parentId: 'agent:carver',
        id: 'task:lf/1',
        agentId: 'lf',
        scope: 'task',
        amount: 60,
        at: t0,
      }),
    ).toMatchObject({ ok: false, reason: 'balance' });
    const child = await carveBudget(db, {
      parentId: 'agent:carver',
      id: 'task:lf/1',
      agentId: 'lf',
      scope: 'task',
      amount: 20,
      at: t0,
    });
    expect(child).toMatchObject({ ok: true, carved: 20 });
    await reserve(db, {
      key: 'child-op',
      budgetId: 'task:lf/1',
      amount: 15,
      operation: 'llm_call',
      ttlMs: 60_000,
      at: t0,
    });
    await settle(db, 'child-op', 7);
    expect(
      await reserve(db, {
        key: 'child-op-2',
        budgetId: 'task:lf/1',
        amount: 14,
        operation: 'llm_call',
        ttlMs: 60_000,
        at: t0,
      }),
    ).toMatchObject({ ok: false, reason: 'balance', available: 13 });
    // Without an amount, a limited parent gives a quarter of what it has available (30 → 7.5).
    expect(
      await carveBudget(db, {
        parentId: 'agent:carver',
        id: 'task:lf/2',
        agentId: 'lf',
        scope: 'task',
        amount: null,
        at: t0,
      }),
    ).toMatchObject({ ok: true, carved: 7.5 });
    // A call still running when its budget closes is charged its worst case, then and there.
    const running = await reserve(db, {
      key: 'child-op-running',
      budgetId: 'task:lf/1',
      amount: 3,
      operation: 'llm_call',
      ttlMs: 60_000,
      at: t0,
    });
    await closeBudget(db, 'task:lf/1', 'task done');
    await closeBudget(db, 'task:lf/1', 'task done');
    expect(running.ok && running.hold ? await settleHold(db, running.hold, 1) : null).toMatchObject({ replayed: true });
    const report = await budgetReport(db, 'agent:carver', { at: t0 });
    // 50 − 10 spent by the child (7 settled, 3 held at the close) − 7.5 held for the second child.
    expect(report).toMatchObject({ available: 32.5, budget: { spent: 10, reserved: 7.5 } });
    expect(
      await reserve(db, {
        key: 'child-op-3',
        budgetId: 'task:lf/1',
        amount: 1,
        operation: 'llm_call',
        ttlMs: 60_000,
        at: t0,
      }),
    ).toMatchObject({ ok: false, reason: 'closed' });
    await reconcile('agent:carver');
    await reconcile('task:lf/1');
  });

  it("a closing child gives back what it has, its unspent grants included; an unlimited child's spend reaches its parent", async () => {
    const db = handle.db;
    await ensureBudget(db, { id: 'agent:giver', agentId: 'lf', scope: 'agent', settings: { capacity: 100 }, at: t0 });
    await carveBudget(db, {
      parentId: 'agent:giver',
      id: 'campaign:g1',
      agentId: 'lf',
      scope: 'campaign',
      amount: 10,
      at: t0,
    });
    await grantLifeforce(db, { budgetId: 'campaign:g1', amount: 20, key: 'g1-grant', reason: 'test' });
    await reserve(db, {
      key: 'g1-op',
      budgetId: 'campaign:g1',
      amount: 6,
      operation: 'llm_call',
      ttlMs: 60_000,
      at: t0,
    });
    await settle(db, 'g1-op', 5);
    await closeBudget(db, 'campaign:g1', 'done');
    // The child's 5 are the parent's spend; its 25 left (5 of the carve, the 20 granted) go back.
    expect(await budgetReport(db, 'agent:giver', { at: t0 })).toMatchObject({
      available: 115,
      budget: { spent: 5, reserved: 0 },
    });
    await reconcile('agent:giver');
    await reconcile('campaign:g1');

    await ensureBudget(db, { id: 'agent:free', agentId: 'lf', scope: 'agent', settings: { capacity: null }, at: t0 });
    await carveBudget(db, {
      parentId: 'agent:free',
      id: 'task:lf/9',
      agentId: 'lf',
      scope: 'task',
      amount: null,
      at: t0,
    });
    await reserve(db, {
      key: 'free-op',
      budgetId: 'task:lf/9',
      amount: 3,
      operation: 'llm_call',
      ttlMs: 60_000,
      at: t0,
    });
    await settle(db, 'free-op', 4.5);
    await closeBudget(db, 'task:lf/9', 'done');
    expect(await budgetReport(db, 'agent:free', { at: t0 })).toMatchObject({
      available: null,
      budget: { spent: 4.5, reserved: 0 },
    });
  });

  it('an operator sets the capacity (refilled to it), regeneration and envelopes', async () => {
    const db = handle.db;
    const row = await configureBudget(
      db,
      'lf',
      { capacity: 40, regenPerHour: 4, dailyLimit: 30, onExhausted: 'escalate' },
      t0,
    );
    expect(row).toMatchObject({ capacity: 40, regenPerHour: 4, dailyLimit: 30, onExhausted: 'escalate' });
    expect(row.balance).toBe(40);
    expect(
      await reserve(db, {
        key: 'cfg-1',
        budgetId: 'agent:lf',
        amount: 35,
        operation: 'llm_call',
        ttlMs: 60_000,
        at: t0,
      }),
    ).toMatchObject({ ok: false, reason: 'daily', available: 18 });
    await reconcile('agent:lf');
    // A lower capacity takes the difference out of the funding, as a `withdraw` entry.
    const cut = await configureBudget(db, 'lf', { capacity: 25 }, t0);
    expect(cut).toMatchObject({ capacity: 25, balance: 25 });
    const [last] = await db
      .select()
      .from(lifeforceLedger)
      .where(eq(lifeforceLedger.budgetId, 'agent:lf'))
      .orderBy(sql`${lifeforceLedger.id} desc`)
      .limit(1);
    expect(last).toMatchObject({ kind: 'withdraw', amount: 15 });
    expect(cut.funded).toBe(row.funded - 15);
    await reconcile('agent:lf');
  });

  it('decides on the budget as it is, not on the version a process wrote last', async () => {
    const [a, b] = [handle.db, other.db];
    await a.insert(agents).values({ id: 'two', name: 'two' });
    await ensureBudget(a, { id: 'agent:two', agentId: 'two', scope: 'agent', settings: { capacity: 10 }, at: t0 });
    const held = (key: string, amount: number, db = a) =>
      reserve(db, { key, budgetId: 'agent:two', amount, operation: 'llm_call', ttlMs: 60_000, at: t0 });
    expect(await held('two-1', 8)).toMatchObject({ ok: true, replayed: false });
    // The other process grants: what `a` wrote last says 2 LF are left; the row says 22.
    await grantLifeforce(b, { budgetId: 'agent:two', amount: 20, key: 'two-g', reason: 'test' });
    expect(await held('two-2', 15)).toMatchObject({ ok: true, replayed: false });
    // And spends: `a`'s version is stale again, its write misses and it holds on a fresh read.
    expect(await held('two-3', 3, b)).toMatchObject({ ok: true });
    expect(await held('two-4', 5)).toMatchObject({ ok: false, reason: 'balance', available: 4 });
    // A key held before answers as before, not as a new hold, on the version just written too.
    expect(await held('two-5', 1)).toMatchObject({ ok: true, replayed: false });
    expect(await held('two-5', 1)).toMatchObject({ ok: true, replayed: true });
    await settle(b, 'two-1', 2);
    expect(await held('two-6', 9)).toMatchObject({ ok: true, replayed: false });
    await reconcile('agent:two');
    const [row] = await a.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, 'agent:two'));
    expect(row).toMatchObject({ funded: 30, reserved: 28, spent: 2, balance: 0 });
  });

  it('holds asked for at once go in one statement, in the order asked; one the budget refuses leaves each to be decided alone', async () => {
    const db = handle.db;
    await db.insert(agents).values({ id: 'five', name: 'five' });
    await ensureBudget(db, { id: 'agent:five', agentId: 'five', scope: 'agent', settings: { capacity: 10 }, at: t0 });
    const hold = (key: string, amount: number) =>
      reserve(db, { key, budgetId: 'agent:five', amount, operation: 'llm_call', ttlMs: 60_000, at: t0 });
    // The first write leaves this process a version of the budget; the next holds go on it.
    expect(await hold('five-0', 1)).toMatchObject({ ok: true });
    const together = await Promise.all([1, 2, 3, 4].map((i) => hold(`five-${i}`, 1)));
    expect(together.map((r) => r.ok && r.hold?.amount)).toEqual([1, 1, 1, 1]);
    const rows = await db
      .select({ key: lifeforceLedger.idempotencyKey, at: lifeforceLedger.createdAt })
      .from(lifeforceLedger)
      .where(
        and(
          eq(lifeforceLedger.budgetId, 'agent:five'),
          sql`idempotency_key in ('five-1', 'five-2', 'five-3', 'five-4')`,
        ),
      );
    // One statement: one transaction's now() for the four.
    expect(rows).toHaveLength(4);
    expect(new Set(rows.map((r) => r.at.getTime())).size).toBe(1);
    // 5 LF left: three holds of 2 asked at once, the third refused, as one after another would be.
    const more = await Promise.all([5, 6, 7].map((i) => hold(`five-${i}`, 2)));
    expect(more.map((r) => r.ok)).toEqual([true, true, false]);
    expect(more[2]).toMatchObject({ ok: false, reason: 'balance', available: 1 });
    // Their settles at once: one statement too; the same hold twice is charged once.
    const holds = together.map((r) => (r.ok ? r.hold! : undefined)!);
    const settled = await Promise.all([...holds.map((h) => settleHold(db, h, 0.5)), settleHold(db, holds[0]!, 0.5)]);
    expect(settled.map((r) => r.replayed)).toEqual([false, false, false, false, true]);
    expect(settled.slice(0, 4).map((r) => [r.charged, r.refunded])).toEqual(Array(4).fill([0.5, 0.5]));
    const closes = await db
      .select({ at: lifeforceLedger.createdAt })
      .from(lifeforceLedger)
      .where(and(eq(lifeforceLedger.budgetId, 'agent:five'), eq(lifeforceLedger.kind, 'settle')));
    expect(closes).toHaveLength(4);
    expect(new Set(closes.map((r) => r.at.getTime())).size).toBe(1);
    await reconcile('agent:five');
    const [row] = await db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, 'agent:five'));
    // 10 funded: five-0 (1) and five-5, five-6 (2 each) held, the four settled at 0.5.
    expect(row).toMatchObject({ reserved: 5, spent: 2, balance: 3 });
  });

  it('a settle racing a close of the same hold from another process waits for it instead of deadlocking', async () => {
    const db = handle.db;
    const waiting = async (n: number) => {
      for (let i = 0; i < 500; i++) {
        const [{ w }] = (
          await db.execute<{ w: number }>(
            sql`select count(*)::int as w from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
          )
        ).rows as [{ w: number }];
        if (w >= n) return;
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error(`${n} statements never waited for a lock`);
    };
    const deadlocks = async () => {
      await new Promise((r) => setTimeout(r, 1_200)); // the backends' statistics reach the view
      await db.execute(sql`select pg_stat_clear_snapshot()`);
      const [row] = (
        await db.execute<{ n: string }>(
          sql`select deadlocks::text as n from pg_stat_database where datname = current_database()`,
        )
      ).rows;
      return Number(row!.n);
    };
    const before = await deadlocks();
    for (let trial = 0; trial < 3; trial++) {
      const id = `agent:order-${trial}`;
      await db
        .insert(agents)
        .values({ id: id.slice(6), name: 'order' })
        .onConflictDoNothing();
      await ensureBudget(db, { id, agentId: id.slice(6), scope: 'agent', settings: { capacity: 10 }, at: t0 });
      const r = await reserve(db, {
        key: `${id}#1`,
        budgetId: id,
        amount: 4,
        operation: 'llm_call',
        ttlMs: 60_000,
        at: t0,
      });
      expect(r.ok && r.hold).toBeTruthy();
      // The budget's row held elsewhere; the other process's release waits for it first, then the
      // owner's settle: once the row is free the release goes first and closes the hold.
      const blocker = await handle.pool.connect();
      try {
        await blocker.query('begin');
        await blocker.query('select 1 from lifeforce_budgets where id = $1 for update', [id]);
        const released = release(other.db, `${id}#1`, 'test');
        await waiting(1);
        const settled = settleHold(db, (r as { hold: Hold }).hold, 3);
        await waiting(2);
        await blocker.query('commit');
        const [a, b] = await Promise.all([released, settled]);
        expect([a.replayed, b.replayed].sort()).toEqual([false, true]);
      } finally {
        blocker.release();
      }
      await reconcile(id);
    }
    expect(await deadlocks()).toBe(before);
  });

  it('keeps the row and the ledger in agreement under racing operations', async () => {
    const db = handle.db;
    let run = 0;
    // `elsewhere`: the operation comes from the other process, whose cached budget version is
    // stale whenever this one wrote last (and the other way round).
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('reserve' as const),
        key: fc.nat(5),
        amount: fc.integer({ min: 0, max: 3000 }).map((x) => x / 100),
        elsewhere: fc.boolean(),
      }),
      fc.record({
        kind: fc.constant('settle' as const),
        key: fc.nat(5),
        actual: fc.integer({ min: 0, max: 4000 }).map((x) => x / 100),
        elsewhere: fc.boolean(),
      }),
      fc.record({ kind: fc.constant('release' as const), key: fc.nat(5), elsewhere: fc.boolean() }),
      fc.record({
        kind: fc.constant('grant' as const),
        amount: fc.integer({ min: 0, max: 2000 }).map((x) => x / 100),
        elsewhere: fc.boolean(),
      }),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 60 }),
        fc.array(fc.array(op, { minLength: 1, maxLength: 3 }), { maxLength: 4 }),
        async (capacity, batches) => {
          const id = `agent:race-${run++}`;
          await db
            .insert(agents)
            .values({ id: id.slice(6), name: 'race' })
            .onConflictDoNothing();
          await ensureBudget(db, { id, agentId: id.slice(6), scope: 'agent', settings: { capacity }, at: t0 });
          let g = 0;
          // A hold its reserve handed back settles in one statement (the owner's path); one not
          // known here (its reserve still racing) by reading it — both paths, in the same races.
          const holds = new Map<string, Hold>();
          for (const batch of batches) {
            // One batch runs at once: a retried attempt racing its first, a settle racing the sweep.
            await Promise.all(
              batch.map((o) => {
                const db = o.elsewhere ? other.db : handle.db;
                return o.kind === 'reserve'
                  ? reserve(db, {
                      key: `${id}#${o.key}`,
                      budgetId: id,
                      amount: o.amount,
                      operation: 'llm_call',
                      ttlMs: 60_000,
                      at: t0,
                    }).then((r) => {
                      if (r.ok && r.hold) holds.set(r.key, r.hold);
                    })
                  : o.kind === 'settle'
                    ? holds.has(`${id}#${o.key}`)
                      ? settleHold(db, holds.get(`${id}#${o.key}`)!, o.actual)
                      : settle(db, `${id}#${o.key}`, o.actual)
                    : o.kind === 'release'
                      ? release(db, `${id}#${o.key}`, 'test')
                      : grantLifeforce(db, { budgetId: id, amount: o.amount, key: `${id}:g${g++}`, reason: 'test' });
              }),
            );
          }
          await reconcile(id);
        },
      ),
      { numRuns: 1000 },
    );
    const [open] = await db
      .select({ n: sql<number>`count(*)::int` })
      .from(lifeforceLedger)
      .where(and(eq(lifeforceLedger.kind, 'reserve'), sql`budget_id like 'agent:race-%'`));
    expect(open!.n).toBeGreaterThan(0);
  }, 600_000);
});
