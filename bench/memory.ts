/**
 * `npm run bench -- memory`: search by meaning over an agent's memory.
 *
 * - embed_texts_per_s: the offline embedder (all-MiniLM-L6-v2 on this machine's CPUs), distinct
 *   diary-like texts in batches of 32.
 * - recall_p50/p99_ms_100k_{pg,pglite}: `searchByMeaning` for k = 10 over one agent's 100 000
 *   diary rows with their vectors, by a text query, on the real Postgres (a scratch database) and
 *   on the embedded PGlite (in memory, served on its socket in a thread, as `npm start` runs it).
 *   The whole call is timed: the query's vector from the cache, the catch-up of new rows, the
 *   index's refresh, the candidates from the in-memory index and their exact scoring against the
 *   live rows. The index is loaded by the first search (index_load_ms_*), not timed with the rest.
 *   recall_at_10_*: the share of the exact top 10 (cosine over all 100 000 full vectors, computed
 *   here) the search returns.
 *
 * Embedding 100 000 texts on this machine takes about 25 minutes, so the rows' vectors are made
 * from `baseTexts` really embedded texts: row i's vector mixes two of them and a little noise
 * (normalized), stored in `embeddings` under the hash of the row's own text as a real vector
 * would be. The queries are embedded for real.
 */
import { createHash } from 'node:crypto';
import { createActivities } from '../activities/index.js';
import { createAgentEmbedders } from '../activities/embeddings/agent-embedder.js';
import { agentConfig, agents, goals, llmRecentResponses, llmRegistry } from '../db/schema/index.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { noveltyAucs, noveltyPairsFile, parseNoveltyPairs } from '../core/novelty-eval.js';
import { cpus } from 'node:os';
import {
  createLocalEmbedder,
  disposeLocalEmbedders,
  dropMemoryIndexes,
  embedTexts,
  memoryText,
  searchByMeaning,
  type Embedder,
} from '../activities/embeddings/index.js';
import { quantize } from '../core/vector-search.js';
import { createDb, type DbHandle } from '../db/client.js';
import { runMigrations } from '../db/migrate.js';
import { startEmbeddedPostgres } from '../runtime/embedded-postgres.js';
import { scratchDatabase, summarize } from './lib.js';

export const memorySizes = {
  full: { embedTexts: 256, baseTexts: 2_000, rows: 100_000, queries: 50, rounds: 4, noveltyPairs: Infinity, ticks: 60 },
  smoke: { embedTexts: 16, baseTexts: 32, rows: 1_000, queries: 4, rounds: 2, noveltyPairs: 24, ticks: 2 },
};
export type MemorySizes = (typeof memorySizes)['full'];

/** A small deterministic generator (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const who = ['I', 'We', 'My sister', 'The team', 'Our neighbour', 'The old captain', 'A colleague', 'The children'];
const did = [
  'cooked a spicy curry',
  'repaired the leaking roof',
  'fixed the failing database migration',
  'walked the dog along the river',
  'planted tomatoes in the garden',
  'read a novel about space travel',
  'argued about the quarterly budget',
  'painted the fence blue',
  'trained for the city marathon',
  'debugged a memory leak in the worker',
  'sailed a small boat across the bay',
  'baked bread with rye flour',
  'wrote a letter to an old friend',
  'studied the migration of birds',
  'cleaned out the garage',
  'learned to play the violin',
  'filed the tax return',
  'watched a meteor shower',
  'negotiated a new contract',
  'tested the backup restore',
];
const where = [
  'at home',
  'in the office',
  'by the lake',
  'in the mountains',
  'downtown',
  'at the harbour',
  'in the lab',
];
const when = ['this morning', 'late at night', 'on Sunday', 'after the storm', 'before lunch', 'during the holidays'];
const feel = ['and felt proud', 'and it was exhausting', 'which went badly', 'with great joy', 'without much hope', ''];

function baseText(r: () => number): { title: string; content: string } {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
  const act = pick(did);
  return {
    title: act.split(' ').slice(0, 2).join(' '),
    content: `${pick(who)} ${act} ${pick(where)} ${pick(when)} ${pick(feel)}`.trim() + '.',
  };
}

const queryTexts = [
  'making dinner with hot spices',
  'roof repairs after rain',
  'a database schema change that broke',
  'taking the puppy for a stroll by the water',
  'growing vegetables',
  'science fiction book',
  'disagreement over money at work',
  'running practice for a race',
  'tracking down a leak in a program',
  'boating on the sea',
  'making bread',
  'writing to someone I have not seen for years',
  'watching shooting stars',
  'signing a deal',
  'checking that backups can be restored',
  'music lessons',
];

/** The offline embedder's throughput on distinct texts (batches of 32, as the backfill sends them). */
export async function measureEmbedding(embedder: Embedder, n: number): Promise<number> {
  const r = rng(7);
  const texts = Array.from({ length: n }, (_, i) => `${memoryText('diary', baseText(r))} #${i}`);
  await embedder.embed(texts.slice(0, 4));
  const t0 = performance.now();
  for (let i = 0; i < texts.length; i += 32) await embedder.embed(texts.slice(i, i + 32));
  return n / ((performance.now() - t0) / 1000);
}

interface Corpus {
  titles: string[];
  contents: string[];
  hashes: string[];
  vectors: Float32Array[];
}

/** `rows` diary rows whose vectors mix two of `base` really embedded texts' vectors. */
async function corpus(embedder: Embedder, sizes: MemorySizes): Promise<Corpus> {
  const r = rng(42);
  const base = Array.from({ length: sizes.baseTexts }, () => baseText(r));
  const baseVectors: Float32Array[] = [];
  const texts = base.map((b) => memoryText('diary', b));
  for (let i = 0; i < texts.length; i += 64) baseVectors.push(...(await embedder.embed(texts.slice(i, i + 64))));
  const d = embedder.dimensions;
  const c: Corpus = { titles: [], contents: [], hashes: [], vectors: [] };
  for (let i = 0; i < sizes.rows; i++) {
    const a = Math.floor(r() * base.length);
    const b = Math.floor(r() * base.length);
    const v = new Float32Array(d);
    let n = 0;
    for (let j = 0; j < d; j++) {
      v[j] = 0.85 * baseVectors[a]![j]! + 0.15 * baseVectors[b]![j]! + (r() - 0.5) * 0.02;
      n += v[j]! * v[j]!;
    }
    for (let j = 0; j < d; j++) v[j] = v[j]! / Math.sqrt(n);
    const title = base[a]!.title;
    const content = `${base[a]!.content} (entry ${i})`;
    c.titles.push(title);
    c.contents.push(content);
    c.hashes.push(createHash('sha256').update(memoryText('diary', { title, content }), 'utf8').digest('hex'));
    c.vectors.push(v);
  }
  return c;
}

const agentId = 'bench-memory';

/** The corpus as one agent's diary, its vectors in `embeddings` and `memory_vectors`. */
async function load(handle: DbHandle, embedder: Embedder, c: Corpus): Promise<void> {
  const { pool } = handle;
  await pool.query(`insert into agents (id, name) values ($1, $1) on conflict do nothing`, [agentId]);
  const batch = 2_000;
  for (let s = 0; s < c.titles.length; s += batch) {
    const end = Math.min(c.titles.length, s + batch);
    const ids = await pool.query<{ id: string }>(
      `insert into diary_entries (agent_id, title, content)
       select $1, t, x from unnest($2::text[], $3::text[]) with ordinality as u(t, x, n) order by n returning id`,
      [agentId, c.titles.slice(s, end), c.contents.slice(s, end)],
    );
    const vecs = c.vectors.slice(s, end);
    const hashes = c.hashes.slice(s, end);
    await pool.query(
      `insert into embeddings (model, dimensions, text_sha256, vector)
       select $1, $2, h, v::real[] from unnest($3::text[], $4::text[]) as u(h, v) on conflict do nothing`,
      [
        embedder.model,
        embedder.dimensions,
        hashes,
        vecs.map((v) => `{${Array.from(v, (x) => x.toFixed(6)).join(',')}}`),
      ],
    );
    const qs = vecs.map((v) => quantize(v));
    await pool.query(
      `insert into memory_vectors (agent_id, kind, row_id, model, dimensions, text_sha256, scale, q)
       select $1, 'diary', r, $2, $3, h, s, q from unnest($4::bigint[], $5::text[], $6::real[], $7::bytea[]) as u(r, h, s, q)`,
      [
        agentId,
        embedder.model,
        embedder.dimensions,
        ids.rows.map((r) => r.id),
        hashes,
        qs.map((q) => q.scale),
        qs.map((q) => Buffer.from(q.q.buffer, q.q.byteOffset, q.q.byteLength)),
      ],
    );
  }
}

export interface StackFigures {
  p50: number;
  p99: number;
  loadMs: number;
  recallAt10: number;
  insertS: number;
}

/** Searches by text on one stack: the first loads the index, the rest are timed. */
async function searchStack(handle: DbHandle, embedder: Embedder, c: Corpus, sizes: MemorySizes): Promise<StackFigures> {
  const t0 = performance.now();
  await load(handle, embedder, c);
  const insertS = (performance.now() - t0) / 1000;
  const { db } = handle;
  const queries = Array.from(
    { length: sizes.queries },
    (_, i) => queryTexts[i % queryTexts.length]! + (i >= queryTexts.length ? ` (${i})` : ''),
  );
  const qv = await embedTexts(db, embedder, queries);
  dropMemoryIndexes(db);
  const l0 = performance.now();
  await searchByMeaning(db, { agentId, kinds: ['diary'], embedder, query: queries[0]!, k: 10 });
  const loadMs = performance.now() - l0;
  // Row ids in insertion order: the corpus' index i is the i-th id.
  const ids = (
    await handle.pool.query<{ id: string }>(`select id from diary_entries where agent_id = $1 order by id`, [agentId])
  ).rows.map((r) => Number(r.id));
  const samples: number[] = [];
  let found = 0;
  let wanted = 0;
  for (let round = 0; round < sizes.rounds; round++) {
    for (let i = 0; i < queries.length; i++) {
      const s = performance.now();
      const hits = await searchByMeaning(db, { agentId, kinds: ['diary'], embedder, query: queries[i]!, k: 10 });
      samples.push(performance.now() - s);
      if (round === 0) {
        const exact = exactTop(qv[i]!, c.vectors, 10).map((j) => ids[j]!);
        const got = new Set(hits!.map((h) => h.rowId));
        found += exact.filter((id) => got.has(id)).length;
        wanted += exact.length;
      }
    }
  }
  const { p50, p99 } = summarize(samples);
  return { p50, p99, loadMs, recallAt10: found / wanted, insertS };
}

function exactTop(q: Float32Array, vectors: Float32Array[], k: number): number[] {
  const scores = vectors.map((v) => {
    let s = 0;
    for (let j = 0; j < v.length; j++) s += q[j]! * v[j]!;
    return s;
  });
  return scores
    .map((s, i) => [s, i] as const)
    .sort((a, b) => b[0] - a[0])
    .slice(0, k)
    .map(([, i]) => i);
}

/**
 * A tick's own work (think with its context, then the reflexes; a scripted model answers at once)
 * with semantic memory on against off, the same agent history, alternating tick by tick: the
 * steady-state median of each, after both have had a first tick (which embeds the history).
 */
async function semanticTickOverhead(
  toolsDir: string,
  ticks: number,
): Promise<{ onMs: number; offMs: number; ratio: number }> {
  const topics = [
    'billing migration',
    'invoice index',
    'garden beds',
    'the Kyoto trip',
    'weather',
    'a novel',
    'the bike',
    'learning Rust',
  ];
  const said = (i: number) =>
    `Tick ${i}: thinking about ${topics[i % 8]} and ${topics[(i * 3 + 1) % 8]}; next I check step ${i * 7} and note what changed.`;
  const reflexReplies: Record<string, string> = {
    emotion: 'calm:2 (steady work)',
    novelty: '{"novelty": 60, "new": ["a step"], "refined": [], "discarded": [], "tags": ["work"]}',
    validate: '+1 -- fine',
  };
  let thinks = 0;
  const scratch = await scratchDatabase('bench_memory_tick');
  const handle = createDb(scratch.url, { max: 4 });
  try {
    await runMigrations(handle.pool);
    const db = handle.db;
    const acts = createActivities({
      db,
      llm: {
        env: {},
        toolsDir: '',
        scriptedReply: ({ purpose }) =>
          purpose && purpose !== 'think' ? (reflexReplies[purpose] ?? '+1 -- fine') : said(1000 + thinks++),
      },
      embedders: createAgentEmbedders({ env: {}, toolsDir }),
    });
    const history = 40;
    for (const sem of ['on', 'off'] as const) {
      const id = `tick-${sem}`;
      await db.insert(agents).values({ id, name: id });
      await db
        .insert(llmRegistry)
        .values({ agentId: id, name: 'mind', provider: 'scripted', model: 'script', role: 'agent', priority: 1 });
      await db.insert(agentConfig).values({ agentId: id, key: 'semantic_memory', value: sem });
      await db.insert(goals).values({ agentId: id, title: 'Ship the billing migration' });
      await db
        .insert(llmRecentResponses)
        .values(Array.from({ length: history }, (_, i) => ({ agentId: id, tick: i + 1, content: said(i + 1) })));
    }
    const params = { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0 };
    const tick = async (agentId: string, t: number): Promise<number> => {
      const started = performance.now();
      const r = await acts.think({
        agentId,
        tick: t,
        workflowId: `agent/${agentId}`,
        now: new Date(Date.UTC(2026, 10, 27, 12, 0, t)).toISOString(),
        mode: 'main',
        loop: { contextMode: 'standard', recentK: 5, notesMode: 'auto' },
        params: { ...params, maxTokens: 256 },
      });
      await acts.tickReflexes({
        agentId,
        tick: t,
        workflowId: `agent/${agentId}`,
        responseId: r.responseId!,
        commands: [],
        params,
        defaults: params,
        stagnation: { lowStreak: 0, anxietyStreak: 0, pending: null, lastStrategyTick: 0 },
        contextMode: 'standard',
      });
      return performance.now() - started;
    };
    const on: number[] = [];
    const off: number[] = [];
    for (let t = history + 1; t <= history + 1 + ticks; t++) {
      const a = await tick('tick-on', t);
      const b = await tick('tick-off', t);
      if (t > history + 1) {
        on.push(a);
        off.push(b);
      }
    }
    const onMs = summarize(on).p50;
    const offMs = summarize(off).p50;
    return { onMs, offMs, ratio: onMs / offMs };
  } finally {
    await handle.close();
    await scratch.drop();
  }
}

export async function measureMemory(
  toolsDir: string,
  sizes: MemorySizes,
): Promise<{ metrics: Record<string, number | string>; notes: Record<string, string> }> {
  const embedder = await createLocalEmbedder({ toolsDir });
  try {
    const perS = await measureEmbedding(embedder, sizes.embedTexts);
    process.stdout.write(`  embedder: ${perS.toFixed(1)} texts/s on ${cpus().length} CPUs\n`);
    // The tick first: the search's 100 000-row corpus (150 MB of vectors) is not in its heap.
    const tickCost = await semanticTickOverhead(toolsDir, sizes.ticks);
    process.stdout.write(
      `  tick: ${tickCost.onMs.toFixed(1)} ms with semantic memory, ${tickCost.offMs.toFixed(1)} ms without (×${tickCost.ratio.toFixed(2)})\n`,
    );
    const c0 = performance.now();
    const c = await corpus(embedder, sizes);
    process.stdout.write(
      `  corpus: ${sizes.rows} rows from ${sizes.baseTexts} embedded texts in ${((performance.now() - c0) / 1000).toFixed(0)} s (embedding every row would take ~${Math.round(sizes.rows / perS / 60)} min)\n`,
    );
    const scratch = await scratchDatabase('bench_memory');
    let pg: StackFigures;
    const pgHandle = createDb(scratch.url, { max: 4 });
    try {
      await runMigrations(pgHandle.pool);
      pg = await searchStack(pgHandle, embedder, c, sizes);
    } finally {
      await pgHandle.close();
      await scratch.drop();
    }
    process.stdout.write(`  postgres: p50 ${pg.p50.toFixed(1)} ms, p99 ${pg.p99.toFixed(1)} ms\n`);
    const embedded = await startEmbeddedPostgres({ dataDir: 'memory://', port: 0 });
    let lite: StackFigures;
    const liteHandle = createDb(embedded.url, { max: 4 });
    try {
      await runMigrations(liteHandle.pool);
      lite = await searchStack(liteHandle, embedder, c, sizes);
    } finally {
      await liteHandle.close();
      await embedded.stop();
    }
    process.stdout.write(`  pglite: p50 ${lite.p50.toFixed(1)} ms, p99 ${lite.p99.toFixed(1)} ms\n`);
    // The keys name the full run's size (a smoke run writes the same keys; its notes say it is one).
    const n = '100k';
    const metrics: Record<string, number | string> = {
      embed_texts_per_s: perS,
      [`recall_p50_ms_${n}_pg`]: pg.p50,
      [`recall_p99_ms_${n}_pg`]: pg.p99,
      [`recall_p50_ms_${n}_pglite`]: lite.p50,
      [`recall_p99_ms_${n}_pglite`]: lite.p99,
      [`index_load_ms_${n}_pg`]: pg.loadMs,
      [`index_load_ms_${n}_pglite`]: lite.loadMs,
      recall_at_10_pg: pg.recallAt10,
      recall_at_10_pglite: lite.recallAt10,
    };
    // The labelled set's AUCs, with the same embedder (the evaluation test in the suite asserts them).
    // A smoke run takes an even spread of the set (both labels), a full run all of it.
    const all = parseNoveltyPairs(readFileSync(join(import.meta.dirname, '..', noveltyPairsFile), 'utf8'));
    const stride = Math.max(1, Math.ceil(all.length / sizes.noveltyPairs));
    const pairs = all.filter((_, i) => i % stride === 0);
    const auc = await noveltyAucs(pairs, (texts) => embedder.embed(texts));
    process.stdout.write(
      `  novelty AUC (${auc.pairs} pairs): today ${auc.today.toFixed(3)}, semantic ${auc.semantic.toFixed(3)}, blend ${auc.blend.toFixed(3)}\n`,
    );
    metrics.novelty_auc_today = auc.today;
    metrics.novelty_auc_semantic = auc.semantic;
    metrics.novelty_auc_blend = auc.blend;
    metrics.tick_overhead_ratio_semantic = tickCost.ratio;
    metrics.tick_p50_ms_semantic_on = tickCost.onMs;
    metrics.tick_p50_ms_semantic_off = tickCost.offMs;
    const notes = {
      corpus: `${sizes.rows} diary rows of one agent; their vectors mix two of ${sizes.baseTexts} really embedded texts plus noise (embedding ${sizes.rows} texts would take ~${Math.round(sizes.rows / perS / 60)} min here); queries are real texts, embedded once (the cache) before timing`,
      recall: `searchByMeaning k=10, ${sizes.queries} queries × ${sizes.rounds} rounds, the whole call (cache lookup of the query, catch-up of new rows, index refresh, candidates, exact scoring against the live rows); the first search loads the index (index_load_ms_*); recall_at_10_*: share of the exact top 10 by full-vector cosine that the search returns`,
      stacks: `pg: the local PostgreSQL, a scratch database (load ${pg.insertS.toFixed(0)} s); pglite: the embedded PGlite in memory on its socket thread (load ${lite.insertS.toFixed(0)} s); no ANALYZE after loading (PGlite runs no autovacuum, so its tables have no statistics in use either)`,
      target: `recall p50 <= 20 ms on both: pg ${pg.p50 <= 20 ? 'met' : 'missed'}, pglite ${lite.p50 <= 20 ? 'met' : 'missed'}`,
      novelty_auc: `the labelled set (${noveltyPairsFile}, ${auc.pairs} pairs, ${auc.novel} novel) with this embedder: today = the lexical score (the LLM mini-prompt needs a model, not measured offline), semantic = the highest cosine of the reply vector (the mean of its clauses) to the previous replies, blend = the tick's score by meaning`,
      tick_overhead_ratio_semantic: `think (its context) then the reflexes, a scripted model answering at once, one agent with semantic_memory on and one off, the same 40 replies of history and a goal, alternating, ${sizes.ticks} ticks each after a first (which embeds the history); p50 on ÷ p50 off. Target <= 1.2: ${tickCost.ratio <= 1.2 ? 'met' : 'missed'}`,
    };
    return { metrics, notes };
  } finally {
    await disposeLocalEmbedders();
  }
}
