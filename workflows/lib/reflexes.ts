/**
 * The reflexes the tick runs between Think and Execute (emotions, novelty and anti-stagnation,
 * validation), as one activity whose result narrows what the tick keeps and does. Without them
 * (reflexes off, no stored response, or a history from before reflexes-v1) the verdict is
 * `auto_pass`: every parsed command may run.
 */
import type { ActivityOptions } from '@temporalio/workflow';
import { z } from 'zod';
import type { TickReflexesInput, TickReflexesResult } from '../../activities/tick/reflexes.js';
import { failoverTimeout } from './activity-options.js';
import { failureMessage } from './infra.js';
import { sharedValue } from '../../core/shared.js';

export interface ReflexVerdict {
  validationMode: 'auto_pass' | 'self_validation' | 'normal';
  /** Weighted rating −3…+3; null under auto_pass. */
  rating: number | null;
  /** Command ids allowed to run; undefined = all. */
  allowedCmdIds?: string[];
  /** Why each held command may not run (cmd_id → reason), for its command_log row. */
  held?: Record<string, string>;
  /** Short lines for the status query and the log. */
  notes: string[];
}

/** The verdict when no reflex runs: every command may run. */
export function autoPassVerdict(): ReflexVerdict {
  return { validationMode: 'auto_pass', rating: null, notes: [] };
}

// ---- the reflexes as one activity (emotions, novelty, validators in parallel) ---------------------

/** What the reflexes carry between ticks (and across continue-as-new, with defaults for old carry-overs). */
export const reflexStateSchema = sharedValue('workflows/lib/reflexes/reflexState', () =>
  z
    .object({
      lowStreak: z.number().int().min(0).default(0),
      anxietyStreak: z.number().int().min(0).default(0),
      pending: z
        .object({ strategyId: z.number(), metricId: z.number(), tick: z.number(), noveltyBefore: z.number() })
        .nullable()
        .default(null),
      lastStrategyTick: z.number().int().min(0).default(0),
      /** Text for the next think (Reflex-lite rephrase, flashback…), used once. */
      focus: z.string().max(4000).nullable().default(null),
      lastNovelty: z.number().nullable().default(null),
      validatorTimeouts: z.number().int().min(0).default(0),
      reflexLiteFired: z.number().int().min(0).default(0),
      strategiesFired: z.number().int().min(0).default(0),
      /** The last tick's held (unvalidated) commands: cmd_id → why. */
      held: z.record(z.string(), z.string()).default({}),
    })
    // A function: zod copies a default value only one level deep, and `held` must be new each time.
    .default(() => ({
      lowStreak: 0,
      anxietyStreak: 0,
      pending: null,
      lastStrategyTick: 0,
      focus: null,
      lastNovelty: null,
      validatorTimeouts: 0,
      reflexLiteFired: 0,
      strategiesFired: 0,
      held: {},
    })),
);
type ReflexState = z.infer<typeof reflexStateSchema>;

/** The reflex activity's preset: LLM-like (heartbeats), but a failing one gives up sooner. */
export const reflexActivity: ActivityOptions = {
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: failoverTimeout,
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '10 seconds',
    maximumAttempts: 3,
    nonRetryableErrorTypes: ['InvalidInput', 'NotFound', 'LifeforceExhausted'],
  },
};

type TickReflexes = (input: TickReflexesInput) => Promise<TickReflexesResult>;

/**
 * Run the tick's reflexes and fold the result into the loop's reflex state. If the reflex
 * activity fails for good, the tick still goes on: nothing is validated, so the commands are
 * held as unvalidated (fail closed), and a note says why.
 */
export async function runTickReflexes(
  call: TickReflexes,
  input: TickReflexesInput,
  rs: ReflexState,
): Promise<{ verdict: ReflexVerdict; result: TickReflexesResult | null; state: ReflexState }> {
  let result: TickReflexesResult;
  try {
    result = await call(input);
  } catch (err) {
    const why = `reflexes failed: ${failureMessage(err, 280)}`;
    const held = Object.fromEntries(input.commands.map((c) => [c.cmdId, why]));
    return {
      verdict: { validationMode: 'normal', rating: null, allowedCmdIds: [], held, notes: [why] },
      result: null,
      state: { ...rs, focus: null, held },
    };
  }
  const state: ReflexState = {
    ...rs,
    ...result.stagnation,
    focus: result.focus,
    lastNovelty: result.novelty,
    validatorTimeouts: rs.validatorTimeouts + result.validatorTimeouts,
    reflexLiteFired: rs.reflexLiteFired + (result.actions.some((a) => a.startsWith('reflex_lite')) ? 1 : 0),
    strategiesFired: rs.strategiesFired + (result.actions.some((a) => a.startsWith('strategy:')) ? 1 : 0),
    held: result.held,
  };
  const verdict: ReflexVerdict = {
    validationMode: result.validationMode,
    rating: result.rating,
    ...(result.allowedCmdIds ? { allowedCmdIds: result.allowedCmdIds } : {}),
    ...(Object.keys(result.held).length ? { held: result.held } : {}),
    notes: [...result.notes, ...result.actions],
  };
  return { verdict, result, state };
}
