/**
 * How a nerve goes from deliberate to reflex, and back. Three modes per nerve and agent:
 *
 * - `deliberate`: the LLM picks every transition;
 * - `hybrid`: learned rules decide the (state, bucket) cases they cover, the LLM the rest;
 * - `reflex`: a compiled transition table decides everything, no LLM.
 *
 * Learning counts the LLM's choices per (state, bucket). A rule is promoted once a case has
 * `promoteAfter` counted choices and one action holds at least `agreement` of them: the model's
 * consistency is the evidence, since outcomes may come late or never. A rule answers to
 * outcomes: a decision it made that turns out bad demotes it (the rule goes, the case's
 * counters restart from zero). The mode follows the rules: deliberate with none, reflex when
 * they cover every case seen or `coverage` of the recent decisions, hybrid in between. Every
 * promotion and demotion is an event, returned as data, and `undo` reverses one.
 *
 * Pure: no I/O, no clock (times come in with the decisions).
 */
import { z } from 'zod';
import type { NerveDef, Outcome } from './nerve.js';

export const nerveModes = ['deliberate', 'hybrid', 'reflex'] as const;
export type NerveMode = (typeof nerveModes)[number];
/** What a workflow asks for: a fixed mode, or `auto` (the mode the rules have earned). */
export const modeSettings = ['auto', ...nerveModes] as const;
export type ModeSetting = (typeof modeSettings)[number];
export const decidedByValues = ['llm', 'rule', 'table'] as const;
export type DecidedBy = (typeof decidedByValues)[number];

export const learningConfigSchema = z.strictObject({
  /** Counted LLM choices a case needs before its rule is promoted. */
  promoteAfter: z.number().int().min(1).max(100_000).default(20),
  /** The share of those choices one action must hold. */
  agreement: z.number().gt(0.5).max(1).default(0.95),
  /** Reflex once the rules cover this share of the recent decisions (or every case seen). */
  coverage: z.number().gt(0).max(1).default(0.95),
  /** How many recent decisions the coverage is measured on. */
  window: z.number().int().min(1).max(10_000).default(100),
});
export type LearningConfig = z.output<typeof learningConfigSchema>;
export const defaultLearning: LearningConfig = learningConfigSchema.parse({});

/** What an unreadable reply counts as: a choice no rule can be made of. */
export const invalidChoice = '(invalid)';

interface Rule {
  action: string;
  /** Counted choices when it was promoted. */
  support: number;
  /** The share of them that chose `action`. */
  agreement: number;
  /** When (ms since the epoch, the decision's time). */
  promotedAt: number;
}

/** One (state, bucket) case: its counted LLM choices and its rule, if promoted. */
export interface KeyStats {
  state: string;
  bucket: string;
  counts: Record<string, number>;
  rule: Rule | null;
}

/** A nerve's learning: its cases, and the keys of its recent decisions (oldest first). */
export interface Learner {
  keys: Record<string, KeyStats>;
  recent: string[];
}

export const emptyLearner = (): Learner => ({ keys: {}, recent: [] });

export function ruleKey(state: string, bucket: string): string {
  return `${state}/${bucket}`;
}

interface PromoteEvent {
  kind: 'promote';
  state: string;
  bucket: string;
  action: string;
  support: number;
  agreement: number;
  at: number;
}
interface DemoteEvent {
  kind: 'demote';
  state: string;
  bucket: string;
  action: string;
  support: number;
  agreement: number;
  at: number;
  /** What the demotion took away, so that an undo can give it back. */
  removed: { rule: Rule; counts: Record<string, number> };
}
export type NerveEvent = PromoteEvent | DemoteEvent;

/** A decision as learning sees it. `action` null: the reply named no valid action. */
export interface DecisionFact {
  state: string;
  bucket: string;
  action: string | null;
  decidedBy: DecidedBy;
  outcome: Outcome;
  at: number;
}

interface Tally {
  action: string | null;
  support: number;
  agreement: number;
}

/** The most chosen action (ties: the first by name), how many choices in all, and its share. */
function tally(counts: Record<string, number>): Tally {
  let support = 0;
  let action: string | null = null;
  let best = 0;
  for (const a of Object.keys(counts).sort()) {
    const n = counts[a] ?? 0;
    support += n;
    if (n > best) {
      action = a;
      best = n;
    }
  }
  return { action, support, agreement: support === 0 ? 0 : best / support };
}

/** Whether counts earn a rule: enough choices, and one valid action holding the agreement share. */
export function promotable(
  counts: Record<string, number>,
  cfg: Pick<LearningConfig, 'promoteAfter' | 'agreement'>,
): Tally | null {
  const t = tally(counts);
  if (t.action === null || t.action === invalidChoice || t.support < cfg.promoteAfter) return null;
  // Compared on counts, not on the rounded share: 19 of 20 meets 0.95 exactly.
  const top = counts[t.action] ?? 0;
  return top >= cfg.agreement * t.support - 1e-9 ? t : null;
}

/** One case after one decision, with the events it caused. */
export function learnKey(
  stats: KeyStats | undefined,
  d: DecisionFact,
  cfg: Pick<LearningConfig, 'promoteAfter' | 'agreement'>,
): { stats: KeyStats; events: NerveEvent[] } {
  const s: KeyStats = stats ?? { state: d.state, bucket: d.bucket, counts: {}, rule: null };
  if (d.decidedBy === 'llm') {
    const choice = d.action ?? invalidChoice;
    const counts = { ...s.counts, [choice]: (s.counts[choice] ?? 0) + 1 };
    const earned = s.rule === null ? promotable(counts, cfg) : null;
    if (!earned) return { stats: { ...s, counts }, events: [] };
    const rule: Rule = {
      action: earned.action!,
      support: earned.support,
      agreement: earned.agreement,
      promotedAt: d.at,
    };
    return {
      stats: { ...s, counts, rule },
      events: [
        {
          kind: 'promote',
          state: s.state,
          bucket: s.bucket,
          action: rule.action,
          support: rule.support,
          agreement: rule.agreement,
          at: d.at,
        },
      ],
    };
  }
  if (d.outcome === 'bad' && s.rule !== null && s.rule.action === d.action) {
    const { rule } = s;
    return {
      stats: { ...s, counts: {}, rule: null },
      events: [
        {
          kind: 'demote',
          state: s.state,
          bucket: s.bucket,
          action: rule.action,
          support: rule.support,
          agreement: rule.agreement,
          at: d.at,
          removed: { rule, counts: s.counts },
        },
      ],
    };
  }
  return { stats: s, events: [] };
}

/** The learner after one decision (its case updated, the decision in the recent window). */
export function learn(
  learner: Learner,
  d: DecisionFact,
  cfg: Pick<LearningConfig, 'promoteAfter' | 'agreement' | 'window'>,
): { learner: Learner; events: NerveEvent[] } {
  const key = ruleKey(d.state, d.bucket);
  const { stats, events } = learnKey(learner.keys[key], d, cfg);
  const recent = [...learner.recent, key].slice(-cfg.window);
  return { learner: { keys: { ...learner.keys, [key]: stats }, recent }, events };
}

type UndoResult<T> = { ok: true; value: T } | { ok: false; reason: string };

/**
 * Reverse one event on its case. A promotion: the rule goes (the counts stay). A demotion: the
 * rule comes back with the counts it reset, added to any counted since.
 */
export function undoKey(stats: KeyStats | undefined, event: NerveEvent): UndoResult<KeyStats> {
  const what = `${event.kind} of ${ruleKey(event.state, event.bucket)} → ${event.action}`;
  if (event.kind === 'promote') {
    if (!stats?.rule || stats.rule.action !== event.action || stats.rule.promotedAt !== event.at)
      return { ok: false, reason: `cannot undo the ${what}: that rule is no longer in force` };
    return { ok: true, value: { ...stats, rule: null } };
  }
  if (stats?.rule)
    return { ok: false, reason: `cannot undo the ${what}: the case has a rule again (${stats.rule.action})` };
  const counts: Record<string, number> = { ...event.removed.counts };
  for (const [a, n] of Object.entries(stats?.counts ?? {})) counts[a] = (counts[a] ?? 0) + n;
  return { ok: true, value: { state: event.state, bucket: event.bucket, counts, rule: event.removed.rule } };
}

/** The learner with one event reversed (see undoKey). */
export function undo(learner: Learner, event: NerveEvent): UndoResult<Learner> {
  const key = ruleKey(event.state, event.bucket);
  const r = undoKey(learner.keys[key], event);
  return r.ok ? { ok: true, value: { ...learner, keys: { ...learner.keys, [key]: r.value } } } : r;
}

/** The share of the recent decisions whose case has a rule now (0 with no decisions). */
export function coverage(learner: Learner): number {
  if (learner.recent.length === 0) return 0;
  return learner.recent.filter((k) => learner.keys[k]?.rule).length / learner.recent.length;
}

/** The mode the rules have earned. */
export function modeOf(learner: Learner, cfg: Pick<LearningConfig, 'coverage'>): NerveMode {
  const cases = Object.values(learner.keys);
  const ruled = cases.filter((k) => k.rule).length;
  if (ruled === 0) return 'deliberate';
  if (ruled === cases.length || coverage(learner) >= cfg.coverage) return 'reflex';
  return 'hybrid';
}

/** The rules as a lookup: one entry per ruled case, and the nerve's fallback per state for the rest. */
export interface TransitionTable {
  entries: Record<string, string>;
  fallback: Record<string, string>;
}

export function compileTable(learner: Learner, def: Pick<NerveDef, 'fallback'>): TransitionTable {
  const entries: Record<string, string> = {};
  for (const [key, s] of Object.entries(learner.keys)) if (s.rule) entries[key] = s.rule.action;
  return { entries, fallback: { ...def.fallback } };
}

/** The table's action for a case: its rule's, else the state's fallback (null: the state has none). */
export function lookup(table: TransitionTable, state: string, bucket: string): string | null {
  return table.entries[ruleKey(state, bucket)] ?? table.fallback[state] ?? null;
}

/** Who decides a case, in which mode: the LLM, a rule, or the table (with the action). */
type Choice = { mode: NerveMode; by: 'llm' } | { mode: NerveMode; by: 'rule' | 'table'; action: string };

/**
 * Who decides. A fixed mode is obeyed (a forced reflex takes the table's fallback where it has
 * no rule); `auto` uses the earned mode, and asks the LLM for a case no rule covers even in
 * reflex, since it may step back.
 */
export function choose(
  setting: ModeSetting,
  learner: Learner,
  cfg: Pick<LearningConfig, 'coverage'>,
  def: Pick<NerveDef, 'fallback'>,
  state: string,
  bucket: string,
): Choice {
  const rule = learner.keys[ruleKey(state, bucket)]?.rule ?? null;
  if (setting === 'deliberate') return { mode: 'deliberate', by: 'llm' };
  if (setting === 'hybrid')
    return rule ? { mode: 'hybrid', by: 'rule', action: rule.action } : { mode: 'hybrid', by: 'llm' };
  if (setting === 'reflex') {
    const action = rule?.action ?? def.fallback[state];
    return action === undefined ? { mode: 'reflex', by: 'llm' } : { mode: 'reflex', by: 'table', action };
  }
  const mode = modeOf(learner, cfg);
  if (mode === 'deliberate' || !rule) return { mode, by: 'llm' };
  return { mode, by: mode === 'reflex' ? 'table' : 'rule', action: rule.action };
}
