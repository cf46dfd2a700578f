/**
 * A campaign (id `campaign/<id>`): a goal run as ordered phases of tasks, each phase
 * closed by a validated checkpoint. Pause/resume by signal, cancel by signal or Temporal
 * cancellation (started work is compensated in reverse order), progress by query. A completed
 * phase promotes a `phase_success` learning for its type; a failed task an `avoid_error` one.
 */
import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  ChildWorkflowFailure,
  condition,
  defineQuery,
  defineSignal,
  executeChild,
  isCancellation,
  log,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { createCampaignActivities } from '../activities/campaigns.js';
import type { createLifeforceActivities } from '../activities/lifeforce.js';
import { budgetIds } from '../core/lifeforce.js';
import {
  avoidErrorArgs,
  campaignInputSchema,
  childWorkflowId,
  resolveCampaignId,
  type CampaignInput,
  type CheckpointVerdict,
  type ParsedCampaignInput,
  type TaskOutcome,
} from '../core/campaign.js';
import { campaignTaskActivity, dbActivity, llmActivity, workflowFailover } from './lib/activity-options.js';
import { failureMessage, rideOut, type Degraded } from './lib/infra.js';
import { InvalidInputError, parseWorkflowInput } from './lib/input.js';
import { lifeforceShortfallOf } from './lib/lifeforce.js';
import { agentIdSearchAttribute, campaignIdSearchAttribute, kindSearchAttribute } from './lib/search-attributes.js';
import { campaignCurrentDetails, campaignLifeforcePause, campaignTaskText, handlerText } from './lib/ui-text.js';

type Activities = ReturnType<typeof createCampaignActivities>;
const db = proxyActivities<Activities>(dbActivity);
const ledger = proxyActivities<ReturnType<typeof createLifeforceActivities>>(dbActivity);
const tasks = proxyActivities<Activities>(campaignTaskActivity);
// A cancelled task is awaited until its activity acknowledges (or finishes): only then is it
// compensated, so an effect it commits at the last moment is still undone.
const awaitedTasks = proxyActivities<Activities>({
  ...campaignTaskActivity,
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
});
const validator = proxyActivities<Activities>(llmActivity);
// Compensation must not give up: it runs until it succeeds or needs a human.
const undo = proxyActivities<Activities>({
  ...campaignTaskActivity,
  retry: { ...campaignTaskActivity.retry, maximumAttempts: 10 },
});

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
  /** Started tasks nothing could undo (a completed child workflow that declares no compensation), with why. */
  uncompensated: Array<{ task: string; reason: string }>;
  error: string | null;
  /** A dependency the running task needs is away: what waits, since when, attempts, last error. */
  degraded?: Degraded | null;
  /** Why the campaign paused itself (its lifeforce ran out), until `resume`; null otherwise. */
  pauseReason?: string | null;
  /** The campaign's lifeforce budget once carved from the agent's (absent in runs from before the ledger). */
  lifeforce?: { budgetId: string; carved: number; unlimited: boolean } | null;
}

export interface CampaignResult {
  campaignId: string;
  status: 'completed' | 'cancelled';
  phases: Array<{ name: string; verdict: CheckpointVerdict }>;
  compensated: string[];
  uncompensated?: Array<{ task: string; reason: string }>;
}

/** Pause before the next task (the running one finishes). */
export const pauseCampaignSignal = defineSignal('pause');
export const resumeCampaignSignal = defineSignal('resume');
/**
 * Stop, compensate started work in reverse order (the running task too, once it has stopped),
 * and complete as `cancelled`.
 */
export const cancelCampaignSignal = defineSignal<[{ reason?: string }?]>('cancel');
/** Phase i/n, task j/m, status, verdicts, failures, compensation so far. */
export const campaignProgressQuery = defineQuery<CampaignProgress>('progress');

export const CampaignFailed = 'CampaignFailed';

/** A started task: `running` until it returns, `stopped` when cancelled (it may have committed its effect). */
interface Started {
  label: string;
  key: string;
  type: string;
  kind: 'activity' | 'workflow';
  args: Record<string, unknown>;
  state: 'running' | 'completed' | 'stopped';
  /** A child workflow that ended cancelled: a child campaign compensates its own work on cancel. */
  childCancelled?: boolean;
  result?: Record<string, unknown>;
  compensation?: { type: string; args: Record<string, unknown> };
}

class PhaseFailed extends Error {}

type CampaignPhase = ParsedCampaignInput['phases'][number];

/** Run a campaign's phases in order (id `campaign/<id>`). */
export async function campaignWorkflow(rawInput: CampaignInput): Promise<CampaignResult> {
  const input = parseWorkflowInput('campaignWorkflow', campaignInputSchema, rawInput);
  const info = workflowInfo();
  // v1: the workflow id must be campaign/<campaignId> (or gives the id); started-but-unfinished
  // tasks are compensated too; a sub-campaign runs as campaign/<its id>. Runs begun before keep
  // their old command sequence.
  const v1 = patched('campaign-started-work-v1');
  const resolved = resolveCampaignId(info.workflowId, input.campaignId, info.parent?.workflowId);
  if (!resolved.ok && (v1 || input.campaignId === undefined)) {
    throw ApplicationFailure.create({
      type: InvalidInputError,
      nonRetryable: true,
      message: `campaignWorkflow: invalid input — ${resolved.fields.join('; ')}`,
      details: [resolved.fields],
    });
  }
  const campaignId = resolved.ok ? resolved.campaignId : input.campaignId!;
  // campaign-lifeforce-v1: the campaign spends from its own budget carved from the agent's;
  // runs begun before keep charging the agent's budget directly.
  const budgetId = patched('campaign-lifeforce-v1') ? budgetIds.campaign(campaignId) : null;
  return new CampaignRun(input, campaignId, v1, budgetId).run();
}

/** One campaign run: its progress, the work it started, and its steps, run one after another in a fixed order (replay checks it). */
class CampaignRun {
  readonly info = workflowInfo();
  readonly agentId: string;
  /** Task keys name this run: a restart of the same campaign id later does not collide with it. */
  readonly keyPrefix: string;
  readonly progress: CampaignProgress;
  private paused = false;
  private cancelReason: string | null = null;
  readonly started: Started[] = [];
  private readonly verdicts: CampaignResult['phases'] = [];
  private readonly work = new CancellationScope();
  /** The budget its LLM calls are charged to: its own once carved (the agent's when its own was closed by an earlier run). */
  private chargeTo: string | null = null;

  constructor(
    readonly input: ParsedCampaignInput,
    readonly campaignId: string,
    readonly v1: boolean,
    /** `campaign:<id>`: carved from the agent's budget at the start, closed at the end; null in runs from before the ledger. */
    readonly budgetId: string | null,
  ) {
    this.agentId = input.agentId;
    this.keyPrefix = `${this.info.workflowId}/${this.info.runId}`;
    this.progress = {
      campaignId,
      title: input.title,
      status: 'running',
      phase: { index: 0, total: input.phases.length, name: null },
      task: { index: 0, total: 0, name: null },
      completedPhases: [],
      failedTasks: [],
      lastVerdict: null,
      compensated: [],
      uncompensated: [],
      error: null,
      ...(budgetId ? { pauseReason: null, lifeforce: null } : {}),
    };
  }

  /** Show where the campaign is as the workflow's current details (no command). */
  private show(): void {
    setCurrentDetails(campaignCurrentDetails({ ...this.progress, degradedStep: this.progress.degraded?.step }));
  }

  async run(): Promise<CampaignResult> {
    const { campaignId, agentId, input, progress, v1 } = this;
    upsertSearchAttributes([
      { key: campaignIdSearchAttribute, value: campaignId },
      { key: agentIdSearchAttribute, value: agentId },
      { key: kindSearchAttribute, value: 'campaign' },
    ]);
    this.registerHandlers();
    this.show();

    const started = await db.campaignStarted({
      campaignId,
      agentId,
      title: input.title,
      shardType: input.shardType,
      workflowId: this.info.workflowId,
      phases: input.phases,
      ...(input.budget ? { budget: input.budget } : {}),
    });

    try {
      await this.work.run(async () => {
        if (this.budgetId) await this.openBudget(this.budgetId, started.lifeforce ?? null);
        await this.runPhases();
      });
    } catch (err) {
      if (isCancellation(err)) {
        await CancellationScope.nonCancellable(async () => {
          progress.error = this.cancelReason ?? 'cancelled';
          await compensate(this);
          this.setStatus('cancelled');
          await db.recordCampaign({ campaignId, status: 'cancelled', error: progress.error });
          await this.closeBudget('cancelled');
        });
        if (this.cancelReason !== null)
          return {
            campaignId,
            status: 'cancelled',
            phases: this.verdicts,
            compensated: progress.compensated,
            ...(v1 ? { uncompensated: progress.uncompensated } : {}),
          };
        throw err; // cancelled from outside (Temporal UI, client): the workflow ends cancelled
      }
      const message = err instanceof PhaseFailed ? err.message : err instanceof Error ? err.message : String(err);
      progress.error = message;
      if (input.compensateOnFailure) await compensate(this);
      this.setStatus('failed');
      await db.recordCampaign({ campaignId, status: 'failed', error: message });
      await this.closeBudget('failed');
      throw ApplicationFailure.create({
        type: CampaignFailed,
        nonRetryable: true,
        message: `campaign ${campaignId} failed: ${message}`,
        details: [{ failedTasks: progress.failedTasks, compensated: progress.compensated, phases: this.verdicts }],
      });
    }
    this.setStatus('completed');
    await db.recordCampaign({ campaignId, status: 'completed', currentPhase: input.phases.length, error: null });
    await this.closeBudget('completed');
    return { campaignId, status: 'completed', phases: this.verdicts, compensated: [] };
  }

  private registerHandlers(): void {
    const text = handlerText.campaign;
    setHandler(campaignProgressQuery, () => this.progress, { description: text.progress });
    setHandler(
      pauseCampaignSignal,
      () => {
        this.paused = true;
      },
      { description: text.pause },
    );
    setHandler(
      resumeCampaignSignal,
      () => {
        this.paused = false;
      },
      { description: text.resume },
    );
    setHandler(
      cancelCampaignSignal,
      (args) => {
        this.cancelReason = args?.reason ?? 'cancelled';
        this.work.cancel();
      },
      { description: text.cancel },
    );
  }

  setStatus(status: CampaignStatus): void {
    this.progress.status = status;
    this.show();
  }

  // ---- steps ------------------------------------------------------------------------------------

  private async runPhases(): Promise<void> {
    const { campaignId, input, progress } = this;
    for (const [i, phase] of input.phases.entries()) {
      await this.pausePoint();
      progress.phase = { index: i + 1, total: input.phases.length, name: phase.name };
      progress.task = { index: 0, total: phase.tasks.length, name: null };
      this.show();
      await db.recordCampaign({ campaignId, status: 'running', currentPhase: i + 1 });
      await db.recordPhase({ campaignId, ordinal: i, status: 'running' });
      const outcomes = await this.runTasks(i, phase);
      await this.checkpoint(i, phase, outcomes);
    }
  }

  /** The phase's tasks in order; once its checkpoint can no longer pass, the rest are skipped. */
  private async runTasks(i: number, phase: CampaignPhase): Promise<TaskOutcome[]> {
    const outcomes: TaskOutcome[] = [];
    const need = phase.checkpoint.criteria.minSucceeded ?? phase.tasks.length;
    for (const [j, task] of phase.tasks.entries()) {
      await this.pausePoint();
      // A task that finished despite a cancel request: start nothing more (and compensate nothing that never ran).
      if (this.v1 && this.work.consideredCancelled) throw new CancelledFailure(this.cancelReason ?? 'cancelled');
      this.progress.task = { index: j + 1, total: phase.tasks.length, name: task.name };
      this.show();
      if (await this.runTask(i, j, phase, task, outcomes)) continue;
      const failed = outcomes.filter((o) => !o.ok).length;
      if (phase.tasks.length - failed < need) {
        // The checkpoint can no longer pass: the rest are skipped, not run.
        for (const rest of phase.tasks.slice(j + 1))
          outcomes.push({
            name: rest.name,
            type: rest.type,
            ok: false,
            error: 'skipped: the phase had already failed',
          });
        break;
      }
    }
    return outcomes;
  }

  /** Run task j of phase i, as an activity or a child workflow; false when it failed (recorded in `outcomes`). */
  private async runTask(
    i: number,
    j: number,
    phase: CampaignPhase,
    task: CampaignPhase['tasks'][number],
    outcomes: TaskOutcome[],
  ): Promise<boolean> {
    const { campaignId, agentId, v1, progress, started } = this;
    const key = `${this.keyPrefix}/p${i}/t${j}`;
    const entry: Started = {
      label: `${phase.name}/${task.name}`,
      key,
      type: task.type,
      kind: task.kind,
      args: task.args,
      state: 'running',
      compensation: task.compensation,
    };
    // From v1 a task counts as started before it runs: cancelled mid-run, it is compensated too.
    if (v1) started.push(entry);
    const budget = this.chargeTo ? { budgetId: this.chargeTo } : {};
    try {
      const result =
        task.kind === 'workflow'
          ? await this.runChild(i, j, phase, task)
          : // An outage (the database away) is waited out, not counted as the task failing;
            // the task's key makes the retry find the first attempt's effect. A task its
            // budget cannot cover waits for a grant and runs again under the same key.
            await this.untilFunded(`task ${task.name}`, () =>
              rideOut(
                `task ${task.name}`,
                () =>
                  (v1 ? awaitedTasks : tasks).runCampaignTask({
                    campaignId,
                    agentId,
                    key,
                    type: task.type,
                    args: task.args,
                    ...budget,
                  }),
                {
                  onDegraded: (d) => {
                    progress.degraded = d;
                    this.show();
                  },
                  onRecovered: () => {
                    progress.degraded = null;
                    this.show();
                  },
                },
              ),
            );
      const stored = (result ?? {}) as Record<string, unknown>;
      entry.state = 'completed';
      entry.result = stored;
      if (!v1) started.push(entry);
      outcomes.push({ name: task.name, type: task.type, ok: true, result: stored });
      return true;
    } catch (err) {
      if (isCancellation(err)) {
        entry.state = 'stopped';
        entry.childCancelled = err instanceof ChildWorkflowFailure;
        throw err;
      }
      // A task that failed (after its retries) is not compensated, as before: drop it.
      if (v1) started.splice(started.indexOf(entry), 1);
      const error = failureMessage(err, 2000);
      outcomes.push({ name: task.name, type: task.type, ok: false, error });
      progress.failedTasks.push({ phase: phase.name, task: task.name, error });
      await this.learn('avoid_error', avoidErrorArgs(task.type, error));
      return false;
    }
  }

  /** A task of kind `workflow`: a child workflow, its id derived from the task (a sub-campaign runs as campaign/<its id>). */
  private runChild(i: number, j: number, phase: CampaignPhase, task: CampaignPhase['tasks'][number]): Promise<unknown> {
    const { campaignId, agentId, info, progress } = this;
    const workflowId = this.v1
      ? childWorkflowId(info.workflowId, campaignId, i, j, task.type, task.args)
      : `${info.workflowId}/p${i}/t${j}`;
    return executeChild(task.type, {
      workflowId,
      args: [task.args],
      ...workflowFailover,
      ...campaignTaskText({
        campaignId,
        agentId,
        workflowId,
        phase: { ...progress.phase, name: phase.name },
        task: { ...progress.task, name: task.name },
        type: task.type,
        args: task.args,
      }),
    });
  }

  /** The phase's checkpoint: a validated verdict; a failed one fails the campaign. */
  private async checkpoint(i: number, phase: CampaignPhase, outcomes: TaskOutcome[]): Promise<void> {
    const { campaignId, progress } = this;
    await db.recordPhase({ campaignId, ordinal: i, status: 'checkpoint' });
    const verdict = await this.untilFunded(`checkpoint ${phase.name}`, () =>
      validator.validateCheckpoint({
        campaignId,
        agentId: this.agentId,
        key: `${this.keyPrefix}/p${i}`,
        phase: { name: phase.name, type: phase.type, objectives: phase.objectives },
        checkpoint: phase.checkpoint,
        outcomes,
        ...(this.chargeTo ? { budgetId: this.chargeTo } : {}),
      }),
    );
    progress.lastVerdict = { ...verdict, phase: phase.name };
    this.verdicts.push({ name: phase.name, verdict });
    if (!verdict.pass) {
      await db.recordPhase({
        campaignId,
        ordinal: i,
        status: 'failed',
        result: { outcomes, verdict },
        error: verdict.reason,
      });
      throw new PhaseFailed(`phase '${phase.name}' checkpoint failed: ${verdict.reason}`);
    }
    await db.recordPhase({ campaignId, ordinal: i, status: 'completed', result: { outcomes, verdict } });
    progress.completedPhases.push(phase.name);
    await this.learn('phase_success', { phase_type: phase.type });
  }

  /** Wait here while paused; the pause is recorded so the UI and CLI see it. */
  private async pausePoint(): Promise<void> {
    if (!this.paused) return;
    const { campaignId } = this;
    this.setStatus('paused');
    await db.recordCampaign({ campaignId, status: 'paused' });
    await condition(() => !this.paused);
    this.setStatus('running');
    await db.recordCampaign({ campaignId, status: 'running' });
  }

  /**
   * Pause until `resume` for a reason of the campaign's own (its lifeforce ran out): the reason
   * is in the progress query and the campaign row's `error` while it waits.
   */
  private async pauseFor(reason: string): Promise<void> {
    const { campaignId, progress } = this;
    this.paused = true;
    progress.pauseReason = reason;
    log.warn('campaign paused', { campaignId, reason });
    this.setStatus('paused');
    await db.recordCampaign({ campaignId, status: 'paused', error: reason });
    await condition(() => !this.paused);
    progress.pauseReason = null;
    this.setStatus('running');
    await db.recordCampaign({ campaignId, status: 'running', error: null });
  }

  /**
   * Run `step` until its budget covers it: a `LifeforceExhausted` failure (nothing ran, nothing
   * was spent) pauses the campaign until a human grants more and resumes it, then the step runs
   * again. Runs from before the ledger let the failure through, as before.
   */
  private async untilFunded<T>(step: string, fn: () => Promise<T>): Promise<T> {
    for (;;) {
      try {
        return await fn();
      } catch (err) {
        const shortfall = this.budgetId ? lifeforceShortfallOf(err) : null;
        if (!shortfall) throw err;
        await this.pauseFor(
          campaignLifeforcePause({ agentId: this.agentId, campaignId: this.campaignId, step, shortfall }),
        );
      }
    }
  }

  /**
   * Carve the campaign's budget from the agent's (idempotent by id). An agent with no budget yet
   * gets its unlimited one first; a carve the agent cannot afford pauses the campaign until
   * `resume`, then it is asked again. Never fails the campaign. A campaign id run again after its
   * budget closed spends from the agent's budget (a closed budget never spends again).
   */
  private async openBudget(budgetId: string, amount: number | null): Promise<void> {
    const { agentId } = this;
    const parentId = budgetIds.agent(agentId);
    const carve = () =>
      ledger.openChildBudget({
        parentId,
        id: budgetId,
        agentId,
        scope: 'campaign',
        amount,
        at: new Date().toISOString(),
      });
    for (;;) {
      let r = await carve();
      if (!r.ok && r.reason === 'missing') {
        await ledger.ensureAgentBudget({ agentId, at: new Date().toISOString() });
        r = await carve();
      }
      if (r.ok) {
        this.chargeTo = budgetId;
        this.progress.lifeforce = { budgetId, carved: r.carved, unlimited: r.unlimited };
        return;
      }
      if (r.reason === 'closed') {
        log.warn('campaign budget closed by an earlier run: spending from the agent budget', {
          campaignId: this.campaignId,
          budgetId,
        });
        this.chargeTo = parentId;
        return;
      }
      const shortfall = { budgetId: parentId, reason: r.reason, needed: r.needed, available: r.available };
      await this.pauseFor(
        campaignLifeforcePause({ agentId, campaignId: this.campaignId, step: `carving ${budgetId}`, shortfall }),
      );
    }
  }

  /** Close the campaign's budget: what it did not spend returns to the agent's (idempotent). */
  private async closeBudget(outcome: string): Promise<void> {
    if (!this.budgetId) return;
    await ledger.closeChildBudget({ budgetId: this.budgetId, reason: `campaign ${this.campaignId} ${outcome}` });
  }

  /** Promote a learning; the store may refuse (rate limit, guard): logged, never fatal to the campaign. */
  private async learn(predicate: 'phase_success' | 'avoid_error', args: Record<string, unknown>): Promise<void> {
    try {
      await db.promoteCampaignLearning({
        agentId: this.agentId,
        shardType: this.input.shardType,
        predicate,
        args,
        source: this.campaignId,
      });
    } catch (err) {
      if (this.v1 && isCancellation(err)) throw err; // a cancel during the promotion still cancels the campaign
      log.warn('learning not saved', { campaignId: this.campaignId, predicate, error: failureMessage(err, 2000) });
    }
  }
}

/**
 * Undo started tasks, newest first: completed ones, and (v1) the one that was running when the
 * campaign was cancelled, after it stopped (it may have committed its effect; compensation is
 * key-based and idempotent, so undoing an effect that never happened is a no-op).
 * A child workflow task: its explicit `compensation` runs as an activity. Without one, the
 * default is cancelling the child: a child campaign cancelled mid-run undoes its own started
 * work (counted as compensated); any other cancelled child, and a child that had completed,
 * cannot be undone: logged and listed in `uncompensated`. A task whose compensation fails is
 * logged and the rest still run.
 */
async function compensate(run: CampaignRun): Promise<void> {
  const { campaignId, agentId, progress, started } = run;
  run.setStatus('compensating');
  await db.recordCampaign({ campaignId, status: 'compensating' });
  while (started.length) {
    const d = started.pop()!;
    if (d.kind === 'workflow' && !d.compensation) {
      if (run.v1) notUndone(run, d);
      continue;
    }
    try {
      const r = await undo.compensateCampaignTask({
        campaignId,
        agentId,
        key: d.key,
        type: d.type,
        args: d.args,
        result: d.result,
        compensation: d.compensation,
      });
      if (r.compensated) progress.compensated.push(d.label);
    } catch (err) {
      log.error('compensation failed', { campaignId, task: d.label, error: failureMessage(err, 2000) });
      progress.failedTasks.push({ phase: 'compensation', task: d.label, error: failureMessage(err, 2000) });
    }
  }
  for (const [i] of run.input.phases.entries()) {
    if (i < progress.phase.index) await db.recordPhase({ campaignId, ordinal: i, status: 'compensated' });
  }
}

/** A child workflow task without a compensation: a cancelled child campaign undid its own work; anything else is listed as not undone. */
function notUndone(run: CampaignRun, d: Started): void {
  const { progress } = run;
  let reason: string | null = null;
  if (d.childCancelled && d.type === 'campaignWorkflow') progress.compensated.push(d.label);
  else if (d.childCancelled)
    reason = `child workflow ${d.type} was cancelled mid-run and declares no compensation: what it did is not undone`;
  else if (d.state === 'completed')
    reason = `child workflow ${d.type} completed and declares no compensation: not undone`;
  // (else: cancelled before the child started; nothing to undo)
  if (reason) {
    log.warn('campaign task not compensated', { campaignId: run.campaignId, task: d.label, reason });
    progress.uncompensated.push({ task: d.label, reason });
  }
}
