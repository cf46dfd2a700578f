/**
 * The embeddings cache (table `embeddings`): a text is embedded once per model. `embedTexts` looks
 * every text up by the SHA-256 of its UTF-8 bytes, asks the embedder only for the missing ones
 * (each distinct text once), stores them, and returns one vector per text in order.
 */
import { createHash } from 'node:crypto';
import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.js';
import { embeddings } from '../../db/schema/index.js';
import { checkDimensions, type Embedder } from './types.js';
import { meaningClauses, meanVector } from '../../core/novelty.js';

export function textSha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

export async function embedTexts(db: Db, embedder: Embedder, texts: readonly string[]): Promise<Float32Array[]> {
  if (texts.length === 0) return [];
  const hashes = texts.map(textSha256);
  const unique = [...new Set(hashes)];
  const found = new Map<string, Float32Array>();
  const rows = await db
    .select({ hash: embeddings.textSha256, dimensions: embeddings.dimensions, vector: embeddings.vector })
    .from(embeddings)
    .where(and(eq(embeddings.model, embedder.model), inArray(embeddings.textSha256, unique)));
  for (const r of rows) {
    // A stored vector of another size (the model id now names another model) is computed again.
    if (r.dimensions === embedder.dimensions) found.set(r.hash, Float32Array.from(r.vector));
  }
  const missing = unique.filter((h) => !found.has(h));
  if (missing.length > 0) {
    const textOf = new Map(hashes.map((h, i) => [h, texts[i]!]));
    const vectors = await embedder.embed(missing.map((h) => textOf.get(h)!));
    if (vectors.length !== missing.length) {
      throw new Error(`embedder ${embedder.model} returned ${vectors.length} vectors for ${missing.length} texts`);
    }
    for (const v of vectors) checkDimensions(embedder.model, embedder.dimensions, v);
    const values = missing.map((h, i) => ({
      model: embedder.model,
      dimensions: embedder.dimensions,
      textSha256: h,
      vector: Array.from(vectors[i]!),
    }));
    await db
      .insert(embeddings)
      .values(values)
      .onConflictDoUpdate({
        target: [embeddings.model, embeddings.textSha256],
        set: { dimensions: sql`excluded.dimensions`, vector: sql`excluded.vector` },
      });
    missing.forEach((h, i) => found.set(h, vectors[i]!));
  }
  return hashes.map((h) => found.get(h)!);
}

/** Vectors a worker keeps per embedder, by text: at most this many each, the least recently used out first. */
const keptLimit = 5000;
// Module-level by design (activities only): a text's vector never changes for its model, so a worker
// keeps those it read or made, and a tick reads from the database only the texts it has not seen.
const kept = new WeakMap<Embedder, Map<string, Float32Array>>();
// The same for replies' vectors (the mean of their clauses'), which a tick's context reads for its
// newest replies again and again.
const keptReplies = new WeakMap<Embedder, Map<string, Float32Array>>();

function memoOf(all: WeakMap<Embedder, Map<string, Float32Array>>, embedder: Embedder): Map<string, Float32Array> {
  let memo = all.get(embedder);
  if (!memo) all.set(embedder, (memo = new Map()));
  return memo;
}

/** The kept vectors of `keys`, which go to the end of the order; the oldest beyond `keptLimit` leave. */
function take(memo: Map<string, Float32Array>, keys: readonly string[]): Float32Array[] {
  const out = keys.map((k) => memo.get(k)!);
  for (const [i, k] of keys.entries()) if (memo.delete(k)) memo.set(k, out[i]!);
  for (const k of memo.keys()) {
    if (memo.size <= keptLimit) break;
    memo.delete(k);
  }
  return out;
}

/** `embedTexts`, asking the database (and the embedder) only for the texts this worker has not seen. */
export async function vectorsOf(db: Db, embedder: Embedder, texts: readonly string[]): Promise<Float32Array[]> {
  const memo = memoOf(kept, embedder);
  const missing = [...new Set(texts.filter((t) => !memo.has(t)))];
  const read = await embedTexts(db, embedder, missing);
  missing.forEach((t, i) => memo.set(t, read[i]!));
  return take(memo, texts);
}

/** Each reply's vector: the unit mean of its clauses' vectors (core/novelty.ts `meanVector`). */
export async function replyVectorsOf(db: Db, embedder: Embedder, replies: readonly string[]): Promise<Float32Array[]> {
  const memo = memoOf(keptReplies, embedder);
  const missing = [...new Set(replies.filter((r) => !memo.has(r)))];
  const clauses = missing.map(meaningClauses);
  const vectors = await vectorsOf(db, embedder, clauses.flat());
  let at = 0;
  missing.forEach((r, i) => memo.set(r, meanVector(vectors.slice(at, (at += clauses[i]!.length)))));
  return take(memo, replies);
}
