/**
 * A nerve at work (id `agent/<id>/nerve/<name>`): the scenario's sensor stream, one decision
 * per observation (`nerveDecide`), the state carried from one to the next. The mode is the
 * input's, or with `auto` the one the nerve's rules have earned (core/nerves/modes.ts). In
 * reflex the run decides on a reflex arc instead (core/nerves/arc.ts): one activity leases the
 * budget for the next decisions and compiles the table, the workflow decides them itself, one
 * activity records them and settles the lease. When the nerve's lifeforce budget cannot cover a
 * decision the run pauses in phase `exhausted` until a `resume` signal; when no LLM answers it
 * waits the outage out. It ends after `steps` observations, continuing as new every `stepsPerRun`.
 */
import {
  allHandlersFinished,
  condition,
  defineQuery,
  defineSignal,
  log,
  patched,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { continueAsNewWithFailover } from './lib/continue-as-new.js';
import { z } from 'zod';
import type { createNerveActivities, NerveDecideResult } from '../activities/nerves.js';
import { agentIdSchema } from '../core/ids.js';
import {
  decideOnTable,
  defaultArcSize,
  flushDue,
  leaseSize,
  maxArcSize,
  wantsArc,
  type Arc,
} from '../core/nerves/arc.js';
import { nerveNames, nerves } from '../core/nerves/index.js';
import {
  learningConfigSchema,
  modeSettings,
  type ModeSetting,
  type NerveEvent,
  type NerveMode,
} from '../core/nerves/modes.js';
import type { Observation } from '../core/nerves/nerve.js';
import { scenarioKinds, scenarioSlice } from '../core/nerves/scenario.js';
import {
  addDecision,
  addEvents,
  describeEvent,
  emptyTally,
  nerveTallySchema,
  type DecisionSummary,
  type NerveTally,
} from '../core/nerves/tally.js';
import { dbActivity, llmActivity } from './lib/activity-options.js';
import { failureMessage, isLlmUnavailable } from './lib/infra.js';
import { outageBackoffMs } from '../core/failure.js';
import { parseWorkflowInput } from './lib/input.js';
import { lifeforceShortfallOf } from './lib/lifeforce.js';
import { agentIdSearchAttribute, kindSearchAttribute } from './lib/search-attributes.js';
import { handlerText, timerText } from './lib/ui-text.js';

type Activities = ReturnType<typeof createNerveActivities>;
// A forced reflex never asks the LLM: the database preset fits it (and the reflex arc's
// activities, in any mode); any other mode may.
const reflexActs = proxyActivities<Activities>(dbActivity);
const llmActs = proxyActivities<Activities>(llmActivity);

export const nerveWorkflowInput = z.strictObject({
  agentId: agentIdSchema,
  nerve: z.enum(nerveNames),
  /** The scenario's seed: the same seed, the same sensor stream. */
  seed: z
    .number()
    .int()
    .min(0)
    .max(2 ** 32 - 1),
  steps: z.number().int().min(1).max(100_000),
  scenario: z.enum(scenarioKinds).default('mixed'),
  mode: z.enum(modeSettings).default('auto'),
  promoteAfter: z.number().int().min(1).max(100_000).optional(),
  agreement: z.number().gt(0.5).max(1).optional(),
  coverage: z.number().gt(0).max(1).optional(),
  /** Decisions per run before continue-as-new (each is a few history events). */
  stepsPerRun: z.number().int().min(1).max(2_000).default(500),
  /** Decisions a reflex arc leases (and flushes) at a time. */
  arcSize: z.number().int().min(1).max(maxArcSize).default(defaultArcSize),
  carryOver: z
    .strictObject({
      step: z.number().int().min(0),
      state: z.string().min(1),
      modeEarned: z.enum(['deliberate', 'hybrid', 'reflex']),
      tally: nerveTallySchema,
      pauses: z.number().int().min(0),
    })
    .optional(),
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

/** A nerve's run: its input, the activities it calls, the key base and the status it shows. */
interface NerveRun {
  input: z.infer<typeof nerveWorkflowInput>;
  def: (typeof nerves)[keyof typeof nerves];
  learning: ReturnType<typeof learningConfigSchema.parse>;
  acts: typeof reflexActs;
  /** Stable over continue-as-new, new for a new start under the same id. */
  keyBase: string;
  s: NerveStatus;
  /** Set by the `resume` signal. */
  resumed: boolean;
}

/** Run a nerve on its scenario's sensor stream, deciding each observation (see the module comment). */
export async function nerveWorkflow(raw: NerveWorkflowInput): Promise<NerveStatus> {
  const run = startNerve(raw);
  const { input, def, keyBase, s } = run;
  const first = s.step;
  const last = Math.min(input.steps, first + input.stepsPerRun);
  const stream = scenarioSlice(input.seed, first, last, input.scenario);
  // Runs started before the reflex arc decide every step with nerveDecide, as they did.
  const arcOn = (input.mode === 'reflex' || input.mode === 'auto') && patched('nerve-reflex-arc-v1');
  let arc: Arc | null = null;
  for (const o of stream) {
    if (workflowInfo().continueAsNewSuggested) break;
    if (arcOn && !arc && wantsArc(input.mode, s.mode)) arc = await armArc(run, last - s.step);
    if (arc) {
      const next = decideOnTable(def, arc.table, input.mode, s.state, o, `${keyBase}/${s.step}`, Date.now());
      if (next.kind === 'decided') {
        const d = next.decision;
        arc.buffer.push(d);
        advance(s, d.to, {
          mode: 'reflex',
          decidedBy: 'table',
          outcome: d.outcome,
          action: d.action,
          lf: d.lf,
          events: [],
        });
        // No wait between the arm and its flush but the flush itself: the decisions are pure.
        if (flushDue(arc)) arc = await flushArc(run, arc);
        continue;
      }
      // The table cannot decide this reading: the LLM is asked once what the arc decided is recorded.
      arc = await flushArc(run, arc);
    }
    const r = await decide(run, o);
    s.mode = r.modeAfter;
    advance(s, r.to, r);
    logEvents(run, r.events);
  }
  if (arc) await flushArc(run, arc);
  if (s.step < input.steps) {
    await condition(allHandlersFinished);
    return continueAsNewWithFailover<typeof nerveWorkflow>({
      ...raw,
      carryOver: { step: s.step, state: s.state, modeEarned: s.mode, tally: s.tally, pauses: s.pauses },
    });
  }
  s.phase = 'done';
  return s;
}

/** The run's input checked, its status (from the carry-over), its handlers and search attributes. */
function startNerve(raw: NerveWorkflowInput): NerveRun {
  const input = parseWorkflowInput('nerveWorkflow', nerveWorkflowInput, raw);
  const def = nerves[input.nerve];
  const learning = learningConfigSchema.parse({
    promoteAfter: input.promoteAfter,
    agreement: input.agreement,
    coverage: input.coverage,
  });
  const acts = input.mode === 'reflex' ? reflexActs : llmActs;
  const info = workflowInfo();
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
  const run: NerveRun = {
    input,
    def,
    learning,
    acts,
    keyBase: `${info.workflowId}/${info.firstExecutionRunId}`,
    s,
    resumed: false,
  };
  setHandler(nerveResumeSignal, () => void (run.resumed = true), { description: handlerText.nerve.resume });
  setHandler(nerveStatusQuery, () => s, { description: handlerText.nerve.status });
  upsertSearchAttributes([
    { key: agentIdSearchAttribute, value: input.agentId },
    { key: kindSearchAttribute, value: 'nerve' },
  ]);
  return run;
}

/** An activity call; a refused budget pauses until `resume`, an LLM outage is waited out. */
async function withPauses<T>(run: NerveRun, call: () => Promise<T>): Promise<T> {
  const { input, s } = run;
  for (let attempt = 1; ; attempt++) {
    try {
      const r = await call();
      s.phase = 'running';
      s.exhausted = null;
      s.waiting = null;
      return r;
    } catch (err) {
      const shortfall = lifeforceShortfallOf(err);
      if (shortfall) {
        s.phase = 'exhausted';
        s.exhausted = {
          reason: failureMessage(err, 300),
          needed: shortfall.needed,
          available: shortfall.available,
          since: new Date().toISOString(),
        };
        s.pauses++;
        log.warn('nerve paused: lifeforce exhausted', { nerve: input.nerve, step: s.step, error: s.exhausted.reason });
        run.resumed = false;
        // The refused hold wrote nothing: the same call, under the same key, once resumed.
        await condition(() => run.resumed);
        continue;
      }
      if (!isLlmUnavailable(err)) throw err;
      s.phase = 'waiting';
      s.waiting = {
        since: s.waiting?.since ?? new Date().toISOString(),
        attempts: attempt,
        lastError: failureMessage(err, 300),
      };
      const ms = outageBackoffMs(attempt);
      await condition(() => false, ms, { summary: timerText.taskOutage(ms, attempt) });
    }
  }
}

/** One decision by `nerveDecide`. */
function decide(run: NerveRun, o: Observation): Promise<NerveDecideResult> {
  const { input, s } = run;
  return withPauses(run, () =>
    run.acts.nerveDecide({
      agentId: input.agentId,
      nerve: input.nerve,
      state: s.state,
      observation: o,
      mode: input.mode,
      key: `${run.keyBase}/${s.step}`,
      at: Date.now(),
      learning: run.learning,
    }),
  );
}

/** The run one decision further: its state, tally and step. */
function advance(s: NerveStatus, to: string, d: DecisionSummary): void {
  s.state = to;
  s.tally = addDecision(s.tally, d);
  s.step++;
}

function logEvents({ input, s }: NerveRun, events: readonly NerveEvent[]): void {
  for (const e of events) log.info(`nerve ${input.nerve}: ${describeEvent(e)}`, { step: s.step, mode: s.mode });
}

/** Arm a reflex arc for the next decisions of this run (null: `auto` found reflex no longer earned). */
async function armArc(run: NerveRun, stepsLeft: number): Promise<Arc | null> {
  const { input, s } = run;
  const mode = input.mode === 'reflex' ? 'reflex' : 'auto';
  const r = await withPauses(run, () =>
    reflexActs.nerveArmReflex({
      agentId: input.agentId,
      nerve: input.nerve,
      mode,
      key: `${run.keyBase}/${s.step}`,
      decisions: leaseSize(stepsLeft, input.arcSize),
      at: Date.now(),
      learning: run.learning,
    }),
  );
  s.mode = r.mode;
  return r.armed ? { leaseKey: r.leaseKey, decisions: r.decisions, table: r.table, buffer: [] } : null;
}

/** Record what the arc decided, learn from it, settle its lease; the arc is spent. */
async function flushArc(run: NerveRun, arc: Arc): Promise<null> {
  const { input, s } = run;
  const r = await reflexActs.nerveFlushReflex({
    agentId: input.agentId,
    nerve: input.nerve,
    leaseKey: arc.leaseKey,
    decisions: arc.buffer,
    learning: run.learning,
  });
  s.mode = r.modeAfter;
  s.tally = addEvents(s.tally, r.events);
  logEvents(run, r.events);
  return null;
}
