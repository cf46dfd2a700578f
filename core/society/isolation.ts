/**
 * Peers as the loop sees them each tick: which known peers are reachable, the Isolated
 * operating mode (an agent that has peers but reaches none of them for a number of ticks in a
 * row goes on alone and marks its decisions for later review), and which peers the reflexes may
 * turn to (the one asked for a new angle, the ones asked to validate). Pure: the caller passes
 * the clock.
 */
import { z } from 'zod';
import { sharedValue } from '../shared.js';

/** A known peer as one read of `agent_peers` (joined with the peer's `agents` row) gives it. */
export interface PeerPresence {
  peerAgentId: string;
  /** This agent's trust in the peer (0…1). */
  trust: number;
  /** The link's status: `active`, `lost` or `blocked`. */
  link: string;
  /** When the peer was last heard from over the link (ms since the epoch), if ever. */
  linkSeenAt: number | null;
  /** The peer's own `agents` row when it lives in this deployment; null for a peer reached over the bus. */
  local: { status: string; mode: string; seenAt: number | null } | null;
}

/** A peer not seen (no tick, no message) for longer than this is not reachable. */
export const peerSeenWithinMs = 10 * 60_000;

/**
 * Reachable: a peer of this deployment whose loop is running, thinking (not in Core Outage: it
 * could not answer) and seen within `withinMs`; a peer elsewhere, heard from over its link
 * within `withinMs`. A blocked link is never reachable.
 */
export function isReachable(p: PeerPresence, now: number, withinMs = peerSeenWithinMs): boolean {
  if (p.link === 'blocked') return false;
  const recent = (at: number | null) => at !== null && now - at <= withinMs;
  if (p.local) return p.local.status === 'running' && p.local.mode !== 'core_outage' && recent(p.local.seenAt);
  return recent(p.linkSeenAt);
}

/** What one tick saw of the agent's peers (it rides through the workflow's history: small). */
export interface PeerObservation {
  /** Known peers: every link that is not blocked. */
  known: number;
  reachable: number;
  /** The reachable peers' ids, most trusted first (at most `maxListed`). */
  reachableIds: string[];
  /** Ticks in a row with none reachable before the agent counts as isolated. */
  isolationTicks: number;
}

const maxListed = 5;

/** Count the known and reachable peers (most trusted first). */
export function observePeers(
  peers: readonly PeerPresence[],
  now: number,
  isolationTicks: number,
  withinMs = peerSeenWithinMs,
): PeerObservation {
  const known = peers.filter((p) => p.link !== 'blocked');
  const reachable = byTrust(known.filter((p) => isReachable(p, now, withinMs)));
  return {
    known: known.length,
    reachable: reachable.length,
    reachableIds: reachable.slice(0, maxListed).map((p) => p.peerAgentId),
    isolationTicks,
  };
}

/** The Isolated mode's bookkeeping, carried by the loop across ticks and continue-as-new. */
export const isolationStateSchema = sharedValue('core/society/isolation/state', () =>
  z
    .object({
      /** Ticks in a row on which the agent had known peers and reached none. */
      unreachableTicks: z.number().int().min(0).default(0),
      /** When the agent became isolated (ISO time; null: not isolated), and at which tick. */
      since: z.string().nullable().default(null),
      sinceTick: z.number().int().min(0).nullable().default(null),
      /** The last observation: known peers, and the reachable ones (a few ids). */
      known: z.number().int().min(0).default(0),
      reachable: z.array(z.string()).max(maxListed).default([]),
    })
    // A function: zod copies a default value only one level deep, and `reachable` must be new each time.
    .default(() => ({ unreachableTicks: 0, since: null, sinceTick: null, known: 0, reachable: [] })),
);
export type IsolationState = z.infer<typeof isolationStateSchema>;

type IsolationChange = 'enter' | 'leave' | null;

/**
 * Fold one tick's observation in. An agent with known peers that reaches none of them on
 * `isolationTicks` ticks in a row becomes isolated; one reachable peer (or no known peer any
 * more: the agent no longer consults peers) ends it at once.
 */
export function nextIsolation(
  prev: IsolationState,
  obs: PeerObservation,
  at: string,
  tick: number,
): { state: IsolationState; change: IsolationChange } {
  const isolated = prev.since !== null;
  const seen = { known: obs.known, reachable: obs.reachableIds.slice(0, maxListed) };
  if (obs.known === 0 || obs.reachable > 0) {
    return { state: { ...seen, unreachableTicks: 0, since: null, sinceTick: null }, change: isolated ? 'leave' : null };
  }
  const unreachableTicks = prev.unreachableTicks + 1;
  if (isolated) return { state: { ...prev, ...seen, unreachableTicks }, change: null };
  if (unreachableTicks >= Math.max(1, obs.isolationTicks))
    return { state: { ...seen, unreachableTicks, since: at, sinceTick: tick }, change: 'enter' };
  return { state: { ...seen, unreachableTicks, since: null, sinceTick: null }, change: null };
}

/** The tag an isolated agent's applied decisions carry, for later review. */
export const emergencyConsensusTag = 'emergency_consensus';

/** Most trusted first; equal trust by id (a stable choice). */
function byTrust<P extends PeerPresence>(peers: readonly P[]): P[] {
  return [...peers].sort((a, b) => b.trust - a.trust || a.peerAgentId.localeCompare(b.peerAgentId));
}

/** Peers a message can be delivered to and that can answer now: an active link to a reachable peer of this deployment. */
function askable(peers: readonly PeerPresence[], now: number, withinMs: number): PeerPresence[] {
  return peers.filter((p) => p.link === 'active' && p.local !== null && isReachable(p, now, withinMs));
}

/** The peer a stagnating agent asks for a new angle: the most trusted askable one, or null. */
export function peerToAsk(
  peers: readonly PeerPresence[],
  now: number,
  withinMs = peerSeenWithinMs,
): PeerPresence | null {
  return byTrust(askable(peers, now, withinMs))[0] ?? null;
}

/**
 * The peers that validate this tick's reply: the `count` most trusted askable peers whose
 * trust is at least `minTrust` (a peer far from the consensus too often falls below it and is
 * no longer asked, as an excluded validator).
 */
export function peerValidators(
  peers: readonly PeerPresence[],
  count: number,
  minTrust: number,
  now: number,
  withinMs = peerSeenWithinMs,
): PeerPresence[] {
  if (count <= 0) return [];
  return byTrust(askable(peers, now, withinMs).filter((p) => p.trust >= minTrust)).slice(0, count);
}
