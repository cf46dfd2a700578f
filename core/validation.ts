/**
 * Trust-weighted validation: the validator answer parser, the weighted
 * rating with its tie rules, which commands the rating and the ethics policies let run, trust
 * updates against the consensus, and the per-validator statistics the CLI shows.
 */
import { ethicsViolation, policiesForValidators, type CommandFacts, type EthicsPolicy } from './ethics.js';

export type ValidationMode = 'auto_pass' | 'self_validation' | 'normal';

export const universalQuestion =
  "You validate another AI agent's reply. Is it sound, honest, safe and useful, and are its commands appropriate? " +
  'Answer with ONE line: a rating from -3 (harmful or wrong) to +3 (excellent), then " -- " and a comment of at most 100 characters. Example: +2 -- clear plan, safe commands';

/**
 * The question each validator answers: the universal question, the agent's ethics policies
 * (a reply or command that breaks one is harmful), and the reply.
 */
export function validatorQuestion(reply: string, policies: readonly EthicsPolicy[] = []): string {
  const listed = policiesForValidators(policies);
  const ethics = listed
    ? `\n\nThe agent's ethics policies (a reply or command that breaks one is harmful: rate it -3):\n${listed}`
    : '';
  return `${universalQuestion}${ethics}\n\nReply to validate:\n"""\n${reply}\n"""`;
}

type ValidatorAnswer = { ok: true; rating: number; comment: string } | { ok: false; error: string };

/** Parse `+2 -- comment` (first non-empty line; `−` accepted). Never throws. */
export function parseValidatorAnswer(text: string): ValidatorAnswer {
  const line =
    (typeof text === 'string' ? text : '')
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l.length > 0) ?? '';
  const m = /^\**\s*(?:rating\s*[:=]\s*)?([+\-−]?\d+(?:\.\d+)?)\s*\**\s*(?:(?:--|—|–)\s*(.*))?$/i.exec(line);
  if (!m) return { ok: false, error: `expected "<-3..+3> -- comment", got "${line.slice(0, 60)}"` };
  const rating = Number(m[1]!.replace('−', '-'));
  if (!Number.isInteger(rating) || rating < -3 || rating > 3)
    return { ok: false, error: `rating ${m[1]} is not an integer in -3..+3` };
  return { ok: true, rating, comment: (m[2] ?? '').trim().slice(0, 100) };
}

export interface Vote {
  id: number;
  rating: number;
  trust: number;
  /** The agent's own LLM validating itself: minimal weight. */
  self?: boolean;
}

/** The weight of a self-validation relative to its trust. */
const selfWeight = 0.1;

export function validationMode(validators: ReadonlyArray<{ self?: boolean }>): ValidationMode {
  if (validators.length === 0) return 'auto_pass';
  return validators.every((v) => v.self) ? 'self_validation' : 'normal';
}

export interface Aggregate {
  /** Weighted rating −3…+3, rounded to 2 decimals; null when nobody answered. */
  rating: number | null;
  /** Count of votes per rating value −3…+3. */
  distribution: Record<string, number>;
  decidedBy: 'weighted' | 'most_trusted' | 'tie_blocked' | 'no_votes';
  /** Equal-trust tie: no command runs this tick. */
  blocked: boolean;
}

const eps = 1e-9;
const weightOf = (v: Vote) => Math.max(0, v.trust) * (v.self ? selfWeight : 1);

/**
 * Rating = Σ(rᵢ·wᵢ)/Σwᵢ (wᵢ = trust, × selfWeight for self-validation). A tie (positive and
 * negative weight equal) or a zero rating is decided by the most trusted validator; if several
 * share the top trust and disagree, the rating is 0 and commands are blocked.
 */
export function aggregate(votes: readonly Vote[]): Aggregate {
  const distribution: Record<string, number> = {};
  for (let r = -3; r <= 3; r++) distribution[String(r)] = 0;
  for (const v of votes) distribution[String(v.rating)] = (distribution[String(v.rating)] ?? 0) + 1;
  if (votes.length === 0) return { rating: null, distribution, decidedBy: 'no_votes', blocked: false };
  let sw = 0;
  let swr = 0;
  let pos = 0;
  let neg = 0;
  for (const v of votes) {
    const w = weightOf(v);
    sw += w;
    swr += w * v.rating;
    if (v.rating > 0) pos += w;
    if (v.rating < 0) neg += w;
  }
  const weighted = sw > eps ? swr / sw : 0;
  const tie = sw <= eps || Math.abs(weighted) < eps || (pos > eps && Math.abs(pos - neg) < eps);
  if (!tie) return { rating: round2(weighted), distribution, decidedBy: 'weighted', blocked: false };
  const top = Math.max(...votes.map(weightOf));
  const leaders = votes.filter((v) => Math.abs(weightOf(v) - top) < eps);
  const ratings = new Set(leaders.map((v) => v.rating));
  if (ratings.size === 1)
    return { rating: leaders[0]!.rating, distribution, decidedBy: 'most_trusted', blocked: false };
  return { rating: 0, distribution, decidedBy: 'tie_blocked', blocked: true };
}

export { typeMatches } from './ethics.js';

/** A policy as the gate reads it (see core/ethics.ts for the rule language). */
type EthicsRule = EthicsPolicy;

interface CommandGate {
  allowed: string[];
  /** cmd_id → why it may not run. */
  held: Record<string, string>;
}

interface GateOptions {
  /** Facts the activity looked up per cmd_id (the row a command acts on). */
  facts?: Readonly<Record<string, CommandFacts>>;
  /** Commands that delete, run code or change settings: with no validator they wait for a human. */
  destructive?: (type: string) => boolean;
  /** The agent's config opts into running destructive commands with no validator. */
  autoPassDestructive?: boolean;
}

/** Why a destructive command waits under auto_pass (the CLI and the README name the way out). */
export const heldForHuman =
  'held for a human: destructive and no validator is configured (approve with `mindloop unvalidated approve`, or set auto_pass_destructive)';

/**
 * Which commands run: ethics blocks first (whatever the rating), then, under auto_pass, the
 * destructive ones wait for a human unless the agent opted in and the rest run; otherwise a
 * command needs rating ≥ its type's threshold and no tie block.
 */
export function gateCommands(
  commands: ReadonlyArray<{ cmdId: string; type: string; args?: Record<string, unknown> }>,
  v: { mode: ValidationMode; rating: number | null; blocked: boolean },
  minRating: (type: string) => number,
  rules: readonly EthicsRule[] = [],
  o: GateOptions = {},
): CommandGate {
  const gate: CommandGate = { allowed: [], held: {} };
  for (const c of commands) {
    const hit = ethicsViolation(c, rules, o.facts?.[c.cmdId] ?? {});
    if (hit) gate.held[c.cmdId] = `forbidden by ethics policy #${hit.policy.id} "${hit.policy.title}": ${hit.why}`;
    else if (v.mode === 'auto_pass') {
      if (o.destructive?.(c.type) && !o.autoPassDestructive) gate.held[c.cmdId] = heldForHuman;
      else gate.allowed.push(c.cmdId);
    } else if (v.blocked) gate.held[c.cmdId] = 'validators tied at equal trust: commands blocked';
    else if (v.rating === null) gate.held[c.cmdId] = 'no validator answered';
    else if (v.rating >= minRating(c.type)) gate.allowed.push(c.cmdId);
    else gate.held[c.cmdId] = `needs rating ≥ +${minRating(c.type)}, got ${v.rating}`;
  }
  return gate;
}

interface TrustPolicy {
  /** |rating − consensus| above this is a conflict. */
  far: number;
  /** |rating − consensus| at most this regains trust. */
  close: number;
  /** Trust lost per conflict, per point beyond `far`… plus this base. */
  penalty: number;
  /** Trust regained per close answer. */
  recovery: number;
  max: number;
  /** Below this a validator is excluded. */
  exclude: number;
}

export const defaultTrustPolicy: TrustPolicy = {
  far: 2,
  close: 1,
  penalty: 0.15,
  recovery: 0.02,
  max: 1,
  exclude: 0.4,
};

/** New trust after one answer; stays in [0, max]. Far answers lose more the farther they are. */
export function updateTrust(
  trust: number,
  rating: number,
  consensus: number,
  p: TrustPolicy = defaultTrustPolicy,
): number {
  const t = Math.min(p.max, Math.max(0, Number.isFinite(trust) ? trust : 0));
  const d = Math.abs(rating - consensus);
  let next = t;
  if (d > p.far) next = t - p.penalty * (1 + (d - p.far));
  else if (d <= p.close) next = t + p.recovery;
  return Math.round(Math.min(p.max, Math.max(0, next)) * 10_000) / 10_000;
}

export const isExcluded = (trust: number, p: TrustPolicy = defaultTrustPolicy) => trust < p.exclude;

/** One validator's part in one tick, as stored in `llm_recent_responses.validators`. */
export interface ValidatorRecord {
  registryId: number;
  name: string;
  status: 'ok' | 'timeout' | 'error' | 'malformed';
  rating?: number;
  trust: number;
  comment?: string;
  latencyMs?: number;
  self?: boolean;
  /**
   * A peer agent validating with its own model (`registryId` is that model's row, `trust` this
   * agent's trust in the peer, `agent_peers.trust`, which its agreement with the consensus moves).
   */
  peer?: string;
}

export interface ValidatorStats {
  registryId: number;
  name: string;
  asked: number;
  answered: number;
  timeouts: number;
  /** answered / asked. */
  coverage: number;
  /** Share of answers within `close` of the tick's rating. */
  agreement: number;
  meanLatencyMs: number | null;
  /** Mean signed (rating − consensus): > 0 rates higher than the others. */
  drift: number;
}

/** Coverage, agreement, response time and drift per validator over a set of ticks. */
export function validatorStats(
  ticks: ReadonlyArray<{ rating: number | null; validators: readonly ValidatorRecord[] }>,
  close = defaultTrustPolicy.close,
): ValidatorStats[] {
  const by = new Map<
    number,
    {
      name: string;
      asked: number;
      answered: number;
      timeouts: number;
      agree: number;
      compared: number;
      lat: number[];
      dev: number;
    }
  >();
  for (const t of ticks) {
    for (const v of t.validators) {
      const s = by.get(v.registryId) ?? {
        name: v.name,
        asked: 0,
        answered: 0,
        timeouts: 0,
        agree: 0,
        compared: 0,
        lat: [],
        dev: 0,
      };
      s.asked++;
      if (v.status === 'timeout') s.timeouts++;
      if (v.latencyMs !== undefined) s.lat.push(v.latencyMs);
      if (v.status === 'ok' && v.rating !== undefined) {
        s.answered++;
        if (t.rating !== null) {
          s.compared++;
          s.dev += v.rating - t.rating;
          if (Math.abs(v.rating - t.rating) <= close) s.agree++;
        }
      }
      by.set(v.registryId, s);
    }
  }
  return [...by.entries()]
    .sort(([a], [b]) => a - b)
    .map(([registryId, s]) => ({
      registryId,
      name: s.name,
      asked: s.asked,
      answered: s.answered,
      timeouts: s.timeouts,
      coverage: s.asked ? round2(s.answered / s.asked) : 0,
      agreement: s.compared ? round2(s.agree / s.compared) : 0,
      meanLatencyMs: s.lat.length ? Math.round(s.lat.reduce((a, b) => a + b, 0) / s.lat.length) : null,
      drift: s.compared ? round2(s.dev / s.compared) : 0,
    }));
}

function round2(x: number): number {
  return Math.round(x * 100) / 100;
}
