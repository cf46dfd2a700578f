/**
 * `finishEscalation`: the escalation settled. Its row and decision_log outcome, the tools it
 * grants, the answer to the agent (a partnership message AND an incoming note), a learning
 * moment for a nudge, and a human's rejection of the held action as feedback.
 */
import type { EscalationCategory, OversightAnswer, Proposal } from '../../core/escalation.js';
import type { Decider, HumanVerdict, Outcome } from '../../core/escalation-rules.js';
import { agentShard } from '../../core/learnings.js';
import {
  addPartnershipMessage,
  closeEscalation,
  grantEscalationTools,
  keepLearningMoment,
} from '../../db/queries/escalations.js';
import { LearningRefusedError, recordFeedback, saveLearning, type FeedbackResult } from '../../db/queries/learnings.js';
import { addNoteOnce } from '../../db/queries/notes.js';
import type { Queryable } from '../../db/queries/abstracts.js';
import type { OversightDeps } from './graph.js';
import { tellFeedbackLearning, tellLearning } from '../agent-events.js';

export interface FinishEscalationInput {
  escalationId: string;
  agentId: string;
  category: EscalationCategory;
  outcome: Outcome;
  decidedBy: Decider;
  why: string;
  answer: OversightAnswer | null;
  human: { verdict: HumanVerdict; by: string; comment?: string } | null;
  /** The held action, if any, and what happened to it. */
  proposal?: Proposal;
  proposalOutcome?: 'executed' | 'blocked' | 'failed';
  proposalResult?: string;
  designedTool?: string;
}

export interface FinishEscalationResult {
  grantedTools: string[];
  noteId: number;
  learning: { id: number } | { refused: string } | null;
  feedback: FeedbackResult | { refused: string } | null;
}

type Settled = { grantedTools: string[]; grantReason: string; firstFinish: boolean };

/** Grants (only with an answer that is not a denial), then the escalation's and decision_log's final rows. */
async function settle(q: Queryable, input: FinishEscalationInput): Promise<Settled> {
  const granted =
    input.outcome !== 'denied'
      ? await grantEscalationTools(q, {
          agentId: input.agentId,
          escalationId: input.escalationId,
          category: input.category,
          recommended: input.answer?.recommended_tools ?? [],
        })
      : { newly: [], grantReason: '' };
  const closed = await closeEscalation(q, {
    escalationId: input.escalationId,
    outcome: input.outcome,
    decidedBy: input.decidedBy,
    newlyGranted: granted.newly,
    decisionOutcome: input.proposalOutcome ?? (input.outcome === 'denied' ? 'blocked' : 'executed'),
    human: input.human,
  });
  return { ...closed, grantReason: granted.grantReason };
}

/** What the agent is told: the decision, the human's word, the solution, its action's fate, the tools. */
function answerText(input: FinishEscalationInput, settled: Settled): string {
  const { outcome, answer } = input;
  const verdictText = outcome === 'approved' ? 'approved' : outcome === 'nudged' ? 'nudged' : 'denied';
  const lines = [
    `Escalation ${input.escalationId} (${input.category}): ${verdictText} by ${input.decidedBy} — ${input.why}.`,
  ];
  if (input.human?.comment) lines.push(`Human: ${input.human.comment}`);
  if (answer && outcome !== 'denied')
    lines.push(`Solution: ${answer.solution}`, `Teaching moment: ${answer.teaching_moment}`);
  if (input.proposalOutcome)
    lines.push(
      `Your proposed action: ${input.proposalOutcome}${input.proposalResult ? ` — ${input.proposalResult}` : ''}.`,
    );
  if (input.designedTool) lines.push(`New tool in your catalogue: ${input.designedTool}.`);
  if (settled.grantReason) lines.push(settled.grantReason);
  else if (settled.grantedTools.length) lines.push(`Tools granted: ${settled.grantedTools.join(', ')}.`);
  return lines.join('\n');
}

/** The answer as partnership messages (and the teaching) and as an incoming note; returns the note's id. */
async function sendAnswer(
  q: Queryable,
  input: FinishEscalationInput,
  body: string,
  grantedTools: string[],
): Promise<number> {
  const { agentId, escalationId, outcome, answer } = input;
  const fromTier = input.decidedBy === 'human' ? 'human' : 'oversight';
  const kind =
    outcome === 'approved'
      ? 'approval'
      : outcome === 'nudged'
        ? 'nudge'
        : input.human?.verdict === 'veto'
          ? 'veto'
          : 'rejection';
  await addPartnershipMessage(q, {
    agentId,
    fromTier,
    toTier: 'agent',
    kind,
    body,
    escalationId,
    metadata: { decidedBy: input.decidedBy, grantedTools },
    idempotencyKey: `${escalationId}:answer`,
  });
  if (answer && outcome !== 'denied') {
    await addPartnershipMessage(q, {
      agentId,
      fromTier: 'oversight',
      toTier: 'agent',
      kind: 'teaching',
      body: answer.teaching_moment,
      escalationId,
      idempotencyKey: `${escalationId}:teaching`,
    });
  }
  const sender = input.decidedBy === 'human' ? (input.human?.by ?? 'human') : 'oversight';
  return addNoteOnce(q, {
    agentId,
    direction: 'in',
    source: fromTier,
    sender,
    priority: 5,
    tags: ['escalation', input.category],
    text: body,
    idempotencyKey: `${escalationId}:note`,
  });
}

/**
 * A nudge's learning moment: a `nudge` learning through the store, whose guard decides whether
 * it is allowed; refused (rate limit, cap, an empty hint) → kept in the decision log.
 */
async function learningMoment(
  { db, events }: OversightDeps,
  input: FinishEscalationInput,
): Promise<{ id: number } | { refused: string }> {
  const { answer, escalationId, agentId } = input;
  const hint =
    input.human?.verdict === 'nudge' ? (input.human.comment ?? '') : (answer?.comment ?? answer?.teaching_moment ?? '');
  const learning = {
    shardType: agentShard(agentId),
    predicate: 'nudge',
    args: { category: input.category, hint: hint.slice(0, 200) },
  };
  try {
    const r = await saveLearning(db, { ...learning, source: `escalation/${escalationId}`, agentId });
    tellLearning(events, agentId, { ...learning, confidence: r.confidence, reinforced: r.reinforced });
    return { id: r.id };
  } catch (err) {
    await keepLearningMoment(db, escalationId, `${hint} (learning store: ${(err as Error).message})`);
    return { refused: (err as Error).message };
  }
}

/**
 * A human who rejects or vetoes the agent's held action is feedback, like `mindloop feedback
 * <agent> reject <action> --reason …` (counted once: a retried finish skips it).
 */
async function humanFeedback(
  { db, events }: OversightDeps,
  input: FinishEscalationInput,
  firstFinish: boolean,
): Promise<FeedbackResult | { refused: string } | null> {
  const rejected = input.human && (input.human.verdict === 'reject' || input.human.verdict === 'veto');
  if (!input.proposal || !rejected || !firstFinish) return null;
  const action = (
    input.proposal.kind === 'tool' ? `tool.${input.proposal.name.split('.', 1)[0]}` : input.proposal.name
  ).toLowerCase();
  try {
    const r = await recordFeedback(db, {
      agentId: input.agentId,
      kind: 'reject',
      action,
      ...(input.human?.comment ? { reason: input.human.comment.slice(0, 500) } : {}),
      source: `escalation/${input.escalationId}`,
    });
    tellFeedbackLearning(events, { agentId: input.agentId }, r);
    return r;
  } catch (err) {
    if (!(err instanceof LearningRefusedError)) throw err;
    return { refused: err.message };
  }
}

/**
 * Settle the escalation: its row, the decision_log outcome, tools granted (recommended
 * ones that exist, plus a category's tools after `grantAfterEscalations` escalations),
 * the answer to the agent as a partnership message AND an incoming note, and for a nudge
 * a learning moment (a learning through the store; refused → kept in decision_log).
 */
export async function finishEscalation(
  deps: OversightDeps,
  input: FinishEscalationInput,
): Promise<FinishEscalationResult> {
  const { db } = deps;
  const settled = await db.transaction((tx) => settle(tx, input));
  const body = answerText(input, settled);
  const noteId = await db.transaction((tx) => sendAnswer(tx, input, body, settled.grantedTools));
  const learning = input.outcome === 'nudged' ? await learningMoment(deps, input) : null;
  const feedback = await humanFeedback(deps, input, settled.firstFinish);
  return { grantedTools: settled.grantedTools, noteId, learning, feedback };
}
