/**
 * The oversight tier: a LangGraph StateGraph run inside ONE activity that heartbeats. A router
 * node sends the escalation by category to a sub-agent node (statistics, code, visualization,
 * state_machine_designer, general); each calls the `oversight` role through the LLM router (so
 * calls are accounted in llm_calls and replayed on retry) and returns a zod-validated answer.
 */
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { ApplicationFailure } from '@temporalio/activity';
import {
  oversightAnswerJsonSchema,
  oversightPrompt,
  parseOversightAnswer,
  subAgentBriefs,
  type EscalationCategory,
  type OversightAnswer,
  type ParsedEscalationInput,
} from '../../core/escalation.js';
import type { Db } from '../../db/client.js';
import { activeToolNames } from '../../db/queries/escalations.js';
import { ErrorType, nonRetryable } from '../errors.js';
import { withHeartbeat } from '../heartbeat.js';
import { ensureOversightModel, LlmUnavailableError, type LlmRouter } from '../llm/index.js';
import type { AgentEventSink } from '../agent-events.js';

export const OversightErrorType = { MalformedReply: 'MalformedOversightReply' } as const;

export interface OversightDeps {
  db: Db;
  llm: LlmRouter;
  /** Attempts per sub-agent at a well-formed answer before MalformedOversightReply. */
  attempts?: number;
  /** Told of each escalation opened and each learning its end saves, once stored. */
  events?: AgentEventSink;
}

/** What the graph returns: the route it took and the validated answer. */
export interface OversightRun {
  route: EscalationCategory;
  answer: OversightAnswer;
  /** llm_calls rows of the answer (and of malformed attempts). */
  callIds: number[];
}

type GraphInput = {
  escalation: ParsedEscalationInput;
  feedback?: string;
  round: number;
  key: string;
  catalogue: string[];
  budgetId?: string;
};

const OversightState = Annotation.Root({
  input: Annotation<GraphInput>(),
  route: Annotation<EscalationCategory>(),
  answer: Annotation<OversightAnswer>(),
  callIds: Annotation<number[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});
type State = typeof OversightState.State;

const categories = [
  'statistics',
  'code',
  'visualization',
  'state_machine_designer',
  'general',
] as const satisfies readonly EscalationCategory[];

/**
 * The sub-agent node of a category: asks the `oversight` role, asks again after a malformed
 * answer, and fails with MalformedOversightReply when no attempt was well-formed.
 */
function subAgent(deps: OversightDeps, category: EscalationCategory, signal: AbortSignal | undefined) {
  const attempts = deps.attempts ?? 2;
  return async (s: State) => {
    const { escalation, feedback, round, key, catalogue, budgetId } = s.input;
    const messages = [
      { role: 'system' as const, content: subAgentBriefs[category] },
      { role: 'user' as const, content: oversightPrompt(escalation, { feedback, round, catalogue }) },
    ];
    const callIds: number[] = [];
    let last = '';
    for (let attempt = 1; attempt <= attempts; attempt++) {
      const r = await deps.llm.chat({
        agentId: escalation.agentId,
        role: 'oversight',
        messages:
          attempt === 1
            ? messages
            : [
                ...messages,
                {
                  role: 'user',
                  content: `Your previous answer was invalid (${last}). Answer again with the JSON object only.`,
                },
              ],
        params: { jsonSchema: oversightAnswerJsonSchema, temperature: 0.2 },
        // Per attempt: a retried activity replays each stored reply instead of paying again.
        idempotencyKey: `${key}/r${round}/${category}/a${attempt}`,
        purpose: `oversight:${category}`,
        tick: escalation.tick,
        // The escalation's own budget (carved from the agent's) pays for its oversight.
        ...(budgetId ? { lifeforce: { budgetId } } : {}),
        signal,
      });
      callIds.push(r.callId);
      const parsed = parseOversightAnswer(r.text);
      if (parsed.ok) return { route: category, answer: parsed.answer, callIds };
      last = parsed.message;
    }
    throw ApplicationFailure.create({
      type: OversightErrorType.MalformedReply,
      nonRetryable: true,
      message: `oversight ${category}: no well-formed answer after ${attempts} attempts: ${last}`,
      details: [{ callIds }],
    });
  };
}

/** The oversight graph: router → one sub-agent per category → END. */
export function buildOversightGraph(deps: OversightDeps, signal?: AbortSignal) {
  return new StateGraph(OversightState)
    .addNode('router', (s: State) => ({ route: s.input.escalation.category }))
    .addNode('statistics', subAgent(deps, 'statistics', signal))
    .addNode('code', subAgent(deps, 'code', signal))
    .addNode('visualization', subAgent(deps, 'visualization', signal))
    .addNode('state_machine_designer', subAgent(deps, 'state_machine_designer', signal))
    .addNode('general', subAgent(deps, 'general', signal))
    .addEdge(START, 'router')
    .addConditionalEdges('router', (s: State) => s.route, [...categories])
    .addEdge('statistics', END)
    .addEdge('code', END)
    .addEdge('visualization', END)
    .addEdge('state_machine_designer', END)
    .addEdge('general', END)
    .compile();
}

/**
 * Run the oversight graph for one escalation (one design round). Heartbeats while the
 * sub-agent thinks. No oversight model → `LlmUnavailable` (the workflow falls back to the human).
 */
export async function runOversight(
  deps: OversightDeps,
  input: { escalation: ParsedEscalationInput; round: number; feedback?: string; key: string; budgetId?: string },
): Promise<OversightRun> {
  return withHeartbeat(
    async (signal) => {
      try {
        await ensureOversightModel(deps.db, input.escalation.agentId);
        const catalogue = await activeToolNames(deps.db);
        const out = await buildOversightGraph(deps, signal).invoke({ input: { ...input, catalogue } });
        return { route: out.route, answer: out.answer, callIds: out.callIds };
      } catch (err) {
        if (err instanceof LlmUnavailableError) throw nonRetryable(ErrorType.LlmUnavailable, err.message);
        throw err;
      }
    },
    { details: { round: input.round } },
  );
}
