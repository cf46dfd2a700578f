/**
 * The shared pieces of the command catalogue: argument schemas (ids, text, tags, limits) and
 * `def`, the shape of one command's definition.
 */
import { z } from 'zod';
import type { StrategyAction } from '../stagnation.js';

/** A row id: a positive integer, also accepted as a digit string ("12"), which models often write. */
export const id = z.union([z.number().int().positive(), z.string().regex(/^\d+$/).transform(Number)], {
  error: 'expected a positive integer id',
});
export const ids = z.array(id).min(1).max(100);
export const text = (max: number) => z.string().trim().min(1).max(max);
export const tagList = z.array(z.string().trim().min(1).max(64)).max(20);
export const limit = z.number().int().min(1).max(50).optional();
export const offset = z.number().int().min(0).max(100_000).optional();
export const priority = z.number().int().min(-100).max(100);
/** A language the agent speaks: a code like "en" or "de". */
export const languageCode = z
  .string()
  .trim()
  .regex(/^[a-z]{2,3}$/, 'a language code like "en" or "de"');
/** `true`/`false` or `"on"`/`"off"`. */
export const onOff = z.union([z.boolean(), z.enum(['on', 'off']).transform((v) => v === 'on')]);
export const emotionReading = z.strictObject({
  emotion: text(64),
  strength: z.number().int().min(1).max(5),
  reason: z.string().max(200).optional(),
});
/** A concept by id (number) or by name (string). */
export const conceptRef = z.union([z.number().int().positive(), text(200)], {
  error: 'expected a concept id (number) or name (string)',
});
/** A model of the agent's registry by id (number) or name (string). */
export const registryRef = z.union([z.number().int().positive(), text(200)], {
  error: 'expected a registry model id (number) or name (string)',
});
/** A rating's dimension: a short lowercase word (`overall` when none is given). */
export const dimension = z
  .string()
  .trim()
  .regex(/^[a-z][a-z0-9_]{0,31}$/, 'a lowercase word like "overall" or "accuracy"');
/** The name of a thinking method or a stagnation strategy. */
export const methodName = z
  .string()
  .trim()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/,
    'letters, digits, "_", "." and "-" (at most 64), like "socratic" or "ask_user"',
  );
export const identityFields = ['name', 'description', 'persona', 'values', 'languages'] as const;
/** The chat roles of the registry a model can be chosen for. */
export const chatRoleValues = ['agent', 'oversight', 'validator', 'emotion', 'novelty', 'task'] as const;
export const peerStatusValues = ['active', 'lost', 'blocked'] as const;
/** What a stagnation strategy can do (every action `applyStrategy` knows; a missing one is a compile error). */
const strategyActionSet = {
  note_user: true,
  ask_peers: true,
  context_mode: true,
  flashback: true,
  meta_analysis: true,
  switch_llm: true,
  pause: true,
} satisfies Record<StrategyAction, true>;
export const strategyActions = Object.keys(strategyActionSet) as [StrategyAction, ...StrategyAction[]];

export const goalStatusValues = ['active', 'paused', 'completed', 'failed'] as const;
export const goalRelationValues = ['subgoal', 'depends_on', 'blocks', 'related'] as const;
export const taskStatusValues = ['open', 'in_progress', 'blocked', 'done', 'failed', 'cancelled'] as const;
export const factStatusValues = ['pending', 'verified', 'rejected'] as const;
export const processStatusValues = ['ok', 'warning', 'error', 'timeout', 'offline', 'close'] as const;
export const wakeConditions = ['note', 'process', 'timeout'] as const;
export const noteSourceValues = ['user', 'agent', 'llm:task', 'peer', 'system', 'oversight', 'human'] as const;

export const abstractSources = z
  .strictObject({
    responses: ids.optional(),
    diary: ids.optional(),
    concepts: ids.optional(),
    links: ids.optional(),
    abstracts: ids.optional(),
  })
  .refine((s) => Object.values(s).some((v) => v !== undefined && v.length > 0), 'name at least one source id');

/** An update must change something. */
export const atLeastOne =
  (fields: readonly string[]) =>
  (v: Record<string, unknown>): boolean =>
    fields.some((f) => v[f] !== undefined);
export const atLeastOneMessage = (fields: readonly string[]) => ({
  message: `give at least one of: ${fields.join(', ')}`,
});

export interface Def<A extends z.ZodType> {
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
export const def = <A extends z.ZodType>(d: Def<A>): Def<A> => d;
export const none = z.strictObject({});

export const listArgs = z.strictObject({ limit, offset, tag: text(64).optional(), pinned: z.boolean().optional() });
