/**
 * Nerves, pure: the collision nerve's definition and ground truth, the seeded scenario, and —
 * property-tested over random decision sequences — the learning that takes a nerve from
 * deliberate to reflex: a rule is never promoted below the agreement threshold, a demotion
 * always removes the rule and resets its case, an undo reverses an event exactly, the compiled
 * table agrees with the rules, and the mode follows the rules.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  collisionBucket,
  collisionBuckets,
  collisionMachine,
  collisionNerve,
  collisionPolicy,
  threatOf,
} from '../../core/nerves/collision.js';
import {
  choose,
  compileTable,
  coverage,
  emptyLearner,
  invalidChoice,
  learn,
  lookup,
  modeOf,
  promotable,
  ruleKey,
  undo,
  type DecisionFact,
  type Learner,
  type LearningConfig,
  type NerveEvent,
} from '../../core/nerves/modes.js';
import {
  actionSchema,
  judge,
  nervePrompt,
  observationSchema,
  parseAction,
  type Observation,
} from '../../core/nerves/nerve.js';
import { mulberry32, scenario, scenarioSlice } from '../../core/nerves/scenario.js';
import { addDecision, emptyTally } from '../../core/nerves/tally.js';
import { transition, validActions } from '../../core/state-machines.js';

const states = Object.keys(collisionMachine.states);

const observationArb: fc.Arbitrary<Observation> = fc.record({
  t: fc.double({ min: 0, max: 1e6, noNaN: true }),
  distanceM: fc.double({ min: 0, max: 200, noNaN: true }),
  closingSpeedMps: fc.double({ min: -20, max: 20, noNaN: true }),
  bearingDeg: fc.double({ min: -180, max: 180, noNaN: true }),
  obstacle: fc.boolean(),
});

describe('the collision nerve', () => {
  it('has a valid action for every state and bucket, and it leads somewhere the machine knows', () => {
    for (const state of states) {
      for (const bucket of collisionBuckets) {
        const action = collisionPolicy(state, bucket);
        expect(validActions(collisionMachine, state), `${state}/${bucket}`).toContain(action);
        expect(transition(collisionMachine, state, action).ok).toBe(true);
      }
      expect(validActions(collisionMachine, state)).toContain(collisionNerve.fallback[state]);
      expect(collisionNerve.costLf[state]).toBeGreaterThan(0);
    }
    expect(collisionNerve.organs).toEqual(['sensors']);
  });

  it('buckets any reading into a known bucket, and judges by the bucket alone', () => {
    fc.assert(
      fc.property(observationArb, fc.constantFrom(...states), (o, state) => {
        const bucket = collisionBucket(o);
        expect(collisionBuckets).toContain(bucket);
        const right = collisionPolicy(state, bucket);
        expect(judge(collisionNerve, state, o, right)).toBe('ok');
        for (const a of validActions(collisionMachine, state).filter((x) => x !== right))
          expect(judge(collisionNerve, state, o, a)).toBe('bad');
        expect(judge(collisionNerve, state, o, null)).toBe('bad');
      }),
    );
  });

  it('follows the episode IDLE → DETECT → EVALUATE → EVADE → RESUME → IDLE on a head-on approach', () => {
    const reading = (distanceM: number, closingSpeedMps: number, bearingDeg = 0, obstacle = true): Observation => ({
      t: 0,
      distanceM,
      closingSpeedMps,
      bearingDeg,
      obstacle,
    });
    const path = [
      reading(40, 6),
      reading(30, 6),
      reading(12, 6),
      reading(6, 6),
      reading(6, -6, 120),
      reading(100, 0, 0, false),
    ];
    let state = 'IDLE';
    const visited = [state];
    for (const o of path) {
      const r = transition(collisionMachine, state, collisionPolicy(state, collisionBucket(o)));
      if (!r.ok) throw new Error(r.error);
      state = r.to;
      visited.push(state);
    }
    expect(visited).toEqual(['IDLE', 'DETECT', 'EVALUATE', 'EVADE', 'EVADE', 'RESUME', 'IDLE']);
    expect(threatOf('near_fast')).toBe('danger');
    expect(threatOf('behind')).toBe('clear');
  });

  it('asks with the state, its valid actions and the reading, and reads the action back', () => {
    const [system, user] = nervePrompt(collisionNerve, 'EVALUATE', {
      t: 1.5,
      distanceM: 12.34,
      closingSpeedMps: 4.06,
      bearingDeg: 9.6,
      obstacle: true,
    });
    expect(system!.content).toMatch(/its name only/);
    expect(user!.content).toContain('Current state: EVALUATE');
    expect(user!.content).toMatch(/- evade\(\) → EVADE/);
    expect(user!.content).toContain('obstacle: yes; distance 12.3 m; closing speed 4.1 m/s; bearing 10 deg');
    expect(parseAction(collisionNerve, 'EVALUATE', 'evade')).toBe('evade');
    expect(parseAction(collisionNerve, 'EVALUATE', ' Evade.\n')).toBe('evade');
    expect(parseAction(collisionNerve, 'EVALUATE', 'I would evade now')).toBe('evade');
    expect(parseAction(collisionNerve, 'EVALUATE', 'resume')).toBeNull();
    expect(parseAction(collisionNerve, 'EVALUATE', '')).toBeNull();
    expect(parseAction(collisionNerve, 'EVALUATE', '{"action": "evade"}')).toBe('evade');
    expect(parseAction(collisionNerve, 'EVALUATE', '{"action":"resume"}')).toBeNull();
    expect(actionSchema(collisionNerve, 'EVADE')).toMatchObject({
      properties: { action: { enum: ['stay', 'clear'] } },
      required: ['action'],
    });
  });
});

describe('the scenario', () => {
  it('is the same stream for the same seed, and any slice of it is the same readings', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 32 - 1 }),
        fc.integer({ min: 0, max: 60 }),
        fc.integer({ min: 0, max: 60 }),
        fc.constantFrom('mixed' as const, 'repetitive' as const),
        (seed, a, b, kind) => {
          const [from, to] = a <= b ? [a, b] : [b, a];
          const whole = scenario(seed, to + 5, kind);
          expect(scenario(seed, to + 5, kind)).toEqual(whole);
          expect(scenarioSlice(seed, from, to, kind)).toEqual(whole.slice(from, to));
          for (const o of whole) expect(observationSchema.safeParse(o).success).toBe(true);
        },
      ),
    );
  });

  it('has episodes: quiet, approaches that reach the danger zone, readings moving away', () => {
    const s = scenario(7, 2000);
    const buckets = new Set(s.map(collisionBucket));
    for (const b of ['none', 'behind', 'close_fast', 'near_fast', 'mid_fast', 'mid_away'])
      expect(buckets, b).toContain(b);
    expect(s.map((o) => o.t).every((t, i) => i === 0 || t > s[i - 1]!.t)).toBe(true);
    expect(scenario(8, 200)).not.toEqual(scenario(7, 200));
  });

  it('repeats one episode exactly in the repetitive kind', () => {
    const s = scenario(3, 400, 'repetitive');
    const keyOf = (o: Observation) => JSON.stringify({ ...o, t: 0 });
    const period = s.findIndex(
      (o, i) => i > 0 && keyOf(o) === keyOf(s[0]!) && s.slice(i, i + 10).every((x, j) => keyOf(x) === keyOf(s[j]!)),
    );
    expect(period).toBeGreaterThan(5);
    expect(keyOf(s[period * 2]!)).toBe(keyOf(s[0]!));
  });

  it('draws from mulberry32 deterministically in [0, 1)', () => {
    const a = mulberry32(42);
    const b = mulberry32(42);
    const xs = Array.from({ length: 1000 }, () => a());
    expect(xs).toEqual(Array.from({ length: 1000 }, () => b()));
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
  });
});

// ---- learning -----------------------------------------------------------------------------------

const cfgArb: fc.Arbitrary<LearningConfig> = fc.record({
  promoteAfter: fc.integer({ min: 1, max: 12 }),
  agreement: fc.double({ min: 0.51, max: 1, noNaN: true }),
  coverage: fc.double({ min: 0.05, max: 1, noNaN: true }),
  window: fc.integer({ min: 1, max: 30 }),
});

/** Decisions over a small space (2 states × 2 buckets × 3 choices) so cases repeat. */
const factArb: fc.Arbitrary<DecisionFact> = fc.record({
  state: fc.constantFrom('IDLE', 'EVADE'),
  bucket: fc.constantFrom('none', 'close_fast'),
  action: fc.constantFrom('stay', 'detect', 'clear', null),
  decidedBy: fc.constantFrom('llm' as const, 'llm' as const, 'llm' as const, 'rule' as const, 'table' as const),
  outcome: fc.constantFrom('ok' as const, 'ok' as const, 'bad' as const, null),
  at: fc.integer({ min: 0, max: 1e9 }),
});

function replay(
  facts: DecisionFact[],
  cfg: LearningConfig,
): {
  learner: Learner;
  events: NerveEvent[];
  steps: Array<{ before: Learner; fact: DecisionFact; after: Learner; events: NerveEvent[] }>;
} {
  let learner = emptyLearner();
  const events: NerveEvent[] = [];
  const steps = [];
  for (const fact of facts) {
    const r = learn(learner, fact, cfg);
    steps.push({ before: learner, fact, after: r.learner, events: r.events });
    events.push(...r.events);
    learner = r.learner;
  }
  return { learner, events, steps };
}

describe('learning: deliberate → hybrid → reflex', () => {
  it('never promotes a rule below the agreement threshold or before enough choices', () => {
    fc.assert(
      fc.property(cfgArb, fc.array(factArb, { maxLength: 80 }), (cfg, facts) => {
        for (const step of replay(facts, cfg).steps) {
          for (const e of step.events.filter((x) => x.kind === 'promote')) {
            const counts = step.after.keys[ruleKey(e.state, e.bucket)]!.counts;
            expect(e.support).toBeGreaterThanOrEqual(cfg.promoteAfter);
            expect((counts[e.action] ?? 0) / e.support).toBeGreaterThanOrEqual(cfg.agreement - 1e-9);
            expect(e.action).not.toBe(invalidChoice);
            expect(step.fact.decidedBy).toBe('llm');
          }
          // A case without a rule after an LLM decision is one whose counts do not earn one.
          const key = ruleKey(step.fact.state, step.fact.bucket);
          const before = step.before.keys[key];
          if (step.fact.decidedBy === 'llm' && !before?.rule) {
            expect(step.after.keys[key]!.rule !== null).toBe(promotable(step.after.keys[key]!.counts, cfg) !== null);
          }
        }
      }),
    );
  });

  it('always removes a rule whose decision went bad, and resets its counters', () => {
    fc.assert(
      fc.property(
        cfgArb,
        fc.array(factArb, { maxLength: 60 }),
        fc.constantFrom('rule' as const, 'table' as const),
        fc.integer({ min: 0, max: 1e9 }),
        (cfg, facts, by, at) => {
          const { learner } = replay(facts, { ...cfg, promoteAfter: 1, agreement: 0.51 });
          for (const [key, stats] of Object.entries(learner.keys)) {
            if (!stats.rule) continue;
            const r = learn(
              learner,
              {
                state: stats.state,
                bucket: stats.bucket,
                action: stats.rule.action,
                decidedBy: by,
                outcome: 'bad',
                at,
              },
              cfg,
            );
            expect(r.learner.keys[key]!.rule).toBeNull();
            expect(r.learner.keys[key]!.counts).toEqual({});
            expect(r.events).toEqual([
              {
                kind: 'demote',
                state: stats.state,
                bucket: stats.bucket,
                action: stats.rule.action,
                support: stats.rule.support,
                agreement: stats.rule.agreement,
                at,
                removed: { rule: stats.rule, counts: stats.counts },
              },
            ]);
            // Other cases are untouched.
            for (const [k, s] of Object.entries(learner.keys)) if (k !== key) expect(r.learner.keys[k]).toBe(s);
            // Its mode can only step back.
            const rank = { deliberate: 0, hybrid: 1, reflex: 2 };
            expect(rank[modeOf(r.learner, cfg)]).toBeLessThanOrEqual(
              rank[modeOf({ ...r.learner, keys: learner.keys }, cfg)],
            );
          }
        },
      ),
    );
  });

  it('undoes any event exactly: a promotion takes the rule away, a demotion gives rule and counters back', () => {
    fc.assert(
      fc.property(cfgArb, fc.array(factArb, { maxLength: 80 }), (cfg, facts) => {
        for (const step of replay(facts, cfg).steps) {
          for (const e of step.events) {
            const key = ruleKey(e.state, e.bucket);
            const r = undo(step.after, e);
            if (!r.ok) throw new Error(r.reason);
            if (e.kind === 'promote') {
              expect(r.value.keys[key]).toEqual({ ...step.after.keys[key]!, rule: null });
            } else {
              // Right after the demotion, the case is as it was before the bad decision.
              expect(r.value.keys[key]).toEqual(step.before.keys[key]);
            }
            expect(r.value.recent).toEqual(step.after.recent);
            // An event cannot be undone twice.
            expect(undo(r.value, e).ok).toBe(false);
          }
        }
      }),
    );
  });

  it('compiles a table that agrees with the rules, and falls back per state elsewhere', () => {
    fc.assert(
      fc.property(cfgArb, fc.array(factArb, { maxLength: 80 }), (cfg, facts) => {
        const { learner } = replay(facts, cfg);
        const table = compileTable(learner, collisionNerve);
        for (const state of states) {
          for (const bucket of collisionBuckets) {
            const rule = learner.keys[ruleKey(state, bucket)]?.rule;
            expect(lookup(table, state, bucket)).toBe(rule ? rule.action : collisionNerve.fallback[state]);
            // A forced reflex decides exactly as the table does, never by the LLM.
            const c = choose('reflex', learner, cfg, collisionNerve, state, bucket);
            expect(c).toEqual({ mode: 'reflex', by: 'table', action: lookup(table, state, bucket) });
          }
        }
        expect(Object.keys(table.entries).sort()).toEqual(
          Object.keys(learner.keys)
            .filter((k) => learner.keys[k]!.rule)
            .sort(),
        );
      }),
    );
  });

  it('is deliberate with no rules, reflex when the rules cover every case seen or the recent decisions, hybrid between', () => {
    fc.assert(
      fc.property(cfgArb, fc.array(factArb, { maxLength: 80 }), (cfg, facts) => {
        const { learner } = replay(facts, cfg);
        const cases = Object.values(learner.keys);
        const ruled = cases.filter((c) => c.rule).length;
        const mode = modeOf(learner, cfg);
        if (ruled === 0) expect(mode).toBe('deliberate');
        else if (ruled === cases.length) expect(mode).toBe('reflex');
        else expect(mode).toBe(coverage(learner) >= cfg.coverage ? 'reflex' : 'hybrid');
        expect(learner.recent.length).toBeLessThanOrEqual(cfg.window);
        for (const state of ['IDLE', 'EVADE']) {
          for (const bucket of ['none', 'close_fast']) {
            const c = choose('auto', learner, cfg, collisionNerve, state, bucket);
            const rule = learner.keys[ruleKey(state, bucket)]?.rule;
            expect(c.mode).toBe(mode);
            expect(c.by === 'llm').toBe(mode === 'deliberate' || !rule);
            expect(choose('deliberate', learner, cfg, collisionNerve, state, bucket).by).toBe('llm');
            expect(choose('hybrid', learner, cfg, collisionNerve, state, bucket).by).toBe(rule ? 'rule' : 'llm');
          }
        }
      }),
    );
  });

  it('goes deliberate → hybrid → reflex on a repetitive stream with a model that answers the ground truth', () => {
    const cfg: LearningConfig = { promoteAfter: 3, agreement: 0.95, coverage: 0.95, window: 50 };
    let learner = emptyLearner();
    let state = 'IDLE';
    const modes: string[] = [];
    for (const [i, o] of scenario(5, 400, 'repetitive').entries()) {
      const bucket = collisionBucket(o);
      const c = choose('auto', learner, cfg, collisionNerve, state, bucket);
      const action = c.by === 'llm' ? collisionPolicy(state, bucket) : c.action;
      learner = learn(
        learner,
        { state, bucket, action, decidedBy: c.by, outcome: judge(collisionNerve, state, o, action), at: i },
        cfg,
      ).learner;
      if (modes.at(-1) !== c.mode) modes.push(c.mode);
      const r = transition(collisionMachine, state, action);
      if (!r.ok) throw new Error(r.error);
      state = r.to;
    }
    expect(modes).toEqual(['deliberate', 'hybrid', 'reflex']);
  });

  it('tallies decisions per mode and decider, LF, promotions and demotions', () => {
    const promote: NerveEvent = {
      kind: 'promote',
      state: 'IDLE',
      bucket: 'none',
      action: 'stay',
      support: 20,
      agreement: 1,
      at: 1,
    };
    let t = addDecision(emptyTally(), {
      mode: 'deliberate',
      decidedBy: 'llm',
      outcome: 'ok',
      action: 'stay',
      lf: 0.1234,
      events: [promote],
    });
    t = addDecision(t, { mode: 'reflex', decidedBy: 'table', outcome: 'bad', action: null, lf: 0.01, events: [] });
    expect(t).toEqual({
      decisions: 2,
      byMode: { deliberate: 1, hybrid: 0, reflex: 1 },
      byDecider: { llm: 1, rule: 0, table: 1 },
      bad: 1,
      invalid: 1,
      lf: 0.1334,
      promotions: 1,
      demotions: 0,
      lastEvent: 'promote IDLE/none → stay (20 choices, 100%)',
    });
  });
});
