/**
 * Search by meaning over an agent's memory (diary entries, notebook notes, replies, concepts,
 * abstracts), with no vector extension in the database: the vectors' int8 codes are kept in
 * `memory_vectors` beside the memory tables, and each worker holds them in memory per (agent,
 * model, kind) to find candidates, which are then scored exactly with their full vectors (table
 * `embeddings`) and checked against the live rows.
 *
 * What keeps a search right whatever the in-memory index holds:
 * - a row written since the index was loaded is caught up first (`catchUp` with `fresh`: rows
 *   newer than every vector of the kind, a short range read on the primary key);
 * - the index reads the vectors stored after those it holds (by row id each search, by time
 *   every `refreshMs`, for vectors replaced or filled in below the newest), and a vector this
 *   process writes reaches its indexes at once;
 * - every candidate is read again from its table: a deleted row is dropped (and leaves the
 *   index), an archived one is kept only when asked, and one whose text changed since it was
 *   embedded is embedded again and scored by its new text.
 * What the index can miss: a row whose vector is not stored yet below the newest (the backfill's
 * work) and, until the next refresh, a row whose text changed and whose old vector does not make
 * it into the candidates.
 *
 * Without an embedder there is nothing to search with: `searchByMeaning` returns null and the
 * caller compares words, as before. An embedder that fails throws (its own error), and the caller
 * falls back the same way.
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Db } from '../../db/client.js';
import { memoryVectors, memoryVectorKinds, type MemoryVectorKind } from '../../db/schema/index.js';
import { placeholderLike } from '../../core/novelty.js';
import { quantize, VectorIndex } from '../../core/vector-search.js';
import { embedTexts, textSha256, vectorsOf } from './cache.js';
import { checkDimensions, cosine, type Embedder } from './types.js';

export { memoryVectorKinds, type MemoryVectorKind };

/** A memory row to embed: its kind, its id in the kind's table and the text it is found by. */
export interface MemoryRowText {
  kind: MemoryVectorKind;
  rowId: number;
  text: string;
}

export interface MemoryHit {
  kind: MemoryVectorKind;
  rowId: number;
  /** Cosine of the query's and the row's full vectors. */
  score: number;
}

interface KindSource {
  table: string;
  /** The row's text in SQL, the same string `memoryText` builds (alias `t`). */
  text: string;
  /** Rows of the table that are not memories to find (alias `t`). */
  skip?: string;
}

/** The table of each kind and the SQL of the text a row is embedded by. */
const sources: Record<MemoryVectorKind, KindSource> = {
  diary: { table: 'diary_entries', text: `t.title || E'\\n' || t.content` },
  note: { table: 'llm_memory', text: `coalesce(t.title || E'\\n', '') || t.content` },
  reply: {
    table: 'llm_recent_responses',
    text: 't.content',
    skip: `t.content like '${placeholderLike.replaceAll("'", "''")}'`,
  },
  concept: { table: 'concepts', text: `t.name || coalesce(E'\\n' || t.description, '')` },
  abstract: { table: 'abstracts', text: `t.title || E'\\n' || t.summary` },
};

/** The row fields each kind's text is made of. */
export interface MemoryRowFields {
  title?: string | null;
  content?: string | null;
  name?: string | null;
  description?: string | null;
  summary?: string | null;
}

/**
 * The text a memory row is embedded by: a diary entry's title and content, a note's title (when
 * it has one) and content, a reply's content, a concept's name and description (when it has
 * one), an abstract's title and summary, on two lines.
 */
export function memoryText(kind: MemoryVectorKind, row: MemoryRowFields): string {
  const two = (a: string | null | undefined, b: string | null | undefined) =>
    a != null && b != null ? `${a}\n${b}` : (a ?? b ?? '');
  switch (kind) {
    case 'diary':
      return two(row.title ?? '', row.content ?? '');
    case 'note':
      return two(row.title, row.content ?? '');
    case 'reply':
      return row.content ?? '';
    case 'concept':
      return two(row.name ?? '', row.description);
    case 'abstract':
      return two(row.title ?? '', row.summary ?? '');
  }
}

const idList = (ids: readonly number[]) => `{${ids.map((i) => Math.trunc(i)).join(',')}}`;

// ---------------------------------------------------------------------------------------------
// The in-memory indexes, per database handle, (agent, model, kind).

interface LoadedIndex {
  index: VectorIndex;
  /** The newest `created_at` (as the database prints it) among the vectors read. */
  seenAt: string | null;
  /** When the vectors stored after `seenAt` were last read (ms, this process's clock). */
  refreshedAt: number;
  loading?: Promise<void>;
}

const loaded = new WeakMap<Db, Map<string, LoadedIndex>>();

/**
 * `memory_vectors.model = model`, written so that the planner uses the primary key (agent, kind,
 * row id, model) for it and not the (model, kind) index, which would read every agent's vectors:
 * PGlite keeps no statistics (it runs no autovacuum), and without them both look alike to it.
 */
const modelIs = (model: string, alias = '') => sql`${sql.raw(alias ? `${alias}.` : '')}model || '' = ${model}`;
const indexKey = (agentId: string, model: string, kind: MemoryVectorKind) => JSON.stringify([agentId, model, kind]);

/** How often a search also reads the vectors replaced or filled in below the newest it holds. */
export const refreshMs = 10_000;
/** Vectors stored this long before the newest one read are read again (transactions commit out of order). */
const overlapSeconds = 5;

function indexesOf(db: Db): Map<string, LoadedIndex> {
  let m = loaded.get(db);
  if (!m) loaded.set(db, (m = new Map()));
  return m;
}

/** Forget every in-memory index of this handle (the next search loads them again). */
export function dropMemoryIndexes(db: Db): void {
  loaded.delete(db);
}

type VectorRow = {
  row_id: string | number;
  dimensions: number;
  q: Uint8Array;
  at: string;
};

function apply(entry: LoadedIndex, rows: VectorRow[]): void {
  for (const r of rows) {
    if (r.dimensions !== entry.index.dimensions) {
      entry.index.remove(Number(r.row_id));
      continue;
    }
    entry.index.upsert(Number(r.row_id), new Int8Array(r.q.buffer, r.q.byteOffset, r.q.byteLength));
  }
  for (const r of rows) if (entry.seenAt === null || r.at > entry.seenAt) entry.seenAt = r.at;
}

const selectVectors = (where: SQL) => sql`
  select row_id, dimensions, q, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as at
  from memory_vectors where ${where}`;

/** The index of (agent, model, kind), loaded on first use and brought up to date with the table. */
async function currentIndex(
  db: Db,
  agentId: string,
  embedder: Embedder,
  kind: MemoryVectorKind,
  owner: Db = db,
): Promise<VectorIndex> {
  const map = indexesOf(owner);
  const key = indexKey(agentId, embedder.model, kind);
  let entry = map.get(key);
  const mine = sql`agent_id = ${agentId} and kind = ${kind} and ${modelIs(embedder.model)}`;
  if (!entry) {
    const fresh: LoadedIndex = { index: new VectorIndex(embedder.dimensions), seenAt: null, refreshedAt: Date.now() };
    fresh.loading = (async () => {
      const r = await db.execute<VectorRow>(selectVectors(mine));
      apply(fresh, r.rows);
    })();
    map.set(key, fresh);
    try {
      await fresh.loading;
    } catch (err) {
      map.delete(key);
      throw err;
    }
    fresh.loading = undefined;
    return fresh.index;
  }
  if (entry.loading) await entry.loading;
  if (entry.index.dimensions !== embedder.dimensions) {
    map.delete(key);
    return currentIndex(db, agentId, embedder, kind, owner);
  }
  const now = Date.now();
  if (now - entry.refreshedAt >= refreshMs && entry.seenAt !== null) {
    entry.refreshedAt = now;
    const since = sql`${entry.seenAt}::timestamptz - make_interval(secs => ${overlapSeconds})`;
    const r = await db.execute<VectorRow>(selectVectors(sql`${mine} and created_at > ${since}`));
    apply(entry, r.rows);
  } else {
    const r = await db.execute<VectorRow>(selectVectors(sql`${mine} and row_id > ${entry.index.maxRowId}`));
    apply(entry, r.rows);
  }
  return entry.index;
}

function tellIndexes(db: Db, agentId: string, model: string, kind: MemoryVectorKind, rowId: number, q: Int8Array) {
  const entry = loaded.get(db)?.get(indexKey(agentId, model, kind));
  if (entry && !entry.loading && entry.index.dimensions === q.length) entry.index.upsert(rowId, q);
}

// ---------------------------------------------------------------------------------------------
// Writing vectors.

/**
 * Embeds the rows' texts (through the `embeddings` cache) and stores their vectors in
 * `memory_vectors`, replacing a row's vector when its text or size changed. A vector whose size
 * is not the embedder's is refused (EmbeddingSizeError, naming both sizes) and nothing is stored.
 * Returns how many rows got a new or replaced vector.
 */
export async function indexRows(
  db: Db,
  agentId: string,
  embedder: Embedder,
  rows: readonly MemoryRowText[],
  /** The handle whose in-memory indexes learn of the new vectors (default `db`; see `indexOwner`). */
  owner: Db = db,
): Promise<number> {
  if (rows.length === 0) return 0;
  const vectors = await embedTexts(
    db,
    embedder,
    rows.map((r) => r.text),
  );
  vectors.forEach((v) => checkDimensions(embedder.model, embedder.dimensions, v));
  let written = 0;
  for (let start = 0; start < rows.length; start += 500) {
    const chunk = rows.slice(start, start + 500);
    const values = chunk.map((r, i) => {
      const { scale, q } = quantize(vectors[start + i]!);
      return {
        agentId,
        kind: r.kind,
        rowId: r.rowId,
        model: embedder.model,
        dimensions: embedder.dimensions,
        textSha256: textSha256(r.text),
        scale,
        q: new Uint8Array(q.buffer, q.byteOffset, q.byteLength),
      };
    });
    const done = await db
      .insert(memoryVectors)
      .values(values)
      .onConflictDoUpdate({
        target: [memoryVectors.agentId, memoryVectors.kind, memoryVectors.rowId, memoryVectors.model],
        set: {
          dimensions: sql`excluded.dimensions`,
          textSha256: sql`excluded.text_sha256`,
          scale: sql`excluded.scale`,
          q: sql`excluded.q`,
          createdAt: sql`now()`,
        },
        setWhere: sql`${memoryVectors.textSha256} <> excluded.text_sha256 or ${memoryVectors.dimensions} <> excluded.dimensions`,
      })
      .returning({ kind: memoryVectors.kind, rowId: memoryVectors.rowId });
    written += done.length;
    const byKey = new Map(values.map((v) => [`${v.kind}:${v.rowId}`, v]));
    for (const d of done) {
      const v = byKey.get(`${d.kind}:${d.rowId}`)!;
      tellIndexes(
        owner,
        agentId,
        embedder.model,
        d.kind,
        d.rowId,
        new Int8Array(v.q.buffer, v.q.byteOffset, v.q.byteLength),
      );
    }
  }
  return written;
}

export interface CatchUpOptions {
  /**
   * Only rows newer than every vector of their kind (a short read on the primary key, what a
   * search does first). Otherwise every row is checked: no vector for this model, a vector of
   * another size, or one of an older text (the backfill).
   */
  fresh?: boolean;
}

export interface CatchUpResult {
  /** Rows given a new or replaced vector. */
  indexed: number;
  /** Whether rows were left for a later call (`limit` reached). */
  more: boolean;
}

/**
 * Finds up to `limit` rows of the agent's memory of those kinds (archived ones too, so that they
 * can be found when asked) that have no vector for the embedder's model, or whose text or size
 * changed, newest first, and indexes them.
 */
export async function catchUp(
  db: Db,
  agentId: string,
  embedder: Embedder,
  kinds: readonly MemoryVectorKind[],
  limit: number,
  options: CatchUpOptions = {},
): Promise<CatchUpResult> {
  let left = limit;
  let indexed = 0;
  let more = false;
  for (const kind of kinds) {
    if (left <= 0) {
      more = true;
      break;
    }
    const rows = await staleRows(db, agentId, embedder, kind, left + 1, options.fresh ?? false);
    if (rows.length > left) more = true;
    const take = rows.slice(0, left);
    indexed += await indexRows(db, agentId, embedder, take);
    left -= take.length;
  }
  return { indexed, more };
}

async function staleRows(
  db: Db,
  agentId: string,
  embedder: Embedder,
  kind: MemoryVectorKind,
  limit: number,
  fresh: boolean,
  /** For `fresh`: the newest row id with a vector, when the caller knows it. */
  known?: number,
): Promise<MemoryRowText[]> {
  const src = sources[kind];
  const table = sql.raw(src.table);
  const text = sql.raw(src.text);
  const skip = src.skip ? sql.raw(`and not (${src.skip})`) : sql``;
  const vectorOf = sql`mv.agent_id = t.agent_id and mv.kind = ${kind} and mv.row_id = t.id and ${modelIs(embedder.model, 'mv')}`;
  let after = known ?? 0;
  if (fresh && known === undefined) {
    // Read first, so that the rows after it are a range of the primary key, whatever the statistics.
    const m = await db.execute<{ max: string | number | null }>(
      sql`select max(row_id) as max from memory_vectors where agent_id = ${agentId} and kind = ${kind} and ${modelIs(embedder.model)}`,
    );
    after = Number(m.rows[0]?.max ?? 0);
  }
  const stale = fresh
    ? // A range of the primary key, newest first (the agent compared as text, so that no index of
      // the agent's rows is read instead when the table has no statistics).
      sql`t.id > ${after} and t.agent_id || '' = ${agentId} and not exists (select 1 from memory_vectors mv where ${vectorOf})`
    : sql`not exists (select 1 from memory_vectors mv where ${vectorOf}
          and mv.dimensions = ${embedder.dimensions}
          and mv.text_sha256 = encode(sha256(convert_to(${text}, 'UTF8')), 'hex'))`;
  const r = await db.execute<{ id: string | number; txt: string }>(sql`
    select t.id, ${text} as txt from ${table} t
    where ${fresh ? sql`true` : sql`t.agent_id = ${agentId}`} ${skip} and ${stale}
    order by t.id desc limit ${limit}`);
  return r.rows.map((row) => ({ kind, rowId: Number(row.id), text: row.txt }));
}

// ---------------------------------------------------------------------------------------------
// Searching.

export interface SearchByMeaningOptions {
  agentId: string;
  kinds: readonly MemoryVectorKind[];
  /** The agent's embedder; without one there is no search by meaning (null). */
  embedder: Embedder | undefined;
  /** A text (embedded through the cache) or a vector of the embedder's size. */
  query: string | Float32Array;
  k: number;
  /** Hits scoring below this are left out. */
  minScore?: number;
  /** Archived rows too (default: live rows only). */
  includeArchived?: boolean;
  /** How many new rows a search embeds before it searches (default 16; 0: none). */
  catchUpLimit?: number;
  /**
   * The handle whose in-memory indexes the search keeps (default `db`): a search run inside a
   * transaction names the pool, so its indexes outlive the transaction and are not loaded again.
   */
  indexOwner?: Db;
}

/** Candidates scored exactly per hit asked: 4 per hit, at least 40, at most 200. */
const candidateCount = (k: number) => Math.min(200, Math.max(40, 4 * k));

/**
 * The `k` rows of those kinds closest in meaning to the query, best first, scored by the exact
 * cosine of the full vectors; null when there is no embedder. Throws what the embedder throws
 * (an EmbeddingSizeError for a vector of the wrong size): the caller falls back to words.
 */
export async function searchByMeaning(db: Db, opts: SearchByMeaningOptions): Promise<MemoryHit[] | null> {
  const { embedder, agentId } = opts;
  if (!embedder) return null;
  const kinds = [...new Set(opts.kinds)];
  if (kinds.length === 0 || opts.k <= 0) return [];
  const query = typeof opts.query === 'string' ? (await vectorsOf(db, embedder, [opts.query]))[0]! : opts.query;
  checkDimensions(embedder.model, embedder.dimensions, query);
  let catchUpLeft = opts.catchUpLimit ?? 16;
  const hits: MemoryHit[] = [];
  for (const kind of kinds) {
    const index = await currentIndex(db, agentId, embedder, kind, opts.indexOwner ?? db);
    if (catchUpLeft > 0) {
      // Rows newer than every vector the index holds (it has just read the newest): embedded now.
      const fresh = await staleRows(db, agentId, embedder, kind, catchUpLeft, true, index.maxRowId);
      catchUpLeft -= fresh.length;
      await indexRows(db, agentId, embedder, fresh, opts.indexOwner ?? db);
    }
    const ids = index.candidates(query, candidateCount(opts.k));
    if (ids.length === 0) continue;
    hits.push(...(await rerank(db, opts, embedder, kind, index, query, ids)));
  }
  const minScore = opts.minScore ?? -Infinity;
  return hits
    .filter((h) => h.score >= minScore)
    .sort((a, b) => b.score - a.score || a.rowId - b.rowId)
    .slice(0, opts.k);
}

/**
 * A one-dimensional `real[]` in the array binary format (`array_send`): a header of 20 bytes
 * (dimensions, has-nulls, element type, length, lower bound), then per element its length (4)
 * and its big-endian float4. Read so because the text form costs more to print and to parse.
 */
function float4Array(bytes: Uint8Array): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getInt32(0) !== 1) throw new Error(`expected a one-dimensional array, got ${view.getInt32(0)} dimensions`);
  const n = view.getInt32(12);
  const out = new Float32Array(n);
  for (let i = 0, o = 20; i < n; i++, o += 8) out[i] = view.getFloat32(o + 4);
  return out;
}

/**
 * Scores the candidates with their full vectors, as their rows are now. The database checks each
 * row's text against the hash its vector was made from; a row whose text changed comes back with
 * its text, is embedded again here and scored by it.
 */
async function rerank(
  db: Db,
  opts: SearchByMeaningOptions,
  embedder: Embedder,
  kind: MemoryVectorKind,
  index: VectorIndex,
  query: Float32Array,
  ids: number[],
): Promise<MemoryHit[]> {
  const src = sources[kind];
  const skip = src.skip ? sql.raw(`and not (${src.skip})`) : sql``;
  const text = sql.raw(src.text);
  const r = await db.execute<{
    id: string | number;
    archived: boolean;
    /** The row's text, only when its vector is not of that text (or of another size, or missing). */
    txt: string | null;
    /** The full vector in the array binary format (array_send); only when of the row's text. */
    vector: Uint8Array | null;
  }>(sql`
    select c.id, c.archived, case when c.current or not c.wanted then null else c.txt end as txt,
           case when c.current and c.wanted then array_send(c.vector) end as vector
    from unnest(${idList(ids)}::bigint[]) as cand(id)
    -- each candidate looked up by its keys on its own, whatever the tables' statistics say
    cross join lateral (
      select t.id, t.archived_at is not null as archived, t.txt, e.vector,
             ${opts.includeArchived ? sql`true` : sql`t.archived_at is null`} as wanted,
             coalesce(e.dimensions = ${embedder.dimensions}
               and mv.text_sha256 = encode(sha256(convert_to(t.txt, 'UTF8')), 'hex'), false) as current
      from (select t.id, t.archived_at, ${text} as txt from ${sql.raw(src.table)} t
            where t.id = cand.id and t.agent_id = ${opts.agentId} ${skip}) t
      left join memory_vectors mv
        on mv.agent_id = ${opts.agentId} and mv.kind = ${kind} and mv.row_id = t.id and ${modelIs(embedder.model, 'mv')}
      left join embeddings e on e.model = ${embedder.model} and e.text_sha256 = mv.text_sha256
      offset 0
    ) c`);
  const found = new Set(r.rows.map((row) => Number(row.id)));
  // Rows gone from their table leave the index (an archived one stays: it is found when asked).
  for (const id of ids) if (!found.has(id)) index.remove(id);
  const hits: MemoryHit[] = [];
  const changed: MemoryRowText[] = [];
  for (const row of r.rows) {
    const rowId = Number(row.id);
    if (row.txt === null) {
      if (row.vector !== null) hits.push({ kind, rowId, score: cosine(query, float4Array(row.vector)) });
    } else changed.push({ kind, rowId, text: row.txt });
  }
  if (changed.length > 0) {
    // Embedded again since the vector was stored for another text (or size): scored by the text now.
    await indexRows(db, opts.agentId, embedder, changed);
    const vectors = await embedTexts(
      db,
      embedder,
      changed.map((c) => c.text),
    );
    changed.forEach((c, i) => hits.push({ kind, rowId: c.rowId, score: cosine(query, vectors[i]!) }));
  }
  return hits;
}

export const allMemoryKinds: readonly MemoryVectorKind[] = memoryVectorKinds;

export interface ReembedResult {
  model: string;
  dimensions: number;
  /** Vectors of the agent's that were dropped: of another size under this model, or of another model. */
  dropped: Array<{ model: string; dimensions: number; count: number }>;
  indexed: number;
}

/**
 * Rebuilds the agent's vectors of those kinds with `embedder`: every stored vector of another
 * model or of another size is dropped (reported with its size), then every row is embedded again
 * (through the cache: a text already embedded at this size is not computed again), in batches.
 */
export async function reembed(
  db: Db,
  agentId: string,
  embedder: Embedder,
  kinds: readonly MemoryVectorKind[],
  onProgress: (indexed: number) => void = () => {},
): Promise<ReembedResult> {
  const inKinds = sql`kind in (${sql.join(
    kinds.map((k) => sql`${k}`),
    sql`, `,
  )})`;
  const old = await db.execute<{ model: string; dimensions: number; count: string | number }>(sql`
    delete from memory_vectors where agent_id = ${agentId} and ${inKinds}
      and (model <> ${embedder.model} or dimensions <> ${embedder.dimensions})
    returning model, dimensions, 1 as count`);
  const dropped = new Map<string, { model: string; dimensions: number; count: number }>();
  for (const r of old.rows) {
    const key = `${r.model}\0${r.dimensions}`;
    const d = dropped.get(key) ?? { model: r.model, dimensions: Number(r.dimensions), count: 0 };
    d.count++;
    dropped.set(key, d);
  }
  dropMemoryIndexes(db);
  let indexed = 0;
  for (;;) {
    const r = await catchUp(db, agentId, embedder, kinds, 64);
    indexed += r.indexed;
    onProgress(indexed);
    if (!r.more || r.indexed === 0) break;
  }
  return { model: embedder.model, dimensions: embedder.dimensions, dropped: [...dropped.values()], indexed };
}
