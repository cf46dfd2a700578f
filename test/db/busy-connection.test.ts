/**
 * A connection runs one statement at a time. A statement sent before the last one answered
 * (`Promise.all` over a transaction's handle) is queued by pg today and refused by pg 9, and
 * runs nothing in parallel: the pool reports it, and the reflexes' transactions send none.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manageMemory } from '../../activities/reflexes/memory-manager.js';
import { diagnosisInput } from '../../activities/reflexes/stagnation.js';
import { createDb, type Db, type DbHandle } from '../../db/client.js';
import { runMigrations } from '../../db/migrate.js';
import { agents, diaryEntries, notes } from '../../db/schema/index.js';
import { freshPostgresDatabase } from '../helpers/env.js';

describe('statements on a busy connection (real Postgres)', () => {
  const overlaps: string[] = [];
  let fresh: Awaited<ReturnType<typeof freshPostgresDatabase>>;
  let h: DbHandle;
  beforeAll(async () => {
    fresh = await freshPostgresDatabase('mindloop_busy');
    h = createDb(fresh.url, { max: 4, onOverlap: (text) => overlaps.push(text) });
    await runMigrations(h.pool);
    await h.db.insert(agents).values({ id: 'ada', name: 'ada' });
  });
  afterAll(async () => {
    await h.close();
    await fresh.drop();
  });

  it('reports Promise.all inside a transaction, with the statement; not across the pool', async () => {
    overlaps.length = 0;
    // Across the pool: each statement has a connection of its own.
    await Promise.all([h.db.execute(sql`select 1 as pool_one`), h.db.execute(sql`select 2 as pool_two`)]);
    expect(overlaps).toEqual([]);
    const both = await h.db.transaction(async (tx) =>
      Promise.all([tx.execute(sql`select pg_sleep(0.05), 1 as first`), tx.execute(sql`select 2 as second`)]),
    );
    expect(both.map((r) => r.rows.length)).toEqual([1, 1]);
    expect(overlaps).toEqual(['select 2 as second']);
  });

  it('the stagnation diagnosis and the memory manager send their statements one after another', async () => {
    overlaps.length = 0;
    const [diag, archived] = await h.db.transaction(async (t) => {
      const tx = t as unknown as Db;
      return [
        await diagnosisInput(tx, { agentId: 'ada', tick: 20, contextMode: 'standard' }, []),
        await manageMemory(tx, 'ada', 20, {}),
      ] as const;
    });
    expect(diag).toMatchObject({ newInputs: 0, sameModeTicks: 1, dataRichness: 0, ticksSinceRest: 20 });
    expect(Array.isArray(archived)).toBe(true);
    expect(overlaps).toEqual([]);
  });

  it('the diagnosis counts what it reads in one statement: live memories, new inputs, the last rest', async () => {
    await h.db.insert(agents).values({ id: 'bea', name: 'bea' });
    await h.db.insert(diaryEntries).values([
      { agentId: 'bea', title: 'a', content: 'a' },
      { agentId: 'bea', title: 'b', content: 'b' },
      { agentId: 'bea', title: 'gone', content: 'gone', archivedAt: new Date() },
    ]);
    await h.db.insert(notes).values([
      { agentId: 'bea', direction: 'in', source: 'user', text: 'new', tickSeen: 18 },
      { agentId: 'bea', direction: 'in', source: 'user', text: 'old', tickSeen: 3 },
      { agentId: 'bea', direction: 'out', source: 'agent', text: 'said' },
    ]);
    const diag = await diagnosisInput(h.db, { agentId: 'bea', tick: 20, contextMode: 'standard' }, []);
    expect(diag).toMatchObject({ newInputs: 1, dataRichness: 2, ticksSinceRest: 20 });
    expect(diag.evaluations.size).toBe(0);
  });
});
