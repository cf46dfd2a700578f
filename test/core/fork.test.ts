/**
 * The pure part of successor forks: input validation, the canonical patch form, the verdict
 * rules, and the two abstracts strategies with their quality measures.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  keywordClusterDigest,
  makeAbstractDraft,
  measureAbstract,
  recencyDigest,
  type AbstractQuality,
} from '../../core/abstracts.js';
import { configKeys, validateConfigValue } from '../../core/catalogue.js';
import {
  budgetVerdict,
  canonicalJson,
  decideAbstractsVerdict,
  decideToolVerdict,
  forkAgentIdOf,
  forkBudgetSchema,
  successorForkInputSchema,
  toolRunBudget,
  toolRunCaps,
} from '../../core/fork.js';
import { agentIdSchema } from '../../core/ids.js';
import { replyFor } from '../helpers/fork-fixture.js';

const q = (over: Partial<AbstractQuality> = {}): AbstractQuality => ({
  coverage: 0.4,
  compressionRatio: 0.3,
  novelty: 0.9,
  tokens: 150,
  ...over,
});

describe('successor fork input', () => {
  it('fills the default budgets (1 h, $5, 10 GB, 2 CPUs, 24 h gate)', () => {
    const p = successorForkInputSchema.parse({
      agentId: 'a1',
      patch: { kind: 'strategy', strategy: 'keyword_cluster' },
      evaluation: { kind: 'abstracts_replay' },
    });
    expect(p.budget).toEqual({ wallMs: 3_600_000, costUsd: 5, diskBytes: 10 * 1024 ** 3, cpus: 2 });
    expect(p.approvalDeadlineMs).toBe(24 * 3_600_000);
    expect(p.evaluation).toEqual({ kind: 'abstracts_replay', lastN: 60, window: 10, judge: false });
  });

  it('names every bad field', () => {
    const r = successorForkInputSchema.safeParse({
      agentId: 'no/slash',
      patch: { kind: 'strategy', strategy: 'zip' },
      evaluation: { kind: 'vibes' },
      budget: { wallMs: -1 },
    });
    expect(r.success).toBe(false);
    const paths = r.error!.issues.map((i) => i.path.join('.'));
    expect(paths).toEqual(expect.arrayContaining(['agentId', 'patch.strategy', 'evaluation.kind', 'budget.wallMs']));
  });

  it('rejects unknown patch kinds and extra keys', () => {
    expect(
      successorForkInputSchema.safeParse({
        agentId: 'a',
        patch: { kind: 'module', code: 'x' },
        evaluation: { kind: 'tool_tests' },
      }).success,
    ).toBe(false);
    expect(
      successorForkInputSchema.safeParse({
        agentId: 'a',
        patch: { kind: 'prompt', content: 'x', extra: 1 },
        evaluation: { kind: 'abstracts_replay' },
      }).success,
    ).toBe(false);
  });

  it('takes an optional CPU-time budget (whole seconds ≥ 1)', () => {
    expect(forkBudgetSchema.parse({ cpuSeconds: 30 })).toMatchObject({ cpuSeconds: 30, cpus: 2 });
    expect(forkBudgetSchema.parse({}).cpuSeconds).toBeUndefined();
    expect(forkBudgetSchema.safeParse({ cpuSeconds: 0 }).success).toBe(false);
    expect(forkBudgetSchema.safeParse({ cpuSeconds: 1.5 }).success).toBe(false);
  });

  it('a fork agent id is a valid agent id for the longest fork id', () => {
    expect(agentIdSchema.safeParse(forkAgentIdOf('f'.repeat(61))).success).toBe(true);
  });
});

describe('canonicalJson', () => {
  it('sorts keys at every level, so equal patches hash equally', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, { z: 1, y: 2 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[2,{"y":2,"z":1}]},"b":1}',
    );
    const h = (x: unknown) => createHash('sha256').update(canonicalJson(x)).digest('hex');
    expect(h({ kind: 'strategy', strategy: 'keyword_cluster', target: 'abstracts' })).toBe(
      h({ target: 'abstracts', strategy: 'keyword_cluster', kind: 'strategy' }),
    );
  });

  it('round-trips: parsing the canonical form gives the same value (property)', () => {
    fc.assert(fc.property(fc.jsonValue(), (v) => canonicalJson(JSON.parse(canonicalJson(v))) === canonicalJson(v)));
  });
});

describe('verdict rules', () => {
  it('APPROVE: coverage up ≥ 5 pts at ≤ 1.1× tokens, novelty kept', () => {
    const d = decideAbstractsVerdict({ baseline: q(), candidate: q({ coverage: 0.9, tokens: 140 }), samples: 3 });
    expect(d.verdict).toBe('APPROVE');
    expect(d.confidence).toBeGreaterThan(0.5);
    expect(d.confidence).toBeLessThanOrEqual(0.95);
  });
  it('REJECT: coverage down ≥ 5 pts, or tokens ×1.5', () => {
    expect(decideAbstractsVerdict({ baseline: q(), candidate: q({ coverage: 0.3 }), samples: 5 }).verdict).toBe(
      'REJECT',
    );
    expect(
      decideAbstractsVerdict({ baseline: q(), candidate: q({ coverage: 0.9, tokens: 300 }), samples: 5 }).verdict,
    ).toBe('REJECT');
  });
  it('NEEDS_REVISION: no clear gain, more tokens than 1.1×, or too few windows', () => {
    expect(decideAbstractsVerdict({ baseline: q(), candidate: q({ coverage: 0.42 }), samples: 5 }).verdict).toBe(
      'NEEDS_REVISION',
    );
    expect(
      decideAbstractsVerdict({ baseline: q(), candidate: q({ coverage: 0.9, tokens: 200 }), samples: 5 }).verdict,
    ).toBe('NEEDS_REVISION');
    expect(decideAbstractsVerdict({ baseline: q(), candidate: q({ coverage: 0.9 }), samples: 2 }).verdict).toBe(
      'NEEDS_REVISION',
    );
    expect(
      decideAbstractsVerdict({ baseline: q(), candidate: q({ coverage: 0.9, novelty: 0.5 }), samples: 5 }).verdict,
    ).toBe('NEEDS_REVISION');
  });
  it('a budget breach is a REJECT naming the budget', () => {
    expect(budgetVerdict('cost', '$6 > $5')).toMatchObject({
      verdict: 'REJECT',
      confidence: 1,
      summary: 'budget_exceeded: cost ($6 > $5)',
    });
  });
  it('tool tests: pass → APPROVE, failure → REJECT with stderr, budget → REJECT naming it', () => {
    expect(decideToolVerdict({ status: 'ok', exitCode: 0, stderr: '', durationMs: 5 }).verdict).toBe('APPROVE');
    const fail = decideToolVerdict({
      status: 'error',
      exitCode: 1,
      stderr: 'AssertionError: 2 !== 3\n',
      durationMs: 5,
    });
    expect(fail).toMatchObject({ verdict: 'REJECT' });
    expect(fail.summary).toContain('AssertionError: 2 !== 3');
    expect(
      decideToolVerdict({ status: 'budget_exceeded', exceeded: 'memory', exitCode: null, stderr: '', durationMs: 5 })
        .summary,
    ).toMatch(/^budget_exceeded: memory/);
  });
});

describe('toolRunBudget (the sandbox budget of a tool_tests run)', () => {
  it('passes the CPU-time budget to the sandbox, keeping cpus as the throttle', () => {
    const r = toolRunBudget(forkBudgetSchema.parse({ wallMs: 60_000, diskBytes: 64 << 20, cpus: 1.5, cpuSeconds: 3 }));
    expect(r).toEqual({ budget: { wallMs: 60_000, cpus: 1.5, diskBytes: 64 << 20, cpuSeconds: 3 }, caveats: [] });
  });

  it('defaults the CPU time to the run wall seconds × cpus', () => {
    expect(
      toolRunBudget(forkBudgetSchema.parse({ wallMs: 60_000, diskBytes: 64 << 20, cpus: 1.5 })).budget.cpuSeconds,
    ).toBe(90);
    expect(
      toolRunBudget(forkBudgetSchema.parse({ wallMs: 100, diskBytes: 64 << 20, cpus: 0.1 })).budget.cpuSeconds,
    ).toBe(1);
  });

  it('caps wall time and disk for one sandbox run, and says so in a caveat', () => {
    const r = toolRunBudget(forkBudgetSchema.parse(undefined));
    expect(r.budget).toEqual({
      wallMs: toolRunCaps.wallMs,
      cpus: 2,
      diskBytes: toolRunCaps.diskBytes,
      cpuSeconds: 1200,
    });
    expect(r.caveats).toEqual([
      "sandbox cap: the tool tests ran with 600 s of wall time, not the budget's 3600 s",
      "sandbox cap: the tool tests had 256 MiB of disk, not the budget's 10 GiB",
    ]);
    expect(toolRunBudget(forkBudgetSchema.parse({ wallMs: 600_000, diskBytes: 256 << 20 })).caveats).toEqual([]);
  });
});

describe('abstracts strategies', () => {
  const sources = Array.from({ length: 10 }, (_, i) => ({ id: i + 1, tick: i + 1, ...replyFor(i) }));

  it('are pure: the same input gives the same abstract', () => {
    expect(keywordClusterDigest(sources)).toEqual(keywordClusterDigest([...sources].reverse()));
    expect(recencyDigest(sources)).toEqual(recencyDigest(sources));
  });

  it('keyword_cluster covers more distinct ideas than recency on repetitive replies, at no more tokens', () => {
    const old = measureAbstract(makeAbstractDraft('recency', sources), sources);
    const neu = measureAbstract(makeAbstractDraft('keyword_cluster', sources), sources);
    expect(neu.coverage).toBeGreaterThan(old.coverage + 0.3);
    expect(neu.novelty).toBeGreaterThan(old.novelty);
    expect(neu.tokens).toBeLessThanOrEqual(old.tokens * 1.1);
  });

  it('respect the length cap and keep the source ids and tick span', () => {
    for (const s of ['recency', 'keyword_cluster'] as const) {
      const d = makeAbstractDraft(s, sources, { maxChars: 200 });
      expect(d.summary.length).toBeLessThanOrEqual(200);
      expect(d.sources.responses).toEqual(sources.map((x) => x.id));
      expect([d.tickFrom, d.tickTo]).toEqual([1, 10]);
    }
  });

  it('handle no sources', () => {
    expect(measureAbstract(recencyDigest([]), [])).toEqual({ coverage: 1, compressionRatio: 0, novelty: 0, tokens: 3 });
    expect(keywordClusterDigest([]).summary).toBe('');
  });

  it('abstracts_strategy is a config key with a valid default', () => {
    expect(configKeys.abstracts_strategy.default).toBe('recency');
    expect(validateConfigValue('abstracts_strategy', 'keyword_cluster')).toEqual({
      ok: true,
      value: 'keyword_cluster',
    });
    expect(validateConfigValue('abstracts_strategy', 'zip').ok).toBe(false);
  });
});
