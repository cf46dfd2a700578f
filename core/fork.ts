/**
 * Successor forks, the pure part: the workflow input (zod), the canonical form of a
 * patch (its sha256 is `patch_hash`), budgets and their defaults, and the rules that turn an
 * evaluation into a verdict. No I/O, no clock; the workflow and the activities both import it.
 */
import { z } from 'zod';
import { abstractsStrategySchema, type AbstractQuality } from './abstracts.js';
import { agentIdSchema } from './ids.js';
import { lfRound } from './lifeforce.js';
import { lexicalSimilarity, noveltyFromSimilarity } from './novelty.js';

/** A fork id is a business key (`fork/<id>`); its copy lives under agent id `fk.<id>` (≤ 64 chars). */
export const forkIdSchema = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_.-]{0,60}$/,
    'letters, digits, ".", "-" and "_", starting with a letter or digit, at most 61 characters',
  );
export const forkAgentIdOf = (forkId: string) => `fk.${forkId}`;

const nonEmpty = (max: number) => z.string().trim().min(1).max(max);

/** An architecture patch: config constants, the system prompt, the abstracts strategy, or a tool implementation. */
export const forkPatchSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('config'),
    values: z.record(nonEmpty(64), z.json()).refine((v) => Object.keys(v).length > 0, 'at least one key'),
  }),
  z.strictObject({
    kind: z.literal('prompt'),
    promptKind: z.enum(['short', 'full']).default('full'),
    content: nonEmpty(100_000),
  }),
  z.strictObject({
    kind: z.literal('strategy'),
    target: z.literal('abstracts').default('abstracts'),
    strategy: abstractsStrategySchema,
  }),
  z.strictObject({
    kind: z.literal('tool'),
    tool: nonEmpty(100),
    /** ES module source of the new implementation (runs only in the sandbox). */
    implementation: nonEmpty(200_000),
    /** ES module run with `node` in the sandbox next to `tool.mjs`; exit 0 = pass. */
    tests: nonEmpty(200_000),
  }),
]);
export type ForkPatch = z.output<typeof forkPatchSchema>;

/** How the fork is evaluated. */
export const forkEvaluationSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    /** Replay the agent's last N responses through the abstracts pipeline, parent vs patched. */
    kind: z.literal('abstracts_replay'),
    lastN: z.number().int().min(1).max(10_000).default(60),
    /** Responses per abstract (a window of the replay). */
    window: z.number().int().min(1).max(500).default(10),
    /** Also ask the fork's `validator` model to rate each patched abstract (costs model money). */
    judge: z.boolean().default(false),
  }),
  /** Run the patched tool's tests in the sandbox. */
  z.strictObject({ kind: z.literal('tool_tests') }),
  /** Config/prompt patches: re-run the agent's last N contexts through the patched prompt/params and compare with the recorded replies. */
  z.strictObject({ kind: z.literal('context_replay'), lastN: z.number().int().min(1).max(50).default(5) }),
]);
export type ForkEvaluation = z.output<typeof forkEvaluationSchema>;

/** Defaults: 1 h wall, $5 model cost, 10 GB disk, 2 CPU cores. */
export const forkBudgetDefaults = { wallMs: 3_600_000, costUsd: 5, diskBytes: 10 * 1024 ** 3, cpus: 2 } as const;
export const forkBudgetSchema = z
  .strictObject({
    wallMs: z
      .number()
      .int()
      .min(1)
      .max(7 * 24 * 3_600_000)
      .default(forkBudgetDefaults.wallMs),
    costUsd: z.number().min(0).max(10_000).default(forkBudgetDefaults.costUsd),
    diskBytes: z
      .number()
      .int()
      .min(1024 * 1024)
      .max(1024 ** 4)
      .default(forkBudgetDefaults.diskBytes),
    /** CPU cores: a throttle (CFS quota) on sandboxed code, never a breach by itself. */
    cpus: z.number().min(0.1).max(64).default(forkBudgetDefaults.cpus),
    /**
     * CPU time, seconds, that sandboxed code may use (RLIMIT_CPU of each process): running out
     * ends the run as REJECT `budget_exceeded: cpu`. Unset: the sandbox's wall time × `cpus`
     * (see toolRunBudget), which the throttle alone already bounds.
     */
    cpuSeconds: z
      .number()
      .int()
      .min(1)
      .max(7 * 24 * 3600 * 64)
      .optional(),
    /** LF carved from the parent's budget as `fork:<id>`; unset: `costUsd` at the price of a dollar in LF. */
    lifeforce: z.number().min(0).max(1e9).optional(),
  })
  .default(forkBudgetDefaults);
export type ForkBudgetLimits = z.output<typeof forkBudgetSchema>;

/** The LF a fork's budget asks of its parent: `lifeforce`, else `costUsd` × `lfPerUsd`. */
export function forkLifeforce(budget: Pick<ForkBudgetLimits, 'costUsd' | 'lifeforce'>, lfPerUsd: number): number {
  return budget.lifeforce ?? lfRound(budget.costUsd * lfPerUsd);
}

/** What one sandbox run (a tool_tests evaluation) may be given at most, whatever the fork's budget. */
export const toolRunCaps = { wallMs: 600_000, diskBytes: 256 * 1024 ** 2 } as const;

const bytes = (b: number) =>
  b >= 1024 ** 3 ? `${+(b / 1024 ** 3).toFixed(2)} GiB` : `${+(b / 1024 ** 2).toFixed(2)} MiB`;

/**
 * The sandbox budget of a tool_tests run: the fork's budget under the sandbox caps
 * (toolRunCaps), with `cpuSeconds` passed through (default: capped wall seconds × cpus). Each
 * cap that lowered the fork's budget is a caveat of the verdict, never silent.
 */
export function toolRunBudget(budget: ForkBudgetLimits): {
  budget: { wallMs: number; cpus: number; diskBytes: number; cpuSeconds: number };
  caveats: string[];
} {
  const wallMs = Math.min(budget.wallMs, toolRunCaps.wallMs);
  const diskBytes = Math.min(budget.diskBytes, toolRunCaps.diskBytes);
  const cpuSeconds = budget.cpuSeconds ?? Math.max(1, Math.ceil((wallMs / 1000) * budget.cpus));
  const caveats: string[] = [];
  if (wallMs < budget.wallMs)
    caveats.push(
      `sandbox cap: the tool tests ran with ${wallMs / 1000} s of wall time, not the budget's ${budget.wallMs / 1000} s`,
    );
  if (diskBytes < budget.diskBytes)
    caveats.push(
      `sandbox cap: the tool tests had ${bytes(diskBytes)} of disk, not the budget's ${bytes(budget.diskBytes)}`,
    );
  return { budget: { wallMs, cpus: budget.cpus, diskBytes, cpuSeconds }, caveats };
}

export const successorForkInputSchema = z.strictObject({
  agentId: agentIdSchema,
  /** Default: the workflow id without its `fork/` prefix. */
  forkId: forkIdSchema.optional(),
  patch: forkPatchSchema,
  evaluation: forkEvaluationSchema,
  budget: forkBudgetSchema,
  /** How long an APPROVE waits for the human gate before it lapses (not applied). Default 24 h. */
  approvalDeadlineMs: z
    .number()
    .int()
    .min(1)
    .max(30 * 24 * 3_600_000)
    .default(24 * 3_600_000),
  /** Set on the verifier: the fork whose verdict this one audits. */
  auditsForkId: forkIdSchema.optional(),
  /** Start an independent verifier fork (same patch) and compare verdicts. Default false. */
  verify: z.boolean().default(false),
});
export type SuccessorForkInput = z.input<typeof successorForkInputSchema>;
export type SuccessorForkParams = z.output<typeof successorForkInputSchema>;

/** JSON with object keys sorted at every level: the canonical form `patch_hash` is taken of. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

const verdictKinds = ['APPROVE', 'REJECT', 'NEEDS_REVISION'] as const;
export type VerdictKind = (typeof verdictKinds)[number];

export interface VerdictDecision {
  verdict: VerdictKind;
  confidence: number;
  summary: string;
  caveats: string[];
}

type BudgetBreach = 'wall_time' | 'cost' | 'lifeforce' | 'disk' | 'cpu' | 'memory' | 'pids' | 'output';

/** Exceeding any budget terminates the successor: REJECT with the reason. */
export function budgetVerdict(which: BudgetBreach, detail: string): VerdictDecision {
  return {
    verdict: 'REJECT',
    confidence: 1,
    summary: `budget_exceeded: ${which} (${detail})`,
    caveats: ['the evaluation was stopped before it finished'],
  };
}

/** Thresholds of the abstracts rule (exported so the tests and the summary name them). */
const abstractsRule = {
  minSamples: 3,
  coverageGain: 0.05,
  coverageLoss: 0.05,
  maxTokenRatio: 1.1,
  rejectTokenRatio: 1.5,
  noveltySlack: 0.05,
} as const;

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const fmt = (q: AbstractQuality) =>
  `coverage ${pct(q.coverage)}, novelty ${pct(q.novelty)}, ${q.tokens.toFixed(0)} tokens, compression ${q.compressionRatio.toFixed(3)}`;

/**
 * Parent vs patched abstracts over the same windows:
 * - fewer than 3 windows → NEEDS_REVISION (too little evidence);
 * - coverage −5 pts or worse, or tokens ×1.5 or more → REJECT;
 * - coverage +5 pts or better, tokens ≤ ×1.1 and novelty not 5 pts worse → APPROVE;
 * - anything else (no clear gain) → NEEDS_REVISION.
 * Confidence grows with the margin and the number of windows.
 */
export function decideAbstractsVerdict(input: {
  baseline: AbstractQuality;
  candidate: AbstractQuality;
  samples: number;
  judgeRating?: number;
}): VerdictDecision {
  const { baseline: b, candidate: c, samples } = input;
  const r = abstractsRule;
  const dCov = c.coverage - b.coverage;
  const tokenRatio = b.tokens === 0 ? (c.tokens === 0 ? 1 : Infinity) : c.tokens / b.tokens;
  const summary = `${samples} windows; parent: ${fmt(b)}; patched: ${fmt(c)}; Δcoverage ${dCov >= 0 ? '+' : ''}${pct(dCov)}, token ratio ${tokenRatio.toFixed(2)}`;
  const caveats: string[] = ['quality is measured by keyword coverage of ideas/tags, not by a human reader'];
  if (input.judgeRating !== undefined)
    caveats.push(`validator model rated the patched abstracts ${input.judgeRating.toFixed(2)} on −3…+3 (advisory)`);
  const evidence = Math.min(1, samples / 10);
  if (samples < r.minSamples) {
    return {
      verdict: 'NEEDS_REVISION',
      confidence: 0.3,
      summary: `${summary}; too few windows (< ${r.minSamples}) to judge`,
      caveats,
    };
  }
  if (dCov <= -r.coverageLoss || tokenRatio >= r.rejectTokenRatio) {
    const why =
      dCov <= -r.coverageLoss ? `coverage fell by ${pct(-dCov)}` : `token cost grew ×${tokenRatio.toFixed(2)}`;
    return {
      verdict: 'REJECT',
      confidence: round(0.5 + 0.4 * evidence * Math.min(1, Math.max(-dCov, tokenRatio - 1) * 4)),
      summary: `${summary}; ${why}`,
      caveats,
    };
  }
  if (dCov >= r.coverageGain && tokenRatio <= r.maxTokenRatio && c.novelty >= b.novelty - r.noveltySlack) {
    return {
      verdict: 'APPROVE',
      confidence: round(Math.min(0.95, 0.5 + 0.45 * evidence * Math.min(1, dCov * 4))),
      summary: `${summary}; coverage up at no extra token cost`,
      caveats,
    };
  }
  return { verdict: 'NEEDS_REVISION', confidence: 0.5, summary: `${summary}; no clear gain`, caveats };
}

/** Thresholds of the context-replay rule (novelty on 0…100, rating on −3…+3). */
const contextReplayRule = {
  minSamples: 3,
  noveltyGain: 5,
  noveltyLoss: 10,
  ratingLoss: 1,
  ratingSlack: 0.5,
  maxTokenRatio: 1.1,
  rejectTokenRatio: 1.5,
} as const;

/** Novelty (0…100) of a reply against the replies before it: 100 − 100 × the highest lexical similarity. */
export function replyNovelty(reply: string, previous: readonly string[]): number {
  if (previous.length === 0) return 100;
  return noveltyFromSimilarity(Math.max(...previous.map((p) => lexicalSimilarity(reply, p))));
}

export interface ReplaySide {
  /** Mean novelty (0…100) of the replies against the replies before them. */
  novelty: number;
  /** Mean validator rating (−3…+3); undefined when the agent has no validator. */
  rating?: number;
  /** Mean completion tokens per reply. */
  tokens: number;
}

/**
 * The agent's recorded replies (parent) vs the patched pipeline's replies over the same contexts:
 * - fewer than 3 contexts → NEEDS_REVISION;
 * - novelty −10 pts or worse, rating −1 or worse, or tokens ×1.5 or more → REJECT;
 * - novelty +5 pts or better, tokens ≤ ×1.1 and rating not 0.5 worse → APPROVE;
 * - anything else → NEEDS_REVISION (no clear gain).
 */
export function decideContextReplayVerdict(input: {
  parent: ReplaySide;
  candidate: ReplaySide;
  samples: number;
}): VerdictDecision {
  const { parent: p, candidate: c, samples } = input;
  const r = contextReplayRule;
  const dNov = c.novelty - p.novelty;
  const tokenRatio = p.tokens === 0 ? (c.tokens === 0 ? 1 : Infinity) : c.tokens / p.tokens;
  const rated = p.rating !== undefined && c.rating !== undefined;
  const dRating = rated ? c.rating! - p.rating! : 0;
  const side = (s: ReplaySide) =>
    `novelty ${s.novelty.toFixed(1)}, rating ${s.rating === undefined ? 'n/a' : s.rating.toFixed(2)}, ${s.tokens.toFixed(0)} tokens/reply`;
  const sign = (x: number) => (x >= 0 ? '+' : '');
  const summary = `${samples} contexts; parent: ${side(p)}; patched: ${side(c)}; Δnovelty ${sign(dNov)}${dNov.toFixed(1)}, Δrating ${rated ? `${sign(dRating)}${dRating.toFixed(2)}` : 'n/a'}, token ratio ${tokenRatio.toFixed(2)}`;
  const caveats = ['novelty is lexical (word overlap with the replies before), not judged by a human reader'];
  if (!rated) caveats.push('rating n/a: the agent has no validator model, so the replies were not rated');
  const evidence = Math.min(1, samples / 10);
  if (samples < r.minSamples)
    return {
      verdict: 'NEEDS_REVISION',
      confidence: 0.3,
      summary: `${summary}; too few contexts (< ${r.minSamples}) to judge`,
      caveats,
    };
  if (dNov <= -r.noveltyLoss || dRating <= -r.ratingLoss || tokenRatio >= r.rejectTokenRatio) {
    const why =
      dNov <= -r.noveltyLoss
        ? `novelty fell by ${(-dNov).toFixed(1)} points`
        : dRating <= -r.ratingLoss
          ? `rating fell by ${(-dRating).toFixed(2)}`
          : `token cost grew ×${tokenRatio.toFixed(2)}`;
    return { verdict: 'REJECT', confidence: round(0.5 + 0.4 * evidence), summary: `${summary}; ${why}`, caveats };
  }
  if (dNov >= r.noveltyGain && tokenRatio <= r.maxTokenRatio && dRating > -r.ratingSlack) {
    return {
      verdict: 'APPROVE',
      confidence: round(Math.min(0.95, 0.5 + 0.45 * evidence * Math.min(1, dNov / 20))),
      summary: `${summary}; more novel at no extra token cost`,
      caveats,
    };
  }
  return { verdict: 'NEEDS_REVISION', confidence: 0.5, summary: `${summary}; no clear gain`, caveats };
}

/** The sandboxed test run of a tool patch. */
export function decideToolVerdict(run: {
  status: 'ok' | 'error' | 'budget_exceeded';
  exceeded?: string;
  exitCode: number | null;
  stderr: string;
  durationMs: number;
}): VerdictDecision {
  if (run.status === 'budget_exceeded')
    return budgetVerdict((run.exceeded ?? 'cpu') as BudgetBreach, `sandbox run stopped after ${run.durationMs} ms`);
  if (run.status === 'ok' && run.exitCode === 0) {
    return {
      verdict: 'APPROVE',
      confidence: 0.7,
      summary: `tool tests passed in the sandbox in ${run.durationMs} ms`,
      caveats: ['only the tests shipped with the patch were run'],
    };
  }
  const tail = run.stderr.trim().split('\n').slice(-3).join(' | ').slice(0, 500);
  return {
    verdict: 'REJECT',
    confidence: 0.8,
    summary: `tool tests failed in the sandbox (exit ${run.exitCode ?? 'none'})${tail ? `: ${tail}` : ''}`,
    caveats: [],
  };
}

/** A verifier agrees when it reaches the same verdict kind. */
export function auditCaveat(own: VerdictKind, verifier: VerdictKind | undefined): string {
  if (verifier === undefined) return 'verifier: did not finish';
  return verifier === own
    ? `verifier: independent fork agreed (${verifier})`
    : `verifier: independent fork disagreed (${verifier})`;
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
