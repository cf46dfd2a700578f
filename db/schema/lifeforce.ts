/**
 * Lifeforce: budgets and their ledger. A budget row holds the current state (balance,
 * reserved, spent, envelopes); every change to it appends a ledger entry in the same
 * transaction, keyed by an idempotency key, so a retried operation finds its first entry
 * instead of paying twice. The arithmetic is core/lifeforce.ts; the transactions are
 * db/queries/lifeforce.ts.
 */
import { sql } from 'drizzle-orm';
import { bigint, check, index, integer, jsonb, numeric, pgTable, text, type AnyPgColumn } from 'drizzle-orm/pg-core';
import { budgetScopes, exhaustedPolicies } from '../../core/lifeforce.js';
import { agentId } from './agents.js';
import { createdAt, oneOf, rowId, timestamps, tstz } from './_columns.js';

export const ledgerScopes = budgetScopes;
/** `withdraw`: an operator lowered the budget's capacity (its funding goes down by the amount). */
export const ledgerKinds = ['reserve', 'settle', 'release', 'grant', 'withdraw'] as const;

const lf = (name: string) => numeric(name, { precision: 14, scale: 4, mode: 'number' });

/**
 * One budget: an agent's, or one carved out of its parent for a task loop, campaign, fork,
 * nerve or escalation (the carve is an open reservation on the parent until the child closes).
 */
export const lifeforceBudgets = pgTable(
  'lifeforce_budgets',
  {
    /** `agent:<id>`, `task:<agent>/<task>`, `campaign:<id>`, `fork:<id>`, `nerve:<agent>/<name>`, `escalation:<id>`. */
    id: text('id').primaryKey(),
    agentId: agentId(),
    scope: text('scope', { enum: budgetScopes }).notNull(),
    parentId: text('parent_id').references((): AnyPgColumn => lifeforceBudgets.id, { onDelete: 'set null' }),
    /** null: unlimited. */
    capacity: lf('capacity'),
    /** Free to reserve; null when unlimited. */
    balance: lf('balance'),
    reserved: lf('reserved').notNull().default(0),
    spent: lf('spent').notNull().default(0),
    funded: lf('funded').notNull().default(0),
    regenPerHour: lf('regen_per_hour').notNull().default(0),
    regenAt: tstz('regen_at').notNull().defaultNow(),
    dailyLimit: lf('daily_limit'),
    dailyWindow: text('daily_window').notNull().default(''),
    dailyUsed: lf('daily_used').notNull().default(0),
    monthlyLimit: lf('monthly_limit'),
    monthlyWindow: text('monthly_window').notNull().default(''),
    monthlyUsed: lf('monthly_used').notNull().default(0),
    /** Explicit task priority 1..5 (null: from the lifeforce left). */
    priority: integer('priority'),
    /** When a reservation is refused: wait for regeneration or a grant (`pause`), or ask a human (`escalate`). */
    onExhausted: text('on_exhausted', { enum: exhaustedPolicies }).notNull().default('pause'),
    /** The grant an escalation for more lifeforce asks for. */
    askFor: lf('ask_for').notNull().default(1000),
    /** Set when a reservation was refused; cleared by the next one that passes. */
    exhaustedAt: tstz('exhausted_at'),
    closedAt: tstz('closed_at'),
    ...timestamps,
  },
  (t) => [
    index('lifeforce_budgets_agent_id_idx').on(t.agentId),
    index('lifeforce_budgets_parent_id_idx').on(t.parentId),
    check('lifeforce_budgets_scope_check', oneOf(t.scope, budgetScopes)),
    check('lifeforce_budgets_on_exhausted_check', oneOf(t.onExhausted, exhaustedPolicies)),
    check(
      'lifeforce_budgets_nonnegative_check',
      sql`${sql.identifier('reserved')} >= 0 and ${sql.identifier('spent')} >= 0 and coalesce(${sql.identifier('balance')}, 0) >= 0`,
    ),
  ],
);
export type LifeforceBudget = typeof lifeforceBudgets.$inferSelect;

/** Append-only: balances are sums over the ledger. */
export const lifeforceLedger = pgTable(
  'lifeforce_ledger',
  {
    id: rowId(),
    agentId: agentId(),
    budgetId: text('budget_id').references(() => lifeforceBudgets.id, { onDelete: 'cascade' }),
    scope: text('scope', { enum: ledgerScopes }).notNull().default('agent'),
    /** The campaign or fork id for those scopes; null for the agent scope. */
    scopeId: text('scope_id'),
    idempotencyKey: text('idempotency_key').notNull().unique('lifeforce_ledger_idempotency_key_uq'),
    kind: text('kind', { enum: ledgerKinds }).notNull(),
    amount: numeric('amount', { precision: 14, scale: 4, mode: 'number' }).notNull(),
    /** For settle/release: the idempotency key of the reservation it closes. */
    reservationKey: text('reservation_key'),
    /** What was paid for: llm_call, sandbox, speech, fork, … */
    operation: text('operation'),
    reason: text('reason'),
    tick: bigint('tick', { mode: 'number' }),
    /** Reservations: after this the sweep releases it (its worker died); null: open until closed by its owner (a carve). */
    deadline: tstz('deadline'),
    metadata: jsonb('metadata').$type<Record<string, unknown>>(),
    ...createdAt,
  },
  (t) => [
    index('lifeforce_ledger_agent_id_scope_idx').on(t.agentId, t.scope, t.scopeId, t.createdAt),
    index('lifeforce_ledger_reservation_key_idx').on(t.reservationKey),
    index('lifeforce_ledger_budget_id_created_at_idx').on(t.budgetId, t.createdAt),
    check('lifeforce_ledger_scope_check', oneOf(t.scope, ledgerScopes)),
    check('lifeforce_ledger_kind_check', oneOf(t.kind, ledgerKinds)),
    // The sign comes from `kind`; amounts themselves are never negative.
    check('lifeforce_ledger_amount_check', sql`${sql.identifier('amount')} >= 0`),
  ],
);

export type LifeforceLedgerEntry = typeof lifeforceLedger.$inferSelect;
export type NewLifeforceLedgerEntry = typeof lifeforceLedger.$inferInsert;
