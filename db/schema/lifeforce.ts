/**
 * Lifeforce ledger: reserve before an operation, settle or release after it,
 * grant to top up. `idempotency_key` makes each entry safe across activity retries.
 */
import { sql } from 'drizzle-orm';
import { bigint, check, index, jsonb, numeric, pgTable, text } from 'drizzle-orm/pg-core';
import { createInsertSchema } from 'drizzle-zod';
import { agentId } from './agents.js';
import { createdAt, oneOf, rowId } from './_columns.js';

export const ledgerScopes = ['agent', 'campaign', 'fork'] as const;
export const ledgerKinds = ['reserve', 'settle', 'release', 'grant'] as const;

/** Append-only: balances are sums over the ledger. */
export const lifeforceLedger = pgTable(
  'lifeforce_ledger',
  {
    id: rowId(),
    agentId: agentId(),
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
    metadata: jsonb('metadata').$type<Record<string, unknown>>(),
    ...createdAt,
  },
  (t) => [
    index('lifeforce_ledger_agent_id_scope_idx').on(t.agentId, t.scope, t.scopeId, t.createdAt),
    index('lifeforce_ledger_reservation_key_idx').on(t.reservationKey),
    check('lifeforce_ledger_scope_check', oneOf(t.scope, ledgerScopes)),
    check('lifeforce_ledger_kind_check', oneOf(t.kind, ledgerKinds)),
    // The sign comes from `kind`; amounts themselves are never negative.
    check('lifeforce_ledger_amount_check', sql`${sql.identifier('amount')} >= 0`),
  ],
);

export type LifeforceLedgerEntry = typeof lifeforceLedger.$inferSelect;
export type NewLifeforceLedgerEntry = typeof lifeforceLedger.$inferInsert;

export const insertLifeforceLedgerSchema = createInsertSchema(lifeforceLedger, {
  idempotencyKey: (s) => s.min(1),
  amount: (s) => s.min(0),
});
