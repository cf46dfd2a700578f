/**
 * The budget arithmetic: prices and worst cases, and — property-tested over random sequences of
 * reservations, settles (with actuals above and below what was held), releases, grants and
 * time passing — the invariants: settled spend never exceeds what the budget was given, no
 * term goes negative, envelopes hold, and every reservation closed once is charged once.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  checkInvariant,
  defaultPrices,
  grant,
  lifeforceNeeds,
  llmCost,
  llmWorstCase,
  msUntilAvailable,
  needsMet,
  newBudget,
  priceTableSchema,
  promptTokenBound,
  regenerate,
  reserve,
  sandboxCost,
  settle,
  thinkReservation,
  type BudgetState,
} from '../../core/lifeforce.js';

const t0 = Date.UTC(2026, 10, 24, 12);
const hour = 3_600_000;

describe('prices', () => {
  it('charges an LLM call its USD price and its computation, rounded up', () => {
    const price = { costPer1kInput: 0.001, costPer1kOutput: 0.002 };
    // 2000 in + 500 out: $0.003 → 3 LF, plus 2.5k tokens × 1 LF.
    expect(llmCost(defaultPrices, price, { promptTokens: 2000, completionTokens: 500 })).toBe(5.5);
    expect(
      llmCost(defaultPrices, { costPer1kInput: 0, costPer1kOutput: 0 }, { promptTokens: 1, completionTokens: 0 }),
    ).toBe(0.001);
  });

  it('bounds the prompt by its bytes, so the worst case covers any tokenizer', () => {
    const messages = [{ content: 'héllo wörld' }, { content: 'x'.repeat(100) }];
    expect(promptTokenBound(messages)).toBe(13 + 16 + 100 + 16 + 16);
    const price = { costPer1kInput: 0.01, costPer1kOutput: 0.03 };
    const worst = llmWorstCase(defaultPrices, price, messages, 50);
    expect(worst).toBeGreaterThanOrEqual(llmCost(defaultPrices, price, { promptTokens: 100, completionTokens: 50 }));
    // No maxTokens: the table's default output cap is the worst case.
    expect(llmWorstCase(defaultPrices, price, messages, undefined)).toBe(
      llmWorstCase(defaultPrices, price, messages, defaultPrices.defaultMaxOutputTokens),
    );
  });

  it('charges a sandbox run wall seconds × CPUs', () => {
    expect(sandboxCost(defaultPrices, 1500, 2)).toBe(3);
    expect(sandboxCost({ ...defaultPrices, lfPerSandboxCpuSecond: 0.5 }, 1000, 1)).toBe(0.5);
  });

  it('rejects a price table with unknown or negative fields', () => {
    expect(priceTableSchema.safeParse({ lfPerUsd: -1 }).success).toBe(false);
    expect(priceTableSchema.safeParse({ lfPerTok: 1 }).success).toBe(false);
    expect(priceTableSchema.parse({ lfPerUsd: 5 }).lfPerUsd).toBe(5);
  });
});

describe('a budget', () => {
  it('refuses a reservation it cannot cover, and says why', () => {
    const b = newBudget({ capacity: 10 }, t0);
    const r = reserve(b, 11, t0);
    expect(r).toMatchObject({ ok: false, reason: 'balance', available: 10 });
    const ok = reserve(b, 10, t0);
    expect(ok.ok).toBe(true);
  });

  it('settles the actual, refunds the rest, and never charges more than was reserved', () => {
    const r = reserve(newBudget({ capacity: 10 }, t0), 6, t0);
    if (!r.ok) throw new Error('refused');
    const s = settle(r.budget, 6, 2.5, r.windows);
    expect(s.budget).toMatchObject({ balance: 7.5, reserved: 0, spent: 2.5 });
    const over = settle(r.budget, 6, 9, r.windows);
    expect(over).toMatchObject({ charged: 6, overrun: 3 });
    expect(over.budget.spent).toBe(6);
  });

  it('regenerates up to its capacity, and tells how long a need waits', () => {
    let b = newBudget({ capacity: 100, regenPerHour: 10 }, t0);
    const r = reserve(b, 100, t0);
    if (!r.ok) throw new Error('refused');
    b = settle(r.budget, 100, 100, r.windows).budget;
    expect(msUntilAvailable(b, 25)).toBe(2.5 * hour);
    expect(regenerate(b, t0 + 2 * hour).balance).toBe(20);
    // Three days later: full, never past the capacity.
    expect(regenerate(b, t0 + 72 * hour).balance).toBe(100);
    // Beyond the capacity no regeneration ever covers it.
    expect(msUntilAvailable(b, 101)).toBeNull();
  });

  it('holds a daily envelope across the day, and opens a new one the next day', () => {
    const b = newBudget({ capacity: null, dailyLimit: 5 }, t0);
    const r = reserve(b, 4, t0);
    if (!r.ok) throw new Error('refused');
    expect(reserve(r.budget, 2, t0 + hour)).toMatchObject({ ok: false, reason: 'daily', available: 1 });
    expect(reserve(r.budget, 2, t0 + 24 * hour).ok).toBe(true);
  });

  it('keeps its invariant over any sequence of operations', () => {
    type Op =
      | { op: 'reserve'; key: number; amount: number; dt: number }
      | { op: 'settle'; key: number; actual: number }
      | { op: 'release'; key: number }
      | { op: 'grant'; amount: number }
      | { op: 'wait'; dt: number };
    const amount = fc.integer({ min: 0, max: 4000 }).map((x) => x / 100);
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ op: fc.constant('reserve' as const), key: fc.nat(6), amount, dt: fc.nat(2 * hour) }),
      fc.record({
        op: fc.constant('settle' as const),
        key: fc.nat(6),
        actual: fc.integer({ min: 0, max: 6000 }).map((x) => x / 100),
      }),
      fc.record({ op: fc.constant('release' as const), key: fc.nat(6) }),
      fc.record({ op: fc.constant('grant' as const), amount }),
      fc.record({ op: fc.constant('wait' as const), dt: fc.nat(30 * hour) }),
    );
    const settings = fc.record({
      capacity: fc.option(fc.integer({ min: 0, max: 200 }), { nil: null }),
      regenPerHour: fc.integer({ min: 0, max: 20 }),
      dailyLimit: fc.option(fc.integer({ min: 0, max: 150 }), { nil: null }),
      monthlyLimit: fc.option(fc.integer({ min: 0, max: 400 }), { nil: null }),
    });
    fc.assert(
      fc.property(settings, fc.array(op, { maxLength: 40 }), (s, ops) => {
        let now = t0;
        let b: BudgetState = newBudget(s, now);
        const open = new Map<number, { amount: number; windows: { day: string; month: string } }>();
        const closed = new Set<number>();
        let charged = 0;
        for (const o of ops) {
          if (o.op === 'reserve') {
            now += o.dt;
            // A key is reserved once: a second reserve of it is the same reservation (the ledger's unique key).
            if (open.has(o.key) || closed.has(o.key)) continue;
            const r = reserve(b, o.amount, now);
            b = r.budget;
            if (r.ok) open.set(o.key, { amount: o.amount, windows: r.windows });
          } else if (o.op === 'settle' || o.op === 'release') {
            const held = open.get(o.key);
            if (!held) continue;
            const out = settle(b, held.amount, o.op === 'settle' ? o.actual : 0, held.windows);
            // A limited budget never pays more than it held; an unlimited one records the actual.
            if (b.balance !== null) expect(out.charged).toBeLessThanOrEqual(held.amount);
            else expect(out.charged).toBeCloseTo(Math.max(0, o.op === 'settle' ? o.actual : 0), 6);
            charged += out.charged;
            b = out.budget;
            open.delete(o.key);
            closed.add(o.key);
          } else if (o.op === 'grant') b = grant(b, o.amount);
          else {
            now += o.dt;
            b = regenerate(b, now);
          }
          const problem = checkInvariant(b);
          if (problem) throw new Error(problem);
        }
        // Close what is left (the sweep): nothing stays reserved, the spend is what was charged.
        for (const [, held] of open) b = settle(b, held.amount, 0, held.windows).budget;
        expect(b.reserved).toBeCloseTo(0, 6);
        expect(b.spent).toBeCloseTo(charged, 6);
        if (b.balance !== null) expect(b.spent).toBeLessThanOrEqual(b.funded + 1e-6);
      }),
    );
  });
});

describe('what a budget needs to go on', () => {
  /** A budget after random holds, settles, grants and waits, and the time it is at. */
  const budgets = fc
    .record({
      capacity: fc.option(fc.integer({ min: 0, max: 200 }), { nil: null }),
      regenPerHour: fc.integer({ min: 0, max: 20 }),
      dailyLimit: fc.option(fc.integer({ min: 0, max: 150 }), { nil: null }),
      monthlyLimit: fc.option(fc.integer({ min: 0, max: 400 }), { nil: null }),
      ops: fc.array(
        fc.tuple(
          fc.constantFrom('reserve', 'settle', 'grant', 'wait'),
          fc.integer({ min: 0, max: 6000 }).map((x) => x / 100),
          fc.nat(30 * hour),
        ),
        { maxLength: 20 },
      ),
    })
    .map(({ ops, ...settings }) => {
      let at = t0;
      let b = newBudget(settings, at);
      const held: Array<{ amount: number; windows: { day: string; month: string } }> = [];
      for (const [op, amount, dt] of ops) {
        if (op === 'reserve') {
          const r = reserve(b, amount, at);
          b = r.budget;
          if (r.ok) held.push({ amount, windows: r.windows });
        } else if (op === 'settle' && held.length) {
          const h = held.pop()!;
          b = settle(b, h.amount, amount, h.windows).budget;
        } else if (op === 'grant') b = grant(b, amount);
        else at += dt;
      }
      return { b, at };
    });
  const lift = (b: BudgetState, daily: number | null, monthly: number | null): BudgetState => ({
    ...b,
    daily: daily === null ? b.daily : { ...b.daily, limit: daily },
    monthly: monthly === null ? b.monthly : { ...b.monthly, limit: monthly },
  });

  it('names the smallest grant and limits that let an operation through, and nothing less does', () => {
    fc.assert(
      fc.property(
        budgets,
        fc.integer({ min: 0, max: 8000 }).map((x) => x / 100),
        ({ b, at }, need) => {
          const n = lifeforceNeeds(b, need, at);
          expect(needsMet(n)).toBe(reserve(b, need, at).ok);
          // The grant and the limits it names: the reservation passes.
          const given = lift(grant(regenerate(b, at), n.grant), n.daily, n.monthly);
          expect(reserve(given, need, at).ok).toBe(true);
          // A ten-thousandth of an LF less (the ledger's scale) is refused for the balance.
          if (n.grant > 0)
            expect(
              reserve(lift(grant(regenerate(b, at), n.grant - 0.0001), n.daily, n.monthly), need, at),
            ).toMatchObject({ ok: false, reason: 'balance' });
          // Under a capacity below `n.capacity`, a balance short of the need stays short whatever the wait.
          if (n.capacity !== null && n.grant > 0) expect(msUntilAvailable(b, need, at)).toBeNull();
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('says when a capacity is below the need, and when a limit is', () => {
    expect(lifeforceNeeds(newBudget({ capacity: 12 }, t0), 15.2, t0)).toEqual({
      need: 15.2,
      grant: 3.2,
      capacity: 15.2,
      daily: null,
      monthly: null,
      closed: false,
    });
    expect(lifeforceNeeds(newBudget({ capacity: 20 }, t0), 15.2, t0)).toEqual({
      need: 15.2,
      grant: 0,
      capacity: null,
      daily: null,
      monthly: null,
      closed: false,
    });
    expect(lifeforceNeeds(newBudget({ capacity: null, dailyLimit: 10 }, t0), 15.2, t0)).toMatchObject({
      grant: 0,
      capacity: null,
      daily: 15.2,
      monthly: null,
    });
    expect(needsMet(lifeforceNeeds(newBudget({ capacity: null }, t0), 1e6, t0))).toBe(true);
  });

  it("a think's reservation is the router's worst case for its first model, prompt and output cap", () => {
    const model = { costPer1kInput: 0.002, costPer1kOutput: 0.004 };
    const prompt = [{ content: 'system text' }, { content: 'the tick' }];
    expect(thinkReservation(defaultPrices, { model, maxTokens: 300, prompt })).toBe(
      llmWorstCase(defaultPrices, model, prompt, 300),
    );
    expect(thinkReservation(defaultPrices, { model: null, maxTokens: 300, prompt })).toBeNull();
    // A stored prompt cut to its row's cap counts the missing characters at 3 bytes each.
    expect(promptTokenBound([{ content: 'abc', chars: 10 }])).toBe(promptTokenBound([{ content: 'abc' }]) + 21);
  });
});
