/**
 * core/learnings.ts: the allow-list guard, pattern keys, the rule table, reinforcement and the
 * decay maths (1.0 for 7 days, then ×0.9 a day), the avoid_pattern check. Property tests: see test/helpers/fast-check-setup.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  avoidPatternViolations,
  decayCurve,
  decayStep,
  derive,
  learningLine,
  learningPredicateNames,
  learningsSection,
  normaliseReason,
  outcomeFeedback,
  parseFeedbackNote,
  parsePatternKey,
  patternKey,
  preferenceRules,
  reinforce,
  replyAvoidPatternViolations,
  validateLearning,
} from '../../core/learnings.js';

describe('guard', () => {
  it('accepts the allow-listed predicates with typed args and refuses everything else, naming the problem', () => {
    expect(validateLearning('avoid_pattern', { action: 'shell.exec', pattern: 'rm -rf' })).toMatchObject({ ok: true });
    expect(validateLearning('generated_tool', { name: 'yaml', capability: 'parse yaml' })).toMatchObject({ ok: true });
    expect(validateLearning('rm_rf', {})).toEqual({
      ok: false,
      reason: expect.stringMatching(/^unknown learning predicate 'rm_rf' \(allowed: avoid_pattern, style_preference/),
    });
    expect(validateLearning('__proto__', {})).toMatchObject({ ok: false });
    expect(validateLearning('toString', {})).toMatchObject({ ok: false });
    expect(validateLearning('avoid_pattern', ['unwrap'])).toMatchObject({
      ok: false,
      reason: expect.stringContaining("bad args for 'avoid_pattern'"),
    });
    expect(validateLearning('avoid_pattern', { action: 'Shell Exec', pattern: 'x' })).toMatchObject({
      ok: false,
      reason: expect.stringContaining('action:'),
    });
    expect(validateLearning('style_preference', { style: 'concise', stance: 'prefer', admin: true })).toMatchObject({
      ok: false,
    });
    expect(validateLearning('language_hint', { language: 'go', hint: 'x'.repeat(201) })).toMatchObject({
      ok: false,
      reason: expect.stringContaining('hint'),
    });
  });

  it('property: no predicate outside the allow-list is ever accepted', () => {
    fc.assert(
      fc.property(fc.string(), fc.anything(), (p, args) => {
        const r = validateLearning(p, args);
        if (r.ok) expect(learningPredicateNames).toContain(p);
      }),
    );
  });
});

describe('reinforcement and decay', () => {
  it('reinforce: +0.1, capped at 1.0, monotone (property)', () => {
    expect(reinforce(0.5)).toBe(0.6);
    expect(reinforce(0.95)).toBe(1);
    fc.assert(
      fc.property(fc.double({ min: 0, max: 1, noNaN: true }), (c) => {
        const r = reinforce(c);
        expect(r).toBeLessThanOrEqual(1);
        expect(r).toBeGreaterThanOrEqual(Math.min(1, c + 0.1) - 1e-6);
      }),
    );
  });

  it('the decay curve: 1.0 for 7 days, then 0.9, 0.81, 0.729 … deleted once below 0.1 (day 29)', () => {
    const curve = decayCurve(30);
    expect(curve.slice(0, 7)).toEqual([1, 1, 1, 1, 1, 1, 1]);
    expect(curve[7]).toBeCloseTo(0.9, 10);
    expect(curve[8]).toBeCloseTo(0.81, 10);
    expect(curve[9]).toBeCloseTo(0.729, 10);
    // 0.9^21 = 0.109 survives; 0.9^22 = 0.098 is deleted.
    expect(curve[27]).toBeCloseTo(0.9 ** 21, 10);
    expect(curve[28]).toBeNull();
    expect(curve[29]).toBeNull();
  });

  it('property: decay never raises confidence, only stale learnings change, deleted iff below the floor', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.integer({ min: 0, max: 60 * 86_400_000 }),
        fc.double({ min: 0.01, max: 1, noNaN: true }),
        (c, ageMs, factor) => {
          const now = new Date(1_800_000_000_000);
          const s = decayStep({ confidence: c, learnedAt: new Date(now.getTime() - ageMs) }, now, { factor });
          expect(s.confidence).toBeLessThanOrEqual(c);
          expect(s.decayed).toBe(ageMs > 7 * 86_400_000);
          if (!s.decayed) expect(s.confidence).toBe(c);
          expect(s.deleted).toBe(s.confidence < 0.1);
        },
      ),
    );
  });
});

describe('pattern keys', () => {
  it('keys are `action:reason` (rejections) and `action` (acceptances)', () => {
    expect(patternKey({ kind: 'reject', action: 'code.edit', reason: ' Uses  UNWRAP ' })).toBe('code.edit:uses unwrap');
    expect(patternKey({ kind: 'accept', action: 'code.edit', reason: 'nice' })).toBe('code.edit');
    expect(patternKey({ kind: 'reject', action: 'code.edit' })).toBe('code.edit');
    expect(outcomeFeedback('shell.exec', 'exit code 127:\n  not found')).toEqual({
      kind: 'reject',
      action: 'command:shell.exec',
      reason: 'exit code N: not found',
    });
    expect(parsePatternKey('command:shell.exec:exit code n: not found')).toEqual({
      action: 'command:shell.exec',
      reason: 'exit code n: not found',
    });
  });

  it('property: parsePatternKey inverts patternKey', () => {
    const action = fc.oneof(
      fc.stringMatching(/^[a-z0-9][a-z0-9_.-]{0,20}$/),
      fc.stringMatching(/^command:[a-z0-9][a-z0-9_.-]{0,20}$/),
    );
    fc.assert(
      fc.property(
        fc.constantFrom('accept', 'reject') as fc.Arbitrary<'accept' | 'reject'>,
        action,
        fc.option(fc.string({ maxLength: 300 }), { nil: undefined }),
        (kind, a, reason) => {
          const key = patternKey({ kind, action: a, reason });
          const back = parsePatternKey(key);
          expect(back.action).toBe(a);
          const r = reason === undefined ? '' : normaliseReason(reason);
          if (kind === 'reject' && r) expect(back.reason).toBe(r);
          else expect(back.reason).toBeUndefined();
        },
      ),
    );
  });
});

describe('rule table', () => {
  it('derives nothing below the threshold, and each rule above it', () => {
    expect(derive({ kind: 'reject', pattern: 'code.edit:unwrap', count: 2 })).toBeNull();
    expect(derive({ kind: 'reject', pattern: 'code.edit:unwrap', count: 3 })).toMatchObject({
      predicate: 'avoid_pattern',
      args: { action: 'code.edit', pattern: 'unwrap' },
      derivation: { rule: 'avoid-pattern', count: 3, threshold: 3 },
    });
    expect(derive({ kind: 'reject', pattern: 'code.edit:unwrap', count: 4 }, 5)).toBeNull();
    expect(derive({ kind: 'accept', pattern: 'style.concise', count: 3 })).toMatchObject({
      predicate: 'style_preference',
      args: { style: 'concise', stance: 'prefer' },
    });
    expect(derive({ kind: 'reject', pattern: 'style.verbose', count: 3 })).toMatchObject({
      predicate: 'style_preference',
      args: { style: 'verbose', stance: 'avoid' },
    });
    expect(derive({ kind: 'accept', pattern: 'tool.manual_review', count: 3 })).toMatchObject({
      predicate: 'tool_preference',
      args: { tool: 'manual_review', stance: 'prefer' },
    });
    expect(derive({ kind: 'reject', pattern: 'tool.web_search:too slow', count: 3 })).toMatchObject({
      predicate: 'tool_preference',
      args: { tool: 'web_search', stance: 'avoid', reason: 'too slow' },
    });
    expect(derive({ kind: 'reject', pattern: 'tool.web_search', count: 3 })).toMatchObject({
      args: { tool: 'web_search', stance: 'avoid' },
    });
    expect(derive({ kind: 'reject', pattern: 'lang.go:error_handling', count: 3 })).toMatchObject({
      predicate: 'language_hint',
      args: { language: 'go', hint: 'error_handling' },
    });
    expect(derive({ kind: 'reject', pattern: 'command:shell.exec:exit code n', count: 3 })).toMatchObject({
      predicate: 'avoid_error',
      args: { task_type: 'command:shell.exec', error: 'exit code n' },
      derivation: { rule: 'outcome-error' },
    });
    // An acceptance of a plain action, or a rejection without a reason, has no rule.
    expect(derive({ kind: 'accept', pattern: 'diary.add', count: 30 })).toBeNull();
    expect(derive({ kind: 'reject', pattern: 'diary.add', count: 30 })).toBeNull();
  });

  it('property: deterministic, and every derived learning passes the guard', () => {
    const key = fc.oneof(
      fc
        .tuple(
          fc.constantFrom('style.', 'tool.', 'lang.', 'command:', ''),
          fc.stringMatching(/^[a-z0-9][a-z0-9_.-]{0,10}$/),
          fc.option(fc.string({ maxLength: 50 }), { nil: undefined }),
        )
        .map(([p, a, r]) => patternKey({ kind: 'reject', action: `${p}${a}`, reason: r })),
      fc.string({ maxLength: 60 }),
    );
    fc.assert(
      fc.property(
        fc.constantFrom('accept', 'reject') as fc.Arbitrary<'accept' | 'reject'>,
        key,
        fc.integer({ min: 0, max: 10 }),
        (kind, pattern, count) => {
          const a = derive({ kind, pattern, count });
          expect(derive({ kind, pattern, count })).toEqual(a);
          if (a) {
            expect(count).toBeGreaterThanOrEqual(3);
            expect(validateLearning(a.predicate, a.args)).toMatchObject({ ok: true });
            expect(preferenceRules.map((r) => r.id)).toContain(a.derivation.rule);
          }
        },
      ),
    );
  });
});

describe('rehydration', () => {
  const learned = [
    { id: 1, predicate: 'avoid_pattern', args: { action: 'shell.exec', pattern: 'rm -rf' }, confidence: 1 },
    { id: 2, predicate: 'avoid_pattern', args: { action: 'diary', pattern: 'password' }, confidence: 0.8 },
    { id: 3, predicate: 'style_preference', args: { style: 'concise', stance: 'prefer' }, confidence: 0.9 },
  ];
  it('flags a command whose action and text match a learned avoid_pattern', () => {
    expect(
      avoidPatternViolations({ type: 'shell.exec', args: { cmd: 'RM -RF /tmp/x' } }, learned).map((l) => l.id),
    ).toEqual([1]);
    expect(avoidPatternViolations({ type: 'shell.exec', args: { cmd: 'ls' } }, learned)).toEqual([]);
    expect(
      avoidPatternViolations({ type: 'diary.add', args: { title: 't', content: 'my Password is' } }, learned).map(
        (l) => l.id,
      ),
    ).toEqual([2]);
    expect(avoidPatternViolations({ type: 'diaryx.add', args: { content: 'password' } }, learned)).toEqual([]);
    expect(avoidPatternViolations({ type: 'notes.send', args: { text: 'rm -rf' } }, learned)).toEqual([]);
    expect(
      avoidPatternViolations({ type: 'notes.send', args: {} }, [
        { id: 9, predicate: 'avoid_pattern', args: { action: '*', pattern: 'secret' }, confidence: 1 },
      ]),
    ).toEqual([]);
    expect(
      avoidPatternViolations({ type: 'notes.send', args: {}, description: 'share the SECRET' }, [
        { id: 9, predicate: 'avoid_pattern', args: { action: '*', pattern: 'secret' }, confidence: 1 },
      ]).length,
    ).toBe(1);
  });
  it('flags a reply whose own text uses a learned avoid_pattern of action reply or *', () => {
    const replyLearned = [
      ...learned,
      { id: 4, predicate: 'avoid_pattern', args: { action: 'reply', pattern: 'as an ai' }, confidence: 0.9 },
      { id: 5, predicate: 'avoid_pattern', args: { action: '*', pattern: 'secret' }, confidence: 1 },
    ];
    expect(
      replyAvoidPatternViolations('Well, AS  AN\nAI I cannot; the Secret stays.', replyLearned).map((l) => l.id),
    ).toEqual([4, 5]);
    // Action-scoped patterns are about commands of that action, not the prose.
    expect(replyAvoidPatternViolations('I will note the password and run rm -rf', replyLearned)).toEqual([]);
    expect(replyAvoidPatternViolations('', replyLearned)).toEqual([]);
    expect(
      replyAvoidPatternViolations('secret', [
        { id: 6, predicate: 'style_preference', args: { action: '*', pattern: 'secret' }, confidence: 1 },
      ]),
    ).toEqual([]);
    expect(learningLine(replyLearned[3]!)).toContain('avoid "as an ai" in your replies');
    expect(learningLine(replyLearned[4]!)).toContain('avoid "secret" in any reply or command');
  });
  it('renders a context section, empty without learnings', () => {
    expect(learningsSection([])).toBe('');
    const s = learningsSection(learned);
    expect(s.split('\n')[0]).toBe('Learned (from feedback and outcomes):');
    expect(s).toContain('#1 avoid "rm -rf" in shell.exec commands (confidence 1.00');
    expect(s).toContain('#3 prefer the style "concise" (confidence 0.90)');
  });
});

describe('feedback in a note', () => {
  it('parses accept/reject <action> [reason] and refuses anything else with the reason', () => {
    expect(parseFeedbackNote('reject shell.exec: rm -rf')).toEqual({
      ok: true,
      feedback: { kind: 'reject', action: 'shell.exec', reason: 'rm -rf' },
    });
    expect(parseFeedbackNote('Reject diary.add because it has a password')).toEqual({
      ok: true,
      feedback: { kind: 'reject', action: 'diary.add', reason: 'it has a password' },
    });
    expect(parseFeedbackNote('reject tool.web_search --reason too slow')).toMatchObject({
      feedback: { action: 'tool.web_search', reason: 'too slow' },
    });
    expect(parseFeedbackNote('accept style.concise')).toEqual({
      ok: true,
      feedback: { kind: 'accept', action: 'style.concise' },
    });
    expect(parseFeedbackNote('hello there')).toEqual({
      ok: false,
      reason: 'expected "accept <action>" or "reject <action> [reason]"',
    });
    expect(parseFeedbackNote('reject Bad!Action x')).toMatchObject({
      ok: false,
      reason: expect.stringContaining('action'),
    });
  });
});
