/**
 * Spawn tests' fixtures: a parent with rows in most of its tables (the fork fixture's, plus
 * ethics policies, known peers, a running auxiliary loop, diary entries, learnings), its rows
 * counted per table, and its snapshot byte for byte without the records a spawn adds to its parent.
 */
import { getTableName, sql } from 'drizzle-orm';
import { agentShard } from '../../core/learnings.js';
import type { Db } from '../../db/client.js';
import {
  agentOwnedTables,
  agents,
  diaryEntries,
  ethicsPolicies,
  forks,
  learningEvents,
  learnings,
  peerRatings,
  spawns,
  tasks,
  verdicts,
} from '../../db/schema/index.js';
import { saveLearning } from '../../db/queries/learnings.js';
import { linkPeers } from '../../db/queries/peers.js';
import { seedForkableAgent } from './fork-fixture.js';

/**
 * The parent's four learnings: three in its own shard (one reinforced, one with no author, as an
 * import leaves it) and one it taught in the shared `coder` shard.
 */
async function seedLearnings(db: Db, id: string): Promise<void> {
  const own = agentShard(id);
  const unlimited = { maxSavesPerMinute: Infinity };
  const saves = [
    {
      shardType: own,
      agentId: id,
      predicate: 'avoid_pattern',
      args: { action: 'shell.exec', pattern: 'rm -rf' },
      source: 'feedback',
    },
    {
      shardType: own,
      agentId: id,
      predicate: 'avoid_pattern',
      args: { action: 'shell.exec', pattern: 'rm -rf' },
      source: 'feedback',
    },
    { shardType: own, agentId: null, predicate: 'style_preference', args: { style: 'concise', stance: 'prefer' } },
    { shardType: own, agentId: id, predicate: 'tool_preference', args: { tool: 'grep', stance: 'prefer' } },
    {
      shardType: 'coder',
      agentId: id,
      predicate: 'language_hint',
      args: { language: 'go', hint: `wrap errors (${id})` },
    },
  ];
  for (const l of saves) await saveLearning(db, l, unlimited);
}

/**
 * The parent `id` (with `filler` extra diary/notebook rows): two ethics policies, a sibling
 * agent it spawned before (relation child), a plain peer, a link to `ghost` (a peer id that a
 * child may be named after: the child must not become its own peer), a rating of its peer, a
 * running auxiliary loop and five diary entries.
 */
export async function seedParent(db: Db, id: string, opts: { filler?: number } = {}): Promise<void> {
  await seedForkableAgent(db, id, { responses: 12, filler: opts.filler ?? 0 });
  await db.insert(agents).values([
    { id: `${id}-older`, name: 'older child', parentId: id, kind: 'newborn', generation: 1 },
    { id: `${id}-friend`, name: 'friend' },
  ]);
  await db.transaction(async (tx) => {
    await linkPeers(tx, id, `${id}-older`, 'child');
    await linkPeers(tx, id, `${id}-friend`, 'peer');
    // A peer that is gone: a child may be born under its id.
    await tx.execute(
      sql`insert into agent_peers (agent_id, peer_agent_id, relation, status) values (${id}, ${`${id}-ghost`}, 'peer', 'lost')`,
    );
  });
  await db.insert(peerRatings).values({ agentId: id, peerAgentId: `${id}-friend`, score: 2, reason: 'helpful' });
  await db.insert(ethicsPolicies).values([
    { agentId: id, title: 'no shell', rule: 'never run shell commands', forbids: ['shell'] },
    { agentId: id, scope: 'global', title: 'be kind', rule: 'be kind to peers', severity: 'warn' },
  ]);
  await db.insert(tasks).values({ agentId: id, title: 'watch the bees', replStatus: 'running' });
  await db
    .insert(diaryEntries)
    .values(Array.from({ length: 5 }, (_, i) => ({ agentId: id, title: `day ${i}`, content: `wrote about day ${i}` })));
  await seedLearnings(db, id);
}

/** An agent's learnings as it loads them (its shard, and those it taught elsewhere), and the events of its shard. */
const learningScopes = (agentId: string) => ({
  learnings: sql`(s.agent_id = ${agentId} or s.shard_type = ${agentShard(agentId)})`,
  learning_events: sql`s.shard_type = ${agentShard(agentId)}`,
});

/** Rows `agentId` owns per agent-owned table (its fork records and verdicts are bookkeeping, not state), and its learnings. */
export async function rowCounts(db: Db, agentId: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of agentOwnedTables) {
    if (t === forks || t === verdicts) continue;
    const r = await db.execute(sql`select count(*)::int as n from ${t} where agent_id = ${agentId}`);
    out[getTableName(t)] = Number((r.rows[0] as { n: number }).n);
  }
  const scopes = learningScopes(agentId);
  for (const t of [learnings, learningEvents]) {
    const r = await db.execute(
      sql`select count(*)::int as n from ${t} s where ${scopes[getTableName(t) as keyof typeof scopes]}`,
    );
    out[getTableName(t)] = Number((r.rows[0] as { n: number }).n);
  }
  return out;
}

/**
 * Every row the parent owns, each as Postgres prints it (`row::text`), table by table: compared
 * byte for byte before and after a spawn. What a spawn adds to its parent is left out by
 * identity (and checked on its own): its `spawns` records, its link to each child and the notes
 * about its spawns. (A spawn with a budget also debits its lifeforce: compare those without one.)
 */
export async function parentSnapshot(db: Db, agentId: string, children: readonly string[]): Promise<string> {
  const kids = children.length
    ? sql.join(
        children.map((c) => sql`${c}`),
        sql`, `,
      )
    : sql`null`;
  const out: Record<string, unknown> = {
    agents: (await db.execute(sql`select s::text as r from ${agents} s where s.id = ${agentId}`)).rows.map((x) => x.r),
  };
  for (const t of agentOwnedTables) {
    if (t === spawns) continue;
    const name = getTableName(t);
    const own =
      name === 'agent_peers'
        ? sql` and s.peer_agent_id not in (${kids})`
        : name === 'notes'
          ? sql` and coalesce(s.sender, '') not like 'spawn:%'`
          : sql``;
    const r = await db.execute(sql`select s::text as r from ${t} s where s.agent_id = ${agentId}${own} order by s.id`);
    out[name] = r.rows.map((x) => x.r);
  }
  const scopes = learningScopes(agentId);
  for (const t of [learnings, learningEvents]) {
    const r = await db.execute(
      sql`select s::text as r from ${t} s where ${scopes[getTableName(t) as keyof typeof scopes]} order by s.id`,
    );
    out[getTableName(t)] = r.rows.map((x) => x.r);
  }
  return JSON.stringify(out);
}
