/**
 * Novelty maths: a similarity that needs no LLM (lexical n-gram cosine, and where the agent has an
 * embedder, a similarity by meaning blended with it), its novelty score 0–100, and the blend with
 * the LLM's own comparison. The comparison answer parser is tolerant: a malformed answer yields an
 * error string and the word-or-meaning score alone.
 */
import { clipText } from './sanitize.js';
import { clamp01 } from './values.js';
import { formatIssues } from './zod-issues.js';
import { z } from 'zod';

export interface Ideas {
  new: string[];
  refined: string[];
  discarded: string[];
}

/**
 * A reply's reflection: what it brought, in one line a person reads ("new: …; refined: …;
 * discarded: …"), at most `max` characters; null when the novelty check named no idea.
 */
export function reflectionOf(ideas: Ideas, max = 1000): string | null {
  const part = (label: string, list: readonly string[]) => (list.length ? `${label}: ${list.join('; ')}` : '');
  const text = [part('new', ideas.new), part('refined', ideas.refined), part('discarded', ideas.discarded)]
    .filter(Boolean)
    .join(' · ');
  if (!text) return null;
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** Lower-cased word tokens (letters and digits of any script). */
function tokenize(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter((w) => w.length > 0);
}

/** Unigram + bigram counts. */
function features(text: string): Map<string, number> {
  const words = tokenize(text);
  const f = new Map<string, number>();
  for (let i = 0; i < words.length; i++) {
    f.set(words[i]!, (f.get(words[i]!) ?? 0) + 1);
    if (i + 1 < words.length) {
      const bi = `${words[i]} ${words[i + 1]}`;
      f.set(bi, (f.get(bi) ?? 0) + 1);
    }
  }
  return f;
}

/**
 * Lexical similarity in [0, 1]: cosine of unigram+bigram counts. Symmetric; 1 for texts with
 * the same words in the same order; two empty texts are identical (1), empty vs non-empty 0.
 */
export function lexicalSimilarity(a: string, b: string): number {
  const fa = features(a);
  const fb = features(b);
  if (fa.size === 0 && fb.size === 0) return 1;
  if (fa.size === 0 || fb.size === 0) return 0;
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (const [k, v] of fa) {
    na += v * v;
    const w = fb.get(k);
    if (w) dot += v * w;
  }
  for (const v of fb.values()) nb += v * v;
  return clamp01(dot / Math.sqrt(na * nb));
}

/** Cosine similarity of two embeddings, mapped to [0, 1] (negative cosine counts as 0). */
export function embeddingSimilarity(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length === 0 || a.length !== b.length) return 0;
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  if (na === 0 || nb === 0) return 0;
  return clamp01(dot / Math.sqrt(na * nb));
}

/** The vector scaled to unit length (all zeros stays all zeros). */
export function normalize(v: ArrayLike<number>): Float32Array {
  let n = 0;
  for (let i = 0; i < v.length; i++) n += v[i]! * v[i]!;
  const out = Float32Array.from(v);
  if (n === 0) return out;
  const inv = 1 / Math.sqrt(n);
  for (let i = 0; i < out.length; i++) out[i] = out[i]! * inv;
  return out;
}

/** The highest similarity of `text` to any previous reply (0 with none). */
export function maxSimilarity(
  text: string,
  previous: readonly string[],
  sim: (a: string, b: string) => number = lexicalSimilarity,
): number {
  let best = 0;
  for (const p of previous) best = Math.max(best, sim(text, p));
  return best;
}

/**
 * A reply cut into its clauses (at sentence and clause punctuation and at the conjunctions that
 * join a second thought: so, because, but, instead, rather than, which, while, since, then), each
 * of at least `minWords` words; the whole text when no piece is that long. A new idea usually
 * arrives as one clause beside old words, so each clause is compared on its own.
 */
export function replyClauses(text: string, minWords = 3): string[] {
  const pieces = text
    .split(clauseBreak)
    .map((s) => s.trim())
    .filter((s) => tokenize(s).length >= minWords);
  return pieces.length > 0 ? pieces : [text];
}
const clauseBreak =
  /[.;:!?,()\u2014\u2013]+|\s(?:so|because|but|instead|rather than|and then|which|while|since|after all|then)\s/i;

/** A reply is cut to this many characters before its clauses are compared by meaning (as the novelty mini-prompt cuts it). */
export const meaningTextChars = 2000;

/** What is embedded of a reply: the clauses of its first `meaningTextChars` characters. */
export function meaningClauses(reply: string): string[] {
  return replyClauses(clipText(reply, meaningTextChars));
}

/**
 * A reply's vector: the unit-length mean of its clauses' vectors (`meaningClauses`). It stands for
 * the whole clipped reply, where the embedder itself reads only a text's first 256 tokens, and
 * costs no embedding beyond the clauses the novelty check embeds anyway. Empty with no vector.
 */
export function meanVector(vectors: ReadonlyArray<ArrayLike<number>>): Float32Array {
  const sum = new Float32Array(vectors[0]?.length ?? 0);
  for (const v of vectors) for (let i = 0; i < sum.length; i++) sum[i]! += v[i]!;
  return normalize(sum);
}

/** What an earlier reply is compared with: its vector (`meanVector`) and its clauses' vectors. */
export function earlierMeaningVectors(clauses: ReadonlyArray<ArrayLike<number>>): ArrayLike<number>[] {
  return [meanVector(clauses), ...clauses];
}

/**
 * Similarity by meaning in [0, 1]: the LEAST explained clause of the reply, i.e. the minimum over
 * the reply's clause vectors of each one's highest cosine to any previous vector (previous
 * replies and their clauses). A paraphrase has every clause near something said before; a new
 * idea in old words has one clause near nothing. 0 with no previous vector, 1 with no clause.
 */
export function clauseSimilarity(
  clauses: ReadonlyArray<ArrayLike<number>>,
  previous: ReadonlyArray<ArrayLike<number>>,
): number {
  if (previous.length === 0) return 0;
  let least = 1;
  for (const c of clauses) {
    let best = 0;
    for (const p of previous) best = Math.max(best, embeddingSimilarity(c, p));
    least = Math.min(least, best);
  }
  return least;
}

/**
 * How the two similarities are read as "the same thing again" (0..1), fitted on the labelled
 * replies of test/fixtures/novelty-pairs.jsonl: a clause cosine of all-MiniLM-L6-v2 at or below
 * `semantic.low` is unrelated and at or above `semantic.high` says the same; word overlap counts
 * only from `lexical.low` (the same sentence with a detail changed) up to `lexical.high`.
 */
export const noveltyCalibration = {
  semantic: { low: 0.1, high: 0.6 },
  lexical: { low: 0.55, high: 0.8 },
} as const;

const ramp = (x: number, r: { low: number; high: number }) => clamp01((x - r.low) / (r.high - r.low));

/**
 * The blended similarity in [0, 1]: the larger of the calibrated meaning similarity
 * (clauseSimilarity) and the calibrated word similarity. Meaning catches a paraphrase in other
 * words; words catch the same sentence with a number changed, where one short clause of filler
 * ("as I noted") would otherwise look new.
 */
export function blendSimilarity(semantic: number, lexical: number): number {
  return Math.max(ramp(semantic, noveltyCalibration.semantic), ramp(lexical, noveltyCalibration.lexical));
}

/** Novelty 0–100 from a similarity 0–1 (100 = nothing alike). */
export function noveltyFromSimilarity(similarity: number): number {
  return Math.round(100 * (1 - clamp01(similarity)));
}

/** Similarity at or above which a reply counts as identical (not stored again). */
export const identicalSimilarity = 0.999;

/**
 * The tick's novelty: the LLM's score blended with the one that needs no LLM (`lexical`: the
 * novelty of blendSimilarity where the agent has an embedder, else of the lexical similarity),
 * weight `llmWeight` on the LLM. An identical reply (lexical `similarity` ≥ identicalSimilarity)
 * scores 0 whatever the LLM says; with no LLM score the other stands alone. Always an integer in
 * [0, 100].
 */
export function combineNovelty(lexical: number, llm: number | null, similarity: number, llmWeight = 0.5): number {
  if (similarity >= identicalSimilarity) return 0;
  const lex = clampScore(lexical);
  if (llm === null || !Number.isFinite(llm)) return lex;
  const w = clamp01(llmWeight);
  return Math.round(w * clampScore(llm) + (1 - w) * lex);
}

const stringList = z
  .array(z.unknown())
  .catch([])
  .transform((xs) =>
    xs
      .filter((x): x is string => typeof x === 'string' && x.trim().length > 0)
      .map((x) => x.trim().slice(0, 200))
      .slice(0, 20),
  );

const noveltyAnswer = z.object({
  novelty: z.coerce.number().min(0).max(100),
  new: stringList.optional(),
  refined: stringList.optional(),
  discarded: stringList.optional(),
  tags: stringList.optional(),
});

type NoveltyAnswer = { ok: true; novelty: number; ideas: Ideas; tags: string[] } | { ok: false; error: string };

/** The comparison mini-prompt's answer format. */
export const noveltyFormatInstructions =
  'Compare the NEW reply with the PREVIOUS replies. Answer with one JSON object only: {"novelty": 0-100, "new": ["idea"], "refined": ["idea"], "discarded": ["idea"], "tags": ["tag"]}.';

/** Parse the comparison answer: the first JSON object in the text. Never throws. */
export function parseNoveltyAnswer(text: string): NoveltyAnswer {
  const src = typeof text === 'string' ? text : '';
  const start = src.indexOf('{');
  const end = src.lastIndexOf('}');
  if (start < 0 || end <= start) return { ok: false, error: 'no JSON object in the novelty answer' };
  let raw: unknown;
  try {
    raw = JSON.parse(src.slice(start, end + 1));
  } catch (err) {
    return { ok: false, error: `novelty answer is not JSON: ${(err as Error).message.slice(0, 120)}` };
  }
  const r = noveltyAnswer.safeParse(raw);
  if (!r.success) return { ok: false, error: `novelty answer: ${formatIssues(r.error, 'answer').slice(0, 200)}` };
  const tags = [...new Set((r.data.tags ?? []).map((t) => t.toLowerCase().replace(/\s+/g, '_').slice(0, 40)))];
  return {
    ok: true,
    novelty: Math.round(r.data.novelty),
    ideas: { new: r.data.new ?? [], refined: r.data.refined ?? [], discarded: r.data.discarded ?? [] },
    tags,
  };
}

function clampScore(x: number): number {
  return Number.isFinite(x) ? Math.round(Math.min(100, Math.max(0, x))) : 0;
}

/** The short record that replaces an identical reply; its row keeps the hash of the reply it stands for. */
export const identicalPlaceholder = (tick: number) =>
  `[identical to tick ${tick}; not stored again — anti-stagnation reflex fired]`;
/** A LIKE pattern matching the placeholders (to leave them out of a query). */
export const placeholderLike = '[identical to tick %; not stored again%';
const placeholderRe = /^\[identical to tick (\d+); not stored again/;
/** The tick whose reply a placeholder stands for (always a real reply), or null for a real reply. */
export function placeholderTick(content: string): number | null {
  const m = placeholderRe.exec(content);
  return m ? Number(m[1]) : null;
}
