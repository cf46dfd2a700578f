/**
 * The pure parts of prompt caching: the stable prefix a tick's context leads with, the Anthropic
 * cache breakpoint on it, and what the ledger charges for cached prompt tokens.
 */
import { describe, expect, it } from 'vitest';
import { anthropicMessages } from '../../activities/llm/providers/anthropic.js';
import { assembleContext, type ContextInput } from '../../core/context.js';
import { cachedInputShare, defaultPrices, llmCost, llmWorstCase } from '../../core/lifeforce.js';

const tickOne: ContextInput = {
  agent: { id: 'ada', name: 'Ada', identity: { persona: 'a careful gardener', values: ['patience'] } },
  tick: 1,
  now: '2026-11-27T18:00:00.000Z',
  systemPrompt: 'You think.',
  ethics: [{ title: 'No harm', rule: 'Never harm a person.', severity: 'hard' }],
  catalogue: '(catalogue)',
  tools: [{ name: 'web_search', description: 'search the web [idle]' }],
  learnings: ['#1 avoid "password" in diary.add commands (confidence 0.61)'],
  responses: [],
  goals: [],
  pinnedTasks: [],
  abstracts: [],
  openProcesses: [],
  commandResults: [],
  notes: [],
  notesMode: 'auto',
  config: { lifeforce: 120 },
  memory: [],
  contextMode: 'standard',
  recentK: 5,
};

/** The next tick: everything per-tick moved on (time, results, notes, a learning's confidence, the LF left). */
const tickTwo: ContextInput = {
  ...tickOne,
  tick: 2,
  now: '2026-11-27T18:00:05.000Z',
  learnings: ['#1 avoid "password" in diary.add commands (confidence 0.64)'],
  responses: [{ id: 7, tick: 1, content: 'I looked around.', tags: [], emotions: [] }],
  commandResults: [{ cmdId: 'c1', type: 'diary.add', status: 'applied', text: 'entry #3 added' }],
  notes: [{ id: 4, source: 'user', priority: 1, tags: [], text: 'hello' }],
  config: { lifeforce: 118.5 },
  focus: 'answer the note',
};

describe('the stable prefix of a tick prompt', () => {
  it('contexts 0–2 are the leading system message, byte-identical across ticks; the rest follows', () => {
    const one = assembleContext(tickOne).messages;
    const two = assembleContext(tickTwo).messages;
    expect(one[0]!.role).toBe('system');
    expect(two[0]!.content).toBe(one[0]!.content);
    const stable = one[0]!.content;
    expect(stable.indexOf('## Context 0 ')).toBe(0);
    expect(stable).toContain('## Context 1 ');
    expect(stable).toContain('Never harm a person.');
    expect(stable).toContain('web_search');
    // The per-tick parts, learnings included, are not in it.
    expect(stable).not.toMatch(/## Context [3-8] |What you have learned|2026-11-27|tick 1/);
    expect(one[1]!.content).toContain('What you have learned:\n- #1 avoid');
    expect(two[1]!.content).toContain('tick 2, time 2026-11-27T18:00:05.000Z');
  });

  it('the prefix changes when identity, ethics, catalogue or tools change', () => {
    const base = assembleContext(tickOne).messages[0]!.content;
    const variants: Array<Partial<ContextInput>> = [
      { agent: { ...tickOne.agent, identity: { persona: 'a bold sailor' } } },
      { ethics: [] },
      { catalogue: '(catalogue v2)' },
      { tools: [{ name: 'web_search', description: 'search the web [running]' }] },
    ];
    for (const v of variants) expect(assembleContext({ ...tickTwo, ...v }).messages[0]!.content).not.toBe(base);
  });
});

describe('the Anthropic cache breakpoint', () => {
  it('marks the leading system message, and only it; later system text and the JSON schema follow unmarked', () => {
    const [system, ...rest] = anthropicMessages(
      [
        { role: 'system', content: 'contexts 0-2' },
        { role: 'system', content: 'a second instruction' },
        { role: 'user', content: 'tick 2' },
      ],
      { type: 'object' },
    );
    expect(system!.getType()).toBe('system');
    const blocks = system!.content as Array<Record<string, unknown>>;
    expect(blocks[0]).toEqual({ type: 'text', text: 'contexts 0-2', cache_control: { type: 'ephemeral' } });
    expect(blocks).toHaveLength(2);
    expect(blocks[1]).not.toHaveProperty('cache_control');
    expect(blocks[1]!.text).toMatch(/^a second instruction\n\nReply with one JSON value only/);
    expect(rest.map((m) => [m.getType(), m.content])).toEqual([['human', 'tick 2']]);
  });

  it('a prompt with no leading system message has no breakpoint', () => {
    const out = anthropicMessages([{ role: 'user', content: 'hi' }], undefined);
    expect(out.map((m) => m.getType())).toEqual(['human']);
  });
});

describe('cached prompt tokens in the ledger', () => {
  const price = { costPer1kInput: 0.003, costPer1kOutput: 0.015 };
  const usage = { promptTokens: 10_000, completionTokens: 500 };

  it('with no cached price a cached token costs what an uncached one does', () => {
    expect(llmCost(defaultPrices, price, { ...usage, cachedPromptTokens: 9000 })).toBe(
      llmCost(defaultPrices, price, usage),
    );
    expect(
      llmCost(defaultPrices, { ...price, costPer1kCachedInput: null }, { ...usage, cachedPromptTokens: 9000 }),
    ).toBe(llmCost(defaultPrices, price, usage));
  });

  it('a cached token costs the cached price, and its computation the same share of an uncached token', () => {
    const cachedPrice = { ...price, costPer1kCachedInput: 0.0003 };
    expect(cachedInputShare(cachedPrice)).toBeCloseTo(0.1, 10);
    // 1000 uncached: 3 LF + 1 LF computation; 9000 cached: 2.7 LF + 0.9 LF; 500 out: 7.5 LF + 0.5 LF.
    expect(llmCost(defaultPrices, cachedPrice, { ...usage, cachedPromptTokens: 9000 })).toBeCloseTo(15.6, 4);
    expect(llmCost(defaultPrices, cachedPrice, usage)).toBeCloseTo(48, 4);
    // Counts the provider could not have cached are bounded by the prompt.
    expect(llmCost(defaultPrices, cachedPrice, { ...usage, cachedPromptTokens: 50_000 })).toBe(
      llmCost(defaultPrices, cachedPrice, { ...usage, cachedPromptTokens: 10_000 }),
    );
  });

  it('the worst case covers a cached price above the input price', () => {
    const dear = { ...price, costPer1kCachedInput: 0.00375 };
    const messages = [{ content: 'x'.repeat(4000) }];
    const bound = llmWorstCase(defaultPrices, dear, messages, 100);
    const prompt = 4000 + 32;
    expect(bound).toBeGreaterThanOrEqual(
      llmCost(defaultPrices, dear, { promptTokens: prompt, completionTokens: 100, cachedPromptTokens: prompt }),
    );
    expect(bound).toBeGreaterThan(llmWorstCase(defaultPrices, price, messages, 100));
  });

  it('the worst case held before a call still assumes nothing is cached', () => {
    const cachedPrice = { ...price, costPer1kCachedInput: 0.0003 };
    const messages = [{ content: 'x'.repeat(4000) }];
    expect(llmWorstCase(defaultPrices, cachedPrice, messages, 100)).toBe(
      llmWorstCase(defaultPrices, price, messages, 100),
    );
  });
});
