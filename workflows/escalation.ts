/**
 * One escalation, id `escalation/<id>`: the agent's question goes to the oversight
 * graph (an activity), a state-machine design is tested in the sandbox and refined for a
 * bounded number of rounds, the human may approve / reject / nudge / veto at any time
 * (updates with validators), and core/escalation-rules.ts decides: veto > approval,
 * human > oversight, oversight alone when no human is required, and when one is required
 * and silent: WAIT to the deadline, WAIT through the grace period, then deny. The answer
 * reaches the agent as a partnership message and a note, and the agent loop is woken.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  allHandlersFinished,
  condition,
  currentUpdateInfo,
  defineQuery,
  defineUpdate,
  getExternalWorkflowHandle,
  log,
  patched,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { z } from 'zod';
import type { createOversightActivities, OversightRun } from '../activities/oversight.js';
import type { createToolActivities } from '../activities/tools.js';
import type { createCommandActivities } from '../activities/commands/apply.js';
import type { createShellActivities } from '../activities/shell.js';
import type { LoopEffect } from '../core/loop-types.js';
import { decide, type DeadlinePhase, type Decider, type HumanVerdict, type Outcome, type RuleDecision } from '../core/escalation-rules.js';
import {
  escalationInput,
  humanApproveInput,
  humanNudgeInput,
  humanRejectInput,
  humanVetoInput,
  type EscalationInput,
  type OversightAnswer,
  type ToolDesign,
} from '../core/escalation.js';
import type { SandboxRunRequest, SandboxRunResult } from '../sandbox/sandbox.js';
import { dbActivity, llmActivity, sandboxActivity } from './lib/activity-options.js';
import { parseWorkflowInput } from './lib/input.js';
import { agentIdSearchAttribute, kindSearchAttribute } from './lib/search-attributes.js';

type Activities = ReturnType<typeof createOversightActivities> & ReturnType<typeof createToolActivities> & ReturnType<typeof createCommandActivities> & ReturnType<typeof createShellActivities>;
type ShellEffect = Extract<LoopEffect, { kind: 'shell' }>;
interface SandboxActivities {
  sandboxRun(req: SandboxRunRequest): Promise<SandboxRunResult>;
}

const db = proxyActivities<Activities>(dbActivity);
// The whole graph is one activity: the LLM preset (heartbeats, retries; replies are replayed
// from llm_calls by idempotency key, so a retry does not pay twice).
const oversight = proxyActivities<Activities>({ ...llmActivity, retry: { ...llmActivity.retry, nonRetryableErrorTypes: [...(llmActivity.retry?.nonRetryableErrorTypes ?? []), 'MalformedOversightReply'] } });
const sandbox = proxyActivities<SandboxActivities>({ ...sandboxActivity, scheduleToStartTimeout: '5 minutes' });

export interface EscalationStatus {
  escalationId: string;
  phase: 'oversight' | 'designing' | 'awaiting_human' | 'waiting' | 'executing' | 'decided';
  humanRequired: boolean;
  oversight: { verdict: OversightAnswer['verdict']; route: string } | null;
  human: { verdict: HumanVerdict; by: string } | null;
  decision: { outcome: Outcome; decidedBy: Decider; why: string } | null;
  deadlineAt: string;
  designRounds: number;
}

export interface EscalationResult {
  escalationId: string;
  outcome: Outcome;
  decidedBy: Decider;
  why: string;
  grantedTools: string[];
  noteId: number;
  proposalOutcome?: 'executed' | 'blocked' | 'failed';
  designedTool?: { name: string; toolId: number; rounds: number };
  designRounds: number;
  learning: { id: number } | { refused: string } | null;
}

/** The escalation's state (phase, answers so far, the decision once made). */
export const escalationStatusQuery = defineQuery<EscalationStatus>('status');
/** A human approves (beats the oversight's answer). */
export const approveUpdate = defineUpdate<EscalationStatus, [z.input<typeof humanApproveInput>]>('approve');
/** A human rejects, with a reason. */
export const rejectUpdate = defineUpdate<EscalationStatus, [z.input<typeof humanRejectInput>]>('reject');
/** A human nudges: guidance instead of approval (a learning moment). */
export const nudgeUpdate = defineUpdate<EscalationStatus, [z.input<typeof humanNudgeInput>]>('nudge');
/** A human veto: beats everything, an oversight approval included. */
export const vetoUpdate = defineUpdate<EscalationStatus, [z.input<typeof humanVetoInput>]>('veto');

const causeMessage = (err: unknown) => (err instanceof ActivityFailure && err.cause ? err.cause.message : err instanceof Error ? err.message : String(err));
const tail = (s: string, n = 3000) => (s.length > n ? `…${s.slice(-n)}` : s);

/** Route an escalation through oversight and the human; deliver the answer to the agent. */
export async function escalationWorkflow(rawInput: EscalationInput): Promise<EscalationResult> {
  const input = parseWorkflowInput('escalationWorkflow', escalationInput, rawInput);
  const { escalationId, agentId } = input;
  const info = workflowInfo();
  upsertSearchAttributes([
    { key: agentIdSearchAttribute, value: agentId },
    { key: kindSearchAttribute, value: 'escalation' },
  ]);
  const startedAt = info.startTime.getTime();
  const deadlineAt = startedAt + input.deadlineMs;
  const graceEndsAt = deadlineAt + input.graceMs;

  let humanRequired = input.humanRequired || input.dangerFlags.length > 0;
  let human: { verdict: HumanVerdict; by: string; comment?: string } | null = null;
  let run: OversightRun | null = null;
  let verdict: OversightAnswer['verdict'] | null = null;
  let phase: DeadlinePhase = 'before_deadline';
  let decision: Extract<RuleDecision, { final: true }> | null = null;
  let status: EscalationStatus['phase'] = 'oversight';
  let designRounds = 0;

  const snapshot = (): EscalationStatus => ({
    escalationId,
    phase: status,
    humanRequired,
    oversight: run && verdict ? { verdict, route: run.route } : null,
    human: human ? { verdict: human.verdict, by: human.by } : null,
    decision: decision ? { outcome: decision.outcome, decidedBy: decision.decidedBy, why: decision.why } : null,
    deadlineAt: new Date(deadlineAt).toISOString(),
    designRounds,
  });
  setHandler(escalationStatusQuery, snapshot);

  function humanHandler<S extends z.ZodType>(verdictOf: HumanVerdict, schema: S, commentOf: (a: z.output<S>) => string | undefined) {
    return {
      async handler(arg: z.input<S>): Promise<EscalationStatus> {
        const a = schema.parse(arg) as z.output<S> & { by: string };
        // Set before the write: the rules see the answer at once, the activity only records it.
        human = { verdict: verdictOf, by: a.by, comment: commentOf(a) };
        await db.recordHumanAnswer({ escalationId, agentId, verdict: verdictOf, by: a.by, comment: commentOf(a), updateId: currentUpdateInfo()?.id ?? verdictOf });
        return snapshot();
      },
      validator(arg: z.input<S>): void {
        const r = schema.safeParse(arg);
        if (!r.success) throw new Error(`invalid ${verdictOf}: ${r.error.issues.map((i) => `${i.path.join('.') || '(input)'}: ${i.message}`).join('; ')}`);
        if (decision) throw new Error(`escalation ${escalationId} is already decided (${decision.outcome} by ${decision.decidedBy})`);
        if (human) throw new Error(`escalation ${escalationId} already has a human answer (${human.verdict} by ${human.by})`);
      },
    };
  }
  const h = {
    approve: humanHandler('approve', humanApproveInput, (a) => a.comment),
    reject: humanHandler('reject', humanRejectInput, (a) => a.reason),
    nudge: humanHandler('nudge', humanNudgeInput, (a) => a.text),
    veto: humanHandler('veto', humanVetoInput, (a) => a.reason),
  };
  setHandler(approveUpdate, h.approve.handler, { validator: h.approve.validator });
  setHandler(rejectUpdate, h.reject.handler, { validator: h.reject.validator });
  setHandler(nudgeUpdate, h.nudge.handler, { validator: h.nudge.validator });
  setHandler(vetoUpdate, h.veto.handler, { validator: h.veto.validator });

  // The deadline is recorded once a human is required: at the start, or when the wait begins.
  let deadlineRecorded = humanRequired;
  await db.openEscalation({ escalation: input, workflowId: info.workflowId, deadlineAt: humanRequired ? new Date(deadlineAt).toISOString() : null });

  // 1. The oversight graph (and, for a design, its test rounds in the sandbox).
  let design: { design: ToolDesign; passed: boolean } | null = null;
  let oversightError: string | null = null;
  let feedback: string | undefined;
  for (let round = 1; round <= input.maxDesignRounds && !human; round++) {
    try {
      run = await oversight.runOversight({ escalation: input, round, feedback, key: info.workflowId });
    } catch (err) {
      // No oversight answer (no model, malformed replies): the human decides — never a silent approval.
      oversightError = causeMessage(err);
      log.warn('oversight unavailable; a human must decide', { escalationId, error: oversightError });
      humanRequired = true;
      break;
    }
    verdict = run.answer.verdict;
    if (run.answer.needs_human) humanRequired = true;
    const d = run.answer.design;
    if (input.category !== 'state_machine_designer' || !d) break;
    status = 'designing';
    designRounds = round;
    let result: SandboxRunResult | null = null;
    try {
      result = await sandbox.sandboxRun({
        key: `${info.workflowId}/design/r${round}`,
        command: ['node', '--test', 'tool.test.mjs'],
        files: { 'tool.mjs': d.implementation, 'tool.test.mjs': d.tests, 'spec.json': JSON.stringify(d.spec), 'package.json': '{"type":"module"}' },
        budget: { wallMs: 60_000 },
      });
    } catch (err) {
      feedback = `the sandbox could not run the tests: ${causeMessage(err)}`;
    }
    const passed = !!result && result.status === 'ok' && result.exitCode === 0;
    if (result && !passed) feedback = `status ${result.status}${result.exceeded ? ` (${result.exceeded})` : ''}, exit ${result.exitCode}\n${tail(`${result.stdout}\n${result.stderr}`.trim())}`;
    await db.recordDesignRound({ escalationId, agentId, round, ok: passed, feedback: passed ? `round ${round}: tests passed` : feedback!, toolName: d.spec.name });
    design = { design: d, passed };
    if (passed || !result) break; // an unavailable sandbox is not the design's fault: no more rounds
  }
  if (design && !design.passed) {
    // A design that never passed is not approvable, whatever the answer said.
    verdict = 'reject';
  }
  if (run) await db.recordOversightAnswer({ escalationId, agentId, run: { ...run, answer: { ...run.answer, verdict: verdict! } }, round: Math.max(designRounds, 1), awaitingHuman: humanRequired });

  // 2. The rules decide, or say what to wait for.
  for (;;) {
    const d = decide({ humanRequired, oversight: verdict ? { verdict } : null, human, phase });
    if (d.final) {
      decision = d;
      break;
    }
    status = d.status === 'waiting' ? 'waiting' : 'awaiting_human';
    if (d.waitingFor === 'oversight') {
      // Only reachable without an oversight answer and without a human requirement (not possible after step 1).
      humanRequired = true;
      continue;
    }
    // deadline-at-v1: a human became required after the start (the oversight asked for one or
    // failed): the escalation row gets its deadline now; escalations started before left it null.
    if (!deadlineRecorded && patched('deadline-at-v1')) await db.markAwaitingHuman({ escalationId, deadlineAt: new Date(deadlineAt).toISOString() });
    deadlineRecorded = true;
    const until = phase === 'before_deadline' ? deadlineAt : graceEndsAt;
    const answered = await condition(() => human !== null, Math.max(until - Date.now(), 1));
    if (!answered) phase = phase === 'before_deadline' ? 'grace' : 'expired';
  }
  status = 'executing';

  // 3. Effects of the decision: the held action runs only when approved; an approved design joins the catalogue.
  let proposalOutcome: EscalationResult['proposalOutcome'];
  let proposalResult: string | undefined;
  if (input.proposal) {
    if (decision.outcome !== 'approved') proposalOutcome = 'blocked';
    else if (input.proposal.kind === 'command') {
      // The approved command runs through the ordinary command path (validation, command_log,
      // idempotency by cmd id), marked approved so the danger check does not hold it again.
      const [o] = await db.applyCommands({
        agentId,
        tick: input.tick ?? 0,
        workflowId: info.workflowId,
        mode: 'main',
        commands: [{ cmdId: `approved.${escalationId}`.slice(0, 120), type: input.proposal.name, args: input.proposal.args }],
        approvedBy: escalationId,
      });
      proposalOutcome = o?.status === 'applied' ? 'executed' : 'failed';
      const shells = o?.status === 'applied' ? o.effects.filter((e): e is ShellEffect => e.kind === 'shell') : [];
      // approved-shell-v1: an approved `shell` command (the typical danger zone) really runs now,
      // in the sandbox like the agent loop's own; escalations started before this ran none.
      const ran = shells.length > 0 && patched('approved-shell-v1') ? await Promise.all(shells.map((e) => runApprovedShell(e, input.tick ?? 0))) : [];
      const rest = o?.effects.filter((e) => !(ran.length && e.kind === 'shell')) ?? [];
      proposalResult = `${o?.message ?? 'no outcome'}${ran.length ? `\n${ran.join('\n')}` : ''}${rest.length ? ` (loop effects not run here: ${rest.map((e) => e.kind).join(', ')})` : ''}`;
      if (ran.length && ran.some((r) => !r.startsWith('exit 0'))) proposalOutcome = 'failed';
    } else {
      const [tool, action] = input.proposal.name.split('.', 2) as [string, string];
      const r = await db.callTool({ agentId, tool, action: action ?? '', args: input.proposal.args, key: `${info.workflowId}/execute`, approvedBy: escalationId });
      proposalOutcome = r.ok ? 'executed' : 'failed';
      proposalResult = r.ok ? JSON.stringify(r.output).slice(0, 500) : r.error;
    }
  }
  /** An approved `shell` command: the sandbox runs it, its output goes to its command_log row; returns a summary line and the output. */
  async function runApprovedShell(e: ShellEffect, tick: number): Promise<string> {
    let result: SandboxRunResult | null = null;
    let error: string | undefined;
    try {
      result = await sandbox.sandboxRun({ key: e.key, command: ['sh', '-c', e.command], budget: { wallMs: e.timeoutMs ?? 30_000 } });
    } catch (err) {
      error = causeMessage(err);
    }
    const { summary } = await db.recordShellResult({ agentId, tick, cmdId: e.cmdId, processId: e.processId, command: e.command, result, ...(error ? { error } : {}) });
    return `${summary}${result?.stdout ? `\n${tail(result.stdout, 1500)}` : ''}${result?.stderr ? `\n${tail(result.stderr, 500)}` : ''}`;
  }

  let designedTool: EscalationResult['designedTool'];
  if (design?.passed && decision.outcome === 'approved') {
    const reg = await db.registerDesignedTool({ agentId, escalationId, design: design.design, rounds: designRounds });
    designedTool = { name: design.design.spec.name, toolId: reg.toolId, rounds: designRounds };
  }

  const finished = await db.finishEscalation({
    escalationId,
    agentId,
    category: input.category,
    outcome: decision.outcome,
    decidedBy: decision.decidedBy,
    why: oversightError && decision.decidedBy !== 'oversight' ? `${decision.why}; oversight unavailable: ${oversightError}` : decision.why,
    answer: run ? run.answer : null,
    human,
    ...(input.proposal ? { proposal: input.proposal } : {}),
    proposalOutcome,
    proposalResult,
    designedTool: designedTool?.name,
  });
  status = 'decided';

  // The agent reads the note on its next tick; wake it if it idles (it may not be running).
  try {
    await getExternalWorkflowHandle(`agent/${agentId}`).signal('wake', { reason: 'note' });
  } catch (err) {
    log.info('agent loop not woken', { agentId, error: causeMessage(err) });
  }
  await condition(allHandlersFinished);
  if (!decision) throw ApplicationFailure.nonRetryable('no decision', 'Internal');
  return {
    escalationId,
    outcome: decision.outcome,
    decidedBy: decision.decidedBy,
    why: decision.why,
    grantedTools: finished.grantedTools,
    noteId: finished.noteId,
    proposalOutcome,
    designedTool,
    designRounds,
    learning: finished.learning,
  };
}
