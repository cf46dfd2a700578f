/**
 * The lifeforce family: what workflows ask of the ledger outside an operation's own charge
 * (the LLM router and the command handlers charge those): the budget's state for the status and
 * for planning an exhausted wait, grants, child budgets carved and closed, and the sweep.
 */
import { z } from 'zod';
import {
  budgetIds,
  budgetScopes,
  budgetSettingsSchema,
  exhaustedPolicies,
  lifeforceNeeds,
  msUntilAvailable,
  regenerate,
  type BudgetSettingsInput,
  type LifeforceNeeds,
  type PriceTable,
} from '../core/lifeforce.js';
import { priorityKeyFor } from '../core/priority.js';
import type { Db } from '../db/client.js';
import {
  budgetReport,
  carveBudget,
  closeBudget,
  configureBudget,
  ensureBudget,
  grantLifeforce,
  stateOf,
  sweepReservations,
} from '../db/queries/lifeforce.js';
import { ErrorType, nonRetryable, parseInput } from './errors.js';
import { createSandboxChargeActivities } from './sandbox-charge.js';

interface LifeforceDeps {
  db: Db;
  prices: PriceTable;
}

/** What the status query and the exhausted wait read. */
interface LifeforceView {
  budgetId: string;
  capacity: number | null;
  /** What could be reserved now (null: unlimited). */
  available: number | null;
  reserved: number;
  spent: number;
  regenPerHour: number;
  burnPerHour: number;
  hoursToExhaustion: number | null;
  onExhausted: (typeof exhaustedPolicies)[number];
  askFor: number;
  /** Temporal task priority of the agent's queued work (1 first … 5). */
  priorityKey: number;
  /** Set by hand (null: from the lifeforce left). */
  explicitPriority: number | null;
  exhausted: boolean;
  /** With `need`: how long regeneration takes to cover it (null: never, a grant is needed). */
  waitMs?: number | null;
  /** With `need`: the smallest grant, capacity and limits that let it run now. */
  needs?: LifeforceNeeds;
}

export type { BudgetSettingsInput };

const stateInput = z.strictObject({
  agentId: z.string().min(1),
  budgetId: z.string().min(1).optional(),
  /** The workflow's clock (ISO). */
  at: z.iso.datetime({ offset: true }).optional(),
  need: z.number().min(0).optional(),
});
const grantInput = z.strictObject({
  budgetId: z.string().min(1),
  amount: z.number().positive().max(1e9),
  key: z.string().min(1).max(500),
  reason: z.string().max(1000),
  by: z.string().max(200).optional(),
});
const carveInput = z.strictObject({
  parentId: z.string().min(1),
  id: z.string().min(1),
  agentId: z.string().min(1),
  scope: z.enum(budgetScopes),
  amount: z.number().min(0).nullable(),
  at: z.iso.datetime({ offset: true }).optional(),
});

export function createLifeforceActivities(deps: LifeforceDeps) {
  const { db } = deps;
  return {
    // A workflow's own sandbox runs: held before, settled after (activities/sandbox-charge.ts).
    ...createSandboxChargeActivities(deps),

    /** The agent's budget (created unlimited on first use, or with `settings` when given the first time). */
    async ensureAgentBudget(input: {
      agentId: string;
      settings?: BudgetSettingsInput;
      at?: string;
    }): Promise<LifeforceView> {
      const settings = parseInput('ensureAgentBudget', budgetSettingsSchema.optional(), input.settings);
      const at = input.at ? Date.parse(input.at) : Date.now();
      const id = budgetIds.agent(input.agentId);
      await ensureBudget(db, {
        id,
        agentId: input.agentId,
        scope: 'agent',
        settings: {
          capacity: settings?.capacity ?? null,
          regenPerHour: settings?.regenPerHour,
          dailyLimit: settings?.dailyLimit,
          monthlyLimit: settings?.monthlyLimit,
        },
        at,
        onExhausted: settings?.onExhausted,
        askFor: settings?.askFor,
        priority: settings?.priority,
      });
      return view(db, id, at);
    },

    async lifeforceState(input: z.input<typeof stateInput>): Promise<LifeforceView> {
      const i = parseInput('lifeforceState', stateInput, input);
      const at = i.at ? Date.parse(i.at) : Date.now();
      return view(db, i.budgetId ?? budgetIds.agent(i.agentId), at, i.need);
    },

    async grantLifeforce(input: z.input<typeof grantInput>): Promise<{ granted: boolean }> {
      const g = parseInput('grantLifeforce', grantInput, input);
      return { granted: await grantLifeforce(db, g) };
    },

    /** Operator settings of the agent's budget (the CLI's `lifeforce set`). */
    async configureLifeforce(input: { agentId: string; settings: BudgetSettingsInput }): Promise<LifeforceView> {
      const settings = parseInput('configureLifeforce', budgetSettingsSchema, input.settings);
      await configureBudget(db, input.agentId, settings);
      return view(db, budgetIds.agent(input.agentId), Date.now());
    },

    /** A child's budget carved from its parent's (idempotent by id); `ok: false` says why it cannot be. */
    async openChildBudget(input: z.input<typeof carveInput>) {
      const c = parseInput('openChildBudget', carveInput, input);
      const r = await carveBudget(db, { ...c, at: c.at ? Date.parse(c.at) : undefined });
      // A child closed before (a task loop started again) does not spend again: it spends its parent's.
      if (r.ok && r.budget.closedAt !== null)
        return { ok: false as const, reason: 'closed' as const, needed: 0, available: 0 };
      return r.ok
        ? { ok: true as const, budgetId: r.budget.id, carved: r.carved, unlimited: r.budget.capacity === null }
        : { ok: false as const, reason: r.reason, needed: r.needed, available: r.available };
    },

    /** Close a child's budget: what it did not spend returns to its parent. Idempotent. */
    async closeChildBudget(input: { budgetId: string; reason: string }): Promise<void> {
      await closeBudget(db, input.budgetId, input.reason);
    },

    /** Release reservations whose deadline passed (their worker died and no retry came). */
    async sweepLifeforce(input: { at?: string } = {}): Promise<{ released: number }> {
      return { released: await sweepReservations(db, input.at ? Date.parse(input.at) : Date.now()) };
    },
  };
}

/**
 * Every minute, release the holds whose deadline passed (their worker died and no retry came
 * back for them). Logs releases only; a database away is tried again at the next beat. The timer
 * never keeps the process alive.
 */
export function sweepLifeforceEvery(
  db: Db,
  everyMs = 60_000,
  log: (msg: string) => void = (m) => process.stderr.write(`${m}\n`),
): () => void {
  const timer = setInterval(() => {
    sweepReservations(db).then(
      (n) => n > 0 && log(`lifeforce: released ${n} hold(s) past their deadline`),
      () => undefined,
    );
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

async function view(db: Db, budgetId: string, at: number, need?: number): Promise<LifeforceView> {
  const report = await budgetReport(db, budgetId, { at, entries: 0 });
  if (!report) throw nonRetryable(ErrorType.NotFound, `no lifeforce budget ${budgetId}`);
  const b = report.budget;
  const state = regenerate(stateOf(b), at);
  return {
    budgetId,
    capacity: b.capacity,
    available: report.available,
    reserved: b.reserved,
    spent: b.spent,
    regenPerHour: b.regenPerHour,
    burnPerHour: report.burnPerHour,
    hoursToExhaustion: report.hoursToExhaustion,
    onExhausted: b.onExhausted,
    askFor: b.askFor,
    priorityKey: priorityKeyFor({
      available: report.available,
      capacity: b.capacity,
      ...(b.priority !== null ? { explicit: b.priority } : {}),
    }),
    explicitPriority: b.priority,
    exhausted: b.exhaustedAt !== null,
    ...(need !== undefined
      ? { waitMs: msUntilAvailable(state, need, at), needs: lifeforceNeeds(state, need, at) }
      : {}),
  };
}
