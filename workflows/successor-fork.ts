/**
 * successorForkWorkflow (id `fork/<id>`): fork the agent's state into an isolated
 * copy, apply an architecture patch to the copy, evaluate it under a budget, store a verdict
 * with artifacts, destroy the copy, then hold an APPROVE at the human gate until an
 * `approveFork` / `rejectFork` update or the deadline (which applies nothing).
 */
import {
  ActivityCancellationType,
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  defineQuery,
  defineUpdate,
  executeChild,
  isCancellation,
  patched,
  proxyActivities,
  sleep,
  setCurrentDetails,
  setHandler,
  workflowInfo,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { createActivities } from '../activities/index.js';
import type { createSandboxActivities } from '../activities/sandbox.js';
import type { ForkArtifact } from '../db/schema/forks.js';
import {
  auditCaveat,
  budgetVerdict,
  decideAbstractsVerdict,
  decideContextReplayVerdict,
  decideToolVerdict,
  forkIdSchema,
  successorForkInputSchema,
  toolRunBudget,
  type SuccessorForkInput,
  type SuccessorForkParams,
  type VerdictDecision,
  type VerdictKind,
} from '../core/fork.js';
import { budgetIds } from '../core/lifeforce.js';
import { dbActivity, failoverTimeout, sandboxActivity, workflowFailover } from './lib/activity-options.js';
import { InvalidInputError, parseWorkflowInput } from './lib/input.js';
import { lifeforceShortfallOf } from './lib/lifeforce.js';
import { chargedSandboxRun } from './lib/sandbox-charge.js';
import { forkCurrentDetails, forkText, handlerText, lifeforceShortfallText, timerText } from './lib/ui-text.js';
import { failureMessage } from './lib/infra.js';

type Activities = ReturnType<typeof createActivities>;
type SandboxActivities = ReturnType<typeof createSandboxActivities>;

const retry = dbActivity.retry;
const db = proxyActivities<Activities>(dbActivity);
// The copy and the evaluation may take a while on a big agent (they heartbeat as every activity does).
const long = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: failoverTimeout,
  retry,
} satisfies ActivityOptions);
// Cleanup must get through: more attempts, same idempotent activity.
const cleanup = proxyActivities<Activities>({ ...dbActivity, retry: { ...retry, maximumAttempts: 20 } });
const sandbox = proxyActivities<SandboxActivities>(sandboxActivity);
// A cancelled evaluation (the fork cancelled, or out of wall time) waits until the sandbox
// activity has killed and removed its container, so nothing of the fork outlives it.
const sandboxWaitCancel = proxyActivities<SandboxActivities>({
  ...sandboxActivity,
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
});

export type ForkPhase = 'spawning' | 'evaluating' | 'verifying' | 'recording' | 'awaiting_approval' | 'done';
export interface ForkState {
  forkId: string;
  phase: ForkPhase;
  /** Workflow start → copy ready (ms), once spawned. */
  spawnMs?: number;
  rows?: number;
  verdict?: VerdictKind;
  gate?: 'pending' | 'approved' | 'rejected' | 'expired';
}
export interface SuccessorForkResult {
  forkId: string;
  verdict: VerdictKind;
  confidence: number;
  patchHash: string;
  evaluationSummary: string;
  caveats: string[];
  artifacts: ForkArtifact[];
  /** Only an APPROVE of a non-verifier fork goes through the gate. */
  gate: 'approved' | 'rejected' | 'expired' | 'not_applicable';
  applied: string | null;
}
export interface GateAnswer {
  gate: string;
  applied: string | null;
}

/** Where the fork is (phase, spawn time, verdict, gate). */
export const forkStateQuery = defineQuery<ForkState>('forkState');
/** Human gate: apply the APPROVE verdict's patch to the parent. */
export const approveForkUpdate = defineUpdate<GateAnswer, [{ by?: string }]>('approveFork');
/** Human gate: discard the patch. */
export const rejectForkUpdate = defineUpdate<GateAnswer, [{ by?: string }]>('rejectFork');

/** A fork's run: its checked input, its budget, the state its query shows and the gate's answer. */
interface ForkRun {
  input: SuccessorForkParams;
  info: ReturnType<typeof workflowInfo>;
  forkId: string;
  /** The fork's own budget `fork:<id>` (undefined: a fork begun before fork-lifeforce-v1). */
  budgetId: string | undefined;
  /** Whether the fork's budget was carved from the parent's (then it is closed with the copy). */
  carved: boolean;
  state: ForkState;
  /** The human's answer at the gate, as the update gave it. */
  decision?: { gate: 'approved' | 'rejected'; by: string };
  /** What the gate came to, returned to the update that answered. */
  answer?: GateAnswer;
}

/** Evaluate an architecture patch in an isolated successor and return a verdict. */
export async function successorForkWorkflow(raw: SuccessorForkInput): Promise<SuccessorForkResult> {
  const run = startFork(raw);
  const result = await verdictOfCopy(run);
  if (result.verdict !== 'APPROVE' || run.input.auditsForkId) {
    enter(run, 'done');
    return { ...result, gate: 'not_applicable', applied: null };
  }
  return awaitGate(run, result);
}

/** The input checked (the fork id, and an evaluation that fits the patch), the fork's budget, its query and gate updates. */
function startFork(raw: SuccessorForkInput): ForkRun {
  const input: SuccessorForkParams = parseWorkflowInput('successorForkWorkflow', successorForkInputSchema, raw);
  const info = workflowInfo();
  const forkId =
    input.forkId ?? (info.workflowId.startsWith('fork/') ? info.workflowId.slice('fork/'.length) : info.workflowId);
  const idCheck = forkIdSchema.safeParse(forkId);
  const mismatch =
    input.evaluation.kind === 'tool_tests'
      ? input.patch.kind !== 'tool'
      : input.evaluation.kind === 'context_replay'
        ? input.patch.kind !== 'config' && input.patch.kind !== 'prompt'
        : input.patch.kind === 'tool';
  if (!idCheck.success || mismatch) {
    throw ApplicationFailure.create({
      type: InvalidInputError,
      nonRetryable: true,
      message: !idCheck.success
        ? `successorForkWorkflow: invalid input — forkId: '${forkId}' (from the workflow id): ${idCheck.error.issues[0]?.message ?? 'invalid'}`
        : `successorForkWorkflow: invalid input — evaluation: ${input.evaluation.kind} cannot evaluate a ${input.patch.kind} patch (tool patches use tool_tests; config and prompt patches context_replay or abstracts_replay; strategy patches abstracts_replay)`,
    });
  }

  // fork-lifeforce-v1: the fork spends from its own budget `fork:<id>`, carved from the parent
  // agent's; forks begun before charge their copy's own budget, as they did.
  const budgetId = patched('fork-lifeforce-v1') ? budgetIds.fork(forkId) : undefined;
  const run: ForkRun = { input, info, forkId, budgetId, carved: false, state: { forkId, phase: 'spawning' } };
  const { state } = run;
  enter(run, 'spawning');
  setHandler(forkStateQuery, () => ({ ...state }), { description: handlerText.fork.forkState });
  const gateHandler = (gate: 'approved' | 'rejected') => async (arg: { by?: string }) => {
    run.decision ??= { gate, by: arg?.by?.trim() || 'human' };
    await condition(() => run.answer !== undefined);
    return run.answer!;
  };
  const gateValidator = (_arg: { by?: string }) => {
    if (state.phase !== 'awaiting_approval')
      throw new Error(
        `fork ${forkId} is not awaiting approval (phase ${state.phase}, verdict ${state.verdict ?? 'none'})`,
      );
  };
  setHandler(approveForkUpdate, gateHandler('approved'), {
    validator: gateValidator,
    description: handlerText.fork.approveFork,
  });
  setHandler(rejectForkUpdate, gateHandler('rejected'), {
    validator: gateValidator,
    description: handlerText.fork.rejectFork,
  });
  return run;
}

/** Set the phase; the current details the UI shows follow it (no command). */
function enter({ state }: ForkRun, phase: ForkPhase, until?: number): void {
  state.phase = phase;
  setCurrentDetails(
    forkCurrentDetails({
      phase,
      verdict: state.verdict,
      gateUntil: until === undefined ? undefined : new Date(until).toISOString(),
    }),
  );
}

type ForkVerdict = Omit<SuccessorForkResult, 'gate' | 'applied'>;

/** The copy spawned, evaluated and its verdict recorded; the copy is destroyed whatever happens. */
async function verdictOfCopy(run: ForkRun): Promise<ForkVerdict> {
  const { forkId, budgetId } = run;
  let cleanupStatus: 'cancelled' | 'failed' | undefined;
  try {
    return await evaluateCopy(run);
  } catch (err) {
    cleanupStatus = isCancellation(err) ? 'cancelled' : 'failed';
    throw err;
  } finally {
    // Runs on success, failure and cancellation alike; nonCancellable so a cancelled workflow
    // still destroys the copy. The activities are idempotent. The fork's budget closes with its
    // copy: what it did not spend returns to the parent's.
    await CancellationScope.nonCancellable(async () => {
      await cleanup.forkCleanup({ forkId, status: cleanupStatus });
      // Only a budget that was carved has anything to give back; forks begun before
      // fork-close-carved-only-v1 closed theirs in any case, and replay so.
      if (budgetId && (run.carved || !patched('fork-close-carved-only-v1')))
        await cleanup.closeChildBudget({ budgetId, reason: `fork ${forkId} cleaned up` });
    });
  }
}

/** Spawn the copy, fund it, evaluate it under the budget (audited by a verifier when asked), record the verdict. */
async function evaluateCopy(run: ForkRun): Promise<ForkVerdict> {
  const { input, info, forkId, budgetId, state } = run;
  const spawned = await long.forkSpawn({
    forkId,
    workflowId: info.workflowId,
    agentId: input.agentId,
    patch: input.patch,
    evaluation: input.evaluation,
    budget: input.budget,
    auditsForkId: input.auditsForkId,
    startedAtMs: info.startTime.getTime(),
  });
  Object.assign(state, { spawnMs: spawned.spawnMs, rows: spawned.rows });
  enter(run, 'evaluating');
  const refused = budgetId ? await openForkBudget(input.agentId, budgetId, spawned.lifeforce) : null;
  run.carved = budgetId !== undefined && refused === null;
  let outcome: EvaluationOutcome;
  if (refused) {
    // The parent cannot fund the fork: rejected without running anything.
    outcome = {
      decision: { ...budgetVerdict('lifeforce', refused), caveats: ['the evaluation did not start'] },
      artifacts: [],
      status: 'budget_exceeded',
    };
  } else {
    const raced = await evaluateWithinBudget(forkId, input, info.startTime.getTime(), budgetId);
    // The budget timer is cancelled in the same step that schedules the next activity: a
    // history records that activity before the timer's cancellation, and replay checks the order.
    raced.settle();
    outcome = raced.outcome;
  }

  const usage = await db.forkUsage({ forkId });
  if (outcome.status === 'completed' && usage.costUsd > input.budget.costUsd) {
    outcome = {
      ...outcome,
      decision: budgetVerdict('cost', `spent $${usage.costUsd.toFixed(4)} > $${input.budget.costUsd}`),
      status: 'budget_exceeded',
    };
  }

  if (input.verify && !input.auditsForkId && forkId.length <= 58) {
    enter(run, 'verifying');
    const verifier = {
      agentId: input.agentId,
      forkId: `${forkId}.vf`,
      patch: input.patch,
      evaluation: input.evaluation,
      budget: input.budget,
      auditsForkId: forkId,
    };
    const audit = await executeChild(successorForkWorkflow, {
      workflowId: `fork/${forkId}.vf`,
      args: [verifier],
      ...workflowFailover,
      ...forkText({ ...verifier, wallMs: input.budget.wallMs }),
    }).catch(() => undefined);
    outcome.decision = {
      ...outcome.decision,
      caveats: [...outcome.decision.caveats, auditCaveat(outcome.decision.verdict, audit?.verdict)],
    };
  }

  enter(run, 'recording');
  const recorded = await db.forkRecordVerdict({
    forkId,
    decision: outcome.decision,
    artifacts: outcome.artifacts,
    status: outcome.status,
    usage: {
      costUsd: usage.costUsd,
      ...(usage.lifeforce !== undefined ? { lifeforce: usage.lifeforce } : {}),
      wallMs: Date.now() - info.startTime.getTime(),
    },
  });
  state.verdict = outcome.decision.verdict;
  return {
    forkId,
    verdict: outcome.decision.verdict,
    confidence: outcome.decision.confidence,
    patchHash: recorded.patchHash,
    evaluationSummary: outcome.decision.summary,
    caveats: outcome.decision.caveats,
    artifacts: outcome.artifacts,
  };
}

/** The human gate: nothing is applied without an answer; the deadline lapses the verdict. */
async function awaitGate(run: ForkRun, result: ForkVerdict): Promise<SuccessorForkResult> {
  const { input, forkId, state } = run;
  state.gate = 'pending';
  enter(run, 'awaiting_approval', Date.now() + input.approvalDeadlineMs);
  let answer: GateAnswer;
  try {
    const answered = await condition(() => run.decision !== undefined, input.approvalDeadlineMs, {
      summary: timerText.forkGate(input.approvalDeadlineMs),
    });
    const gate = answered && run.decision ? run.decision : { gate: 'expired' as const, by: 'deadline' };
    answer = await db.forkGate({ forkId, decision: gate.gate, by: gate.by });
    run.answer = answer;
  } catch (err) {
    if (isCancellation(err))
      await CancellationScope.nonCancellable(() => db.forkGate({ forkId, decision: 'expired', by: 'cancelled' }));
    throw err;
  }
  state.gate = answer.gate as ForkState['gate'];
  enter(run, 'done');
  // Let the update handler return its answer before the workflow completes.
  await condition(allHandlersFinished);
  return { ...result, gate: answer.gate as SuccessorForkResult['gate'], applied: answer.applied };
}

type EvaluationOutcome = {
  decision: VerdictDecision;
  artifacts: ForkArtifact[];
  status: 'completed' | 'budget_exceeded' | 'failed';
};

/**
 * Carve the fork's budget from its parent agent's (idempotent by id); an agent with no budget yet
 * gets its unlimited one first. Null when carved; else what the parent lacked (the fork is then
 * rejected: it never runs on lifeforce its parent does not have).
 */
async function openForkBudget(agentId: string, budgetId: string, amount: number): Promise<string | null> {
  const parentId = budgetIds.agent(agentId);
  const carve = () =>
    db.openChildBudget({ parentId, id: budgetId, agentId, scope: 'fork', amount, at: new Date().toISOString() });
  let r = await carve();
  if (!r.ok && r.reason === 'missing') {
    await db.ensureAgentBudget({ agentId, at: new Date().toISOString() });
    r = await carve();
  }
  if (r.ok) return null;
  if (r.reason === 'closed') return `${budgetId} was closed by an earlier run of this fork id`;
  return `${budgetId} not carved: ${lifeforceShortfallText({ budgetId: parentId, reason: r.reason, needed: r.needed, available: r.available })}`;
}

/**
 * The evaluation under the wall-time budget: a timer races it; when the timer fires the
 * evaluation is cancelled (its activities see the cancellation at their next heartbeat) and
 * the verdict is REJECT. An evaluation that fails is a verdict too, not a stuck fork.
 * `settle` cancels the timer when the evaluation ended first: the caller calls it in the same
 * step as its next command, so the commands keep their order.
 */
async function evaluateWithinBudget(
  forkId: string,
  input: SuccessorForkParams,
  startedAtMs: number,
  budgetId?: string,
): Promise<{ outcome: EvaluationOutcome; settle: () => void }> {
  const remaining = Math.max(1, input.budget.wallMs - (Date.now() - startedAtMs));
  const evalScope = new CancellationScope();
  const timerScope = new CancellationScope();
  const evaluation = evalScope.run(() => evaluate(forkId, input, budgetId));
  const timer = timerScope
    .run(() => sleep(remaining, { summary: timerText.forkWallBudget(input.budget.wallMs) }))
    .then(() => 'timeout' as const);
  try {
    const first = await Promise.race([evaluation, timer]);
    if (first === 'timeout') {
      evalScope.cancel();
      await evaluation.catch(() => undefined);
      return {
        outcome: {
          decision: budgetVerdict('wall_time', `${input.budget.wallMs} ms`),
          artifacts: [],
          status: 'budget_exceeded',
        },
        settle: () => undefined,
      };
    }
    return { outcome: first, settle: () => timerScope.cancel() };
  } catch (err) {
    if (isCancellation(err)) {
      // Cancelled: the timer rejects at once, so wait for the evaluation too; its sandbox run
      // ends only once its container is killed and removed (WAIT_CANCELLATION_COMPLETED).
      if (patched('fork-cancel-waits-evaluation-v1')) await evaluation.catch(() => undefined);
      throw err;
    }
    // The fork's budget could not cover a step: it ran nothing more and spent nothing on it.
    const shortfall = lifeforceShortfallOf(err);
    if (shortfall) {
      return {
        outcome: {
          decision: budgetVerdict('lifeforce', lifeforceShortfallText(shortfall)),
          artifacts: [],
          status: 'budget_exceeded',
        },
        settle: () => timerScope.cancel(),
      };
    }
    // The evaluation itself failed (bad tool code, a missing model…): a verdict, not a stuck fork.
    const message = failureMessage(err, 2000);
    return {
      outcome: {
        decision: {
          verdict: 'REJECT',
          confidence: 0.5,
          summary: `evaluation failed: ${message}`,
          caveats: ['the evaluation did not finish'],
        },
        artifacts: [],
        status: 'failed',
      },
      settle: () => timerScope.cancel(),
    };
  }
}

/**
 * Apply the patch to the copy and run the evaluation the input names. With a budget, the
 * evaluation's fixed cost is charged first and its LLM calls are charged to the budget.
 */
async function evaluate(
  forkId: string,
  input: SuccessorForkParams,
  budgetId?: string,
): Promise<{ decision: VerdictDecision; artifacts: ForkArtifact[]; status: 'completed' | 'budget_exceeded' }> {
  if (budgetId) await db.forkChargeEvaluation({ forkId, budgetId });
  await db.forkApplyPatch({ forkId });
  const lifeforce = budgetId ? { budgetId } : {};
  if (input.evaluation.kind === 'abstracts_replay') {
    const r = await long.forkEvaluateAbstracts({ forkId, ...lifeforce });
    if (r.costExceeded) {
      return {
        decision: budgetVerdict('cost', `spent $${r.spentUsd.toFixed(4)} > $${input.budget.costUsd}`),
        artifacts: [r.artifact],
        status: 'budget_exceeded',
      };
    }
    const decision = decideAbstractsVerdict({
      baseline: r.baseline,
      candidate: r.candidate,
      samples: r.samples,
      judgeRating: r.judgeRating,
    });
    const caveats =
      r.baselineStrategy === r.candidateStrategy
        ? [...decision.caveats, `the patch leaves the abstracts strategy at ${r.candidateStrategy}`]
        : decision.caveats;
    return { decision: { ...decision, caveats }, artifacts: [r.artifact], status: 'completed' };
  }
  if (input.evaluation.kind === 'context_replay') {
    const r = await long.forkEvaluateContexts({ forkId, ...lifeforce });
    if (r.costExceeded) {
      return {
        decision: budgetVerdict('cost', `spent $${r.spentUsd.toFixed(4)} > $${input.budget.costUsd}`),
        artifacts: [r.artifact],
        status: 'budget_exceeded',
      };
    }
    return {
      decision: decideContextReplayVerdict({ parent: r.parent, candidate: r.candidate, samples: r.samples }),
      artifacts: [r.artifact],
      status: 'completed',
    };
  }
  if (input.patch.kind !== 'tool')
    throw ApplicationFailure.nonRetryable('tool_tests needs a tool patch', InvalidInputError);
  // Tool code runs only in the sandbox, under the fork's CPU-time, CPU-quota and disk budget
  // (capped for one sandbox run; a cap that applied becomes a caveat).
  const limits = toolRunBudget(input.budget);
  const sandboxRun = patched('fork-sandbox-wait-cancel-v1') ? sandboxWaitCancel.sandboxRun : sandbox.sandboxRun;
  const testRun = {
    key: `fork/${forkId}/tool-tests`,
    command: ['node', 'tool.test.mjs'],
    files: { 'tool.mjs': input.patch.implementation, 'tool.test.mjs': input.patch.tests },
    budget: limits.budget,
  };
  // sandbox-charge-v1: the run is charged to the fork's budget, besides its fixed evaluation
  // cost (a budget that cannot cover it is REJECT budget_exceeded: lifeforce); forks begun
  // before, or without a budget of their own, ran it uncharged.
  const run =
    budgetId && patched('sandbox-charge-v1')
      ? await chargedSandboxRun(db, sandboxRun, testRun, {
          agentId: input.agentId,
          budgetId,
          reason: `fork ${forkId}: tool tests of ${input.patch.tool}`,
        })
      : await sandboxRun(testRun);
  const artifact = await db.forkWriteArtifact({
    forkId,
    name: 'tool-tests.json',
    body: {
      status: run.status,
      exceeded: run.exceeded,
      exitCode: run.exitCode,
      durationMs: run.durationMs,
      budget: limits.budget,
      stdout: run.stdout.slice(0, 65_536),
      stderr: run.stderr.slice(0, 65_536),
      imageId: run.imageId,
    },
  });
  const decision = decideToolVerdict(run);
  return {
    decision: { ...decision, caveats: [...decision.caveats, ...limits.caveats] },
    artifacts: [artifact],
    status: decision.summary.startsWith('budget_exceeded') ? 'budget_exceeded' : 'completed',
  };
}
