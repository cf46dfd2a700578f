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
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { z } from 'zod';
import type { createOversightActivities, OversightRun } from '../activities/oversight/index.js';
import type { createToolActivities } from '../activities/tools.js';
import type { createCommandActivities } from '../activities/tick/apply-commands.js';
import type { createLifeforceActivities } from '../activities/lifeforce.js';
import type { createShellActivities } from '../activities/shell.js';
import type { createMcpActivities } from '../activities/mcp/index.js';
import type { LoopEffect } from '../core/loop-types.js';
import {
  decide,
  type DeadlinePhase,
  type Decider,
  type HumanVerdict,
  type Outcome,
  type RuleDecision,
} from '../core/escalation-rules.js';
import {
  escalationInput,
  lifeforceGrantArgs,
  humanApproveInput,
  humanNudgeInput,
  humanRejectInput,
  humanVetoInput,
  type EscalationInput,
  type OversightAnswer,
  type ParsedEscalationInput,
  type ToolDesign,
} from '../core/escalation.js';
import { budgetIds } from '../core/lifeforce.js';
import { formatIssues } from '../core/zod-issues.js';
import { clipText, tailText } from '../core/sanitize.js';
import type { SandboxRunRequest, SandboxRunResult } from '../sandbox/sandbox.js';
import { dbActivity, llmActivity, mcpActivity, sandboxActivity } from './lib/activity-options.js';
import { parseWorkflowInput } from './lib/input.js';
import { chargedSandboxRun } from './lib/sandbox-charge.js';
import { agentIdSearchAttribute, kindSearchAttribute } from './lib/search-attributes.js';
import { escalationCurrentDetails, handlerText, timerText } from './lib/ui-text.js';

type Activities = ReturnType<typeof createOversightActivities> &
  ReturnType<typeof createToolActivities> &
  ReturnType<typeof createCommandActivities> &
  ReturnType<typeof createShellActivities> &
  ReturnType<typeof createLifeforceActivities> &
  ReturnType<typeof createMcpActivities>;
type ShellEffect = Extract<LoopEffect, { kind: 'shell' }>;
type McpEffect = Extract<LoopEffect, { kind: 'mcpCall' }>;
interface SandboxActivities {
  sandboxRun(req: SandboxRunRequest): Promise<SandboxRunResult>;
}

const db = proxyActivities<Activities>(dbActivity);
// The whole graph is one activity: the LLM preset (heartbeats, retries; replies are replayed
// from llm_calls by idempotency key, so a retry does not pay twice).
const oversight = proxyActivities<Activities>({
  ...llmActivity,
  retry: {
    ...llmActivity.retry,
    nonRetryableErrorTypes: [...(llmActivity.retry?.nonRetryableErrorTypes ?? []), 'MalformedOversightReply'],
  },
});
const sandbox = proxyActivities<SandboxActivities>({ ...sandboxActivity, scheduleToStartTimeout: '5 minutes' });
// An approved MCP call: done once by its key (the activity records it in mcp_calls before it
// completes, and a retry returns that record), retried while the database is away.
const mcpTools = proxyActivities<Activities>(mcpActivity);

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

const causeMessage = (err: unknown) =>
  err instanceof ActivityFailure && err.cause ? err.cause.message : err instanceof Error ? err.message : String(err);

/** Route an escalation through oversight and the human; deliver the answer to the agent. */
export async function escalationWorkflow(rawInput: EscalationInput): Promise<EscalationResult> {
  const input = parseWorkflowInput('escalationWorkflow', escalationInput, rawInput);
  return new EscalationRun(input).run();
}

type HumanAnswer = { verdict: HumanVerdict; by: string; comment?: string };
type FinalDecision = Extract<RuleDecision, { final: true }>;

/** One escalation: its state and its steps, run one after another in a fixed order (replay checks it). */
class EscalationRun {
  readonly info = workflowInfo();
  readonly escalationId: string;
  readonly agentId: string;
  readonly deadlineAt: number;
  readonly graceEndsAt: number;
  private humanRequired: boolean;
  /** The escalation's own lifeforce budget, once carved. */
  private budgetId: string | undefined;
  private human: HumanAnswer | null = null;
  /** The escalation's row is written (openEscalation done): a human answer can be recorded against it. */
  private opened = false;
  private oversightRun: OversightRun | null = null;
  private verdict: OversightAnswer['verdict'] | null = null;
  private deadlinePhase: DeadlinePhase = 'before_deadline';
  private decision: FinalDecision | null = null;
  private status: EscalationStatus['phase'] = 'oversight';
  private designRounds = 0;
  private design: { design: ToolDesign; passed: boolean } | null = null;
  private oversightError: string | null = null;

  constructor(readonly input: ParsedEscalationInput) {
    this.escalationId = input.escalationId;
    this.agentId = input.agentId;
    this.deadlineAt = this.info.startTime.getTime() + input.deadlineMs;
    this.graceEndsAt = this.deadlineAt + input.graceMs;
    // More lifeforce is a human's grant: no model decides to give an agent more budget.
    this.humanRequired = input.humanRequired || input.dangerFlags.length > 0 || input.proposal?.kind === 'lifeforce';
  }

  async run(): Promise<EscalationResult> {
    const { input, escalationId, agentId } = this;
    upsertSearchAttributes([
      { key: agentIdSearchAttribute, value: agentId },
      { key: kindSearchAttribute, value: 'escalation' },
    ]);
    this.registerHandlers();
    this.setStatus('oversight');

    // The deadline is recorded once a human is required: at the start, or when the wait begins.
    const deadlineRecorded = this.humanRequired;
    await db.openEscalation({
      escalation: input,
      workflowId: this.info.workflowId,
      deadlineAt: this.humanRequired ? new Date(this.deadlineAt).toISOString() : null,
    });
    this.opened = true;

    // escalation-budget-v1: the oversight's calls spend a budget carved from the agent's; the
    // rest goes back when the escalation is decided. (A lifeforce escalation asks no model.)
    if (input.proposal?.kind !== 'lifeforce' && patched('escalation-budget-v1')) {
      const carved = await db.openChildBudget({
        parentId: budgetIds.agent(agentId),
        id: budgetIds.escalation(escalationId),
        agentId,
        scope: 'escalation',
        amount: null,
        at: new Date().toISOString(),
      });
      if (carved.ok) this.budgetId = carved.budgetId;
    }

    // 1. The oversight graph (and, for a design, its test rounds in the sandbox).
    await this.consultOversight();
    const run = this.oversightRun;
    if (run)
      await db.recordOversightAnswer({
        escalationId,
        agentId,
        run: { ...run, answer: { ...run.answer, verdict: this.verdict! } },
        round: Math.max(this.designRounds, 1),
        awaitingHuman: this.humanRequired,
      });

    // 2. The rules decide, or say what to wait for.
    const decision = await this.decideOrWait(deadlineRecorded);
    this.setStatus('executing');

    // 3. Effects of the decision: the held action runs only when approved; an approved design joins the catalogue.
    const { proposalOutcome, proposalResult } = await this.executeProposal(decision);
    let designedTool: EscalationResult['designedTool'];
    const design = this.design;
    if (design?.passed && decision.outcome === 'approved') {
      const reg = await db.registerDesignedTool({
        agentId,
        escalationId,
        design: design.design,
        rounds: this.designRounds,
      });
      designedTool = { name: design.design.spec.name, toolId: reg.toolId, rounds: this.designRounds };
    }

    const finished = await db.finishEscalation({
      escalationId,
      agentId,
      category: input.category,
      outcome: decision.outcome,
      decidedBy: decision.decidedBy,
      why:
        this.oversightError && decision.decidedBy !== 'oversight'
          ? `${decision.why}; oversight unavailable: ${this.oversightError}`
          : decision.why,
      answer: run ? run.answer : null,
      human: this.human,
      ...(input.proposal ? { proposal: input.proposal } : {}),
      proposalOutcome,
      proposalResult,
      designedTool: designedTool?.name,
    });
    this.setStatus('decided');
    if (this.budgetId) await db.closeChildBudget({ budgetId: this.budgetId, reason: `escalation ${decision.outcome}` });

    // The agent reads the note on its next tick; wake it if it idles (it may not be running).
    try {
      await getExternalWorkflowHandle(`agent/${agentId}`).signal('wake', { reason: 'note' });
    } catch (err) {
      log.info('agent loop not woken', { agentId, error: causeMessage(err) });
    }
    await condition(allHandlersFinished);
    if (!this.decision) throw ApplicationFailure.nonRetryable('no decision', 'Internal');
    return {
      escalationId,
      outcome: decision.outcome,
      decidedBy: decision.decidedBy,
      why: decision.why,
      grantedTools: finished.grantedTools,
      noteId: finished.noteId,
      proposalOutcome,
      designedTool,
      designRounds: this.designRounds,
      learning: finished.learning,
    };
  }

  private snapshot(): EscalationStatus {
    const { oversightRun: run, verdict, human, decision } = this;
    return {
      escalationId: this.escalationId,
      phase: this.status,
      humanRequired: this.humanRequired,
      oversight: run && verdict ? { verdict, route: run.route } : null,
      human: human ? { verdict: human.verdict, by: human.by } : null,
      decision: decision ? { outcome: decision.outcome, decidedBy: decision.decidedBy, why: decision.why } : null,
      deadlineAt: new Date(this.deadlineAt).toISOString(),
      designRounds: this.designRounds,
    };
  }

  /** The phase the status query shows, also as the workflow's current details (no command). */
  private setStatus(status: EscalationStatus['phase'], until?: number): void {
    this.status = status;
    setCurrentDetails(
      escalationCurrentDetails({
        phase: status,
        until: until === undefined ? undefined : new Date(until).toISOString(),
        designRound: this.designRounds,
      }),
    );
  }

  private registerHandlers(): void {
    const text = handlerText.escalation;
    setHandler(escalationStatusQuery, () => this.snapshot(), { description: text.status });
    const approve = this.humanHandler('approve', humanApproveInput, (a) => a.comment);
    const reject = this.humanHandler('reject', humanRejectInput, (a) => a.reason);
    const nudge = this.humanHandler('nudge', humanNudgeInput, (a) => a.text);
    const veto = this.humanHandler('veto', humanVetoInput, (a) => a.reason);
    setHandler(approveUpdate, approve.handler, { validator: approve.validator, description: text.approve });
    setHandler(rejectUpdate, reject.handler, { validator: reject.validator, description: text.reject });
    setHandler(nudgeUpdate, nudge.handler, { validator: nudge.validator, description: text.nudge });
    setHandler(vetoUpdate, veto.handler, { validator: veto.validator, description: text.veto });
  }

  /** A human's answer as an update: validated (one answer, before the decision), recorded, answered with the status. */
  private humanHandler<S extends z.ZodType>(
    verdictOf: HumanVerdict,
    schema: S,
    commentOf: (a: z.output<S>) => string | undefined,
  ) {
    return {
      handler: async (arg: z.input<S>): Promise<EscalationStatus> => {
        const a = schema.parse(arg) as z.output<S> & { by: string };
        // Set before the write: the rules see the answer at once, the activity only records it.
        this.human = { verdict: verdictOf, by: a.by, comment: commentOf(a) };
        // An answer may come in the very first workflow task: it is recorded once the escalation's
        // row exists (the two activities would otherwise race, and the answer's row needs it).
        if (!this.opened && patched('human-after-open-v1')) await condition(() => this.opened);
        await db.recordHumanAnswer({
          escalationId: this.escalationId,
          agentId: this.agentId,
          verdict: verdictOf,
          by: a.by,
          comment: commentOf(a),
          updateId: currentUpdateInfo()?.id ?? verdictOf,
        });
        return this.snapshot();
      },
      validator: (arg: z.input<S>): void => {
        const r = schema.safeParse(arg);
        if (!r.success) throw new Error(`invalid ${verdictOf}: ${formatIssues(r.error)}`);
        if (this.decision)
          throw new Error(
            `escalation ${this.escalationId} is already decided (${this.decision.outcome} by ${this.decision.decidedBy})`,
          );
        if (this.human)
          throw new Error(
            `escalation ${this.escalationId} already has a human answer (${this.human.verdict} by ${this.human.by})`,
          );
      },
    };
  }

  /** The oversight's answer; for a state-machine design, up to `maxDesignRounds` rounds of tests in the sandbox. */
  private async consultOversight(): Promise<void> {
    const { input, escalationId } = this;
    if (input.proposal?.kind === 'lifeforce') {
      // The budget is exhausted: an oversight model would spend what is not there.
      this.oversightError = 'a lifeforce grant is decided by a human only';
      return;
    }
    let feedback: string | undefined;
    for (let round = 1; round <= input.maxDesignRounds && !this.human; round++) {
      let run: OversightRun;
      try {
        run = await oversight.runOversight({
          escalation: input,
          round,
          feedback,
          key: this.info.workflowId,
          ...(this.budgetId ? { budgetId: this.budgetId } : {}),
        });
      } catch (err) {
        // No oversight answer (no model, malformed replies): the human decides — never a silent approval.
        this.oversightError = causeMessage(err);
        log.warn('oversight unavailable; a human must decide', { escalationId, error: this.oversightError });
        this.humanRequired = true;
        break;
      }
      this.oversightRun = run;
      this.verdict = run.answer.verdict;
      if (run.answer.needs_human) this.humanRequired = true;
      const d = run.answer.design;
      if (input.category !== 'state_machine_designer' || !d) break;
      this.designRounds = round;
      this.setStatus('designing');
      const tested = await this.testDesign(d, round);
      feedback = tested.feedback ?? feedback;
      this.design = { design: d, passed: tested.passed };
      if (tested.passed || !tested.ran) break; // an unavailable sandbox is not the design's fault: no more rounds
    }
    if (this.design && !this.design.passed) {
      // A design that never passed is not approvable, whatever the answer said.
      this.verdict = 'reject';
    }
  }

  /** One design round: the design's tests in the sandbox, recorded; the feedback for the next round. */
  private async testDesign(
    d: ToolDesign,
    round: number,
  ): Promise<{ passed: boolean; ran: boolean; feedback?: string }> {
    let result: SandboxRunResult | null = null;
    let feedback: string | undefined;
    const testRun = {
      key: `${this.info.workflowId}/design/r${round}`,
      command: ['node', '--test', 'tool.test.mjs'],
      files: {
        'tool.mjs': d.implementation,
        'tool.test.mjs': d.tests,
        'spec.json': JSON.stringify(d.spec),
        'package.json': '{"type":"module"}',
      },
      budget: { wallMs: 60_000 },
    };
    try {
      // sandbox-charge-v1: the round's tests are charged to the escalation's budget (the agent's
      // where none was carved); escalations begun before ran them uncharged, and replay so.
      const payer = {
        agentId: this.agentId,
        budgetId: this.budgetId ?? budgetIds.agent(this.agentId),
        reason: `design round ${round}: tests of ${d.spec.name}`,
      };
      result = patched('sandbox-charge-v1')
        ? await chargedSandboxRun(db, sandbox.sandboxRun, testRun, payer)
        : await sandbox.sandboxRun(testRun);
    } catch (err) {
      feedback = `the sandbox could not run the tests: ${causeMessage(err)}`;
    }
    const passed = !!result && result.status === 'ok' && result.exitCode === 0;
    if (result && !passed)
      feedback = `status ${result.status}${result.exceeded ? ` (${result.exceeded})` : ''}, exit ${result.exitCode}\n${tailText(`${result.stdout}\n${result.stderr}`.trim(), 3000)}`;
    await db.recordDesignRound({
      escalationId: this.escalationId,
      agentId: this.agentId,
      round,
      ok: passed,
      feedback: passed ? `round ${round}: tests passed` : feedback!,
      toolName: d.spec.name,
    });
    return { passed, ran: !!result, feedback };
  }

  /** Apply the rules until they decide: waiting for the human to the deadline, then through the grace period. */
  private async decideOrWait(deadlineRecorded: boolean): Promise<FinalDecision> {
    for (;;) {
      const d = decide({
        humanRequired: this.humanRequired,
        oversight: this.verdict ? { verdict: this.verdict } : null,
        human: this.human,
        phase: this.deadlinePhase,
      });
      if (d.final) {
        this.decision = d;
        return d;
      }
      if (d.waitingFor === 'oversight') {
        this.status = d.status === 'waiting' ? 'waiting' : 'awaiting_human';
        // Only reachable without an oversight answer and without a human requirement (not possible after step 1).
        this.humanRequired = true;
        continue;
      }
      const before = this.deadlinePhase === 'before_deadline';
      const until = before ? this.deadlineAt : this.graceEndsAt;
      this.setStatus(d.status === 'waiting' ? 'waiting' : 'awaiting_human', until);
      // deadline-at-v1: a human became required after the start (the oversight asked for one or
      // failed): the escalation row gets its deadline now; escalations started before left it null.
      if (!deadlineRecorded && patched('deadline-at-v1'))
        await db.markAwaitingHuman({
          escalationId: this.escalationId,
          deadlineAt: new Date(this.deadlineAt).toISOString(),
        });
      deadlineRecorded = true;
      const label = timerText.humanDeadline(this.deadlinePhase, before ? this.input.deadlineMs : this.input.graceMs);
      const answered = await condition(() => this.human !== null, Math.max(until - Date.now(), 1), { summary: label });
      if (!answered) this.deadlinePhase = before ? 'grace' : 'expired';
    }
  }

  /** The held action, run only when approved: a command through the ordinary command path, or a tool action. */
  private async executeProposal(
    decision: FinalDecision,
  ): Promise<{ proposalOutcome?: EscalationResult['proposalOutcome']; proposalResult?: string }> {
    const { input, agentId, escalationId } = this;
    if (!input.proposal) return {};
    if (decision.outcome !== 'approved') return { proposalOutcome: 'blocked' };
    if (input.proposal.kind === 'command') return this.runApprovedCommand(input.proposal.name, input.proposal.args);
    if (input.proposal.kind === 'lifeforce') {
      const grant = lifeforceGrantArgs.safeParse(input.proposal.args);
      if (!grant.success)
        return { proposalOutcome: 'failed', proposalResult: `not a grant: ${formatIssues(grant.error, 'args')}` };
      const r = await db.grantLifeforce({
        ...grant.data,
        key: `${this.info.workflowId}/grant`,
        reason: `escalation ${escalationId} approved`,
        by: this.human?.by ?? decision.decidedBy,
      });
      return {
        proposalOutcome: 'executed',
        proposalResult: `granted ${grant.data.amount} LF to ${grant.data.budgetId}${r.granted ? '' : ' (already granted)'}`,
      };
    }
    const [tool, action] = input.proposal.name.split('.', 2) as [string, string];
    const r = await db.callTool({
      agentId,
      tool,
      action: action ?? '',
      args: input.proposal.args,
      key: `${this.info.workflowId}/execute`,
      approvedBy: escalationId,
    });
    return {
      proposalOutcome: r.ok ? 'executed' : 'failed',
      proposalResult: r.ok ? JSON.stringify(r.output).slice(0, 500) : r.error,
    };
  }

  /**
   * An approved command, through the ordinary command path (validation, command_log, idempotency
   * by cmd id), marked approved so that neither the danger check nor a destructive MCP tool holds
   * it again; the work it leaves to the loop (a `shell`, an MCP call) runs here, once.
   */
  private async runApprovedCommand(
    name: string,
    args: Record<string, unknown>,
  ): Promise<{ proposalOutcome: EscalationResult['proposalOutcome']; proposalResult: string }> {
    const { input, agentId, escalationId } = this;
    const tick = input.tick ?? 0;
    const [o] = await db.applyCommands({
      agentId,
      tick,
      workflowId: this.info.workflowId,
      mode: 'main',
      commands: [{ cmdId: `approved.${escalationId}`.slice(0, 120), type: name, args }],
      approvedBy: escalationId,
    });
    let proposalOutcome: EscalationResult['proposalOutcome'] = o?.status === 'applied' ? 'executed' : 'failed';
    const applied = o?.status === 'applied' ? o.effects : [];
    const shells = applied.filter((e): e is ShellEffect => e.kind === 'shell');
    // approved-shell-v1: an approved `shell` command (the typical danger zone) really runs now,
    // in the sandbox like the agent loop's own; escalations started before this ran none.
    const ran =
      shells.length > 0 && patched('approved-shell-v1')
        ? await Promise.all(shells.map((e) => this.runApprovedShell(e, tick)))
        : [];
    if (ran.some((r) => !r.startsWith('exit 0'))) proposalOutcome = 'failed';
    const mcps = applied.filter((e): e is McpEffect => e.kind === 'mcpCall');
    // approved-mcp-v1: an approved `tools.mcp` calls its tool now, once; escalations started before called none.
    const called = mcps.length > 0 && patched('approved-mcp-v1') ? await runApprovedMcp(this.agentId, mcps, tick) : [];
    if (called.some((c) => !c.ok)) proposalOutcome = 'failed';
    const rest =
      o?.effects.filter((e) => !(ran.length && e.kind === 'shell') && !(called.length && e.kind === 'mcpCall')) ?? [];
    const proposalResult = `${o?.message ?? 'no outcome'}${ran.length ? `\n${ran.join('\n')}` : ''}${called.length ? `\n${called.map((c) => c.text).join('\n')}` : ''}${rest.length ? ` (loop effects not run here: ${rest.map((e) => e.kind).join(', ')})` : ''}`;
    return { proposalOutcome, proposalResult };
  }

  /** An approved `shell` command: the sandbox runs it, its output goes to its command_log row; returns a summary line and the output. */
  private async runApprovedShell(e: ShellEffect, tick: number): Promise<string> {
    let result: SandboxRunResult | null = null;
    let error: string | undefined;
    try {
      result = await sandbox.sandboxRun({
        key: e.key,
        command: ['sh', '-c', e.command],
        budget: { wallMs: e.timeoutMs ?? 30_000 },
      });
    } catch (err) {
      error = causeMessage(err);
    }
    const { summary } = await db.recordShellResult({
      agentId: this.agentId,
      tick,
      cmdId: e.cmdId,
      processId: e.processId,
      command: e.command,
      result,
      ...(error ? { error } : {}),
    });
    return `${summary}${result?.stdout ? `\n${tailText(result.stdout, 1500)}` : ''}${result?.stderr ? `\n${tailText(result.stderr, 500)}` : ''}`;
  }
}

/**
 * Approved MCP calls, one after another, each by the `mcpCall` activity under the effect's key:
 * the result lands on the approved command's command_log row and process entry; returns whether
 * each call's status is ok, and its headline and text.
 */
async function runApprovedMcp(
  agentId: string,
  effects: McpEffect[],
  tick: number,
): Promise<Array<{ ok: boolean; text: string }>> {
  const out: Array<{ ok: boolean; text: string }> = [];
  for (const e of effects) {
    try {
      const r = await mcpTools.mcpCall({
        agentId,
        key: e.key,
        server: e.server,
        tool: e.tool,
        args: e.args,
        tick,
        cmdId: e.cmdId,
        processId: e.processId,
        ...(e.price ? { price: e.price } : {}),
      });
      out.push({ ok: r.status === 'ok', text: clipText(r.text || `mcp ${e.server}.${e.tool}: ${r.status}`, 2000) });
    } catch (err) {
      out.push({ ok: false, text: `mcp ${e.server}.${e.tool}: no result recorded (${causeMessage(err)})` });
    }
  }
  return out;
}
