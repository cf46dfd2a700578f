/**
 * Descendants (`spawn`): the kinds of child, the child's name, the limits on how many
 * descendants an agent may have, the spawn workflow's input and result, and the note its
 * parent gets. Pure: the command catalogue, the spawn workflow, its activities and the CLI
 * all read it.
 */
import { z } from 'zod';
import { agentIdPattern } from '../ids.js';

/**
 * - `clone`: a copy of every table of the parent's, its learnings included (not its lifeforce: a
 *   budget is carved, never copied; db/queries/spawns.ts `cloneLeavesOut` names what stays and why);
 * - `trained`: the parent's diary, concept graph (concepts, links) and known peers;
 * - `newborn`: nothing but what a freshly provisioned agent has.
 * Every kind inherits its parent's ethics policies.
 */
export const spawnTypes = ['clone', 'trained', 'newborn'] as const;
export type SpawnType = (typeof spawnTypes)[number];

/** What a spawn ended as: the child runs its own loop, or it was refused, or undone. */
export const spawnOutcomes = ['running', 'refused', 'rolled_back'] as const;
export type SpawnOutcome = (typeof spawnOutcomes)[number];

/** The tables (SQL names) a trained or newborn child gets from its parent; a clone gets every table but those db/queries/spawns.ts leaves out. */
export const inheritedTables: Record<Exclude<SpawnType, 'clone'>, readonly string[]> = {
  trained: ['ethics_policies', 'agent_peers', 'diary_entries', 'concepts', 'links'],
  newborn: ['ethics_policies'],
};

/** The child's name is its agent id too: it names its workflows (`agent/<name>`), so the id rules hold. */
export const childNameSchema = z
  .string()
  .trim()
  .regex(
    agentIdPattern,
    "a name that becomes the child's id: letters, digits, '.', '-' and '_', starting with a letter or digit, at most 64 characters",
  );

export const spawnGoalsSchema = z.array(z.string().trim().min(1).max(500)).max(10, 'at most 10 goals');
/** LF carved from the parent's budget for the child. */
export const spawnBudgetSchema = z.number().positive('a positive amount of LF').max(1_000_000_000);

/** Defaults of the `max_descendants` and `max_per_generation` config keys. */
export const spawnLimitDefaults = { maxDescendants: 10, maxPerGeneration: 5 } as const;
export const spawnLimitSchema = z.number().int().min(0).max(10_000);

export interface SpawnLimits {
  maxDescendants: number;
  maxPerGeneration: number;
}

/** One ancestor of the child to be (its parent, the parent's parent, …) with what it has already. */
export interface AncestorCount {
  agentId: string;
  /** Its descendants alive or being born (any generation). */
  descendants: number;
  /** Those of them in the generation the child would be born into. */
  inGeneration: number;
  limits: SpawnLimits;
}

/**
 * Why a child of generation `generation` may not be born, or null: every ancestor's limits hold
 * with the child counted (a grandchild is a descendant of its grandparent too).
 */
export function limitRefusal(generation: number, ancestors: readonly AncestorCount[]): string | null {
  for (const a of ancestors) {
    if (a.descendants + 1 > a.limits.maxDescendants) {
      return `limit: ${a.agentId} has ${a.descendants} descendant${a.descendants === 1 ? '' : 's'} and may have at most ${a.limits.maxDescendants} (config max_descendants)`;
    }
    if (a.inGeneration + 1 > a.limits.maxPerGeneration) {
      return `limit: ${a.agentId} has ${a.inGeneration} descendant${a.inGeneration === 1 ? '' : 's'} in generation ${generation} and may have at most ${a.limits.maxPerGeneration} per generation (config max_per_generation)`;
    }
  }
  return null;
}

/** Limits from an agent's config values (unset or invalid keys take the defaults). */
export function limitsFrom(config: { max_descendants?: unknown; max_per_generation?: unknown }): SpawnLimits {
  const read = (v: unknown, fallback: number) => {
    const r = spawnLimitSchema.safeParse(v);
    return r.success ? r.data : fallback;
  };
  return {
    maxDescendants: read(config.max_descendants, spawnLimitDefaults.maxDescendants),
    maxPerGeneration: read(config.max_per_generation, spawnLimitDefaults.maxPerGeneration),
  };
}

/** The spawn workflow's input (`agent/<parentId>/spawn/<name>`). */
export const spawnWorkflowInput = z.strictObject({
  parentId: z.string().regex(agentIdPattern, 'an agent id'),
  type: z.enum(spawnTypes),
  name: childNameSchema,
  goals: spawnGoalsSchema.default([]),
  /** LF for the child; unset: an unlimited parent gives an unlimited child, a limited one a quarter of what it has. */
  budget: spawnBudgetSchema.optional(),
  /** The agent loop tick and command that asked (absent when a person started it). */
  requestedBy: z
    .strictObject({
      workflowId: z.string().min(1).max(300),
      tick: z.number().int().min(0),
      cmdId: z.string().min(1).max(200),
    })
    .optional(),
});
export type SpawnInput = z.input<typeof spawnWorkflowInput>;
export type SpawnParams = z.output<typeof spawnWorkflowInput>;

export type SpawnPhase = 'admitting' | 'copying' | 'funding' | 'starting' | 'rolling_back' | 'done';

export interface SpawnResult {
  parentId: string;
  childId: string;
  type: SpawnType;
  status: SpawnOutcome;
  /** Why it was refused or rolled back. */
  reason?: string;
  generation?: number;
  /** Rows copied per table, and in all. */
  copied?: Record<string, number>;
  rows?: number;
  /** Workflow start → the child's rows committed (ms). */
  spawnMs?: number;
  /** LF carved for the child (null: unlimited, like its parent). */
  budget?: number | null;
}

/** The note the parent reads about its spawn. */
export function spawnNote(r: SpawnResult): string {
  if (r.status === 'running') {
    const budget =
      r.budget === undefined || r.budget === null ? 'an unlimited budget' : `${r.budget} LF carved from yours`;
    return `Your ${r.type} descendant ${r.childId} (generation ${r.generation ?? '?'}) is born and runs its own loop: ${r.rows ?? 0} rows inherited, ${budget}. It is your peer (relation child).`;
  }
  return `Your ${r.type} descendant ${r.childId} was ${r.status === 'refused' ? 'refused' : 'rolled back'}: ${r.reason ?? 'no reason given'}.`;
}
