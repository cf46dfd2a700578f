/**
 * The lifeforce ledger's changes. A hold and its close read the budget row with its version
 * (`xmin`), apply core/lifeforce.ts, and write the new row and the ledger entry in one statement
 * that only lands if the row is still that version (else they read again): both writes or
 * neither, no lock held in between. The rarer changes (grants, carves, settings) lock the row
 * (`FOR UPDATE`) in a transaction, which bumps the version the same way.
 *
 * A process keeps the last version it wrote of each budget (`versions`), so its next hold skips the
 * read: the compare-and-set still guards it, and a version another process moved makes the write
 * miss and the hold read again. Within a process, the changes of one budget outside a transaction
 * run one after the other (`serially`): parallel calls of one agent then follow each other on the
 * cached version instead of colliding and falling back to the lock.
 *
 * Keys: an operation reserves under its own idempotency key (a retried attempt finds the
 * reservation instead of holding twice); its settle or release is the entry `close:<key>`,
 * unique, so a reservation is closed once whoever closes it (the operation, its retry, the sweep).
 */
import { randomUUID } from 'node:crypto';
import { and, desc, eq, gte, inArray, lt, sql } from 'drizzle-orm';
import {
  available,
  budgetIds,
  checkInvariant,
  dayWindow,
  grant as grantState,
  lfRound,
  monthWindow,
  newBudget,
  regenerate,
  reserve as reserveState,
  settle as settleState,
  type BudgetScope,
  type BudgetSettings,
  type BudgetState,
  type DenyReason,
  type ExhaustedPolicy,
} from '../../core/lifeforce.js';
import type { Db } from '../client.js';
import { rowOf } from '../json-rows.js';
import { executeNamed } from '../prepared.js';
import {
  lifeforceBudgets,
  lifeforceLedger,
  type LifeforceBudget,
  type LifeforceLedgerEntry,
} from '../schema/lifeforce.js';

import { afterDeadlocks, answer, inTransaction, inTurn, type Tx, type Waiting } from './budget-queue.js';

export interface ReserveRequest {
  /** The operation's idempotency key (workflow id + tick + purpose, …). */
  key: string;
  budgetId: string;
  /** The worst case, in LF. */
  amount: number;
  /** What is paid for: llm_call, sandbox, speech, fork_evaluation, nerve, … */
  operation: string;
  /** The time of the operation in ms (the workflow's clock where a workflow asks; default now). */
  at?: number;
  /** After this long an unclosed reservation is released by the sweep (its worker died); null: no deadline (a carve). */
  ttlMs: number | null;
  tick?: number;
  reason?: string;
  metadata?: Record<string, unknown>;
}

export type ReserveResult =
  | { ok: true; key: string; amount: number; replayed: boolean; closed: boolean; hold?: Hold }
  | { ok: false; budgetId: string; reason: DenyReason | 'missing'; needed: number; available: number | null };

const closeKey = (reservationKey: string) => `close:${reservationKey}`;

export function stateOf(row: LifeforceBudget): BudgetState {
  return {
    capacity: row.capacity,
    balance: row.balance,
    reserved: row.reserved,
    spent: row.spent,
    funded: row.funded,
    regenPerHour: row.regenPerHour,
    regenAt: row.regenAt.getTime(),
    daily: { limit: row.dailyLimit, window: row.dailyWindow, used: row.dailyUsed },
    monthly: { limit: row.monthlyLimit, window: row.monthlyWindow, used: row.monthlyUsed },
    closed: row.closedAt !== null,
  };
}

function columnsOf(b: BudgetState) {
  return {
    capacity: b.capacity,
    balance: b.balance,
    reserved: b.reserved,
    spent: b.spent,
    funded: b.funded,
    regenPerHour: b.regenPerHour,
    regenAt: new Date(b.regenAt),
    dailyLimit: b.daily.limit,
    dailyWindow: b.daily.window,
    dailyUsed: b.daily.used,
    monthlyLimit: b.monthly.limit,
    monthlyWindow: b.monthly.window,
    monthlyUsed: b.monthly.used,
  };
}

/** The budget row, locked for the rest of the transaction. */
async function lockBudget(tx: Tx, budgetId: string): Promise<LifeforceBudget | undefined> {
  const [row] = await tx.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, budgetId)).for('update');
  return row;
}

async function entryByKey(conn: Tx, key: string): Promise<LifeforceLedgerEntry | undefined> {
  const [row] = await conn.select().from(lifeforceLedger).where(eq(lifeforceLedger.idempotencyKey, key));
  return row;
}

/** An agent's budget is created on first use, unlimited, if nothing set it up before. */
function agentOf(budgetId: string): string | null {
  return budgetId.startsWith('agent:') ? budgetId.slice('agent:'.length) : null;
}

/** A budget row as read for a change: its values and its row version (`xmin`), which the write checks. */
interface Versioned {
  row: LifeforceBudget;
  version: string;
}

/** Per database handle: the last version of each budget this process wrote, by budget id. */
const versions = new WeakMap<object, Map<string, Versioned>>();
/** Bounds the cache: past it the versions are dropped (a miss only costs a read). */
const maxCachedVersions = 10_000;

function cachedVersion(db: Db | Tx, budgetId: string): Versioned | undefined {
  return inTransaction(db) ? undefined : versions.get(db)?.get(budgetId);
}

function remember(db: Db | Tx, v: Versioned | undefined, budgetId: string): void {
  if (inTransaction(db)) return;
  let m = versions.get(db);
  if (!m) versions.set(db, (m = new Map()));
  if (!v) {
    m.delete(budgetId);
    return;
  }
  if (m.size >= maxCachedVersions && !m.has(budgetId)) m.clear();
  m.set(budgetId, v);
}

/**
 * Run a change that reads a budget and writes it only if unchanged (`once` answers `conflict`
 * when another change came between): first without a lock, the cheap way for the usual single
 * writer; when contended (several calls of one agent at once), once more holding the row's lock,
 * where no other change can come between.
 */
async function changeBudget<T>(
  db: Db | Tx,
  budgetId: string,
  once: (conn: Db | Tx) => Promise<T | 'conflict'>,
): Promise<T> {
  const first = await once(db);
  if (first !== 'conflict') return first;
  return (db as Db).transaction(async (tx) => {
    await lockBudget(tx, budgetId);
    const locked = await once(tx);
    if (locked === 'conflict') throw new Error(`lifeforce: budget ${budgetId} changed while locked`);
    return locked;
  });
}

/**
 * Write a budget's new values and its ledger entry in one statement, only if the row is still
 * the version that was read (compare-and-set on `xmin`) and the entry's key is new: both or
 * neither. The row's new version; null when another change came first (read again and retry).
 */
async function writeIfUnchanged(
  db: Db | Tx,
  read: Versioned,
  values: Partial<LifeforceBudget>,
  entries: ReadonlyArray<typeof lifeforceLedger.$inferInsert>,
): Promise<Versioned | null> {
  const sets = Object.entries(values).map(([prop, value]) => {
    const column = lifeforceBudgets[prop as keyof typeof lifeforceBudgets.$inferSelect];
    return sql`${sql.identifier(column.name)} = ${value instanceof Date ? value.toISOString() : value}`;
  });
  const keys = entries.map((e) => e.idempotencyKey);
  const rows = entries.map(
    (
      entry,
    ) => sql`(${entry.agentId}::text, ${entry.budgetId ?? null}::text, ${entry.scope ?? 'agent'}::text, ${entry.scopeId ?? null}::text,
      ${entry.idempotencyKey}::text, ${entry.kind}::text, ${entry.amount}::numeric, ${entry.reservationKey ?? null}::text,
      ${entry.operation ?? null}::text, ${entry.reason ?? null}::text, ${entry.tick ?? null}::bigint,
      ${entry.deadline ? entry.deadline.toISOString() : null}::timestamptz, ${entry.metadata ? JSON.stringify(entry.metadata) : null}::jsonb)`,
  );
  const r = await executeNamed(
    db,
    'ledger',
    sql`
    with changed as (
      update lifeforce_budgets set ${sql.join(sets, sql`, `)}, updated_at = now()
      where id = ${read.row.id} and xmin = ${read.version}::text::xid
        and not exists (select 1 from lifeforce_ledger where idempotency_key in (${sql.join(
          keys.map((k) => sql`${k}`),
          sql`, `,
        )}))
      returning id, xmin::text as version
    )
    insert into lifeforce_ledger (agent_id, budget_id, scope, scope_id, idempotency_key, kind, amount, reservation_key, operation, reason, tick, deadline, metadata)
    select e.* from (values ${sql.join(rows, sql`, `)}) as e(agent_id, budget_id, scope, scope_id, idempotency_key, kind, amount, reservation_key, operation, reason, tick, deadline, metadata)
    where exists (select 1 from changed)
    returning (select version from changed)`,
  );
  const version = (r.rows[0] as { version?: string } | undefined)?.version;
  return version === undefined ? null : { row: { ...read.row, ...values }, version };
}

/** The budget with its version, and what the ledger already holds under `key` and its close. */
async function readForChange(db: Db | Tx, budgetId: string, key: string) {
  const [r] = await db
    .select({
      row: lifeforceBudgets,
      version: sql<string>`${lifeforceBudgets}.xmin::text`,
      previous: sql<string | null>`(select amount from lifeforce_ledger where idempotency_key = ${key})`,
      closed: sql<boolean>`exists (select 1 from lifeforce_ledger where idempotency_key = ${closeKey(key)})`,
    })
    .from(lifeforceBudgets)
    .where(eq(lifeforceBudgets.id, budgetId));
  return r;
}

/**
 * Hold `amount` on the budget for an operation about to run. A key seen before answers as
 * before (held, or already closed); a budget that cannot cover it answers why and holds nothing.
 * Two statements (a read, a compare-and-set write), no lock held between them; one (the write)
 * on the version of the budget this process wrote last. Holds asked for one budget while another
 * is being taken (the reflexes' model calls of a tick) go together after it, in one statement when
 * they can (`reserveTogether`).
 */
export function reserve(db: Db | Tx, req: ReserveRequest): Promise<ReserveResult> {
  if (inTransaction(db)) return reserveQueued(db, req);
  return inTurn(db, 'reserve', req.budgetId, req, (batch) => reserveBatch(db, batch));
}

/** Every waiting hold: together when they can be, else one after another. */
async function reserveBatch(db: Db | Tx, batch: Waiting<ReserveRequest, ReserveResult>[]): Promise<void> {
  if (batch.length > 1) {
    const reqs = batch.map((b) => b.req);
    const together = await afterDeadlocks(() => reserveTogether(db, reqs)).catch(() => null);
    if (together) {
      batch.forEach((b, i) => b.resolve(together[i]!));
      return;
    }
  }
  for (const b of batch) await answer([b], async () => [await reserveQueued(db, b.req)]);
}

/**
 * Several holds on one budget in one statement, on the version of it this process wrote last;
 * null when that cannot be (no such version, a key twice, a hold the budget refuses, the budget
 * changed since): each is then reserved alone, the way that answers every case.
 */
async function reserveTogether(db: Db | Tx, reqs: readonly ReserveRequest[]): Promise<ReserveResult[] | null> {
  const cached = cachedVersion(db, reqs[0]!.budgetId);
  if (!cached || new Set(reqs.map((r) => r.key)).size < reqs.length) return null;
  let state = stateOf(cached.row);
  const holds: NewHold[] = [];
  for (const req of reqs) {
    const at = req.at ?? Date.now();
    const amount = lfRound(req.amount);
    const outcome = reserveState(state, amount, at);
    if (!outcome.ok) return null;
    state = outcome.budget;
    holds.push({ req, at, amount, windows: outcome.windows });
  }
  const { row } = cached;
  const written = await writeIfUnchanged(
    db,
    cached,
    { ...columnsOf(state), exhaustedAt: null },
    holds.map((h) => holdEntry(row, h)),
  );
  remember(db, written ?? undefined, row.id);
  return written ? holds.map((h) => held(row, h)) : null;
}

/** A hold about to be written: what was asked, when, its amount and the windows it counts in. */
interface NewHold {
  req: ReserveRequest;
  at: number;
  amount: number;
  windows: { day: string; month: string };
}

/** The ledger entry of a hold. */
function holdEntry(row: LifeforceBudget, { req, at, amount, windows }: NewHold): typeof lifeforceLedger.$inferInsert {
  return {
    agentId: row.agentId,
    budgetId: row.id,
    scope: row.scope,
    scopeId: row.id,
    idempotencyKey: req.key,
    kind: 'reserve',
    amount,
    operation: req.operation,
    reason: req.reason ?? null,
    tick: req.tick ?? null,
    deadline: req.ttlMs === null ? null : new Date(at + req.ttlMs),
    metadata: { ...req.metadata, windows },
  };
}

/** What a new hold answers. */
function held(row: LifeforceBudget, { req, amount, windows }: NewHold): ReserveResult {
  const hold = { key: req.key, budgetId: row.id, amount, windows, limited: row.balance !== null };
  return {
    ok: true,
    key: req.key,
    amount,
    replayed: false,
    closed: false,
    hold: { ...hold, operation: req.operation, tick: req.tick ?? null },
  };
}

async function reserveQueued(db: Db | Tx, req: ReserveRequest): Promise<ReserveResult> {
  const at = req.at ?? Date.now();
  const amount = lfRound(req.amount);
  // The version this process wrote last: one statement, if no one else changed the budget since.
  const cached = cachedVersion(db, req.budgetId);
  if (cached) {
    const fast = await reserveOnce(db, req, at, amount, cached);
    if (fast !== 'conflict') return fast;
    remember(db, undefined, req.budgetId);
  }
  const result = await changeBudget(db, req.budgetId, (conn) => reserveOnce(conn, req, at, amount));
  const agentId = agentOf(req.budgetId);
  if (result.ok || result.reason !== 'missing' || agentId === null) return result;
  // An agent's budget is created on first use, unlimited, if nothing set it up before.
  await (db as Db).transaction((tx) =>
    insertBudget(tx, { id: req.budgetId, agentId, scope: 'agent', settings: { capacity: null }, at }),
  );
  return changeBudget(db, req.budgetId, (conn) => reserveOnce(conn, req, at, amount));
}

/**
 * One try at a hold: on the budget as read now, or on `cached` (a version this process wrote),
 * where a key seen before or a refusal answers `conflict` so that a fresh read decides them.
 */
async function reserveOnce(
  db: Db | Tx,
  req: ReserveRequest,
  at: number,
  amount: number,
  cached?: Versioned,
): Promise<ReserveResult | 'conflict'> {
  const fresh = cached ? undefined : await readForChange(db, req.budgetId, req.key);
  const read = cached ?? fresh;
  if (!read) return { ok: false, budgetId: req.budgetId, reason: 'missing', needed: amount, available: 0 };
  const { row } = read;
  if (fresh && fresh.previous !== null)
    return { ok: true, key: req.key, amount: Number(fresh.previous), replayed: true, closed: fresh.closed };
  const outcome = reserveState(stateOf(row), amount, at);
  if (!outcome.ok) {
    if (cached) return 'conflict';
    if (row.exhaustedAt === null && outcome.reason !== 'closed')
      await db
        .update(lifeforceBudgets)
        .set({ exhaustedAt: new Date(at) })
        .where(eq(lifeforceBudgets.id, row.id));
    return { ok: false, budgetId: row.id, reason: outcome.reason, needed: amount, available: outcome.available };
  }
  const hold = { req, at, amount, windows: outcome.windows };
  const written = await writeIfUnchanged(db, read, { ...columnsOf(outcome.budget), exhaustedAt: null }, [
    holdEntry(row, hold),
  ]);
  if (!written) return 'conflict';
  remember(db, written, row.id);
  return held(row, hold);
}

/**
 * A hold that is open when this returns: under `req.key`, or — when that key was closed already
 * (the operation's earlier attempt was released, or the sweep released it after its worker died)
 * — anew under `<key>#<uuid>`. The result's `key` is the one to settle.
 */
export async function reserveOpen(db: Db | Tx, req: ReserveRequest): Promise<ReserveResult> {
  const held = await reserve(db, req);
  return held.ok && held.closed ? reserve(db, reopened(req)) : held;
}

/** The same hold under a fresh key, for when the one under its own key is closed already. */
export function reopened(req: ReserveRequest): ReserveRequest {
  return { ...req, key: `${req.key}#${randomUUID()}` };
}

export interface CloseResult {
  /** What the operation was charged (0 for a release). */
  charged: number;
  /** Returned to the budget. */
  refunded: number;
  /** The actual cost beyond the reservation, not charged (never happens with an honest worst case). */
  overrun: number;
  /** Closed before (by this operation's earlier attempt, or the sweep): nothing changed now. */
  replayed: boolean;
  /** What the budget can still reserve after this close (null: unlimited; absent when replayed). */
  available?: number | null;
}

const windowsOf = (entry: LifeforceLedgerEntry) => {
  const w = entry.metadata?.windows as { day?: string; month?: string } | undefined;
  const at = entry.createdAt.getTime();
  return { day: w?.day ?? dayWindow(at), month: w?.month ?? monthWindow(at) };
};

async function close(
  db: Db,
  reservationKey: string,
  actual: number,
  kind: 'settle' | 'release',
  details: { reason?: string; metadata?: Record<string, unknown> },
): Promise<CloseResult> {
  // A deadlock's victim (Postgres aborts one of two changes waiting on each other) reads again.
  return afterDeadlocks(async () => {
    const first = await closeOnce(db, reservationKey, actual, kind, details);
    if (!('conflict' in first)) return first;
    // Contended (calls of one agent at once): once more holding the budget row's lock.
    return db.transaction(async (tx) => {
      await lockBudget(tx, first.conflict);
      const locked = await closeOnce(tx, reservationKey, actual, kind, details);
      if ('conflict' in locked) throw new Error(`lifeforce: budget ${first.conflict} changed while locked`);
      return locked;
    });
  });
}

async function closeOnce(
  db: Db | Tx,
  reservationKey: string,
  actual: number,
  kind: 'settle' | 'release',
  details: { reason?: string; metadata?: Record<string, unknown> },
): Promise<CloseResult | { conflict: string }> {
  // One read: the reservation, its budget (with its version) and whether it is closed already —
  // by its own key, so whoever closes first (the operation, its retry, the sweep) closes it.
  const [read] = await db
    .select({
      reservation: lifeforceLedger,
      row: lifeforceBudgets,
      version: sql<string>`${lifeforceBudgets}.xmin::text`,
      previous: sql<
        string | null
      >`(select amount from lifeforce_ledger where idempotency_key = ${closeKey(reservationKey)})`,
    })
    .from(lifeforceLedger)
    .innerJoin(lifeforceBudgets, eq(lifeforceBudgets.id, lifeforceLedger.budgetId))
    .where(and(eq(lifeforceLedger.idempotencyKey, reservationKey), eq(lifeforceLedger.kind, 'reserve')));
  if (!read) return { charged: 0, refunded: 0, overrun: 0, replayed: true };
  const { reservation } = read;
  if (read.previous !== null) return { charged: Number(read.previous), refunded: 0, overrun: 0, replayed: true };
  const { budget, charged, overrun } = settleState(
    stateOf(read.row),
    reservation.amount,
    kind === 'release' ? 0 : actual,
    windowsOf(reservation),
  );
  const written = await writeIfUnchanged(db, read, columnsOf(budget), [
    {
      agentId: read.row.agentId,
      budgetId: read.row.id,
      scope: read.row.scope,
      scopeId: read.row.id,
      idempotencyKey: closeKey(reservationKey),
      kind,
      amount: charged,
      reservationKey,
      operation: reservation.operation,
      reason: details.reason ?? null,
      tick: reservation.tick,
      metadata: { reserved: reservation.amount, ...(overrun > 0 ? { overrun } : {}), ...details.metadata },
    },
  ]);
  if (!written) return { conflict: read.row.id };
  remember(db, written, read.row.id);
  return {
    charged,
    refunded: lfRound(Math.max(0, reservation.amount - charged)),
    overrun,
    replayed: false,
    available: available(budget),
  };
}

/** What a fresh hold's owner keeps to settle it in one statement (`settleHold`). */
export interface Hold {
  key: string;
  budgetId: string;
  amount: number;
  windows: { day: string; month: string };
  /** The budget has a balance (a charge is capped at the hold); false: unlimited. */
  limited: boolean;
  operation: string;
  tick: number | null;
}

/**
 * Settle a hold its owner took (the usual path, one statement): the close entry is inserted under
 * its unique key and the budget's counters move by the same amounts `settle` computes — only if
 * the insert happened, so it is charged once whoever else closes it. A hold closed before (the
 * sweep, a retry) answers `replayed`.
 */
export function settleHold(
  db: Db,
  hold: Hold,
  actual: number,
  metadata?: Record<string, unknown>,
): Promise<CloseResult> {
  return inTurn(db, 'settle', hold.budgetId, { hold, actual, metadata }, (batch) => settleBatch(db, batch));
}

interface HoldSettle {
  hold: Hold;
  actual: number;
  metadata?: Record<string, unknown>;
}

/** The waiting settles of one budget in one statement; a hold settled twice in it, its second time after. */
async function settleBatch(db: Db, batch: Waiting<HoldSettle, CloseResult>[]): Promise<void> {
  const keys = new Set<string>();
  const first = batch.filter((b) => !keys.has(b.req.hold.key) && keys.add(b.req.hold.key));
  await answer(first, () =>
    settleHolds(
      db,
      first.map((b) => b.req),
    ),
  );
  for (const b of batch) if (!first.includes(b)) await answer([b], () => settleHolds(db, [b.req]));
}

/**
 * Settle holds of one budget (distinct keys) in one statement: the close entries are inserted
 * under their unique keys and the budget's counters move by the sums of what `settle` computes for
 * each — only for those inserted, so each is charged once whoever else closes it. A hold closed
 * before (the sweep, a retry) answers `replayed`. The budget's row is locked before the entries go
 * in, the order every change of a budget takes (`writeIfUnchanged` updates the row, then inserts):
 * a close of the same hold racing this one waits for it instead of deadlocking with it.
 */
async function settleHolds(db: Db, settles: readonly HoldSettle[]): Promise<CloseResult[]> {
  const budgetId = settles[0]!.hold.budgetId;
  const each = settles.map(({ hold, actual, metadata }) => {
    const charged = lfRound(hold.limited ? Math.min(hold.amount, Math.max(0, actual)) : Math.max(0, actual));
    const refund = lfRound(Math.max(0, hold.amount - charged));
    const overrun = lfRound(Math.max(0, actual - charged));
    const meta = { reserved: hold.amount, ...(overrun > 0 ? { overrun } : {}), ...metadata };
    return { hold, charged, refund, overrun, meta };
  });
  const input = each.map(
    ({ hold, charged, refund, meta }) =>
      sql`(${hold.key}::text, ${closeKey(hold.key)}::text, ${charged}::numeric, ${refund}::numeric, ${hold.amount}::numeric, ${hold.windows.day}::text,
        ${hold.windows.month}::text, ${hold.operation}::text, ${hold.tick}::bigint, ${JSON.stringify(meta)}::jsonb)`,
  );
  const r = await executeNamed<Record<string, unknown> & { version: string; closed_keys: string[] }>(
    db,
    'ledger',
    sql`
    with input (key, close_key, charged, refund, amount, day, month, operation, tick, meta) as (values ${sql.join(input, sql`, `)}),
    budget as (select agent_id, id, scope from lifeforce_budgets where id = ${budgetId} for update),
    closed as (
      insert into lifeforce_ledger (agent_id, budget_id, scope, scope_id, idempotency_key, kind, amount, reservation_key, operation, tick, metadata)
      select b.agent_id, b.id, b.scope, b.id, i.close_key, 'settle', i.charged, i.key, i.operation, i.tick, i.meta
      from input i cross join budget b
      on conflict (idempotency_key) do nothing
      returning reservation_key
    ),
    done as (select i.* from input i where i.key in (select reservation_key from closed))
    update lifeforce_budgets set
      reserved = greatest(0, reserved - (select sum(amount) from done)),
      spent = spent + (select sum(charged) from done),
      balance = case when balance is null then null else balance + (select sum(refund) from done) end,
      daily_used = greatest(0, daily_used - (select coalesce(sum(refund), 0) from done where day = daily_window)),
      monthly_used = greatest(0, monthly_used - (select coalesce(sum(refund), 0) from done where month = monthly_window)),
      updated_at = now()
    where id = ${budgetId} and exists (select 1 from done)
    returning *, xmin::text as version, (select json_agg(reservation_key) from closed) as closed_keys`,
  );
  const raw = r.rows[0];
  const row = raw ? rowOf(lifeforceBudgets, raw) : undefined;
  if (raw && row) remember(db, { row, version: raw.version }, row.id);
  const closed = new Set(raw?.closed_keys ?? []);
  return each.map(({ hold, charged, refund, overrun }) =>
    row && closed.has(hold.key)
      ? { charged, refunded: refund, overrun, replayed: false, available: available(stateOf(row)) }
      : { charged: 0, refunded: 0, overrun: 0, replayed: true },
  );
}

/** The operation ran: charge its actual cost (at most what it reserved), return the rest. */
export function settle(db: Db, key: string, actual: number, metadata?: Record<string, unknown>): Promise<CloseResult> {
  return close(db, key, actual, 'settle', { metadata });
}

/** The operation did not run (or its worker died): return everything it reserved. */
export function release(db: Db, key: string, reason: string): Promise<CloseResult> {
  return close(db, key, 0, 'release', { reason });
}

/** A ledger entry that is a hold no settle or release has closed yet. */
const openHold = and(
  eq(lifeforceLedger.kind, 'reserve'),
  sql`not exists ${sql.raw(`(select 1 from lifeforce_ledger c where c.reservation_key = lifeforce_ledger.idempotency_key)`)}`,
);

/** Which of these keys are holds not closed yet. */
export async function openHolds(db: Db, keys: string[]): Promise<string[]> {
  if (keys.length === 0) return [];
  const rows = await db
    .select({ key: lifeforceLedger.idempotencyKey })
    .from(lifeforceLedger)
    .where(and(inArray(lifeforceLedger.idempotencyKey, keys), openHold));
  return rows.map((r) => r.key);
}

/** Release every reservation whose deadline passed unclosed; returns how many. */
export async function sweepReservations(db: Db, now = Date.now()): Promise<number> {
  const open = await db
    .select({ key: lifeforceLedger.idempotencyKey })
    .from(lifeforceLedger)
    .where(and(openHold, lt(lifeforceLedger.deadline, new Date(now))))
    .limit(1000);
  let released = 0;
  for (const { key } of open)
    if (!(await release(db, key, "deadline passed: the operation's worker is gone")).replayed) released++;
  return released;
}

// ---- budgets ------------------------------------------------------------------------------------

interface BudgetSpec {
  id: string;
  agentId: string;
  scope: BudgetScope;
  settings: BudgetSettings;
  at?: number;
  onExhausted?: ExhaustedPolicy;
  askFor?: number;
  priority?: number | null;
}

async function insertBudget(tx: Tx, spec: BudgetSpec & { parentId?: string }): Promise<boolean> {
  const at = spec.at ?? Date.now();
  const state = newBudget(spec.settings, at);
  const [inserted] = await tx
    .insert(lifeforceBudgets)
    .values({
      id: spec.id,
      agentId: spec.agentId,
      scope: spec.scope,
      parentId: spec.parentId ?? null,
      ...columnsOf(state),
      ...(spec.onExhausted ? { onExhausted: spec.onExhausted } : {}),
      ...(spec.askFor !== undefined ? { askFor: spec.askFor } : {}),
      priority: spec.priority ?? null,
    })
    .onConflictDoNothing()
    .returning({ id: lifeforceBudgets.id });
  if (inserted && state.funded > 0) {
    await tx.insert(lifeforceLedger).values({
      agentId: spec.agentId,
      budgetId: spec.id,
      scope: spec.scope,
      scopeId: spec.id,
      idempotencyKey: `fund:${spec.id}`,
      kind: 'grant',
      amount: state.funded,
      reason: 'initial budget',
    });
  }
  return inserted !== undefined;
}

/** Create the budget if it does not exist (its settings are kept if it does); the row. */
export async function ensureBudget(db: Db, spec: BudgetSpec): Promise<LifeforceBudget> {
  return db.transaction(async (tx) => {
    await insertBudget(tx, spec);
    const row = await lockBudget(tx, spec.id);
    if (!row) throw new Error(`lifeforce: budget ${spec.id} vanished`);
    return row;
  });
}

type CarveResult =
  | { ok: true; budget: LifeforceBudget; carved: number }
  | { ok: false; reason: DenyReason | 'missing'; needed: number; available: number | null };

/** The share of its parent's available lifeforce a child gets when no amount is asked for. */
export const defaultCarveShare = 0.25;

/**
 * A child budget carved out of what the parent has left: the amount is held on the parent as
 * an open reservation (`carve:<child>`, no deadline) until the child closes; the child holds it
 * as its capacity. With no amount, an unlimited parent gives an unlimited child and a limited one
 * `defaultCarveShare` of what it has available. Idempotent by child id.
 */
export async function carveBudget(
  db: Db,
  spec: { parentId: string; id: string; agentId: string; scope: BudgetScope; amount: number | null; at?: number },
): Promise<CarveResult> {
  const at = spec.at ?? Date.now();
  const existing = await db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, spec.id));
  if (existing[0]) return { ok: true, budget: existing[0], carved: existing[0].funded };
  let [parentRow] = await db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, spec.parentId));
  const parentAgent = agentOf(spec.parentId);
  if (!parentRow && parentAgent !== null) {
    // An agent's budget is created on first use, unlimited, as a reservation would.
    parentRow = await ensureBudget(db, {
      id: spec.parentId,
      agentId: parentAgent,
      scope: 'agent',
      settings: { capacity: null },
      at,
    });
  }
  if (!parentRow) return { ok: false, reason: 'missing', needed: spec.amount ?? 0, available: 0 };
  const unlimited = spec.amount === null && parentRow.capacity === null;
  const amount =
    spec.amount ??
    (unlimited
      ? 0
      : Math.floor((available(regenerate(stateOf(parentRow), at)) ?? 0) * defaultCarveShare * 10_000) / 10_000);
  const parent = await reserve(db, {
    key: `carve:${spec.id}`,
    budgetId: spec.parentId,
    amount,
    operation: 'carve',
    at,
    ttlMs: null,
    reason: `budget for ${spec.id}`,
  });
  if (!parent.ok) return { ok: false, reason: parent.reason, needed: parent.needed, available: parent.available };
  return db.transaction(async (tx) => {
    // The parent's hold says what was carved (a retried carve finds the first attempt's amount).
    await insertBudget(tx, {
      id: spec.id,
      agentId: spec.agentId,
      scope: spec.scope,
      settings: { capacity: unlimited ? null : parent.amount },
      at,
      parentId: spec.parentId,
    });
    const row = await lockBudget(tx, spec.id);
    if (!row) throw new Error(`lifeforce: budget ${spec.id} vanished`);
    return { ok: true as const, budget: row, carved: row.funded };
  });
}

/**
 * Close a child budget: a hold still open is charged what it reserved (its operation may still be
 * running, and what it spends must reach the ledger; its own settle then finds it closed), the
 * parent's carve is settled at what the child spent (at most the carve), and everything the child
 * has left — the rest of the carve, and grants made to it and not spent — returns to the parent.
 * Idempotent.
 */
export async function closeBudget(db: Db, budgetId: string, reason: string): Promise<void> {
  for (const hold of await openReservations(db, budgetId))
    await settle(db, hold.key, hold.amount, { closedWithBudget: reason });
  const row = await db.transaction(async (tx) => {
    const locked = await lockBudget(tx, budgetId);
    if (!locked || locked.closedAt) return undefined;
    // What it did not spend goes back to the parent: it leaves this budget's funding.
    const back = locked.balance ?? 0;
    await tx
      .update(lifeforceBudgets)
      .set({ closedAt: new Date(), balance: locked.balance === null ? null : 0, funded: lfRound(locked.funded - back) })
      .where(eq(lifeforceBudgets.id, budgetId));
    return locked;
  });
  if (!row?.parentId) return;
  const [carve] = await db
    .select({ amount: lifeforceLedger.amount })
    .from(lifeforceLedger)
    .where(eq(lifeforceLedger.idempotencyKey, `carve:${budgetId}`));
  const carved = carve?.amount ?? 0;
  const left = row.balance ?? 0;
  // The child's spend is the parent's, up to what was carved; what it has beyond the rest of the
  // carve (grants made to it) goes to the parent too.
  const used = row.balance === null ? row.spent : Math.min(carved, row.spent);
  await settle(db, `carve:${budgetId}`, used, { child: budgetId, reason });
  const extra = row.balance === null ? 0 : lfRound(left - (carved - used));
  if (extra > 0)
    await grantLifeforce(db, {
      budgetId: row.parentId,
      amount: extra,
      key: `return:${budgetId}`,
      reason: `unspent grants of ${budgetId} (closed: ${reason})`,
    });
}

async function openReservations(db: Db, budgetId: string): Promise<{ key: string; amount: number }[]> {
  return db
    .select({ key: lifeforceLedger.idempotencyKey, amount: lifeforceLedger.amount })
    .from(lifeforceLedger)
    .where(and(eq(lifeforceLedger.budgetId, budgetId), openHold));
}

/** Add to a budget (a human's grant). Idempotent by `key`; false when the key was used before. */
export async function grantLifeforce(
  db: Db,
  g: { budgetId: string; amount: number; key: string; reason: string; by?: string },
): Promise<boolean> {
  return db.transaction(async (tx) => {
    const row = await lockBudget(tx, g.budgetId);
    if (!row) throw new Error(`lifeforce: no budget ${g.budgetId}`);
    if (await entryByKey(tx, g.key)) return false;
    const next = grantState(stateOf(row), g.amount);
    await tx
      .update(lifeforceBudgets)
      .set({ ...columnsOf(next), exhaustedAt: null })
      .where(eq(lifeforceBudgets.id, row.id));
    await tx.insert(lifeforceLedger).values({
      agentId: row.agentId,
      budgetId: row.id,
      scope: row.scope,
      scopeId: row.id,
      idempotencyKey: g.key,
      kind: 'grant',
      amount: lfRound(g.amount),
      reason: g.reason,
      metadata: g.by ? { by: g.by } : null,
    });
    return true;
  });
}

export interface BudgetConfig {
  capacity?: number | null;
  regenPerHour?: number;
  dailyLimit?: number | null;
  monthlyLimit?: number | null;
  onExhausted?: ExhaustedPolicy;
  askFor?: number;
  priority?: number | null;
}

/**
 * Operator settings of an agent's budget (never the agent's own: an agent cannot grant itself
 * lifeforce). A new capacity refills the balance to it; the change is a ledger grant, so the
 * ledger still sums to the budget.
 */
export async function configureBudget(
  db: Db,
  agentId: string,
  cfg: BudgetConfig,
  at = Date.now(),
): Promise<LifeforceBudget> {
  const id = budgetIds.agent(agentId);
  await ensureBudget(db, { id, agentId, scope: 'agent', settings: { capacity: null }, at });
  return db.transaction(async (tx) => {
    const row = (await lockBudget(tx, id))!;
    let state = regenerate(stateOf(row), at);
    if (cfg.regenPerHour !== undefined) state = { ...state, regenPerHour: cfg.regenPerHour };
    if (cfg.dailyLimit !== undefined) state = { ...state, daily: { ...state.daily, limit: cfg.dailyLimit } };
    if (cfg.monthlyLimit !== undefined) state = { ...state, monthly: { ...state.monthly, limit: cfg.monthlyLimit } };
    let added = 0;
    if (cfg.capacity !== undefined) {
      if (cfg.capacity === null) state = { ...state, capacity: null, balance: null };
      else {
        const target = lfRound(Math.max(0, cfg.capacity - state.reserved));
        added = lfRound(target - (state.balance ?? 0));
        state = {
          ...state,
          capacity: cfg.capacity,
          balance: target,
          funded: lfRound(state.reserved + state.spent + target),
        };
      }
    }
    const problem = checkInvariant(state);
    if (problem) throw new Error(`lifeforce: configuring ${id} would break the ledger: ${problem}`);
    const extra = {
      ...(cfg.onExhausted ? { onExhausted: cfg.onExhausted } : {}),
      ...(cfg.askFor !== undefined ? { askFor: cfg.askFor } : {}),
      ...(cfg.priority !== undefined ? { priority: cfg.priority } : {}),
    };
    const [updated] = await tx
      .update(lifeforceBudgets)
      .set({ ...columnsOf(state), ...extra, exhaustedAt: null })
      .where(eq(lifeforceBudgets.id, id))
      .returning();
    if (added !== 0) {
      await tx.insert(lifeforceLedger).values({
        agentId,
        budgetId: id,
        scope: 'agent',
        scopeId: id,
        idempotencyKey: `config:${id}:${at}:${Math.random().toString(36).slice(2)}`,
        kind: added > 0 ? 'grant' : 'withdraw',
        amount: Math.abs(added),
        reason: `capacity set to ${cfg.capacity}`,
        metadata: { config: true, delta: added },
      });
    }
    return updated!;
  });
}

// ---- reading ------------------------------------------------------------------------------------

export interface BudgetReport {
  budget: LifeforceBudget;
  /** What could be reserved now, after regeneration (null: unlimited). */
  available: number | null;
  /** Settled in the last hour. */
  burnPerHour: number;
  /** At this burn rate (net of regeneration), hours until the balance is gone (null: never / unlimited). */
  hoursToExhaustion: number | null;
  recent: LifeforceLedgerEntry[];
}

/** A budget as the CLI and the status show it. */
export async function budgetReport(
  db: Db,
  budgetId: string,
  opts: { at?: number; entries?: number } = {},
): Promise<BudgetReport | undefined> {
  const at = opts.at ?? Date.now();
  const [row] = await db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, budgetId));
  if (!row) return undefined;
  const state = regenerate(stateOf(row), at);
  const [burn] = await db
    .select({ total: sql<string>`coalesce(sum(${lifeforceLedger.amount}), 0)` })
    .from(lifeforceLedger)
    .where(
      and(
        eq(lifeforceLedger.budgetId, budgetId),
        eq(lifeforceLedger.kind, 'settle'),
        gte(lifeforceLedger.createdAt, new Date(at - 3_600_000)),
      ),
    );
  const burnPerHour = lfRound(Number(burn?.total ?? 0));
  const net = burnPerHour - state.regenPerHour;
  const hoursToExhaustion = state.balance === null || net <= 0 ? null : Math.round((state.balance / net) * 100) / 100;
  const recent = await db
    .select()
    .from(lifeforceLedger)
    .where(eq(lifeforceLedger.budgetId, budgetId))
    .orderBy(desc(lifeforceLedger.id))
    .limit(opts.entries ?? 10);
  return {
    budget: { ...row, ...columnsOf(state) },
    available: available(state),
    burnPerHour,
    hoursToExhaustion,
    recent,
  };
}
