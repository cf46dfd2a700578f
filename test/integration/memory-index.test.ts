/**
 * Search by meaning over an agent's memory, on a real Postgres and on PGlite over its socket,
 * with the offline embedder: a paraphrase ranks above an unrelated row; a row written after the
 * index was loaded is found; archived rows only when asked; a deleted, archived or rewritten row
 * is never returned by its old vector; a vector of the wrong size is refused naming both sizes.
 */
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEmbeddingActivities } from '../../activities/embeddings/backfill.js';
import {
  catchUp,
  cosine,
  createLocalEmbedder,
  disposeLocalEmbedders,
  embedTexts,
  EmbeddingSizeError,
  indexRows,
  memoryText,
  reembed,
  searchByMeaning,
  textSha256,
  type AgentEmbedders,
  type Embedder,
} from '../../activities/embeddings/index.js';
import type { DbHandle } from '../../db/client.js';
import { periodOf } from '../../core/maintenance-period.js';
import { agents, concepts, diaryEntries, llmMemory, maintenanceRuns, memoryVectors } from '../../db/schema/index.js';
import { migratedDatabase, migratedPglite, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';

const toolsDir = process.env.MINDLOOP_TOOLS_DIR ?? repoToolsDir;
let local: Embedder;

beforeAll(async () => {
  local = await createLocalEmbedder({ toolsDir });
});
afterAll(async () => {
  await disposeLocalEmbedders();
});

/** An embedder whose vectors are not the size it announces. */
const lying: Embedder = {
  model: 'lying-8',
  dimensions: 8,
  async embed(texts) {
    return texts.map(() => new Float32Array(5).fill(0.5));
  },
};

function checks(backend: string, handle: () => DbHandle): void {
  const agent = `mi-${backend}`;
  const diary = async (title: string, content: string) =>
    (await handle().db.insert(diaryEntries).values({ agentId: agent, title, content }).returning())[0]!.id;
  const search = (query: string, extra: { includeArchived?: boolean; k?: number } = {}) =>
    searchByMeaning(handle().db, {
      agentId: agent,
      kinds: ['diary'],
      embedder: local,
      query,
      k: extra.k ?? 3,
      ...extra,
    });

  it(`${backend}: a paraphrase ranks above an unrelated row, scored by the exact cosine`, async () => {
    const { db } = handle();
    await db.insert(agents).values({ id: agent, name: agent });
    const cat = await diary('Evening', 'The cat sits on the mat.');
    const tax = await diary('Admin', 'Quarterly tax filings are due in April.');
    const hits = await search('A cat is sitting on a rug.');
    expect(hits!.map((h) => h.rowId)).toEqual([cat, tax]);
    const [q, c] = await local.embed([
      'A cat is sitting on a rug.',
      memoryText('diary', { title: 'Evening', content: 'The cat sits on the mat.' }),
    ]);
    expect(hits![0]!.score).toBeCloseTo(cosine(q!, c!), 5);
    expect(hits![0]!.score).toBeGreaterThan(hits![1]!.score + 0.2);
    // Both rows now have their vector, of the text they are found by.
    const stored = await db.select().from(memoryVectors).where(eq(memoryVectors.agentId, agent));
    expect(stored.map((s) => [s.kind, s.rowId, s.dimensions]).sort()).toEqual(
      [
        ['diary', cat, 384],
        ['diary', tax, 384],
      ].sort(),
    );
    // No embedder: nothing to search with, the caller compares words.
    expect(
      await searchByMeaning(db, { agentId: agent, kinds: ['diary'], embedder: undefined, query: 'cat', k: 3 }),
    ).toBeNull();
  });

  it(`${backend}: a row written after the index was loaded is found`, async () => {
    const dog = await diary('Walk', 'Took the dog for a long walk in the park.');
    const hits = await search('walking my puppy outside', { k: 1 });
    expect(hits!.map((h) => h.rowId)).toEqual([dog]);
  });

  it(`${backend}: archived rows only when asked; a deleted or rewritten row is never found by its old vector`, async () => {
    const { db } = handle();
    const boat = await diary('Sea', 'We sailed the boat across the bay at dawn.');
    expect((await search('sailing a ship on the ocean', { k: 1 }))!.map((h) => h.rowId)).toEqual([boat]);
    await db.update(diaryEntries).set({ archivedAt: new Date() }).where(eq(diaryEntries.id, boat));
    expect((await search('sailing a ship on the ocean', { k: 5 }))!.map((h) => h.rowId)).not.toContain(boat);
    expect((await search('sailing a ship on the ocean', { k: 1, includeArchived: true }))!.map((h) => h.rowId)).toEqual(
      [boat],
    );
    await db.delete(diaryEntries).where(eq(diaryEntries.id, boat));
    expect(
      (await search('sailing a ship on the ocean', { k: 5, includeArchived: true }))!.map((h) => h.rowId),
    ).not.toContain(boat);

    // Rewritten: its stored vector is of the old text; a search scores it by the new one.
    const cake = await diary('Kitchen', 'Baked a chocolate cake for the party.');
    await search('baking dessert', { k: 1 });
    await db
      .update(diaryEntries)
      .set({ title: 'Garage', content: 'Changed the oil in the car engine.' })
      .where(eq(diaryEntries.id, cake));
    const hits = await search('baking dessert', { k: 5 });
    // Fewer rows than a search's candidates: every row is scored, this one by its text now.
    const hit = hits!.find((h) => h.rowId === cake);
    const [q, now] = await embedTexts(db, local, ['baking dessert', 'Garage\nChanged the oil in the car engine.']);
    expect(hit!.score).toBeCloseTo(cosine(q!, now!), 5);
    const [mv] = await db
      .select()
      .from(memoryVectors)
      .where(and(eq(memoryVectors.agentId, agent), eq(memoryVectors.rowId, cake)));
    expect(mv!.textSha256).toBe(textSha256('Garage\nChanged the oil in the car engine.'));
    expect((await search('car maintenance', { k: 1 }))!.map((h) => h.rowId)).toEqual([cake]);
  });

  it(`${backend}: catch-up covers every kind and skips nothing it should index`, async () => {
    const { db } = handle();
    const [note] = await db
      .insert(llmMemory)
      .values({ agentId: agent, content: 'Remember to water the tomatoes.' })
      .returning();
    const [concept] = await db
      .insert(concepts)
      .values({ agentId: agent, name: 'gardening', description: 'growing vegetables' })
      .returning();
    const r = await catchUp(db, agent, local, ['note', 'concept'], 10);
    expect(r).toEqual({ indexed: 2, more: false });
    const hits = await searchByMeaning(db, {
      agentId: agent,
      kinds: ['note', 'concept', 'diary'],
      embedder: local,
      query: 'plants in the vegetable garden',
      k: 2,
    });
    expect(hits!.map((h) => `${h.kind}:${h.rowId}`).sort()).toEqual(
      [`concept:${concept!.id}`, `note:${note!.id}`].sort(),
    );
    expect(await catchUp(db, agent, local, ['diary', 'note', 'concept', 'reply', 'abstract'], 100)).toEqual({
      indexed: 0,
      more: false,
    });
  });

  it(`${backend}: a vector of the wrong size is refused, naming both sizes, and nothing is stored`, async () => {
    const { db } = handle();
    const id = await diary('Odd', 'A row for the lying embedder.');
    const err = await indexRows(db, agent, lying, [{ kind: 'diary', rowId: id, text: 'x' }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EmbeddingSizeError);
    expect((err as Error).message).toMatch(/5 dimensions, expected 8/);
    expect(await db.select().from(memoryVectors).where(eq(memoryVectors.model, 'lying-8'))).toEqual([]);
  });
}

/** The embedders of a worker where the agent's embedder is `e` (or away, with the reason). */
const embeddersOf = (e: Embedder | string): AgentEmbedders => ({
  async forAgent() {
    return typeof e === 'string' ? { ok: false, why: 'away', reason: e } : { ok: true, embedder: e, name: 'test' };
  },
});

describe('the embeddings backfill job (Postgres)', () => {
  let h: MigratedDatabase | undefined;
  beforeAll(async () => {
    h = await migratedDatabase('mindloop_memory_backfill', 2);
  });
  afterAll(async () => {
    await h?.dispose();
  });

  it('embeds every row without a vector once per period; a second run changes nothing and says so; an away embedder leaves the rows', async () => {
    const { db } = h!;
    await db.insert(agents).values([
      { id: 'bf', name: 'bf' },
      { id: 'bf-away', name: 'bf-away' },
    ]);
    await db
      .insert(diaryEntries)
      .values(
        Array.from({ length: 5 }, (_, i) => ({ agentId: 'bf', title: `day ${i}`, content: `I walked ${i} miles.` })),
      );
    await db.insert(llmMemory).values({ agentId: 'bf', content: 'Buy more coffee.' });
    await db.insert(diaryEntries).values({ agentId: 'bf-away', title: 'x', content: 'kept for later' });
    const period = periodOf('embeddings-backfill', new Date()).key;
    const acts = createEmbeddingActivities({ db, embedders: embeddersOf(local) });

    const first = await acts.embeddingsBackfillJob({ agentId: 'bf', period, batch: 2 });
    expect(first).toMatchObject({ indexed: 6, more: false, repeat: false, skipped: null, model: local.model });
    const count = async (agentId: string) =>
      (await db.select().from(memoryVectors).where(eq(memoryVectors.agentId, agentId))).length;
    expect(await count('bf')).toBe(6);

    // A new row, then the same period again: a repeat, nothing embedded.
    await db.insert(diaryEntries).values({ agentId: 'bf', title: 'later', content: 'after the first run' });
    const second = await acts.embeddingsBackfillJob({ agentId: 'bf', period });
    expect(second).toMatchObject({ indexed: 0, repeat: true });
    expect(second.note).toMatch(/already done .*nothing changed/);
    expect(await count('bf')).toBe(6);
    // The next period embeds it.
    const next = periodOf('embeddings-backfill', new Date(Date.now() + 3_600_000)).key;
    expect(await acts.embeddingsBackfillJob({ agentId: 'bf', period: next })).toMatchObject({
      indexed: 1,
      repeat: false,
    });

    // Away: reported, nothing stored, the period recorded; the rows wait for the next one.
    const away = createEmbeddingActivities({ db, embedders: embeddersOf('the endpoint is down') });
    const r = await away.embeddingsBackfillJob({ agentId: 'bf-away', period });
    expect(r).toMatchObject({ indexed: 0, repeat: false, skipped: 'away: the endpoint is down' });
    expect(r.note).toMatch(/left for the next period/);
    expect(await count('bf-away')).toBe(0);
    const ledger = await db.select().from(maintenanceRuns).where(eq(maintenanceRuns.job, 'embeddings-backfill'));
    expect(ledger.map((l) => [l.scope, l.periodKey]).sort()).toEqual(
      [
        ['bf', period],
        ['bf', next],
        ['bf-away', period],
      ].sort(),
    );
  });
});

/** An embedder of model `sized` whose vectors have `n` components (the same model id at another size). */
const sized = (n: number): Embedder => ({
  model: 'sized',
  dimensions: n,
  async embed(texts) {
    return texts.map((t) =>
      Float32Array.from({ length: n }, (_, i) => ((t.charCodeAt(i % t.length) * (i + 1)) % 17) - 8),
    );
  },
});

describe('reembed (Postgres)', () => {
  let h: MigratedDatabase | undefined;
  beforeAll(async () => {
    h = await migratedDatabase('mindloop_memory_reembed', 2);
  });
  afterAll(async () => {
    await h?.dispose();
  });

  it("rebuilds the agent's vectors with its embedder now: those of another size are reported with both sizes and replaced", async () => {
    const { db } = h!;
    await db.insert(agents).values({ id: 're', name: 're' });
    await db.insert(diaryEntries).values([
      { agentId: 're', title: 'one', content: 'first entry' },
      { agentId: 're', title: 'two', content: 'second entry' },
    ]);
    await db.insert(concepts).values({ agentId: 're', name: 'idea' });
    expect(await catchUp(db, 're', sized(6), ['diary', 'concept'], 10)).toEqual({ indexed: 3, more: false });
    // The embedder changed size under the same model id: reembed rebuilds.
    const progress: number[] = [];
    const r = await reembed(db, 're', sized(4), ['diary', 'concept'], (n) => progress.push(n));
    expect(r).toEqual({
      model: 'sized',
      dimensions: 4,
      dropped: [{ model: 'sized', dimensions: 6, count: 3 }],
      indexed: 3,
    });
    expect(progress.at(-1)).toBe(3);
    const stored = await db.select().from(memoryVectors).where(eq(memoryVectors.agentId, 're'));
    expect(stored.map((v) => `${v.kind} ${v.dimensions} ${v.q.length}`).sort()).toEqual([
      'concept 4 4',
      'diary 4 4',
      'diary 4 4',
    ]);
    const hits = await searchByMeaning(db, {
      agentId: 're',
      kinds: ['diary'],
      embedder: sized(4),
      query: 'first entry',
      k: 1,
    });
    expect(hits).toHaveLength(1);
    // A second reembed finds nothing of another size and embeds nothing new (the cache has every text).
    expect(await reembed(db, 're', sized(4), ['diary', 'concept'])).toMatchObject({ dropped: [], indexed: 0 });
  });
});

describe('search by meaning on Postgres', () => {
  let handle: MigratedDatabase | undefined;
  beforeAll(async () => {
    handle = await migratedDatabase('mindloop_memory_index', 2);
  });
  afterAll(async () => {
    await handle?.dispose();
  });
  checks('postgres', () => handle!);
});

describe('search by meaning on PGlite', () => {
  let handle: MigratedDatabase | undefined;
  beforeAll(async () => {
    handle = await migratedPglite();
  });
  afterAll(async () => {
    await handle?.dispose();
  });
  checks('pglite', () => handle!);
});
