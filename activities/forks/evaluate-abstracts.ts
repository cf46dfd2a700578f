/**
 * The abstracts evaluation of a fork (`abstracts_replay`): the copy's recent replies digested
 * by the parent's strategy and by the patched one, window by window, measured side by side.
 */
import { and, eq } from 'drizzle-orm';
import {
  makeAbstractDraft,
  meanQuality,
  measureAbstract,
  type AbstractDraft,
  type AbstractQuality,
  type AbstractSource,
  type AbstractsStrategy,
} from '../../core/abstracts.js';
import { forkEvaluationSchema } from '../../core/fork.js';
import { recentSources, strategyOf } from '../../db/queries/abstracts.js';
import { forkSpentUsd } from '../../db/queries/forks.js';
import { abstracts, type Fork, type ForkArtifact } from '../../db/schema/index.js';
import { ErrorType, nonRetryable, parseInput } from '../errors.js';
import { heartbeat } from '../heartbeat.js';
import { costLimits, loadForkWithCopy, ratingOf, writeArtifact, type ForkEnv } from './shared.js';

export interface AbstractsEvaluation {
  samples: number;
  baselineStrategy: AbstractsStrategy;
  candidateStrategy: AbstractsStrategy;
  baseline: AbstractQuality;
  candidate: AbstractQuality;
  judgeRating?: number;
  spentUsd: number;
  /** Set when the model-cost budget ran out during the evaluation. */
  costExceeded?: boolean;
  artifact: ForkArtifact;
}

/** The patched digest stored in the copy (tagged `fork:<strategy>`, so a retry can replace it). */
async function storePatchedDigest(
  { db }: ForkEnv,
  forkAgentId: string,
  strategy: AbstractsStrategy,
  draft: AbstractDraft,
): Promise<void> {
  await db.insert(abstracts).values({
    agentId: forkAgentId,
    title: draft.title,
    summary: draft.summary,
    tags: draft.tags,
    sources: draft.sources,
    strategy: `fork:${strategy}`,
    tickFrom: draft.tickFrom,
    tickTo: draft.tickTo,
    auto: true,
    trigger: 'command',
  });
}

/** The fork's validator model rates how well the digest keeps the window's ideas (−3…+3). */
async function judgeDigest(
  env: ForkEnv,
  fork: Fork,
  forkAgentId: string,
  budgetId: string | undefined,
  w: number,
  win: AbstractSource[],
  digest: AbstractDraft,
): Promise<number | undefined> {
  const reply = await env.llm!.chat({
    agentId: forkAgentId,
    role: 'validator',
    purpose: 'fork_judge',
    workflowId: fork.workflowId ?? undefined,
    idempotencyKey: `fork/${fork.id}/judge/${w}`,
    lifeforce: budgetId ? { budgetId } : undefined,
    messages: [
      {
        role: 'system',
        content:
          'Rate how well the digest keeps the distinct ideas of the replies, from -3 to 3. Answer with the number only.',
      },
      {
        role: 'user',
        content: `Replies:\n${win.map((s) => s.content).join('\n---\n')}\n\nDigest:\n${digest.title}\n${digest.summary}`,
      },
    ],
  });
  return ratingOf(reply.text, /-?\d+(?:\.\d+)?/);
}

/**
 * The demo evaluation: replay the fork's last N responses through the abstracts pipeline
 * with the parent's strategy and the fork's (patched) one, window by window; measure both;
 * store the patched abstracts in the fork's copy; optionally have the fork's validator model
 * rate them (billed to the fork, stopped when the cost budget runs out). Heartbeats per window.
 * `budgetId` (`fork:<id>`): the lifeforce budget the judge's calls are charged to; unset, the
 * copy's own agent budget.
 */
export async function forkEvaluateAbstracts(
  env: ForkEnv,
  input: { forkId: string; budgetId?: string },
): Promise<AbstractsEvaluation> {
  const { db, llm } = env;
  const { fork, forkAgentId } = await loadForkWithCopy(env, input.forkId);
  const evaluation = parseInput('forkEvaluateAbstracts', forkEvaluationSchema, fork.evaluation);
  if (evaluation.kind !== 'abstracts_replay')
    throw nonRetryable(
      ErrorType.InvalidInput,
      `fork ${input.forkId}: evaluation ${evaluation.kind} is not abstracts_replay`,
    );
  const { costBudget, baselineCost } = costLimits(fork);
  const baselineStrategy = await strategyOf(db, fork.agentId);
  const candidateStrategy = await strategyOf(db, forkAgentId);
  const sources = await recentSources(db, forkAgentId, evaluation.lastN);
  const windows: AbstractSource[][] = [];
  for (let i = 0; i < sources.length; i += evaluation.window) windows.push(sources.slice(i, i + evaluation.window));
  const base: AbstractQuality[] = [];
  const cand: AbstractQuality[] = [];
  const ratings: number[] = [];
  const detail: unknown[] = [];
  let costExceeded = false;
  // Made-up abstracts of an earlier attempt are replaced, so a retry measures the same thing.
  await db
    .delete(abstracts)
    .where(
      and(
        eq(abstracts.agentId, forkAgentId),
        eq(abstracts.trigger, 'command'),
        eq(abstracts.strategy, `fork:${candidateStrategy}`),
      ),
    );
  for (const [w, win] of windows.entries()) {
    heartbeat({ window: w });
    const old = makeAbstractDraft(baselineStrategy, win);
    const neu = makeAbstractDraft(candidateStrategy, win);
    const qo = measureAbstract(old, win);
    const qn = measureAbstract(neu, win);
    base.push(qo);
    cand.push(qn);
    await storePatchedDigest(env, forkAgentId, candidateStrategy, neu);
    let rating: number | undefined;
    if (evaluation.judge && llm && !costExceeded) {
      rating = await judgeDigest(env, fork, forkAgentId, input.budgetId, w, win, neu);
      if (rating !== undefined) ratings.push(rating);
      if ((await forkSpentUsd(db, forkAgentId, baselineCost)) > costBudget) costExceeded = true;
    }
    detail.push({
      window: w,
      ticks: [old.tickFrom, old.tickTo],
      parent: { ...old, quality: qo },
      patched: { ...neu, quality: qn },
      rating,
    });
    if (costExceeded) break;
  }
  const spent = await forkSpentUsd(db, forkAgentId, baselineCost);
  const result = {
    samples: base.length,
    baselineStrategy,
    candidateStrategy,
    baseline: meanQuality(base),
    candidate: meanQuality(cand),
    judgeRating: ratings.length ? ratings.reduce((a, b) => a + b, 0) / ratings.length : undefined,
    spentUsd: spent,
    costExceeded: costExceeded || spent > costBudget ? true : undefined,
  };
  const artifact = await writeArtifact(env, input.forkId, 'evaluation.json', {
    forkId: input.forkId,
    patchHash: fork.patchHash,
    ...result,
    windows: detail,
  });
  return { ...result, artifact };
}
