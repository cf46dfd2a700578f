/**
 * An agent's known peers as the loop reads them each tick: the link (`agent_peers`: status,
 * trust, when the peer was last heard from over it) and, for a peer of this deployment, its own
 * `agents` row (loop status, operating mode, last tick's time). Built as a subquery so that the
 * tick's read of the agent row carries it (no round trip of its own).
 */
import { eq, getTableName, sql, type Placeholder, type SQL } from 'drizzle-orm';
import type { PeerPresence } from '../../core/society/isolation.js';
import type { Db } from '../client.js';
import { agentPeers, agents } from '../schema/index.js';

/** At most this many peers (the most trusted) are read per tick. */
const maxPeersRead = 100;

/**
 * A JSON array of the agent's non-blocked peers, most trusted first. Every column is qualified
 * by its own alias (`p` the link, `pa` the peer's row): an outer query over `agents` renders its
 * own columns unqualified, so a bare name here could be ambiguous.
 */
export function peerPresenceSql(agentId: string | Placeholder): SQL<PeerPresence[]> {
  const links = sql.identifier(getTableName(agentPeers));
  const rows = sql.identifier(getTableName(agents));
  return sql<PeerPresence[]>`(select coalesce(json_agg(x), '[]'::json) from (
    select p.peer_agent_id as "peerAgentId", p.trust as "trust", p.status as "link",
      (extract(epoch from p.last_seen_at) * 1000)::float8 as "linkSeenAt",
      case when pa.id is null then null
        else json_build_object('status', pa.status, 'mode', pa.operating_mode, 'seenAt', (extract(epoch from pa.last_seen_at) * 1000)::float8) end as "local"
    from ${links} p left join ${rows} pa on pa.id = p.peer_agent_id
    where p.agent_id = ${agentId} and p.status <> 'blocked'
    order by p.trust desc, p.peer_agent_id
    limit ${sql.raw(String(maxPeersRead))}) x)`;
}

/** The agent's peers on their own (the CLI, tests); the loop reads them with the agent row. */
export async function readPeerPresence(db: Db, agentId: string): Promise<PeerPresence[]> {
  const [row] = await db
    .select({ peers: peerPresenceSql(agentId) })
    .from(agents)
    .where(eq(agents.id, agentId));
  return row?.peers ?? [];
}
