/**
 * The reflexes' pure maths (core/emotions, novelty, stagnation, validation, memory-manager):
 * examples for each rule, then fast-check properties (see test/helpers/fast-check-setup.ts).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { emotionIntensity, mergeEmotionList, nextAnxietyStreak, parseEmotions } from '../../core/emotions.js';
import { defaultMemoryPolicy, planMemory, retention, type MemoryEntry } from '../../core/memory-manager.js';
import {
  combineNovelty,
  embeddingSimilarity,
  lexicalSimilarity,
  noveltyFromSimilarity,
  reflectionOf,
  parseNoveltyAnswer,
} from '../../core/novelty.js';
import {
  chooseStrategy,
  decideStagnation,
  defaultStagnationPolicy,
  diagnose,
  diagnosisThresholds,
  initialStagnationState,
  reflexLimits,
  reflexLite,
  relaxReflex,
  stagnationClasses,
  updateMeanEffect,
  type StrategyStats,
} from '../../core/stagnation.js';
import {
  aggregate,
  gateCommands,
  parseValidatorAnswer,
  typeMatches,
  updateTrust,
  validationMode,
  validatorStats,
  defaultTrustPolicy,
  type Vote,
} from '../../core/validation.js';

describe('emotions', () => {
  it('parses emotion:strength (reason) lines and comma lists; unknown names and malformed items are reported', () => {
    const r = parseEmotions('curiosity:4 (a new idea, finally)\n- Anxiety: 5 (deadline)\nwonder:2, joy:9, garbage', [
      'curiosity',
      'anxiety',
      'joy',
    ]);
    expect(r.readings).toEqual([
      { emotion: 'curiosity', strength: 4, reason: 'a new idea, finally' },
      { emotion: 'anxiety', strength: 5, reason: 'deadline' },
      { emotion: 'wonder', strength: 2 },
    ]);
    expect(r.unknown).toEqual(['wonder']);
    expect(r.malformed).toEqual(['joy:9', 'garbage']);
    expect(mergeEmotionList(['joy'], ['wonder', 'joy', 'wonder'])).toEqual(['joy', 'wonder']);
  });
  it('counts the anxiety streak (> 3 only)', () => {
    expect(nextAnxietyStreak(2, [{ emotion: 'anxiety', strength: 4 }])).toBe(3);
    expect(nextAnxietyStreak(2, [{ emotion: 'anxiety', strength: 3 }])).toBe(0);
    expect(nextAnxietyStreak(2, [{ emotion: 'anxiety', strength: 4 }], 4)).toBe(0); // config anxiety_threshold 4
    expect(nextAnxietyStreak(0, [{ emotion: 'anxiety', strength: 3 }], 2)).toBe(1);
  });
  it('property: never throws; readings have strength 1..5 and unique names; every item is reading or malformed', () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 300 }),
        fc.array(fc.string({ maxLength: 10 }), { maxLength: 5 }),
        (text, known) => {
          const r = parseEmotions(text, known);
          for (const x of r.readings)
            expect(Number.isInteger(x.strength) && x.strength >= 1 && x.strength <= 5).toBe(true);
          expect(new Set(r.readings.map((x) => x.emotion)).size).toBe(r.readings.length);
          for (const u of r.unknown) expect(r.readings.some((x) => x.emotion === u)).toBe(true);
          const i = emotionIntensity(r.readings);
          expect(i >= 0 && i <= 1).toBe(true);
        },
      ),
    );
  });
  it('property: well-formed lines round-trip', () => {
    const name = fc.stringMatching(/^[a-z][a-z_]{0,15}$/);
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(name, fc.integer({ min: 1, max: 5 })), { selector: ([n]) => n, maxLength: 6 }),
        (items) => {
          const r = parseEmotions(items.map(([n, s]) => `${n}:${s} (because)`).join('\n'), []);
          expect(r.readings.map((x) => [x.emotion, x.strength])).toEqual(items);
          expect(r.malformed).toEqual([]);
        },
      ),
    );
  });
});

describe('novelty', () => {
  it('identical replies score 0, unrelated ones high; the LLM score blends in', () => {
    expect(lexicalSimilarity('the cat sat on the mat', 'the cat sat on the mat')).toBeCloseTo(1);
    expect(noveltyFromSimilarity(lexicalSimilarity('alpha beta gamma', 'delta epsilon zeta'))).toBe(100);
    expect(combineNovelty(80, 20, 0.2, 0.5)).toBe(50);
    expect(combineNovelty(80, null, 0.2)).toBe(80);
    expect(combineNovelty(80, 100, 1)).toBe(0);
  });
  it('parses the comparison answer tolerantly; malformed answers are errors, not throws', () => {
    expect(parseNoveltyAnswer('Sure: {"novelty": "72", "new": ["x", 3], "tags": ["Big Idea"]} done')).toEqual({
      ok: true,
      novelty: 72,
      ideas: { new: ['x'], refined: [], discarded: [] },
      tags: ['big_idea'],
    });
    expect(parseNoveltyAnswer('no idea').ok).toBe(false);
    expect(parseNoveltyAnswer('{"novelty": 300}').ok).toBe(false);
    expect(parseNoveltyAnswer('{novelty: 3}').ok).toBe(false);
  });
  it('property: similarity is symmetric, in [0,1], 1 on itself; novelty an integer in [0,100]', () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 200 }),
        fc.string({ maxLength: 200 }),
        fc.option(fc.double({ min: -50, max: 200, noNaN: true })),
        (a, b, llm) => {
          const s = lexicalSimilarity(a, b);
          expect(s).toBeGreaterThanOrEqual(0);
          expect(s).toBeLessThanOrEqual(1);
          expect(Math.abs(s - lexicalSimilarity(b, a))).toBeLessThan(1e-9);
          expect(lexicalSimilarity(a, a)).toBeCloseTo(1, 9);
          const n = combineNovelty(noveltyFromSimilarity(s), llm, s);
          expect(Number.isInteger(n) && n >= 0 && n <= 100).toBe(true);
          if (s >= 0.999) expect(n).toBe(0);
        },
      ),
    );
  });
  it('property: embedding similarity in [0,1] and scale invariant', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: -1, max: 1, noNaN: true }), { minLength: 1, maxLength: 16 }),
        fc.double({ min: 0.1, max: 10, noNaN: true }),
        (v, k) => {
          const s = embeddingSimilarity(
            v,
            v.map((x) => x * k),
          );
          expect(s >= 0 && s <= 1).toBe(true);
          if (v.some((x) => Math.abs(x) > 1e-3)) expect(s).toBeCloseTo(1, 6);
        },
      ),
    );
  });
});

describe('stagnation', () => {
  it('Reflex-lite steps and caps; relax returns toward defaults', () => {
    const d = { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0 };
    expect(reflexLite(d)).toEqual({ temperature: 0.9, topP: 0.95, presencePenalty: 0.3, frequencyPenalty: 0.3 });
    let p = d;
    for (let i = 0; i < 20; i++) p = reflexLite(p);
    expect(p).toEqual({ temperature: 1.5, topP: 0.95, presencePenalty: 1.5, frequencyPenalty: 1.5 });
    for (let i = 0; i < 20; i++) p = relaxReflex(p, d);
    expect(p).toEqual(d);
  });
  it('a repeating model: Reflex-lite on the first stagnant tick, a strategy on the third, cool-down, then evaluation', () => {
    let s = initialStagnationState();
    const seen: string[] = [];
    for (const [tick, nov] of [
      [1, 100],
      [2, 0],
      [3, 0],
      [4, 0],
      [5, 0],
      [6, 0],
      [7, 80],
    ] as const) {
      const d = decideStagnation(s, tick, nov, 0);
      seen.push(
        `${tick}:${d.reflexLite ? 'L' : ''}${d.strategy ? 'S' : ''}${d.evaluate ? 'E' : ''}${d.relax ? 'R' : ''}`,
      );
      s = d.state;
      if (d.strategy) s = { ...s, pending: { strategyId: 1, metricId: 1, tick, noveltyBefore: nov } };
    }
    expect(seen).toEqual(['1:', '2:L', '3:L', '4:LS', '5:L', '6:LSE', '7:R']);
  });
  it('anxiety streak alone triggers Reflex-lite', () => {
    expect(decideStagnation(initialStagnationState(), 5, 90, 3).reflexLite).toBe(true);
    expect(decideStagnation(initialStagnationState(), 5, 90, 2).reflexLite).toBe(false);
  });
  it('diagnosis classes', () => {
    const base = { newInputs: 0, sameModeTicks: 0, dataRichness: 0, tiredness: 0, ticksSinceRest: 0 };
    expect(diagnose(base)).toBe('no_new_data');
    expect(diagnose({ ...base, tiredness: 4 })).toBe('fatigue');
    expect(diagnose({ ...base, dataRichness: 50 })).toBe('repeated_thoughts');
    expect(diagnose({ ...base, newInputs: 3, sameModeTicks: 40 })).toBe('monotone_context');
  });
  it('chooses cheap first, skips proven failures, falls back across classes', () => {
    const s = (
      id: number,
      cost: number,
      uses = 0,
      meanEffect = 0,
      cls: StrategyStats['class'] = 'repeated_thoughts',
    ): StrategyStats => ({ id, name: `s${id}`, class: cls, cost, uses, meanEffect, enabled: true });
    expect(chooseStrategy([s(1, 3), s(2, 1), s(3, 2)], 'repeated_thoughts')?.id).toBe(2);
    expect(chooseStrategy([s(1, 3), s(2, 1, 3, -5), s(3, 2)], 'repeated_thoughts')?.id).toBe(3);
    expect(chooseStrategy([s(1, 3, 0, 0, 'fatigue')], 'no_new_data')?.id).toBe(1);
    expect(chooseStrategy([], 'fatigue')).toBeNull();
  });
  it('property: Reflex-lite never lowers a parameter and respects its caps; the streak logic is consistent', () => {
    const param = fc.record({
      temperature: fc.double({ min: 0, max: 2, noNaN: true }),
      topP: fc.double({ min: 0, max: 1, noNaN: true }),
      presencePenalty: fc.double({ min: -2, max: 2, noNaN: true }),
      frequencyPenalty: fc.double({ min: -2, max: 2, noNaN: true }),
    });
    fc.assert(
      fc.property(param, fc.array(fc.integer({ min: 0, max: 100 }), { maxLength: 30 }), (p, novelties) => {
        const q = reflexLite(p);
        expect(q.temperature).toBeGreaterThanOrEqual(p.temperature - 1e-3);
        expect(q.temperature).toBeLessThanOrEqual(Math.max(p.temperature, reflexLimits.maxTemperature) + 1e-9);
        expect(q.topP).toBeLessThanOrEqual(Math.max(p.topP, reflexLimits.maxTopP) + 1e-9);
        expect(q.presencePenalty).toBeGreaterThanOrEqual(p.presencePenalty - 1e-3);
        let s = initialStagnationState();
        novelties.forEach((n, i) => {
          const d = decideStagnation(s, i + 1, n, 0);
          expect(d.stagnant).toBe(n < defaultStagnationPolicy.lowNovelty);
          expect(d.state.lowStreak).toBe(d.stagnant ? s.lowStreak + 1 : 0);
          if (d.strategy) expect(d.reflexLite && d.state.lowStreak >= defaultStagnationPolicy.strategyAfter).toBe(true);
          s = d.state;
        });
      }),
    );
  });
  it('property: chooseStrategy returns an enabled strategy of the class when one exists, the cheapest non-failed one', () => {
    const strat = fc.record({
      id: fc.integer({ min: 1, max: 1000 }),
      name: fc.constant('s'),
      class: fc.constantFrom(...stagnationClasses),
      cost: fc.integer({ min: 1, max: 5 }),
      uses: fc.integer({ min: 0, max: 5 }),
      meanEffect: fc.integer({ min: -20, max: 20 }),
      enabled: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(strat, { maxLength: 10 }), fc.constantFrom(...stagnationClasses), (all, cls) => {
        const got = chooseStrategy(all, cls);
        const enabled = all.filter((s) => s.enabled);
        if (enabled.length === 0) {
          expect(got).toBeNull();
          return;
        }
        expect(got?.enabled).toBe(true);
        const ofClass = enabled.filter((s) => s.class === cls);
        if (ofClass.length) {
          expect(got?.class).toBe(cls);
          const ok = ofClass.filter((s) => !(s.uses >= 2 && s.meanEffect <= 0));
          if (ok.length) expect(got!.cost).toBe(Math.min(...ok.map((s) => s.cost)));
        }
      }),
    );
  });
  it('a strategy fails after two measured effects with no gain, not after two applications', () => {
    const ask: StrategyStats = {
      id: 1,
      name: 'ask_user',
      class: 'no_new_data',
      cost: 1,
      uses: 3,
      meanEffect: -5,
      enabled: true,
    };
    const other: StrategyStats = {
      id: 2,
      name: 'switch_context_mode',
      class: 'no_new_data',
      cost: 2,
      uses: 0,
      meanEffect: 0,
      enabled: true,
    };
    expect(chooseStrategy([ask, other], 'no_new_data')?.id).toBe(2); // uses stand for evaluations when none are given
    expect(chooseStrategy([{ ...ask, evaluations: 1 }, other], 'no_new_data')?.id).toBe(1); // measured once: not yet a failure
    expect(chooseStrategy([{ ...ask, evaluations: 2 }, other], 'no_new_data')?.id).toBe(2);
  });
  it('property: diagnose always names a class; fatigue comes first, then rich data, then no new data, then a monotone context', () => {
    const input = fc.record({
      newInputs: fc.nat({ max: 20 }),
      sameModeTicks: fc.nat({ max: 60 }),
      dataRichness: fc.nat({ max: 30 }),
      tiredness: fc.double({ min: 0, max: 5, noNaN: true }),
      ticksSinceRest: fc.nat({ max: 1000 }),
    });
    fc.assert(
      fc.property(input, (d) => {
        const c = diagnose(d);
        expect(stagnationClasses).toContain(c);
        const tired = d.tiredness >= diagnosisThresholds.tired || d.ticksSinceRest >= diagnosisThresholds.restTicks;
        expect(c === 'fatigue').toBe(tired); // fatigue wins over every other sign, and only it
        if (tired) return;
        if (d.dataRichness >= diagnosisThresholds.richData) expect(c).toBe('repeated_thoughts');
        else if (d.newInputs === 0) expect(c).toBe('no_new_data');
        else expect(c).toBe(d.sameModeTicks >= diagnosisThresholds.monotoneTicks ? 'monotone_context' : 'no_new_data');
        // Tiredness alone can only turn a diagnosis into fatigue.
        expect(diagnose({ ...d, tiredness: 5 })).toBe('fatigue');
      }),
    );
  });
  it('property: updateMeanEffect is the running mean', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -100, max: 100 }), { minLength: 1, maxLength: 20 }), (effects) => {
        let m = 0;
        effects.forEach((e, i) => (m = updateMeanEffect(m, i, e)));
        expect(m).toBeCloseTo(effects.reduce((a, b) => a + b, 0) / effects.length, 6);
      }),
    );
  });
});

describe('validation', () => {
  it('parses "+2 -- comment"; rejects out-of-range and free text', () => {
    expect(parseValidatorAnswer('+2 -- clear and safe')).toEqual({ ok: true, rating: 2, comment: 'clear and safe' });
    expect(parseValidatorAnswer('\n−3 -- ' + 'x'.repeat(150))).toEqual({
      ok: true,
      rating: -3,
      comment: 'x'.repeat(100),
    });
    expect(parseValidatorAnswer('0')).toEqual({ ok: true, rating: 0, comment: '' });
    expect(parseValidatorAnswer('+4 -- wow').ok).toBe(false);
    expect(parseValidatorAnswer('1.5 -- hmm').ok).toBe(false);
    expect(parseValidatorAnswer('I think it is good').ok).toBe(false);
  });
  it('modes, weighted rating, ties decided by the most trusted, equal trust blocks', () => {
    expect(validationMode([])).toBe('auto_pass');
    expect(validationMode([{ self: true }])).toBe('self_validation');
    expect(validationMode([{ self: true }, {}])).toBe('normal');
    expect(
      aggregate([
        { id: 1, rating: 3, trust: 1 },
        { id: 2, rating: 1, trust: 0.5 },
      ]).rating,
    ).toBeCloseTo(2.33, 2);
    expect(
      aggregate([
        { id: 1, rating: 2, trust: 1 },
        { id: 2, rating: -2, trust: 1 },
      ]),
    ).toMatchObject({ rating: 0, decidedBy: 'tie_blocked', blocked: true });
    expect(
      aggregate([
        { id: 1, rating: 2, trust: 0.9 },
        { id: 2, rating: -2, trust: 0.9 },
        { id: 3, rating: -1, trust: 0.3 },
        { id: 4, rating: 1, trust: 0.3 },
      ]),
    ).toMatchObject({ blocked: true });
    expect(
      aggregate([
        { id: 1, rating: 1, trust: 0.5 },
        { id: 2, rating: -2, trust: 0.25 },
      ]),
    ).toMatchObject({ rating: 1, decidedBy: 'most_trusted' });
    expect(aggregate([{ id: 1, rating: 0, trust: 1 }])).toMatchObject({
      rating: 0,
      decidedBy: 'most_trusted',
      blocked: false,
    });
    expect(aggregate([])).toMatchObject({ rating: null, decidedBy: 'no_votes' });
  });
  it('gates commands by threshold, tie block and ethics (which wins even at +3 and under auto_pass)', () => {
    const cmds = [
      { cmdId: 'a', type: 'diary.add' },
      { cmdId: 'b', type: 'shell' },
      { cmdId: 'c', type: 'diary.delete' },
    ];
    const min = (t: string) => (t === 'shell' || t.endsWith('.delete') ? 2 : 1);
    expect(gateCommands(cmds, { mode: 'normal', rating: 1.5, blocked: false }, min).allowed).toEqual(['a']);
    expect(gateCommands(cmds, { mode: 'normal', rating: 3, blocked: false }, min).allowed).toEqual(['a', 'b', 'c']);
    expect(gateCommands(cmds, { mode: 'normal', rating: 0, blocked: true }, min).allowed).toEqual([]);
    const rules = [{ id: 7, title: 'no deletes', forbids: ['*.delete'], severity: 'block' as const }];
    const g = gateCommands(cmds, { mode: 'auto_pass', rating: null, blocked: false }, min, rules);
    expect(g.allowed).toEqual(['a', 'b']);
    expect(g.held.c).toContain('ethics policy #7');
    expect(typeMatches('goals.*', 'goals.add')).toBe(true);
    expect(typeMatches('goals.*', 'diary.add')).toBe(false);
  });
  it('a validator far from the consensus loses trust until excluded; close ones regain slowly', () => {
    let t = 1;
    let n = 0;
    while (t >= defaultTrustPolicy.exclude) {
      t = updateTrust(t, -3, 2);
      n++;
    }
    expect(n).toBe(2);
    expect(updateTrust(0.5, 2, 2)).toBeCloseTo(0.52);
    expect(updateTrust(0.5, 0, 2)).toBe(0.5);
  });
  it('validator stats: coverage, agreement, latency, drift', () => {
    const s = validatorStats([
      {
        rating: 2,
        validators: [
          { registryId: 1, name: 'a', status: 'ok', rating: 2, trust: 1, latencyMs: 10 },
          { registryId: 2, name: 'b', status: 'timeout', trust: 1, latencyMs: 500 },
        ],
      },
      {
        rating: 1,
        validators: [
          { registryId: 1, name: 'a', status: 'ok', rating: 3, trust: 1, latencyMs: 30 },
          { registryId: 2, name: 'b', status: 'ok', rating: -2, trust: 1 },
        ],
      },
    ]);
    expect(s).toEqual([
      {
        registryId: 1,
        name: 'a',
        asked: 2,
        answered: 2,
        timeouts: 0,
        coverage: 1,
        agreement: 0.5,
        meanLatencyMs: 20,
        drift: 1,
      },
      {
        registryId: 2,
        name: 'b',
        asked: 2,
        answered: 1,
        timeouts: 1,
        coverage: 0.5,
        agreement: 0,
        meanLatencyMs: 500,
        drift: -3,
      },
    ]);
  });
  const vote = fc.record({
    id: fc.integer({ min: 1, max: 50 }),
    rating: fc.integer({ min: -3, max: 3 }),
    trust: fc.double({ min: 0, max: 1, noNaN: true }),
    self: fc.boolean(),
  });
  it('property: the rating lies within the votes and is null only without votes; unanimity wins', () => {
    fc.assert(
      fc.property(fc.array(vote, { maxLength: 8 }), (votes: Vote[]) => {
        const a = aggregate(votes);
        if (votes.length === 0) {
          expect(a.rating).toBeNull();
          return;
        }
        expect(a.rating).not.toBeNull();
        const rs = votes.map((v) => v.rating);
        expect(a.rating!).toBeGreaterThanOrEqual(Math.min(...rs, 0) - 1e-9);
        expect(a.rating!).toBeLessThanOrEqual(Math.max(...rs, 0) + 1e-9);
        expect(Object.values(a.distribution).reduce((x, y) => x + y, 0)).toBe(votes.length);
        if (a.blocked) expect(a.rating).toBe(0);
        if (new Set(rs).size === 1 && votes.some((v) => v.trust > 0)) expect(a.rating).toBe(rs[0]);
      }),
    );
  });
  it('property: a tie (weighted sum zero) is decided by the most trusted validator; leaders of equal trust that disagree give 0 and block', () => {
    // Trust in quarters and integer ratings: the weighted sum is exact, so ties are real ties.
    const quarterVote = fc.record({
      id: fc.integer({ min: 1, max: 50 }),
      rating: fc.integer({ min: -3, max: 3 }),
      quarters: fc.integer({ min: 1, max: 4 }),
    });
    fc.assert(
      fc.property(fc.array(quarterVote, { minLength: 1, maxLength: 4 }), (qs) => {
        fc.pre(qs.reduce((a, q) => a + q.rating * q.quarters, 0) === 0);
        const votes: Vote[] = qs.map((q) => ({ id: q.id, rating: q.rating, trust: q.quarters / 4 }));
        const a = aggregate(votes);
        const top = Math.max(...qs.map((q) => q.quarters));
        const leaders = new Set(qs.filter((q) => q.quarters === top).map((q) => q.rating));
        if (leaders.size === 1)
          expect(a).toMatchObject({ rating: [...leaders][0], decidedBy: 'most_trusted', blocked: false });
        else expect(a).toMatchObject({ rating: 0, decidedBy: 'tie_blocked', blocked: true });
      }),
    );
  });
  it('property: trust stays in [0,1]; a closer answer never ends with less trust than a farther one', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.integer({ min: -3, max: 3 }),
        fc.integer({ min: -3, max: 3 }),
        fc.double({ min: -3, max: 3, noNaN: true }),
        (t, r1, r2, c) => {
          const a = updateTrust(t, r1, c);
          const b = updateTrust(t, r2, c);
          expect(a >= 0 && a <= 1).toBe(true);
          if (Math.abs(r1 - c) <= Math.abs(r2 - c)) expect(a).toBeGreaterThanOrEqual(b);
        },
      ),
    );
  });
  it('property: gated commands are exactly those meeting the threshold and not forbidden', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom('diary.add', 'shell', 'goals.delete', 'notes.send'), { maxLength: 8 }),
        fc.option(fc.double({ min: -3, max: 3, noNaN: true })),
        fc.boolean(),
        fc.constantFrom<Array<'auto_pass' | 'normal' | 'self_validation'>>('auto_pass', 'normal', 'self_validation'),
        (types, rating, forbidShell, mode) => {
          const cmds = types.map((type, i) => ({ cmdId: `c${i}`, type }));
          const min = (t: string) => (t === 'shell' || t.endsWith('.delete') ? 2 : 1);
          const rules = forbidShell
            ? [{ id: 1, title: 'no shell', forbids: ['shell'], severity: 'block' as const }]
            : [];
          const g = gateCommands(cmds, { mode, rating, blocked: false }, min, rules);
          for (const c of cmds) {
            const should =
              !(forbidShell && c.type === 'shell') &&
              (mode === 'auto_pass' || (rating !== null && rating >= min(c.type)));
            expect(g.allowed.includes(c.cmdId)).toBe(should);
            expect(c.cmdId in g.held).toBe(!should);
          }
        },
      ),
    );
  });
});

describe('memory manager', () => {
  const entry = (id: number, o: Partial<MemoryEntry> = {}): MemoryEntry => ({
    id,
    novelty: 50,
    emotion: 0,
    tags: [],
    pinned: false,
    lastUsed: id,
    ...o,
  });
  it('archives low novelty unless emotion, goals or rarity keep it; LRU caps the rest; pins stay', () => {
    const p = { ...defaultMemoryPolicy, lruLimit: 3 };
    const d = planMemory(
      [
        entry(1, { novelty: 10 }),
        entry(2, { novelty: 10, emotion: 1 }),
        entry(3, { novelty: 10, tags: ['goal'] }),
        entry(4),
        entry(5),
        entry(6, { novelty: 0, pinned: true }),
        entry(7),
      ],
      ['goal'],
      p,
    );
    expect(d.map((x) => `${x.id}:${x.action}:${x.reason}`)).toEqual([
      '1:archive:low_retention',
      '2:archive:lru',
      '3:archive:lru',
      '4:archive:lru',
      '5:keep:retained',
      '6:keep:pinned',
      '7:keep:retained',
    ]);
  });
  const entries = fc.uniqueArray(
    fc.record({
      id: fc.integer({ min: 1, max: 10_000 }),
      novelty: fc.option(fc.integer({ min: 0, max: 100 })),
      emotion: fc.double({ min: 0, max: 1, noNaN: true }),
      tags: fc.array(fc.constantFrom('a', 'b', 'c', 'goal'), { maxLength: 3 }),
      pinned: fc.boolean(),
      lastUsed: fc.integer({ min: 0, max: 1000 }),
    }),
    { selector: (e) => e.id, maxLength: 40 },
  );
  it('property: pins never archived; live count ≤ max(lru, pins); one decision per entry; archived low retention is below the threshold', () => {
    fc.assert(
      fc.property(
        entries,
        fc.integer({ min: 1, max: 30 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (es, lru, thr) => {
          const p = { ...defaultMemoryPolicy, lruLimit: lru, noveltyThreshold: thr };
          const d = planMemory(es, ['goal'], p);
          expect(d.map((x) => x.id)).toEqual(es.map((e) => e.id));
          d.forEach((x, i) => {
            if (es[i]!.pinned) expect(x.action).toBe('keep');
            if (x.reason === 'low_retention') expect(x.retention).toBeLessThan(thr);
          });
          const kept = d.filter((x) => x.action === 'keep').length;
          expect(kept).toBeLessThanOrEqual(Math.max(lru, es.filter((e) => e.pinned).length));
        },
      ),
    );
  });
  it('property: retention is monotone in novelty, emotion, goal and rarity', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 100 }),
        fc.integer({ min: 0, max: 100 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.boolean(),
        fc.boolean(),
        (n1, n2, e, g, r) => {
          const [lo, hi] = n1 <= n2 ? [n1, n2] : [n2, n1];
          const p = defaultMemoryPolicy;
          expect(retention({ novelty: hi, emotion: e }, g, r, p)).toBeGreaterThanOrEqual(
            retention({ novelty: lo, emotion: e }, g, r, p),
          );
          expect(retention({ novelty: lo, emotion: e }, true, r, p)).toBeGreaterThanOrEqual(
            retention({ novelty: lo, emotion: e }, g, r, p),
          );
          expect(retention({ novelty: lo, emotion: 1 }, g, r, p)).toBeGreaterThanOrEqual(
            retention({ novelty: lo, emotion: e }, g, r, p),
          );
        },
      ),
    );
  });
});

describe('reflectionOf', () => {
  it('says what a reply brought, new, refined and discarded, capped; nothing when it named no idea', () => {
    expect(reflectionOf({ new: ['tide tables', 'moon phases'], refined: ['the map'], discarded: [] })).toBe(
      'new: tide tables; moon phases · refined: the map',
    );
    expect(reflectionOf({ new: [], refined: [], discarded: ['the old plan'] })).toBe('discarded: the old plan');
    expect(reflectionOf({ new: [], refined: [], discarded: [] })).toBeNull();
    const long = reflectionOf({ new: ['x'.repeat(2000)], refined: [], discarded: [] }, 100)!;
    expect(long).toHaveLength(100);
    expect(long.endsWith('…')).toBe(true);
  });
});
