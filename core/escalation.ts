/**
 * Escalations as data both sides share: the workflow input (zod, so a start from the
 * Temporal UI with bad JSON fails at once naming the fields), the human updates, the
 * oversight's structured answer and the prompts of its sub-agents. Pure.
 */
import { formatIssues } from './zod-issues.js';
import { z } from 'zod';
import { stateMachineSchema } from './state-machines.js';

/** The oversight's sub-agents; also the `escalations.category` CHECK. */
export const escalationCategories = [
  'statistics',
  'code',
  'visualization',
  'state_machine_designer',
  'general',
] as const;
export type EscalationCategory = (typeof escalationCategories)[number];

const key = z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'expected letters, digits, _ . - (max 64)');

/** An action held until approved (a danger-zone command or tool action). */
const proposalSchema = z.strictObject({
  /** `lifeforce`: more budget (`grant`, args `{budgetId, amount}`); only a human decides it. */
  kind: z.enum(['command', 'tool', 'lifeforce']),
  /** Command type, `tool.action`, or `grant`. */
  name: z.string().min(1).max(200),
  args: z.record(z.string(), z.unknown()).default({}),
});
export type Proposal = z.infer<typeof proposalSchema>;

/** The args of a `lifeforce` proposal. */
export const lifeforceGrantArgs = z.strictObject({
  budgetId: z.string().min(1).max(200),
  amount: z.number().positive().max(1e9),
});

export const escalationInput = z.strictObject({
  escalationId: key,
  agentId: key,
  task: z.string().trim().min(1).max(4000),
  category: z.enum(escalationCategories).default('general'),
  context: z.record(z.string(), z.unknown()).default({}),
  whatITried: z.string().max(4000).default(''),
  /** Set by danger checks; the oversight may also ask for a human. */
  humanRequired: z.boolean().default(false),
  dangerFlags: z.array(z.string().min(1)).default([]),
  proposal: proposalSchema.optional(),
  /** How long a required human answer is waited for, then the grace period (WAIT) before denying. */
  deadlineMs: z
    .number()
    .int()
    .min(1000)
    .max(30 * 86_400_000)
    .default(86_400_000),
  graceMs: z
    .number()
    .int()
    .min(0)
    .max(30 * 86_400_000)
    .default(3_600_000),
  /** Design rounds (state_machine_designer) before giving up. */
  maxDesignRounds: z.number().int().min(1).max(5).default(3),
  tick: z.number().int().min(0).optional(),
});
export type EscalationInput = z.input<typeof escalationInput>;
export type ParsedEscalationInput = z.output<typeof escalationInput>;

const who = z.string().trim().min(1).max(200).default('human');
export const humanApproveInput = z.strictObject({ by: who, comment: z.string().max(4000).optional() });
export const humanRejectInput = z.strictObject({
  by: who,
  reason: z.string().trim().min(1, 'give a reason').max(4000),
});
export const humanNudgeInput = z.strictObject({
  by: who,
  text: z.string().trim().min(1, 'a nudge needs text').max(4000),
});
export const humanVetoInput = z.strictObject({ by: who, reason: z.string().trim().min(1, 'give a reason').max(4000) });

/** A designed state-machine tool: its spec, a JS module and node:test tests. */
const toolDesignSchema = z.strictObject({
  spec: stateMachineSchema,
  implementation: z.string().min(1).max(64_000),
  tests: z.string().min(1).max(64_000),
});
export type ToolDesign = z.infer<typeof toolDesignSchema>;

/** What an oversight sub-agent must answer (JSON). */
const oversightAnswerSchema = z.strictObject({
  verdict: z.enum(['approve', 'nudge', 'reject']),
  solution: z.string().min(1).max(16_000),
  teaching_moment: z.string().min(1).max(4000),
  recommended_tools: z.array(z.string().min(1).max(64)).max(10).default([]),
  needs_human: z.boolean().default(false),
  comment: z.string().max(4000).optional(),
  design: toolDesignSchema.optional(),
});
export type OversightAnswer = z.output<typeof oversightAnswerSchema>;

export const oversightAnswerJsonSchema = z.toJSONSchema(oversightAnswerSchema, { io: 'input' }) as Record<
  string,
  unknown
>;

/** Parse a model's reply: the answer, or a message naming what is wrong. */
export function parseOversightAnswer(
  text: string,
): { ok: true; answer: OversightAnswer } | { ok: false; message: string } {
  const trimmed = text
    .trim()
    .replace(/^```(?:json)?\s*/i, '')
    .replace(/```\s*$/, '');
  let json: unknown;
  try {
    json = JSON.parse(trimmed);
  } catch (err) {
    return { ok: false, message: `the answer is not JSON (${(err as Error).message})` };
  }
  const r = oversightAnswerSchema.safeParse(json);
  if (!r.success) return { ok: false, message: formatIssues(r.error, '(answer)') };
  return { ok: true, answer: r.data };
}

/** Each sub-agent's brief (the graph routes by category to one of them). */
export const subAgentBriefs: Record<EscalationCategory, string> = {
  statistics: 'You are the statistics specialist of the oversight tier: estimators, tests, sample sizes, uncertainty.',
  code: 'You are the code specialist of the oversight tier: correct, minimal, tested code and the bug behind the symptom.',
  visualization:
    'You are the visualization specialist of the oversight tier: the right chart for the question, axes, encodings.',
  state_machine_designer:
    'You are the state-machine designer of the oversight tier. Design a tool as a state machine: `design.spec` {name, description, initial, states: {STATE: {description, actions: {action: {to?, description, args?}}}}}, `design.implementation` (an ES module exporting `run(state, action, args)`) and `design.tests` (node:test tests importing ./tool.mjs).',
  general: 'You are the general counsel of the oversight tier: plan, priorities, what to try next.',
};

/** The user message of a sub-agent: the escalation, plus the feedback of a failed design round. */
export function oversightPrompt(
  e: Pick<ParsedEscalationInput, 'task' | 'category' | 'context' | 'whatITried' | 'dangerFlags' | 'proposal'>,
  extra: { feedback?: string; round?: number; catalogue?: string[] } = {},
): string {
  const parts = [
    `Escalation (${e.category}): ${e.task}`,
    `Context: ${JSON.stringify(e.context)}`,
    `What the agent tried: ${e.whatITried || '(nothing said)'}`,
  ];
  if (e.proposal) parts.push(`The agent proposes to run: ${e.proposal.name} ${JSON.stringify(e.proposal.args)}`);
  if (e.dangerFlags.length) parts.push(`Danger flags: ${e.dangerFlags.join(', ')} (a human must approve)`);
  if (extra.catalogue?.length) parts.push(`Tools you may recommend: ${extra.catalogue.join(', ')}`);
  if (extra.feedback)
    parts.push(`Design round ${extra.round ?? 2}: the previous design failed its tests:\n${extra.feedback}\nFix it.`);
  parts.push(
    'Answer with one JSON object: {verdict: approve|nudge|reject, solution, teaching_moment, recommended_tools: [], needs_human: bool, comment?, design?}.',
  );
  return parts.join('\n');
}

/** Escalations of one category before the oversight grants that category's tools outright. */
export const grantAfterEscalations = 5;
