/**
 * The escalation's rows while it runs: opened, the oversight's answer and the design rounds
 * kept, a human's answer recorded, a designed tool registered. Each is idempotent (keys,
 * upserts), so retries are safe.
 */
import { and, eq, inArray, sql } from 'drizzle-orm';
import type { ParsedEscalationInput, ToolDesign } from '../../core/escalation.js';
import type { HumanVerdict } from '../../core/escalation-rules.js';
import { addPartnershipMessage, escalationOwner, upsertDesignedTool } from '../../db/queries/escalations.js';
import { decisionLog, escalations } from '../../db/schema/index.js';
import { ErrorType, nonRetryable } from '../errors.js';
import type { OversightDeps, OversightRun } from './graph.js';

/**
 * Insert the escalation, its decision_log row and the agent's question (idempotent by escalation
 * id). The escalation event goes out once its rows are committed, and only by the call that
 * created them: a retry that finds the row tells nobody again.
 */
export async function openEscalation(
  { db, events }: OversightDeps,
  input: { escalation: ParsedEscalationInput; workflowId: string; deadlineAt: string | null },
): Promise<{ created: boolean }> {
  const e = input.escalation;
  const opened = await db.transaction(async (tx) => {
    const [row] = await tx
      .insert(escalations)
      .values({
        id: e.escalationId,
        agentId: e.agentId,
        task: e.task,
        category: e.category,
        context: e.context,
        whatITried: e.whatITried || null,
        status: 'in_progress',
        workflowId: input.workflowId,
        deadlineAt: input.deadlineAt ? new Date(input.deadlineAt) : null,
      })
      .onConflictDoNothing({ target: escalations.id })
      .returning({ id: escalations.id });
    if (!row) {
      const owner = await escalationOwner(tx, e.escalationId);
      if (owner !== undefined && owner !== e.agentId)
        throw nonRetryable(ErrorType.Forbidden, `escalation '${e.escalationId}' belongs to agent '${owner}'`);
      return { created: false };
    }
    await tx.insert(decisionLog).values({
      agentId: e.agentId,
      tick: e.tick ?? null,
      proposal: { task: e.task, category: e.category, ...(e.proposal ? { action: e.proposal } : {}) },
      dangerFlags: e.dangerFlags,
      escalationId: e.escalationId,
      outcome: e.humanRequired ? 'waiting' : 'pending',
    });
    await addPartnershipMessage(tx, {
      agentId: e.agentId,
      fromTier: 'agent',
      toTier: 'oversight',
      kind: 'question',
      body: e.task,
      escalationId: e.escalationId,
      metadata: { category: e.category, whatITried: e.whatITried, dangerFlags: e.dangerFlags },
      idempotencyKey: `${e.escalationId}:question`,
    });
    return { created: true };
  });
  if (opened.created) {
    events?.event(e.agentId, 'escalation', {
      escalationId: e.escalationId,
      category: e.category,
      reason: e.task,
      humanRequired: e.humanRequired,
      ...(e.tick !== undefined ? { tick: e.tick } : {}),
    });
  }
  return opened;
}

/** Keep the oversight's answer (advice until the rules make it the decision). */
export async function recordOversightAnswer(
  { db }: OversightDeps,
  input: { escalationId: string; agentId: string; run: OversightRun; round: number; awaitingHuman: boolean },
): Promise<void> {
  const { answer } = input.run;
  await db.transaction(async (tx) => {
    await tx
      .update(escalations)
      .set({
        solution: answer.solution,
        teachingMoment: answer.teaching_moment,
        status: input.awaitingHuman ? 'awaiting_human' : 'in_progress',
      })
      .where(eq(escalations.id, input.escalationId));
    await tx
      .update(decisionLog)
      .set({
        oversightAnswer: answer.verdict,
        oversightComment: answer.comment ?? (answer.verdict === 'approve' ? null : answer.teaching_moment),
      })
      .where(eq(decisionLog.escalationId, input.escalationId));
    await addPartnershipMessage(tx, {
      agentId: input.agentId,
      fromTier: 'oversight',
      toTier: input.awaitingHuman ? 'human' : 'agent',
      kind: input.awaitingHuman ? 'review_request' : 'answer',
      body: answer.solution,
      escalationId: input.escalationId,
      metadata: {
        route: input.run.route,
        verdict: answer.verdict,
        round: input.round,
        recommended: answer.recommended_tools,
        callIds: input.run.callIds,
      },
      idempotencyKey: `${input.escalationId}:oversight:r${input.round}`,
    });
  });
}

/**
 * The workflow now waits for a human who was not required at the start (the oversight
 * asked for one, or failed): the escalation gets its deadline and the awaiting status.
 * A deadline already set is kept (idempotent).
 */
export async function markAwaitingHuman(
  { db }: OversightDeps,
  input: { escalationId: string; deadlineAt: string },
): Promise<void> {
  await db
    .update(escalations)
    .set({
      deadlineAt: sql`coalesce(${escalations.deadlineAt}, ${new Date(input.deadlineAt).toISOString()}::timestamptz)`,
      status: 'awaiting_human',
    })
    .where(
      and(
        eq(escalations.id, input.escalationId),
        inArray(escalations.status, ['open', 'in_progress', 'awaiting_human']),
      ),
    );
}

/** A design round's test result, kept in the conversation (the feedback of a failed round goes back for v2). */
export async function recordDesignRound(
  { db }: OversightDeps,
  input: { escalationId: string; agentId: string; round: number; ok: boolean; feedback: string; toolName: string },
): Promise<void> {
  await addPartnershipMessage(db, {
    agentId: input.agentId,
    fromTier: 'agent',
    toTier: 'oversight',
    kind: input.ok ? 'design_passed' : 'design_failed',
    body: input.feedback,
    escalationId: input.escalationId,
    metadata: { round: input.round, tool: input.toolName },
    idempotencyKey: `${input.escalationId}:design:r${input.round}`,
  });
}

/** A human's answer, as it arrived (append-only); the decision is made by the workflow's rules. */
export async function recordHumanAnswer(
  { db }: OversightDeps,
  input: {
    escalationId: string;
    agentId: string;
    verdict: HumanVerdict;
    by: string;
    comment?: string;
    updateId: string;
  },
): Promise<void> {
  await db.transaction(async (tx) => {
    await tx
      .update(decisionLog)
      .set({ humanAnswer: input.verdict, humanComment: input.comment ?? null })
      .where(eq(decisionLog.escalationId, input.escalationId));
    await addPartnershipMessage(tx, {
      agentId: input.agentId,
      fromTier: 'human',
      toTier: 'oversight',
      kind: input.verdict,
      body: input.comment ?? input.verdict,
      escalationId: input.escalationId,
      metadata: { by: input.by },
      idempotencyKey: `${input.escalationId}:human:${input.updateId}`,
    });
  });
}

/** A design that passed its tests and was approved joins the catalogue, discovered by its agent (via design). */
export async function registerDesignedTool(
  { db }: OversightDeps,
  input: { agentId: string; escalationId: string; design: ToolDesign; rounds: number },
): Promise<{ toolId: number; version: number }> {
  return db.transaction(async (tx) => {
    const r = await upsertDesignedTool(tx, input);
    if ('takenBy' in r)
      throw nonRetryable(ErrorType.Forbidden, `tool name '${input.design.spec.name}' belongs to a ${r.takenBy} tool`);
    return r;
  });
}
