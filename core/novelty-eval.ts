/**
 * How well a novelty score tells novel replies from repeated ones, on a labelled set of
 * (previous replies, new reply, novel or not) pairs: the area under the ROC curve of three
 * scores. `today`: the lexical novelty the tick uses without an embedder (the LLM mini-prompt's
 * score is not part of it: it needs a model); `semantic`: the highest cosine of the reply's vector
 * (the mean of its clauses') to the previous replies'; `blend`: the tick's novelty with an embedder (blendSimilarity). The
 * vectors come from an embed function the caller passes (the offline embedder in the tests and
 * the benchmark), so this file does no I/O.
 */
import { z } from 'zod';
import {
  blendSimilarity,
  clauseSimilarity,
  embeddingSimilarity,
  earlierMeaningVectors,
  maxSimilarity,
  meaningClauses,
  meanVector,
  noveltyFromSimilarity,
} from './novelty.js';

/** Where the labelled set lives, from the repository root. */
export const noveltyPairsFile = 'test/fixtures/novelty-pairs.jsonl';

const pairSchema = z.object({
  kind: z.enum(['paraphrase', 'small-change', 'near-miss', 'new']),
  novel: z.boolean(),
  previous: z.array(z.string().min(1)).min(1),
  reply: z.string().min(1),
});
export type NoveltyPair = z.infer<typeof pairSchema>;

/** The labelled set from its JSON Lines text (one pair per non-empty line); throws naming the bad line. */
export function parseNoveltyPairs(jsonl: string): NoveltyPair[] {
  return jsonl
    .split('\n')
    .map((line, i) => ({ line: line.trim(), n: i + 1 }))
    .filter((l) => l.line.length > 0)
    .map(({ line, n }) => {
      const r = pairSchema.safeParse(JSON.parse(line));
      if (!r.success) throw new Error(`novelty pair on line ${n}: ${r.error.issues[0]?.message ?? 'invalid'}`);
      return r.data;
    });
}

/**
 * Area under the ROC curve: the probability that a random positive scores above a random
 * negative (ties count half). NaN when either class is empty.
 */
export function rocAuc(scores: readonly number[], positive: readonly boolean[]): number {
  if (scores.length !== positive.length) throw new Error(`${scores.length} scores for ${positive.length} labels`);
  // Mann–Whitney U through average ranks: O(n log n), ties share their mean rank.
  const order = scores.map((s, i) => ({ s, p: positive[i]! })).sort((a, b) => a.s - b.s);
  let rankSum = 0;
  let nPos = 0;
  for (let i = 0; i < order.length;) {
    let j = i;
    while (j < order.length && order[j]!.s === order[i]!.s) j++;
    const meanRank = (i + 1 + j) / 2;
    for (let k = i; k < j; k++) if (order[k]!.p) ((rankSum += meanRank), nPos++);
    i = j;
  }
  const nNeg = order.length - nPos;
  if (nPos === 0 || nNeg === 0) return Number.NaN;
  return (rankSum - (nPos * (nPos + 1)) / 2) / (nPos * nNeg);
}

/** Every text the scores need a vector for: replies, previous replies, and their clauses. */
export function noveltyTexts(pairs: readonly NoveltyPair[]): string[] {
  return [...new Set(pairs.flatMap((p) => [...meaningClauses(p.reply), ...p.previous.flatMap(meaningClauses)]))];
}

export interface NoveltyScores {
  /** Novelty 0–100 of each pair, as each method scores it. */
  today: number[];
  semantic: number[];
  blend: number[];
}

/** The three novelty scores of each pair, given each text's vector. */
export function noveltyScores(
  pairs: readonly NoveltyPair[],
  vectorOf: (text: string) => ArrayLike<number>,
): NoveltyScores {
  const out: NoveltyScores = { today: [], semantic: [], blend: [] };
  for (const p of pairs) {
    const lexical = maxSimilarity(p.reply, p.previous);
    const reply = meaningClauses(p.reply).map(vectorOf);
    const previous = p.previous.map((q) => meaningClauses(q).map(vectorOf));
    const whole = meanVector(reply);
    const semantic = Math.max(...previous.map((q) => embeddingSimilarity(whole, meanVector(q))));
    const clauses = clauseSimilarity(reply, previous.flatMap(earlierMeaningVectors));
    out.today.push(noveltyFromSimilarity(lexical));
    out.semantic.push(noveltyFromSimilarity(semantic));
    out.blend.push(noveltyFromSimilarity(blendSimilarity(clauses, lexical)));
  }
  return out;
}

export interface NoveltyAucs {
  today: number;
  semantic: number;
  blend: number;
  pairs: number;
  novel: number;
}

/** The three AUCs of the labelled set, embedding its texts once through `embed` (one vector per text, in order). */
export async function noveltyAucs(
  pairs: readonly NoveltyPair[],
  embed: (texts: readonly string[]) => Promise<ArrayLike<number>[]>,
): Promise<NoveltyAucs> {
  const texts = noveltyTexts(pairs);
  const vectors = await embed(texts);
  if (vectors.length !== texts.length) throw new Error(`${vectors.length} vectors for ${texts.length} texts`);
  const byText = new Map(texts.map((t, i) => [t, vectors[i]!]));
  const scores = noveltyScores(pairs, (t) => byText.get(t)!);
  const novel = pairs.map((p) => p.novel);
  return {
    today: rocAuc(scores.today, novel),
    semantic: rocAuc(scores.semantic, novel),
    blend: rocAuc(scores.blend, novel),
    pairs: pairs.length,
    novel: novel.filter(Boolean).length,
  };
}
