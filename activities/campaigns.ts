/**
 * Campaign activities: the campaign and phase rows, task runs and their
 * compensation through the task-type registry, checkpoint validation (an LLM `validator` row
 * or the deterministic criteria), and promotion of campaign learnings.
 */
import { ApplicationFailure } from '@temporalio/activity';
import {
  campaignLifeforce,
  checkCriteria,
  type Checkpoint,
  type CheckpointVerdict,
  type TaskOutcome,
} from '../core/campaign.js';
import { defaultPrices, type PriceTable } from '../core/lifeforce.js';
import { classifyError, rootMessage } from '../core/failure.js';
import { parseStrictJson } from '../core/strict-json.js';
import type { Db } from '../db/client.js';
import { setCampaignStatus, setPhaseStatus, upsertCampaign } from '../db/queries/campaigns.js';
import type { Campaign, CampaignBudget, CampaignPhase } from '../db/schema/index.js';
import { bindActivities } from './bind.js';
import { builtinTaskTypes, parseTaskArgs, type TaskContext, type TaskType } from './campaign-tasks.js';
import { ErrorType, classifiedFailure, nonRetryable } from './errors.js';
import { activityContext, heartbeat, withHeartbeat } from './heartbeat.js';
import type { LearningSink, PromotedLearning } from './learning-sink.js';
import { LifeforceExhaustedError } from './llm/errors.js';
import type { LlmRouter } from './llm/index.js';

/** A learning a campaign promotes: `phase_success` for a completed phase, `avoid_error` for a failed task. */
export type CampaignLearning = Omit<PromotedLearning, 'predicate'> & { predicate: 'phase_success' | 'avoid_error' };

interface CampaignDeps {
  db: Db;
  llm?: LlmRouter;
  /** Task types by name; default the built-ins (activities/campaign-tasks.ts). */
  taskTypes?: Record<string, TaskType>;
  learn?: LearningSink;
  /** The lifeforce prices (a budget in USD is carved at `lfPerUsd`); default core/lifeforce.ts's. */
  prices?: PriceTable;
}

/** The dependencies as every campaign activity gets them: the task-type registry and the prices resolved. */
type CampaignEnv = CampaignDeps & { registry: Record<string, TaskType>; prices: PriceTable };

const CampaignTaskFailed = 'CampaignTaskFailed';

interface CampaignStartedInput {
  campaignId: string;
  agentId: string;
  title: string;
  shardType: string;
  workflowId: string;
  phases: Array<{
    name: string;
    type: string;
    objectives: string[];
    tasks: Array<{
      name: string;
      kind: 'activity' | 'workflow';
      type: string;
      args: Record<string, unknown>;
      compensation?: { type: string; args: Record<string, unknown> };
    }>;
    checkpoint: Checkpoint;
  }>;
  budget?: CampaignBudget;
}

interface CampaignTaskInput {
  campaignId: string;
  agentId: string;
  /** campaign/<id>/p<i>/t<j> (stable across retries and worker restarts). */
  key: string;
  type: string;
  args: Record<string, unknown>;
  /** The campaign's lifeforce budget, charged for the task's LLM calls; unset: the agent's. */
  budgetId?: string;
}

interface CheckpointInput {
  campaignId: string;
  agentId: string;
  key: string;
  /** The campaign's lifeforce budget, charged for the validator's call; unset: the agent's. */
  budgetId?: string;
  phase: { name: string; type: string; objectives: string[] };
  checkpoint: Checkpoint;
  outcomes: TaskOutcome[];
}

/** What a task type runs with: the worker's dependencies, the task's key, the activity's cancellation and heartbeat. */
function taskContext(
  env: CampaignEnv,
  input: { campaignId: string; agentId: string; key: string; budgetId?: string },
): TaskContext {
  const ctx = activityContext();
  return {
    db: env.db,
    llm: env.llm,
    agentId: input.agentId,
    campaignId: input.campaignId,
    key: input.key,
    ...(input.budgetId ? { lifeforce: { budgetId: input.budgetId } } : {}),
    signal: ctx?.cancellationSignal,
    heartbeat: ctx ? (d) => heartbeat(d, ctx) : undefined,
  };
}

/** The args of every activity task and compensation that the registry refuses, by place. */
function taskProblems(registry: Record<string, TaskType>, phases: CampaignStartedInput['phases']): string[] {
  const problems: string[] = [];
  phases.forEach((p, i) =>
    p.tasks.forEach((t, j) => {
      if (t.kind === 'activity') {
        const r = parseTaskArgs(registry, t.type, t.args);
        if (!r.ok) problems.push(`phases.${i}.tasks.${j} (${t.name}): ${r.reason}`);
      }
      if (t.compensation) {
        const r = parseTaskArgs(registry, t.compensation.type, t.compensation.args);
        if (!r.ok) problems.push(`phases.${i}.tasks.${j}.compensation: ${r.reason}`);
      }
    }),
  );
  return problems;
}

/**
 * Validate every task against the registry and upsert the campaign and phase rows (idempotent).
 * `lifeforce`: the LF its budget asks of the agent at this worker's prices (null: none named).
 */
async function campaignStarted(
  env: CampaignEnv,
  input: CampaignStartedInput,
): Promise<{ status: Campaign['status']; lifeforce: number | null }> {
  const problems = taskProblems(env.registry, input.phases);
  if (problems.length)
    throw nonRetryable(ErrorType.InvalidInput, `campaign ${input.campaignId}: ${problems.join('; ')}`, problems);
  const status = await env.db.transaction((tx) => upsertCampaign(tx, input));
  return { status, lifeforce: campaignLifeforce(input.budget, env.prices.lfPerUsd) };
}

/** Record the campaign's status (and the phase in progress, or the error). */
async function recordCampaign(
  env: CampaignEnv,
  input: { campaignId: string; status: Campaign['status']; currentPhase?: number; error?: string | null },
): Promise<void> {
  await setCampaignStatus(env.db, input);
}

/** Record a phase's status, its result (task outcomes, checkpoint verdict) or its error. */
async function recordPhase(
  env: CampaignEnv,
  input: {
    campaignId: string;
    ordinal: number;
    status: CampaignPhase['status'];
    result?: Record<string, unknown>;
    error?: string | null;
  },
): Promise<void> {
  await setPhaseStatus(env.db, input);
}

/** Run one task of the registry; its error (after retries) becomes an `avoid_error` learning. */
async function runCampaignTask(env: CampaignEnv, input: CampaignTaskInput): Promise<Record<string, unknown>> {
  const parsed = parseTaskArgs(env.registry, input.type, input.args);
  if (!parsed.ok) throw nonRetryable(ErrorType.InvalidInput, parsed.reason);
  // Heartbeat the whole run, whatever the task does: a killed worker is noticed within the
  // preset's heartbeatTimeout and the task is retried on another one.
  return withHeartbeat(
    async (signal) => {
      try {
        return await env.registry[input.type]!.run(taskContext(env, input), parsed.args);
      } catch (err) {
        if (err instanceof ApplicationFailure) throw err;
        if (signal?.aborted) throw err;
        // The campaign's budget cannot cover a call: the campaign pauses for a grant, the task is not failed.
        if (err instanceof LifeforceExhaustedError) throw classifiedFailure(err);
        // An outage stays an outage (the campaign waits it out); anything else is the task failing.
        if (classifyError(err) === 'infra') throw classifiedFailure(err);
        throw ApplicationFailure.create({ type: CampaignTaskFailed, message: `${input.type}: ${rootMessage(err)}` });
      }
    },
    { details: { key: input.key } },
  );
}

/**
 * Undo a started task (its own compensate, or the explicit compensation task). Idempotent and
 * keyed by the task's key: a task stopped mid-run (no `result`) is undone if its effect was
 * committed, and undoing one whose effect never happened changes nothing.
 */
async function compensateCampaignTask(
  env: CampaignEnv,
  input: CampaignTaskInput & {
    result?: Record<string, unknown>;
    compensation?: { type: string; args: Record<string, unknown> };
  },
): Promise<{ compensated: boolean; by: string }> {
  const { registry } = env;
  const ctx = taskContext(env, input);
  if (input.compensation) {
    const parsed = parseTaskArgs(registry, input.compensation.type, input.compensation.args);
    if (!parsed.ok) throw nonRetryable(ErrorType.InvalidInput, parsed.reason);
    await registry[input.compensation.type]!.run({ ...ctx, key: `${input.key}:undo` }, parsed.args);
    return { compensated: true, by: input.compensation.type };
  }
  const t = registry[input.type];
  if (!t?.compensate) return { compensated: false, by: 'nothing to undo' };
  const parsed = parseTaskArgs(registry, input.type, input.args);
  if (!parsed.ok) throw nonRetryable(ErrorType.InvalidInput, parsed.reason);
  await t.compensate(ctx, parsed.args, input.result);
  return { compensated: true, by: `${input.type}.compensate` };
}

/** What the validator model is asked about a phase's checkpoint. */
function checkpointPrompt(input: CheckpointInput): string {
  return [
    `You validate the checkpoint of phase "${input.phase.name}" (${input.phase.type}) of campaign ${input.campaignId}.`,
    `Objectives:\n${input.phase.objectives.map((o) => `- ${o}`).join('\n') || '(none stated)'}`,
    input.checkpoint.criteria.description ? `Checkpoint: ${input.checkpoint.criteria.description}` : '',
    `Task results (JSON):\n${JSON.stringify(input.outcomes).slice(0, 12_000)}`,
    'Answer with JSON only: {"pass": true|false, "reason": "<one sentence>"}',
  ]
    .filter(Boolean)
    .join('\n\n');
}

/** The checkpoint: the deterministic criteria, then (when named) the LLM validator's verdict. */
async function validateCheckpoint(env: CampaignEnv, input: CheckpointInput): Promise<CheckpointVerdict> {
  const criteria = checkCriteria(input.checkpoint.criteria, input.outcomes);
  if (!criteria.pass || !input.checkpoint.validator) return criteria;
  if (!env.llm) throw nonRetryable(ErrorType.Unavailable, 'validateCheckpoint: no LLM router on this worker');
  const r = await env.llm.chat({
    agentId: input.agentId,
    role: 'validator',
    registryId: input.checkpoint.validator.registryId,
    messages: [{ role: 'user', content: checkpointPrompt(input) }],
    idempotencyKey: `${input.key}:checkpoint`,
    purpose: 'campaign_checkpoint',
    lifeforce: input.budgetId ? { budgetId: input.budgetId } : undefined,
    signal: activityContext()?.cancellationSignal,
  });
  return parseValidatorVerdict(r.text);
}

/** Promote a campaign learning into the learning store (reinforces an existing one). */
async function promoteCampaignLearning(
  env: CampaignEnv,
  input: CampaignLearning,
): Promise<{ id: number; reinforced?: boolean }> {
  if (!env.learn) throw nonRetryable(ErrorType.Unavailable, 'no learning store wired on this worker');
  return env.learn(input);
}

/** Campaign activities for the `mindloop` queue. */
export function createCampaignActivities(deps: CampaignDeps) {
  const env: CampaignEnv = {
    ...deps,
    registry: deps.taskTypes ?? builtinTaskTypes,
    prices: deps.prices ?? defaultPrices,
  };
  return bindActivities(env, {
    campaignStarted,
    recordCampaign,
    recordPhase,
    runCampaignTask,
    compensateCampaignTask,
    validateCheckpoint,
    promoteCampaignLearning,
  });
}

/** Parse the validator's `{"pass": bool, "reason": string}` (code fences tolerated); anything else fails the checkpoint. */
export function parseValidatorVerdict(text: string): CheckpointVerdict {
  const body = text
    .trim()
    .replace(/^```(?:json)?\s*/i, '')
    .replace(/\s*```$/, '');
  const parsed = parseStrictJson(body);
  if (!parsed.ok)
    return {
      pass: false,
      reason: `validator reply is not JSON (${parsed.message}): ${text.slice(0, 200)}`,
      by: 'validator',
    };
  const v = parsed.value as { pass?: unknown; reason?: unknown };
  if (typeof v !== 'object' || v === null || typeof v.pass !== 'boolean') {
    return { pass: false, reason: `validator reply lacks a boolean "pass": ${text.slice(0, 200)}`, by: 'validator' };
  }
  return {
    pass: v.pass,
    reason:
      typeof v.reason === 'string' && v.reason.trim()
        ? v.reason.trim().slice(0, 500)
        : v.pass
          ? 'approved'
          : 'rejected',
    by: 'validator',
  };
}
