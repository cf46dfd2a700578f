/**
 * The speech organ's `mindloop`-queue half. The engine (the Python worker, `speech/`) hears
 * and speaks on the `speech-gpu` / `speech-cpu` queues; these activities do what the speech
 * workflow needs around it: pick the queue (`speechRoute`, from the pollers Temporal reports),
 * check an audio file and hold the agent's lifeforce for its seconds (`speechBegin`), settle
 * the seconds the engine reports (`speechSettle`) or give them back (`speechRelease`), and
 * record what came out: a transcription as the agent's note, delivered through its loop's
 * `addNote` update when the loop runs so that it wakes (`speechDeliverNote`), a spoken text as
 * an outgoing note with its WAV (`speechRecordSpeak`). No TypeScript worker polls the speech
 * queues any more.
 */
import { mergeCommandResult } from '../db/queries/command-log.js';
import { mkdir, open } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ApplicationFailure } from '@temporalio/activity';
import { WorkflowNotFoundError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { eq } from 'drizzle-orm';
import { budgetIds, speechCost, type PriceTable } from '../core/lifeforce.js';
import { priorityKeyFor, unlimitedPriorityKey } from '../core/priority.js';
import { clipText } from '../core/sanitize.js';
import { speakSecondsBound, type SpeechInputError } from '../core/speech/engine.js';
import {
  chooseSpeechQueue,
  defaultPollerFreshMs,
  speechQueues,
  type SpeechPoller,
  type SpeechQueue,
  type SpeechRoute,
} from '../core/speech/route.js';
import { parseWavHeader, wavHeadBytes, type WavInfo } from '../core/speech/wav.js';
import { workflowIds } from '../core/ids.js';
import type { Db } from '../db/client.js';
import { budgetReport, release, reserve, settle, type ReserveRequest } from '../db/queries/lifeforce.js';
import { addNoteOnce } from '../db/queries/notes.js';
import { agents, type IncomingNoteSource, type NoteAudio } from '../db/schema/index.js';
import { activityContext } from './heartbeat.js';
import { maxResultText } from './commands/shared.js';
import { ErrorType, nonRetryable, retryable } from './errors.js';

export interface SpeechActivityDeps {
  db: Db;
  prices: PriceTable;
  /** false: the lifeforce ledger is off — speech is neither held nor charged. */
  ledger?: boolean;
  /** MINDLOOP_DATA_DIR: spoken audio goes under `<dataDir>/speech/<agentId>/`. */
  dataDir: string;
  /** The Temporal client to ask about pollers and to deliver notes with; default the worker's own. */
  client?: () => Client;
  /** How long a route is reused before the pollers are asked again (default 3 s). */
  routeCacheMs?: number;
  /** A poller counts as live when it polled within this long (core/speech/route.ts). */
  pollerFreshMs?: number;
}

/** A hold stays open this long before the sweep may release it: a job can wait hours for a speech worker. */
const speechHoldTtlMs = 24 * 3_600_000;

/** Where `mindloop note --audio` and the speak command keep their audio. */
function speechDir(dataDir: string, agentId: string): string {
  return join(resolve(dataDir), 'speech', agentId);
}

/** A refusal of the input (never retried; the speech workflow ends naming it). */
function speechInputFailure(type: SpeechInputError, message: string): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: true });
}

/** Read and check a WAV file: its format and duration, or the input failure that says what is wrong. */
async function inspectAudio(path: string): Promise<WavInfo> {
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw speechInputFailure(
      'BadInput',
      code === 'ENOENT'
        ? `audio file not found: ${path}`
        : `audio file not readable: ${path} (${code ?? (err as Error).message})`,
    );
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw speechInputFailure('BadInput', `audio path is not a file: ${path}`);
    const head = new Uint8Array(Math.min(wavHeadBytes, info.size));
    await handle.read(head, 0, head.length, 0);
    const parsed = parseWavHeader(head, info.size);
    if (!parsed.ok) throw speechInputFailure(parsed.code, `${path}: ${parsed.reason}`);
    return parsed.wav;
  } catch (err) {
    if (err instanceof ApplicationFailure) throw err;
    throw speechInputFailure(
      'BadInput',
      `audio file not readable: ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  } finally {
    await handle.close();
  }
}

interface SpeechBeginInput {
  /** The speech workflow: its id keys the hold. */
  workflowId: string;
  kind: 'transcribe' | 'speak';
  agentId: string;
  audioPath?: string;
  text?: string;
  /** The file name (without `.wav`) a `speak` writes under the agent's speech dir. */
  outName?: string;
  /** The workflow's clock (ISO). */
  at: string;
}

export interface SpeechBegun {
  /** Seconds held for: the WAV's duration, or a bound of the text's. */
  seconds: number;
  /** The ledger key to settle (null: the ledger is off). */
  holdKey: string | null;
  held: number;
  /** Temporal task priority of the engine call, from the agent's lifeforce (core/priority.ts). */
  priorityKey: number;
  available: number | null;
  outPath?: string;
  audio?: { sampleRate: number; channels: number };
}

interface SpeechDeliverInput {
  workflowId: string;
  agentId: string;
  text: string;
  priority: number;
  tags: string[];
  source: IncomingNoteSource;
  sender?: string;
  audio: NoteAudio;
}

interface SpeechRecordSpeakInput {
  workflowId: string;
  agentId: string;
  text: string;
  /** The spoken audio, or null when the job failed (`error` says why). */
  audio: NoteAudio | null;
  error?: string;
  /** The agent's `speak` command: its command_log row gets the outcome, for the next context. */
  requestedBy?: { tick: number; cmdId: string };
}

// temporal.api.enums.v1 numbers (the proto package is CommonJS, without named ESM exports).
const taskQueueKind = 1; // TASK_QUEUE_KIND_NORMAL
const activityQueueType = 2; // TASK_QUEUE_TYPE_ACTIVITY

function timestampMs(
  ts: { seconds?: { toNumber(): number } | number | null; nanos?: number | null } | null | undefined,
): number | null {
  if (!ts || ts.seconds === undefined || ts.seconds === null) return null;
  const seconds = typeof ts.seconds === 'number' ? ts.seconds : ts.seconds.toNumber();
  return seconds * 1000 + Math.floor((ts.nanos ?? 0) / 1e6);
}

/** The activity pollers Temporal lists on a queue. */
export async function queuePollers(client: Client, namespace: string, queue: SpeechQueue): Promise<SpeechPoller[]> {
  const res = await client.workflowService.describeTaskQueue({
    namespace,
    taskQueue: { name: queue, kind: taskQueueKind },
    taskQueueType: activityQueueType,
  });
  return (res.pollers ?? []).map((p) => ({ identity: p.identity ?? '', lastAccessMs: timestampMs(p.lastAccessTime) }));
}

/** The hold of a speech job, under a key its workflow finds again (a closed one from an earlier run: the next key). */
async function holdSpeech(db: Db, req: ReserveRequest): Promise<{ key: string; held: number }> {
  let held = await reserve(db, req);
  for (let i = 2; held.ok && held.closed; i++) {
    if (i > 20) throw nonRetryable(ErrorType.Unexpected, `speech hold ${req.key} was closed ${i - 1} times`);
    held = await reserve(db, { ...req, key: `${req.key}#${i}` });
  }
  if (!held.ok) {
    const details = { budgetId: held.budgetId, reason: held.reason, needed: held.needed, available: held.available };
    throw nonRetryable(
      ErrorType.LifeforceExhausted,
      `lifeforce exhausted: budget ${held.budgetId} cannot cover ${held.needed} LF for ${req.reason ?? 'speech'} (${held.reason}; available ${held.available ?? 'unlimited'} LF)`,
      details,
    );
  }
  return { key: held.key, held: held.amount };
}

/** Speech activities of the `mindloop` queue, built from their dependencies. */
export function createSpeechActivities(deps: SpeechActivityDeps) {
  const clientOf = (): Client => {
    if (deps.client) return deps.client();
    const ctx = activityContext();
    if (!ctx)
      throw nonRetryable(ErrorType.InvalidRequest, 'speech: no Temporal client (run as an activity, or pass one)');
    return ctx.client;
  };
  return {
    ...speechInputActivities(deps, clientOf),
    ...speechLedgerActivities(deps),
    ...speechRecordActivities(deps, clientOf),
  };
}

/** Before a job: which queue runs it, and whether its audio is audio. */
function speechInputActivities(deps: SpeechActivityDeps, clientOf: () => Client) {
  const cacheMs = deps.routeCacheMs ?? 3_000;
  const routes = new Map<string, { at: number; route: SpeechRoute }>();
  return {
    /**
     * Which speech queue gets a job now: GPU first (core/speech/route.ts), from the activity
     * pollers Temporal lists on both queues. Kept for a few seconds, so a burst of jobs asks once.
     */
    async speechRoute(_input: Record<string, never> = {}): Promise<SpeechRoute> {
      const client = clientOf();
      const namespace = client.options.namespace;
      const now = Date.now();
      const cached = routes.get(namespace);
      if (cached && now - cached.at < cacheMs) return cached.route;
      const [gpu, cpu] = await Promise.all(speechQueues.map((q) => queuePollers(client, namespace, q)));
      const route = chooseSpeechQueue(
        { 'speech-gpu': gpu!, 'speech-cpu': cpu! },
        Date.now(),
        deps.pollerFreshMs ?? defaultPollerFreshMs,
      );
      routes.set(namespace, { at: now, route });
      return route;
    },

    /** Check that a file is WAV audio the engine can take: its duration and format, or why not. */
    async speechCheckAudio(input: {
      path: string;
    }): Promise<{ path: string; durationS: number; sampleRate: number; channels: number }> {
      const wav = await inspectAudio(input.path);
      return { path: input.path, durationS: wav.durationS, sampleRate: wav.sampleRate, channels: wav.channels };
    },
  };
}

/** A job's lifeforce: held before the engine runs, then settled at the seconds it reports, or given back. */
function speechLedgerActivities(deps: SpeechActivityDeps) {
  const { db, prices } = deps;
  const ledger = deps.ledger ?? true;
  return {
    /**
     * Before the engine runs: the agent exists, the audio is audio (transcribe), and the agent's
     * lifeforce holds the job's seconds (`speechCost`; a text's seconds are bounded from its
     * length). The hold is keyed by the workflow, so a retry finds it. Returns the task priority
     * of the engine call, from what the budget has left.
     */
    async speechBegin(input: SpeechBeginInput): Promise<SpeechBegun> {
      const [agent] = await db.select({ id: agents.id }).from(agents).where(eq(agents.id, input.agentId));
      if (!agent)
        throw speechInputFailure(
          'BadInput',
          `no agent '${input.agentId}' (start it with \`mindloop start ${input.agentId}\`)`,
        );
      let seconds: number;
      let audio: SpeechBegun['audio'];
      let outPath: string | undefined;
      if (input.kind === 'transcribe') {
        if (!input.audioPath) throw speechInputFailure('BadInput', 'transcribe needs audioPath');
        const wav = await inspectAudio(input.audioPath);
        // Engines report durations to the hundredth: held at the hundredth above, never below theirs.
        seconds = Math.ceil(wav.durationS * 100 - 1e-9) / 100;
        audio = { sampleRate: wav.sampleRate, channels: wav.channels };
      } else {
        if (!input.text?.trim()) throw speechInputFailure('BadInput', 'speak needs a non-empty text');
        seconds = speakSecondsBound(input.text);
        const dir = speechDir(deps.dataDir, input.agentId);
        await mkdir(dir, { recursive: true });
        outPath = join(dir, `${input.outName ?? input.workflowId.replace(/[^A-Za-z0-9_.-]+/g, '_')}.wav`);
      }
      const at = Date.parse(input.at);
      const budgetId = budgetIds.agent(input.agentId);
      let holdKey: string | null = null;
      let held = 0;
      if (ledger) {
        const what =
          input.kind === 'transcribe'
            ? `transcribe ${seconds.toFixed(1)} s of audio`
            : `speak ${seconds} s (bound) of text`;
        const hold = await holdSpeech(db, {
          key: `speech:${input.workflowId}`,
          budgetId,
          amount: speechCost(prices, seconds),
          operation: 'speech',
          at,
          ttlMs: speechHoldTtlMs,
          reason: what,
          metadata: { kind: input.kind, seconds, workflowId: input.workflowId },
        });
        holdKey = hold.key;
        held = hold.held;
      }
      const report = await budgetReport(db, budgetId, { at, entries: 0 });
      const available = report?.available ?? null;
      const priorityKey = report
        ? priorityKeyFor({
            available,
            capacity: report.budget.capacity,
            ...(report.budget.priority !== null ? { explicit: report.budget.priority } : {}),
          })
        : unlimitedPriorityKey;
      return {
        seconds,
        holdKey,
        held,
        priorityKey,
        available,
        ...(outPath ? { outPath } : {}),
        ...(audio ? { audio } : {}),
      };
    },

    /**
     * Charge the seconds the engine reports (at most what was held; more is recorded as overrun).
     * A hold the sweep released while the job waited is charged anew under a key of its own.
     */
    async speechSettle(input: {
      holdKey: string;
      agentId: string;
      seconds: number;
      metadata?: Record<string, unknown>;
    }): Promise<{ charged: number; available: number | null }> {
      const actual = speechCost(prices, input.seconds);
      const closed = await settle(db, input.holdKey, actual, { seconds: input.seconds, ...input.metadata });
      let charged = closed.charged;
      if (closed.replayed && charged === 0 && actual > 0) {
        const late = `${input.holdKey}/late`;
        const held = await reserve(db, {
          key: late,
          budgetId: budgetIds.agent(input.agentId),
          amount: actual,
          operation: 'speech',
          ttlMs: speechHoldTtlMs,
          reason: `speech settled after its hold was released (${input.seconds.toFixed(1)} s)`,
        });
        if (held.ok)
          charged = (await settle(db, late, actual, { lateFor: input.holdKey, seconds: input.seconds })).charged;
        else
          activityContext()?.log.warn(
            'speech recorded uncharged: its hold was released and the budget cannot cover it now',
            { holdKey: input.holdKey, actual },
          );
      }
      const report = await budgetReport(db, budgetIds.agent(input.agentId), { entries: 0 });
      return { charged, available: report?.available ?? null };
    },

    /** The job did not run (refused input, a failure): give its hold back. */
    async speechRelease(input: { holdKey: string; reason: string }): Promise<void> {
      await release(db, input.holdKey, clipText(input.reason, 500));
    },
  };
}

/** What a job came to, written where the agent reads it: a note in, a note out, the command's outcome. */
function speechRecordActivities(deps: SpeechActivityDeps, clientOf: () => Client) {
  const { db } = deps;
  return {
    /**
     * A transcription becomes the agent's incoming note with its audio. When the agent's loop runs
     * it goes through the loop's `addNote` update (the loop stores it and wakes); when no loop
     * runs it is stored directly. Either way under the key the loop would use, so a retry, or
     * one path after the other, stores it once.
     */
    async speechDeliverNote(
      input: SpeechDeliverInput,
    ): Promise<{ noteId: number | null; via: 'loop' | 'stored' | 'queued' }> {
      const updateId = `speech:${input.workflowId}`;
      const loopId = workflowIds.agent(input.agentId);
      const text = clipText(input.text.trim() || '(no speech heard)', 16_000);
      const note = {
        text,
        priority: input.priority,
        tags: input.tags,
        source: input.source,
        ...(input.sender ? { sender: input.sender } : {}),
        transcribedFrom: input.audio,
      };
      try {
        const r = await clientOf()
          .workflow.getHandle(loopId)
          .executeUpdate<{ noteId: number | null; queued?: boolean }, [typeof note]>('addNote', {
            args: [note],
            updateId,
          });
        return { noteId: r.noteId, via: r.queued ? 'queued' : 'loop' };
      } catch (err) {
        if (err instanceof WorkflowUpdateFailedError) {
          const cause = err.cause as (Error & { type?: string }) | undefined;
          // The loop refused it because the database is away and its queue is full: an outage.
          if (cause?.type === 'NoteRefused' && /unavailable/.test(cause.message))
            throw retryable(ErrorType.Unavailable, cause.message);
          throw nonRetryable(
            ErrorType.InvalidRequest,
            `the agent loop refused the transcription: ${cause?.message ?? err.message}`,
          );
        }
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      }
      const noteId = await addNoteOnce(db, {
        agentId: input.agentId,
        direction: 'in',
        source: input.source,
        sender: input.sender ?? null,
        priority: input.priority,
        tags: input.tags,
        text,
        audio: input.audio,
        idempotencyKey: `${loopId}:note:${updateId}`,
      });
      return { noteId, via: 'stored' };
    },

    /**
     * What a `speak` came to: an outgoing note (to the user) with its WAV, and — for the agent's
     * command — the outcome on the command's log row, which the next context shows.
     */
    async speechRecordSpeak(input: SpeechRecordSpeakInput): Promise<{ noteId: number | null }> {
      let noteId: number | null = null;
      if (input.audio) {
        noteId = await addNoteOnce(db, {
          agentId: input.agentId,
          direction: 'out',
          source: 'agent',
          sender: input.agentId,
          recipient: 'user',
          priority: 0,
          tags: ['speech'],
          text: clipText(input.text, 16_000),
          audio: input.audio,
          idempotencyKey: `speech/${input.workflowId}/spoken`,
        });
      }
      if (input.requestedBy) {
        const outcome = input.audio
          ? `spoke ${input.audio.durationS.toFixed(1)} s (${input.audio.backend}${input.audio.device ? ` on ${input.audio.device}` : ''}) → ${input.audio.path} (note #${noteId})`
          : `speech failed: ${input.error ?? 'unknown error'}`;
        const patch = {
          message: clipText(`speak: ${outcome}`, 200),
          text: clipText(`speak (${input.workflowId}): ${outcome}`, maxResultText),
        };
        await mergeCommandResult(db, { agentId: input.agentId, ...input.requestedBy }, patch);
      }
      return { noteId };
    },
  };
}

export type SpeechActivities = ReturnType<typeof createSpeechActivities>;
