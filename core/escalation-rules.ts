/**
 * Conflict rules between the tiers, as one pure function the escalation workflow
 * calls after every event (oversight answer, human update, deadline):
 *   1. a human veto beats everything (an oversight approval included);
 *   2. a human approval beats the oversight's answer; a human rejection or nudge likewise;
 *   3. when no human input is required, the oversight decides day to day;
 *   4. when a human answer is required and none has come: WAIT until the deadline, then keep
 *      waiting through a grace period (status `waiting`), then deny — never a silent approval.
 */

export const oversightVerdicts = ['approve', 'nudge', 'reject'] as const;
type OversightVerdict = (typeof oversightVerdicts)[number];
export const humanVerdicts = ['approve', 'reject', 'nudge', 'veto'] as const;
export type HumanVerdict = (typeof humanVerdicts)[number];

/** Where the clock stands against the human deadline. */
export type DeadlinePhase = 'before_deadline' | 'grace' | 'expired';

interface RuleInput {
  /** A danger flag, or the oversight asking for a human. */
  humanRequired: boolean;
  oversight: { verdict: OversightVerdict; comment?: string } | null;
  human: { verdict: HumanVerdict; comment?: string; by?: string } | null;
  phase: DeadlinePhase;
}

export type Outcome = 'approved' | 'nudged' | 'denied';
export type Decider = 'human' | 'oversight' | 'default';

export type RuleDecision =
  | {
      final: false;
      waitingFor: 'oversight' | 'human';
      status: 'in_progress' | 'awaiting_human' | 'waiting';
      why: string;
    }
  | { final: true; outcome: Outcome; decidedBy: Decider; why: string };

const fromVerdict: Record<OversightVerdict | Exclude<HumanVerdict, 'veto'>, Outcome> = {
  approve: 'approved',
  nudge: 'nudged',
  reject: 'denied',
};

/** Decide, or say what the escalation still waits for. */
export function decide(input: RuleInput): RuleDecision {
  const { human, oversight } = input;
  if (human?.verdict === 'veto') {
    return {
      final: true,
      outcome: 'denied',
      decidedBy: 'human',
      why: `human veto${oversight?.verdict === 'approve' ? ' overrides the oversight approval' : ''}`,
    };
  }
  if (human) {
    const over =
      oversight && oversight.verdict !== human.verdict ? ` (overrides the oversight's ${oversight.verdict})` : '';
    return {
      final: true,
      outcome: fromVerdict[human.verdict],
      decidedBy: 'human',
      why: `human ${human.verdict}${over}`,
    };
  }
  if (!input.humanRequired) {
    if (!oversight)
      return { final: false, waitingFor: 'oversight', status: 'in_progress', why: 'waiting for the oversight' };
    return {
      final: true,
      outcome: fromVerdict[oversight.verdict],
      decidedBy: 'oversight',
      why: `oversight ${oversight.verdict} (no human input required)`,
    };
  }
  // A human answer is required: the oversight's answer is advice, never the decision.
  switch (input.phase) {
    case 'before_deadline':
      return { final: false, waitingFor: 'human', status: 'awaiting_human', why: 'human approval required: WAIT' };
    case 'grace':
      return {
        final: false,
        waitingFor: 'human',
        status: 'waiting',
        why: 'deadline passed without a human answer: WAIT (grace period) before denying',
      };
    case 'expired':
      return {
        final: true,
        outcome: 'denied',
        decidedBy: 'default',
        why: 'no human answer by the deadline and grace period: denied (never silently approved)',
      };
  }
}
