/**
 * Choosing a context's parts by meaning, on hand-made unit vectors: the pure rules of
 * core/relevance.ts (diverse sample, relevance ranking, token budget) and how core/context.ts
 * applies them to context 3's replies and abstracts and to context 5's results — and that without
 * vectors the context is what it was.
 */
import { describe, expect, it } from 'vitest';
import {
  assembleContext,
  commandResultLines,
  selectAbstracts,
  selectResponses,
  semanticPool,
  type ContextResponse,
  type SemanticQuery,
} from '../../core/context.js';
import {
  diverseOrder,
  estimateTokens,
  fitBudget,
  rankByRelevance,
  relevance,
  selectionDefaults,
} from '../../core/relevance.js';
import { contextInput } from '../helpers/context.js';

/** A unit vector at `deg` degrees in the plane (cosine of two: the cosine of their angle). */
const at = (deg: number) => [Math.cos((deg * Math.PI) / 180), Math.sin((deg * Math.PI) / 180)];
const item = (id: number, deg: number) => ({ id, v: at(deg) });
const vOf = (x: { v: number[] }) => x.v;

describe('the rules', () => {
  it('estimates tokens as ceil(chars / 4)', () => {
    expect([estimateTokens(''), estimateTokens('abcd'), estimateTokens('abcde')]).toEqual([0, 1, 2]);
  });

  it('relevance is the highest cosine to any query vector, 0 with no query', () => {
    expect(relevance(at(0), [at(90), at(60)])).toBeCloseTo(0.5, 6);
    expect(relevance(at(0), [])).toBe(0);
  });

  it('the diverse order starts at the newest and each next pick is farthest from those picked', () => {
    // Two near-duplicates of topic 0°, one of 90°, one of 180°.
    const c = [item(1, 0), item(2, 2), item(3, 90), item(4, 180), item(5, 1)];
    expect(diverseOrder(c, vOf, 3).map((x) => x.id)).toEqual([1, 4, 3]);
    expect(diverseOrder(c, vOf, 10).map((x) => x.id)).toHaveLength(5);
    expect(diverseOrder([], vOf, 3)).toEqual([]);
    expect(diverseOrder(c, vOf, 0)).toEqual([]);
  });

  it('breaks ties the same way every time: the earlier candidate in the given order', () => {
    // [0, -1] and [0, 1] are equally far from [1, 0] (cosine exactly 0): the one given first wins, whatever the ids.
    const c = [
      { id: 9, v: [1, 0] },
      { id: 7, v: [0, -1] },
      { id: 8, v: [0, 1] },
    ];
    expect(diverseOrder(c, vOf, 2).map((x) => x.id)).toEqual([9, 7]);
    expect(diverseOrder([c[0]!, c[2]!, c[1]!], vOf, 2).map((x) => x.id)).toEqual([9, 8]);
  });

  it('ranks by relevance; equal scores keep the given order', () => {
    const c = [item(1, 80), item(2, 10), item(3, 10), item(4, 45)];
    expect(rankByRelevance(c, vOf, [at(0)]).map((x) => x.id)).toEqual([2, 3, 4, 1]);
    expect(rankByRelevance(c, vOf, []).map((x) => x.id)).toEqual([1, 2, 3, 4]);
  });

  it('fits a budget in rank order: the first always, then each that still fits, at most max', () => {
    const cost = (x: { t: number }) => x.t;
    const c = [
      { id: 1, t: 50 },
      { id: 2, t: 40 },
      { id: 3, t: 30 },
      { id: 4, t: 10 },
    ];
    expect(fitBudget(c, cost, 100).map((x) => x.id)).toEqual([1, 2, 4]);
    expect(fitBudget(c, cost, 10).map((x) => x.id)).toEqual([1]);
    expect(fitBudget(c, cost, 1000, 2).map((x) => x.id)).toEqual([1, 2]);
    expect(fitBudget([], cost, 100)).toEqual([]);
  });
});

const reply = (id: number, deg: number | undefined, extra: Partial<ContextResponse> = {}): ContextResponse => ({
  id,
  tick: id,
  content: `reply ${id} ${'x'.repeat(100)}`,
  tags: [],
  emotions: [],
  ...(deg === undefined ? {} : { vector: at(deg) }),
  ...extra,
});
const ids = (rs: Array<{ id: number }>) => rs.map((r) => r.id).sort((a, b) => a - b);
const query = (goals: number[], tags: number[] = [], emotions: number[] = []): SemanticQuery => ({
  goals: goals.map(at),
  tags: tags.map(at),
  emotions: emotions.map(at),
});

describe("context 3's replies by meaning", () => {
  // Ticks 1–12: topics at 0° (1–4), 90° (5–8), 180° (9–12), each with tiny variations.
  const topics = Array.from({ length: 12 }, (_, i) => reply(i + 1, Math.floor(i / 4) * 90 + (i % 4)));

  it('meditation shows one reply of each topic, where the even spread shows two of one', () => {
    const diverse = selectResponses(topics, 'meditation', 3, undefined, query([]));
    expect(new Set(diverse.map((r) => Math.floor((r.id - 1) / 4)))).toEqual(new Set([0, 1, 2]));
    expect(diverse[0]!.id).toBe(12);
    const plain = topics.map(({ vector: _v, ...r }) => r);
    const even = selectResponses(plain, 'meditation', 4);
    expect(ids(even)).toEqual([1, 5, 8, 12]);
    expect(new Set(even.map((r) => Math.floor((r.id - 1) / 4))).size).toBe(3);
  });

  it('meditation gives the same sample for the same input, in any given order', () => {
    const a = selectResponses(topics, 'meditation', 5, undefined, query([]));
    const b = selectResponses([...topics].reverse(), 'meditation', 5, undefined, query([]));
    expect(a.map((r) => r.id)).toEqual(b.map((r) => r.id));
  });

  it('concentration on a goal keeps the related replies and leaves out the unrelated', () => {
    const shown = selectResponses(topics, 'concentration', 5, undefined, query([90]));
    expect(ids(shown)).toEqual([5, 6, 7, 8]);
    // Without vectors and without a filter, concentration was simply the last K.
    expect(
      ids(
        selectResponses(
          topics.map(({ vector: _v, ...r }) => r),
          'concentration',
          5,
        ),
      ),
    ).toEqual([8, 9, 10, 11, 12]);
  });

  it('concentration by tag: the tag itself, or a text close to it; by emotion: at the threshold or above', () => {
    const rs = [
      reply(1, 0, { tags: ['garden'] }),
      reply(2, 3),
      reply(3, 90),
      reply(4, 180, { emotions: [{ emotion: 'joy', strength: selectionDefaults.minEmotionStrength }] }),
      reply(5, 181, { emotions: [{ emotion: 'joy', strength: 1 }] }),
    ];
    const byTag = selectResponses(rs, 'concentration', 5, { tags: ['garden'] }, query([], [5]));
    expect(ids(byTag)).toEqual([1, 2]);
    const byEmotion = selectResponses(rs, 'concentration', 5, { emotions: ['joy'] }, query([], [], [200]));
    expect(ids(byEmotion)).toEqual([4]);
    // Today's rule (no vectors) counts any reading of the emotion, however weak.
    const plain = rs.map(({ vector: _v, ...r }) => r);
    expect(ids(selectResponses(plain, 'concentration', 5, { emotions: ['joy'] }))).toEqual([4, 5]);
  });

  it('standard: the newest, then the most relevant, within the budget; a smaller budget shows fewer', () => {
    const line = estimateTokens(`- tick 1: ${topics[0]!.content}`);
    const wide = selectResponses(topics, 'standard', 2, undefined, query([0]), 100 * line);
    // At most 2K (4): the newest (12) and the three closest to 0° (ticks 1–3).
    expect(ids(wide)).toEqual([1, 2, 3, 12]);
    const narrow = selectResponses(topics, 'standard', 3, undefined, query([0]), 3 * line);
    expect(ids(narrow)).toEqual([1, 2, 12]);
    // Shown newest first, like the last-K rule.
    expect(narrow.map((r) => r.id)).toEqual([12, 2, 1]);
    // No goals: the newest within the budget.
    expect(ids(selectResponses(topics, 'standard', 3, undefined, query([]), 2 * line))).toEqual([11, 12]);
  });

  it("meditation's pool: at most its size, the newest and every 2^n-th tick, the same as the history grows", () => {
    const history = (n: number) => Array.from({ length: n }, (_, i) => reply(i + 1, 0));
    const pool = semanticPool(history(500), 'meditation');
    expect(pool.length).toBeLessThanOrEqual(selectionDefaults.meditationPool);
    expect(pool[0]!.tick).toBe(500);
    expect(pool.slice(1).every((r) => r.tick % 4 === 0)).toBe(true);
    // One tick later, all but the newest are the same replies (so their vectors are cached).
    const next = semanticPool(history(501), 'meditation');
    const before = new Set(pool.map((r) => r.id));
    expect(next.slice(1).filter((r) => !before.has(r.id))).toEqual([]);
    expect(semanticPool(history(30), 'meditation')).toHaveLength(30);
    expect(semanticPool(history(500), 'standard')).toHaveLength(500);
  });

  it('empty input and K = 0 show nothing', () => {
    expect(selectResponses([], 'meditation', 3, undefined, query([0]))).toEqual([]);
    expect(selectResponses(topics, 'standard', 0, undefined, query([0]))).toEqual([]);
  });

  it('a candidate without a vector means the part is chosen as without embeddings', () => {
    const mixed = [...topics.slice(0, 11), reply(12, undefined)];
    expect(ids(selectResponses(mixed, 'concentration', 3, undefined, query([90])))).toEqual([10, 11, 12]);
  });
});

describe('abstracts and context 5 by meaning', () => {
  const abstracts = [0, 90, 180, 270, 5].map((deg, i) => ({
    id: 10 - i,
    title: `abstract ${10 - i}`,
    summary: 's'.repeat(200),
    vector: at(deg),
  }));

  it('abstracts: the newest three without vectors; by meaning the most relevant first within the budget', () => {
    expect(selectAbstracts(abstracts).map((a) => a.id)).toEqual([10, 9, 8]);
    const cost = estimateTokens(`- #10 abstract 10: ${'s'.repeat(200)}`);
    expect(selectAbstracts(abstracts, query([0]), 2 * cost).map((a) => a.id)).toEqual([10, 6]);
    expect(selectAbstracts(abstracts, query([180]), cost).map((a) => a.id)).toEqual([8]);
    expect(selectAbstracts([], query([0]))).toEqual([]);
  });

  it('context 5: every result while they fit; over the budget the most relevant keep their text', () => {
    const results = [0, 90, 180].map((deg, i) => ({
      cmdId: `c${i}`,
      type: 'memory.search',
      status: 'applied',
      text: `found ${'r'.repeat(400)}`,
      vector: at(deg),
    }));
    expect(commandResultLines(results, query([180]))).toEqual(commandResultLines(results));
    const lines = commandResultLines(results, query([180]), 120);
    expect(lines).toHaveLength(3);
    expect(lines[2]).toContain('rrrr');
    expect(lines[0]).toMatch(/^- c0 memory.search \[applied\]: \(text left out/);
    expect(lines[1]).not.toContain('rrrr');
  });
});

describe('the assembled context', () => {
  const base = contextInput({
    tick: 20,
    responses: Array.from({ length: 12 }, (_, i) => reply(i + 1, Math.floor(i / 4) * 90 + (i % 4))),
    goals: [{ id: 1, title: 'the 90° topic', priority: 1, status: 'active' }],
    contextMode: 'concentration',
  });

  const thoughts = (c: ReturnType<typeof assembleContext>) =>
    c.messages[1]!.content.split('## Context 3')[1]!.split('## Context 4')[0]!;

  it('without a semantic query the vectors change nothing: the context is as without embeddings', () => {
    const plain = { ...base, responses: base.responses.map(({ vector: _v, ...r }) => r) };
    expect(assembleContext(base)).toEqual(assembleContext(plain));
    expect(thoughts(assembleContext(base))).not.toContain('by meaning');
  });

  it('with one, the agent sees the replies about its goal, says so, and the same on a retry', () => {
    const semantic = query([90]);
    const c = assembleContext({ ...base, semantic });
    expect(ids(c.shown.responses.map((id) => ({ id })))).toEqual([5, 6, 7, 8]);
    expect(thoughts(c)).toContain('(concentration, 4, by meaning)');
    expect(thoughts(c)).toContain('- tick 5: reply 5');
    expect(thoughts(c)).not.toContain('- tick 12:');
    expect(assembleContext({ ...base, semantic })).toEqual(c);
    // The stable prefix does not depend on it.
    expect(c.messages[0]).toEqual(assembleContext(base).messages[0]);
  });
});
