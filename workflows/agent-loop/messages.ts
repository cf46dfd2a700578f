/**
 * What the agent loop answers to, and what it takes: its input, the note it is sent, its
 * signals, updates and query, and the status it shows. Callers (the CLI, the notebook, the bus
 * bridge, tests) import these; the loop itself is in workflow.ts.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import { z } from 'zod';
import { agentIdSchema } from '../../core/ids.js';
import { sharedValue } from '../../core/shared.js';
import type { LifeforceNeeds } from '../../core/lifeforce.js';
import { carryOverSchema, loopSettingsSchema, noteAudioSchema, type CarryOver } from '../lib/loop-state.js';
import { budgetSettingsSchema } from '../lib/lifeforce.js';
import type { Degraded } from '../lib/infra.js';
import type { ApplyAgentFileResult } from '../../activities/agent-file.js';

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
          path: z
            .string()
            .trim()
            .min(1)
            .max(4096)
            .refine((p) => p.startsWith('/'), 'an absolute path to a WAV file'),
          language: z
            .string()
            .trim()
            .toLowerCase()
            .regex(/^(auto|[a-z]{2,3})$/, 'a language code like "en" or "de" (or "auto")')
            .optional(),
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
    .refine((n) => (n.text === undefined) !== (n.audio === undefined), {
      message: 'give either text, or audio {path} to transcribe (not both)',
      path: ['text'],
    })
    .refine((n) => n.audio === undefined || n.transcribedFrom === undefined, {
      message: 'audio to transcribe comes without a transcription',
      path: ['transcribedFrom'],
    }),
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
/** Loop settings as a start or `setConfig` gives them: any field, and any field of idle. */
export const setConfigInput = sharedValue('agent-loop/setConfigInput', () =>
  loopSettingsSchema
    .omit({ idle: true })
    .partial()
    .extend({ idle: loopSettingsSchema.shape.idle.partial().optional() }),
);
/** Change loop settings (validated); returns the settings now in force. */
export const setConfigUpdate = defineUpdate<CarryOver['settings'], [z.input<typeof setConfigInput>]>('setConfig');

/** What `applyAgentFile` takes: an agent file's document for this agent, and how to apply it. */
export interface ApplyAgentFileRequest {
  /** The document (the parsed YAML or JSON): its `id` is this agent's. */
  document: Record<string, unknown>;
  /** Who applies it, for the record (default: the Temporal UI). */
  appliedBy?: string;
  /** Compare and answer the diff; write nothing. */
  dryRun?: boolean;
  /** Take the file's value where the agent changed an item itself since the last apply. */
  overwriteDrift?: boolean;
  /** Where the file came from (a path), for the record. */
  source?: string;
  /** This deployment's id: a file for another deployment's agent is refused. */
  deployment?: string;
  /** Agents applied in the same batch (a folder): known as peers though not written yet. */
  batchAgents?: string[];
}
/**
 * Apply an agent file to the running agent: checked, compared with the last file applied and
 * with what the agent changed itself (kept, shown as drift), written in one transaction with who
 * and when, and its loop settings put in force. Answers what changed, the drift and the diff text.
 */
export const applyAgentFileUpdate = defineUpdate<ApplyAgentFileResult, [ApplyAgentFileRequest]>('applyAgentFile');

export interface AgentStatus {
  agentId: string;
  tick: number;
  phase:
    | 'starting'
    | 'thinking'
    | 'reflexes'
    | 'executing'
    | 'pacing'
    | 'idle'
    | 'paused'
    | 'outage'
    | 'degraded'
    | 'exhausted'
    | 'stopping';
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
  exhausted: {
    since: string;
    needed: number;
    reason: string;
    waitMs: number | null;
    needs?: LifeforceNeeds;
    escalationId?: string;
  } | null;
}
/** Tick, mode, pause state, last reply summary, LLM in use, counters. */
export const statusQuery = defineQuery<AgentStatus>('status');

// ---- input ------------------------------------------------------------------------------------

export const agentLoopInput = sharedValue('agent-loop/agentLoopInput', () =>
  z.object({
    agentId: agentIdSchema,
    name: z.string().trim().min(1).max(200).optional(),
    /** Initial loop settings (the first run only; later runs keep what the agent set). */
    settings: setConfigInput.optional(),
    /** Complete after this many ticks (demos, tests); unset = run until stopped. */
    maxTicks: z.number().int().positive().optional(),
    /** The agent's budget when it is created (the first start only; later, `mindloop lifeforce set`). Unset: unlimited, spend recorded. */
    lifeforce: budgetSettingsSchema.optional(),
    /**
     * Continue-as-new after this many ticks in one run, even if the server does not suggest it.
     * Unset: 100 (workflow.ts, `ticksPerRunByDefault`).
     */
    ticksPerRun: z.number().int().min(1).max(10_000).optional(),
    /** false: skip the reflexes (auto_pass, no emotion/novelty prompts) — the bench's bare tick, an operator's kill switch. */
    reflexes: z.boolean().default(true),
    /** An agent file's document, applied at the first start before the first tick (a continue-as-new drops it). */
    agentFile: z.record(z.string(), z.unknown()).optional(),
    carryOver: carryOverSchema.optional(),
  }),
);
export type AgentLoopInput = z.input<typeof agentLoopInput>;

/**
 * The workflow's input is the fields above, or an agent file's document itself (`id`, `name`,
 * `goals`, …, as pasted into the Temporal UI's start form): that becomes the input that applies
 * it before the first tick.
 */
export function loopInputOf(raw: unknown): unknown {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw) || 'agentId' in raw || !('id' in raw)) return raw;
  return { agentId: (raw as { id: unknown }).id, agentFile: raw };
}

export interface AgentLoopResult {
  agentId: string;
  ticks: number;
  reason: 'stopped' | 'max_ticks';
}

/** A pause/resume's command id when it carries a usable one (a signal from the UI may carry anything: then none). */
export function commandIdOf(arg: unknown): string | undefined {
  const id = (arg as LoopCommandArg | null | undefined)?.commandId;
  return typeof id === 'string' && id.length > 0 && id.length <= 128 ? id : undefined;
}

export type ParsedAgentLoopInput = z.output<typeof agentLoopInput>;
