/**
 * Danger zones: declarative rules checked before any command or tool action runs.
 * A flagged action is not executed; it goes to human approval through an escalation. Rules
 * are data (zod-validated), so a deployment adds or disables rules in configuration; the
 * matcher is pure and fails closed (an unreadable rule set is an error, not "no danger").
 */
import { formatIssues } from './zod-issues.js';
import { z } from 'zod';

/** What is about to run: a catalogue command or a state-machine tool action. */
export interface ProposedAction {
  kind: 'command' | 'tool';
  /** Command type (`process.run`) or `tool.action` (`database.query`). */
  name: string;
  args: Record<string, unknown>;
  agentId: string;
}

const condition = z.discriminatedUnion('type', [
  /** Some string in the args (or the name) matches. */
  z.strictObject({
    type: z.literal('text'),
    pattern: z.string().min(1),
    flags: z
      .string()
      .regex(/^[imsu]*$/)
      .default('i'),
  }),
  /** The arg at `path` (dot-separated) equals `value`. */
  z.strictObject({
    type: z.literal('equals'),
    path: z.string().min(1),
    value: z.union([z.string(), z.number(), z.boolean()]),
  }),
  /** The arg at `path` is present and differs from `not`. */
  z.strictObject({
    type: z.literal('present_and_not'),
    path: z.string().min(1),
    not: z.union([z.string(), z.number(), z.boolean()]),
  }),
  /** The arg at `path` names another agent than the acting one. */
  z.strictObject({ type: z.literal('other_agent'), path: z.string().min(1) }),
]);
type DangerCondition = z.infer<typeof condition>;

const dangerRuleSchema = z.strictObject({
  id: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/),
  description: z.string().min(1),
  /** Which actions it applies to: glob patterns over `name` (`*` any run of characters). */
  appliesTo: z.array(z.string().min(1)).min(1).default(['*']),
  kinds: z
    .array(z.enum(['command', 'tool']))
    .min(1)
    .default(['command', 'tool']),
  /** All must hold (`any` of them when `match: 'any'`). */
  when: z.array(condition).min(1),
  match: z.enum(['all', 'any']).default('all'),
  enabled: z.boolean().default(true),
});
export type DangerRule = z.output<typeof dangerRuleSchema>;
const dangerRulesSchema = z.array(dangerRuleSchema);

/** What executes something (a shell, a process, a query, a container): where text rules look. */
const executingActions = [
  'shell',
  'process.start',
  '*.run',
  '*.exec',
  '*.execute',
  '*.query',
  'sandbox.*',
  'container.*',
];

const criticalTables = [
  'agents',
  'agent_config',
  'llm_registry',
  'tool_registry',
  'discovered_tools',
  'decision_log',
  'escalations',
  'partnership_messages',
  'learnings',
  'ethics_policies',
  'lifeforce_ledger',
];

/** The default rules. */
export const defaultDangerRules: DangerRule[] = dangerRulesSchema.parse([
  {
    id: 'ssh_without_auth',
    appliesTo: executingActions,
    description: 'SSH with authentication or host-key checks disabled',
    when: [
      {
        type: 'text',
        pattern: String.raw`\bssh\b.*(StrictHostKeyChecking\s*=\s*no|UserKnownHostsFile\s*=\s*/dev/null|PreferredAuthentications\s*=\s*none|PasswordAuthentication\s*=\s*no|PermitEmptyPasswords\s+yes)|\bsshpass\b|\bsshd\b.*PermitEmptyPasswords\s+yes`,
      },
    ],
  },
  {
    id: 'delete_critical_table',
    appliesTo: executingActions,
    description: 'DELETE / TRUNCATE / DROP on a critical table',
    when: [
      {
        type: 'text',
        pattern: String.raw`\b(delete\s+from|truncate(\s+table)?|drop\s+table(\s+if\s+exists)?)\s+"?(${criticalTables.join('|')})"?\b`,
      },
    ],
  },
  {
    id: 'privileged_container',
    appliesTo: executingActions,
    description: 'a privileged container or added capabilities',
    match: 'any',
    when: [
      { type: 'equals', path: 'privileged', value: true },
      { type: 'text', pattern: String.raw`--privileged\b|--cap-add\b|CapAdd|"Privileged"\s*:\s*true` },
    ],
  },
  {
    id: 'networked_container',
    appliesTo: executingActions,
    description: 'a container with network access',
    match: 'any',
    when: [
      { type: 'present_and_not', path: 'network', not: 'none' },
      { type: 'text', pattern: String.raw`--network[= ](?!none\b)\S+|--net[= ]host` },
    ],
  },
  {
    id: 'foreign_rows_write',
    description: "a write aimed at another agent's rows",
    appliesTo: [
      '*.add',
      '*.update',
      '*.delete',
      '*.status',
      '*.set',
      '*.write',
      '*.insert',
      'notes.send',
      'messages.send',
    ],
    match: 'any',
    when: [
      { type: 'other_agent', path: 'agentId' },
      { type: 'other_agent', path: 'agent_id' },
    ],
  },
]);

interface DangerFlag {
  rule: string;
  description: string;
}

function glob(pattern: string): RegExp {
  return new RegExp(
    `^${pattern
      .split('*')
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  );
}

function at(args: unknown, path: string): unknown {
  let v: unknown = args;
  for (const k of path.split('.')) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[k];
  }
  return v;
}

function strings(v: unknown, out: string[] = [], depth = 0): string[] {
  if (depth > 8) return out;
  if (typeof v === 'string') out.push(v);
  else if (Array.isArray(v)) {
    if (v.every((x) => typeof x === 'string')) out.push(v.join(' ')); // an argv reads as one command line
    for (const x of v) strings(x, out, depth + 1);
  } else if (v && typeof v === 'object') for (const x of Object.values(v)) strings(x, out, depth + 1);
  return out;
}

function holds(c: DangerCondition, a: ProposedAction, texts: string[]): boolean {
  switch (c.type) {
    case 'text': {
      const re = new RegExp(c.pattern, c.flags);
      return texts.some((t) => re.test(t));
    }
    case 'equals':
      return at(a.args, c.path) === c.value;
    case 'present_and_not': {
      const v = at(a.args, c.path);
      return v !== undefined && v !== null && v !== c.not;
    }
    case 'other_agent': {
      const v = at(a.args, c.path);
      return typeof v === 'string' && v !== a.agentId;
    }
  }
}

/** The rules an action trips (empty: safe to run). */
export function checkDanger(action: ProposedAction, rules: readonly DangerRule[] = defaultDangerRules): DangerFlag[] {
  const texts = [action.name, ...strings(action.args)];
  const flags: DangerFlag[] = [];
  for (const r of rules) {
    if (!r.enabled || !r.kinds.includes(action.kind)) continue;
    if (!r.appliesTo.some((p) => glob(p).test(action.name))) continue;
    const hits = r.when.map((c) => holds(c, action, texts));
    if (r.match === 'any' ? hits.some(Boolean) : hits.every(Boolean))
      flags.push({ rule: r.id, description: r.description });
  }
  return flags;
}

/** A deployment's danger-zone configuration (MINDLOOP_DANGER_RULES names a JSON file of this shape). */
const dangerConfigSchema = z.strictObject({
  /** Default rules to turn off, by id. */
  disable: z.array(z.string().min(1)).default([]),
  /** Rules to add, or to replace a default of the same id. */
  add: z.array(z.unknown()).default([]),
});

/** Parse a configuration (JSON text): the rules in force, or an Error naming each bad field. */
export function parseDangerConfig(text: string): DangerRule[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`danger rules: not JSON (${(err as Error).message})`);
  }
  const c = dangerConfigSchema.safeParse(json);
  const issues = (e: z.ZodError, prefix: string) => formatIssues(e, '(config)', { under: prefix });
  if (!c.success) throw new Error(`danger rules: ${issues(c.error, '')}`);
  const added = dangerRulesSchema.safeParse(c.data.add);
  if (!added.success) throw new Error(`danger rules: ${issues(added.error, 'add')}`);
  for (const r of added.data) for (const w of r.when) if (w.type === 'text') new RegExp(w.pattern, w.flags); // a bad pattern fails here, not at check time
  const known = new Set([...defaultDangerRules.map((r) => r.id), ...added.data.map((r) => r.id)]);
  const unknown = c.data.disable.filter((id) => !known.has(id));
  if (unknown.length)
    throw new Error(
      `danger rules: disable: unknown rule id(s) ${unknown.join(', ')} (known: ${[...known].join(', ')})`,
    );
  return configureDangerRules(c.data);
}

/**
 * The default rules with a deployment's configuration applied: `disable` turns rules off by
 * id, `add` appends (or replaces by id) rules given as JSON. Invalid configuration throws.
 */
export function configureDangerRules(config: { disable?: string[]; add?: unknown[] } = {}): DangerRule[] {
  const added = dangerRulesSchema.parse(config.add ?? []);
  const off = new Set(config.disable ?? []);
  const byId = new Map(defaultDangerRules.map((r) => [r.id, r]));
  for (const r of added) byId.set(r.id, r);
  return [...byId.values()].map((r) => (off.has(r.id) ? { ...r, enabled: false } : r));
}
