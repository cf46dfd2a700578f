/**
 * Peers: the links between agents (`agent_peers`, both directions), peer messages (an incoming
 * note with `source = 'peer'` on the receiver), and ratings (`peer_ratings`), from whose
 * history the link's `trust` and the rater's `agent_reputation` row follow.
 */
import { and, asc, desc, eq, sql } from 'drizzle-orm';
import { trustFromRatings, trustToScore } from '../../core/society/trust.js';
import type { Db } from '../client.js';
import { agentPeers, agentReputation, agents, notes, peerRatings, peerRelations } from '../schema/index.js';

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];
type Conn = Db | Tx;
type PeerRelation = (typeof peerRelations)[number];

const inverse: Record<PeerRelation, PeerRelation> = {
  parent: 'child',
  child: 'parent',
  sibling: 'sibling',
  peer: 'peer',
};

/**
 * Make `a` and `b` known peers of each other: `relation` is what `b` is to `a` (`child` when b
 * was spawned by a); the other side gets the inverse. An existing link keeps its trust and gets
 * the relation and `active` status back.
 */
export async function linkPeers(
  tx: Conn,
  a: string,
  b: string,
  relation: PeerRelation = 'peer',
  notesText?: string,
): Promise<void> {
  for (const [self, other, rel] of [
    [a, b, relation],
    [b, a, inverse[relation]],
  ] as const) {
    await tx
      .insert(agentPeers)
      .values({ agentId: self, peerAgentId: other, relation: rel, status: 'active', notes: notesText ?? null })
      .onConflictDoUpdate({
        target: [agentPeers.agentId, agentPeers.peerAgentId],
        set: { relation: rel, status: 'active', updatedAt: new Date() },
      });
  }
}

interface PeerMessage {
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
export async function deliverPeerMessage(
  tx: Conn,
  m: PeerMessage,
): Promise<{ noteId: number; outNoteId: number | null }> {
  const [receiver] = await tx.select({ id: agents.id }).from(agents).where(eq(agents.id, m.to));
  if (!receiver) throw new Error(`no agent ${m.to} to deliver to`);
  const key = m.idempotencyKey;
  const [inNote] = await tx
    .insert(notes)
    .values({
      agentId: m.to,
      direction: 'in',
      source: 'peer',
      sender: m.from,
      priority: m.priority ?? 1,
      tags: m.tags ?? [],
      text: m.text,
      idempotencyKey: key ? `${key}:in` : null,
    })
    .onConflictDoNothing()
    .returning({ id: notes.id });
  const [outNote] = await tx
    .insert(notes)
    .values({
      agentId: m.from,
      direction: 'out',
      source: 'agent',
      recipient: m.to,
      priority: m.priority ?? 1,
      tags: m.tags ?? [],
      text: m.text,
      readAt: new Date(),
      idempotencyKey: key ? `${key}:out` : null,
    })
    .onConflictDoNothing()
    .returning({ id: notes.id });
  if (inNote) return { noteId: inNote.id, outNoteId: outNote?.id ?? null };
  const [first] = await tx
    .select({ id: notes.id })
    .from(notes)
    .where(eq(notes.idempotencyKey, `${key}:in`));
  return { noteId: first!.id, outNoteId: outNote?.id ?? null };
}

interface PeerRatingInput {
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
export async function ratePeer(
  tx: Conn,
  r: PeerRatingInput,
): Promise<{ trust: number; ratings: number; score: number }> {
  const dimension = r.dimension ?? 'overall';
  await tx.insert(peerRatings).values({
    agentId: r.agentId,
    peerAgentId: r.peer,
    dimension,
    score: r.score,
    reason: r.reason,
    source: r.source ?? 'agent',
    tick: r.tick ?? null,
    detail: r.detail ?? null,
  });
  const history = await tx
    .select({ score: peerRatings.score })
    .from(peerRatings)
    .where(
      and(
        eq(peerRatings.agentId, r.agentId),
        eq(peerRatings.peerAgentId, r.peer),
        eq(peerRatings.dimension, dimension),
      ),
    )
    .orderBy(asc(peerRatings.createdAt), asc(peerRatings.id));
  const trust = trustFromRatings(history.map((h) => h.score));
  const score = trustToScore(trust);
  await tx
    .insert(agentReputation)
    .values({
      agentId: r.agentId,
      subject: r.peer,
      dimension,
      score,
      evidenceCount: history.length,
      lastReason: r.reason,
    })
    .onConflictDoUpdate({
      target: [agentReputation.agentId, agentReputation.subject, agentReputation.dimension],
      set: { score, evidenceCount: history.length, lastReason: r.reason, updatedAt: new Date() },
    });
  if (dimension === 'overall') {
    await tx
      .update(agentPeers)
      .set({ trust, updatedAt: new Date() })
      .where(and(eq(agentPeers.agentId, r.agentId), eq(agentPeers.peerAgentId, r.peer)));
  }
  return { trust, ratings: history.length, score };
}

/** One side of a link: `agentId`'s row for `peer`, if any. */
export async function peerLink(tx: Conn, agentId: string, peer: string) {
  const [row] = await tx
    .select()
    .from(agentPeers)
    .where(and(eq(agentPeers.agentId, agentId), eq(agentPeers.peerAgentId, peer)));
  return row;
}

/**
 * `agentId` makes `peer` a known peer (status `active`, `relation` unless it keeps the one it
 * had). The peer learns of it too, but its own side is only created, never changed: a peer
 * that blocked `agentId` stays blocked.
 */
export async function addPeer(
  tx: Conn,
  agentId: string,
  peer: string,
  relation?: PeerRelation,
  notesText?: string,
): Promise<void> {
  const rel = relation ?? 'peer';
  await tx
    .insert(agentPeers)
    .values({ agentId, peerAgentId: peer, relation: rel, status: 'active', notes: notesText ?? null })
    .onConflictDoUpdate({
      target: [agentPeers.agentId, agentPeers.peerAgentId],
      set: {
        status: 'active',
        ...(relation ? { relation } : {}),
        ...(notesText ? { notes: notesText } : {}),
        updatedAt: new Date(),
      },
    });
  await tx
    .insert(agentPeers)
    .values({ agentId: peer, peerAgentId: agentId, relation: inverse[rel], status: 'active' })
    .onConflictDoNothing();
}

/** Forget a peer (its link row goes), or block it (the row stays, `blocked`: its messages are refused). */
export async function removePeer(tx: Conn, agentId: string, peer: string, block: boolean): Promise<void> {
  if (!block) {
    await tx.delete(agentPeers).where(and(eq(agentPeers.agentId, agentId), eq(agentPeers.peerAgentId, peer)));
    return;
  }
  await tx
    .insert(agentPeers)
    .values({ agentId, peerAgentId: peer, status: 'blocked' })
    .onConflictDoUpdate({
      target: [agentPeers.agentId, agentPeers.peerAgentId],
      set: { status: 'blocked', updatedAt: new Date() },
    });
}

/** The agent's known peers with the peer's name where it lives in this deployment, active first. */
export async function peerList(tx: Conn, agentId: string, status?: (typeof agentPeers.status.enumValues)[number]) {
  return tx
    .select({
      peer: agentPeers.peerAgentId,
      name: agents.name,
      relation: agentPeers.relation,
      status: agentPeers.status,
      trust: agentPeers.trust,
      lastSeenAt: agentPeers.lastSeenAt,
      notes: agentPeers.notes,
    })
    .from(agentPeers)
    .leftJoin(agents, eq(agents.id, agentPeers.peerAgentId))
    .where(and(eq(agentPeers.agentId, agentId), status ? eq(agentPeers.status, status) : undefined))
    .orderBy(sql`${agentPeers.status} = 'active' desc`, desc(agentPeers.trust), asc(agentPeers.peerAgentId));
}

/** The receiver heard from the sender just now (its link's `last_seen_at`). */
export async function markHeardFrom(tx: Conn, receiver: string, sender: string): Promise<void> {
  await tx
    .update(agentPeers)
    .set({ lastSeenAt: new Date() })
    .where(and(eq(agentPeers.agentId, receiver), eq(agentPeers.peerAgentId, sender)));
}

/** The agent's reputation rows (its view of each subject), optionally of one subject and/or dimension. */
export async function reputationRows(tx: Conn, agentId: string, filter: { subject?: string; dimension?: string } = {}) {
  return tx
    .select()
    .from(agentReputation)
    .where(
      and(
        eq(agentReputation.agentId, agentId),
        filter.subject ? eq(agentReputation.subject, filter.subject) : undefined,
        filter.dimension ? eq(agentReputation.dimension, filter.dimension) : undefined,
      ),
    )
    .orderBy(desc(agentReputation.score), asc(agentReputation.subject), asc(agentReputation.dimension));
}

/** The newest ratings `agentId` gave `peer`, newest first. */
export async function ratingHistory(
  tx: Conn,
  agentId: string,
  peer: string,
  opts: { dimension?: string; limit?: number } = {},
) {
  return tx
    .select()
    .from(peerRatings)
    .where(
      and(
        eq(peerRatings.agentId, agentId),
        eq(peerRatings.peerAgentId, peer),
        opts.dimension ? eq(peerRatings.dimension, opts.dimension) : undefined,
      ),
    )
    .orderBy(desc(peerRatings.createdAt), desc(peerRatings.id))
    .limit(opts.limit ?? 10);
}

/** What other agents think of `subject`, per dimension: their mean reputation score and how many rate it. */
export async function reputationAmongPeers(tx: Conn, subject: string) {
  return tx
    .select({
      dimension: agentReputation.dimension,
      raters: sql<number>`count(*)::int`,
      mean: sql<number>`round(avg(${agentReputation.score})::numeric, 2)::float8`,
    })
    .from(agentReputation)
    .where(and(eq(agentReputation.subject, subject), sql`${agentReputation.agentId} <> ${subject}`))
    .groupBy(agentReputation.dimension)
    .orderBy(asc(agentReputation.dimension));
}
