/**
 * Memory tiers: short (`llm_recent_responses`), middle (`llm_memory`), long
 * (`diary_entries`, `concepts`, `links`), digests (`abstracts`), notes in/out, and facts
 * awaiting a check. Archived rows keep `archived_at` and are restorable.
 */
import { sql } from 'drizzle-orm';
import { bigint, boolean, check, index, integer, jsonb, pgTable, real, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { agentId } from './agents.js';
import { tasks } from './goals.js';
import { llmRegistry } from './llm.js';
import { bigintRef, jsonbOf, oneOf, rowId, tags, timestamps, tstz } from './_columns.js';

export const validationModes = ['auto_pass', 'self_validation', 'normal'] as const;
export const contextModes = ['standard', 'concentration', 'meditation'] as const;
export const noteDirections = ['in', 'out'] as const;
export const noteSources = ['user', 'agent', 'llm:task', 'peer', 'system', 'oversight', 'human'] as const;
/** Who may send an agent an incoming note (its own outgoing notes are `agent`). */
export type IncomingNoteSource = Exclude<(typeof noteSources)[number], 'agent'>;
export const factStatuses = ['pending', 'verified', 'rejected'] as const;
export const abstractTriggers = ['interval', 'goal_closed', 'task_closed', 'mode_change', 'command'] as const;

export interface Ideas {
  new: string[];
  refined: string[];
  discarded: string[];
}
/** `emotion:strength(1–5) (reason)` as parsed from the emotional evaluation. */
export interface EmotionReading {
  emotion: string;
  strength: number;
  reason?: string;
}
/**
 * The audio artifact of a note: the file, how long it lasts, what the engine made of it and
 * which engine it was (backend, device, model), so a note can be traced back to its sound.
 */
export interface NoteAudio {
  /** heard: the note is the transcription of this audio; spoken: the audio says the note. */
  kind: 'heard' | 'spoken';
  path: string;
  durationS: number;
  language: string | null;
  languageProbability?: number;
  confidence?: number;
  backend: string;
  device?: string;
  model?: string;
  voice?: string;
  sampleRate?: number;
  /** The speech workflow that made it. */
  workflowId?: string;
}
/** One validator's answer to the universal question. */
export interface ValidatorVote {
  registryId?: number;
  name: string;
  /** Absent when the validator timed out, failed or answered off-format. */
  rating?: number;
  trust: number;
  comment?: string;
  status?: 'ok' | 'timeout' | 'error' | 'malformed';
  latencyMs?: number;
  /** The agent's own LLM validating its reply (minimal weight). */
  self?: boolean;
  /** A peer agent validating with its own model (`registryId` is that model's row; `trust` the agent's trust in the peer). */
  peer?: string;
}
/** Ids of the rows an abstract digests, per source table. */
export interface AbstractSources {
  responses?: number[];
  diary?: number[];
  concepts?: number[];
  links?: number[];
  abstracts?: number[];
}

/** One row per tick of the agent loop. */
export const llmRecentResponses = pgTable(
  'llm_recent_responses',
  {
    id: rowId(),
    agentId: agentId(),
    tick: bigint('tick', { mode: 'number' }).notNull(),
    workflowRunId: text('workflow_run_id'),
    content: text('content').notNull(),
    /** sha256 of the content: an identical reply is not stored twice. */
    contentHash: text('content_hash'),
    promptRef: text('prompt_ref'),
    reflection: text('reflection'),
    novelty: real('novelty'),
    ideas: jsonbOf<Ideas>('ideas', { new: [], refined: [], discarded: [] }),
    tags: tags(),
    emotions: jsonbOf<EmotionReading[]>('emotions', []),
    rating: real('rating'),
    validationMode: text('validation_mode', { enum: validationModes }),
    validators: jsonbOf<ValidatorVote[]>('validators', []),
    /** Count of ratings per value −3…+3. */
    distribution: jsonbOf<Record<string, number>>('distribution', {}),
    confidence: real('confidence'),
    stagnation: boolean('stagnation').notNull().default(false),
    stagnationReason: text('stagnation_reason'),
    stagnationActions: jsonbOf<string[]>('stagnation_actions', []),
    /** The reflexes' verdict for this tick; set once, so a retried reflex activity returns it. */
    reflexes: jsonb('reflexes').$type<Record<string, unknown>>(),
    contextMode: text('context_mode', { enum: contextModes }).notNull().default('standard'),
    llmRegistryId: bigintRef('llm_registry_id').references(() => llmRegistry.id, { onDelete: 'set null' }),
    /** Set when the reply's command block could not be parsed (the loop goes on). */
    parseError: text('parse_error'),
    /** The last tick whose context showed this reply (the memory manager's LRU key; null: never shown). */
    lastUsedTick: bigint('last_used_tick', { mode: 'number' }),
    archivedAt: tstz('archived_at'),
    ...timestamps,
  },
  (t) => [
    uniqueIndex('llm_recent_responses_agent_id_tick_uq').on(t.agentId, t.tick),
    index('llm_recent_responses_agent_id_novelty_idx').on(t.agentId, t.novelty),
    index('llm_recent_responses_tags_gin').using('gin', t.tags),
    check('llm_recent_responses_validation_mode_check', oneOf(t.validationMode, validationModes)),
    check('llm_recent_responses_context_mode_check', oneOf(t.contextMode, contextModes)),
  ],
);

/** The agent's notebook (context 8): written only by command; tags activate entries. */
export const llmMemory = pgTable(
  'llm_memory',
  {
    id: rowId(),
    agentId: agentId(),
    title: text('title'),
    content: text('content').notNull(),
    tags: tags(),
    pinned: boolean('pinned').notNull().default(false),
    priority: integer('priority').notNull().default(0),
    accessCount: integer('access_count').notNull().default(0),
    lastAccessedAt: tstz('last_accessed_at'),
    archivedAt: tstz('archived_at'),
    ...timestamps,
  },
  (t) => [
    index('llm_memory_agent_id_pinned_idx').on(t.agentId, t.pinned, t.priority),
    index('llm_memory_agent_id_last_accessed_idx').on(t.agentId, t.lastAccessedAt),
    index('llm_memory_tags_gin').using('gin', t.tags),
  ],
);

export const diaryEntries = pgTable(
  'diary_entries',
  {
    id: rowId(),
    agentId: agentId(),
    title: text('title').notNull(),
    content: text('content').notNull(),
    /** Who provided the entry: the agent's own, or the user's (which ethics rules may protect). */
    source: text('source', { enum: noteSources }).notNull().default('agent'),
    tags: tags(),
    pinned: boolean('pinned').notNull().default(false),
    emotions: jsonbOf<EmotionReading[]>('emotions', []),
    priority: integer('priority').notNull().default(0),
    tick: bigint('tick', { mode: 'number' }),
    accessCount: integer('access_count').notNull().default(0),
    lastAccessedAt: tstz('last_accessed_at'),
    archivedAt: tstz('archived_at'),
    ...timestamps,
  },
  (t) => [
    index('diary_entries_agent_id_created_at_idx').on(t.agentId, t.createdAt),
    index('diary_entries_agent_id_pinned_idx').on(t.agentId, t.pinned, t.priority),
    index('diary_entries_tags_gin').using('gin', t.tags),
    check('diary_entries_source_check', oneOf(t.source, noteSources)),
  ],
);

/** Nodes of the agent's semantic graph. */
export const concepts = pgTable(
  'concepts',
  {
    id: rowId(),
    agentId: agentId(),
    name: text('name').notNull(),
    description: text('description'),
    tags: tags(),
    weight: real('weight').notNull().default(1),
    accessCount: integer('access_count').notNull().default(0),
    lastAccessedAt: tstz('last_accessed_at'),
    archivedAt: tstz('archived_at'),
    ...timestamps,
  },
  (t) => [
    uniqueIndex('concepts_agent_id_name_uq').on(t.agentId, t.name),
    index('concepts_tags_gin').using('gin', t.tags),
  ],
);

/** Edges of the semantic graph. */
export const links = pgTable(
  'links',
  {
    id: rowId(),
    agentId: agentId(),
    fromConceptId: bigintRef('from_concept_id')
      .notNull()
      .references(() => concepts.id, { onDelete: 'cascade' }),
    toConceptId: bigintRef('to_concept_id')
      .notNull()
      .references(() => concepts.id, { onDelete: 'cascade' }),
    relation: text('relation').notNull().default('related_to'),
    weight: real('weight').notNull().default(1),
    accessCount: integer('access_count').notNull().default(0),
    lastAccessedAt: tstz('last_accessed_at'),
    archivedAt: tstz('archived_at'),
    ...timestamps,
  },
  (t) => [
    uniqueIndex('links_agent_id_from_to_relation_uq').on(t.agentId, t.fromConceptId, t.toConceptId, t.relation),
    index('links_to_concept_id_idx').on(t.toConceptId),
  ],
);

/** Digests of recent responses and chosen long-term entries. */
export const abstracts = pgTable(
  'abstracts',
  {
    id: rowId(),
    agentId: agentId(),
    title: text('title').notNull(),
    summary: text('summary').notNull(),
    tags: tags(),
    sources: jsonbOf<AbstractSources>('sources', {}),
    /** The compressor algorithm that produced it (the demo fork patch swaps it). */
    strategy: text('strategy').notNull().default('default'),
    tickFrom: bigint('tick_from', { mode: 'number' }),
    tickTo: bigint('tick_to', { mode: 'number' }),
    auto: boolean('auto').notNull().default(true),
    trigger: text('trigger', { enum: abstractTriggers }),
    /**
     * What fired an automatic abstract, unique per agent (`<tick>:<trigger>`, a task loop's
     * `task<id>.<tick>:<trigger>`): a retried activity finds the first attempt's abstract.
     */
    triggerKey: text('trigger_key'),
    /** Times the abstract was extended with newer sources. */
    extensions: integer('extensions').notNull().default(0),
    archivedAt: tstz('archived_at'),
    ...timestamps,
  },
  (t) => [
    index('abstracts_agent_id_tick_to_idx').on(t.agentId, t.tickTo),
    index('abstracts_tags_gin').using('gin', t.tags),
    uniqueIndex('abstracts_agent_id_trigger_key_uq').on(t.agentId, t.triggerKey),
    check('abstracts_trigger_check', oneOf(t.trigger, abstractTriggers)),
  ],
);

/** Incoming and outgoing notes (context 6; `notes`/`messages send` commands). */
export const notes = pgTable(
  'notes',
  {
    id: rowId(),
    agentId: agentId(),
    direction: text('direction', { enum: noteDirections }).notNull(),
    source: text('source', { enum: noteSources }).notNull(),
    /** Who sent it (user name, peer agent id, task id…), for incoming notes. */
    sender: text('sender'),
    /** Who it is for (peer agent id, `user`, `oversight`…), for outgoing notes. */
    recipient: text('recipient'),
    priority: integer('priority').notNull().default(0),
    tags: tags(),
    text: text('text').notNull(),
    taskId: bigintRef('task_id').references(() => tasks.id, { onDelete: 'set null' }),
    readAt: tstz('read_at'),
    tickSeen: bigint('tick_seen', { mode: 'number' }),
    idempotencyKey: text('idempotency_key').unique('notes_idempotency_key_uq'),
    hidden: boolean('hidden').notNull().default(false),
    /** The audio the note was heard from (a transcription) or spoken as (`speak`); null for a typed note. */
    audio: jsonb('audio').$type<NoteAudio>(),
    ...timestamps,
  },
  (t) => [
    index('notes_agent_id_direction_read_idx').on(t.agentId, t.direction, t.readAt, t.priority),
    index('notes_agent_id_created_at_idx').on(t.agentId, t.createdAt),
    index('notes_task_id_idx').on(t.taskId),
    index('notes_tags_gin').using('gin', t.tags),
    check('notes_direction_check', oneOf(t.direction, noteDirections)),
    check('notes_source_check', oneOf(t.source, noteSources)),
  ],
);

/** Claims stated with confidence < 0.7, turned into fact-check tasks. */
export const unverifiedFacts = pgTable(
  'unverified_facts',
  {
    id: rowId(),
    agentId: agentId(),
    fact: text('fact').notNull(),
    confidence: real('confidence').notNull(),
    status: text('status', { enum: factStatuses }).notNull().default('pending'),
    resolution: text('resolution'),
    sourceTick: bigint('source_tick', { mode: 'number' }),
    responseId: bigintRef('response_id').references(() => llmRecentResponses.id, { onDelete: 'set null' }),
    taskId: bigintRef('task_id').references(() => tasks.id, { onDelete: 'set null' }),
    resolvedAt: tstz('resolved_at'),
    ...timestamps,
  },
  (t) => [
    index('unverified_facts_agent_id_status_idx').on(t.agentId, t.status),
    check('unverified_facts_status_check', oneOf(t.status, factStatuses)),
    check('unverified_facts_confidence_check', sql`${sql.identifier('confidence')} between 0 and 1`),
  ],
);

export type LlmRecentResponse = typeof llmRecentResponses.$inferSelect;
export type NewLlmRecentResponse = typeof llmRecentResponses.$inferInsert;
export type LlmMemoryEntry = typeof llmMemory.$inferSelect;
export type NewLlmMemoryEntry = typeof llmMemory.$inferInsert;
export type DiaryEntry = typeof diaryEntries.$inferSelect;
export type NewDiaryEntry = typeof diaryEntries.$inferInsert;
export type Concept = typeof concepts.$inferSelect;
export type NewConcept = typeof concepts.$inferInsert;
export type Link = typeof links.$inferSelect;
export type NewLink = typeof links.$inferInsert;
export type Abstract = typeof abstracts.$inferSelect;
export type NewAbstract = typeof abstracts.$inferInsert;
export type Note = typeof notes.$inferSelect;
export type NewNote = typeof notes.$inferInsert;
export type UnverifiedFact = typeof unverifiedFacts.$inferSelect;
export type NewUnverifiedFact = typeof unverifiedFacts.$inferInsert;
