/**
 * Loop tests script the tick's reply (`purpose: 'think'`); the reflexes' mini-prompts
 * (emotions, novelty) go to the same scripted row. `thinkScript` keeps the two apart: the script
 * sees only think calls, counted from 0, and the reflexes get a neutral, well-formed answer.
 */
import type { ScriptedReplyFn } from '../../activities/llm/providers/scripted.js';
import type { ChatMessage } from '../../activities/llm/types.js';
import type { ThinkInput, ThinkResult } from '../../activities/tick/think.js';
import type { TickReflexesInput, TickReflexesResult } from '../../activities/reflexes/types.js';

export const neutralReflexReplies: Record<string, string> = {
  emotion: 'calm:2 (steady work)',
  novelty: '{"novelty": 60, "new": ["a test step"], "refined": [], "discarded": [], "tags": ["test"]}',
  validate: '+1 -- fine',
};

/** The script also gets the whole call (registry row, params) as its third argument. */
export function thinkScript(
  script: (messages: ChatMessage[], thinkIndex: number, call: Parameters<ScriptedReplyFn>[0]) => string,
): ScriptedReplyFn {
  let thinkIndex = 0;
  return (call) => {
    const { messages, purpose } = call;
    if (purpose !== undefined && purpose !== 'think') {
      const reply = neutralReflexReplies[purpose];
      if (reply === undefined) throw new Error(`thinkScript: no reply for purpose '${purpose}'`);
      return reply;
    }
    return script(messages, thinkIndex++, call);
  };
}

/** Lifeforce activity fakes for loops run on fake activities: an unlimited budget that never runs out. */
export const unlimitedLifeforce = {
  async ensureAgentBudget(input: { agentId: string }) {
    return unlimitedView(input.agentId);
  },
  async lifeforceState(input: { agentId: string; budgetId?: string }) {
    return { ...unlimitedView(input.agentId), ...(input.budgetId ? { budgetId: input.budgetId } : {}), waitMs: 0 };
  },
  /** A child budget (a campaign's, a fork's): unlimited, like its parent. */
  async openChildBudget(input: { id: string }) {
    return { ok: true as const, budgetId: input.id, carved: 0, unlimited: true };
  },
  async closeChildBudget(_input: { budgetId: string; reason: string }) {},
};

function unlimitedView(agentId: string) {
  return {
    budgetId: `agent:${agentId}`,
    capacity: null,
    available: null,
    reserved: 0,
    spent: 0,
    regenPerHour: 0,
    burnPerHour: 0,
    hoursToExhaustion: null,
    onExhausted: 'pause' as const,
    askFor: 1000,
    priorityKey: 2,
    explicitPriority: null,
    exhausted: false,
  };
}

/** What a fake think answers for `input`: a plain thought with no commands, `extra` on top. */
export function fakeThought(input: ThinkInput, extra: Partial<ThinkResult> = {}): ThinkResult {
  return {
    responseId: input.mode === 'main' ? input.tick : null,
    summary: `thought ${input.tick}`,
    provider: 'scripted',
    model: 'fake',
    commands: [],
    rejected: [],
    parseErrors: [],
    confidence: null,
    unverifiedFacts: 0,
    notesShown: 0,
    promptChars: 100,
    replayed: false,
    ...extra,
  };
}

/** What a fake tickReflexes answers: no validators (auto_pass), nothing stagnant, the tick left as it is. */
export async function autoPassReflexes(input: TickReflexesInput): Promise<TickReflexesResult> {
  return {
    validationMode: 'auto_pass',
    rating: null,
    held: {},
    notes: [],
    novelty: 100,
    identical: false,
    emotions: [],
    params: input.params,
    focus: null,
    stagnation: { ...input.stagnation, lowStreak: 0 },
    effects: [],
    actions: [],
    validatorTimeouts: 0,
    validatorFailures: 0,
    malformed: [],
  };
}

/** A main-loop think's input for `agentId` at `tick`, as the agent loop sends it (fixed clock). */
export function thinkInput(agentId: string, tick: number, maxTokens = 512): ThinkInput {
  return {
    agentId,
    tick,
    workflowId: `agent/${agentId}`,
    now: '2026-11-24T04:00:00.000Z',
    mode: 'main',
    loop: { contextMode: 'standard', recentK: 5, notesMode: 'auto' },
    params: { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0, maxTokens },
  };
}
