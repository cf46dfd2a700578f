/**
 * Peers: the links between agents (`agent_peers`, both directions), peer messages (an incoming
 * note with `source = 'peer'` on the receiver), and ratings (`peer_ratings`), from whose
 * history the link's `trust` and the rater's `agent_reputation` row follow.
 */
import { and, asc, eq, sql } from 'drizzle-orm';
import { trustFromRatings, trustToScore } from '../../core/society/trust.js';
import type { Db } from '../client.js';
import { agentPeers, agentReputation, agents, notes, peerRatings, peerRelations } from '../schema/index.js';

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];
type Conn = Db | Tx;
export type PeerRelation = (typeof peerRelations)[number];

const inverse: Record<PeerRelation, PeerRelation> = { parent: 'child', child: 'parent', sibling: 'sibling', peer: 'peer' };

/**
 * Make `a` and `b` known peers of each other: `relation` is what `b` is to `a` (`child` when b
 * was spawned by a); the other side gets the inverse. An existing link keeps its trust and gets
 * the relation and `active` status back.
 */
export async function linkPeers(tx: Conn, a: string, b: string, relation: PeerRelation = 'peer', notesText?: string): Promise<void> {
  for (const [self, other, rel] of [
    [a, b, relation],
    [b, a, inverse[relation]],
  ] as const) {
    await tx
      .insert(agentPeers)
      .values({ agentId: self, peerAgentId: other, relation: rel, status: 'active', notes: notesText ?? null })
      .onConflictDoUpdate({ target: [agentPeers.agentId, agentPeers.peerAgentId], set: { relation: rel, status: 'active', updatedAt: new Date() } });
  }
}

export interface PeerMessage {
  from: string;
  to: string;
  text: string;
  tags?: string[];
  priority?: number;
  /** Makes a retried delivery a no-op (a note with this key exists already). */
  idempotencyKey?: string;
}

/**
 * Deliver a peer message: an incoming note on the receiver (`source = 'peer'`, `sender` = the
 * sender's id) and the sender's outgoing copy. Returns the receiver's note id (the first
 * delivery's, on a retry). The receiver must exist; waking its loop is the caller's part.
 */
export async function deliverPeerMessage(tx: Conn, m: PeerMessage): Promise<{ noteId: number; outNoteId: number | null }> {
  const [receiver] = await tx.select({ id: agents.id }).from(agents).where(eq(agents.id, m.to));
  if (!receiver) throw new Error(`no agent ${m.to} to deliver to`);
  const key = m.idempotencyKey;
  const [inNote] = await tx
    .insert(notes)
    .values({ agentId: m.to, direction: 'in', source: 'peer', sender: m.from, priority: m.priority ?? 1, tags: m.tags ?? [], text: m.text, idempotencyKey: key ? `${key}:in` : null })
    .onConflictDoNothing()
    .returning({ id: notes.id });
  const [outNote] = await tx
    .insert(notes)
    .values({ agentId: m.from, direction: 'out', source: 'agent', recipient: m.to, priority: m.priority ?? 1, tags: m.tags ?? [], text: m.text, readAt: new Date(), idempotencyKey: key ? `${key}:out` : null })
    .onConflictDoNothing()
    .returning({ id: notes.id });
  if (inNote) return { noteId: inNote.id, outNoteId: outNote?.id ?? null };
  const [first] = await tx.select({ id: notes.id }).from(notes).where(eq(notes.idempotencyKey, `${key}:in`));
  return { noteId: first!.id, outNoteId: outNote?.id ?? null };
}

export interface PeerRatingInput {
  agentId: string;
  peer: string;
  score: number;
  reason: string;
  dimension?: string;
  source?: string;
  tick?: number | null;
  detail?: Record<string, unknown>;
}

/**
 * Record a rating and re-derive trust from the whole history of this rater's ratings of the
 * peer: `agent_peers.trust` (when they are linked) and `agent_reputation` (subject = peer).
 */
export async function ratePeer(tx: Conn, r: PeerRatingInput): Promise<{ trust: number; ratings: number; score: number }> {
  const dimension = r.dimension ?? 'overall';
  await tx.insert(peerRatings).values({ agentId: r.agentId, peerAgentId: r.peer, dimension, score: r.score, reason: r.reason, source: r.source ?? 'agent', tick: r.tick ?? null, detail: r.detail ?? null });
  const history = await tx
    .select({ score: peerRatings.score })
    .from(peerRatings)
    .where(and(eq(peerRatings.agentId, r.agentId), eq(peerRatings.peerAgentId, r.peer), eq(peerRatings.dimension, dimension)))
    .orderBy(asc(peerRatings.createdAt), asc(peerRatings.id));
  const trust = trustFromRatings(history.map((h) => h.score));
  const score = trustToScore(trust);
  await tx
    .insert(agentReputation)
    .values({ agentId: r.agentId, subject: r.peer, dimension, score, evidenceCount: history.length, lastReason: r.reason })
    .onConflictDoUpdate({
      target: [agentReputation.agentId, agentReputation.subject, agentReputation.dimension],
      set: { score, evidenceCount: history.length, lastReason: r.reason, updatedAt: new Date() },
    });
  if (dimension === 'overall') {
    await tx.update(agentPeers).set({ trust, updatedAt: new Date() }).where(and(eq(agentPeers.agentId, r.agentId), eq(agentPeers.peerAgentId, r.peer)));
  }
  return { trust, ratings: history.length, score };
}

/** The agent's known peers with their trust, active ones first. */
export async function knownPeers(tx: Conn, agentId: string) {
  return tx
    .select()
    .from(agentPeers)
    .where(eq(agentPeers.agentId, agentId))
    .orderBy(sql`${agentPeers.status} = 'active' desc`, sql`${agentPeers.trust} desc`, asc(agentPeers.peerAgentId));
}
