/**
 * The command catalogue as data: for every command type its family, action, zod
 * args schema, one-line help, the validation rating it needs, whether it writes, and whether
 * an auxiliary (task) loop may use it. Pure: the workflow imports it (config keys, rating
 * thresholds) as well as the command activities.
 */
import { formatIssues } from './zod-issues.js';
import { z } from 'zod';
import { nerveNames } from './nerves/index.js';
import { modeSettings } from './nerves/modes.js';
import { abstractsStrategySchema, defaultAbstractsStrategy } from './abstracts.js';
import { learningDefaults } from './learnings.js';
import type { ParsedCommand } from './loop-types.js';
import { maxSpeakChars, speechLanguageSchema } from './speech/engine.js';
import { childNameSchema, spawnBudgetSchema, spawnGoalsSchema, spawnLimitDefaults, spawnLimitSchema, spawnTypes } from './society/spawn.js';
import { agentIdSchema } from './ids.js';
import { stagnationClasses, type StrategyAction } from './stagnation.js';

// --- shared argument schemas -------------------------------------------------------------------

/** A row id: a positive integer, also accepted as a digit string ("12"), which models often write. */
const id = z.union([z.number().int().positive(), z.string().regex(/^\d+$/).transform(Number)], { error: 'expected a positive integer id' });
const ids = z.array(id).min(1).max(100);
const text = (max: number) => z.string().trim().min(1).max(max);
const tagList = z.array(z.string().trim().min(1).max(64)).max(20);
const limit = z.number().int().min(1).max(50).optional();
const offset = z.number().int().min(0).max(100_000).optional();
const priority = z.number().int().min(-100).max(100);
/** `true`/`false` or `"on"`/`"off"`. */
const onOff = z.union([z.boolean(), z.enum(['on', 'off']).transform((v) => v === 'on')]);
const emotionReading = z.strictObject({
  emotion: text(64),
  strength: z.number().int().min(1).max(5),
  reason: z.string().max(200).optional(),
});
/** A concept by id (number) or by name (string). */
const conceptRef = z.union([z.number().int().positive(), text(200)], { error: 'expected a concept id (number) or name (string)' });
/** A model of the agent's registry by id (number) or name (string). */
const registryRef = z.union([z.number().int().positive(), text(200)], { error: 'expected a registry model id (number) or name (string)' });
/** A rating's dimension: a short lowercase word (`overall` when none is given). */
const dimension = z.string().trim().regex(/^[a-z][a-z0-9_]{0,31}$/, 'a lowercase word like "overall" or "accuracy"');
/** The name of a thinking method or a stagnation strategy. */
const methodName = z.string().trim().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'letters, digits, "_", "." and "-" (at most 64), like "socratic" or "ask_user"');
const identityFields = ['name', 'description', 'persona', 'values', 'languages'] as const;
/** The chat roles of the registry a model can be chosen for. */
const chatRoleValues = ['agent', 'oversight', 'validator', 'emotion', 'novelty', 'task'] as const;
const peerStatusValues = ['active', 'lost', 'blocked'] as const;
/** What a stagnation strategy can do (every action `applyStrategy` knows; a missing one is a compile error). */
const strategyActionSet = { note_user: true, ask_peers: true, context_mode: true, flashback: true, meta_analysis: true, switch_llm: true, pause: true } satisfies Record<StrategyAction, true>;
const strategyActions = Object.keys(strategyActionSet) as [StrategyAction, ...StrategyAction[]];

const goalStatusValues = ['active', 'paused', 'completed', 'failed'] as const;
const goalRelationValues = ['subgoal', 'depends_on', 'blocks', 'related'] as const;
const taskStatusValues = ['open', 'in_progress', 'blocked', 'done', 'failed', 'cancelled'] as const;
const factStatusValues = ['pending', 'verified', 'rejected'] as const;
const processStatusValues = ['ok', 'warning', 'error', 'timeout', 'offline', 'close'] as const;
const wakeConditions = ['note', 'process', 'timeout'] as const;
const noteSourceValues = ['user', 'agent', 'llm:task', 'peer', 'system', 'oversight', 'human'] as const;

const abstractSources = z
  .strictObject({
    responses: ids.optional(),
    diary: ids.optional(),
    concepts: ids.optional(),
    links: ids.optional(),
    abstracts: ids.optional(),
  })
  .refine((s) => Object.values(s).some((v) => v !== undefined && v.length > 0), 'name at least one source id');

/** An update must change something. */
const atLeastOne =
  (fields: readonly string[]) =>
  (v: Record<string, unknown>): boolean =>
    fields.some((f) => v[f] !== undefined);
const atLeastOneMessage = (fields: readonly string[]) => ({ message: `give at least one of: ${fields.join(', ')}` });

// --- config keys ---------------------------------------------------------------------------------

interface ConfigKeySpec {
  schema: z.ZodType;
  default: unknown;
  help: string;
}

const unit = z.number().min(0).max(1);

/** Settings the agent (config.set) and the user (setConfig update) may change; context 7 shows them. */
export const configKeys = {
  delay_ms: { schema: z.number().int().min(0).max(3_600_000), default: 1000, help: 'pause between ticks (ms)' },
  recent_responses: { schema: z.number().int().min(1).max(50), default: 5, help: 'K: own recent replies shown in context 3' },
  context_mode: { schema: z.enum(['standard', 'concentration', 'meditation']), default: 'standard', help: 'how context 3 picks replies' },
  notes_mode: { schema: z.enum(['auto', 'manual']), default: 'auto', help: 'auto: notes shown in full; manual: counts and ids only' },
  idle_timeout_ms: { schema: z.number().int().min(1000).max(7 * 24 * 3_600_000), default: 60_000, help: 'idle mode wakes after this long' },
  emotions: {
    schema: z.array(z.string().trim().min(1).max(32)).min(1).max(50),
    default: ['curiosity', 'joy', 'calm', 'anxiety', 'frustration', 'boredom', 'confidence'],
    help: 'emotion names the evaluator uses',
  },
  novelty_threshold: { schema: unit, default: 0.35, help: 'memory manager archives replies below this novelty' },
  anxiety_threshold: { schema: z.number().int().min(0).max(5), default: 3, help: 'Reflex-lite: anxiety above this strength counts toward the streak' },
  anxiety_ticks: { schema: z.number().int().min(1).max(100), default: 3, help: 'Reflex-lite fires after this many anxious ticks in a row' },
  lru_limit: { schema: z.number().int().min(10).max(100_000), default: 500, help: 'memory manager keeps at most this many entries' },
  emotion_weight: { schema: unit, default: 0.6, help: 'memory manager: weight of emotions in retention' },
  goal_focus: { schema: unit, default: 0.7, help: 'memory manager: weight of goal relevance' },
  diversity_boost: { schema: unit, default: 0.8, help: 'memory manager: weight of diversity' },
  abstract_every: { schema: z.number().int().min(0).max(10_000), default: 50, help: 'make an abstract every N ticks (0: off)' },
  abstracts_strategy: { schema: abstractsStrategySchema, default: defaultAbstractsStrategy, help: 'how abstracts digest recent replies (recency | keyword_cluster)' },
  task_loop_max_ticks: { schema: z.number().int().min(1).max(10_000), default: 50, help: 'ticks an auxiliary loop runs at most' },
  max_tokens: { schema: z.number().int().min(16).max(8192), default: 512, help: 'reply length limit (tokens)' },
  learning_threshold: { schema: z.number().int().min(1).max(1000), default: learningDefaults.threshold, help: 'preference learning: occurrences of a feedback pattern that derive a learning' },
  auto_pass_destructive: {
    schema: z.boolean(),
    default: false,
    help: 'with no validator, run destructive commands (deletes, shell, config.set) instead of holding them for a human; set by a human only',
  },
  max_descendants: {
    schema: spawnLimitSchema,
    default: spawnLimitDefaults.maxDescendants,
    help: 'spawn: how many descendants (children, grandchildren, …) you may have alive at once; set by a human only',
  },
  max_per_generation: {
    schema: spawnLimitSchema,
    default: spawnLimitDefaults.maxPerGeneration,
    help: 'spawn: how many of your descendants may be of one generation (your children, your grandchildren, …); set by a human only',
  },
  isolation_ticks: {
    schema: z.number().int().min(1).max(1000),
    default: 3,
    help: 'Isolated mode: ticks in a row with none of your known peers reachable before you go on alone (decisions tagged emergency_consensus)',
  },
  peer_validators: {
    schema: z.number().int().min(0).max(5),
    default: 0,
    help: 'how many of your most trusted reachable peers validate each reply with their own model (0: none)',
  },
} satisfies Record<string, ConfigKeySpec>;

export type ConfigKey = keyof typeof configKeys;
/** Keys the agent reads but may not change with config.set. */
const humanOnlyConfigKeys: ReadonlySet<ConfigKey> = new Set<ConfigKey>(['auto_pass_destructive', 'max_descendants', 'max_per_generation']);
export const configKeyNames = Object.keys(configKeys) as [ConfigKey, ...ConfigKey[]];

/** Validate one config value; the error names the key. */
export function validateConfigValue(key: string, value: unknown): { ok: true; value: unknown } | { ok: false; reason: string } {
  if (!(key in configKeys)) return { ok: false, reason: `unknown config key '${key}' (known: ${configKeyNames.join(', ')})` };
  const r = configKeys[key as ConfigKey].schema.safeParse(value);
  return r.success ? { ok: true, value: r.data } : { ok: false, reason: formatIssues(r.error, key, { under: key }) };
}

// --- the catalogue --------------------------------------------------------------------------------

interface Def<A extends z.ZodType> {
  args: A;
  help: string;
  writes: boolean;
  /** Defaults: +2 for `*.delete` and the dangerous types, else +1. */
  minRating?: number;
  /** Defaults to `!writes`. */
  allowedInTaskLoop?: boolean;
  /** Deletes, runs code or changes settings: with no validator configured it waits for a human. */
  destructive?: boolean;
  /** Argument summary for the help text when the schema cannot tell (unions, transforms). */
  usage?: string;
}
const def = <A extends z.ZodType>(d: Def<A>): Def<A> => d;
const none = z.strictObject({});

const listArgs = z.strictObject({ limit, offset, tag: text(64).optional(), pinned: z.boolean().optional() });

const definitions = {
  help: def({
    args: z.strictObject({ family: z.string().trim().optional() }),
    help: 'list the commands, or one family in detail',
    writes: false,
  }),

  'diary.list': def({ args: listArgs, help: 'recent diary entries, pinned first', writes: false }),
  'diary.search': def({
    args: z.strictObject({ query: text(200), tags: tagList.optional(), limit }),
    help: 'diary entries whose title or content contains the query',
    writes: false,
  }),
  'diary.read': def({ args: z.strictObject({ id }), help: 'one diary entry in full', writes: false }),
  'diary.add': def({
    args: z.strictObject({
      title: text(200),
      content: text(20_000),
      tags: tagList.optional(),
      priority: priority.optional(),
      pinned: z.boolean().optional(),
      emotions: z.array(emotionReading).max(10).optional(),
    }),
    help: 'write a long-term diary entry',
    writes: true,
  }),
  'diary.update': def({
    args: z
      .strictObject({ id, title: text(200).optional(), content: text(20_000).optional(), tags: tagList.optional(), priority: priority.optional() })
      .refine(atLeastOne(['title', 'content', 'tags', 'priority']), atLeastOneMessage(['title', 'content', 'tags', 'priority'])),
    help: 'change a diary entry',
    writes: true,
  }),
  'diary.delete': def({ args: z.strictObject({ id }), help: 'archive a diary entry (restorable)', writes: true, destructive: true }),
  'diary.pin': def({ args: z.strictObject({ id }), help: 'pin a diary entry', writes: true }),
  'diary.unpin': def({ args: z.strictObject({ id }), help: 'unpin a diary entry', writes: true }),

  'concepts.add': def({
    args: z.strictObject({ name: text(200), description: z.string().max(5000).optional(), tags: tagList.optional(), weight: z.number().min(0).max(100).optional() }),
    help: 'add a node to your semantic graph (names are unique)',
    writes: true,
  }),
  'concepts.list': def({
    args: z.strictObject({ limit, offset, tag: text(64).optional(), query: text(200).optional() }),
    help: 'concepts, heaviest first',
    writes: false,
  }),
  'concepts.read': def({
    args: z.strictObject({ concept: conceptRef }),
    help: 'one concept and its links',
    writes: false,
    usage: '{concept: id or name}',
  }),
  'concepts.update': def({
    args: z
      .strictObject({ id, name: text(200).optional(), description: z.string().max(5000).optional(), tags: tagList.optional(), weight: z.number().min(0).max(100).optional() })
      .refine(atLeastOne(['name', 'description', 'tags', 'weight']), atLeastOneMessage(['name', 'description', 'tags', 'weight'])),
    help: 'change a concept',
    writes: true,
  }),
  'concepts.delete': def({ args: z.strictObject({ id }), help: 'archive a concept (restorable)', writes: true, destructive: true }),

  'links.add': def({
    args: z.strictObject({ from: conceptRef, to: conceptRef, relation: text(64).optional(), weight: z.number().min(0).max(100).optional() }),
    help: 'link two concepts (by id or name); relation defaults to related_to',
    writes: true,
    usage: '{from: concept id or name, to: concept id or name, relation?, weight?}',
  }),
  'links.list': def({
    args: z.strictObject({ concept: conceptRef.optional(), relation: text(64).optional(), limit }),
    help: 'links, optionally of one concept',
    writes: false,
    usage: '{concept?: id or name, relation?, limit?}',
  }),
  'links.delete': def({ args: z.strictObject({ id }), help: 'archive a link (restorable)', writes: true, destructive: true }),

  'goals.add': def({
    args: z.strictObject({
      title: text(300),
      description: z.string().max(5000).optional(),
      constraints: z.string().max(2000).optional(),
      success_criteria: z.string().max(2000).optional(),
      priority: priority.optional(),
      tags: tagList.optional(),
      parent_id: id.optional(),
    }),
    help: 'add a goal (parent_id makes it a subgoal)',
    writes: true,
  }),
  'goals.list': def({
    args: z.strictObject({ status: z.enum([...goalStatusValues, 'all']).optional(), limit }),
    help: 'goals by priority (default: active)',
    writes: false,
  }),
  'goals.read': def({ args: z.strictObject({ id }), help: 'one goal with its links and tasks', writes: false }),
  'goals.update': def({
    args: z
      .strictObject({
        id,
        title: text(300).optional(),
        description: z.string().max(5000).optional(),
        constraints: z.string().max(2000).optional(),
        success_criteria: z.string().max(2000).optional(),
        priority: priority.optional(),
        tags: tagList.optional(),
      })
      .refine(
        atLeastOne(['title', 'description', 'constraints', 'success_criteria', 'priority', 'tags']),
        atLeastOneMessage(['title', 'description', 'constraints', 'success_criteria', 'priority', 'tags']),
      ),
    help: 'change a goal',
    writes: true,
  }),
  'goals.status': def({
    args: z
      .strictObject({ id, status: z.enum(goalStatusValues), failure_reason: z.string().trim().min(1).max(1000).optional() })
      .refine((v) => v.status !== 'failed' || v.failure_reason !== undefined, { message: 'failure_reason is required when status is failed', path: ['failure_reason'] }),
    help: 'set a goal active|paused|completed|failed (failed needs failure_reason)',
    writes: true,
  }),
  'goals.link': def({
    args: z.strictObject({ parent_id: id, child_id: id, relation: z.enum(goalRelationValues).optional() }),
    help: 'link two goals (relation defaults to subgoal)',
    writes: true,
  }),
  'goals.unlink': def({
    args: z.strictObject({ parent_id: id, child_id: id, relation: z.enum(goalRelationValues).optional() }),
    help: 'remove a goal link (all relations unless one is named)',
    writes: true,
  }),

  'tasks.add': def({
    args: z.strictObject({
      title: text(300),
      description: z.string().max(5000).optional(),
      goal_id: id.optional(),
      priority: priority.optional(),
      pinned: z.boolean().optional(),
      tags: tagList.optional(),
    }),
    help: 'add a task',
    writes: true,
  }),
  'tasks.list': def({
    args: z.strictObject({ status: z.enum([...taskStatusValues, 'all']).optional(), goal_id: id.optional(), limit }),
    help: 'tasks, pinned first then by priority (default: not finished)',
    writes: false,
  }),
  'tasks.read': def({ args: z.strictObject({ id }), help: 'one task in full', writes: false }),
  'tasks.update': def({
    args: z
      .strictObject({ id, title: text(300).optional(), description: z.string().max(5000).optional(), goal_id: id.nullable().optional(), tags: tagList.optional() })
      .refine(atLeastOne(['title', 'description', 'goal_id', 'tags']), atLeastOneMessage(['title', 'description', 'goal_id', 'tags'])),
    help: 'change a task (an auxiliary loop: only its own)',
    writes: true,
    allowedInTaskLoop: true,
  }),
  'tasks.pin': def({ args: z.strictObject({ id }), help: 'pin a task (shown in every context)', writes: true }),
  'tasks.unpin': def({ args: z.strictObject({ id }), help: 'unpin a task', writes: true }),
  'tasks.priority': def({ args: z.strictObject({ id, priority }), help: 'set a task priority (-100..100)', writes: true }),
  'tasks.status': def({
    args: z.strictObject({ id, status: z.enum(taskStatusValues) }),
    help: 'set a task open|in_progress|blocked|done|failed|cancelled (an auxiliary loop: only its own)',
    writes: true,
    allowedInTaskLoop: true,
  }),

  // Fact-checks: facts the agent stated with confidence < 0.7 wait as
  // `unverified_facts` rows, each with a fact-check task; the agent records the outcome.
  'facts.list': def({
    args: z.strictObject({ status: z.enum([...factStatusValues, 'all']).optional(), limit }),
    help: 'your unverified facts and their fact-check state (default: pending)',
    writes: false,
  }),
  'facts.resolve': def({
    args: z.strictObject({ fact_id: id, status: z.enum(['verified', 'rejected']), evidence: text(2000) }),
    help: "record a fact-check's outcome (verified|rejected) with the evidence; closes its fact-check task",
    writes: true,
  }),

  'notes.list': def({
    args: z.strictObject({ direction: z.enum(['in', 'out']).optional(), unread: z.boolean().optional(), source: z.enum(noteSourceValues).optional(), limit }),
    help: 'notes (default: incoming), highest priority first',
    writes: false,
  }),
  'notes.read': def({ args: z.strictObject({ id }), help: 'one note in full', writes: false }),
  'notes.send': def({
    args: z.strictObject({ text: text(10_000), recipient: text(128).optional(), priority: z.number().int().min(0).max(10).optional(), tags: tagList.optional() }),
    help: 'send a note (default recipient: your user; from an auxiliary loop: the main loop)',
    writes: true,
    allowedInTaskLoop: true,
  }),
  'notes.mark_read': def({
    args: z.strictObject({ ids }),
    help: 'mark incoming notes as read',
    writes: true,
    usage: '{ids: [id, …]}',
  }),

  'llm_memory.add': def({
    args: z.strictObject({ content: text(10_000), title: text(200).optional(), tags: tagList.optional(), priority: priority.optional(), pinned: z.boolean().optional() }),
    help: 'write to your notebook (context 8)',
    writes: true,
  }),
  'llm_memory.list': def({ args: listArgs, help: 'notebook entries, pinned first', writes: false }),
  'llm_memory.read': def({ args: z.strictObject({ id }), help: 'one notebook entry in full', writes: false }),
  'llm_memory.update': def({
    args: z
      .strictObject({ id, content: text(10_000).optional(), title: text(200).optional(), tags: tagList.optional(), priority: priority.optional() })
      .refine(atLeastOne(['content', 'title', 'tags', 'priority']), atLeastOneMessage(['content', 'title', 'tags', 'priority'])),
    help: 'change a notebook entry',
    writes: true,
  }),
  'llm_memory.delete': def({ args: z.strictObject({ id }), help: 'archive a notebook entry (restorable)', writes: true, destructive: true }),
  'llm_memory.pin': def({ args: z.strictObject({ id }), help: 'pin a notebook entry', writes: true }),
  'llm_memory.unpin': def({ args: z.strictObject({ id }), help: 'unpin a notebook entry', writes: true }),

  'config.get': def({ args: z.strictObject({ key: z.enum(configKeyNames) }), help: 'one setting', writes: false }),
  'config.list': def({ args: none, help: 'all settings with their values', writes: false }),
  'config.set': def({
    args: z.strictObject({ key: z.enum(configKeyNames), value: z.unknown() }).superRefine((v, ctx) => {
      // An agent that could opt itself into running deletes unvalidated would need no injection to do it.
      if (humanOnlyConfigKeys.has(v.key)) return void ctx.addIssue({ code: 'custom', message: `${v.key} is set by a human only`, path: ['key'] });
      const r = configKeys[v.key].schema.safeParse(v.value);
      if (!r.success) for (const issue of r.error.issues) ctx.addIssue({ code: 'custom', message: issue.message, path: ['value', ...issue.path] });
    }),
    help: 'change a setting (see config.list for keys)',
    writes: true,
    destructive: true,
    minRating: 2,
    usage: '{key, value}',
  }),

  'cycle.responses': def({ args: z.strictObject({ n: z.number().int().min(1).max(50) }), help: 'show your last n replies (1..50)', writes: true }),
  'cycle.concentration': def({
    args: z.strictObject({ on: onOff, tags: tagList.optional(), emotions: tagList.optional(), op: z.enum(['and', 'or']).optional() }),
    help: 'concentration mode: context filtered by tags/emotions (op and|or)',
    writes: true,
    usage: '{on: on|off, tags?, emotions?, op?: and|or}',
  }),
  'cycle.meditation': def({ args: z.strictObject({ on: onOff }), help: 'meditation mode: a maximally diverse context', writes: true, usage: '{on: on|off}' }),
  'cycle.mode': def({
    args: z.strictObject({
      mode: z.enum(['auto', 'manual']),
      filter: z
        .strictObject({ min_priority: z.number().int().min(0).max(10).optional(), tags: tagList.optional(), sources: z.array(z.enum(noteSourceValues)).max(10).optional() })
        .optional(),
    }),
    help: 'notes mode: auto (filtered notes in full) or manual (counts and ids only)',
    writes: true,
  }),
  'cycle.pause': def({ args: z.strictObject({ ticks: z.number().int().min(1).max(1000) }), help: 'skip thinking for n ticks', writes: true }),
  'cycle.idle': def({
    args: z.strictObject({
      on: onOff,
      wake_on: z.array(z.enum(wakeConditions)).min(1).max(3).optional(),
      timeout_ms: z.number().int().min(1000).max(7 * 24 * 3_600_000).optional(),
    }),
    help: 'idle until a wake condition (note, process, timeout)',
    writes: true,
    usage: '{on: on|off, wake_on?: [note, process, timeout], timeout_ms?}',
  }),

  'abstracts.create': def({
    args: z.strictObject({ title: text(300), summary: text(20_000), tags: tagList.optional(), sources: abstractSources }),
    help: 'digest replies and entries: sources {responses, diary, concepts, links, abstracts: [ids]}',
    writes: true,
  }),
  'abstracts.extend': def({
    args: z
      .strictObject({ id, summary: text(20_000).optional(), append: text(20_000).optional(), tags: tagList.optional(), sources: abstractSources.optional() })
      .refine(atLeastOne(['summary', 'append', 'tags', 'sources']), atLeastOneMessage(['summary', 'append', 'tags', 'sources'])),
    help: 'extend an abstract: new summary or appended text, more sources/tags',
    writes: true,
  }),
  'abstracts.list': def({ args: z.strictObject({ tag: text(64).optional(), limit }), help: 'abstracts, newest first', writes: false }),
  'abstracts.read': def({ args: z.strictObject({ id }), help: 'one abstract in full', writes: false }),

  'llm_task.start': def({
    args: z
      .strictObject({ task_id: id.optional(), title: text(300).optional(), description: z.string().max(5000).optional(), goal_id: id.optional(), max_ticks: z.number().int().min(1).max(10_000).optional() })
      .refine((v) => (v.task_id === undefined) !== (v.title === undefined), { message: 'give task_id (an existing task) or title (a new task), not both', path: ['task_id'] }),
    help: 'start an auxiliary loop on a task (task_id, or title+description for a new task)',
    writes: true,
  }),
  'llm_task.stop': def({ args: z.strictObject({ task_id: id }), help: 'stop the auxiliary loop of a task', writes: true }),
  // The command only asks: the agent loop calls the model after the command's transaction
  // (an LLM activity), and the answer arrives as a note.
  'llm_task.ask': def({
    args: z.strictObject({ question: text(8000), model: registryRef.optional() }),
    help: 'ask another model of your registry one question (model: its name or id; default: your task model, else your own); the answer comes as a note (source llm:task)',
    writes: true,
    usage: '{question, model?: registry name or id}',
  }),

  // Society: known peers, messages between agents, ratings (trust follows their history), identity.
  'agents.list': def({
    args: z.strictObject({ status: z.enum([...peerStatusValues, 'all']).optional(), limit }),
    help: 'your known peers with their relation, status and your trust in them (default: all)',
    writes: false,
  }),
  'agents.add': def({
    args: z.strictObject({ peer: agentIdSchema, relation: z.enum(['peer', 'sibling']).optional(), note: z.string().trim().max(500).optional() }),
    help: 'make another agent a known peer (it knows you back); relation peer|sibling',
    writes: true,
  }),
  'agents.remove': def({
    args: z.strictObject({ peer: agentIdSchema, block: z.boolean().optional() }),
    help: 'forget a known peer; block: true also refuses its messages (agents.add undoes it)',
    writes: true,
  }),
  'messages.send': def({
    args: z.strictObject({ to: agentIdSchema, text: text(10_000), priority: z.number().int().min(0).max(10).optional(), tags: tagList.optional() }),
    help: 'send a known peer a message: it arrives as a note (source peer) in its next context and wakes its loop',
    writes: true,
  }),
  'reputation.read': def({
    args: z.strictObject({ peer: agentIdSchema.optional(), dimension: dimension.optional() }),
    help: 'your ratings of peers and the trust they earned (one peer: with its rating history), and what others think of you',
    writes: false,
  }),
  'reputation.rate': def({
    args: z.strictObject({ peer: agentIdSchema, score: z.number().int().min(-3).max(3), reason: text(500), dimension: dimension.optional() }),
    help: 'rate a peer −3…+3 with a reason (dimension default overall); your trust in it follows the history of your ratings',
    writes: true,
  }),
  'identity.read': def({ args: none, help: 'your name, description, persona, values and languages', writes: false }),
  'identity.set': def({
    args: z
      .strictObject({
        name: text(200).optional(),
        description: z.string().trim().max(2000).optional(),
        persona: z.string().trim().max(4000).optional(),
        values: z.array(text(200)).max(20).optional(),
        languages: z.array(z.string().trim().regex(/^[a-z]{2,3}$/, 'a language code like "en" or "de"')).max(10).optional(),
      })
      .refine(atLeastOne(identityFields), atLeastOneMessage(identityFields)),
    help: 'change your identity (context 0 shows it): name, description, persona, values, languages',
    writes: true,
    // Who the agent is steers every later tick: the validators must be surer than for a note.
    minRating: 2,
  }),

  'tags.stats': def({
    args: z.strictObject({ tag: text(64).optional(), limit }),
    help: 'how often each tag is used across your diary, concepts, notebook, notes, recent replies, goals and tasks',
    writes: false,
  }),

  'llm_registry.list': def({
    args: z.strictObject({ role: z.enum(chatRoleValues).optional() }),
    help: 'the models of your registry by role, in the order calls try them (first = the one in use)',
    writes: false,
  }),
  'llm_registry.select': def({
    args: z.strictObject({ model: registryRef, role: z.enum(chatRoleValues).optional() }),
    help: 'make a model of your registry the first choice for its role (role, when given, must be its role); from your next tick',
    writes: true,
    usage: '{model: registry name or id, role?}',
  }),

  'thinking_methods.list': def({ args: none, help: 'your thinking methods (the active one is in your context)', writes: false }),
  'thinking_methods.add': def({
    args: z.strictObject({ name: methodName, prompt: text(4000), description: z.string().trim().max(1000).optional(), tags: tagList.optional() }),
    help: 'add a thinking method: prompt is the instruction your context carries while it is active',
    writes: true,
  }),
  'thinking_methods.use': def({ args: z.strictObject({ name: methodName }), help: 'make a thinking method active (one at a time) until thinking_methods.stop', writes: true }),
  'thinking_methods.stop': def({ args: none, help: 'stop the active thinking method', writes: true }),

  'stagnation_strategies.list': def({
    args: z.strictObject({ class: z.enum(stagnationClasses).optional() }),
    help: 'break-loop strategies with their cost, uses and measured effect on novelty',
    writes: false,
  }),
  'stagnation_strategies.add': def({
    args: z.strictObject({
      name: methodName,
      class: z.enum(stagnationClasses),
      action: z.enum(strategyActions),
      description: z.string().trim().max(1000).optional(),
      cost: z.number().min(0).max(100).optional(),
      ticks: z.number().int().min(1).max(100).optional(),
    }),
    help: `add a break-loop strategy: class ${stagnationClasses.join('|')}, action ${strategyActions.join('|')} (ticks: for pause)`,
    writes: true,
  }),
  'stagnation_strategies.use': def({
    args: z.strictObject({ name: methodName }),
    help: 'apply a strategy now; its effect on novelty is measured two ticks later, like the automatic ones',
    writes: true,
  }),

  // Runs only in the sandbox: the command returns a loop effect and the agent loop
  // runs it as a sandboxRun activity on the sandbox queue. Dangerous: needs rating +2.
  shell: def({
    args: z.strictObject({ command: text(4000), timeout_ms: z.number().int().min(100).max(600_000).optional() }),
    help: 'run a busybox sh command in the sandbox (no network, read-only root, a scratch /work, node available); output comes in the next context',
    writes: true,
    destructive: true,
  }),

  'process.start': def({
    args: z.strictObject({ name: text(200), kind: text(64), payload: z.record(z.string(), z.unknown()).optional() }),
    help: 'register an external process (its result arrives in the process log)',
    writes: true,
  }),
  'process.list': def({ args: z.strictObject({ all: z.boolean().optional(), limit }), help: 'processes (default: open ones)', writes: false }),
  'process.stop': def({ args: z.strictObject({ process_id: text(200) }), help: 'stop a process (closes it)', writes: true }),
  'process.mark': def({
    args: z.strictObject({ process_id: text(200), status: z.enum(processStatusValues), message: z.string().max(2000).optional() }),
    help: 'set a process status ok|warning|error|timeout|offline|close',
    writes: true,
  }),
  'process.cleanup': def({ args: none, help: 'close every finished process (close, error, timeout, offline)', writes: true }),

  // Escalations: ask the oversight tier; call a discovered state-machine tool.
  escalate: def({
    args: z.strictObject({
      task: text(4000),
      category: z.enum(['statistics', 'code', 'visualization', 'state_machine_designer', 'general']),
      context: z.record(z.string(), z.unknown()).optional(),
      what_i_tried: z.string().max(4000).optional(),
    }),
    help: 'escalate a task to the oversight tier (category statistics|code|visualization|state_machine_designer|general); the answer comes as a note',
    writes: true,
  }),
  'tool.call': def({
    args: z.strictObject({ tool: text(64), action: text(64), args: z.record(z.string(), z.unknown()).optional() }),
    help: 'call an action of one of your discovered state-machine tools (discover_tools list shows them, each with its state and valid actions)',
    writes: true,
    usage: '{tool, action, args?}',
  }),

  'tools.generate': def({
    args: z.strictObject({
      capability: z.string().trim().regex(/^[a-z][a-z0-9_.-]{1,63}$/, 'a capability like "text.word_frequencies" (lowercase letters, digits, _ . -)'),
      description: text(4000),
    }),
    help: 'ask for a new tool for a capability no registered tool has: it is written, safety-checked and tested in the sandbox; a note tells you when it is ready',
    writes: true,
  }),

  // Speech: the command only asks; the agent loop starts a speech workflow (workflows/speech.ts),
  // which holds the seconds of audio on the agent's lifeforce and has the speech engine say it.
  speak: def({
    args: z.strictObject({
      text: text(maxSpeakChars),
      lang: speechLanguageSchema.refine((l) => l !== 'auto', 'name the language to speak, e.g. "en" or "de"').optional(),
    }),
    help: 'say a text aloud (lang: en, de, …): the speech engine writes a WAV for your user; costs its seconds of audio in lifeforce; the outcome comes in a later context',
    writes: true,
  }),

  // Nerves: learned behaviours, run as the agent's child workflows on their own budget.
  'nerve.start': def({
    args: z.strictObject({
      name: z.enum(nerveNames),
      steps: z.number().int().min(1).max(100_000).default(200),
      seed: z.number().int().min(0).max(2 ** 32 - 1).default(1),
      mode: z.enum(modeSettings).default('auto'),
    }),
    help: 'run a nerve (a learned behaviour: collision) on its sensor stream as your child workflow agent/<id>/nerve/<name>; it moves from deliberate (you decide) to reflex (a learned table) and spends its own budget',
    writes: true,
  }),

  // Descendants: the command only asks (after checking what it can); the agent loop starts the
  // spawn workflow agent/<id>/spawn/<name>, which admits, copies, funds and starts the child.
  spawn: def({
    args: z.strictObject({
      type: z.enum(spawnTypes),
      name: childNameSchema,
      goals: spawnGoalsSchema.optional(),
      budget: spawnBudgetSchema.optional(),
    }),
    help: 'give birth to a descendant with its own loop: type clone (a copy of all you have, your learnings included), trained (your diary, concept graph and known peers) or newborn (nothing); all inherit your ethics policies; name becomes its id; goals: its first goals; budget: LF carved from yours; it becomes your peer and the outcome comes as a note',
    writes: true,
  }),
};

export type CommandType = keyof typeof definitions;
export type ArgsOf<T extends CommandType> = z.output<(typeof definitions)[T]['args']>;

interface CommandSpec {
  type: CommandType;
  family: string;
  action: string;
  args: z.ZodType;
  help: string;
  usage: string;
  minRating: number;
  writes: boolean;
  allowedInTaskLoop: boolean;
  destructive: boolean;
}

/** Types that always need a +2 rating besides `*.delete`. */
const dangerousTypes: ReadonlySet<string> = new Set(['config.set', 'shell', 'spawn']);

function usageOf(schema: z.ZodType): string {
  const shape = (schema as unknown as { shape?: Record<string, z.ZodType> }).shape;
  if (!shape) return '{}';
  const keys = Object.keys(shape).map((k) => (shape[k]!.safeParse(undefined).success ? `${k}?` : k));
  return `{${keys.join(', ')}}`;
}

/** The catalogue, one entry per command type. */
export const catalogue: Readonly<Record<CommandType, CommandSpec>> = Object.fromEntries(
  Object.entries(definitions).map(([type, d]: [string, Def<z.ZodType>]) => {
    const [family, action = ''] = type.split('.') as [string, string?];
    const minRating = d.minRating ?? (action === 'delete' || dangerousTypes.has(type) ? 2 : 1);
    const spec: CommandSpec = {
      type: type as CommandType,
      family,
      action,
      args: d.args,
      help: d.help,
      usage: d.usage ?? usageOf(d.args),
      minRating,
      writes: d.writes,
      allowedInTaskLoop: d.allowedInTaskLoop ?? !d.writes,
      destructive: d.destructive ?? false,
    };
    return [type, spec];
  }),
) as Record<CommandType, CommandSpec>;

export const commandTypes = Object.keys(catalogue) as CommandType[];
export const families: readonly string[] = [...new Set(commandTypes.map((t) => catalogue[t].family))];

function isCommandType(type: string): type is CommandType {
  return Object.hasOwn(catalogue, type);
}

/** A command whose args passed its schema (args are the parsed values; look the spec up in `catalogue`). */
export type ValidatedCommand = {
  [T in CommandType]: { cmdId: string; type: T; args: ArgsOf<T>; description?: string };
}[CommandType];

type Validation =
  | { ok: true; command: ValidatedCommand }
  | { ok: false; code: 'unknown' | 'invalid'; reason: string };

/** Check a parsed command against the catalogue; the reason names the bad arg fields. */
export function validateCommand(cmd: ParsedCommand): Validation {
  if (!isCommandType(cmd.type)) {
    const family = cmd.type.split('.')[0] ?? '';
    const hint = families.includes(family)
      ? `; ${family} has: ${commandTypes.filter((t) => catalogue[t].family === family).map((t) => catalogue[t].action).join(', ')}`
      : '; see help';
    return { ok: false, code: 'unknown', reason: `unknown command type '${cmd.type}'${hint}` };
  }
  const spec = catalogue[cmd.type];
  const r = spec.args.safeParse(cmd.args ?? {});
  if (!r.success) return { ok: false, code: 'invalid', reason: `invalid args for ${cmd.type}: ${formatIssues(r.error, 'args', { under: 'args' })}` };
  const command = { cmdId: cmd.cmdId, type: cmd.type, args: r.data, ...(cmd.description !== undefined ? { description: cmd.description } : {}) };
  return { ok: true, command: command as ValidatedCommand };
}

/** Is this command type destructive? An unknown type is not: the catalogue rejects it, it never runs. */
export function isDestructive(type: string): boolean {
  return isCommandType(type) && catalogue[type].destructive;
}

/** The rating a command type needs; unknown types need the dangerous level. */
export function minRatingFor(type: string): number {
  return isCommandType(type) ? catalogue[type].minRating : 2;
}

/** The cmd_ids a tick's rating lets through; `null` rating means auto_pass (all pass). */
export function allowedByRating(commands: readonly ParsedCommand[], rating: number | null): string[] {
  return commands.filter((c) => rating === null || rating >= minRatingFor(c.type)).map((c) => c.cmdId);
}

/** Help text: every command on one line, or one family in detail. */
export function helpText(family?: string): string {
  if (family !== undefined && family !== '' && family !== 'all') {
    const types = commandTypes.filter((t) => catalogue[t].family === family);
    if (types.length === 0) return `No family '${family}'. Families: ${families.join(', ')}.`;
    const lines = types.map((t) => {
        const s = catalogue[t];
        const flags = [s.writes ? 'writes' : 'reads', `needs rating ≥ +${s.minRating}`, s.destructive ? 'destructive: held for a human when no validator is configured' : null, s.allowedInTaskLoop ? 'allowed in task loops' : null].filter(Boolean);
        return `${t} ${s.usage} — ${s.help} (${flags.join('; ')})`;
      });
    if (family === 'config') {
      lines.push('Keys:', ...configKeyNames.map((k) => `  ${k} (default ${JSON.stringify(configKeys[k].default)}): ${configKeys[k].help}`));
    }
    return lines.join('\n');
  }
  const lines = commandTypes.map((t) => `${t} ${catalogue[t].usage} — ${catalogue[t].help}`);
  return ['Commands (type args — what it does; ? = optional; ids are numbers). `help {family}` gives details.', ...lines].join('\n');
}

