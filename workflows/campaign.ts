/**
 * A campaign (SPEC §3, id `campaign/<id>`): a goal run as ordered phases of tasks, each phase
 * closed by a validated checkpoint. Pause/resume by signal, cancel by signal or Temporal
 * cancellation (started work is compensated in reverse order), progress by query. A completed
 * phase promotes a `phase_success` learning for its type; a failed task an `avoid_error` one.
 */
import {
  ApplicationFailure,
  CancellationScope,
  condition,
  defineQuery,
  defineSignal,
  executeChild,
  isCancellation,
  log,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { createCampaignActivities } from '../activities/campaigns.js';
import { avoidErrorArgs, campaignInputSchema, type CampaignInput, type CheckpointVerdict, type TaskOutcome } from '../core/campaign.js';
import { campaignTaskActivity, dbActivity, llmActivity } from './lib/activity-options.js';
import { parseWorkflowInput } from './lib/input.js';
import { agentIdSearchAttribute, campaignIdSearchAttribute, kindSearchAttribute } from './lib/search-attributes.js';

type Activities = ReturnType<typeof createCampaignActivities>;
const db = proxyActivities<Activities>(dbActivity);
const tasks = proxyActivities<Activities>(campaignTaskActivity);
const validator = proxyActivities<Activities>(llmActivity);
// Compensation must not give up: it runs until it succeeds or needs a human.
const undo = proxyActivities<Activities>({ ...campaignTaskActivity, retry: { ...campaignTaskActivity.retry, maximumAttempts: 10 } });

export type CampaignStatus = 'running' | 'paused' | 'compensating' | 'completed' | 'failed' | 'cancelled';

export interface CampaignProgress {
  campaignId: string;
  title: string;
  status: CampaignStatus;
  /** 1-based phase in progress (0 before the first), of `total`. */
  phase: { index: number; total: number; name: string | null };
  /** 1-based task in progress within the phase, of `total`. */
  task: { index: number; total: number; name: string | null };
  completedPhases: string[];
  failedTasks: Array<{ phase: string; task: string; error: string }>;
  lastVerdict: (CheckpointVerdict & { phase: string }) | null;
  compensated: string[];
  error: string | null;
}

export interface CampaignResult {
  campaignId: string;
  status: 'completed' | 'cancelled';
  phases: Array<{ name: string; verdict: CheckpointVerdict }>;
  compensated: string[];
}

/** Pause before the next task (the running one finishes). */
export const pauseCampaignSignal = defineSignal('pause');
export const resumeCampaignSignal = defineSignal('resume');
/** Stop, compensate started work in reverse order, and complete as `cancelled`. */
export const cancelCampaignSignal = defineSignal<[{ reason?: string }?]>('cancel');
/** Phase i/n, task j/m, status, verdicts, failures, compensation so far. */
export const campaignProgressQuery = defineQuery<CampaignProgress>('progress');

export const CampaignFailed = 'CampaignFailed';

interface Done {
  label: string;
  key: string;
  type: string;
  kind: 'activity' | 'workflow';
  args: Record<string, unknown>;
  result?: Record<string, unknown>;
  compensation?: { type: string; args: Record<string, unknown> };
}

class PhaseFailed extends Error {}

/** Run a campaign's phases in order (id `campaign/<id>`). */
export async function campaignWorkflow(rawInput: CampaignInput): Promise<CampaignResult> {
  const input = parseWorkflowInput('campaignWorkflow', campaignInputSchema, rawInput);
  const { campaignId, agentId } = input;
  const info = workflowInfo();
  // Task keys name this run: a restart of the same campaign id later does not collide with it.
  const keyPrefix = `${info.workflowId}/${info.runId}`;

  upsertSearchAttributes([
    { key: campaignIdSearchAttribute, value: campaignId },
    { key: agentIdSearchAttribute, value: agentId },
    { key: kindSearchAttribute, value: 'campaign' },
  ]);

  const progress: CampaignProgress = {
    campaignId,
    title: input.title,
    status: 'running',
    phase: { index: 0, total: input.phases.length, name: null },
    task: { index: 0, total: 0, name: null },
    completedPhases: [],
    failedTasks: [],
    lastVerdict: null,
    compensated: [],
    error: null,
  };
  let paused = false;
  let cancelReason: string | null = null;
  const done: Done[] = [];
  const verdicts: CampaignResult['phases'] = [];
  const work = new CancellationScope();

  setHandler(campaignProgressQuery, () => progress);
  setHandler(pauseCampaignSignal, () => {
    paused = true;
  });
  setHandler(resumeCampaignSignal, () => {
    paused = false;
  });
  setHandler(cancelCampaignSignal, (args) => {
    cancelReason = args?.reason ?? 'cancelled';
    work.cancel();
  });

  await db.campaignStarted({
    campaignId,
    agentId,
    title: input.title,
    shardType: input.shardType,
    workflowId: info.workflowId,
    phases: input.phases,
  });

  try {
    await work.run(runPhases);
  } catch (err) {
    if (isCancellation(err)) {
      await CancellationScope.nonCancellable(async () => {
        progress.error = cancelReason ?? 'cancelled';
        await compensate();
        progress.status = 'cancelled';
        await db.recordCampaign({ campaignId, status: 'cancelled', error: progress.error });
      });
      if (cancelReason !== null) return { campaignId, status: 'cancelled', phases: verdicts, compensated: progress.compensated };
      throw err; // cancelled from outside (Temporal UI, client): the workflow ends cancelled
    }
    const message = err instanceof PhaseFailed ? err.message : err instanceof Error ? err.message : String(err);
    progress.error = message;
    if (input.compensateOnFailure) await compensate();
    progress.status = 'failed';
    await db.recordCampaign({ campaignId, status: 'failed', error: message });
    throw ApplicationFailure.create({
      type: CampaignFailed,
      nonRetryable: true,
      message: `campaign ${campaignId} failed: ${message}`,
      details: [{ failedTasks: progress.failedTasks, compensated: progress.compensated, phases: verdicts }],
    });
  }
  progress.status = 'completed';
  await db.recordCampaign({ campaignId, status: 'completed', currentPhase: input.phases.length, error: null });
  return { campaignId, status: 'completed', phases: verdicts, compensated: [] };

  // ---- steps ------------------------------------------------------------------------------------

  async function runPhases(): Promise<void> {
    for (const [i, phase] of input.phases.entries()) {
      await pausePoint();
      progress.phase = { index: i + 1, total: input.phases.length, name: phase.name };
      progress.task = { index: 0, total: phase.tasks.length, name: null };
      await db.recordCampaign({ campaignId, status: 'running', currentPhase: i + 1 });
      await db.recordPhase({ campaignId, ordinal: i, status: 'running' });

      const outcomes: TaskOutcome[] = [];
      const need = phase.checkpoint.criteria.minSucceeded ?? phase.tasks.length;
      for (const [j, task] of phase.tasks.entries()) {
        await pausePoint();
        progress.task = { index: j + 1, total: phase.tasks.length, name: task.name };
        const key = `${keyPrefix}/p${i}/t${j}`;
        try {
          const result =
            task.kind === 'workflow'
              ? await executeChild(task.type, { workflowId: `${info.workflowId}/p${i}/t${j}`, args: [task.args] })
              : await tasks.runCampaignTask({ campaignId, agentId, key, type: task.type, args: task.args });
          const stored = (result ?? {}) as Record<string, unknown>;
          done.push({ label: `${phase.name}/${task.name}`, key, type: task.type, kind: task.kind, args: task.args, result: stored, compensation: task.compensation });
          outcomes.push({ name: task.name, type: task.type, ok: true, result: stored });
        } catch (err) {
          if (isCancellation(err)) throw err;
          const error = failureMessage(err);
          outcomes.push({ name: task.name, type: task.type, ok: false, error });
          progress.failedTasks.push({ phase: phase.name, task: task.name, error });
          await learn('avoid_error', avoidErrorArgs(task.type, error));
          const failed = outcomes.filter((o) => !o.ok).length;
          if (phase.tasks.length - failed < need) {
            // The checkpoint can no longer pass: the rest are skipped, not run.
            for (const rest of phase.tasks.slice(j + 1)) outcomes.push({ name: rest.name, type: rest.type, ok: false, error: 'skipped: the phase had already failed' });
            break;
          }
        }
      }

      await db.recordPhase({ campaignId, ordinal: i, status: 'checkpoint' });
      const verdict = await validator.validateCheckpoint({
        campaignId,
        agentId,
        key: `${keyPrefix}/p${i}`,
        phase: { name: phase.name, type: phase.type, objectives: phase.objectives },
        checkpoint: phase.checkpoint,
        outcomes,
      });
      progress.lastVerdict = { ...verdict, phase: phase.name };
      verdicts.push({ name: phase.name, verdict });
      if (!verdict.pass) {
        await db.recordPhase({ campaignId, ordinal: i, status: 'failed', result: { outcomes, verdict }, error: verdict.reason });
        throw new PhaseFailed(`phase '${phase.name}' checkpoint failed: ${verdict.reason}`);
      }
      await db.recordPhase({ campaignId, ordinal: i, status: 'completed', result: { outcomes, verdict } });
      progress.completedPhases.push(phase.name);
      await learn('phase_success', { phase_type: phase.type });
    }
  }

  /** Wait here while paused; the pause is recorded so the UI and CLI see it. */
  async function pausePoint(): Promise<void> {
    if (!paused) return;
    progress.status = 'paused';
    await db.recordCampaign({ campaignId, status: 'paused' });
    await condition(() => !paused);
    progress.status = 'running';
    await db.recordCampaign({ campaignId, status: 'running' });
  }

  /** Undo completed tasks, newest first; one that cannot be undone is logged and the rest still run. */
  async function compensate(): Promise<void> {
    progress.status = 'compensating';
    await db.recordCampaign({ campaignId, status: 'compensating' });
    while (done.length) {
      const d = done.pop()!;
      if (d.kind === 'workflow' && !d.compensation) continue; // a child workflow undoes itself only through an explicit compensation
      try {
        const r = await undo.compensateCampaignTask({ campaignId, agentId, key: d.key, type: d.type, args: d.args, result: d.result, compensation: d.compensation });
        if (r.compensated) progress.compensated.push(d.label);
      } catch (err) {
        log.error('compensation failed', { campaignId, task: d.label, error: failureMessage(err) });
        progress.failedTasks.push({ phase: 'compensation', task: d.label, error: failureMessage(err) });
      }
    }
    for (const [i] of input.phases.entries()) {
      if (i < progress.phase.index) await db.recordPhase({ campaignId, ordinal: i, status: 'compensated' });
    }
  }

  /** Promote a learning; the store may refuse (rate limit, guard): logged, never fatal to the campaign. */
  async function learn(predicate: 'phase_success' | 'avoid_error', args: Record<string, unknown>): Promise<void> {
    try {
      await db.promoteCampaignLearning({ agentId, shardType: input.shardType, predicate, args, source: campaignId });
    } catch (err) {
      log.warn('learning not saved', { campaignId, predicate, error: failureMessage(err) });
    }
  }
}

/** The innermost message of an activity / child failure. */
function failureMessage(err: unknown): string {
  let cur: unknown = err;
  let msg = err instanceof Error ? err.message : String(err);
  while (cur instanceof Error && (cur as { cause?: unknown }).cause) {
    cur = (cur as { cause?: unknown }).cause;
    if (cur instanceof Error && cur.message) msg = cur.message;
  }
  return msg;
}
