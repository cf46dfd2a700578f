/**
 * Ethics policies that forbid by meaning. A policy keeps its human text (title, rule,
 * rationale), which the validators read, and carries deterministic, auditable rules over a
 * command's type AND args (and facts the activity looked up about the row the command acts
 * on), which block a command whatever its rating:
 *
 *   { "types": ["diary.delete"], "when": { "target": "source", "equals": "user" } }
 *   { "types": ["shell"], "hostsOutside": ["localhost", "127.0.0.1"] }
 *   { "types": ["config.set"], "when": [{ "arg": "key", "in": ["delay_ms"] }, { "arg": "value", "equals": 0 }] }
 *
 * Pure: the activity loads the policies and the facts, then asks `ethicsViolation`.
 */
import { formatIssues } from './zod-issues.js';
import { clipText } from './sanitize.js';
import { readPath } from './values.js';
import { z } from 'zod';

const scalar = z.union([z.string().max(500), z.number(), z.boolean(), z.null()]);

/** Facts about the row a command acts on (its `id` arg) that the activity can look up. */
const targetFacts = ['exists', 'source', 'pinned', 'tags', 'priority', 'title', 'status'] as const;
type TargetFact = (typeof targetFacts)[number];

/** A regex a rule may carry: it must compile, and stay short (policies are data, not code). */
const regexSource = z
  .string()
  .min(1)
  .max(200)
  .refine((s) => {
    try {
      new RegExp(s, 'iu');
      return true;
    } catch {
      return false;
    }
  }, 'not a valid regular expression');

const operators = ['equals', 'in', 'contains', 'matches'] as const;

/**
 * One condition: what it reads (`arg`: a dot path into the command's args; `target`: a fact
 * about the row the command acts on), one operator, and `not` to negate it.
 */
const ruleConditionSchema = z
  .strictObject({
    arg: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$/, 'a dot path into the args, e.g. "key" or "args.url"')
      .max(100)
      .optional(),
    target: z.enum(targetFacts).optional(),
    equals: scalar.optional(),
    in: z.array(scalar).min(1).max(100).optional(),
    /** A string that contains this text (case-insensitive), or a list that has this item. */
    contains: scalar.optional(),
    matches: regexSource.optional(),
    not: z.boolean().optional(),
  })
  .refine((c) => (c.arg === undefined) !== (c.target === undefined), { message: 'give exactly one of arg, target' })
  .refine((c) => operators.filter((o) => c[o] !== undefined).length === 1, {
    message: `give exactly one of ${operators.join(', ')}`,
  });
type RuleCondition = z.infer<typeof ruleConditionSchema>;

/** A host name, an IP literal, or `*.domain` for a domain and its subdomains. */
const hostPattern = z
  .string()
  .trim()
  .toLowerCase()
  .min(1)
  .max(253)
  .regex(/^(\*\.)?[a-z0-9_.:[\]-]+$/, 'a host name, an IP or *.domain');

/**
 * A rule matches a command when its type matches one of `types`, every `when` condition holds,
 * and (with `hostsOutside`) the command reaches a network host not in that allow-list.
 */
export const policyRuleSchema = z
  .strictObject({
    types: z.array(z.string().trim().min(1).max(100)).min(1).max(50),
    /** One condition or a list (all must hold); read as a list. */
    when: z
      .preprocess((v) => (v !== undefined && !Array.isArray(v) ? [v] : v), z.array(ruleConditionSchema).min(1).max(10))
      .optional(),
    hostsOutside: z.array(hostPattern).max(100).optional(),
  })
  .refine((r) => r.when !== undefined || r.hostsOutside !== undefined, {
    message: 'give when or hostsOutside (a rule on the type alone belongs in forbids)',
  });
export type PolicyRule = z.infer<typeof policyRuleSchema>;
/** A rule as written (and stored): `when` may be one condition or a list. */
export type PolicyRuleInput = z.input<typeof policyRuleSchema>;

const policyRulesSchema = z.array(policyRuleSchema).max(20);

/** What the gate and the validators know of one active policy. */
export interface EthicsPolicy {
  id: number;
  title: string;
  /** The policy's text, for the validators. */
  rule?: string;
  rationale?: string | null;
  severity: 'info' | 'warn' | 'block';
  /** Command-type patterns forbidden whatever the args. */
  forbids: readonly string[];
  /** Rules over type and args (already parsed with `parsePolicyRules`). */
  rules?: readonly PolicyRule[];
  /** The stored rules do not parse: the policy blocks every command until it is fixed (fail closed). */
  invalid?: string;
}

/** Facts the activity looked up for one command. `target` is null when the row does not exist. */
export interface CommandFacts {
  target?: Partial<Record<TargetFact, unknown>> | null;
  /**
   * A `tools.mcp` call of an open-world tool (MCP's `openWorldHint`, true unless the server says
   * false): it reaches hosts its arguments need not name, so a host rule that applies to it
   * blocks it unless its arguments name only allowed hosts.
   */
  openWorld?: boolean;
}

/** Parse stored rules (jsonb); the error names the field. */
export function parsePolicyRules(raw: unknown): { ok: true; rules: PolicyRule[] } | { ok: false; error: string } {
  const r = policyRulesSchema.safeParse(raw ?? []);
  if (r.success) return { ok: true, rules: r.data };
  return { ok: false, error: formatIssues(r.error, 'rules', { under: 'rules', max: 3 }) };
}

/** Does a command-type pattern (`shell`, `goals.*`, `*.delete`, `*`) match a type? */
export function typeMatches(pattern: string, type: string): boolean {
  const p = pattern.trim().toLowerCase();
  if (p === '*' || p === type) return true;
  if (!p.includes('*')) return false;
  const re = new RegExp(
    `^${p
      .split('*')
      .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^]*')}$`,
  );
  return re.test(type);
}

/**
 * The types a command answers to: its own, and for a `tools.mcp` call `mcp.<server>.<tool>` too,
 * so a policy may forbid one MCP tool (`mcp.files.write_file`) or a whole server (`mcp.files.*`).
 */
export function typesOf(cmd: { type: string; args?: Record<string, unknown> }): string[] {
  const a = cmd.args ?? {};
  return cmd.type === 'tools.mcp' && typeof a.server === 'string' && typeof a.tool === 'string'
    ? [cmd.type, `mcp.${a.server}.${a.tool}`.toLowerCase()]
    : [cmd.type];
}

const matchesAny = (patterns: readonly string[], types: readonly string[]) =>
  patterns.find((p) => types.some((t) => typeMatches(p, t)));

/** Whether a policy has a host rule that applies to a command of these types: the activity then looks up `openWorld`. */
export function hostRuleApplies(
  policies: readonly EthicsPolicy[],
  cmd: { type: string; args?: Record<string, unknown> },
) {
  const types = typesOf(cmd);
  return policies.some(
    (p) =>
      p.severity === 'block' &&
      (p.rules ?? []).some((r) => r.hostsOutside !== undefined && matchesAny(r.types, types) !== undefined),
  );
}

const conditionsOf = (r: PolicyRule): RuleCondition[] => r.when ?? [];

/** The families whose commands act on a row by `id`, and the table that row lives in. */
const targetTables = {
  diary: 'diary_entries',
  llm_memory: 'llm_memory',
  concepts: 'concepts',
  links: 'links',
  goals: 'goals',
  tasks: 'tasks',
} as const;
export type TargetTable = (typeof targetTables)[keyof typeof targetTables];

/**
 * The row a command acts on, when its family has one and its `id` arg names it. The think
 * activity validates args (an id given as "12" arrives as 12), but a loop that replays a think
 * result recorded before it did passes the model's raw args, so a digit string counts too.
 */
export function targetOf(type: string, args: Record<string, unknown>): { table: TargetTable; id: number } | null {
  const family = type.split('.')[0] ?? '';
  if (!Object.hasOwn(targetTables, family)) return null;
  const raw = args.id;
  const id = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : NaN;
  return Number.isSafeInteger(id) && id > 0 ? { table: targetTables[family as keyof typeof targetTables], id } : null;
}

/** The commands whose target facts some rule of a blocking policy reads: the activity looks these up first. */
export function targetsNeeded(
  commands: ReadonlyArray<{ cmdId: string; type: string; args?: Record<string, unknown> }>,
  policies: readonly EthicsPolicy[],
): Array<{ cmdId: string; table: TargetTable; id: number }> {
  const out: Array<{ cmdId: string; table: TargetTable; id: number }> = [];
  for (const c of commands) {
    const reads = policies.some(
      (p) =>
        p.severity === 'block' &&
        (p.rules ?? []).some(
          (r) => r.types.some((t) => typeMatches(t, c.type)) && conditionsOf(r).some((x) => x.target !== undefined),
        ),
    );
    const t = reads ? targetOf(c.type, c.args ?? {}) : null;
    if (t) out.push({ cmdId: c.cmdId, ...t });
  }
  return out;
}

const norm = (v: unknown) => (typeof v === 'string' ? v.trim().toLowerCase() : v);

function holds(c: RuleCondition, args: Record<string, unknown>, facts: CommandFacts): boolean {
  let value: unknown;
  if (c.arg !== undefined) value = readPath(args, c.arg).value;
  else if (c.target === 'exists') value = facts.target !== null && facts.target !== undefined;
  else value = facts.target?.[c.target!];
  let r: boolean;
  if (c.equals !== undefined) r = norm(value) === norm(c.equals);
  else if (c.in !== undefined) r = c.in.some((x) => norm(x) === norm(value));
  else if (c.contains !== undefined) {
    if (Array.isArray(value)) r = value.some((x) => norm(x) === norm(c.contains));
    else r = typeof value === 'string' && value.toLowerCase().includes(String(c.contains).toLowerCase());
  } else {
    const re = new RegExp(c.matches!, 'iu');
    r = typeof value === 'string' ? re.test(value) : typeof value === 'number' ? re.test(String(value)) : false;
  }
  return c.not ? !r : r;
}

function describeCondition(c: RuleCondition): string {
  const what = c.arg !== undefined ? `args.${c.arg}` : `target.${c.target}`;
  const op =
    c.equals !== undefined
      ? `= ${JSON.stringify(c.equals)}`
      : c.in !== undefined
        ? `in ${JSON.stringify(c.in)}`
        : c.contains !== undefined
          ? `contains ${JSON.stringify(c.contains)}`
          : `matches /${c.matches}/`;
  return `${what} ${c.not ? 'not ' : ''}${op}`;
}

// ---- network hosts ----------------------------------------------------------------------------------

const networkTools = new Set([
  'curl',
  'wget',
  'nc',
  'ncat',
  'netcat',
  'ssh',
  'scp',
  'sftp',
  'rsync',
  'ftp',
  'tftp',
  'telnet',
  'ping',
  'nslookup',
  'dig',
  'host',
  'socat',
  'lynx',
]);
/** Words before the command itself: `VAR=x`, `sudo`, `env`, `timeout 5`, … */
const prefixWord = /^([A-Za-z_]\w*=.*|sudo|env|nohup|exec|command|busybox|timeout|\d+[smh]?)$/;
const urlRe = /\b[a-z][a-z0-9+.-]*:\/\/(?:[^@/\s'"]*@)?(\[[0-9a-f:.]+\]|[^/\s:?#'"`)]+)/giu;
const hostLike = /^(localhost|\[[0-9a-f:.]+\]|(?:\d{1,3}\.){3}\d{1,3}|(?:[a-z0-9_-]+\.)+[a-z][a-z0-9-]*)$/iu;
/** Stands for a host a command computes at run time ($VAR, `…`): never on an allow-list. */
export const unresolvedHost = '(unresolved)';

function stringsOf(v: unknown, out: string[], depth = 0): string[] {
  if (depth > 5 || out.length > 200) return out;
  if (typeof v === 'string') out.push(v);
  else if (Array.isArray(v)) for (const x of v) stringsOf(x, out, depth + 1);
  else if (v && typeof v === 'object') for (const x of Object.values(v)) stringsOf(x, out, depth + 1);
  return out;
}

function shellHosts(command: string): string[] {
  const hosts: string[] = [];
  // A substitution ($(…), `…`) computes its text at run time: it reads as the word `$` where it
  // stands, and its inside as a command of its own.
  const flat = command.replace(/\$\(|`/g, ' $ ; ').replace(/[()]/g, ' ; ');
  for (const segment of flat.split(/[;&|\n]+/)) {
    const words = segment
      .trim()
      .split(/\s+/)
      .map((w) => w.replace(/^['"]+|['"]+$/g, ''));
    const at = words.findIndex((w) => !prefixWord.test(w));
    if (at < 0 || !networkTools.has(words[at]!.split('/').pop() ?? '')) continue;
    for (const w of words.slice(at + 1)) {
      if (w.startsWith('-') || w.includes('://')) continue; // options; URLs are read by urlRe
      if (/[$`]/.test(w)) {
        hosts.push(unresolvedHost);
        continue;
      }
      const host = (w.includes('@') ? w.slice(w.lastIndexOf('@') + 1) : w).replace(/:.*$/, '');
      if (hostLike.test(host)) hosts.push(host);
    }
  }
  return hosts;
}

/**
 * The network hosts a command names: URLs in any string arg, and for `shell` the host
 * arguments of network tools (curl, wget, ssh, nc, …). A host the command computes at run time
 * counts as `(unresolved)`. Lower-cased, deduplicated.
 */
export function networkHosts(type: string, args: Record<string, unknown>): string[] {
  const hosts: string[] = [];
  for (const s of stringsOf(args, [])) for (const m of s.matchAll(urlRe)) hosts.push(m[1]!.replace(/^\[|\]$/g, ''));
  if (type === 'shell' && typeof args.command === 'string') hosts.push(...shellHosts(args.command));
  return [...new Set(hosts.map((h) => h.toLowerCase().replace(/\.$/, '')))];
}

const allowed = (host: string, list: readonly string[]) =>
  list.some((p) =>
    p.startsWith('*.') ? host === p.slice(2) || host.endsWith(p.slice(1)) : host === p.replace(/^\[|\]$/g, ''),
  );

// ---- the check --------------------------------------------------------------------------------------

/** Why this rule forbids this command, or null when it does not apply. */
export function ruleViolation(
  rule: PolicyRule,
  cmd: { type: string; args?: Record<string, unknown> },
  facts: CommandFacts = {},
): string | null {
  if (matchesAny(rule.types, typesOf(cmd)) === undefined) return null;
  const args = cmd.args ?? {};
  const conditions = conditionsOf(rule);
  if (!conditions.every((c) => holds(c, args, facts))) return null;
  const why = conditions.map(describeCondition);
  if (rule.hostsOutside !== undefined) {
    const named = networkHosts(cmd.type, args);
    if (named.length === 0 && facts.openWorld) {
      why.push(`is an open-world tool that names no host (only ${rule.hostsOutside.join(', ') || 'no host'} allowed)`);
      return why.join(' and ');
    }
    const outside = named.filter((h) => !allowed(h, rule.hostsOutside!));
    if (outside.length === 0) return null;
    why.push(
      `reaches ${outside.slice(0, 3).join(', ')} (not in ${rule.hostsOutside.join(', ') || 'the empty allow-list'})`,
    );
  }
  return why.join(' and ');
}

/**
 * The first blocking policy this command breaks, and why: a `forbids` type pattern, a rule
 * over type and args, or a policy whose rules do not parse (fail closed). Severity info/warn
 * policies never block; the validators read them.
 */
export function ethicsViolation(
  cmd: { type: string; args?: Record<string, unknown> },
  policies: readonly EthicsPolicy[],
  facts: CommandFacts = {},
): { policy: EthicsPolicy; why: string } | null {
  for (const p of policies) {
    if (p.severity !== 'block') continue;
    if (p.invalid)
      return { policy: p, why: `its rules do not parse (${p.invalid}): every command is held until they are fixed` };
    const pattern = matchesAny(p.forbids, typesOf(cmd));
    if (pattern !== undefined) return { policy: p, why: `forbids ${pattern}` };
    for (const r of p.rules ?? []) {
      const why = ruleViolation(r, cmd, facts);
      if (why !== null) return { policy: p, why };
    }
  }
  return null;
}

/** The policies as the validators read them: id, title, severity, text and rationale. Empty when none. */
export function policiesForValidators(policies: readonly EthicsPolicy[], maxChars = 3000): string {
  if (policies.length === 0) return '';
  const lines = policies.map(
    (p) =>
      `- #${p.id} "${clipText(p.title, 120)}" (${p.severity})${p.rule ? `: ${clipText(p.rule, 400)}` : ''}${p.rationale ? ` — why: ${clipText(p.rationale, 200)}` : ''}`,
  );
  return clipText(lines.join('\n'), maxChars);
}
