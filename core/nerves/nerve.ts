/**
 * A nerve: a behaviour written as a state machine (core/state-machines.ts) that runs on a
 * stream of observations. It declares the organs it needs and what one decision costs in each
 * state (LF, besides any LLM call). Decisions are keyed by (state, bucket): the bucket is a
 * discretised reading of the observation, so that a decision seen often enough can be learned
 * as a rule (core/nerves/modes.ts). The ground truth (`policy`) reads only the bucket, so a
 * rule learned per (state, bucket) can be exactly right.
 */
import { z } from 'zod';
import { describeTool, validActions, type StateMachineDef } from '../state-machines.js';

/** One reading of the sensors (plain data; what the scenario generator emits). */
export const observationSchema = z.strictObject({
  /** Seconds since the stream began. */
  t: z.number().min(0),
  distanceM: z.number().min(0).max(100_000),
  /** Positive: the obstacle comes closer; negative: it moves away. */
  closingSpeedMps: z.number().min(-1000).max(1000),
  /** Where the obstacle is, relative to the heading: 0 ahead, ±180 behind. */
  bearingDeg: z.number().min(-180).max(180),
  obstacle: z.boolean(),
});
export type Observation = z.infer<typeof observationSchema>;

/** What a decision turned out to be: right, wrong, or not known (no judge). */
export type Outcome = 'ok' | 'bad' | null;

export interface NerveDef {
  /** Business name (`collision`), part of workflow ids and budget ids. */
  name: string;
  machine: StateMachineDef;
  /** What the nerve needs to run (sensors, sandbox, speech…). */
  organs: readonly string[];
  /** LF one decision costs in each state, besides any LLM call. */
  costLf: Readonly<Record<string, number>>;
  /** The action a compiled table takes in a state it has no rule for (the cautious one). */
  fallback: Readonly<Record<string, string>>;
  /** Every bucket `bucket` can return (for coverage reports and the property tests). */
  buckets: readonly string[];
  bucket(o: Observation): string;
  /** The right action in `state` for a reading in `bucket` (the ground truth). */
  policy(state: string, bucket: string): string;
  /** The observation as the model reads it. */
  describe(o: Observation): string;
}

/** The cost of one decision in `state` (0 for a state the nerve does not price). */
export function stateCost(def: NerveDef, state: string): number {
  return def.costLf[state] ?? 0;
}

/** Judge a decision against the ground truth: no action (an unreadable reply) is a bad one. */
export function judge(def: NerveDef, state: string, o: Observation, action: string | null): Outcome {
  if (action === null) return 'bad';
  return def.policy(state, def.bucket(o)) === action ? 'ok' : 'bad';
}

/** The chat messages of a deliberate decision: the state, its valid actions and the observation. */
export function nervePrompt(
  def: NerveDef,
  state: string,
  o: Observation,
): Array<{ role: 'system' | 'user'; content: string }> {
  return [
    {
      role: 'system',
      content: `You are the ${def.name} nerve of an agent. Choose the next action from the list. Reply with its name only.`,
    },
    {
      role: 'user',
      content: `${describeTool(def.machine, state)}\nObservation at t=${o.t}s: ${def.describe(o)}\nAction:`,
    },
  ];
}

/**
 * The JSON schema of a reply in `state`: `{"action": <one of the valid actions>}`. Providers that
 * take a schema hold the model to it (the local model by a grammar), so even a small model
 * answers with an action it may take.
 */
export function actionSchema(def: NerveDef, state: string): Record<string, unknown> {
  return {
    type: 'object',
    properties: { action: { type: 'string', enum: validActions(def.machine, state) } },
    required: ['action'],
    additionalProperties: false,
  };
}

/**
 * The action a reply names: `{"action": …}` (actionSchema), or the whole reply when it is one
 * valid action, else the first valid action among its words; null when it names none.
 */
export function parseAction(def: NerveDef, state: string, reply: string): string | null {
  const valid = validActions(def.machine, state);
  const text = reply.trim().toLowerCase();
  const named = /^\{\s*"action"\s*:\s*"([a-z0-9_]+)"\s*\}$/.exec(text)?.[1];
  if (named !== undefined) return valid.includes(named) ? named : null;
  if (valid.includes(text)) return text;
  const words = text.match(/[a-z][a-z0-9_]*/g) ?? [];
  return words.find((w) => valid.includes(w)) ?? null;
}
