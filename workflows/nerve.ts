/**
 * A nerve at work (id `agent/<id>/nerve/<name>`): the scenario's sensor stream, one decision
 * per observation (`nerveDecide`), the state carried from one to the next. The mode is the
 * input's, or with `auto` the one the nerve's rules have earned (core/nerves/modes.ts). When
 * the nerve's lifeforce budget cannot cover a decision the run pauses in phase `exhausted`
 * until a `resume` signal; when no LLM answers it waits the outage out. It ends after `steps`
 * observations, continuing as new every `stepsPerRun`.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  log,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { z } from 'zod';
import type { createNerveActivities, NerveDecideResult } from '../activities/nerves.js';
import { agentIdSchema } from '../core/ids.js';
import { nerveNames, nerves } from '../core/nerves/index.js';
import { learningConfigSchema, modeSettings, type ModeSetting, type NerveMode } from '../core/nerves/modes.js';
import type { Observation } from '../core/nerves/nerve.js';
import { scenarioKinds, scenarioSlice } from '../core/nerves/scenario.js';
import { addDecision, describeEvent, emptyTally, nerveTallySchema, type NerveTally } from '../core/nerves/tally.js';
import { dbActivity, llmActivity } from './lib/activity-options.js';
import { failureMessage } from './lib/infra.js';
import { parseWorkflowInput } from './lib/input.js';
import { lifeforceShortfallOf } from './lib/lifeforce.js';
import { agentIdSearchAttribute, kindSearchAttribute } from './lib/search-attributes.js';
import { handlerText, timerText } from './lib/ui-text.js';

type Activities = ReturnType<typeof createNerveActivities>;
// A forced reflex never asks the LLM: the database preset fits it; any other mode may.
const reflexActs = proxyActivities<Activities>(dbActivity);
const llmActs = proxyActivities<Activities>(llmActivity);

export const nerveWorkflowInput = z.strictObject({
  agentId: agentIdSchema,
  nerve: z.enum(nerveNames),
  /** The scenario's seed: the same seed, the same sensor stream. */
  seed: z.number().int().min(0).max(2 ** 32 - 1),
  steps: z.number().int().min(1).max(100_000),
  scenario: z.enum(scenarioKinds).default('mixed'),
  mode: z.enum(modeSettings).default('auto'),
  promoteAfter: z.number().int().min(1).max(100_000).optional(),
  agreement: z.number().gt(0.5).max(1).optional(),
  coverage: z.number().gt(0).max(1).optional(),
  /** Decisions per run before continue-as-new (each is a few history events). */
  stepsPerRun: z.number().int().min(1).max(2_000).default(500),
  carryOver: z.strictObject({ step: z.number().int().min(0), state: z.string().min(1), modeEarned: z.enum(['deliberate', 'hybrid', 'reflex']), tally: nerveTallySchema, pauses: z.number().int().min(0) }).optional(),
});
export type NerveWorkflowInput = z.input<typeof nerveWorkflowInput>;

export interface NerveStatus {
  agentId: string;
  nerve: string;
  organs: readonly string[];
  /** `exhausted`: paused for lifeforce until `resume`; `waiting`: no LLM answers. */
  phase: 'running' | 'exhausted' | 'waiting' | 'done';
  step: number;
  steps: number;
  state: string;
  setting: ModeSetting;
  /** The mode the rules have earned. */
  mode: NerveMode;
  tally: NerveTally;
  /** Times the run paused for lifeforce. */
  pauses: number;
  exhausted: { reason: string; needed: number | null; available: number | null; since: string } | null;
  waiting: { since: string; attempts: number; lastError: string } | null;
}

/** Resume a nerve paused for lifeforce (after a grant, or once it regenerated). */
export const nerveResumeSignal = defineSignal('resume');
/** Phase, step, state, earned mode, decisions per mode and decider, LF, promotions and demotions. */
export const nerveStatusQuery = defineQuery<NerveStatus>('status');

const outageBackoffMs = (attempt: number) => Math.min(60_000, 2_000 * 2 ** Math.min(attempt - 1, 5));

function failureType(err: unknown): string | undefined {
  const cause = err instanceof ActivityFailure ? err.cause : undefined;
  return cause instanceof ApplicationFailure ? (cause.type ?? undefined) : undefined;
}

/** Run a nerve on its scenario's sensor stream, deciding each observation (see the module comment). */
export async function nerveWorkflow(raw: NerveWorkflowInput): Promise<NerveStatus> {
  const input = parseWorkflowInput('nerveWorkflow', nerveWorkflowInput, raw);
  const def = nerves[input.nerve];
  const learning = learningConfigSchema.parse({ promoteAfter: input.promoteAfter, agreement: input.agreement, coverage: input.coverage });
  const acts = input.mode === 'reflex' ? reflexActs : llmActs;
  const info = workflowInfo();
  // Stable over continue-as-new, new for a new start under the same id.
  const keyBase = `${info.workflowId}/${info.firstExecutionRunId}`;
  const s: NerveStatus = {
    agentId: input.agentId,
    nerve: input.nerve,
    organs: def.organs,
    phase: 'running',
    step: input.carryOver?.step ?? 0,
    steps: input.steps,
    state: input.carryOver?.state ?? def.machine.initial,
    setting: input.mode,
    mode: input.carryOver?.modeEarned ?? 'deliberate',
    tally: input.carryOver?.tally ?? emptyTally(),
    pauses: input.carryOver?.pauses ?? 0,
    exhausted: null,
    waiting: null,
  };
  let resumed = false;
  setHandler(nerveResumeSignal, () => void (resumed = true), { description: handlerText.nerve.resume });
  setHandler(nerveStatusQuery, () => s, { description: handlerText.nerve.status });
  upsertSearchAttributes([
    { key: agentIdSearchAttribute, value: input.agentId },
    { key: kindSearchAttribute, value: 'nerve' },
  ]);

  /** One decision; a refused budget pauses until `resume`, an LLM outage is waited out. */
  async function decide(o: Observation): Promise<NerveDecideResult> {
    for (let attempt = 1; ; attempt++) {
      try {
        const r = await acts.nerveDecide({ agentId: input.agentId, nerve: input.nerve, state: s.state, observation: o, mode: input.mode, key: `${keyBase}/${s.step}`, at: Date.now(), learning });
        s.phase = 'running';
        s.exhausted = null;
        s.waiting = null;
        return r;
      } catch (err) {
        const shortfall = lifeforceShortfallOf(err);
        if (shortfall) {
          s.phase = 'exhausted';
          s.exhausted = { reason: failureMessage(err, 300), needed: shortfall.needed, available: shortfall.available, since: new Date().toISOString() };
          s.pauses++;
          log.warn('nerve paused: lifeforce exhausted', { nerve: input.nerve, step: s.step, error: s.exhausted.reason });
          resumed = false;
          // The refused hold wrote nothing: the same decision, under the same key, once resumed.
          await condition(() => resumed);
          continue;
        }
        if (failureType(err) !== 'LlmUnavailable') throw err;
        s.phase = 'waiting';
        s.waiting = { since: s.waiting?.since ?? new Date().toISOString(), attempts: attempt, lastError: failureMessage(err, 300) };
        const ms = outageBackoffMs(attempt);
        await condition(() => false, ms, { summary: timerText.taskOutage(ms, attempt) });
      }
    }
  }

  const first = s.step;
  const stream = scenarioSlice(input.seed, first, Math.min(input.steps, first + input.stepsPerRun), input.scenario);
  for (const o of stream) {
    if (workflowInfo().continueAsNewSuggested) break;
    const r = await decide(o);
    s.state = r.to;
    s.mode = r.modeAfter;
    s.tally = addDecision(s.tally, r);
    s.step++;
    for (const e of r.events) log.info(`nerve ${input.nerve}: ${describeEvent(e)}`, { step: s.step, mode: s.mode });
  }
  if (s.step < input.steps) {
    await condition(allHandlersFinished);
    return continueAsNew<typeof nerveWorkflow>({ ...raw, carryOver: { step: s.step, state: s.state, modeEarned: s.mode, tally: s.tally, pauses: s.pauses } });
  }
  s.phase = 'done';
  return s;
}
