/**
 * Anti-stagnation maths: Reflex-lite parameter steps, the low-novelty streak
 * that escalates to a break-loop strategy, the diagnosis of why novelty is low, and the choice
 * of strategy (cheap first, steered by each strategy's measured before/after effect).
 */

export const stagnationClasses = ['no_new_data', 'monotone_context', 'repeated_thoughts', 'fatigue'] as const;
export type StagnationClass = (typeof stagnationClasses)[number];

export interface SamplingParams {
  temperature: number;
  topP: number;
  presencePenalty: number;
  frequencyPenalty: number;
}

export const reflexLimits = {
  maxTemperature: 1.5,
  maxTopP: 0.95,
  maxPenalty: 1.5,
  temperatureStep: 0.2,
  topPStep: 0.05,
  penaltyStep: 0.3,
} as const;

const round = (x: number) => Math.round(x * 1000) / 1000;

/**
 * One Reflex-lite step: temperature +0.2 (≤ 1.5), presence/frequency penalty up (≤ 1.5),
 * top_p +0.05 (≤ 0.95). Never lowers a parameter that is already above its cap.
 */
export function reflexLite(p: SamplingParams): SamplingParams {
  // A value at or above its cap is left exactly as it is (rounding must never move it up).
  const up = (v: number, step: number, cap: number) => (v >= cap ? v : Math.max(v, round(Math.min(cap, v + step))));
  return {
    temperature: up(p.temperature, reflexLimits.temperatureStep, reflexLimits.maxTemperature),
    topP: up(p.topP, reflexLimits.topPStep, reflexLimits.maxTopP),
    presencePenalty: up(p.presencePenalty, reflexLimits.penaltyStep, reflexLimits.maxPenalty),
    frequencyPenalty: up(p.frequencyPenalty, reflexLimits.penaltyStep, reflexLimits.maxPenalty),
  };
}

/** Novelty recovered: step every parameter halfway back toward the defaults. */
export function relaxReflex(p: SamplingParams, defaults: SamplingParams): SamplingParams {
  const back = (v: number, d: number) => (Math.abs(v - d) < 0.01 ? d : round(d + (v - d) / 2));
  return {
    temperature: back(p.temperature, defaults.temperature),
    topP: back(p.topP, defaults.topP),
    presencePenalty: back(p.presencePenalty, defaults.presencePenalty),
    frequencyPenalty: back(p.frequencyPenalty, defaults.frequencyPenalty),
  };
}

/** The rephrasing instruction Reflex-lite adds to the next tick's prompt. */
export const rephrasePrompt =
  'Anti-stagnation: your last replies repeat each other. Approach the situation from a different angle: question an assumption, pick a neglected goal or note, or try a new command.';

/** What the workflow carries between ticks (continue-as-new included). */
export interface StagnationState {
  /** Consecutive ticks with novelty below the threshold. */
  lowStreak: number;
  /** Consecutive ticks with anxiety > 3. */
  anxietyStreak: number;
  /** A strategy being measured: its novelty before and the tick it was applied. */
  pending: { strategyId: number; metricId: number; tick: number; noveltyBefore: number } | null;
  /** The last tick a strategy was applied (cool-down). */
  lastStrategyTick: number;
}

export const initialStagnationState = (): StagnationState => ({
  lowStreak: 0,
  anxietyStreak: 0,
  pending: null,
  lastStrategyTick: 0,
});

export interface StagnationPolicy {
  /** Novelty (0–100) below which a tick counts as stagnant. */
  lowNovelty: number;
  /** Reflex-lite fires at this low streak (1 = on the first stagnant tick). */
  liteAfter: number;
  /** A break-loop strategy fires at this low streak. */
  strategyAfter: number;
  /** Anxiety streak that triggers Reflex-lite. */
  anxietyTicks: number;
  /** Ticks after a strategy before its effect is measured and another may fire. */
  evaluateAfter: number;
}

export const defaultStagnationPolicy: StagnationPolicy = {
  lowNovelty: 35,
  liteAfter: 1,
  strategyAfter: 3,
  anxietyTicks: 3,
  evaluateAfter: 2,
};

export interface StagnationDecision {
  state: StagnationState;
  reflexLite: boolean;
  /** Choose and apply a strategy this tick. */
  strategy: boolean;
  /** Novelty is back: relax the parameters. */
  relax: boolean;
  /** The pending strategy's effect is due (novelty after = this tick's). */
  evaluate: StagnationState['pending'];
  stagnant: boolean;
}

/** Fold one tick's novelty and anxiety into the state and decide the reflexes. Pure. */
export function decideStagnation(
  prev: StagnationState,
  tick: number,
  novelty: number,
  anxietyStreak: number,
  policy: StagnationPolicy = defaultStagnationPolicy,
): StagnationDecision {
  const stagnant = novelty < policy.lowNovelty;
  const lowStreak = stagnant ? prev.lowStreak + 1 : 0;
  const due = prev.pending && tick - prev.pending.tick >= policy.evaluateAfter ? prev.pending : null;
  const cooling = prev.pending !== null && !due;
  const strategy = stagnant && lowStreak >= policy.strategyAfter && !cooling;
  const reflex = (stagnant && lowStreak >= policy.liteAfter) || anxietyStreak >= policy.anxietyTicks;
  return {
    state: {
      lowStreak,
      anxietyStreak,
      pending: due ? null : prev.pending,
      lastStrategyTick: strategy ? tick : prev.lastStrategyTick,
    },
    reflexLite: reflex,
    strategy,
    relax: !stagnant && prev.lowStreak > 0,
    evaluate: due,
    stagnant,
  };
}

interface DiagnosisInput {
  /** Notes and process results that arrived in the recent window. */
  newInputs: number;
  /** Ticks the context mode has stayed the same. */
  sameModeTicks: number;
  /** Diary + notebook + graph entries the agent could draw on. */
  dataRichness: number;
  /** Mean strength (0–5) of boredom/fatigue/frustration over recent ticks. */
  tiredness: number;
  /** Ticks since the last pause. */
  ticksSinceRest: number;
}

export const diagnosisThresholds = { tired: 3.5, restTicks: 500, richData: 10, monotoneTicks: 20 } as const;

/** Why novelty stays low (first matching rule): fatigue, rich data, monotone context, no new data. */
export function diagnose(d: DiagnosisInput): StagnationClass {
  if (d.tiredness >= diagnosisThresholds.tired || d.ticksSinceRest >= diagnosisThresholds.restTicks) return 'fatigue';
  if (d.newInputs === 0 && d.dataRichness < diagnosisThresholds.richData) return 'no_new_data';
  if (d.dataRichness >= diagnosisThresholds.richData) return 'repeated_thoughts';
  if (d.sameModeTicks >= diagnosisThresholds.monotoneTicks) return 'monotone_context';
  return 'no_new_data';
}

export interface StrategyStats {
  id: number;
  name: string;
  class: StagnationClass;
  cost: number;
  /** Times applied. */
  uses: number;
  /** Times its effect was measured (defaults to `uses`): the failure rule counts these. */
  evaluations?: number;
  /** Mean effect over the measured applications. */
  meanEffect: number;
  enabled: boolean;
}

/**
 * Pick a break-loop strategy for a diagnosis: enabled strategies of that class, cheapest
 * first; those measured at least twice with no positive effect go last; among equal cost the
 * better measured effect, then the one used least recently (`recent`, most recent last).
 * Falls back to any class when the diagnosed one has none. Null when nothing is enabled.
 */
export function chooseStrategy<S extends StrategyStats>(
  all: readonly S[],
  cls: StagnationClass,
  recent: readonly number[] = [],
): S | null {
  const enabled = all.filter((s) => s.enabled);
  const pool = enabled.some((s) => s.class === cls) ? enabled.filter((s) => s.class === cls) : enabled;
  if (pool.length === 0) return null;
  const failed = (s: S) => (s.evaluations ?? s.uses) >= 2 && s.meanEffect <= 0;
  const recency = (s: S) => recent.lastIndexOf(s.id);
  const sorted = [...pool].sort(
    (a, b) =>
      Number(failed(a)) - Number(failed(b)) ||
      a.cost - b.cost ||
      b.meanEffect - a.meanEffect ||
      recency(a) - recency(b) ||
      a.id - b.id,
  );
  return sorted[0]!;
}

/** Running mean after one more measured effect; `evaluations` = effects measured before this one. */
export function updateMeanEffect(mean: number, evaluations: number, effect: number): number {
  const n = Math.max(0, evaluations);
  return (mean * n + effect) / (n + 1);
}

/** What a strategy does, by its `params.action`. */
export type StrategyAction =
  'note_user' | 'ask_peers' | 'context_mode' | 'flashback' | 'meta_analysis' | 'switch_llm' | 'pause';

/**
 * The built-in strategies seeded per agent (cheap first within each class). A peer's attention
 * costs less than the user's: with a peer to ask, it is asked first.
 */
export const defaultStrategies: ReadonlyArray<{
  name: string;
  class: StagnationClass;
  cost: number;
  description: string;
  params: { action: StrategyAction; ticks?: number };
}> = [
  {
    name: 'ask_peers',
    class: 'no_new_data',
    cost: 0.5,
    description: 'ask the most trusted reachable peer for a new angle via a message',
    params: { action: 'ask_peers' },
  },
  {
    name: 'ask_user',
    class: 'no_new_data',
    cost: 1,
    description: 'ask the user for new input via a note',
    params: { action: 'note_user' },
  },
  {
    name: 'switch_context_mode',
    class: 'no_new_data',
    cost: 2,
    description: 'switch the context mode (meditation samples widely)',
    params: { action: 'context_mode' },
  },
  {
    name: 'switch_context_mode_monotone',
    class: 'monotone_context',
    cost: 1,
    description: 'switch the context mode',
    params: { action: 'context_mode' },
  },
  {
    name: 'flashback',
    class: 'monotone_context',
    cost: 2,
    description: 'recall a distant diary entry',
    params: { action: 'flashback' },
  },
  {
    name: 'flashback_restructure',
    class: 'repeated_thoughts',
    cost: 1,
    description: 'recall a distant diary entry',
    params: { action: 'flashback' },
  },
  {
    name: 'meta_analysis',
    class: 'repeated_thoughts',
    cost: 2,
    description: 'analyse why the thoughts repeat',
    params: { action: 'meta_analysis' },
  },
  {
    name: 'switch_llm',
    class: 'repeated_thoughts',
    cost: 3,
    description: 'think with the next LLM of the registry',
    params: { action: 'switch_llm' },
  },
  {
    name: 'radical_pause',
    class: 'fatigue',
    cost: 5,
    description: 'sit out a few ticks',
    params: { action: 'pause', ticks: 3 },
  },
];
