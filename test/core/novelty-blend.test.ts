/**
 * Novelty by meaning, its pure parts: the clauses a reply is cut into, the least explained
 * clause's similarity, the blend with the lexical similarity, the ROC AUC the labelled set is
 * scored with, and the labelled set's own shape.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { noveltyPairsFile, noveltyScores, parseNoveltyPairs, rocAuc } from '../../core/novelty-eval.js';
import {
  blendSimilarity,
  clauseSimilarity,
  combineNovelty,
  lexicalSimilarity,
  noveltyCalibration,
  noveltyFromSimilarity,
  replyClauses,
} from '../../core/novelty.js';

describe('replyClauses', () => {
  it('cuts at punctuation and at the conjunctions that join a second thought', () => {
    expect(replyClauses('The cache evicts old entries fine; the leak comes from listeners never removed.')).toEqual([
      'The cache evicts old entries fine',
      'the leak comes from listeners never removed',
    ]);
    expect(replyClauses('I will read the logs because the build failed twice')).toEqual([
      'I will read the logs',
      'the build failed twice',
    ]);
  });

  it('drops pieces shorter than minWords, and keeps the whole text when none is long enough', () => {
    expect(replyClauses('Yes, I agree, the plan holds.')).toEqual(['the plan holds']);
    expect(replyClauses('Fine. Done.')).toEqual(['Fine. Done.']);
  });
});

describe('clauseSimilarity', () => {
  const a = [1, 0, 0];
  const b = [0, 1, 0];
  const c = [0, 0, 1];
  it('is the least explained clause: one clause near nothing makes the reply new', () => {
    expect(clauseSimilarity([a, b], [a, b])).toBeCloseTo(1);
    expect(clauseSimilarity([a, c], [a, b])).toBeCloseTo(0);
    expect(clauseSimilarity([[1, 1, 0]], [a])).toBeCloseTo(Math.SQRT1_2);
  });
  it('is 0 with nothing before', () => {
    expect(clauseSimilarity([a], [])).toBe(0);
  });
});

describe('blendSimilarity', () => {
  const { semantic, lexical } = noveltyCalibration;
  it('reads a paraphrase (high meaning, few shared words) as the same thing', () => {
    expect(blendSimilarity(semantic.high, 0.1)).toBe(1);
    expect(noveltyFromSimilarity(blendSimilarity(0.55, 0.15))).toBeLessThan(35);
  });
  it('reads the same sentence with a detail changed (high word overlap) as the same thing', () => {
    expect(blendSimilarity(0.05, lexical.high)).toBe(1);
  });
  it('leaves unrelated text new', () => {
    expect(blendSimilarity(semantic.low, lexical.low)).toBe(0);
    expect(noveltyFromSimilarity(blendSimilarity(0.2, 0.1))).toBeGreaterThan(70);
  });
  it('is in [0, 1] and never decreases in either similarity', () => {
    fc.assert(
      fc.property(
        fc.double({ min: -1, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 0.5, noNaN: true }),
        (s, l, d) => {
          const x = blendSimilarity(s, l);
          expect(x).toBeGreaterThanOrEqual(0);
          expect(x).toBeLessThanOrEqual(1);
          expect(blendSimilarity(s + d, l)).toBeGreaterThanOrEqual(x);
          expect(blendSimilarity(s, Math.min(1, l + d))).toBeGreaterThanOrEqual(x);
        },
      ),
    );
  });
  it("keeps combineNovelty's contract: identical scores 0, always an integer 0..100", () => {
    fc.assert(
      fc.property(
        fc.double({ min: -1, max: 1, noNaN: true }),
        fc.string(),
        fc.option(fc.integer({ min: -50, max: 150 })),
        (s, text, llm) => {
          const lex = lexicalSimilarity(text, text);
          expect(combineNovelty(noveltyFromSimilarity(blendSimilarity(s, lex)), llm, lex)).toBe(0);
          const other = lexicalSimilarity(text, `${text} and something else entirely`);
          const n = combineNovelty(noveltyFromSimilarity(blendSimilarity(s, other)), llm, other);
          expect(Number.isInteger(n) && n >= 0 && n <= 100).toBe(true);
        },
      ),
    );
  });
});

describe('rocAuc', () => {
  it('is 1 for a perfect ranking, 0 for a reversed one, 0.5 for all ties', () => {
    expect(rocAuc([0.9, 0.8, 0.1, 0.2], [true, true, false, false])).toBe(1);
    expect(rocAuc([0.1, 0.2, 0.9, 0.8], [true, true, false, false])).toBe(0);
    expect(rocAuc([1, 1, 1, 1], [true, false, true, false])).toBe(0.5);
    expect(rocAuc([1, 2], [true, true])).toBeNaN();
  });
  it('equals the share of (positive, negative) pairs ranked right, ties counting half', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 5 }), fc.boolean()), { maxLength: 40 }), (xs) => {
        const scores = xs.map((x) => x[0]);
        const pos = xs.map((x) => x[1]);
        let won = 0;
        let n = 0;
        for (let i = 0; i < xs.length; i++)
          for (let j = 0; j < xs.length; j++)
            if (pos[i] && !pos[j]) {
              n++;
              won += scores[i]! > scores[j]! ? 1 : scores[i] === scores[j] ? 0.5 : 0;
            }
        const auc = rocAuc(scores, pos);
        if (n === 0) expect(auc).toBeNaN();
        else expect(auc).toBeCloseTo(won / n, 10);
      }),
    );
  });
});

describe('the labelled set', () => {
  const pairs = parseNoveltyPairs(readFileSync(join(import.meta.dirname, '..', '..', noveltyPairsFile), 'utf8'));
  it('has at least 150 distinct pairs of every kind, labelled by the documented rule', () => {
    expect(pairs.length).toBeGreaterThanOrEqual(150);
    expect(new Set(pairs.map((p) => `${p.previous.join('|')}>${p.reply}`)).size).toBe(pairs.length);
    const count = (kind: string) => pairs.filter((p) => p.kind === kind).length;
    for (const kind of ['paraphrase', 'small-change', 'near-miss', 'new']) expect(count(kind)).toBeGreaterThan(20);
    // Paraphrases and small changes are not novel; a near-miss (same words, another idea) and a new idea are.
    for (const p of pairs) expect(p.novel).toBe(p.kind === 'near-miss' || p.kind === 'new');
  });
  it('is where the lexical score fails: a paraphrase shares few words with what it repeats', () => {
    // Vectors that only know the label would make every score perfect; the lexical one needs none.
    const scores = noveltyScores(pairs, () => [1]);
    const paraphrases = pairs.flatMap((p, i) => (p.kind === 'paraphrase' ? [scores.today[i]!] : []));
    expect(paraphrases.filter((n) => n >= 50).length).toBeGreaterThan(paraphrases.length / 2);
  });
  it('refuses a malformed line, naming it', () => {
    expect(() => parseNoveltyPairs('{"kind":"new","novel":true,"previous":[],"reply":"x"}')).toThrow(/line 1/);
  });
});
