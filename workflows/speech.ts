/**
 * A speech job of an agent (`speech/<agentId>/…`): hear a WAV into the agent's note, or say a
 * text of the agent into a WAV. The engine is the Python worker on the speech queues; this
 * workflow does the rest, in order:
 *
 *   1. `speechBegin`: the input is audio (transcribe), and the agent's lifeforce holds the job's
 *      seconds (`speechCost`; a text's are bounded from its length). It also gives the task
 *      priority of the engine call, from the lifeforce left (core/priority.ts).
 *   2. `speechRoute`: GPU first (core/speech/route.ts), then the engine's activity on that queue,
 *      at that priority: under a backlog the matching service hands out jobs by priority, then
 *      by arrival.
 *   3. `speechSettle`: the seconds the engine reports are charged; the rest goes back.
 *   4. The outcome: a transcription as the agent's note (through its loop's `addNote` when the
 *      loop runs, so it wakes), a spoken WAV as an outgoing note and on the `speak` command's row.
 *
 * Input the engine refuses (not audio, empty, too long, an unsupported rate or language) ends the
 * job with a failure naming the problem, and its hold goes back. Outages never end it: no speech
 * worker polling, a worker gone mid-job, an engine failing over its attempts — the job waits,
 * asks for a route again and goes on, and its `status` query says why it waits.
 */
import { TimeoutType } from '@temporalio/common';
import {
  ActivityFailure,
  ApplicationFailure,
  TimeoutFailure,
  defineQuery,
  proxyActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import { continueAsNewWithFailover } from './lib/continue-as-new.js';
import { z } from 'zod';
import type { SpeechActivities, SpeechBegun } from '../activities/speech.js';
import type { NoteAudio } from '../db/schema/memory.js';
import { agentIdSchema } from '../core/ids.js';
import { clamp01 } from '../core/values.js';
import {
  isSpeechInputError,
  maxSpeakChars,
  speechInputErrors,
  speechLanguageSchema,
  type EngineActivities,
  type EngineSpeakResult,
  type EngineTranscribeResult,
} from '../core/speech/engine.js';
import type { SpeechQueue, SpeechRoute } from '../core/speech/route.js';
import { dbActivity, fewAttempts, speechEngineActivity } from './lib/activity-options.js';
import { failureMessage, rideOut } from './lib/infra.js';
import { outageBackoffMs } from '../core/failure.js';
import { parseWorkflowInput } from './lib/input.js';
import { agentIdSearchAttribute, kindSearchAttribute } from './lib/search-attributes.js';
import { handlerText, timerText } from './lib/ui-text.js';

const acts = proxyActivities<SpeechActivities>(fewAttempts(dbActivity));
// Delivering a note may wait on the agent loop's update: a minute an attempt.
const deliver = proxyActivities<SpeechActivities>(fewAttempts({ ...dbActivity, startToCloseTimeout: '1 minute' }));

const noteSources = ['user', 'peer', 'system', 'oversight', 'human', 'llm:task'] as const;

/** How long the job waits for a worker to take it, and to finish it (tests shorten them). */
const timingSchema = z.strictObject({
  /** scheduleToStart on a queue a live worker polls: a backlog may hold it this long before it asks again. */
  queuedMs: z
    .number()
    .int()
    .min(1000)
    .max(86_400_000)
    .default(10 * 60_000),
  /** scheduleToStart while no speech worker polls: it waits on the CPU queue this long, then asks again. */
  parkedMs: z.number().int().min(1000).max(86_400_000).default(60_000),
  /** startToClose of one engine attempt. */
  runMs: z
    .number()
    .int()
    .min(1000)
    .max(6 * 3_600_000)
    .default(15 * 60_000),
  /** A job waiting this many rounds for a worker continues as new (its history stays short). */
  roundsPerRun: z.number().int().min(1).max(1000).default(100),
});

/** What a job that continued as new carries: its hold (taken once) and how long it has waited. */
const carryOverSchema = z.strictObject({
  begun: z.strictObject({
    seconds: z.number().min(0),
    holdKey: z.string().nullable(),
    held: z.number().min(0),
    priorityKey: z.number().int().min(1).max(5),
    available: z.number().nullable(),
    outPath: z.string().optional(),
    audio: z.strictObject({ sampleRate: z.number(), channels: z.number() }).optional(),
  }),
  waiting: z.strictObject({ since: z.string(), reason: z.string(), attempts: z.number().int().min(0) }).nullable(),
});

const transcribeInput = z.strictObject({
  kind: z.literal('transcribe'),
  agentId: agentIdSchema,
  audioPath: z.string().trim().min(1).max(4096),
  /** `auto` (default) lets the engine find the language. */
  language: speechLanguageSchema.optional(),
  /** How the note is filed. */
  carryOver: carryOverSchema.optional(),
  note: z
    .strictObject({
      priority: z.number().int().min(0).max(10).optional(),
      tags: z.array(z.string().min(1).max(40)).max(19).optional(),
      source: z.enum(noteSources).optional(),
      sender: z.string().max(200).optional(),
    })
    .optional(),
  timing: timingSchema.optional(),
});

const speakInput = z.strictObject({
  kind: z.literal('speak'),
  agentId: agentIdSchema,
  text: z.string().trim().min(1, 'nothing to say: text is empty').max(maxSpeakChars),
  lang: speechLanguageSchema.optional(),
  voice: z.string().trim().min(1).max(100).optional(),
  /** The agent's `speak` command this job says (its log row gets the outcome). */
  requestedBy: z
    .strictObject({ workflowId: z.string().min(1), tick: z.number().int().min(0), cmdId: z.string().min(1).max(300) })
    .optional(),
  timing: timingSchema.optional(),
  carryOver: carryOverSchema.optional(),
});

export const speechWorkflowInput = z.discriminatedUnion('kind', [transcribeInput, speakInput]);
export type SpeechWorkflowInput = z.input<typeof speechWorkflowInput>;
type Input = z.output<typeof speechWorkflowInput>;

interface Common {
  agentId: string;
  workflowId: string;
  durationS: number;
  backend: string;
  device: string;
  queue: SpeechQueue;
  /** LF charged for the seconds (0 with the ledger off). */
  charged: number;
  noteId: number | null;
}
export type SpeechResult =
  | (Common & {
      kind: 'transcribe';
      text: string;
      language: string;
      confidence: number;
      model: string;
      audioPath: string;
      delivered: 'loop' | 'stored' | 'queued';
    })
  | (Common & { kind: 'speak'; audioPath: string; lang: string; voice: string });

export interface SpeechStatus {
  kind: Input['kind'];
  agentId: string;
  /** holding: checking the input and holding lifeforce; queued: on a speech queue (waiting or running); waiting: no worker took it, asking again. */
  phase: 'holding' | 'routing' | 'queued' | 'waiting' | 'recording' | 'done' | 'failed';
  route: SpeechRoute | null;
  /** Why the job waits for a speech worker (no worker polls, one went away, the engine fails), since when, how many tries. */
  waiting: { since: string; reason: string; attempts: number } | null;
  lifeforce: { seconds: number; held: number; charged: number | null; priorityKey: number } | null;
  result: SpeechResult | null;
  error: string | null;
}

/** Phase, route, why it waits, lifeforce held and charged, the result or the error. */
export const speechStatusQuery = defineQuery<SpeechStatus>('status');

/** Hear a WAV into the agent's note, or say a text into a WAV (see the module comment). */
export async function speechWorkflow(raw: SpeechWorkflowInput): Promise<SpeechResult> {
  const input = parseWorkflowInput('speechWorkflow', speechWorkflowInput, raw);
  return new SpeechJob(input).run();
}

class SpeechJob {
  readonly workflowId = workflowInfo().workflowId;
  readonly status: SpeechStatus;
  private readonly timing: z.output<typeof timingSchema>;
  private readonly engines = new Map<string, EngineActivities>();

  constructor(readonly input: Input) {
    this.status = {
      kind: input.kind,
      agentId: input.agentId,
      phase: 'holding',
      route: null,
      waiting: null,
      lifeforce: null,
      result: null,
      error: null,
    };
    this.timing = input.timing ?? timingSchema.parse({});
  }

  async run(): Promise<SpeechResult> {
    const { input, status } = this;
    setHandler(speechStatusQuery, () => status, { description: handlerText.speech.status });
    upsertSearchAttributes([
      { key: agentIdSearchAttribute, value: input.agentId },
      { key: kindSearchAttribute, value: 'speech' },
    ]);
    // A job that continued as new holds what it held: it never holds twice.
    const begun = input.carryOver?.begun ?? (await this.begin());
    if (input.carryOver) {
      status.lifeforce = { seconds: begun.seconds, held: begun.held, charged: null, priorityKey: begun.priorityKey };
      status.waiting = input.carryOver.waiting;
    }
    const { result, queue } = await this.engine(begun);
    status.phase = 'recording';
    let charged = 0;
    if (begun.holdKey) {
      const holdKey = begun.holdKey;
      const settled = await rideOut('speechSettle', () =>
        acts.speechSettle({
          holdKey,
          agentId: input.agentId,
          seconds: result.duration_s,
          metadata: { backend: result.backend, device: result.device, queue },
        }),
      );
      charged = settled.charged;
    }
    status.lifeforce = { ...status.lifeforce!, charged };
    const done =
      input.kind === 'transcribe'
        ? await this.deliver(input, result as EngineTranscribeResult, queue, charged)
        : await this.recordSpeech(input, result as EngineSpeakResult, queue, charged);
    status.result = done;
    status.phase = 'done';
    return done;
  }

  /** Check the input and hold the lifeforce; a refusal (bad audio, no agent, no lifeforce) ends the job. */
  private async begin(): Promise<SpeechBegun> {
    const { input, status } = this;
    try {
      const begun = await rideOut('speechBegin', () =>
        acts.speechBegin({
          workflowId: this.workflowId,
          kind: input.kind,
          agentId: input.agentId,
          ...(input.kind === 'transcribe' ? { audioPath: input.audioPath } : { text: input.text, outName: uuid4() }),
          at: new Date().toISOString(),
        }),
      );
      status.lifeforce = { seconds: begun.seconds, held: begun.held, charged: null, priorityKey: begun.priorityKey };
      return begun;
    } catch (err) {
      throw await this.fail(err, null);
    }
  }

  /** The engine's activity on the routed queue at the job's priority; outages are waited out. */
  private async engine(
    begun: SpeechBegun,
  ): Promise<{ result: EngineTranscribeResult | EngineSpeakResult; queue: SpeechQueue }> {
    const { input, status } = this;
    let attempts = status.waiting?.attempts ?? 0;
    for (let round = 0; ; round++) {
      if (round >= this.timing.roundsPerRun || workflowInfo().continueAsNewSuggested) {
        await continueAsNewWithFailover<typeof speechWorkflow>({
          ...input,
          carryOver: { begun, waiting: status.waiting },
        });
      }
      status.phase = 'routing';
      const route = await rideOut('speechRoute', () => acts.speechRoute({}));
      status.route = route;
      if (route.state === 'none')
        status.waiting = {
          since: status.waiting?.since ?? new Date().toISOString(),
          reason: route.reason,
          attempts: attempts + 1,
        };
      status.phase = route.state === 'none' ? 'waiting' : 'queued';
      const engine = this.engineOn(
        route.queue,
        begun.priorityKey,
        route.state === 'none' ? this.timing.parkedMs : this.timing.queuedMs,
      );
      try {
        const result =
          input.kind === 'transcribe'
            ? await engine.transcribe({
                audio_path: input.audioPath,
                language: input.language ?? 'auto',
                word_timestamps: false,
              })
            : await engine.speak({
                text: input.text,
                out_path: begun.outPath!,
                ...(input.lang ? { lang: input.lang } : {}),
                ...(input.voice ? { voice: input.voice } : {}),
              });
        status.waiting = null;
        return { result, queue: route.queue };
      } catch (err) {
        if (refusal(err)) throw await this.fail(err, begun.holdKey);
        attempts++;
        const timedOut =
          err instanceof ActivityFailure &&
          err.cause instanceof TimeoutFailure &&
          err.cause.timeoutType === TimeoutType.SCHEDULE_TO_START;
        const reason = timedOut
          ? `no speech worker took the job from ${route.queue} within ${Math.round((route.state === 'none' ? this.timing.parkedMs : this.timing.queuedMs) / 1000)} s (${route.reason}); asking for a route again`
          : `the speech engine on ${route.queue} failed: ${failureMessage(err)}; trying again`;
        status.waiting = { since: status.waiting?.since ?? new Date().toISOString(), reason, attempts };
        status.phase = 'waiting';
        // A schedule-to-start timeout was the wait itself; a failing engine is given a pause.
        if (!timedOut) {
          const ms = outageBackoffMs(attempts);
          await sleep(ms, { summary: timerText.speechWait(ms, attempts) });
        }
      }
    }
  }

  /** The engine's activities on `queue` at `priorityKey`, given up on after `scheduleToStartMs` without a worker. */
  private engineOn(queue: SpeechQueue, priorityKey: number, scheduleToStartMs: number): EngineActivities {
    const key = `${queue}|${priorityKey}|${scheduleToStartMs}`;
    let proxy = this.engines.get(key);
    if (!proxy) {
      proxy = proxyActivities<EngineActivities>(
        speechEngineActivity({
          queue,
          scheduleToStartMs,
          runMs: this.timing.runMs,
          priorityKey,
          inputErrors: speechInputErrors,
        }),
      );
      this.engines.set(key, proxy);
    }
    return proxy;
  }

  /** The transcription as the agent's note, the audio recorded on it. */
  private async deliver(
    input: Extract<Input, { kind: 'transcribe' }>,
    r: EngineTranscribeResult,
    queue: SpeechQueue,
    charged: number,
  ): Promise<SpeechResult> {
    const audio: NoteAudio = {
      kind: 'heard',
      path: input.audioPath,
      durationS: r.duration_s,
      language: r.language || null,
      languageProbability: clamp01(r.language_probability),
      confidence: clamp01(r.confidence),
      backend: r.backend,
      device: r.device,
      model: r.model,
      workflowId: this.workflowId,
    };
    const note = input.note ?? {};
    const tags = [...new Set(['audio', ...(note.tags ?? [])])];
    const d = await rideOut('speechDeliverNote', () =>
      deliver.speechDeliverNote({
        workflowId: this.workflowId,
        agentId: input.agentId,
        text: r.text,
        priority: note.priority ?? 1,
        tags,
        source: note.source ?? 'user',
        ...(note.sender ? { sender: note.sender } : {}),
        audio,
      }),
    );
    return {
      kind: 'transcribe',
      agentId: input.agentId,
      workflowId: this.workflowId,
      text: r.text,
      language: r.language,
      confidence: r.confidence,
      model: r.model,
      audioPath: input.audioPath,
      durationS: r.duration_s,
      backend: r.backend,
      device: r.device,
      queue,
      charged,
      noteId: d.noteId,
      delivered: d.via,
    };
  }

  /** The spoken WAV as the agent's outgoing note, and the outcome on its `speak` command. */
  private async recordSpeech(
    input: Extract<Input, { kind: 'speak' }>,
    r: EngineSpeakResult,
    queue: SpeechQueue,
    charged: number,
  ): Promise<SpeechResult> {
    const audio: NoteAudio = {
      kind: 'spoken',
      path: r.audio_path,
      durationS: r.duration_s,
      language: r.lang || null,
      backend: r.backend,
      device: r.device,
      voice: r.voice,
      sampleRate: r.sample_rate,
      workflowId: this.workflowId,
    };
    const { noteId } = await rideOut('speechRecordSpeak', () =>
      acts.speechRecordSpeak({
        workflowId: this.workflowId,
        agentId: input.agentId,
        text: input.text,
        audio,
        ...(input.requestedBy ? { requestedBy: { tick: input.requestedBy.tick, cmdId: input.requestedBy.cmdId } } : {}),
      }),
    );
    return {
      kind: 'speak',
      agentId: input.agentId,
      workflowId: this.workflowId,
      audioPath: r.audio_path,
      durationS: r.duration_s,
      lang: r.lang,
      voice: r.voice,
      backend: r.backend,
      device: r.device,
      queue,
      charged,
      noteId,
    };
  }

  /**
   * The job ends: its hold goes back, a `speak` command hears why, and the workflow fails
   * (non-retryable) with the problem's type and a message that names it.
   */
  private async fail(err: unknown, holdKey: string | null): Promise<ApplicationFailure> {
    const { input, status } = this;
    const cause = err instanceof ActivityFailure ? err.cause : err;
    const type = cause instanceof ApplicationFailure && cause.type ? cause.type : 'SpeechFailed';
    const message = `speech ${input.kind} for ${input.agentId} refused (${type}): ${failureMessage(err)}`;
    status.phase = 'failed';
    status.error = message;
    if (holdKey) await rideOut('speechRelease', () => acts.speechRelease({ holdKey, reason: message }));
    if (input.kind === 'speak' && input.requestedBy) {
      const requestedBy = { tick: input.requestedBy.tick, cmdId: input.requestedBy.cmdId };
      await rideOut('speechRecordSpeak', () =>
        acts.speechRecordSpeak({
          workflowId: this.workflowId,
          agentId: input.agentId,
          text: input.text,
          audio: null,
          error: message,
          requestedBy,
        }),
      );
    }
    return ApplicationFailure.create({ type, message, nonRetryable: true });
  }
}

/**
 * A failure that ends the job: input the engine refused. Anything else the engine says (its
 * model not installed on that worker, a crash) is waited out like an outage: another worker,
 * or the same one set up, may do it.
 */
function refusal(err: unknown): boolean {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof ApplicationFailure && isSpeechInputError(cause.type ?? undefined);
}
