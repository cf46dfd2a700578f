/**
 * What a sandbox run costs, charged through the lifeforce ledger like any operation: its worst
 * case (the wall budget on its CPUs) is held before it runs, the wall seconds it took are settled
 * after it, and a run that never ran gives its hold back. The hold is keyed by the run's own
 * idempotency key, so a retried step finds the first attempt's hold and its close instead of
 * charging again.
 *
 * Two ways in, one pair of helpers: `shell` and a designed tool's action hold in their command's
 * transaction (a budget that cannot cover the run refuses the command) and settle when
 * `recordShellResult` records the run; a workflow's own runs (a generated tool's tests, a design
 * round's tests, a fork's tool tests) hold and settle through the two activities below, on the
 * `mindloop` queue around the `sandbox` queue's run (workflows/lib/sandbox-charge.ts).
 */
import { z } from 'zod';
import { sandboxCost, type PriceTable } from '../core/lifeforce.js';
import { clipText } from '../core/sanitize.js';
import type { Db } from '../db/client.js';
import { release, reserve, settle, type CloseResult, type ReserveResult } from '../db/queries/lifeforce.js';
import { ErrorType, nonRetryable, parseInput } from './errors.js';
import { LifeforceExhaustedError } from './llm/errors.js';

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

/** The ledger key of a sandbox run a workflow holds, from the run's own idempotency key. */
function sandboxChargeKey(runKey: string): string {
  return `sandbox:${runKey}`;
}

interface SandboxHold {
  /** The ledger key (`sandboxChargeKey`, or a `shell`'s `shellChargeKey`). */
  key: string;
  budgetId: string;
  /** The run's wall budget and CPUs: its worst case. */
  wallMs: number;
  cpus: number;
  tick?: number;
  reason: string;
  /** The time of the run in ms (the workflow's clock; default now). */
  at?: number;
}

/**
 * Hold a sandbox run's worst case on its budget. Until the run is recorded the hold stays open;
 * past its wall budget and the reservation TTL the sweep releases it (its worker died).
 */
export function holdSandboxRun(db: Db | Tx, prices: PriceTable, h: SandboxHold): Promise<ReserveResult> {
  return reserve(db, {
    key: h.key,
    budgetId: h.budgetId,
    amount: sandboxCost(prices, h.wallMs, h.cpus),
    operation: 'sandbox',
    ttlMs: h.wallMs + prices.reservationTtlMs,
    ...(h.at !== undefined ? { at: h.at } : {}),
    ...(h.tick !== undefined ? { tick: h.tick } : {}),
    reason: clipText(h.reason, 200),
    metadata: { wallMs: h.wallMs, cpus: h.cpus },
  });
}

/** Close a run's hold: charged its wall seconds × CPUs when it ran, released (`why`) when it did not. */
export function closeSandboxRun(
  db: Db,
  prices: PriceTable,
  key: string,
  ran: { durationMs: number; cpus: number; status: string } | null,
  why?: string,
): Promise<CloseResult> {
  if (!ran) return release(db, key, `not run: ${clipText(why ?? 'the sandbox is unavailable', 200)}`);
  return settle(db, key, sandboxCost(prices, ran.durationMs, ran.cpus), {
    durationMs: ran.durationMs,
    status: ran.status,
  });
}

const holdInput = z.strictObject({
  /** The sandbox run's idempotency key (its `SandboxRunRequest.key`). */
  runKey: z.string().min(1).max(500),
  agentId: z.string().min(1),
  budgetId: z.string().min(1),
  wallMs: z.number().positive(),
  cpus: z.number().positive(),
  tick: z.number().int().min(0).optional(),
  reason: z.string().max(2000),
  /** The workflow's clock (ISO). */
  at: z.iso.datetime({ offset: true }).optional(),
});
const settleInput = z.strictObject({
  runKey: z.string().min(1).max(500),
  cpus: z.number().positive(),
  /** How the run ended; absent when it never ran (`error` says why). */
  ran: z.strictObject({ durationMs: z.number().min(0), status: z.string().max(100) }).optional(),
  error: z.string().max(10_000).optional(),
});

/** The two activities a workflow wraps its own sandbox runs in (built into the lifeforce family). */
export function createSandboxChargeActivities({ db, prices }: { db: Db; prices: PriceTable }) {
  return {
    /** Hold a sandbox run's worst case before it is started; `LifeforceExhausted` when the budget cannot cover it (then it must not run). */
    async holdSandboxRun(input: z.input<typeof holdInput>): Promise<{ held: number; replayed: boolean }> {
      const i = parseInput('holdSandboxRun', holdInput, input);
      const held = await holdSandboxRun(db, prices, {
        key: sandboxChargeKey(i.runKey),
        budgetId: i.budgetId,
        wallMs: i.wallMs,
        cpus: i.cpus,
        tick: i.tick,
        reason: i.reason,
        at: i.at ? Date.parse(i.at) : undefined,
      });
      if (!held.ok) {
        const refused = new LifeforceExhaustedError(held.budgetId, held.reason, held.needed, held.available, i.agentId);
        throw nonRetryable(ErrorType.LifeforceExhausted, refused.message, refused.details);
      }
      return { held: held.amount, replayed: held.replayed };
    },

    /** Settle a sandbox run's hold at the wall seconds it took, or release it when the run never ran. Idempotent. */
    async settleSandboxRun(input: z.input<typeof settleInput>): Promise<{ charged: number; replayed: boolean }> {
      const i = parseInput('settleSandboxRun', settleInput, input);
      const closed = await closeSandboxRun(
        db,
        prices,
        sandboxChargeKey(i.runKey),
        i.ran ? { ...i.ran, cpus: i.cpus } : null,
        i.error,
      );
      return { charged: closed.charged, replayed: closed.replayed };
    },
  };
}
