/**
 * Learnings: the predicate allow-list with typed args, the preference
 * pattern keys, the declarative rule table that derives a learning from a signal, and the
 * reinforcement and decay maths. Pure and deterministic: no I/O, no clock (callers pass `now`).
 */
import { formatIssues } from './zod-issues.js';
import { z } from 'zod';

// --- tunables ----------------------------------------------------------------------------------

export const learningDefaults = {
  /** Occurrences of a pattern that make it a signal (three strikes). */
  threshold: 3,
  /** Saving an existing learning adds this to its confidence. */
  reinforceStep: 0.1,
  /** Loading (rehydration, `list`) takes learnings strictly above this. */
  loadAbove: 0.3,
  /** The daily decay multiplies by this… */
  decayFactor: 0.9,
  /** …the confidence of learnings not reinforced for this many days… */
  staleAfterDays: 7,
  /** …and deletes those that fell below this. */
  deleteBelow: 0.1,
  /** Guards: saves per shard per minute, learnings per shard. */
  maxSavesPerMinute: 10,
  maxPerShard: 1000,
} as const;

// --- the allow-list -------------------------------------------------------------------------------

const word = (max: number) => z.string().trim().min(1).max(max);
/** A command type / action name: `diary.add`, `shell.exec`, `*` (any). */
const actionSchema = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .regex(
    /^(\*|[a-z0-9][a-z0-9_.-]*)$/,
    'expected an action like "diary.add" (lowercase letters, digits, _ . -) or "*"',
  );

/** Every predicate a learning may have, with its typed (strict) arguments. */
const learningPredicates = {
  /** A command of `action` (or any, `*`) whose text contains `pattern` needs clarification; `reply` or `*`: a reply whose text contains it has its commands held. */
  avoid_pattern: z.strictObject({ action: actionSchema, pattern: word(200) }),
  /** How replies should be (`concise`), or what to avoid in them. */
  style_preference: z.strictObject({ style: word(100), stance: z.enum(['prefer', 'avoid']) }),
  /** Prefer or avoid a tool / command family. */
  tool_preference: z.strictObject({
    tool: word(64),
    stance: z.enum(['prefer', 'avoid']),
    reason: word(200).optional(),
  }),
  /** A language-specific hint (`go`, `error_handling`). */
  language_hint: z.strictObject({ language: word(32), hint: word(200) }),
  /** Campaigns: a phase type that completed. */
  phase_success: z.strictObject({ phase_type: word(100) }),
  /** Campaigns and command outcomes: a task type and the (normalised) error it failed with. */
  avoid_error: z.strictObject({ task_type: word(100), error: word(300) }),
  /** Ouroboros: a tool the agent wrote, with its capability. */
  generated_tool: z.strictObject({ name: word(64), capability: word(200) }),
  /** Escalations: a nudge — the human's or the oversight's guidance — on a category of problem. */
  nudge: z.strictObject({ category: word(64), hint: word(200) }),
} as const;

type LearningPredicate = keyof typeof learningPredicates;
export const learningPredicateNames = Object.keys(learningPredicates) as [LearningPredicate, ...LearningPredicate[]];

export const shardSchema = z
  .string()
  .trim()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.:/-]*$/, 'expected a shard name (letters, digits, _ . : / -)');

/** The shard an agent's own preference learnings live in. */
export const agentShard = (agentId: string): string => `agent:${agentId}`;

type GuardResult =
  { ok: true; predicate: LearningPredicate; args: Record<string, unknown> } | { ok: false; reason: string };

/** The injection guard: a known predicate and args of its type; the reason names what is wrong. */
export function validateLearning(predicate: string, args: unknown): GuardResult {
  if (!Object.hasOwn(learningPredicates, predicate)) {
    return {
      ok: false,
      reason: `unknown learning predicate '${predicate}' (allowed: ${learningPredicateNames.join(', ')})`,
    };
  }
  const r = learningPredicates[predicate as LearningPredicate].safeParse(args);
  if (!r.success) {
    const issues = formatIssues(r.error, '(args)');
    return { ok: false, reason: `bad args for '${predicate}': ${issues}` };
  }
  return { ok: true, predicate: predicate as LearningPredicate, args: r.data as Record<string, unknown> };
}

// --- reinforcement and decay ----------------------------------------------------------------------

/** Round to 6 decimals so that repeated float steps do not drift (1.0 stays 1.0). */
const round6 = (x: number): number => Math.round(x * 1e6) / 1e6;

/** Confidence after one more save: +0.1, never above 1. */
export function reinforce(confidence: number, step: number = learningDefaults.reinforceStep): number {
  return Math.min(1, round6(confidence + step));
}

/** One decay run for one learning: stale ones are multiplied, those below the floor deleted. */
export function decayStep(
  l: { confidence: number; learnedAt: Date },
  now: Date,
  o: { factor?: number; staleAfterDays?: number; deleteBelow?: number } = {},
): { confidence: number; deleted: boolean; decayed: boolean } {
  const factor = o.factor ?? learningDefaults.decayFactor;
  const staleMs = (o.staleAfterDays ?? learningDefaults.staleAfterDays) * 86_400_000;
  const stale = now.getTime() - l.learnedAt.getTime() > staleMs;
  const confidence = stale ? l.confidence * factor : l.confidence;
  return { confidence, decayed: stale, deleted: confidence < (o.deleteBelow ?? learningDefaults.deleteBelow) };
}

/**
 * The confidence after each of `runs` daily decay runs for a learning never reinforced
 * (learned at day 0, runs at day 1, 2, …); `null` once deleted. The curve: 1.0 for the
 * first 7 days, then 0.9, 0.81, 0.729, … and deleted after it falls below 0.1.
 */
export function decayCurve(
  runs: number,
  o: { factor?: number; staleAfterDays?: number; deleteBelow?: number; start?: number } = {},
): Array<number | null> {
  const day = 86_400_000;
  const learnedAt = new Date(0);
  let c: number | null = o.start ?? 1;
  const out: Array<number | null> = [];
  for (let d = 1; d <= runs; d++) {
    if (c !== null) {
      const s = decayStep({ confidence: c, learnedAt }, new Date(d * day), o);
      c = s.deleted ? null : s.confidence;
    }
    out.push(c);
  }
  return out;
}

// --- preference patterns ---------------------------------------------------------------------------

export const feedbackKinds = ['accept', 'reject'] as const;
export type FeedbackKind = (typeof feedbackKinds)[number];

/** Lowercased, trimmed, whitespace collapsed, at most 200 characters; digits are kept. */
export function normaliseReason(reason: string): string {
  return reason.toLowerCase().replace(/\s+/g, ' ').trim().slice(0, 200).trim();
}

export interface Feedback {
  kind: FeedbackKind;
  /** `diary.add`, `style.concise`, `tool.web_search`, `lang.go`, or `command:<type>` for outcomes. */
  action: string;
  reason?: string;
}

const outcomePrefix = 'command:';

/**
 * The count key: `action:reason` for a rejection with a reason, else
 * `action` (acceptances count the action only). Outcome actions carry a `command:` prefix.
 */
export function patternKey(f: Feedback): string {
  const reason = f.reason === undefined ? '' : normaliseReason(f.reason);
  return f.kind === 'reject' && reason ? `${f.action}:${reason}` : f.action;
}

/** The inverse of `patternKey` for a stored key (actions contain no `:` but the outcome prefix). */
export function parsePatternKey(key: string): { action: string; reason?: string } {
  const skip = key.startsWith(outcomePrefix) ? outcomePrefix.length : 0;
  const i = key.indexOf(':', skip);
  return i < 0 ? { action: key } : { action: key.slice(0, i), reason: key.slice(i + 1) };
}

export const feedbackSchema = z.strictObject({
  kind: z.enum(feedbackKinds),
  action: z.union([actionSchema, z.string().regex(/^command:[a-z0-9][a-z0-9_.-]{0,63}$/, 'expected command:<type>')]),
  reason: z.string().trim().min(1).max(500).optional(),
});

/** An outcome (a command that failed) as feedback: a rejection of `command:<type>` with the error. */
export function outcomeFeedback(commandType: string, error: string): Feedback {
  const reason = error
    .replace(/\s+/g, ' ')
    .replace(/\b\d+\b/g, 'N')
    .trim()
    .slice(0, 200);
  return { kind: 'reject', action: `${outcomePrefix}${commandType.toLowerCase()}`, reason: reason || 'error' };
}

// --- the rule table ---------------------------------------------------------------------------------

/**
 * One row of the rule table: when a pattern of `kind` whose action matches `action` (a
 * regular expression with named groups) reaches the threshold, derive `predicate` with
 * `args` — templates where `$action`, `$reason` and `$<group>` are substituted. The first
 * matching row wins; `requiresReason` rows skip keys without a reason.
 */
interface PreferenceRule {
  id: string;
  kind: FeedbackKind;
  action: RegExp;
  requiresReason: boolean;
  predicate: LearningPredicate;
  args: Record<string, string>;
  explain: string;
}

export const preferenceRules: readonly PreferenceRule[] = [
  {
    id: 'outcome-error',
    kind: 'reject',
    action: /^command:(?<type>.+)$/,
    requiresReason: true,
    predicate: 'avoid_error',
    args: { task_type: 'command:$type', error: '$reason' },
    explain: 'a command type that failed the same way N times: remember the error',
  },
  {
    id: 'style-accept',
    kind: 'accept',
    action: /^style\.(?<style>.+)$/,
    requiresReason: false,
    predicate: 'style_preference',
    args: { style: '$style', stance: 'prefer' },
    explain: 'a style the user accepted N times is preferred',
  },
  {
    id: 'style-reject',
    kind: 'reject',
    action: /^style\.(?<style>.+)$/,
    requiresReason: false,
    predicate: 'style_preference',
    args: { style: '$style', stance: 'avoid' },
    explain: 'a style the user rejected N times is avoided',
  },
  {
    id: 'tool-accept',
    kind: 'accept',
    action: /^tool\.(?<tool>.+)$/,
    requiresReason: false,
    predicate: 'tool_preference',
    args: { tool: '$tool', stance: 'prefer' },
    explain: 'a tool the user accepted N times is preferred',
  },
  {
    id: 'tool-reject',
    kind: 'reject',
    action: /^tool\.(?<tool>.+)$/,
    requiresReason: false,
    predicate: 'tool_preference',
    args: { tool: '$tool', stance: 'avoid', reason: '$reason' },
    explain: 'a tool the user rejected N times is avoided',
  },
  {
    id: 'language-hint',
    kind: 'reject',
    action: /^lang\.(?<language>.+)$/,
    requiresReason: true,
    predicate: 'language_hint',
    args: { language: '$language', hint: '$reason' },
    explain: 'a language-specific correction given N times becomes a hint',
  },
  {
    id: 'avoid-pattern',
    kind: 'reject',
    action: /^(\*|[a-z0-9][a-z0-9_.-]*)$/,
    requiresReason: true,
    predicate: 'avoid_pattern',
    args: { action: '$action', pattern: '$reason' },
    explain:
      'an action rejected N times for the same reason: a command of that action containing the reason needs clarification',
  },
];

export interface Derivation {
  rule: string;
  explain: string;
  kind: FeedbackKind;
  pattern: string;
  count: number;
  threshold: number;
}

interface DerivedLearning {
  predicate: LearningPredicate;
  args: Record<string, unknown>;
  derivation: Derivation;
}

/**
 * Evaluate the rule table for one counted pattern: a learning once `count ≥ threshold` and a
 * row matches, else null (below threshold, or no rule — an acceptance of a plain action).
 */
export function derive(
  p: { kind: FeedbackKind; pattern: string; count: number },
  threshold: number = learningDefaults.threshold,
  rules: readonly PreferenceRule[] = preferenceRules,
): DerivedLearning | null {
  if (p.count < threshold) return null;
  const { action, reason } = parsePatternKey(p.pattern);
  for (const rule of rules) {
    if (rule.kind !== p.kind) continue;
    if (rule.requiresReason && !reason) continue;
    const m = rule.action.exec(action);
    if (!m) continue;
    const vars: Record<string, string> = { action, reason: reason ?? '', ...(m.groups ?? {}) };
    const args: Record<string, unknown> = {};
    for (const [k, template] of Object.entries(rule.args)) {
      const v = template.replace(/\$([a-z]+)/g, (_, name: string) => vars[name] ?? '');
      if (v !== '') args[k] = v;
    }
    const checked = validateLearning(rule.predicate, args);
    if (!checked.ok) continue;
    return {
      predicate: checked.predicate,
      args: checked.args,
      derivation: { rule: rule.id, explain: rule.explain, kind: p.kind, pattern: p.pattern, count: p.count, threshold },
    };
  }
  return null;
}

// --- rehydration: context lines and checks ----------------------------------------------------------

export interface LoadedLearning {
  id: number;
  predicate: string;
  args: Record<string, unknown>;
  confidence: number;
}

/** One line per learning for context 2 (the agent reads what it learned and how sure it is). */
export function learningLine(l: LoadedLearning): string {
  const a = l.args as Record<string, string>;
  const c = l.confidence.toFixed(2);
  switch (l.predicate) {
    case 'avoid_pattern':
      if (a.action === 'reply')
        return `#${l.id} avoid "${a.pattern}" in your replies (confidence ${c}; a reply that uses it has its commands held for clarification)`;
      return `#${l.id} avoid "${a.pattern}" in ${a.action === '*' ? 'any reply or command' : `${a.action} commands`} (confidence ${c}; such a command is held for clarification)`;
    case 'style_preference':
      return `#${l.id} ${a.stance} the style "${a.style}" (confidence ${c})`;
    case 'tool_preference':
      return `#${l.id} ${a.stance} the tool ${a.tool}${a.reason ? ` (${a.reason})` : ''} (confidence ${c})`;
    case 'language_hint':
      return `#${l.id} ${a.language}: ${a.hint} (confidence ${c})`;
    case 'phase_success':
      return `#${l.id} phases of type ${a.phase_type} have succeeded (confidence ${c})`;
    case 'avoid_error':
      return `#${l.id} ${a.task_type} failed with: ${a.error} (confidence ${c})`;
    case 'generated_tool':
      return `#${l.id} you wrote the tool ${a.name} for ${a.capability} (confidence ${c})`;
    case 'nudge':
      return `#${l.id} nudged on ${a.category}: ${a.hint} (confidence ${c})`;
    default:
      return `#${l.id} ${l.predicate} ${JSON.stringify(l.args)} (confidence ${c})`;
  }
}

/** The context section (context 2): empty string when there is nothing learned. */
export function learningsSection(ls: readonly LoadedLearning[]): string {
  if (ls.length === 0) return '';
  return ['Learned (from feedback and outcomes):', ...ls.map((l) => `- ${learningLine(l)}`)].join('\n');
}

/**
 * The avoid_pattern check: the learnings a command violates — those whose action is the
 * command's type (or `*`, or a family prefix `diary` for `diary.add`) and whose pattern occurs,
 * case-insensitively, in the command's args or description.
 */
export function avoidPatternViolations(
  cmd: { type: string; args?: unknown; description?: string },
  learned: readonly LoadedLearning[],
): LoadedLearning[] {
  const type = cmd.type.toLowerCase();
  const text = `${JSON.stringify(cmd.args ?? {})} ${cmd.description ?? ''}`.toLowerCase().replace(/\s+/g, ' ');
  return learned.filter((l) => {
    if (l.predicate !== 'avoid_pattern') return false;
    const action = String(l.args.action ?? '').toLowerCase();
    const pattern = String(l.args.pattern ?? '').toLowerCase();
    if (!pattern) return false;
    const actionMatches = action === '*' || action === type || type.startsWith(`${action}.`);
    return actionMatches && text.includes(pattern);
  });
}

/** The actions whose avoid_patterns apply to the reply's own text (its prose, without the blocks). */
export const replyActions: readonly string[] = ['*', 'reply'];

/**
 * The avoid_pattern check on the reply itself: the learnings of action `*` or `reply` whose
 * pattern occurs, case-insensitively, in the reply's text. A hit holds the reply's commands
 * for clarification, as a command that matches does.
 */
export function replyAvoidPatternViolations(replyText: string, learned: readonly LoadedLearning[]): LoadedLearning[] {
  const text = replyText.toLowerCase().replace(/\s+/g, ' ');
  if (!text.trim()) return [];
  return learned.filter((l) => {
    if (l.predicate !== 'avoid_pattern') return false;
    const action = String(l.args.action ?? '').toLowerCase();
    const pattern = String(l.args.pattern ?? '')
      .toLowerCase()
      .replace(/\s+/g, ' ');
    return pattern !== '' && replyActions.includes(action) && text.includes(pattern);
  });
}

// --- feedback in a note -------------------------------------------------------------------------------

/**
 * A user's note tagged `feedback`: `accept <action>` or `reject <action> [reason]` (the reason
 * may follow `:`, `because` or `--reason`). Returns the feedback, or why the text is not one.
 */
export function parseFeedbackNote(text: string): { ok: true; feedback: Feedback } | { ok: false; reason: string } {
  const m = /^\s*(accept|reject)\s+((?:command:)?[^\s:]+)([\s\S]*)$/i.exec(text);
  if (!m) return { ok: false, reason: 'expected "accept <action>" or "reject <action> [reason]"' };
  const kind = m[1]!.toLowerCase() as FeedbackKind;
  const reason = m[3]!
    .trim()
    .replace(/^(?::|because\b|--reason\b)\s*/i, '')
    .replace(/^["']|["']$/g, '')
    .trim();
  const parsed = feedbackSchema.safeParse({ kind, action: m[2]!.toLowerCase(), ...(reason ? { reason } : {}) });
  if (!parsed.success) return { ok: false, reason: formatIssues(parsed.error) };
  return { ok: true, feedback: parsed.data };
}
