/** The settings the agent (`config.set`) and the user (`setConfig`) may change, with their schemas. */
import { formatIssues } from '../zod-issues.js';
import { z } from 'zod';
import { abstractsStrategySchema, defaultAbstractsStrategy } from '../abstracts.js';
import { learningDefaults } from '../learnings.js';
import { spawnLimitDefaults, spawnLimitSchema } from '../society/spawn.js';

interface ConfigKeySpec {
  schema: z.ZodType;
  default: unknown;
  help: string;
}

const unit = z.number().min(0).max(1);

/** Settings the agent (config.set) and the user (setConfig update) may change; context 7 shows them. */
export const configKeys = {
  delay_ms: { schema: z.number().int().min(0).max(3_600_000), default: 1000, help: 'pause between ticks (ms)' },
  recent_responses: {
    schema: z.number().int().min(1).max(50),
    default: 5,
    help: "K: own recent replies shown in context 3 (chosen by meaning: K replies' worth of tokens, at most 2K)",
  },
  context_mode: {
    schema: z.enum(['standard', 'concentration', 'meditation']),
    default: 'standard',
    help: 'how context 3 picks replies (standard: recent or relevant to your goals; concentration: about your goals or a tag/emotion filter; meditation: the most diverse)',
  },
  notes_mode: {
    schema: z.enum(['auto', 'manual']),
    default: 'auto',
    help: 'auto: notes shown in full; manual: counts and ids only',
  },
  idle_timeout_ms: {
    schema: z
      .number()
      .int()
      .min(1000)
      .max(7 * 24 * 3_600_000),
    default: 60_000,
    help: 'idle mode wakes after this long',
  },
  emotions: {
    schema: z.array(z.string().trim().min(1).max(32)).min(1).max(50),
    default: ['curiosity', 'joy', 'calm', 'anxiety', 'frustration', 'boredom', 'confidence'],
    help: 'emotion names the evaluator uses',
  },
  novelty_threshold: { schema: unit, default: 0.35, help: 'memory manager archives replies below this novelty' },
  anxiety_threshold: {
    schema: z.number().int().min(0).max(5),
    default: 3,
    help: 'Reflex-lite: anxiety above this strength counts toward the streak',
  },
  anxiety_ticks: {
    schema: z.number().int().min(1).max(100),
    default: 3,
    help: 'Reflex-lite fires after this many anxious ticks in a row',
  },
  lru_limit: {
    schema: z.number().int().min(10).max(100_000),
    default: 500,
    help: 'memory manager keeps at most this many entries',
  },
  semantic_memory: {
    schema: z.enum(['on', 'off']),
    default: 'on',
    help: 'on: novelty, recall and contexts by meaning when an embedder is at hand; off: by words',
  },
  emotion_weight: { schema: unit, default: 0.6, help: 'memory manager: weight of emotions in retention' },
  goal_focus: { schema: unit, default: 0.7, help: 'memory manager: weight of goal relevance' },
  diversity_boost: { schema: unit, default: 0.8, help: 'memory manager: weight of diversity' },
  abstract_every: {
    schema: z.number().int().min(0).max(10_000),
    default: 50,
    help: 'make an abstract every N ticks (0: off)',
  },
  abstracts_strategy: {
    schema: abstractsStrategySchema,
    default: defaultAbstractsStrategy,
    help: 'how abstracts digest recent replies (recency | keyword_cluster)',
  },
  task_loop_max_ticks: {
    schema: z.number().int().min(1).max(10_000),
    default: 50,
    help: 'ticks an auxiliary loop runs at most',
  },
  max_tokens: { schema: z.number().int().min(16).max(8192), default: 512, help: 'reply length limit (tokens)' },
  learning_threshold: {
    schema: z.number().int().min(1).max(1000),
    default: learningDefaults.threshold,
    help: 'preference learning: occurrences of a feedback pattern that derive a learning',
  },
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
export const humanOnlyConfigKeys: ReadonlySet<ConfigKey> = new Set<ConfigKey>([
  'auto_pass_destructive',
  'max_descendants',
  'max_per_generation',
]);
export const configKeyNames = Object.keys(configKeys) as [ConfigKey, ...ConfigKey[]];

/** Validate one config value; the error names the key. */
export function validateConfigValue(
  key: string,
  value: unknown,
): { ok: true; value: unknown } | { ok: false; reason: string } {
  if (!(key in configKeys))
    return { ok: false, reason: `unknown config key '${key}' (known: ${configKeyNames.join(', ')})` };
  const r = configKeys[key as ConfigKey].schema.safeParse(value);
  return r.success ? { ok: true, value: r.data } : { ok: false, reason: formatIssues(r.error, key, { under: key }) };
}
