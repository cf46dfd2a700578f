/**
 * The agent loop's in-memory state: small, plain JSON, carried across continue-as-new.
 * Prompts and replies live in Postgres; only ids, counters and settings live here.
 */
import { z } from 'zod';
import type { CommandOutcome } from '../../core/loop-types.js';
import { reflexStateSchema } from './reflexes.js';
import { isolationStateSchema } from '../../core/society/isolation.js';
import { sharedValue } from '../../core/shared.js';

/** At most this many notes wait for the database; more are refused (nothing stored, the answer says so). */
export const maxQueuedNotes = 200;
/** How many applied command ids a loop remembers across continue-as-new. */
const maxAppliedCommands = 64;

/**
 * Remember command `id` as applied; false when it was applied already (do nothing then). The
 * oldest id is forgotten past `maxAppliedCommands`. Commands without an id always apply.
 */
export function firstApplication(applied: string[], id: string | undefined): boolean {
  if (id === undefined) return true;
  if (applied.includes(id)) return false;
  applied.push(id);
  if (applied.length > maxAppliedCommands) applied.splice(0, applied.length - maxAppliedCommands);
  return true;
}

// One set per worker, shared by its workflows (core/shared.ts).
const schemas = sharedValue('workflows/lib/loop-state', () => {
  const tagFilterSchema = z.object({
    tags: z.array(z.string()).max(20).optional(),
    emotions: z.array(z.string()).max(20).optional(),
    op: z.enum(['and', 'or']).optional(),
  });

  const notesFilterSchema = z.object({
    minPriority: z.number().int().min(0).max(10).optional(),
    tags: z.array(z.string()).max(20).optional(),
    sources: z.array(z.string()).max(10).optional(),
  });

  /** Sampling parameters the reflexes adjust (Reflex-lite). */
  const reflexParamsSchema = z.object({
    temperature: z.number().min(0).max(2),
    topP: z.number().min(0).max(1),
    presencePenalty: z.number().min(-2).max(2),
    frequencyPenalty: z.number().min(-2).max(2),
  });

  const loopSettingsSchema = z.object({
    delayMs: z.number().int().min(0).max(3_600_000),
    recentK: z.number().int().min(1).max(50),
    contextMode: z.enum(['standard', 'concentration', 'meditation']),
    contextFilter: tagFilterSchema.optional(),
    notesMode: z.enum(['auto', 'manual']),
    notesFilter: notesFilterSchema.optional(),
    idle: z.object({
      on: z.boolean(),
      wakeOn: z.array(z.enum(['note', 'process', 'timeout'])),
      timeoutMs: z
        .number()
        .int()
        .min(1000)
        .max(7 * 24 * 3_600_000),
    }),
    maxTokens: z.number().int().min(16).max(8192),
  });

  const countersSchema = z.object({
    ticks: z.number().int(),
    commandsApplied: z.number().int(),
    commandsRejected: z.number().int(),
    commandsUnvalidated: z.number().int(),
    parseErrors: z.number().int(),
    llmFailures: z.number().int(),
    notesReceived: z.number().int(),
    outages: z.number().int(),
    continuedAsNew: z.number().int(),
    /** Ticks that failed for a reason of their own (recorded, then the loop went on). */
    tickFailures: z.number().int().default(0),
    /** Outages of a dependency (the database…) ridden out. */
    degraded: z.number().int().default(0),
  });

  /**
   * The audio a note comes with: the transcription's source, recorded on the note (the speech
   * workflow sends it; db/schema `NoteAudio` is the stored shape).
   */
  const noteAudioSchema = z.strictObject({
    kind: z.enum(['heard', 'spoken']),
    path: z.string().min(1).max(4096),
    durationS: z.number().min(0),
    language: z.string().max(16).nullable(),
    languageProbability: z.number().min(0).max(1).optional(),
    confidence: z.number().min(0).max(1).optional(),
    backend: z.string().min(1).max(200),
    device: z.string().max(200).optional(),
    model: z.string().max(200).optional(),
    voice: z.string().max(200).optional(),
    sampleRate: z.number().int().positive().optional(),
    workflowId: z.string().max(500).optional(),
  });

  /** A note the loop holds until the database takes it (its idempotency key makes the write once-only). */
  const queuedNoteSchema = z.object({
    text: z.string(),
    priority: z.number().int(),
    tags: z.array(z.string()),
    source: z.enum(['user', 'peer', 'system', 'oversight', 'human', 'llm:task']),
    sender: z.string().optional(),
    taskId: z.number().int().optional(),
    audio: noteAudioSchema.optional(),
    idempotencyKey: z.string(),
  });

  const carryOverSchema = z.object({
    tick: z.number().int().min(0),
    paused: z.boolean(),
    pauseTicks: z.number().int().min(0),
    operatingMode: z.enum(['normal', 'isolated', 'core_outage']),
    settings: loopSettingsSchema,
    reflex: reflexParamsSchema,
    counters: countersSchema,
    last: z
      .object({ summary: z.string(), model: z.string(), at: z.string(), responseId: z.number().nullable() })
      .nullable(),
    taskLoops: z.record(z.string(), z.string()),
    pendingWake: z.boolean(),
    /** Reflex bookkeeping; defaults so carry-overs from before the reflexes still parse. */
    reflexState: reflexStateSchema,
    /** Notes received while the database was away, in order, stored when it returns. */
    pendingNotes: z.array(queuedNoteSchema).max(maxQueuedNotes).default([]),
    /**
     * The ids of the last pause/resume commands applied (newest last), so a command delivered
     * again after a continue-as-new (Temporal's request-id dedupe is per run) is not applied twice.
     */
    appliedCommands: z.array(z.string()).max(maxAppliedCommands).default([]),
    /** Isolated mode: the unreachable-peers streak and since when the agent goes on alone. */
    isolation: isolationStateSchema,
  });
  return {
    tagFilterSchema,
    notesFilterSchema,
    reflexParamsSchema,
    loopSettingsSchema,
    countersSchema,
    noteAudioSchema,
    queuedNoteSchema,
    carryOverSchema,
  };
});

export const {
  tagFilterSchema,
  notesFilterSchema,
  reflexParamsSchema,
  loopSettingsSchema,
  countersSchema,
  noteAudioSchema,
  queuedNoteSchema,
  carryOverSchema,
} = schemas;
type ReflexParams = z.infer<typeof reflexParamsSchema>;
type LoopSettings = z.infer<typeof loopSettingsSchema>;
type Counters = z.infer<typeof countersSchema>;
export type QueuedNote = z.infer<typeof queuedNoteSchema>;
export type CarryOver = z.infer<typeof carryOverSchema>;

const defaultSettings: LoopSettings = {
  delayMs: 1000,
  recentK: 5,
  contextMode: 'standard',
  notesMode: 'auto',
  idle: { on: false, wakeOn: ['note', 'process', 'timeout'], timeoutMs: 60_000 },
  maxTokens: 512,
};

export const defaultReflex: ReflexParams = { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0 };

/** Loop settings as a start or an update gives them: any field, and any field of idle. */
export type LoopSettingsPatch = Partial<Omit<LoopSettings, 'idle'>> & { idle?: Partial<LoopSettings['idle']> };

export function initialState(settings: LoopSettingsPatch = {}): CarryOver {
  return {
    tick: 0,
    paused: false,
    pauseTicks: 0,
    operatingMode: 'normal',
    settings: { ...defaultSettings, ...settings, idle: { ...defaultSettings.idle, ...settings.idle } },
    reflex: { ...defaultReflex },
    counters: {
      ticks: 0,
      commandsApplied: 0,
      commandsRejected: 0,
      commandsUnvalidated: 0,
      parseErrors: 0,
      llmFailures: 0,
      notesReceived: 0,
      outages: 0,
      continuedAsNew: 0,
      tickFailures: 0,
      degraded: 0,
    },
    last: null,
    taskLoops: {},
    pendingWake: false,
    reflexState: reflexStateSchema.parse(undefined),
    pendingNotes: [],
    appliedCommands: [],
    isolation: isolationStateSchema.parse(undefined),
  };
}

/**
 * Apply persisted `agent_config` values (what `config.set` wrote) to the loop settings: at a
 * fresh loop start, so a restarted agent keeps its configuration, and on `config.set` itself.
 * Values were validated when written; anything of the wrong shape is ignored.
 */
export function applyConfigValues(settings: LoopSettings, values: Record<string, unknown>): void {
  const int = (v: unknown, min: number, max: number) =>
    typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max ? v : undefined;
  const delay = int(values.delay_ms, 0, 3_600_000);
  if (delay !== undefined) settings.delayMs = delay;
  const timeout = int(values.idle_timeout_ms, 1000, 7 * 24 * 3_600_000);
  if (timeout !== undefined) settings.idle.timeoutMs = timeout;
  // Idle mode's switch and wake conditions (an agent file writes them; not a key config.set takes).
  const idle = values.idle as { on?: unknown; wakeOn?: unknown } | null | undefined;
  if (idle && typeof idle === 'object') {
    if (typeof idle.on === 'boolean') settings.idle.on = idle.on;
    const wakeOn = loopSettingsSchema.shape.idle.shape.wakeOn.safeParse(idle.wakeOn);
    if (wakeOn.success) settings.idle.wakeOn = wakeOn.data;
  }
  const maxTokens = int(values.max_tokens, 16, 8192);
  if (maxTokens !== undefined) settings.maxTokens = maxTokens;
  const k = int(values.recent_responses, 1, 50);
  if (k !== undefined) settings.recentK = k;
  const mode = loopSettingsSchema.shape.contextMode.safeParse(values.context_mode);
  if (mode.success && mode.data !== settings.contextMode) {
    settings.contextMode = mode.data;
    settings.contextFilter = undefined;
  }
  const notes = loopSettingsSchema.shape.notesMode.safeParse(values.notes_mode);
  if (notes.success && notes.data !== settings.notesMode) {
    settings.notesMode = notes.data;
    settings.notesFilter = undefined;
  }
}

/** Fold command outcomes into the counters. */
export function countOutcomes(counters: Counters, outcomes: CommandOutcome[]): void {
  for (const o of outcomes) {
    if (o.duplicate) continue;
    if (o.status === 'applied') counters.commandsApplied++;
    else if (o.status === 'unvalidated') counters.commandsUnvalidated++;
    else counters.commandsRejected++;
  }
}
