/**
 * partnership_messages is append-only in the database itself (migration 0007's triggers), on
 * a real Postgres and on PGlite over its socket: inserts work; a direct UPDATE, DELETE or
 * TRUNCATE is refused; the foreign keys' own actions still apply (deleting an escalation sets
 * escalation_id null, deleting an agent removes its messages).
 */
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DbHandle } from '../../db/client.js';
import { agents, escalations, partnershipMessages } from '../../db/schema/index.js';
import { migratedDatabase, migratedPglite, type MigratedDatabase } from '../helpers/env.js';

function checks(backend: string, handle: () => DbHandle): void {
  it(`${backend}: inserts append; UPDATE, DELETE and TRUNCATE are refused; FK actions still apply`, async () => {
    const { db, pool } = handle();
    await db.insert(agents).values([
      { id: 'talker', name: 'talker' },
      { id: 'other', name: 'other' },
    ]);
    await db.insert(escalations).values({ id: 'pm-1', agentId: 'talker', task: 'help' });
    const [q] = await db
      .insert(partnershipMessages)
      .values([
        {
          agentId: 'talker',
          fromTier: 'agent',
          toTier: 'oversight',
          kind: 'question',
          body: 'help',
          escalationId: 'pm-1',
          idempotencyKey: 'pm-1:question',
        },
        {
          agentId: 'talker',
          fromTier: 'oversight',
          toTier: 'agent',
          kind: 'answer',
          body: 'here',
          escalationId: 'pm-1',
          idempotencyKey: 'pm-1:answer',
        },
        { agentId: 'other', fromTier: 'human', toTier: 'agent', kind: 'info', body: 'hello' },
      ])
      .returning();

    await expect(
      db.update(partnershipMessages).set({ body: 'rewritten' }).where(eq(partnershipMessages.id, q!.id)),
    ).rejects.toThrow();
    await expect(pool.query(`update partnership_messages set body = 'rewritten'`)).rejects.toThrow(
      /partnership_messages is append-only: UPDATE refused/,
    );
    await expect(pool.query(`delete from partnership_messages where id = $1`, [q!.id])).rejects.toThrow(
      /partnership_messages is append-only: DELETE refused/,
    );
    await expect(pool.query('truncate partnership_messages')).rejects.toThrow(
      /partnership_messages is append-only: TRUNCATE refused/,
    );
    // The retry path of the writers still works: ON CONFLICT DO NOTHING updates nothing.
    await db
      .insert(partnershipMessages)
      .values({
        agentId: 'talker',
        fromTier: 'agent',
        toTier: 'oversight',
        kind: 'question',
        body: 'again',
        idempotencyKey: 'pm-1:question',
      })
      .onConflictDoNothing({ target: partnershipMessages.idempotencyKey });
    const mine = await db.select().from(partnershipMessages).where(eq(partnershipMessages.agentId, 'talker'));
    expect(mine.map((m) => m.body).sort()).toEqual(['help', 'here']);

    // FK actions: an escalation's deletion detaches its messages, an agent's deletion removes its own.
    await db.delete(escalations).where(eq(escalations.id, 'pm-1'));
    expect(
      (await db.select().from(partnershipMessages).where(eq(partnershipMessages.agentId, 'talker'))).map(
        (m) => m.escalationId,
      ),
    ).toEqual([null, null]);
    await db.delete(agents).where(eq(agents.id, 'talker'));
    expect((await db.select().from(partnershipMessages)).map((m) => m.agentId)).toEqual(['other']);
  });
}

describe('partnership_messages append-only on Postgres', () => {
  let handle: MigratedDatabase | undefined;
  beforeAll(async () => {
    handle = await migratedDatabase('mindloop_pm_append', 2);
  });
  afterAll(async () => {
    await handle?.dispose();
  });
  checks('postgres', () => handle!);
});

describe('partnership_messages append-only on PGlite', () => {
  let handle: MigratedDatabase | undefined;
  beforeAll(async () => {
    handle = await migratedPglite();
  });
  afterAll(async () => {
    await handle?.dispose();
  });
  checks('pglite', () => handle!);
});
