/**
 * What an agent's next think will reserve is computed from, as the database knows it (`mindloop
 * lifeforce` shows it): the model a think asks first, its output cap, and its last prompt.
 */
import { and, desc, eq } from 'drizzle-orm';
import type { ThinkBasis } from '../../core/lifeforce.js';
import { configKeys, helpText } from '../../core/catalogue.js';
import { assembleContext, defaultSystemPrompt } from '../../core/context.js';
import { replyFormatInstructions } from '../../core/reply-parser.js';
import type { Db } from '../client.js';
import { agentConfig, agents, systemPrompts } from '../schema/agents.js';
import { tickPrompts } from '../schema/llm.js';
import { usableRegistry } from './llm.js';

/** An agent's next think as the database knows it: the basis of `thinkReservation`, and where its numbers come from. */
interface AgentThinkBasis {
  basis: ThinkBasis;
  /** `provider:model` of the row a think asks first (null: none usable). */
  model: string | null;
  /** The tick whose stored prompt is the basis; null: no think stored yet, the prompt is a floor. */
  promptTick: number | null;
}

/**
 * What the agent's next think will reserve is computed from: the first usable `agent` row of its
 * registry (the one a think asks first), its `max_tokens`, and its last stored prompt. Before any
 * think was stored, the prompt is the part every think's carries (its system prompt, the reply
 * format and the command catalogue), so the reservation computed from it is a floor.
 */
export async function thinkBasis(db: Db, agentId: string): Promise<AgentThinkBasis> {
  const registry = await usableRegistry(db, agentId);
  const [config] = await db
    .select({ value: agentConfig.value })
    .from(agentConfig)
    .where(and(eq(agentConfig.agentId, agentId), eq(agentConfig.key, 'max_tokens')));
  const [last] = await db
    .select({ tick: tickPrompts.tick, messages: tickPrompts.messages })
    .from(tickPrompts)
    .where(eq(tickPrompts.agentId, agentId))
    .orderBy(desc(tickPrompts.tick))
    .limit(1);
  const row = registry.find((r) => r.role === 'agent');
  const maxTokens = configKeys.max_tokens.schema.safeParse(config?.value);
  return {
    basis: {
      model: row ?? null,
      maxTokens: maxTokens.success ? maxTokens.data : configKeys.max_tokens.default,
      prompt: last ? last.messages : await promptFloor(db, agentId),
    },
    model: row ? `${row.provider}:${row.model}` : null,
    promptTick: last?.tick ?? null,
  };
}

/** The messages of a think with nothing in its context but what is always there (activities/tick/context.ts builds the real one). */
async function promptFloor(db: Db, agentId: string): Promise<ThinkBasis['prompt']> {
  const [agent] = await db
    .select({ id: agents.id, name: agents.name, description: agents.description })
    .from(agents)
    .where(eq(agents.id, agentId));
  const prompts = await db
    .select({ kind: systemPrompts.kind, content: systemPrompts.content })
    .from(systemPrompts)
    .where(and(eq(systemPrompts.agentId, agentId), eq(systemPrompts.active, true)))
    .orderBy(desc(systemPrompts.version));
  const prompt = prompts.find((p) => p.kind === 'full') ?? prompts[0];
  const empty = {
    ethics: [],
    tools: [],
    learnings: [],
    responses: [],
    goals: [],
    pinnedTasks: [],
    abstracts: [],
    openProcesses: [],
    commandResults: [],
    notes: [],
    config: {},
    memory: [],
  };
  return assembleContext({
    ...empty,
    agent: { id: agentId, name: agent?.name ?? agentId, description: agent?.description ?? null },
    tick: 0,
    now: '',
    systemPrompt: `${prompt?.content ?? defaultSystemPrompt}\n\n${replyFormatInstructions}`,
    catalogue: helpText(),
    notesMode: 'auto',
    contextMode: 'standard',
    recentK: 0,
  }).messages;
}
