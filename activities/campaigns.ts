/**
 * Campaign activities: the campaign and phase rows, task runs and their
 * compensation through the task-type registry, checkpoint validation (an LLM `validator` row
 * or the deterministic criteria), and promotion of campaign learnings.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { and, eq, sql } from 'drizzle-orm';
import { checkCriteria, type Checkpoint, type CheckpointVerdict, type TaskOutcome } from '../core/campaign.js';
import { parseStrictJson } from '../core/strict-json.js';
import type { Db } from '../db/client.js';
import { campaignPhases, campaigns, type Campaign, type CampaignPhase } from '../db/schema/index.js';
import { builtinTaskTypes, parseTaskArgs, type TaskContext, type TaskType } from './campaign-tasks.js';
import { ErrorType, classifiedFailure, nonRetryable } from './errors.js';
import { classifyError, rootMessage } from '../core/failure.js';
import type { LearningSink, PromotedLearning } from './learning-sink.js';
import type { LlmRouter } from './llm/index.js';

/** A learning a campaign promotes: `phase_success` for a completed phase, `avoid_error` for a failed task. */
export type CampaignLearning = Omit<PromotedLearning, 'predicate'> & { predicate: 'phase_success' | 'avoid_error' };

export interface CampaignDeps {
  db: Db;
  llm?: LlmRouter;
  /** Task types by name; default the built-ins (activities/campaign-tasks.ts). */
  taskTypes?: Record<string, TaskType>;
  learn?: LearningSink;
}

export const CampaignTaskFailed = 'CampaignTaskFailed';

export interface CampaignStartedInput {
  campaignId: string;
  agentId: string;
  title: string;
  shardType: string;
  workflowId: string;
  phases: Array<{
    name: string;
    type: string;
    objectives: string[];
    tasks: Array<{ name: string; kind: 'activity' | 'workflow'; type: string; args: Record<string, unknown>; compensation?: { type: string; args: Record<string, unknown> } }>;
    checkpoint: Checkpoint;
  }>;
}

export interface CampaignTaskInput {
  campaignId: string;
  agentId: string;
  /** campaign/<id>/p<i>/t<j> (stable across retries and worker restarts). */
  key: string;
  type: string;
  args: Record<string, unknown>;
}

function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

/** Campaign activities for the `mindloop` queue. */
export function createCampaignActivities(deps: CampaignDeps) {
  const { db } = deps;
  const registry = deps.taskTypes ?? builtinTaskTypes;

  const taskContext = (input: { campaignId: string; agentId: string; key: string }): TaskContext => {
    const ctx = activityContext();
    return {
      db,
      llm: deps.llm,
      agentId: input.agentId,
      campaignId: input.campaignId,
      key: input.key,
      signal: ctx?.cancellationSignal,
      heartbeat: ctx ? (d) => ctx.heartbeat(d) : undefined,
    };
  };

  return {
    /** Validate every task against the registry and upsert the campaign and phase rows (idempotent). */
    async campaignStarted(input: CampaignStartedInput): Promise<{ status: Campaign['status'] }> {
      const problems: string[] = [];
      input.phases.forEach((p, i) =>
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
      if (problems.length) throw nonRetryable(ErrorType.InvalidInput, `campaign ${input.campaignId}: ${problems.join('; ')}`, problems);
      return db.transaction(async (tx) => {
        const [row] = await tx
          .insert(campaigns)
          .values({ id: input.campaignId, agentId: input.agentId, goal: input.title, shardType: input.shardType, status: 'running', workflowId: input.workflowId, startedAt: new Date() })
          .onConflictDoUpdate({
            target: campaigns.id,
            // A restarted campaign (same id, new run) keeps its history; a finished one starts over.
            set: { status: sql`case when ${campaigns.status} in ('running', 'paused', 'compensating') then ${campaigns.status} else 'running' end`, workflowId: input.workflowId, error: null, finishedAt: null },
          })
          .returning({ status: campaigns.status });
        await tx
          .insert(campaignPhases)
          .values(input.phases.map((p, i) => ({ agentId: input.agentId, campaignId: input.campaignId, ordinal: i, name: p.name, objectives: p.objectives, tasks: p.tasks, checkpoint: { ...p.checkpoint, type: p.type } })))
          .onConflictDoNothing();
        return { status: row!.status };
      });
    },

    /** Record the campaign's status (and the phase in progress, or the error). */
    async recordCampaign(input: { campaignId: string; status: Campaign['status']; currentPhase?: number; error?: string | null }): Promise<void> {
      const done = ['completed', 'failed', 'cancelled'].includes(input.status);
      await db
        .update(campaigns)
        .set({
          status: input.status,
          ...(input.currentPhase !== undefined ? { currentPhase: input.currentPhase } : {}),
          ...(input.error !== undefined ? { error: input.error } : {}),
          ...(done ? { finishedAt: new Date() } : {}),
        })
        .where(eq(campaigns.id, input.campaignId));
    },

    /** Record a phase's status, its result (task outcomes, checkpoint verdict) or its error. */
    async recordPhase(input: { campaignId: string; ordinal: number; status: CampaignPhase['status']; result?: Record<string, unknown>; error?: string | null }): Promise<void> {
      const now = new Date();
      await db
        .update(campaignPhases)
        .set({
          status: input.status,
          ...(input.result !== undefined ? { result: input.result } : {}),
          ...(input.error !== undefined ? { error: input.error } : {}),
          ...(input.status === 'running' ? { startedAt: now } : {}),
          ...(['completed', 'failed', 'compensated', 'skipped'].includes(input.status) ? { finishedAt: now } : {}),
        })
        .where(and(eq(campaignPhases.campaignId, input.campaignId), eq(campaignPhases.ordinal, input.ordinal)));
    },

    /** Run one task of the registry; its error (after retries) becomes an `avoid_error` learning. */
    async runCampaignTask(input: CampaignTaskInput): Promise<Record<string, unknown>> {
      const parsed = parseTaskArgs(registry, input.type, input.args);
      if (!parsed.ok) throw nonRetryable(ErrorType.InvalidInput, parsed.reason);
      const ctx = activityContext();
      // Heartbeat the whole run, whatever the task does: a killed worker is noticed within the
      // preset's heartbeatTimeout and the task is retried on another one.
      const beat = ctx ? setInterval(() => ctx.heartbeat({ key: input.key }), 2_000) : undefined;
      try {
        return await registry[input.type]!.run(taskContext(input), parsed.args);
      } catch (err) {
        if (err instanceof ApplicationFailure) throw err;
        if (ctx?.cancellationSignal.aborted) throw err;
        // An outage stays an outage (the campaign waits it out); anything else is the task failing.
        if (classifyError(err) === 'infra') throw classifiedFailure(err);
        throw ApplicationFailure.create({ type: CampaignTaskFailed, message: `${input.type}: ${rootMessage(err)}` });
      } finally {
        clearInterval(beat);
      }
    },

    /**
     * Undo a started task (its own compensate, or the explicit compensation task). Idempotent and
     * keyed by the task's key: a task stopped mid-run (no `result`) is undone if its effect was
     * committed, and undoing one whose effect never happened changes nothing.
     */
    async compensateCampaignTask(input: CampaignTaskInput & { result?: Record<string, unknown>; compensation?: { type: string; args: Record<string, unknown> } }): Promise<{ compensated: boolean; by: string }> {
      const ctx = taskContext(input);
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
    },

    /** The checkpoint: the deterministic criteria, then (when named) the LLM validator's verdict. */
    async validateCheckpoint(input: {
      campaignId: string;
      agentId: string;
      key: string;
      phase: { name: string; type: string; objectives: string[] };
      checkpoint: Checkpoint;
      outcomes: TaskOutcome[];
    }): Promise<CheckpointVerdict> {
      const criteria = checkCriteria(input.checkpoint.criteria, input.outcomes);
      if (!criteria.pass || !input.checkpoint.validator) return criteria;
      if (!deps.llm) throw nonRetryable(ErrorType.Unavailable, 'validateCheckpoint: no LLM router on this worker');
      const prompt = [
        `You validate the checkpoint of phase "${input.phase.name}" (${input.phase.type}) of campaign ${input.campaignId}.`,
        `Objectives:\n${input.phase.objectives.map((o) => `- ${o}`).join('\n') || '(none stated)'}`,
        input.checkpoint.criteria.description ? `Checkpoint: ${input.checkpoint.criteria.description}` : '',
        `Task results (JSON):\n${JSON.stringify(input.outcomes).slice(0, 12_000)}`,
        'Answer with JSON only: {"pass": true|false, "reason": "<one sentence>"}',
      ]
        .filter(Boolean)
        .join('\n\n');
      const r = await deps.llm.chat({
        agentId: input.agentId,
        role: 'validator',
        registryId: input.checkpoint.validator.registryId,
        messages: [{ role: 'user', content: prompt }],
        idempotencyKey: `${input.key}:checkpoint`,
        purpose: 'campaign_checkpoint',
        signal: activityContext()?.cancellationSignal,
      });
      return parseValidatorVerdict(r.text);
    },

    /** Promote a campaign learning into the learning store (reinforces an existing one). */
    async promoteCampaignLearning(input: CampaignLearning): Promise<{ id: number; reinforced?: boolean }> {
      if (!deps.learn) throw nonRetryable(ErrorType.Unavailable, 'no learning store wired on this worker');
      return deps.learn(input);
    },
  };
}

/** Parse the validator's `{"pass": bool, "reason": string}` (code fences tolerated); anything else fails the checkpoint. */
export function parseValidatorVerdict(text: string): CheckpointVerdict {
  const body = text.trim().replace(/^```(?:json)?\s*/i, '').replace(/\s*```$/, '');
  const parsed = parseStrictJson(body);
  if (!parsed.ok) return { pass: false, reason: `validator reply is not JSON (${parsed.message}): ${text.slice(0, 200)}`, by: 'validator' };
  const v = parsed.value as { pass?: unknown; reason?: unknown };
  if (typeof v !== 'object' || v === null || typeof v.pass !== 'boolean') {
    return { pass: false, reason: `validator reply lacks a boolean "pass": ${text.slice(0, 200)}`, by: 'validator' };
  }
  return { pass: v.pass, reason: typeof v.reason === 'string' && v.reason.trim() ? v.reason.trim().slice(0, 500) : v.pass ? 'approved' : 'rejected', by: 'validator' };
}
