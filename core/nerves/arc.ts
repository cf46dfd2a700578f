/**
 * The reflex arc: how a nerve in reflex decides inside its workflow, without an activity (and its
 * database round trips) per decision. One activity arms the arc: the compiled transition table
 * and a lease on the nerve's budget for the next decisions, each held at the costliest state's
 * cost. The workflow then decides each reading on the table here, buffering the decisions, and
 * one activity flushes the buffer: records the decisions, learns from them, settles the lease at
 * what they cost.
 *
 * The buffer is flushed when the lease is used up, when a rule's decision went wrong (its
 * demotion must take effect before the next decision), when the table cannot decide a reading
 * (the LLM is asked), and before the run ends or continues as new.
 *
 * Pure: the workflow calls it; the activities (activities/nerves.ts) share the sizes.
 */
import { transition } from '../state-machines.js';
import { lookup, ruleKey, type ModeSetting, type NerveMode, type TransitionTable } from './modes.js';
import { judge, stateCost, type NerveDef, type Observation, type Outcome } from './nerve.js';

/** Decisions one lease covers unless the workflow asks for another size. */
export const defaultArcSize = 50;
/** The most decisions one lease (and one flush) may cover: the flush's input stays well under 64 KB. */
export const maxArcSize = 100;

/** One decision of the arc, as buffered and as the flush records it (decided by the table). */
export interface ArcDecision {
  /** The decision's idempotency key: the same key `nerveDecide` would use for this step. */
  key: string;
  state: string;
  bucket: string;
  action: string;
  to: string;
  outcome: Outcome;
  /** The state's cost: what the lease is settled at for this decision. */
  lf: number;
  /** The decision's time in ms (the workflow's clock). */
  at: number;
}

/** An armed arc: the lease the activity took and the table it compiled, with the decisions not yet flushed. */
export interface Arc {
  leaseKey: string;
  /** Decisions the lease covers. */
  decisions: number;
  table: TransitionTable;
  buffer: ArcDecision[];
}

/** Whether a run decides on the arc: a forced reflex, or `auto` once the rules have earned reflex. */
export function wantsArc(setting: ModeSetting, earned: NerveMode): boolean {
  return setting === 'reflex' || (setting === 'auto' && earned === 'reflex');
}

/** How many decisions to lease: `size`, capped by the steps left in this run (0 when none are left). */
export function leaseSize(stepsLeft: number, size = defaultArcSize): number {
  return Math.max(0, Math.min(Math.floor(size), maxArcSize, Math.floor(stepsLeft)));
}

/** What one leased decision is held at: the costliest state's cost, so that any decision fits. */
export function leaseCostPerDecision(def: Pick<NerveDef, 'costLf'>): number {
  return Math.max(0, ...Object.values(def.costLf));
}

/**
 * How many of `wanted` decisions `available` LF covers at `perDecision` each (null: an unlimited
 * budget covers all). Compared on the ledger's 4 decimals, so that 0.2 covers 4 at 0.05.
 */
export function affordable(wanted: number, perDecision: number, available: number | null): number {
  if (available === null || perDecision <= 0) return wanted;
  return Math.max(0, Math.min(wanted, Math.floor(Math.round(available * 10_000) / Math.round(perDecision * 10_000))));
}

type TableStep = { kind: 'decided'; decision: ArcDecision } | { kind: 'ask' };

/**
 * One reading decided on the armed table. A forced reflex takes the case's rule, else the state's
 * fallback (core/nerves/modes.ts `lookup`, as `choose` would); `auto` takes only a rule, since a
 * case no rule covers goes to the LLM. `ask`: the table cannot decide it.
 */
export function decideOnTable(
  def: NerveDef,
  table: TransitionTable,
  setting: ModeSetting,
  state: string,
  o: Observation,
  key: string,
  at: number,
): TableStep {
  const bucket = def.bucket(o);
  const action = setting === 'reflex' ? lookup(table, state, bucket) : (table.entries[ruleKey(state, bucket)] ?? null);
  if (action === null) return { kind: 'ask' };
  const moved = transition(def.machine, state, action);
  return {
    kind: 'decided',
    decision: {
      key,
      state,
      bucket,
      action,
      to: moved.ok ? moved.to : state,
      outcome: judge(def, state, o, action),
      lf: stateCost(def, state),
      at,
    },
  };
}

/**
 * Whether a decision the table made can change the learning so that the table is wrong now: a
 * bad outcome of a rule demotes it (a fallback's bad outcome removes no rule).
 */
export function demotes(
  table: TransitionTable,
  d: Pick<ArcDecision, 'state' | 'bucket' | 'action' | 'outcome'>,
): boolean {
  return d.outcome === 'bad' && table.entries[ruleKey(d.state, d.bucket)] === d.action;
}

/** Why the arc must flush after its latest decision, or null to go on: the lease used up, or a demotion. */
export function flushDue(arc: Pick<Arc, 'decisions' | 'table' | 'buffer'>): 'full' | 'demote' | null {
  const last = arc.buffer.at(-1);
  if (last && demotes(arc.table, last)) return 'demote';
  return arc.buffer.length >= arc.decisions ? 'full' : null;
}

/** What the lease is settled at: the buffered decisions' costs (4 decimals, as the ledger keeps them). */
export function arcCost(buffer: readonly Pick<ArcDecision, 'lf'>[]): number {
  return Math.round(buffer.reduce((s, d) => s + d.lf, 0) * 10_000) / 10_000;
}
