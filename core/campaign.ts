/**
 * Campaigns as data: the input schema `campaignWorkflow` validates (also what the
 * Temporal UI's JSON start form must match), and the deterministic checkpoint criteria used
 * when a phase names no LLM validator. Pure: the workflow and the activities both import it.
 */
import { z } from 'zod';
import { agentIdPattern, agentIdSchema } from './ids.js';
import { lfRound } from './lifeforce.js';
import { readPath } from './values.js';

/** Workflow types a campaign task of kind `workflow` may start as a child. */
const campaignChildWorkflows = ['campaignWorkflow', 'toolGenerationWorkflow'] as const;

const name = z.string().trim().min(1).max(120);

/** A check on one task's result: `path` is a dot path into the JSON the task returned. */
const expectationSchema = z.strictObject({
  task: name,
  path: z.string().trim().min(1).max(200),
  equals: z.unknown().optional(),
  exists: z.boolean().optional(),
});

const checkpointSchema = z.strictObject({
  /** An LLM validator (`validator` role rows of the agent, or one row by id); none = criteria only. */
  validator: z
    .strictObject({
      role: z.literal('validator').default('validator'),
      registryId: z.number().int().positive().optional(),
    })
    .optional(),
  criteria: z
    .strictObject({
      /** What the phase must achieve, in words (the LLM validator reads it). */
      description: z.string().trim().max(4000).optional(),
      /** At least this many tasks succeeded (default: all of them). */
      minSucceeded: z.number().int().min(0).optional(),
      expect: z.array(expectationSchema).max(50).default([]),
    })
    .default({ expect: [] }),
});
export type Checkpoint = z.infer<typeof checkpointSchema>;

const campaignTaskSchema = z
  .strictObject({
    name,
    kind: z.enum(['activity', 'workflow']).default('activity'),
    /** A task type of the registry (activities/campaign-tasks.ts), or a child workflow type. */
    type: z.string().trim().min(1).max(120),
    args: z.record(z.string(), z.unknown()).default({}),
    /**
     * Undo for this task when the campaign is cancelled or fails: a task type run as an activity
     * (also for a task that was still running when cancelled). Without it, an activity task uses
     * its type's own compensate; a child workflow task is only cancelled (a sub-campaign then
     * undoes its own work) and a completed child is reported as not undone.
     */
    compensation: z
      .strictObject({ type: z.string().trim().min(1).max(120), args: z.record(z.string(), z.unknown()).default({}) })
      .optional(),
  })
  .refine((t) => t.kind === 'activity' || (campaignChildWorkflows as readonly string[]).includes(t.type), {
    message: `a workflow task's type must be one of: ${campaignChildWorkflows.join(', ')}`,
    path: ['type'],
  });

const campaignPhaseSchema = z
  .strictObject({
    name,
    /** The kind of phase (research, build, verify…): `phase_success` learnings are keyed by it. */
    type: z.string().trim().min(1).max(64),
    objectives: z.array(z.string().trim().min(1).max(1000)).max(50).default([]),
    tasks: z.array(campaignTaskSchema).min(1).max(100),
    checkpoint: checkpointSchema.default({ criteria: { expect: [] } }),
  })
  .refine((p) => new Set(p.tasks.map((t) => t.name)).size === p.tasks.length, {
    message: 'task names must be unique within a phase',
    path: ['tasks'],
  });

const campaignIdSchema = z
  .string()
  .regex(agentIdPattern, 'letters, digits, ".", "-" and "_", starting with a letter or digit, at most 64 characters');

export const campaignInputSchema = z.strictObject({
  /** Must match the workflow id `campaign/<campaignId>`; omitted, it is taken from the workflow id. */
  campaignId: campaignIdSchema.optional(),
  /** The agent the campaign works for (its learnings, notes and diary). */
  agentId: agentIdSchema,
  title: z.string().trim().min(1).max(500),
  /** Shard of the learnings it promotes (default `campaign`). */
  shardType: z.string().trim().min(1).max(64).default('campaign'),
  phases: z.array(campaignPhaseSchema).min(1).max(50),
  /** Undo started work when a task or checkpoint fails (cancellation always compensates). */
  compensateOnFailure: z.boolean().default(true),
  /**
   * What the campaign may spend: `lifeforce` LF, or `costUsd` at the price of a dollar in LF,
   * carved from the agent's budget as `campaign:<id>`. Unset: an unlimited agent gives an
   * unlimited campaign, a limited one a quarter of what it has left.
   */
  budget: z
    .strictObject({ lifeforce: z.number().min(0).max(1e9).optional(), costUsd: z.number().min(0).max(1e6).optional() })
    .optional(),
});
export type CampaignInput = z.input<typeof campaignInputSchema>;
export type ParsedCampaignInput = z.output<typeof campaignInputSchema>;

/**
 * The campaign id of a run, from its input and its workflow id (convention `campaign/<id>`,
 * a business key): the input's id must match the workflow id; an input without one takes
 * it from the workflow id. A child campaign started by an older parent keeps that parent's
 * task id (`<parent workflow id>/p<i>/t<j>`) and must then name its campaignId.
 * Returns the id, or the problems as `field: message` lines for the InvalidInput failure.
 */
export function resolveCampaignId(
  workflowId: string,
  inputCampaignId: string | undefined,
  parentWorkflowId?: string,
): { ok: true; campaignId: string } | { ok: false; fields: string[] } {
  const m = /^campaign\/(.+)$/.exec(workflowId);
  const fromWorkflowId = m && campaignIdSchema.safeParse(m[1]).success ? m[1]! : null;
  const legacyChild =
    parentWorkflowId !== undefined &&
    parentWorkflowId.startsWith('campaign/') &&
    workflowId.startsWith(`${parentWorkflowId}/`);
  if (inputCampaignId === undefined) {
    if (fromWorkflowId) return { ok: true, campaignId: fromWorkflowId };
    return {
      ok: false,
      fields: [`campaignId: required when the workflow id is not campaign/<campaignId> (workflow id '${workflowId}')`],
    };
  }
  if (workflowId === `campaign/${inputCampaignId}` || legacyChild) return { ok: true, campaignId: inputCampaignId };
  return {
    ok: false,
    fields: [
      `campaignId: '${inputCampaignId}' does not match the workflow id '${workflowId}'; start it as campaign/${inputCampaignId} (or omit campaignId to take it from the workflow id)`,
    ],
  };
}

/** The workflow id of a task's child workflow: a sub-campaign gets its own `campaign/<id>`; anything else the task's path. */
export function childWorkflowId(
  parentWorkflowId: string,
  parentCampaignId: string,
  phase: number,
  task: number,
  type: string,
  args: Record<string, unknown>,
): string {
  if (type !== 'campaignWorkflow') return `${parentWorkflowId}/p${phase}/t${task}`;
  const id = typeof args.campaignId === 'string' ? args.campaignId : `${parentCampaignId}.p${phase}.t${task}`;
  return `campaign/${id}`;
}

/** What one task produced, as the checkpoint sees it. */
export interface TaskOutcome {
  name: string;
  type: string;
  ok: boolean;
  result?: unknown;
  error?: string;
}

export interface CheckpointVerdict {
  pass: boolean;
  reason: string;
  by: 'criteria' | 'validator';
}

/** The deterministic checkpoint: enough tasks succeeded and every expectation holds. */
export function checkCriteria(criteria: Checkpoint['criteria'], outcomes: TaskOutcome[]): CheckpointVerdict {
  const succeeded = outcomes.filter((o) => o.ok).length;
  const need = criteria.minSucceeded ?? outcomes.length;
  if (succeeded < need)
    return {
      pass: false,
      reason: `${succeeded} of ${outcomes.length} tasks succeeded, ${need} required`,
      by: 'criteria',
    };
  for (const e of criteria.expect) {
    const o = outcomes.find((x) => x.name === e.task);
    if (!o) return { pass: false, reason: `no task named '${e.task}' in this phase`, by: 'criteria' };
    const r = readPath(o.result, e.path);
    if (e.exists === false) {
      if (r.found) return { pass: false, reason: `${e.task}.${e.path} should not exist`, by: 'criteria' };
      continue;
    }
    if (!r.found) return { pass: false, reason: `${e.task}.${e.path} is missing`, by: 'criteria' };
    if (e.equals !== undefined && JSON.stringify(r.value) !== JSON.stringify(e.equals)) {
      return {
        pass: false,
        reason: `${e.task}.${e.path} is ${JSON.stringify(r.value)}, expected ${JSON.stringify(e.equals)}`,
        by: 'criteria',
      };
    }
  }
  return {
    pass: true,
    reason: `${succeeded}/${outcomes.length} tasks succeeded${criteria.expect.length ? `, ${criteria.expect.length} expectation(s) hold` : ''}`,
    by: 'criteria',
  };
}

/** The `avoid_error` learning's args for a failed task: the type and a normalised error (ids and numbers blanked). */
export function avoidErrorArgs(taskType: string, error: string): { task_type: string; error: string } {
  const normalised = error
    .replace(/\s+/g, ' ')
    .replace(/\b\d+\b/g, 'N')
    .trim()
    .slice(0, 300);
  return { task_type: taskType, error: normalised };
}

/** The LF a campaign's budget asks of its agent: `lifeforce`, else `costUsd` × `lfPerUsd`; null when it names neither. */
export function campaignLifeforce(
  budget: { lifeforce?: number; costUsd?: number } | undefined,
  lfPerUsd: number,
): number | null {
  if (budget?.lifeforce !== undefined) return budget.lifeforce;
  if (budget?.costUsd !== undefined) return lfRound(budget.costUsd * lfPerUsd);
  return null;
}
