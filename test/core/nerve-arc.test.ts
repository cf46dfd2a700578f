/**
 * The reflex arc, pure (core/nerves/arc.ts): lease sizes and costs, what a budget covers, who
 * decides a reading on the armed table, when the buffer must be flushed — and, property-tested
 * over random learners, models, nerves and streams, that deciding on arcs (armed, buffered,
 * flushed when due, learning applied at the flush) makes exactly the decisions, and leaves
 * exactly the learning, of deciding every reading on its own and learning after each.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  affordable,
  arcCost,
  decideOnTable,
  defaultArcSize,
  demotes,
  flushDue,
  leaseCostPerDecision,
  leaseSize,
  maxArcSize,
  wantsArc,
  type Arc,
  type ArcDecision,
} from '../../core/nerves/arc.js';
import { collisionBuckets, collisionMachine, collisionNerve, collisionPolicy } from '../../core/nerves/collision.js';
import {
  choose,
  compileTable,
  emptyLearner,
  learn,
  modeOf,
  ruleKey,
  type DecidedBy,
  type Learner,
  type LearningConfig,
  type ModeSetting,
  type NerveMode,
} from '../../core/nerves/modes.js';
import { judge, type NerveDef, type Observation, type Outcome } from '../../core/nerves/nerve.js';
import { scenario } from '../../core/nerves/scenario.js';
import { transition, validActions } from '../../core/state-machines.js';

const def = collisionNerve;
const states = Object.keys(collisionMachine.states);
const cases = states.flatMap((state) => collisionBuckets.map((bucket) => ({ state, bucket })));
const cfg: LearningConfig = { promoteAfter: 3, agreement: 0.95, coverage: 0.95, window: 100 };
const at = Date.UTC(2026, 10, 24);

const reading = (distanceM: number, closingSpeedMps: number, bearingDeg = 0, obstacle = true): Observation => ({
  t: 0,
  distanceM,
  closingSpeedMps,
  bearingDeg,
  obstacle,
});
/** A learner whose rules are the given actions (each promoted on 5 agreeing choices). */
function ruled(rules: Record<string, string>, recent: string[] = Object.keys(rules)): Learner {
  const keys: Learner['keys'] = {};
  for (const [key, action] of Object.entries(rules)) {
    const [state, bucket] = key.split('/') as [string, string];
    keys[key] = { state, bucket, counts: { [action]: 5 }, rule: { action, support: 5, agreement: 1, promotedAt: 0 } };
  }
  return { keys, recent };
}
const groundTruth = (): Record<string, string> =>
  Object.fromEntries(cases.map((c) => [ruleKey(c.state, c.bucket), collisionPolicy(c.state, c.bucket)]));

describe('the reflex arc: sizes and costs', () => {
  it('leases K decisions, capped by the steps left in the run and by the most one flush carries', () => {
    expect(leaseSize(500)).toBe(defaultArcSize);
    expect(leaseSize(120, 50)).toBe(50);
    expect(leaseSize(7, 50)).toBe(7);
    expect(leaseSize(0, 50)).toBe(0);
    expect(leaseSize(10_000, 10_000)).toBe(maxArcSize);
  });

  it("holds each leased decision at the costliest state's cost", () => {
    expect(leaseCostPerDecision(def)).toBe(0.05);
    expect(leaseCostPerDecision({ costLf: {} })).toBe(0);
  });

  it('leases what a budget covers, compared at the ledger scale', () => {
    expect(affordable(50, 0.05, null)).toBe(50);
    expect(affordable(50, 0.05, 0.2)).toBe(4);
    // 0.15 / 0.05 is 2.9999999999999996 in floating point: still 3 decisions.
    expect(affordable(50, 0.05, 0.15)).toBe(3);
    expect(affordable(50, 0.05, 0.0499)).toBe(0);
    expect(affordable(3, 0.05, 100)).toBe(3);
    expect(affordable(5, 0, 0)).toBe(5);
  });

  it('settles at the sum of the decisions’ state costs, at 4 decimals', () => {
    const costs = [0.01, 0.02, 0.03, 0.05, 0.02, 0.01, 0.01];
    expect(arcCost(costs.map((lf) => ({ lf })))).toBe(0.15);
    expect(arcCost([])).toBe(0);
  });

  it('arms for a forced reflex, and for auto only once reflex is earned', () => {
    for (const earned of ['deliberate', 'hybrid', 'reflex'] as const) {
      expect(wantsArc('reflex', earned)).toBe(true);
      expect(wantsArc('auto', earned)).toBe(earned === 'reflex');
      expect(wantsArc('deliberate', earned)).toBe(false);
      expect(wantsArc('hybrid', earned)).toBe(false);
    }
  });
});

describe('the reflex arc: deciding on the table', () => {
  const table = compileTable(ruled({ 'EVALUATE/near_fast': 'evade', 'IDLE/mid_fast': 'stay' }), def);

  it("decides by the case's rule: the action, where it leads, the outcome and the state's cost", () => {
    const r = decideOnTable(def, table, 'reflex', 'EVALUATE', reading(12, 6), 'k/3', at);
    expect(r).toEqual({
      kind: 'decided',
      decision: {
        key: 'k/3',
        state: 'EVALUATE',
        bucket: 'near_fast',
        action: 'evade',
        to: 'EVADE',
        outcome: 'ok',
        lf: 0.03,
        at,
      },
    });
    // A wrong rule decides too, and is judged bad.
    expect(decideOnTable(def, table, 'auto', 'IDLE', reading(30, 6), 'k/4', at)).toMatchObject({
      kind: 'decided',
      decision: { action: 'stay', to: 'IDLE', outcome: 'bad', lf: 0.01 },
    });
  });

  it("takes the state's fallback in a forced reflex, and asks in auto, where no rule covers the case", () => {
    expect(decideOnTable(def, table, 'reflex', 'IDLE', reading(100, 0, 0, false), 'k', at)).toMatchObject({
      kind: 'decided',
      decision: { bucket: 'none', action: 'detect', to: 'DETECT', outcome: 'bad' },
    });
    expect(decideOnTable(def, table, 'auto', 'IDLE', reading(100, 0, 0, false), 'k', at)).toEqual({ kind: 'ask' });
    const noFallback = { ...def, fallback: {} };
    expect(
      decideOnTable(
        noFallback,
        compileTable(emptyLearner(), noFallback),
        'reflex',
        'IDLE',
        reading(100, 0, 0, false),
        'k',
        at,
      ),
    ).toEqual({ kind: 'ask' });
  });

  it('flushes when the lease is used up, and at once after a bad decision of a rule, not of a fallback', () => {
    const d = (over: Partial<ArcDecision>): ArcDecision => ({
      key: 'k',
      state: 'EVALUATE',
      bucket: 'near_fast',
      action: 'evade',
      to: 'EVADE',
      outcome: 'ok',
      lf: 0.03,
      at,
      ...over,
    });
    const arc = (buffer: ArcDecision[], decisions = 3): Arc => ({ leaseKey: 'lease', decisions, table, buffer });
    expect(flushDue(arc([d({})]))).toBeNull();
    expect(flushDue(arc([d({}), d({}), d({})]))).toBe('full');
    const wrongRule = d({ state: 'IDLE', bucket: 'mid_fast', action: 'stay', to: 'IDLE', outcome: 'bad' });
    expect(demotes(table, wrongRule)).toBe(true);
    expect(flushDue(arc([wrongRule]))).toBe('demote');
    const badFallback = d({ state: 'IDLE', bucket: 'none', action: 'detect', to: 'DETECT', outcome: 'bad' });
    expect(demotes(table, badFallback)).toBe(false);
    expect(flushDue(arc([badFallback]))).toBeNull();
  });
});

// ---- equivalence with deciding one by one ---------------------------------------------------

type Model = (state: string, bucket: string) => string;
interface Made {
  step: number;
  state: string;
  bucket: string;
  action: string | null;
  decidedBy: DecidedBy;
  mode: NerveMode;
  outcome: Outcome;
}

function moved(nerve: NerveDef, state: string, action: string | null): string {
  const r = action === null ? null : transition(nerve.machine, state, action);
  return r?.ok ? r.to : state;
}

/** Every reading decided on its own (`choose`, as nerveDecide does), learning after each. */
function oneByOne(
  nerve: NerveDef,
  start: Learner,
  stream: Observation[],
  setting: ModeSetting,
  model: Model,
): { made: Made[]; learner: Learner } {
  let learner = start;
  let state = nerve.machine.initial;
  const made: Made[] = [];
  stream.forEach((o, step) => {
    ({ learner, state } = decideOne(nerve, learner, state, o, step, setting, model, made));
  });
  return { made, learner };
}

/** One reading decided as `nerveDecide` decides it (chosen, asked if need be, learned from), recorded in `made`. */
function decideOne(
  nerve: NerveDef,
  learner: Learner,
  state: string,
  o: Observation,
  step: number,
  setting: ModeSetting,
  model: Model,
  made: Made[],
): { learner: Learner; state: string } {
  const bucket = nerve.bucket(o);
  const c = choose(setting, learner, cfg, nerve, state, bucket);
  const action = c.by === 'llm' ? model(state, bucket) : c.action;
  const outcome = judge(nerve, state, o, action);
  made.push({ step, state, bucket, action, decidedBy: c.by, mode: c.mode, outcome });
  return {
    learner: learn(learner, { state, bucket, action, decidedBy: c.by, outcome, at: step }, cfg).learner,
    state: moved(nerve, state, action),
  };
}

/** The same readings as the nerve workflow takes them on reflex arcs: armed, buffered, flushed when due. */
function onArcs(
  nerve: NerveDef,
  start: Learner,
  stream: Observation[],
  setting: ModeSetting,
  model: Model,
  size: number,
) {
  let learner = start;
  let state = nerve.machine.initial;
  let arc: Arc | null = null;
  const made: Made[] = [];
  const leases: number[] = [];
  let flushes = 0;
  const flush = (a: Arc) => {
    for (const d of a.buffer)
      learner = learn(
        learner,
        {
          state: d.state,
          bucket: d.bucket,
          action: d.action,
          decidedBy: 'table',
          outcome: d.outcome,
          at: Number(d.key),
        },
        cfg,
      ).learner;
    flushes++;
    return null;
  };
  stream.forEach((o, step) => {
    if (!arc && wantsArc(setting, modeOf(learner, cfg))) {
      arc = {
        leaseKey: `lease/${step}`,
        decisions: leaseSize(stream.length - step, size),
        table: compileTable(learner, nerve),
        buffer: [],
      };
      leases.push(arc.decisions);
    }
    if (arc) {
      const next = decideOnTable(nerve, arc.table, setting, state, o, String(step), step);
      if (next.kind === 'decided') {
        const d = next.decision;
        arc.buffer.push(d);
        made.push({
          step,
          state: d.state,
          bucket: d.bucket,
          action: d.action,
          decidedBy: 'table',
          mode: 'reflex',
          outcome: d.outcome,
        });
        state = d.to;
        if (flushDue(arc)) arc = flush(arc);
        return;
      }
      arc = flush(arc);
    }
    ({ learner, state } = decideOne(nerve, learner, state, o, step, setting, model, made));
  });
  if (arc) flush(arc);
  return { made, learner, leases, flushes };
}

const caseArb = fc.constantFrom(...cases);
/** Rules on some cases (right or not), counted choices without a rule on others, a recent window. */
const learnerArb: fc.Arbitrary<Learner> = fc
  .record({
    entries: fc.array(fc.record({ c: caseArb, pick: fc.nat(), right: fc.boolean(), rule: fc.boolean() }), {
      maxLength: 70,
    }),
    recent: fc.array(caseArb, { maxLength: 100 }),
  })
  .map(({ entries, recent }) => {
    const keys: Learner['keys'] = {};
    for (const { c, pick, right, rule } of entries) {
      const valid = validActions(collisionMachine, c.state);
      const action = right ? collisionPolicy(c.state, c.bucket) : valid[pick % valid.length]!;
      keys[ruleKey(c.state, c.bucket)] = {
        ...c,
        counts: { [action]: 2 },
        rule: rule ? { action, support: 2, agreement: 1, promotedAt: 0 } : null,
      };
    }
    return { keys, recent: recent.map((c) => ruleKey(c.state, c.bucket)) };
  });
/** A model that answers the ground truth except in some cases, where it names another valid action. */
const modelArb: fc.Arbitrary<Model> = fc
  .dictionary(fc.constantFrom(...cases.map((c) => ruleKey(c.state, c.bucket))), fc.nat())
  .map((wrong) => (state, bucket) => {
    const n = wrong[ruleKey(state, bucket)];
    const valid = validActions(collisionMachine, state);
    return n === undefined ? collisionPolicy(state, bucket) : valid[n % valid.length]!;
  });
/** The collision nerve, or one whose table lacks the fallback of some states (a forced reflex asks there). */
const nerveArb: fc.Arbitrary<NerveDef> = fc
  .subarray(states)
  .map((kept) =>
    kept.length === states.length
      ? def
      : { ...def, fallback: Object.fromEntries(kept.map((s) => [s, def.fallback[s]!])) },
  );

describe('the reflex arc: the same decisions as one by one', () => {
  it('makes every decision, and leaves the learning, exactly as deciding each reading on its own would', () => {
    fc.assert(
      fc.property(
        nerveArb,
        learnerArb,
        modelArb,
        fc.constantFrom<ModeSetting>('reflex', 'auto'),
        fc.integer({ min: 0, max: 2 ** 32 - 1 }),
        fc.integer({ min: 1, max: 120 }),
        fc.integer({ min: 1, max: 60 }),
        fc.constantFrom('mixed' as const, 'repetitive' as const),
        (nerve, learner, model, setting, seed, n, size, kind) => {
          const stream = scenario(seed, n, kind);
          const one = oneByOne(nerve, learner, stream, setting, model);
          const arcs = onArcs(nerve, learner, stream, setting, model, size);
          expect(arcs.made).toEqual(one.made);
          expect(arcs.learner).toEqual(one.learner);
          // Every lease is flushed once, and covers no more than the steps left.
          expect(arcs.flushes).toBe(arcs.leases.length);
          expect(arcs.leases.every((k) => k >= 1 && k <= size)).toBe(true);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('decides a forced reflex on a right table in leases of K: 3 arms and 3 flushes for 120 readings', () => {
    const stream = scenario(5, 120, 'repetitive');
    const r = onArcs(
      def,
      ruled(groundTruth()),
      stream,
      'reflex',
      () => {
        throw new Error('the LLM must not be asked');
      },
      50,
    );
    expect(r.leases).toEqual([50, 50, 20]);
    expect(r.flushes).toBe(3);
    expect(r.made.every((m) => m.decidedBy === 'table' && m.outcome === 'ok')).toBe(true);
  });

  it('flushes at a bad decision of a rule, and the next decision of that case is no longer the rule’s', () => {
    // A wrong rule: an obstacle 20–50 m ahead closing fast is ignored (the truth is to look at it).
    const rules = { ...groundTruth(), 'IDLE/mid_fast': 'stay' };
    const stream = scenario(5, 60, 'repetitive');
    const r = onArcs(def, ruled(rules), stream, 'reflex', () => 'stay', 50);
    const bad = r.made.findIndex((m) => m.outcome === 'bad');
    expect(r.made[bad]).toMatchObject({ state: 'IDLE', bucket: 'mid_fast', action: 'stay', decidedBy: 'table' });
    // The demotion took effect at once: the next reading is the same case (the nerve stayed IDLE), and the fallback takes it.
    expect(r.made[bad + 1]).toMatchObject({
      state: 'IDLE',
      bucket: 'mid_fast',
      action: 'detect',
      decidedBy: 'table',
      outcome: 'ok',
    });
    expect(r.made.filter((m) => m.outcome === 'bad')).toHaveLength(1);
    // The first lease was cut short there (flushed after bad + 1 decisions); the rest are leased anew.
    const rest: number[] = [];
    for (let left = 60 - (bad + 1); left > 0; left -= 50) rest.push(Math.min(50, left));
    expect(r.leases).toEqual([50, ...rest]);
    expect(r.flushes).toBe(r.leases.length);
    expect(r.learner.keys['IDLE/mid_fast']?.rule).toBeNull();
  });
});
