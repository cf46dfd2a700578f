/**
 * The LLM router's rows: an agent's usable llm_registry rows in the order calls try them, the
 * llm_calls of idempotency keys, and a row's health (last success, failures in a row). Plain
 * table functions; the router and the CLI share them.
 */
import { and, asc, eq, sql } from 'drizzle-orm';
import { llmCalls, llmRegistry, type LlmCall, type LlmRegistryEntry, type NewLlmCall } from '../schema/llm.js';
import { grouped } from '../grouped.js';
import type { Db } from '../client.js';
import { executeNamed, statements } from '../prepared.js';
import type { Queryable } from './abstracts.js';

/** `last_ok_at` is refreshed at most this often, to keep a write off every tick. */
const okRefreshMs = 60_000;

/** The agent's enabled, non-excluded rows, by priority then id (the order calls try them). */
export async function usableRegistry(q: Queryable, agentId: string): Promise<LlmRegistryEntry[]> {
  return llmStatements(q).usableRegistry.execute({ agentId });
}

/** The llm_calls rows of these idempotency keys (`request_key`), oldest first. */
export async function llmCallsByKeys(q: Queryable, requestKeys: string[]): Promise<LlmCall[]> {
  if (requestKeys.length === 0) return [];
  return llmStatements(q).callsByKeys.execute({ keys: requestKeys });
}

/** What every tick reads of the LLM tables (through its snapshot and context). */
const llmStatements = statements('llm', (q, name) => ({
  usableRegistry: q
    .select()
    .from(llmRegistry)
    .where(
      and(
        eq(llmRegistry.agentId, sql.placeholder('agentId')),
        eq(llmRegistry.enabled, true),
        eq(llmRegistry.excluded, false),
      ),
    )
    .orderBy(asc(llmRegistry.priority), asc(llmRegistry.id))
    .prepare(name('usable_registry')),
  // One statement whatever the number of keys (an array parameter): a tick's think asks for one,
  // its reflexes for one per model call.
  callsByKeys: q
    .select()
    .from(llmCalls)
    .where(sql`${llmCalls.requestKey} = any(${sql.placeholder('keys')}::text[])`)
    .orderBy(asc(llmCalls.id))
    .prepare(name('calls_by_keys')),
}));

const callInserts = new WeakMap<Db, (row: NewLlmCall) => Promise<number | null>>();

/**
 * Record a model call that answered: its row's id, or null when its request key is taken (another
 * attempt of the same call answered first). Calls recorded while another is being written go
 * together after it, in one statement (each row has a key of its own, `idempotency_key`, to find
 * its id by).
 */
export function insertAnsweredCall(db: Db, row: NewLlmCall): Promise<number | null> {
  let insert = callInserts.get(db);
  if (!insert) {
    insert = grouped(async (rows: NewLlmCall[]) => {
      // Named (one name per number of rows): the statement is parsed and planned once per connection.
      const done = await executeNamed<{ id: string | number; idempotency_key: string }>(
        db,
        'llm_calls',
        db
          .insert(llmCalls)
          .values(rows)
          .onConflictDoNothing()
          .returning({ id: llmCalls.id, key: llmCalls.idempotencyKey }),
      );
      const ids = new Map(done.rows.map((d) => [d.idempotency_key, Number(d.id)]));
      return rows.map((r) => ids.get(r.idempotencyKey!) ?? null);
    });
    callInserts.set(db, insert);
  }
  return insert(row);
}

/** The answer recorded for an idempotency key (its one `ok` row), or undefined. */
export async function answeredCall(q: Queryable, requestKey: string): Promise<LlmCall | undefined> {
  const [row] = await q
    .select()
    .from(llmCalls)
    .where(and(eq(llmCalls.requestKey, requestKey), eq(llmCalls.ok, true)));
  return row;
}

/**
 * A row's health after a call: a success resets its failures and stamps `last_ok_at` (at most
 * once a minute while healthy); a failure (`error`) counts one more and keeps the message.
 * `updated_at` stays: it marks configuration changes, not traffic.
 */
export async function recordRowHealth(q: Queryable, row: LlmRegistryEntry, error: string | undefined): Promise<void> {
  if (error === undefined) {
    const fresh = row.lastOkAt !== null && Date.now() - row.lastOkAt.getTime() < okRefreshMs;
    if (row.consecutiveFailures === 0 && fresh) return;
    await q
      .update(llmRegistry)
      .set({ lastOkAt: sql`now()`, consecutiveFailures: 0, updatedAt: sql`${llmRegistry.updatedAt}` })
      .where(eq(llmRegistry.id, row.id));
    return;
  }
  await q
    .update(llmRegistry)
    .set({
      lastErrorAt: sql`now()`,
      lastError: error,
      consecutiveFailures: sql`${llmRegistry.consecutiveFailures} + 1`,
      updatedAt: sql`${llmRegistry.updatedAt}`,
    })
    .where(eq(llmRegistry.id, row.id));
}
