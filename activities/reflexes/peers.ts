/**
 * The reflexes' peers: peer validators (a peer agent's own model answers the validation
 * question about this agent's reply; its weight is this agent's trust in the peer, which its
 * agreement with the consensus moves), and the `ask_peers` anti-stagnation strategy (a message
 * to the most trusted reachable peer asking for a new angle; its answer arrives as a note).
 * Which peers are reachable comes from the tick's snapshot (core/society/isolation.ts).
 */
import { and, eq } from 'drizzle-orm';
import { configKeys } from '../../core/catalogue.js';
import { workflowIds } from '../../core/ids.js';
import { budgetIds } from '../../core/lifeforce.js';
import type { LoopEffect } from '../../core/loop-types.js';
import { clipText } from '../../core/sanitize.js';
import { peerToAsk, peerValidators, type PeerPresence } from '../../core/society/isolation.js';
import { defaultTrustPolicy, type ValidatorRecord } from '../../core/validation.js';
import type { Db } from '../../db/client.js';
import { deliverPeerMessage } from '../../db/queries/peers.js';
import { agentPeers, notes, type LlmRegistryEntry } from '../../db/schema/index.js';
import type { LlmCall } from '../../db/schema/llm.js';
import { rowsFor, type ChatResult, type LlmRouter } from '../llm/index.js';
import { miniPromptMaxTokens } from './settings.js';
import type { TickReflexesInput } from './types.js';

/** The peers asked to validate this tick (`peer_validators`, default none). */
export function chosenPeerValidators(
  config: Record<string, unknown>,
  peers: readonly PeerPresence[],
  now = Date.now(),
): PeerPresence[] {
  const n = configKeys.peer_validators.schema.safeParse(config.peer_validators);
  return peerValidators(
    peers,
    n.success ? n.data : configKeys.peer_validators.default,
    defaultTrustPolicy.exclude,
    now,
  );
}

/** The idempotency key of a peer's validation of one tick: a retried activity pays it once. */
export const peerValidationKey = (input: Pick<TickReflexesInput, 'workflowId' | 'tick'>, peerId: string) =>
  `${input.workflowId}:${input.tick}:validate:peer:${peerId}`;

/** A chosen peer validator with the model it answers with: its agent's first usable row (none: it cannot answer). */
interface PeerValidator {
  peer: PeerPresence;
  registry: LlmRegistryEntry[];
  row: LlmRegistryEntry | undefined;
}

/** Read each chosen peer's registry (in parallel; the caller runs this beside its other preloads). */
export function loadPeerValidators(llm: LlmRouter, chosen: readonly PeerPresence[]): Promise<PeerValidator[]> {
  return Promise.all(
    chosen.map(async (peer) => {
      const registry = await llm.registry(peer.peerAgentId);
      return { peer, registry, row: rowsFor(registry, 'agent')[0] };
    }),
  );
}

/** What a peer validator's record starts from: its model's row, this agent's trust in it. */
export function peerValidatorBase(v: PeerValidator): Omit<ValidatorRecord, 'status'> {
  return {
    registryId: v.row?.id ?? 0,
    name: `peer ${v.peer.peerAgentId}`,
    trust: v.peer.trust,
    peer: v.peer.peerAgentId,
  };
}

/**
 * Ask the peer's model the validation question. The call is recorded under the peer (its model
 * answered) and charged to this agent's budget (this agent asked).
 */
export async function askPeerValidator(
  llm: LlmRouter,
  input: TickReflexesInput,
  v: PeerValidator,
  question: string,
  previous: LlmCall[],
  signal: AbortSignal,
): Promise<ChatResult> {
  if (!v.row) throw new Error(`peer ${v.peer.peerAgentId} has no usable model`);
  return llm.chat({
    preloaded: { registry: v.registry, previous },
    agentId: v.peer.peerAgentId,
    role: 'agent',
    registryId: v.row.id,
    messages: [{ role: 'user', content: question }],
    params: { maxTokens: miniPromptMaxTokens.validate, temperature: 0.2 },
    tick: input.tick,
    workflowId: input.workflowId,
    purpose: 'validate',
    idempotencyKey: peerValidationKey(input, v.peer.peerAgentId),
    lifeforce: { budgetId: budgetIds.agent(input.agentId) },
    signal,
  });
}

/**
 * A peer validator's trust after a tick with a consensus: `agent_peers.trust` moves as a
 * registry validator's trust does; below the exclusion threshold the peer is no longer asked
 * (the link stays) and the agent is told once, when it falls below.
 */
export async function recordPeerValidatorTrust(
  tx: Db,
  input: TickReflexesInput,
  r: ValidatorRecord,
  trust: number,
  excluded: boolean,
  notesOut: string[],
): Promise<void> {
  if (!r.peer || trust === r.trust) return;
  await tx
    .update(agentPeers)
    .set({ trust, updatedAt: new Date() })
    .where(and(eq(agentPeers.agentId, input.agentId), eq(agentPeers.peerAgentId, r.peer)));
  if (excluded && r.trust >= defaultTrustPolicy.exclude) {
    await tx.insert(notes).values({
      agentId: input.agentId,
      direction: 'in',
      source: 'system',
      priority: 3,
      tags: ['validation', 'peers'],
      text: `Peer "${r.peer}" no longer validates your replies: your trust in it fell to ${trust} (far from the consensus).`,
    });
    notesOut.push(`peer validator ${r.peer} excluded (trust ${trust})`);
  }
}

/** What a stagnating agent tells the peer it asks. */
function askText(agentId: string, novelty: number | null, thinking: string): string {
  return [
    `${agentId} is stuck: its recent thoughts repeat each other${novelty === null ? '' : ` (novelty ${novelty}/100)`} and nothing new has come in.`,
    'It asks you for a new angle: a question, a fact, or an idea it has not considered.',
    thinking ? `What it keeps thinking about: "${clipText(thinking.replace(/\s+/g, ' ').trim(), 400)}"` : '',
    `Answer it with messages.send {"to": "${agentId}", "text": "…"}.`,
  ]
    .filter(Boolean)
    .join('\n');
}

/**
 * The `ask_peers` strategy: a message (tagged `ask_peers`, `anti_stagnation`) to the most
 * trusted reachable peer, once per tick, and the `wakeAgent` effect so that an idle peer reads
 * it now. Its answer arrives as an incoming note; the strategy's effect is measured like any other.
 */
export async function askPeerForAngle(
  tx: Db,
  input: Pick<TickReflexesInput, 'agentId' | 'tick'> & { workflowId?: string },
  ctx: { peers: readonly PeerPresence[]; novelty: number | null; thinking: string },
): Promise<{ effects: LoopEffect[]; detail: string }> {
  const peer = peerToAsk(ctx.peers, Date.now());
  if (!peer) return { effects: [], detail: 'no reachable peer to ask' };
  const { noteId } = await deliverPeerMessage(tx, {
    from: input.agentId,
    to: peer.peerAgentId,
    text: askText(input.agentId, ctx.novelty, ctx.thinking),
    tags: ['ask_peers', 'anti_stagnation'],
    priority: 3,
    idempotencyKey: `${input.workflowId ?? workflowIds.agent(input.agentId)}:${input.tick}:ask_peers`,
  });
  return {
    effects: [{ kind: 'wakeAgent', agentId: peer.peerAgentId }],
    detail: `asked peer ${peer.peerAgentId} (trust ${peer.trust}) for a new angle: note #${noteId}`,
  };
}
