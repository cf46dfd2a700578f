/**
 * What the tick's reflexes (activities/tick/reflexes.ts) share with the pieces they record and
 * ask through (record.ts, peers.ts, stagnation.ts): their dependencies, input, result and the
 * view of the tick they decide on.
 */
import type { AgentEmbedders } from '../embeddings/agent-embedder.js';
import type { EthicsPolicy } from '../../core/ethics.js';
import type { EmotionReading } from '../../core/emotions.js';
import type { ContextMode, LoopEffect } from '../../core/loop-types.js';
import type { PeerPresence } from '../../core/society/isolation.js';
import type { SamplingParams, StagnationState } from '../../core/stagnation.js';
import type { ValidationMode } from '../../core/validation.js';
import type { Db } from '../../db/client.js';
import type { LlmRegistryEntry } from '../../db/schema/index.js';
import type { AgentEventSink } from '../agent-events.js';
import type { LlmRouter } from '../llm/index.js';
import type { PreviousReply, TickReply, TickSnapshots } from '../tick/snapshot.js';

export interface ReflexDeps {
  db: Db;
  llm: LlmRouter;
  /** The tick's snapshot (read by think); without one, the reflexes read what they need themselves. */
  snapshots: TickSnapshots;
  /** A validator slower than this is skipped for the tick (default 10 s). */
  validatorTimeoutMs?: number;
  /** Run the memory manager every this many ticks (default 10). */
  memoryEvery?: number;
  /** Told of each tick's verdict once it is recorded. */
  events?: AgentEventSink;
  /** The agents' embedders (memory by meaning); without them memory compares words only. */
  embedders?: AgentEmbedders;
}

export interface TickReflexesInput {
  agentId: string;
  tick: number;
  workflowId: string;
  responseId: number;
  /** The tick's commands; `args` for the ethics rules that read them (absent in older workflows' inputs). */
  commands: Array<{ cmdId: string; type: string; args?: Record<string, unknown> }>;
  /** Sampling parameters in force, and the defaults relaxation returns to. */
  params: SamplingParams;
  defaults: SamplingParams;
  stagnation: StagnationState;
  contextMode: ContextMode;
}

export interface TickReflexesResult {
  validationMode: ValidationMode;
  rating: number | null;
  /** Undefined = all may run (auto_pass with nothing forbidden). */
  allowedCmdIds?: string[];
  /** cmd_id → why it is held. */
  held: Record<string, string>;
  notes: string[];
  novelty: number;
  identical: boolean;
  emotions: EmotionReading[];
  params: SamplingParams;
  /** Text for the next tick's prompt (rephrase, flashback, meta-analysis), or null. */
  focus: string | null;
  stagnation: StagnationState;
  effects: LoopEffect[];
  actions: string[];
  validatorTimeouts: number;
  validatorFailures: number;
  malformed: string[];
}

/** What the reflexes read: the tick's reply, the replies before it, the agent's settings, LLMs and policies. */
export interface ReflexView {
  reply: TickReply;
  /** The last 30 replies (placeholders of identical replies included), newest first. */
  previous: PreviousReply[];
  /** The last 5 real replies (no placeholders), newest first. */
  real: PreviousReply[];
  config: Record<string, unknown>;
  registry: LlmRegistryEntry[];
  policies: EthicsPolicy[];
  /** Known peers and what tells whether they are reachable (peer validators, `ask_peers`). */
  peers: PeerPresence[];
  /** Whether the agent's embedder was away when the tick read it: the novelty reflex closes that once it answers. */
  embedderAway: boolean;
}
