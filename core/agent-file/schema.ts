/**
 * The agent file: one document (YAML or JSON) that says who an agent is and how it works. Every
 * key but `id` is optional; a key left out is left as the agent has it. The schema's output is
 * the document's canonical form (trimmed text, defaults filled, a role's models as a list), so
 * two files that mean the same thing parse to equal values and an exported file applies as a
 * no-op.
 */
import { z } from 'zod';
import { configKeyNames, configKeys, validateConfigValue } from '../catalogue.js';
import { languageCode } from '../catalogue/args.js';
import { policyRuleSchema } from '../ethics.js';
import { agentIdSchema } from '../ids.js';
import { mcpServerEntrySchema } from '../mcp-policy.js';
import { budgetSettingsSchema } from '../lifeforce-settings.js';
import { sharedValue } from '../shared.js';

/** An agent file is refused above this size (UTF-8 bytes): a person writes it, not a program. */
export const maxAgentFileBytes = 1024 * 1024;

/** Config keys the file states elsewhere: `pace.delayMs` and `idle.timeoutMs` are these keys. */
export const configKeysStatedElsewhere: Readonly<Record<string, string>> = {
  delay_ms: 'pace.delayMs',
  idle_timeout_ms: 'idle.timeoutMs',
};

/** The roles a model is named for; `validators` carry a trust each. */
export const modelRoles = ['agent', 'oversight', 'emotion', 'novelty', 'task', 'embedder'] as const;
export type ModelRole = (typeof modelRoles)[number];

export const goalStatuses = ['active', 'paused', 'completed', 'failed'] as const;
export const taskStatuses = ['open', 'in_progress', 'blocked', 'done', 'failed', 'cancelled'] as const;
export const peerRelations = ['parent', 'child', 'sibling', 'peer'] as const;
export const peerStatuses = ['active', 'lost', 'blocked'] as const;
export const wakeConditions = ['note', 'process', 'timeout'] as const;

/** Optional text: trimmed, and an empty string means the same as leaving it out. */
const optionalText = (max: number) =>
  z
    .string()
    .trim()
    .max(max)
    .transform((s) => (s === '' ? undefined : s))
    .optional();
const title = (max: number) => z.string().trim().min(1).max(max);
const priority = z.number().int().min(-100).max(100);

/** A model of the catalogue by name (`mindloop models list`); `local` is the built-in offline model. */
export const modelNameSchema = z
  .string()
  .trim()
  .regex(
    /^[a-z0-9][a-z0-9._-]{0,63}$/,
    'a model name of the catalogue (lower-case letters, digits, ".", "_", "-"), e.g. "local"',
  );

/** One name or a list in failover order; always a list in the canonical form. */
const modelList = z.preprocess(
  (v) => (typeof v === 'string' ? [v] : v),
  z.array(modelNameSchema, { error: 'a model name or a list of names (first = tried first)' }).min(1).max(10),
);

function uniqueBy<T>(key: (t: T) => string, what: string) {
  return (list: readonly T[], ctx: z.RefinementCtx) => {
    const seen = new Set<string>();
    list.forEach((item, i) => {
      const k = key(item);
      if (seen.has(k))
        ctx.addIssue({ code: 'custom', path: [i], message: `${what} '${k}' appears twice (each must be unique)` });
      seen.add(k);
    });
  };
}

const schemas = sharedValue('core/agent-file/schema', () => {
  const identitySchema = z.strictObject({
    persona: optionalText(4000),
    values: z.array(title(200)).max(20).optional(),
    languages: z.array(languageCode).max(10).optional(),
  });

  const systemPromptSchema = z.strictObject({
    /** Shown on every tick. */
    short: optionalText(4000),
    /** The whole prompt, shown when the context has room. */
    full: optionalText(32_000),
  });

  const thinkingMethodSchema = z.strictObject({
    name: z
      .string()
      .trim()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'letters, digits, "_", "." and "-" (at most 64), like "socratic"'),
    prompt: title(4000),
    description: optionalText(1000),
  });

  const goalSchema = z.strictObject({
    title: title(500),
    description: optionalText(4000),
    constraints: optionalText(4000),
    successCriteria: optionalText(4000),
    priority: priority.default(0),
    status: z.enum(goalStatuses).default('active'),
  });

  const taskSchema = z.strictObject({
    title: title(500),
    description: optionalText(4000),
    priority: priority.default(0),
    /** The title of a goal of this file the task serves. */
    goal: optionalText(500),
    status: z.enum(taskStatuses).default('open'),
  });

  const ethicsSchema = z.strictObject({
    title: title(200),
    /** The policy in plain language: the validators read it. */
    policy: optionalText(4000),
    rationale: optionalText(2000),
    severity: z.enum(['info', 'warn', 'block']).default('block'),
    /** `global` policies pass to the agent's descendants. */
    scope: z.enum(['global', 'agent']).default('agent'),
    /** Command-type patterns forbidden whatever the args (`shell`, `goals.*`, `*.delete`). */
    forbids: z.array(z.string().trim().min(1).max(100)).max(50).default([]),
    /** Typed rules over a command's type and args: blocking whatever the validators say. */
    rules: z.array(policyRuleSchema).max(20).default([]),
  });

  const validatorSchema = z.strictObject({
    model: modelNameSchema,
    /** How much its rating counts (0 = not at all; 1 = the default). */
    trust: z.number().min(0).max(10).default(1),
  });

  const modelsSchema = z.strictObject({
    agent: modelList.optional(),
    validators: z
      .array(validatorSchema)
      .max(10)
      .superRefine(uniqueBy((v) => v.model, 'validator'))
      .optional(),
    oversight: modelList.optional(),
    emotion: modelList.optional(),
    novelty: modelList.optional(),
    task: modelList.optional(),
    embedder: modelList.optional(),
  });

  const toolsSchema = z.strictObject({
    /** The agent's MCP servers, by name: their tools become the agent's (`tools.mcp`). */
    mcp: z
      .array(mcpServerEntrySchema)
      .max(50)
      .superRefine(uniqueBy((e) => e.name, 'MCP server'))
      .optional(),
  });

  const paceSchema = z.strictObject({
    /** The pause between ticks (ms); the config key `delay_ms`. */
    delayMs: configKeys.delay_ms.schema.optional(),
  });

  const idleSchema = z.strictObject({
    /** Idle mode: the loop sleeps until one of `wakeOn` happens. */
    on: z.boolean().optional(),
    wakeOn: z.array(z.enum(wakeConditions)).min(1).max(3).optional(),
    /** The `timeout` wake (ms); the config key `idle_timeout_ms`. */
    timeoutMs: configKeys.idle_timeout_ms.schema.optional(),
  });

  const configSchema = z.record(z.string(), z.unknown()).transform((raw, ctx) => {
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(raw)) {
      const elsewhere = configKeysStatedElsewhere[key];
      if (elsewhere) {
        ctx.addIssue({ code: 'custom', path: [key], message: `set it as ${elsewhere}` });
        continue;
      }
      const v = validateConfigValue(key, value);
      if (v.ok) out[key] = v.value;
      else if (!(key in configKeys)) ctx.addIssue({ code: 'unrecognized_keys', keys: [key], path: [], input: raw });
      else ctx.addIssue({ code: 'custom', path: [key], message: v.reason.replace(new RegExp(`^${key}(\\.|: )`), '') });
    }
    return out;
  });

  /** A peer: its agent id alone, or the id with how it is known. */
  const peerSchema = z.preprocess(
    (v) => (typeof v === 'string' ? { id: v } : v),
    z.strictObject(
      {
        id: agentIdSchema,
        relation: z.enum(peerRelations).default('peer'),
        /** Where a peer of another deployment is reached (its bus address); none: an agent here. */
        endpoint: optionalText(500),
        status: z.enum(peerStatuses).default('active'),
        notes: optionalText(1000),
      },
      { error: 'a peer: an agent id, or {id, relation?, endpoint?, status?, notes?}' },
    ),
  );

  const agentDocumentSchema = z.strictObject({
    id: agentIdSchema,
    name: title(200).optional(),
    description: optionalText(2000),
    identity: identitySchema.optional(),
    systemPrompt: systemPromptSchema.optional(),
    /** The active thinking method; null: none. */
    thinkingMethod: thinkingMethodSchema.nullable().optional(),
    goals: z
      .array(goalSchema)
      .max(100)
      .superRefine(uniqueBy((g) => g.title, 'goal'))
      .optional(),
    /** Pinned tasks: shown first, before the agent's own. */
    tasks: z
      .array(taskSchema)
      .max(100)
      .superRefine(uniqueBy((t) => t.title, 'task'))
      .optional(),
    ethics: z
      .array(ethicsSchema)
      .max(50)
      .superRefine(uniqueBy((e) => e.title, 'ethics policy'))
      .optional(),
    models: modelsSchema.optional(),
    tools: toolsSchema.optional(),
    lifeforce: budgetSettingsSchema.optional(),
    pace: paceSchema.optional(),
    idle: idleSchema.optional(),
    config: configSchema.optional(),
    peers: z
      .array(peerSchema)
      .max(100)
      .superRefine(uniqueBy((p) => p.id, 'peer'))
      .optional(),
  });

  return { agentDocumentSchema, identitySchema, goalSchema, taskSchema, ethicsSchema, peerSchema, validatorSchema };
});

export const { agentDocumentSchema } = schemas;

/** An agent file in its canonical form. */
export type AgentDocument = z.output<typeof agentDocumentSchema>;
/** An agent file as a person may write it. */
export type AgentDocumentInput = z.input<typeof agentDocumentSchema>;
export type GoalEntry = z.output<typeof schemas.goalSchema>;
export type TaskEntry = z.output<typeof schemas.taskSchema>;
export type EthicsEntry = z.output<typeof schemas.ethicsSchema>;
export type PeerEntry = z.output<typeof schemas.peerSchema>;
export type ValidatorEntry = z.output<typeof schemas.validatorSchema>;

/** The config keys a file may set under `config`. */
export const fileConfigKeys: readonly string[] = configKeyNames.filter((k) => !(k in configKeysStatedElsewhere));
