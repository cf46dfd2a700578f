/**
 * The config/prompt evaluation of a fork (`context_replay`): the copy's last contexts re-run
 * through the patched pipeline with the `agent` model, the recorded replies and the new ones
 * measured alike (novelty, the validator's rating, completion tokens).
 */
import { eq } from 'drizzle-orm';
import { assembleContext, defaultSystemPrompt } from '../../core/context.js';
import { forkEvaluationSchema, replyNovelty, type ReplaySide } from '../../core/fork.js';
import { replyFormatInstructions } from '../../core/reply-parser.js';
import type { AbstractSource } from '../../core/abstracts.js';
import { recentSources } from '../../db/queries/abstracts.js';
import {
  activeSystemPrompt,
  agentConfigMap,
  agentConfigValue,
  forkSpentUsd,
  recentDigests,
  recordedThinkTokens,
} from '../../db/queries/forks.js';
import { agents, type Fork, type ForkArtifact } from '../../db/schema/index.js';
import { ErrorType, nonRetryable, parseInput } from '../errors.js';
import { heartbeat } from '../heartbeat.js';
import type { LlmRouter } from '../llm/index.js';
import { costLimits, loadForkWithCopy, ratingOf, writeArtifact, type ForkEnv } from './shared.js';

export interface ContextReplayEvaluation {
  samples: number;
  promptVersion: number | null;
  params: Record<string, number>;
  parent: ReplaySide;
  candidate: ReplaySide;
  spentUsd: number;
  costExceeded?: boolean;
  artifact: ForkArtifact;
}

/** Replies before a replayed tick that form its context. */
const contextSize = 5;
/** The config keys sent to the model as sampling parameters. */
const samplingKeys = ['temperature', 'topP', 'presencePenalty', 'frequencyPenalty', 'maxTokens'] as const;

type Measured = { reply: string; novelty: number; tokens: number; rating?: number };
type ReplayRow = { tick: number; parent: Measured; patched: Measured & { costUsd: number; replayed: boolean } };

/** What the replay reads from the copy, once. */
interface ReplayInputs {
  fork: Fork;
  forkAgentId: string;
  llm: LlmRouter;
  /** The lifeforce budget the calls are charged to (`fork:<id>`); unset: the copy's own agent budget. */
  lifeforce?: { budgetId: string };
  /** The replayed ticks' recorded replies, oldest first. */
  replayed: AbstractSource[];
  /** The replies before the first replayed tick (its context). */
  before: string[];
  prompt: { content: string; version: number } | undefined;
  params: Record<string, number>;
  hasValidator: boolean;
  agent: { id: string; name: string; identity: unknown } | undefined;
  config: Record<string, unknown>;
  digests: Array<{ id: number; title: string; summary: string }>;
}

/**
 * The stable parts of a tick's context, from the copy (the ephemeral ones — notes, command
 * results, open processes of that tick — are not stored and are left empty).
 */
async function loadReplayInputs(
  env: ForkEnv,
  fork: Fork,
  forkAgentId: string,
  llm: LlmRouter,
  lastN: number,
  budgetId: string | undefined,
): Promise<ReplayInputs> {
  const { db } = env;
  const history = await recentSources(db, forkAgentId, lastN + contextSize);
  const replayed = history.slice(-lastN);
  const before = history.slice(0, history.length - replayed.length).map((s) => s.content);
  const params: Record<string, number> = {};
  for (const key of samplingKeys) {
    const v = await agentConfigValue(db, forkAgentId, key);
    if (typeof v === 'number' && Number.isFinite(v)) params[key] = v;
  }
  const [agent] = await db
    .select({ id: agents.id, name: agents.name, identity: agents.identity })
    .from(agents)
    .where(eq(agents.id, forkAgentId));
  return {
    fork,
    forkAgentId,
    llm,
    ...(budgetId ? { lifeforce: { budgetId } } : {}),
    replayed,
    before,
    prompt: await activeSystemPrompt(db, forkAgentId, 'full'),
    params,
    hasValidator: (await llm.candidates(forkAgentId, 'validator')).length > 0,
    agent,
    config: await agentConfigMap(db, forkAgentId),
    digests: await recentDigests(db, forkAgentId, 5),
  };
}

/** The loop's context for a replayed tick, with the patched agent's own earlier replies in it. */
function replayMessages(inputs: ReplayInputs, tick: number, context: string[]) {
  const { forkAgentId, agent } = inputs;
  return assembleContext({
    agent: {
      id: forkAgentId,
      name: agent?.name ?? forkAgentId,
      identity: (agent?.identity ?? undefined) as Record<string, unknown> | undefined,
    },
    tick,
    now: new Date(0).toISOString(),
    systemPrompt: `${inputs.prompt?.content ?? defaultSystemPrompt}\n\n${replyFormatInstructions}`,
    ethics: [],
    catalogue: '',
    tools: [],
    learnings: [],
    responses: context.map((content, i) => ({
      id: -1 - i,
      tick: tick - context.length + i,
      content,
      tags: [],
      emotions: [],
    })),
    goals: [],
    pinnedTasks: [],
    abstracts: inputs.digests,
    openProcesses: [],
    commandResults: [],
    notes: [],
    notesMode: 'auto',
    config: inputs.config,
    memory: [],
    contextMode: 'standard',
    recentK: contextSize,
  }).messages;
}

/** The fork's validator rates a reply from −3 to +3 (billed to the fork). */
async function rateReply(inputs: ReplayInputs, tick: number, side: string, reply: string): Promise<number | undefined> {
  const r = await inputs.llm.chat({
    agentId: inputs.forkAgentId,
    role: 'validator',
    purpose: 'validate',
    tick,
    workflowId: inputs.fork.workflowId ?? undefined,
    idempotencyKey: `fork/${inputs.fork.id}/replay-rate/${tick}/${side}`,
    lifeforce: inputs.lifeforce,
    messages: [
      {
        role: 'system',
        content: 'Rate the reply from -3 (useless, repetitive) to +3 (new, useful). Answer with the number first.',
      },
      { role: 'user', content: reply },
    ],
  });
  return ratingOf(r.text, /[-+]?\d+(?:\.\d+)?/);
}

const mean = (xs: Array<number | undefined>) => {
  const v = xs.filter((x): x is number => x !== undefined);
  return v.length ? v.reduce((a, b) => a + b, 0) / v.length : undefined;
};

function sideOf(rows: ReplayRow[], k: 'parent' | 'patched'): ReplaySide {
  return {
    novelty: mean(rows.map((r) => r[k].novelty)) ?? 0,
    rating: mean(rows.map((r) => r[k].rating)),
    tokens: mean(rows.map((r) => r[k].tokens)) ?? 0,
  };
}

/** Replay every tick until done or the cost budget runs out; heartbeats per context. */
async function replayTicks(
  env: ForkEnv,
  inputs: ReplayInputs,
  limits: { costBudget: number; baselineCost: number },
): Promise<{ rows: ReplayRow[]; costExceeded: boolean }> {
  const { db } = env;
  const { fork, forkAgentId, llm } = inputs;
  const spent = () => forkSpentUsd(db, forkAgentId, limits.baselineCost);
  const parentTexts = [...inputs.before];
  const candidateTexts = [...inputs.before];
  const rows: ReplayRow[] = [];
  for (const src of inputs.replayed) {
    heartbeat({ tick: src.tick });
    const context = candidateTexts.slice(-contextSize);
    const messages = replayMessages(inputs, src.tick, context);
    const reply = await llm.chat({
      agentId: forkAgentId,
      role: 'agent',
      purpose: 'fork_replay',
      tick: src.tick,
      workflowId: fork.workflowId ?? undefined,
      idempotencyKey: `fork/${fork.id}/replay/${src.tick}`,
      messages,
      params: inputs.params,
      lifeforce: inputs.lifeforce,
    });
    const recordedTokens = await recordedThinkTokens(db, forkAgentId, src.tick);
    const parent: Measured = {
      reply: src.content,
      novelty: replyNovelty(src.content, parentTexts.slice(-contextSize)),
      tokens: recordedTokens ?? Math.ceil(src.content.length / 4),
      rating: undefined,
    };
    const patched: ReplayRow['patched'] = {
      reply: reply.text,
      novelty: replyNovelty(reply.text, context),
      tokens: reply.usage.completionTokens,
      rating: undefined,
      costUsd: reply.costUsd,
      replayed: reply.replayed,
    };
    parentTexts.push(src.content);
    candidateTexts.push(reply.text);
    if (inputs.hasValidator && (await spent()) <= limits.costBudget) {
      parent.rating = await rateReply(inputs, src.tick, 'parent', src.content);
      patched.rating = await rateReply(inputs, src.tick, 'patched', reply.text);
    }
    rows.push({ tick: src.tick, parent, patched });
    if ((await spent()) > limits.costBudget) return { rows, costExceeded: true };
  }
  return { rows, costExceeded: false };
}

/**
 * Config/prompt evaluation: re-run the fork copy's last N contexts through the patched
 * pipeline (rebuilt with the loop's `assembleContext` from the copy's active system prompt,
 * config, abstracts and earlier replies; the config's sampling params are sent too) with the
 * `agent` model (purpose `fork_replay`, one idempotency key per fork + tick), and measure
 * the recorded replies and the new ones alike: novelty against the replies before them,
 * the validator's rating (when the agent has one) and completion tokens. Reads only the
 * copy; stops when the model-cost budget runs out. Heartbeats per context. `budgetId`
 * (`fork:<id>`): the lifeforce budget the calls are charged to; unset, the copy's own.
 */
export async function forkEvaluateContexts(
  env: ForkEnv,
  input: { forkId: string; budgetId?: string },
): Promise<ContextReplayEvaluation> {
  const { fork, forkAgentId } = await loadForkWithCopy(env, input.forkId);
  const evaluation = parseInput('forkEvaluateContexts', forkEvaluationSchema, fork.evaluation);
  if (evaluation.kind !== 'context_replay')
    throw nonRetryable(
      ErrorType.InvalidInput,
      `fork ${input.forkId}: evaluation ${evaluation.kind} is not context_replay`,
    );
  if (!env.llm) throw nonRetryable(ErrorType.InvalidInput, 'context_replay needs the LLM router');
  const limits = costLimits(fork);
  const inputs = await loadReplayInputs(env, fork, forkAgentId, env.llm, evaluation.lastN, input.budgetId);
  const { rows, costExceeded } = await replayTicks(env, inputs, limits);
  const spent = await forkSpentUsd(env.db, forkAgentId, limits.baselineCost);
  const result = {
    samples: rows.length,
    promptVersion: inputs.prompt?.version ?? null,
    params: inputs.params,
    parent: sideOf(rows, 'parent'),
    candidate: sideOf(rows, 'patched'),
    spentUsd: spent,
    costExceeded: costExceeded || spent > limits.costBudget ? true : undefined,
  };
  const artifact = await writeArtifact(env, input.forkId, 'context-replay.json', {
    forkId: input.forkId,
    patchHash: fork.patchHash,
    ...result,
    contexts: rows,
  });
  return { ...result, artifact };
}
