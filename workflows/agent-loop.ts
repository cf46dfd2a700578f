import {
  ActivityFailure,
  ApplicationFailure,
  ContinueAsNew,
  ParentClosePolicy,
  allHandlersFinished,
  condition,
  currentUpdateInfo,
  getExternalWorkflowHandle,
  isCancellation,
  continueAsNew,
  defineQuery,
  defineSignal,
  defineUpdate,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { z } from 'zod';
import { agentIdSchema, workflowIds } from '../core/ids.js';
import { sharedValue } from '../core/shared.js';
import { clipText, sanitizeText } from '../core/sanitize.js';
import { formatIssues } from '../core/zod-issues.js';
import type { createActivities } from '../activities/index.js';
import type { createSandboxActivities } from '../activities/sandbox.js';
import type { CommandOutcome, LoopEffect } from '../core/loop-types.js';
import { dbActivity, fewAttempts, llmActivity, localLlmActivity, sandboxActivity, withPriority } from './lib/activity-options.js';
import { priorityKeyFor } from '../core/priority.js';
import { failureMessage, isInfraFailure, isLlmUnavailable, rideOut, type Degraded } from './lib/infra.js';
import { outageBackoffMs } from '../core/failure.js';
import { parseWorkflowInput } from './lib/input.js';
import {
  applyConfigValues,
  applyEffects,
  carryOverSchema,
  countOutcomes,
  defaultReflex,
  firstApplication,
  initialState,
  loopSettingsSchema,
  maxQueuedNotes,
  noteAudioSchema,
  type CarryOver,
  type QueuedNote,
} from './lib/loop-state.js';
import { autoPassVerdict, reflexActivity, runTickReflexes, type ReflexVerdict } from './lib/reflexes.js';
import { agentIdSearchAttribute, kindSearchAttribute, lifeforceSearchAttribute } from './lib/search-attributes.js';
import { budgetSettingsSchema, lifeforceShortfallOf, type LifeforceShortfall } from './lib/lifeforce.js';
import type { LifeforceNeeds } from '../core/lifeforce.js';
import { agentLoopCurrentDetails, escalationInputText, handlerText, nerveText, spawnText, speechText, taskLoopText, timerText, toolGenerationText } from './lib/ui-text.js';
import { taskStopSignal } from './lib/task-signals.js';
import { emergencyConsensusTag, nextIsolation, type PeerObservation } from '../core/society/isolation.js';
// Children are started by type name: importing their modules would make every agent loop
// evaluate (and hold) their code and schemas too (see workflows/index.ts).
import type { taskLoopWorkflow } from './task-loop.js';
import type { toolGenerationWorkflow } from './tool-generation.js';
import type { escalationWorkflow } from './escalation.js';
import type { nerveWorkflow, NerveWorkflowInput } from './nerve.js';
import type { speechWorkflow } from './speech.js';
import type { spawnWorkflow } from './spawn.js';

type Activities = ReturnType<typeof createActivities>;
// A few attempts each, then the loop itself rides the outage out (workflows/lib/infra.ts), so
// that its status shows `degraded` and the recovery is logged.
const db = proxyActivities<Activities>(fewAttempts(dbActivity));
const llm = proxyActivities<Activities>(fewAttempts(llmActivity));
/** The LLM activities at a task priority: under a backlog, agents with more lifeforce are served first. */
const llmByPriority = new Map<number, Activities>();
function llmAt(priorityKey: number | undefined): Activities {
  if (priorityKey === undefined) return llm;
  let proxy = llmByPriority.get(priorityKey);
  if (!proxy) llmByPriority.set(priorityKey, (proxy = proxyActivities<Activities>(withPriority(fewAttempts(llmActivity), { priorityKey }))));
  return proxy;
}
/** The think as a local activity: for a model that answered within `localThinkMaxModelMs` the last time. */
const localLlm = proxyLocalActivities<Activities>(localLlmActivity);
/**
 * A model that answers within this thinks in a local activity on the next tick: one workflow
 * task a tick instead of two and an activity task. A slower one (a hosted LLM, the offline
 * model) keeps the activity, so that notes and signals are never held back behind its call.
 */
export const localThinkMaxModelMs = 250;
/**
 * An unpaced loop thinks locally at most this many ticks in a row, then once through the
 * activity: local thinks chain inside one workflow task, and a note, a stop or a query reaches
 * the workflow only when that task completes.
 */
export const localThinksInARow = 8;
/** Nor longer than this in all (the thinks' own time, as they report it): under load a tick takes longer. */
export const localHoldMaxMs = 1_000;
const reflexActs = proxyActivities<Activities>(reflexActivity);
// The agent's `shell` runs only on the sandbox queue; no sandbox worker within 2 min = not run.
const sandbox = proxyActivities<ReturnType<typeof createSandboxActivities>>({ ...sandboxActivity, scheduleToStartTimeout: '2 minutes' });
type ShellEffect = Extract<LoopEffect, { kind: 'shell' }>;
type ToolEffect = Extract<LoopEffect, { kind: 'generateTool' }>;
type NerveEffect = Extract<LoopEffect, { kind: 'startNerve' }>;
type EscalateEffect = Extract<LoopEffect, { kind: 'escalate' }>;
type SpeakEffect = Extract<LoopEffect, { kind: 'speak' }>;
type SpawnEffect = Extract<LoopEffect, { kind: 'spawn' }>;
type AskEffect = Extract<LoopEffect, { kind: 'askLlm' }>;

// ---- messages -------------------------------------------------------------------------------

// Built once per worker and shared by its agent loops (core/shared.ts).
export const addNoteInput = sharedValue('agent-loop/addNoteInput', () =>
  z
    .object({
      text: z.string().trim().min(1).max(16_000).optional(),
      /**
       * Audio to hear instead of text: an absolute path to a WAV file the workers can read. A
       * speech workflow transcribes it and its text arrives as the note, with the audio on it.
       */
      audio: z
        .strictObject({
          path: z.string().trim().min(1).max(4096).refine((p) => p.startsWith('/'), 'an absolute path to a WAV file'),
          language: z.string().trim().toLowerCase().regex(/^(auto|[a-z]{2,3})$/, 'a language code like "en" or "de" (or "auto")').optional(),
        })
        .optional(),
      /** The audio this note's text was transcribed from (the speech workflow sends it with the text). */
      transcribedFrom: noteAudioSchema.optional(),
      priority: z.number().int().min(0).max(10).default(1),
      tags: z.array(z.string().min(1).max(40)).max(20).default([]),
      source: z.enum(['user', 'peer', 'system', 'oversight', 'human', 'llm:task']).default('user'),
      sender: z.string().max(200).optional(),
      taskId: z.number().int().positive().optional(),
    })
    .refine((n) => (n.text === undefined) !== (n.audio === undefined), { message: 'give either text, or audio {path} to transcribe (not both)', path: ['text'] })
    .refine((n) => n.audio === undefined || n.transcribedFrom === undefined, { message: 'audio to transcribe comes without a transcription', path: ['transcribedFrom'] }),
);
export type AddNoteInput = z.input<typeof addNoteInput>;

/**
 * What `addNote` answers: the stored note's id; while the database is away, that it is queued;
 * for audio, the speech workflow that transcribes it (its text arrives as the note).
 */
export type AddNoteResult =
  | { noteId: number; queued?: false }
  | { noteId: null; queued: true; message: string }
  | { noteId: null; queued?: false; transcribing: { workflowId: string } };
/**
 * The user's message to the agent; returns the note id (stored before the update completes).
 * While the database is away the note is kept in the workflow (durable in its history) and
 * stored, once, when the database returns; the answer says so.
 */
export const addNoteUpdate = defineUpdate<AddNoteResult, [AddNoteInput]>('addNote');
/** Wake the loop because something it waits for happened (a task loop wrote a note, a process finished). */
export const wakeSignal = defineSignal<[{ reason: 'note' | 'process' | 'lifeforce' }]>('wake');
/** What a pause or resume may carry: the bus command's message id, applied once per agent. */
export interface LoopCommandArg {
  commandId?: string;
}
export const pauseSignal = defineSignal<[LoopCommandArg?]>('pause');
export const resumeSignal = defineSignal<[LoopCommandArg?]>('resume');
/** Finish the current tick, then complete the workflow. */
export const stopSignal = defineSignal<[{ reason?: string }?]>('stop');
export const setConfigInput = sharedValue('agent-loop/setConfigInput', () => loopSettingsSchema.omit({ idle: true }).partial().extend({ idle: loopSettingsSchema.shape.idle.partial().optional() }));
/** Change loop settings (validated); returns the settings now in force. */
export const setConfigUpdate = defineUpdate<CarryOver['settings'], [z.input<typeof setConfigInput>]>('setConfig');

export interface AgentStatus {
  agentId: string;
  tick: number;
  phase: 'starting' | 'thinking' | 'reflexes' | 'executing' | 'pacing' | 'idle' | 'paused' | 'outage' | 'degraded' | 'exhausted' | 'stopping';
  operatingMode: CarryOver['operatingMode'];
  paused: boolean;
  pauseTicks: number;
  settings: CarryOver['settings'];
  reflex: CarryOver['reflex'];
  counters: CarryOver['counters'];
  last: CarryOver['last'];
  lastVerdict: { validationMode: string; rating: number | null; notes?: string[] } | null;
  /** Reflex bookkeeping: streaks, novelty, Reflex-lite/strategy counts, the last tick's unvalidated commands (cmd_id → why). */
  reflexes: CarryOver['reflexState'];
  llm: string | null;
  taskLoops: CarryOver['taskLoops'];
  outage: { since: string; attempts: number; lastError: string } | null;
  /** A dependency (the database, mostly) is away: the step waiting for it, since when, attempts, last error. */
  degraded: Degraded | null;
  /** Notes taken while the database was away, stored when it returns. */
  queuedNotes: number;
  /** The last tick that failed for a reason of its own (a poison reply, a refused write), if any. */
  lastTickFailure: { tick: number; step: string; error: string } | null;
  /** The agent's budget as last seen (null before the first look, or in histories from before the ledger). */
  lifeforce: LifeforceStatus | null;
  /** Its peers as the last tick saw them, and since when it is isolated (`since` null: it is not). */
  isolation: CarryOver['isolation'];
}

/** What the status shows of the agent's lifeforce. */
export interface LifeforceStatus {
  budgetId: string;
  /** What could be reserved (null: unlimited). */
  available: number | null;
  capacity: number | null;
  /** LF the last tick's call was charged. */
  lastCharge: number | null;
  /** Temporal task priority of its work (1 first … 5), from the lifeforce left unless set by hand. */
  priorityKey: number;
  explicitPriority: number | null;
  onExhausted: 'pause' | 'escalate';
  /**
   * Set while exhausted: what was refused, since when, how long the wait, the escalation asking
   * for more, and what lets it go on (`needs.grant`: the smallest grant).
   */
  exhausted: { since: string; needed: number; reason: string; waitMs: number | null; needs?: LifeforceNeeds; escalationId?: string } | null;
}
/** Tick, mode, pause state, last reply summary, LLM in use, counters. */
export const statusQuery = defineQuery<AgentStatus>('status');

// ---- input ------------------------------------------------------------------------------------

export const agentLoopInput = sharedValue('agent-loop/agentLoopInput', () =>
  z.object({
    agentId: agentIdSchema,
    name: z.string().trim().min(1).max(200).optional(),
    /** Initial loop settings (the first run only; later runs keep what the agent set). */
    settings: loopSettingsSchema.partial().optional(),
    /** Complete after this many ticks (demos, tests); unset = run until stopped. */
    maxTicks: z.number().int().positive().optional(),
    /** The agent's budget when it is created (the first start only; later, `mindloop lifeforce set`). Unset: unlimited, spend recorded. */
    lifeforce: budgetSettingsSchema.optional(),
    /** Continue-as-new after this many ticks in one run, even if the server does not suggest it. */
    ticksPerRun: z.number().int().min(1).max(10_000).default(500),
    /** false: skip the reflexes (auto_pass, no emotion/novelty prompts) — the bench's bare tick, an operator's kill switch. */
    reflexes: z.boolean().default(true),
    carryOver: carryOverSchema.optional(),
  }),
);
export type AgentLoopInput = z.input<typeof agentLoopInput>;

export interface AgentLoopResult {
  agentId: string;
  ticks: number;
  reason: 'stopped' | 'max_ticks';
}

/** A pause/resume's command id when it carries a usable one (a signal from the UI may carry anything: then none). */
function commandIdOf(arg: unknown): string | undefined {
  const id = (arg as LoopCommandArg | null | undefined)?.commandId;
  return typeof id === 'string' && id.length > 0 && id.length <= 128 ? id : undefined;
}

/** A reply that fails its tick this many times in a row is treated like a failing LLM (Core Outage). */
const poisonTicksBeforeOutage = 3;

/** Model text and driver messages may hold characters Postgres refuses; log rows must not. */
function clean(text: string): string {
  return clipText(sanitizeText(text), 2000);
}


/** An exhausted wait re-checks at least this often (a grant wakes it sooner). */
const exhaustedRecheckMs = 3_600_000;

/** One durable thinking loop per agent (id `agent/<agentId>`): one REPL tick after another, forever. */
export async function agentLoopWorkflow(rawInput: AgentLoopInput): Promise<AgentLoopResult> {
  const input = parseWorkflowInput('agentLoopWorkflow', agentLoopInput, rawInput);
  return new AgentLoop(input).run();
}

type ParsedAgentLoopInput = z.output<typeof agentLoopInput>;
type Thought = Awaited<ReturnType<Activities['think']>>;

/**
 * The loop's state and its steps. The steps run one after another in a fixed order: the
 * commands a run issues, and their order, are what its recorded history replays against.
 */
class AgentLoop {
  readonly agentId: string;
  readonly state: CarryOver;
  readonly selfId = workflowInfo().workflowId;
  private currentPhase: AgentStatus['phase'] = 'starting';
  private stopRequested = false;
  private lastVerdict: AgentStatus['lastVerdict'] = null;
  private outage: AgentStatus['outage'] = null;
  private degraded: Degraded | null = null;
  private lastTickFailure: AgentStatus['lastTickFailure'] = null;
  // Ticks in a row that failed for a reason of their own: past a few, treated like a failing LLM.
  private failedInARow = 0;
  /** How long the model took on the last think that asked it (null: unknown, or that think failed). */
  private lastModelMs: number | null = null;
  /** Local thinks since the last think through the activity, and their time in all. */
  private localThinks = 0;
  private localHeldMs = 0;
  private lastFailedTick = 0;
  /** loopStarted is done (this run), so the agent's row exists: notes can be stored against it. */
  private started = false;
  private llmInUse: string | null;
  private lifeforce: LifeforceStatus | null = null;
  /** Exhaustion episodes, to name their escalations. */
  private exhaustions = 0;
  /** When this run last asked a human for lifeforce: at most one such escalation a day. */
  private lastLifeforceEscalation = Number.NEGATIVE_INFINITY;

  constructor(readonly input: ParsedAgentLoopInput) {
    this.agentId = input.agentId;
    this.state = input.carryOver ?? initialState(input.settings);
    this.llmInUse = this.state.last?.model ?? null;
  }

  /** The phase; setting it also updates the current details the Temporal UI shows (no command). */
  private get phase(): AgentStatus['phase'] {
    return this.currentPhase;
  }
  private set phase(p: AgentStatus['phase']) {
    this.currentPhase = p;
    setCurrentDetails(
      agentLoopCurrentDetails({
        tick: this.state.tick,
        phase: p,
        llm: this.llmInUse,
        mode: this.state.operatingMode,
        degradedStep: this.degraded?.step,
        queuedNotes: this.state.pendingNotes.length,
        lifeforce: this.lifeforce?.available,
      }),
    );
  }

  async run(): Promise<AgentLoopResult> {
    const { agentId, state, input } = this;
    upsertSearchAttributes([
      { key: agentIdSearchAttribute, value: agentId },
      { key: kindSearchAttribute, value: 'agent-loop' },
      { key: lifeforceSearchAttribute, value: 'ok' },
    ]);
    this.registerHandlers();
    this.phase = 'starting';
    await this.begin();

    const startTick = state.tick;
    try {
      while (!this.stopRequested) {
        if (input.maxTicks !== undefined && state.tick >= input.maxTicks) break;
        if (state.tick - startTick >= input.ticksPerRun || workflowInfo().continueAsNewSuggested) return await this.continueAsNew();
        if (await this.sitOut()) continue;
        if (!(await this.tick())) continue;
        if (input.maxTicks !== undefined && state.tick >= input.maxTicks) break;
        await this.pace();
        state.pendingWake = false;
      }
    } catch (err) {
      // Only a bug gets here (outages are ridden out, a tick's own failures recorded): say so
      // in the agent's row and process log before the workflow fails, so status and doctor show it.
      if (!(err instanceof ContinueAsNew) && !isCancellation(err)) await this.recordLoopFailure(err);
      throw err;
    }

    this.phase = 'stopping';
    await condition(allHandlersFinished);
    if (state.pendingNotes.length > 0) await this.flushNotes();
    await this.guard('loopStopped', () => db.loopStopped({ agentId, tick: state.tick }));
    return { agentId, ticks: state.tick, reason: this.stopRequested ? 'stopped' : 'max_ticks' };
  }

  private status(): AgentStatus {
    const { state } = this;
    return {
      agentId: this.agentId,
      tick: state.tick,
      phase: this.phase,
      operatingMode: state.operatingMode,
      paused: state.paused,
      pauseTicks: state.pauseTicks,
      settings: state.settings,
      reflex: state.reflex,
      counters: state.counters,
      last: state.last,
      lastVerdict: this.lastVerdict,
      reflexes: state.reflexState,
      llm: this.llmInUse,
      taskLoops: state.taskLoops,
      outage: this.outage,
      degraded: this.degraded,
      queuedNotes: state.pendingNotes.length,
      lastTickFailure: this.lastTickFailure,
      lifeforce: this.lifeforce,
      isolation: state.isolation,
    };
  }

  private registerHandlers(): void {
    const { state } = this;
    const text = handlerText.agent;
    setHandler(statusQuery, () => this.status(), { description: text.status });
    setHandler(addNoteUpdate, (note) => this.addNote(note), {
      description: text.addNote,
      validator: (note) => {
        const r = addNoteInput.safeParse(note);
        if (!r.success) throw new Error(`invalid note: ${formatIssues(r.error, 'note')}`);
      },
    });
    setHandler(
      wakeSignal,
      () => {
        state.pendingWake = true;
      },
      { description: text.wake },
    );
    setHandler(
      pauseSignal,
      (arg) => {
        if (firstApplication(state.appliedCommands, commandIdOf(arg))) state.paused = true;
      },
      { description: text.pause },
    );
    setHandler(
      resumeSignal,
      (arg) => {
        if (firstApplication(state.appliedCommands, commandIdOf(arg))) state.paused = false;
      },
      { description: text.resume },
    );
    setHandler(
      stopSignal,
      () => {
        this.stopRequested = true;
      },
      { description: text.stop },
    );
    setHandler(
      setConfigUpdate,
      (patch) => {
        const { idle, ...rest } = setConfigInput.parse(patch);
        Object.assign(state.settings, Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)));
        if (idle) state.settings.idle = { ...state.settings.idle, ...idle };
        return state.settings;
      },
      {
        description: text.setConfig,
        validator: (patch) => {
          const r = setConfigInput.strict().safeParse(patch);
          if (!r.success) throw new Error(`invalid config: ${formatIssues(r.error, 'config')}`);
        },
      },
    );
  }

  /** The `addNote` update: store the note, or queue it while the database is away. */
  private async addNote(note: AddNoteInput): Promise<AddNoteResult> {
    const { state, agentId } = this;
    const { audio, transcribedFrom, text, ...parsed } = addNoteInput.parse(note);
    // The update id makes the write idempotent: a retried activity finds the first note.
    const updateId = currentUpdateInfo()?.id ?? `${workflowInfo().runId}:${state.counters.notesReceived}`;
    const queued: QueuedNote = { ...parsed, text: text ?? '', ...(transcribedFrom ? { audio: transcribedFrom } : {}), idempotencyKey: `${this.selfId}:note:${updateId}` };
    // A note sent as a new agent starts waits for loopStarted, which writes the agent's row (the
    // note's row needs it); while the database is away at the start it is queued as below.
    if (!this.started && !this.input.carryOver && patched('note-after-start-v1')) await condition(() => this.started || this.degraded !== null);
    // speech-v1: audio to hear. Histories from before it never carry audio (the validator refused it).
    if (audio && patched('speech-v1')) return this.transcribeNote(audio, parsed, updateId);
    // Notes keep their order: while earlier ones wait for the database, this one waits too.
    if (state.pendingNotes.length === 0) {
      try {
        const { noteId } = await db.recordNote({ agentId, ...queued });
        state.counters.notesReceived++;
        state.pendingWake = true;
        return { noteId };
      } catch (err) {
        if (!isInfraFailure(err)) throw ApplicationFailure.create({ type: 'NoteRefused', message: `note not stored: ${failureMessage(err)}`, nonRetryable: true });
      }
    }
    if (state.pendingNotes.length >= maxQueuedNotes) {
      throw ApplicationFailure.create({ type: 'NoteRefused', message: `note not stored: the database is unavailable and ${maxQueuedNotes} notes already wait for it; send it again later`, nonRetryable: true });
    }
    state.pendingNotes.push(queued);
    state.counters.notesReceived++;
    return { noteId: null, queued: true, message: `the database is unavailable: note queued (${state.pendingNotes.length} waiting); it is stored when the database returns` };
  }

  /** Loop start (and every continue-as-new): identity row, default LLM, interrupted task loops. */
  private async begin(): Promise<void> {
    const { agentId, state, input } = this;
    const started = await this.guard('loopStarted', () => db.loopStarted({ agentId, name: input.name ?? agentId, workflowId: this.selfId }));
    this.started = true;
    // lifeforce-v1: the agent's budget (created unlimited unless the input sets it); older histories have none.
    if (patched('lifeforce-v1')) {
      const v = await this.guard('ensureAgentBudget', () => db.ensureAgentBudget({ agentId, ...(input.lifeforce ? { settings: input.lifeforce } : {}), at: new Date().toISOString() }));
      this.lifeforce = { budgetId: v.budgetId, available: v.available, capacity: v.capacity, lastCharge: null, priorityKey: v.priorityKey, explicitPriority: v.explicitPriority, onExhausted: v.onExhausted, exhausted: null };
    }
    if (!input.carryOver) {
      // A loop started anew (after `stop`, a failure or a termination) goes on from the agent's
      // last recorded tick, not from tick 1. (Histories from before lastTick replay with 0.)
      if (started.lastTick) state.tick = started.lastTick;
      // A fresh start (a new agent, or one restarted after `stop`) resumes the configuration the
      // agent saved with config.set; settings given in the input still win. (Histories recorded
      // before loopStarted returned `config` replay with nothing to apply.)
      applyConfigValues(state.settings, started.config ?? {});
      if (input.settings) Object.assign(state.settings, input.settings);
    }
    for (const t of started.interruptedTaskLoops) await this.startTaskLoop(t.taskId, t.title);
  }

  /** Let the handlers finish, then continue as new with the state carried over. */
  private async continueAsNew(): Promise<never> {
    this.phase = 'stopping';
    await condition(allHandlersFinished);
    this.state.counters.continuedAsNew++;
    return continueAsNew<typeof agentLoopWorkflow>({ ...this.input, carryOver: this.state });
  }

  /** Paused, or sitting out `cycle pause N`: true when this turn of the loop thinks nothing. */
  private async sitOut(): Promise<boolean> {
    const { state } = this;
    if (state.paused) {
      this.phase = 'paused';
      await condition(() => !state.paused || this.stopRequested);
      return true;
    }
    if (state.pauseTicks > 0) {
      // `cycle pause N`: sit out N ticks of delay without thinking.
      state.pauseTicks--;
      this.phase = 'pacing';
      await condition(() => this.stopRequested || state.paused, state.settings.delayMs, { summary: timerText.cyclePause(state.settings.delayMs, state.pauseTicks) });
      return true;
    }
    return false;
  }

  /** One tick: think, reflexes, commands. False when it did not get past think (an outage, a failed reply). */
  private async tick(): Promise<boolean> {
    const { state } = this;
    if (state.pendingNotes.length > 0) await this.flushNotes();
    const tick = state.tick + 1;
    this.phase = 'thinking';
    const thought = await this.think(tick);
    if (!thought) return false;
    await this.endOutage(`${thought.provider}:${thought.model}`);
    await this.followPeers(thought.peers, tick);
    state.tick = tick;
    state.counters.ticks++;
    state.counters.parseErrors += thought.parseErrors.length ? 1 : 0;
    this.llmInUse = `${thought.provider}:${thought.model}`;
    if (this.lifeforce && thought.lifeforce) {
      const { available, charged } = thought.lifeforce;
      this.lifeforce = { ...this.lifeforce, available, lastCharge: charged, priorityKey: priorityKeyFor({ available, capacity: this.lifeforce.capacity, ...(this.lifeforce.explicitPriority ? { explicit: this.lifeforce.explicitPriority } : {}) }) };
    }
    state.last = { summary: thought.summary, model: this.llmInUse, at: new Date().toISOString(), responseId: thought.responseId };

    this.phase = 'reflexes';
    const verdict = await this.reflexes(thought, tick);
    this.lastVerdict = { validationMode: verdict.validationMode, rating: verdict.rating, notes: verdict.notes };

    if (thought.commands.length || thought.rejected.length) await this.execute(thought, verdict, tick);
    if (this.lastFailedTick !== tick) this.failedInARow = 0;
    return true;
  }

  /** The tick's think; null when no LLM answered (the outage is waited out) or the reply failed the tick. */
  private async think(tick: number): Promise<Thought | null> {
    const { agentId, state } = this;
    try {
      return await this.guard('think', () =>
        this.thinkOnce({
          agentId,
          tick,
          workflowId: this.selfId,
          now: new Date().toISOString(),
          mode: 'main',
          loop: {
            contextMode: state.settings.contextMode,
            contextFilter: state.settings.contextFilter,
            recentK: state.settings.recentK,
            notesMode: state.settings.notesMode,
            notesFilter: state.settings.notesFilter,
          },
          params: { ...state.reflex, maxTokens: state.settings.maxTokens },
          ...(state.reflexState.focus ? { focus: state.reflexState.focus } : {}),
        }),
      );
    } catch (err) {
      if (isLlmUnavailable(err)) {
        await this.coreOutage(err);
        return null; // the same tick again, now that an LLM answers
      }
      const shortfall = lifeforceShortfallOf(err);
      if (shortfall) {
        await this.exhausted(shortfall, tick);
        return null; // the same tick again, now that the budget covers it
      }
      // The reply (or the write of it) failed for a reason of its own: record it and move on
      // to the next tick — a retry of this one would replay the same recorded reply.
      await this.tickFailed(tick, 'think', err);
      if (this.failedInARow >= poisonTicksBeforeOutage) await this.coreOutage(err);
      return null;
    }
  }

  /** One think call: local after a fast answer (see `localThinkMaxModelMs`), else the activity. */
  private async thinkOnce(input: Parameters<Activities['think']>[0]): Promise<Thought> {
    const local = this.thinkLocally();
    try {
      const thought = await (local ? localLlm : llmAt(this.lifeforce?.priorityKey)).think(input);
      this.lastModelMs = thought.modelMs ?? null;
      this.localThinks = local ? this.localThinks + 1 : 0;
      this.localHeldMs = local ? this.localHeldMs + (thought.thinkMs ?? 0) : 0;
      return thought;
    } catch (err) {
      // The next attempt, the outage's probe included, goes through the activity.
      this.lastModelMs = null;
      this.localThinks = 0;
      this.localHeldMs = 0;
      throw err;
    }
  }

  private thinkLocally(): boolean {
    const { settings } = this.state;
    if (this.lastModelMs === null || this.lastModelMs > localThinkMaxModelMs) return false;
    const paced = settings.idle.on || settings.delayMs > 0;
    if (!paced && (this.localThinks >= localThinksInARow || this.localHeldMs >= localHoldMaxMs)) return false;
    // local-think-v1: histories from before it asked the activity at every tick.
    return patched('local-think-v1');
  }

  /** The tick's reflexes: emotions, novelty/anti-stagnation and validation. */
  private async reflexes(thought: Thought, tick: number): Promise<ReflexVerdict> {
    const { agentId, state, input } = this;
    // reflexes-v1: emotions, novelty/anti-stagnation and validation (one activity). Histories
    // recorded before it replay through the auto_pass verdict.
    if (!(input.reflexes && thought.responseId !== null && patched('reflexes-v1'))) {
      // A resolved promise, as the empty step list returned before: the same microtask turns, so
      // the commands of this activation keep their order against a handler running beside it.
      return Promise.resolve(autoPassVerdict());
    }
    const r = await runTickReflexes(
      (i) => this.guard('reflexes', () => reflexActs.tickReflexes(i)),
      {
        agentId,
        tick,
        workflowId: this.selfId,
        responseId: thought.responseId,
        // Args too: ethics rules read them. An activity's input is not part of what replay
        // compares, so this needs no patch marker.
        commands: thought.commands.map((c) => ({ cmdId: c.cmdId, type: c.type, args: c.args })),
        params: state.reflex,
        defaults: defaultReflex,
        stagnation: state.reflexState,
        contextMode: state.settings.contextMode,
      },
      state.reflexState,
    );
    state.reflexState = r.state;
    if (r.result) {
      state.reflex = r.result.params;
      applyEffects(state, r.result.effects);
      await this.wakeAgents(r.result.effects);
    }
    return r.verdict;
  }

  /** Apply the tick's commands (what the reflexes allowed) and follow what they ask of the loop. */
  private async execute(thought: Thought, verdict: ReflexVerdict, tick: number): Promise<void> {
    this.phase = 'executing';
    let outcomes: CommandOutcome[] | null = null;
    try {
      outcomes = await this.guard('applyCommands', () =>
        db.applyCommands({
          agentId: this.agentId,
          tick,
          workflowId: this.selfId,
          mode: 'main',
          commands: thought.commands,
          rejected: thought.rejected,
          allowedCmdIds: verdict.allowedCmdIds,
          ...(verdict.held ? { heldReasons: verdict.held } : {}),
          rating: verdict.rating,
          // Decided with no peer to consult: marked for later review. (An activity's input is
          // not part of what replay compares.)
          ...(this.state.operatingMode === 'isolated' ? { tags: [emergencyConsensusTag] } : {}),
        }),
      );
    } catch (err) {
      await this.tickFailed(tick, 'applyCommands', err);
    }
    if (outcomes) await this.followOutcomes(outcomes, tick);
  }

  /** Pace: a fixed delay, or idle until a wake condition. */
  private async pace(): Promise<void> {
    const { state } = this;
    if (state.settings.idle.on) {
      this.phase = 'idle';
      const { wakeOn, timeoutMs } = state.settings.idle;
      const wake = () => this.stopRequested || state.paused || ((wakeOn.includes('note') || wakeOn.includes('process')) && state.pendingWake);
      if (!wakeOn.includes('timeout')) await condition(wake);
      else if (!(await condition(wake, timeoutMs, { summary: timerText.idle(timeoutMs, wakeOn) }))) log.info('idle timeout', { agentId: this.agentId, tick: state.tick });
    } else if (!state.pendingWake && state.settings.delayMs > 0) {
      this.phase = 'pacing';
      await condition(() => this.stopRequested || state.paused, state.settings.delayMs, { summary: timerText.pacing(state.settings.delayMs) });
    }
  }

  /** What applied commands asked of the loop: task loops, shell runs, tool generation, escalations. */
  private async followOutcomes(outcomes: CommandOutcome[], tick: number): Promise<void> {
    const { state } = this;
    countOutcomes(state.counters, outcomes);
    const applied = outcomes.filter((o) => o.status === 'applied');
    const changes = applyEffects(state, applied.flatMap((o) => o.effects));
    for (const t of changes.start) await this.startTaskLoop(t.taskId, t.title, t.maxTicks);
    for (const taskId of changes.stop) await this.stopTaskLoop(taskId);
    const shells = applied.flatMap((o) => o.effects.filter((e): e is ShellEffect => e.kind === 'shell'));
    // shell-v1: histories from before `shell` existed have no shell effects, so replaying
    // them never reaches this marker.
    if (shells.length > 0 && patched('shell-v1')) for (const e of shells) await this.runShell(e, tick);
    // tools.generate (Ouroboros): one child per capability; its result comes back as a note + wake.
    // toolgen-v1: older histories have no generateTool effects, so they never reach the marker.
    const toolRequests = applied.flatMap((o) => o.effects.filter((e): e is ToolEffect => e.kind === 'generateTool'));
    if (toolRequests.length > 0 && patched('toolgen-v1')) for (const e of toolRequests) await this.startToolGeneration(e, tick);
    // escalate-v1: `escalate`, and held danger-zone commands (rejected outcomes carry the
    // effect), start escalation children; older histories have no escalate effects.
    const escalationsToStart = outcomes.flatMap((o) => o.effects.filter((e): e is EscalateEffect => e.kind === 'escalate'));
    if (escalationsToStart.length > 0 && patched('escalate-v1')) for (const e of escalationsToStart) await this.startEscalation(e);
    // nerve-v1: older histories have no startNerve effects, so they never reach the marker.
    const nervesToStart = applied.flatMap((o) => o.effects.filter((e): e is NerveEffect => e.kind === 'startNerve'));
    if (nervesToStart.length > 0 && patched('nerve-v1')) for (const e of nervesToStart) await this.startNerve(e);
    // speech-v1: `speak` starts a speech workflow; older histories have no speak effects.
    const speeches = applied.flatMap((o) => o.effects.filter((e): e is SpeakEffect => e.kind === 'speak'));
    if (speeches.length > 0 && patched('speech-v1')) for (const e of speeches) await this.startSpeech(e, tick);
    // spawn-v1: `spawn` starts the spawn workflow of a descendant; older histories have no spawn effects.
    const spawns = applied.flatMap((o) => o.effects.filter((e): e is SpawnEffect => e.kind === 'spawn'));
    if (spawns.length > 0 && patched('spawn-v1')) for (const e of spawns) await this.startSpawn(e, tick);
    // llm-task-ask-v1: `llm_task.ask` asks a model once, after its command committed; older histories have no askLlm effects.
    const asks = applied.flatMap((o) => o.effects.filter((e): e is AskEffect => e.kind === 'askLlm'));
    if (asks.length > 0 && patched('llm-task-ask-v1')) for (const e of asks) await this.askLlm(e, tick);
    await this.wakeAgents(applied.flatMap((o) => o.effects));
  }

  /**
   * Wake the agents a note was delivered to (peer messages). A peer whose loop is not running
   * reads the note when it next starts. peers-v1: older histories have no wakeAgent effects.
   */
  private async wakeAgents(effects: readonly LoopEffect[]): Promise<void> {
    const targets = [...new Set(effects.flatMap((e) => (e.kind === 'wakeAgent' && e.agentId !== this.agentId ? [e.agentId] : [])))];
    if (targets.length === 0 || !patched('peers-v1')) return;
    for (const id of targets) {
      try {
        await getExternalWorkflowHandle(workflowIds.agent(id)).signal(wakeSignal, { reason: 'note' });
      } catch (err) {
        log.info('peer not woken (its loop is not running)', { peer: id, error: failureMessage(err) });
      }
    }
  }

  /** Call an activity, riding out an outage of what it needs (phase `degraded` meanwhile). */
  private guard<T>(step: string, fn: () => Promise<T>): Promise<T> {
    let before: AgentStatus['phase'] | null = null;
    return rideOut(step, fn, {
      onDegraded: (d) => {
        if (before === null) {
          before = this.phase;
          this.state.counters.degraded++;
        }
        this.degraded = d;
        this.phase = 'degraded';
      },
      onRecovered: async (d, ms) => {
        this.degraded = null;
        this.phase = before ?? this.phase;
        const message = `recovered: ${d.step} waited ${Math.round(ms / 1000)} s over ${d.attempts} attempt(s) for an unavailable dependency (last error: ${d.lastError})`;
        try {
          await db.logProcess({ agentId: this.agentId, processId: 'degraded', kind: 'infrastructure', status: 'close', message: clean(message), tick: this.state.tick });
        } catch (err) {
          log.warn('recovery not logged', { error: failureMessage(err) });
        }
      },
    });
  }

  /** Store the notes taken while the database was away, in order, each once (by its key). */
  private async flushNotes(): Promise<void> {
    const { state } = this;
    while (state.pendingNotes.length > 0) {
      const note = state.pendingNotes[0]!;
      try {
        await this.guard('recordNote', () => db.recordNote({ agentId: this.agentId, ...note }));
      } catch (err) {
        log.warn('queued note refused by the database', { error: failureMessage(err) });
      }
      state.pendingNotes.shift();
      state.pendingWake = true;
    }
  }

  /** A tick failed for a reason of its own (not an outage): record it; the loop goes on. */
  private async tickFailed(tick: number, step: string, err: unknown): Promise<void> {
    const { agentId, state } = this;
    const error = clean(failureMessage(err));
    state.tick = Math.max(state.tick, tick);
    state.counters.tickFailures++;
    this.failedInARow++;
    this.lastFailedTick = tick;
    this.lastTickFailure = { tick, step, error };
    log.warn('tick failed', { agentId, tick, step, error });
    try {
      await this.guard('logProcess', () => db.logProcess({ agentId, processId: `tick-${tick}`, kind: 'tick_failure', status: 'error', message: `${step}: ${error}`, tick }));
    } catch (logErr) {
      log.warn('tick failure not logged', { error: failureMessage(logErr) });
    }
  }

  /** The loop is about to fail: record it in the agent row and the process log (best effort). */
  private async recordLoopFailure(err: unknown): Promise<void> {
    const error = clean(err instanceof Error ? err.message : String(err));
    try {
      await db.loopStopped({ agentId: this.agentId, tick: this.state.tick, status: 'failed', reason: error });
    } catch (e) {
      log.warn('loop failure not recorded', { error: failureMessage(e) });
    }
  }

  /**
   * The budget cannot cover the tick's call: nothing ran, nothing was spent. Pause visibly (phase
   * `exhausted`, search attribute MindloopLifeforce=exhausted) until regeneration covers the need
   * or a grant arrives (a `wake`); with `onExhausted: escalate`, first ask a human for a grant
   * through an escalation. Notes keep arriving meanwhile; stop ends the wait.
   */
  private async exhausted(shortfall: LifeforceShortfall, tick: number): Promise<void> {
    const { agentId, state } = this;
    const since = new Date().toISOString();
    const before = this.lifeforce;
    this.exhaustions++;
    upsertSearchAttributes([{ key: lifeforceSearchAttribute, value: 'exhausted' }]);
    let escalationId: string | undefined;
    await this.guard('logProcess', () =>
      db.logProcess({ agentId, processId: 'lifeforce', kind: 'lifeforce', status: 'warning', message: clean(`tick ${tick}: ${shortfall.budgetId} cannot cover ${shortfall.needed} LF (${shortfall.reason}; available ${shortfall.available ?? 'unlimited'} LF)`), tick: state.tick }),
    );
    while (!this.stopRequested) {
      const v = await this.guard('lifeforceState', () => db.lifeforceState({ agentId, budgetId: shortfall.budgetId, at: new Date().toISOString(), need: shortfall.needed }));
      const waitMs = v.waitMs ?? null;
      this.lifeforce = { budgetId: v.budgetId, available: v.available, capacity: v.capacity, lastCharge: before?.lastCharge ?? null, priorityKey: v.priorityKey, explicitPriority: v.explicitPriority, onExhausted: v.onExhausted, exhausted: { since, needed: shortfall.needed, reason: shortfall.reason, waitMs, ...(v.needs ? { needs: v.needs } : {}), ...(escalationId ? { escalationId } : {}) } };
      this.phase = 'exhausted';
      if (waitMs === 0 && !v.exhausted) break;
      if (v.onExhausted === 'escalate' && escalationId === undefined && Date.now() - this.lastLifeforceEscalation >= 86_400_000) {
        this.lastLifeforceEscalation = Date.now();
        escalationId = `lifeforce-${agentId}-${this.exhaustions}-${tick}`.slice(0, 64);
        const amount = Math.max(v.askFor, shortfall.needed);
        await this.startEscalation({
          kind: 'escalate',
          escalationId,
          input: {
            escalationId,
            agentId,
            task: `Lifeforce exhausted: budget ${shortfall.budgetId} cannot cover ${shortfall.needed} LF for tick ${tick} (available ${v.available ?? 'unlimited'} LF${waitMs !== null ? `, regeneration covers it in ${Math.ceil(waitMs / 60_000)} min` : ', no regeneration covers it'}). Approve to grant ${amount} LF.`,
            humanRequired: true,
            proposal: { kind: 'lifeforce', name: 'grant', args: { budgetId: shortfall.budgetId, amount } },
            tick,
          },
        } as EscalateEffect);
        this.lifeforce = { ...this.lifeforce, exhausted: { ...this.lifeforce.exhausted!, escalationId } };
      }
      state.pendingWake = false;
      // Regeneration covers it after waitMs; with none coming, re-read the budget now and then.
      const ms = Math.max(1000, waitMs ?? exhaustedRecheckMs);
      await condition(() => this.stopRequested || state.pendingWake, ms, { summary: timerText.exhausted(waitMs, shortfall.budgetId) });
      if (state.pendingWake || waitMs !== null) break; // a grant, a note or regeneration: try the tick again
    }
    upsertSearchAttributes([{ key: lifeforceSearchAttribute, value: 'ok' }]);
    if (this.lifeforce) this.lifeforce = { ...this.lifeforce, exhausted: null };
    await this.guard('logProcess', () => db.logProcess({ agentId, processId: 'lifeforce', kind: 'lifeforce', status: 'close', message: clean(`tick ${tick}: trying again after ${escalationId ? `escalation ${escalationId}, ` : ''}a wait`), tick: state.tick }));
  }

  /** No LLM answered: log it once, keep taking notes, and probe with backoff until one answers. */
  private async coreOutage(err: unknown): Promise<void> {
    const { agentId, state } = this;
    const message = failureMessage(err);
    state.counters.llmFailures++;
    // Phase and mode change together, so the status query never shows one without the other.
    const entering = state.operatingMode !== 'core_outage';
    if (entering) {
      state.operatingMode = 'core_outage';
      state.counters.outages++;
      this.outage = { since: new Date().toISOString(), attempts: 0, lastError: message };
    }
    this.phase = 'outage';
    if (entering) await this.guard('logProcess', () => db.logProcess({ agentId, processId: 'core-outage', kind: 'core_outage', status: 'offline', message: clean(message), tick: state.tick, mode: 'core_outage' }));
    let current = this.outage ?? { since: new Date().toISOString(), attempts: 0, lastError: message };
    current = { ...current, lastError: message };
    this.outage = current;
    while (!this.stopRequested) {
      current = { ...current, attempts: current.attempts + 1 };
      this.outage = current;
      // Notes and signals keep arriving meanwhile; only stop ends the wait early.
      const backoffMs = outageBackoffMs(current.attempts);
      await condition(() => this.stopRequested, backoffMs, { summary: timerText.coreOutage(backoffMs, current.attempts) });
      if (this.stopRequested) return;
      const probe = await this.guard('probeLlm', () => llm.probeLlm({ agentId, role: 'agent' }));
      if (probe.ok) return; // the next think decides whether the outage is over
      current = { ...current, lastError: probe.error ?? current.lastError };
      this.outage = current;
    }
  }

  /** The first successful think after an outage closes it. */
  private async endOutage(model: string): Promise<void> {
    const { state } = this;
    if (state.operatingMode !== 'core_outage') return;
    // Core Outage takes precedence over Isolated: an agent isolated before it is isolated after.
    const mode = state.isolation.since !== null ? 'isolated' : 'normal';
    state.operatingMode = mode;
    await this.guard('logProcess', () =>
      db.logProcess({
        agentId: this.agentId,
        processId: 'core-outage',
        kind: 'core_outage',
        status: 'close',
        message: `recovered: ${model} answers after ${this.outage?.attempts ?? 0} probe(s)`,
        tick: state.tick,
        mode,
      }),
    );
    this.outage = null;
  }

  /**
   * Isolated mode: an agent with known peers that reaches none of them for `isolation_ticks`
   * ticks in a row goes on alone (its applied commands are tagged `emergency_consensus`); a
   * reachable peer ends it. Entering and leaving are logged (process_log, kind `isolation`)
   * with the agent row's operating_mode. isolation-v1: histories from before it carry no peer
   * observations, and only a change of mode issues commands.
   */
  private async followPeers(peers: PeerObservation | undefined, tick: number): Promise<void> {
    const { agentId, state } = this;
    if (!peers) return;
    const step = nextIsolation(state.isolation, peers, new Date().toISOString(), tick);
    if (step.change === null) {
      state.isolation = step.state;
      return;
    }
    if (!patched('isolation-v1')) return;
    const was = state.isolation;
    state.isolation = step.state;
    const entering = step.change === 'enter';
    const mode = entering ? 'isolated' : 'normal';
    if (state.operatingMode !== 'core_outage') state.operatingMode = mode;
    const message = entering
      ? `isolated: none of ${peers.known} known peer(s) reachable for ${step.state.unreachableTicks} tick(s); going on alone, applied commands tagged ${emergencyConsensusTag}`
      : peers.known === 0
        ? `no longer isolated: no known peers any more (isolated since tick ${was.sinceTick ?? '?'})`
        : `no longer isolated: ${peers.reachable} peer(s) reachable again (${peers.reachableIds.join(', ')}); isolated since tick ${was.sinceTick ?? '?'}`;
    await this.guard('logProcess', () => db.logProcess({ agentId, processId: 'isolation', kind: 'isolation', status: entering ? 'warning' : 'close', message: clean(message), tick, mode }));
  }

  /** Run one `shell` command in the sandbox and record its output for the next tick's context. */
  private async runShell(e: ShellEffect, tick: number): Promise<void> {
    let result = null;
    let error: string | undefined;
    try {
      // Same activity, same order as for a plain `shell`: only its input differs (replay-safe).
      result = await sandbox.sandboxRun({ key: e.key, command: e.argv ?? ['sh', '-c', e.command], ...(e.files ? { files: e.files } : {}), budget: { wallMs: e.timeoutMs ?? 30_000 } });
    } catch (err) {
      // Infrastructure (no engine, no image, no sandbox worker): the agent reads why; the loop goes on.
      error = err instanceof ActivityFailure && err.cause ? err.cause.message : String(err);
    }
    await this.guard('recordShellResult', () => db.recordShellResult({ agentId: this.agentId, tick, cmdId: e.cmdId, processId: e.processId, command: e.command, result, ...(error ? { error } : {}) }));
  }

  private async startTaskLoop(taskId: number, title: string, maxTicks?: number): Promise<void> {
    const { agentId } = this;
    const workflowId = workflowIds.task(agentId, taskId);
    try {
      await startChild<typeof taskLoopWorkflow>('taskLoopWorkflow', {
        workflowId,
        args: [{ agentId, taskId, title, parentWorkflowId: this.selfId, maxTicks }],
        // The task loop outlives a continue-as-new of its parent; the parent re-attaches on start.
        parentClosePolicy: ParentClosePolicy.ABANDON,
        ...this.childPriority(),
        ...taskLoopText({ agentId, taskId, title, maxTicks }),
      });
    } catch (err) {
      // Still running from before a restart or continue-as-new: attach to it.
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) {
        log.warn('task loop not started', { taskId, error: String(err) });
        return;
      }
    }
    this.state.taskLoops[String(taskId)] = workflowId;
  }

  /** A child's task priority: its agent's, from the lifeforce left (none before the ledger is read). */
  private childPriority(): { priority?: { priorityKey: number } } {
    return this.lifeforce ? { priority: { priorityKey: this.lifeforce.priorityKey } } : {};
  }

  /** Start the nerve as a child, `agent/<id>/nerve/<name>` (one run at a time; it outlives this run). */
  private async startNerve(e: NerveEffect): Promise<void> {
    const { agentId } = this;
    try {
      await startChild<typeof nerveWorkflow>('nerveWorkflow', {
        workflowId: workflowIds.nerve(agentId, e.nerve),
        args: [{ agentId, nerve: e.nerve as NerveWorkflowInput['nerve'], steps: e.steps, seed: e.seed, mode: e.mode as NerveWorkflowInput['mode'] }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        ...this.childPriority(),
        ...nerveText({ agentId, nerve: e.nerve, steps: e.steps }),
      });
    } catch (err) {
      // Already running: the one run of this nerve goes on.
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) log.warn('nerve not started', { nerve: e.nerve, error: String(err) });
    }
  }

  /**
   * The agent's `speak`: the speech workflow `speech/<id>/<tick>/<cmdId>` (it outlives this run;
   * it holds the lifeforce and writes the outcome onto the command's log row).
   */
  private async startSpeech(e: SpeakEffect, tick: number): Promise<void> {
    const { agentId } = this;
    const requestedBy = { workflowId: this.selfId, tick, cmdId: e.cmdId };
    try {
      await startChild<typeof speechWorkflow>('speechWorkflow', {
        workflowId: workflowIds.speech(agentId, tick, e.cmdId),
        args: [{ kind: 'speak', agentId, text: e.text, ...(e.lang ? { lang: e.lang } : {}), requestedBy }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        ...this.childPriority(),
        ...speechText({ agentId, kind: 'speak', text: e.text, requestedBy }),
      });
    } catch (err) {
      // Started before (a retried tick): that job goes on.
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) log.warn('speech not started', { cmdId: e.cmdId, error: String(err) });
    }
  }

  /**
   * The agent's `spawn`: the spawn workflow `agent/<id>/spawn/<name>` (it outlives this run; the
   * child it gives birth to runs its own loop, and the outcome comes back as a note and a wake).
   */
  private async startSpawn(e: SpawnEffect, tick: number): Promise<void> {
    const { agentId } = this;
    const requestedBy = { workflowId: this.selfId, tick, cmdId: e.cmdId };
    const input = { parentId: agentId, type: e.type, name: e.name, ...(e.goals ? { goals: e.goals } : {}), ...(e.budget !== undefined ? { budget: e.budget } : {}), requestedBy };
    try {
      await startChild<typeof spawnWorkflow>('spawnWorkflow', {
        workflowId: workflowIds.spawn(agentId, e.name),
        args: [input],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        ...this.childPriority(),
        ...spawnText(input),
      });
    } catch (err) {
      // Already under way (a retried tick): that spawn goes on, and its note will come.
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) log.warn('spawn not started', { name: e.name, error: String(err) });
    }
  }

  /**
   * An audio note: check that the file is audio the engine can take (the update fails, naming
   * the problem, when it is not), then start its transcription as a child that outlives this
   * run. Its text comes back through `addNote`, which stores it and wakes the loop.
   */
  private async transcribeNote(audio: { path: string; language?: string }, note: Pick<QueuedNote, 'priority' | 'tags' | 'source' | 'sender'>, updateId: string): Promise<AddNoteResult> {
    const { agentId } = this;
    try {
      await db.speechCheckAudio({ path: audio.path });
    } catch (err) {
      const why = isInfraFailure(err) ? `the audio cannot be checked now (${failureMessage(err)}); send it again later` : failureMessage(err);
      throw ApplicationFailure.create({ type: 'NoteRefused', message: `audio note not taken: ${why}`, nonRetryable: true });
    }
    const workflowId = workflowIds.speech(agentId, 'note', updateId);
    const tags = note.tags.filter((t) => t !== 'audio').slice(0, 19);
    try {
      await startChild<typeof speechWorkflow>('speechWorkflow', {
        workflowId,
        args: [{ kind: 'transcribe', agentId, audioPath: audio.path, ...(audio.language ? { language: audio.language } : {}), note: { priority: note.priority, tags, source: note.source, ...(note.sender ? { sender: note.sender } : {}) } }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        ...this.childPriority(),
        ...speechText({ agentId, kind: 'transcribe', audioPath: audio.path }),
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw ApplicationFailure.create({ type: 'NoteRefused', message: `audio note not taken: the transcription did not start (${failureMessage(err)})`, nonRetryable: true });
    }
    return { noteId: null, transcribing: { workflowId } };
  }

  /**
   * `llm_task.ask`: one question to one model, its answer stored as a note before the next tick
   * (which therefore reads it). An outage of the database is ridden out; the activity itself
   * turns a model that does not answer into a note saying so.
   */
  private async askLlm(e: AskEffect, tick: number): Promise<void> {
    try {
      const r = await this.guard('askLlmOnce', () =>
        llmAt(this.lifeforce?.priorityKey).askLlmOnce({ agentId: this.agentId, tick, workflowId: this.selfId, cmdId: e.cmdId, key: e.key, question: e.question, role: e.role, ...(e.registryId !== undefined ? { registryId: e.registryId } : {}), ...(e.model ? { model: e.model } : {}) }),
      );
      this.state.pendingWake = true;
      log.info('llm_task.ask answered', { cmdId: e.cmdId, noteId: r.noteId, answered: r.answered });
    } catch (err) {
      log.warn('llm_task.ask not answered', { cmdId: e.cmdId, error: failureMessage(err) });
    }
  }

  /** Start escalationWorkflow `escalation/<id>` (it outlives this run; its answer comes back as a note + wake). */
  private async startEscalation(e: EscalateEffect): Promise<void> {
    try {
      await startChild<typeof escalationWorkflow>('escalationWorkflow', {
        workflowId: workflowIds.escalation(e.escalationId),
        args: [e.input as Parameters<typeof escalationWorkflow>[0]],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        ...this.childPriority(),
        ...escalationInputText(e.escalationId, e.input),
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) log.warn('escalation not started', { escalationId: e.escalationId, error: String(err) });
    }
  }

  /** Start toolGenerationWorkflow for a capability (one at a time per capability; it outlives this run). */
  private async startToolGeneration(e: ToolEffect, tick: number): Promise<void> {
    const { agentId } = this;
    const requestedBy = { workflowId: this.selfId, tick, cmdId: e.cmdId };
    try {
      await startChild<typeof toolGenerationWorkflow>('toolGenerationWorkflow', {
        workflowId: workflowIds.tool(agentId, e.capability),
        args: [{ agentId, capability: e.capability, description: e.description, requestedBy }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        ...this.childPriority(),
        ...toolGenerationText({ agentId, capability: e.capability, description: e.description, requestedBy }),
      });
    } catch (err) {
      // Already generating this capability: its note will come.
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) log.warn('tool generation not started', { capability: e.capability, error: String(err) });
    }
  }

  private async stopTaskLoop(taskId: number): Promise<void> {
    const { agentId, state } = this;
    const workflowId = state.taskLoops[String(taskId)] ?? workflowIds.task(agentId, taskId);
    try {
      await getExternalWorkflowHandle(workflowId).signal(taskStopSignal, { reason: 'stopped by the main loop' });
    } catch (err) {
      // Already finished: record the stop so it is not resumed at the next start.
      log.info('task loop already closed', { taskId, error: String(err) });
      await this.guard('setTaskLoopStatus', () => db.setTaskLoopStatus({ agentId, taskId, replStatus: 'stopped', reason: 'stopped by the main loop' }));
    }
    delete state.taskLoops[String(taskId)];
  }
}
