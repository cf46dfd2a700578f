/**
 * Descendants: who may be born (the name, the limits), the child's copy of its parent, the
 * spawn's record (`spawns`, owned by the parent), undoing a spawn, and the lineage. The command
 * handler, the spawn activities, the CLI and the benchmark share these.
 */
import { and, asc, eq, inArray, sql } from 'drizzle-orm';
import {
  inheritedTables,
  limitRefusal,
  limitsFrom,
  spawnTypes as coreSpawnTypes,
  type AncestorCount,
  type SpawnLimits,
  type SpawnType,
} from '../../core/society/spawn.js';
import { agentShard } from '../../core/learnings.js';
import type { Db } from '../client.js';
import {
  agentConfig,
  agentPeers,
  agents,
  goals,
  learningEvents,
  notes,
  spawns,
  spawnTypes,
  tasks,
  type Agent,
  type Spawn,
} from '../schema/index.js';
import { copyAgentState, copyableTables } from './fork-copy.js';
import { copyLearnings } from './learnings.js';
import { linkPeers } from './peers.js';

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];
type Conn = Db | Tx;

// The record's kinds of child are the core's: one added to either and not the other fails to compile here.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const kindsAgree: Same<(typeof spawnTypes)[number], (typeof coreSpawnTypes)[number]> = true;
void kindsAgree;

/** Statuses of a spawn whose child is alive or being born: they count against the limits. */
const liveSpawnStatuses = ['copying', 'ready', 'running'] as const;

/**
 * The parent's tables with an agent id that a clone leaves behind, and why: every other one
 * is copied. (`test/activities/spawn.test.ts` reads the tables from the database's schema.)
 */
export const cloneLeavesOut: Readonly<Record<string, string>> = {
  lifeforce_budgets: 'a budget is carved from the parent’s through the ledger, never copied',
  lifeforce_ledger: 'the parent’s spending; the child’s ledger starts with its grant',
  spawns: 'the descendants the parent spawned are not the clone’s',
  forks: 'the parent’s successor forks are its own bookkeeping',
  verdicts: 'the verdicts on the parent’s successor forks',
  tick_prompts: 'what the parent’s model was shown at each tick (up to 64 KB a tick), which no context is built from',
  fork_tool_registry: 'a successor fork’s own copy of the tool registry; a spawned child uses the shared one',
  agent_files: 'the files applied to the parent; a file applied to the child starts its own history',
  mcp_servers: 'the MCP servers a person granted the parent: a person grants the child its own',
  mcp_tools: 'the tools of the parent’s MCP servers, listed from those servers',
  mcp_calls: 'the parent’s MCP tool calls and their results, keyed by the parent’s ticks',
  memory_vectors:
    'the parent’s vector index: a copy’s rows get new ids, and its first searches and the backfill rebuild it from the shared embeddings cache',
};

/** Copied by their own rule (`copyLearnings`): an agent's learnings are its shard's, not only rows with its id. */
const learningTables: readonly string[] = ['learnings', 'learning_events'];

/** The tables (SQL names) a child of `type` gets from its parent. */
export function spawnCopyTables(type: SpawnType): readonly string[] {
  return type === 'clone'
    ? [...copyableTables.filter((t) => !(t in cloneLeavesOut)), ...learningTables]
    : inheritedTables[type];
}

// ---- admission ----------------------------------------------------------------------------------

/**
 * Why `childId` cannot be the name of a new child of `parentId`, or null. A name is free unless
 * an agent has it or another spawn holds it; a spawn of this parent under that name that was
 * refused or rolled back leaves it free for the parent to try again.
 */
async function nameTaken(conn: Conn, parentId: string, childId: string): Promise<string | null> {
  const [row] = await conn
    .select({ agentId: spawns.agentId, status: spawns.status })
    .from(spawns)
    .where(eq(spawns.childAgentId, childId));
  if (row && !(row.agentId === parentId && (row.status === 'refused' || row.status === 'rolled_back'))) {
    return `name taken: ${childId} is ${row.agentId === parentId ? 'already your' : `${row.agentId}'s`} descendant (spawn ${row.status})`;
  }
  const [agent] = await conn.select({ id: agents.id }).from(agents).where(eq(agents.id, childId));
  return agent ? `name taken: an agent ${childId} exists` : null;
}

/**
 * The parent and each of its ancestors (nearest first) with how many descendants each has alive
 * or being born, in all and in `generation`, and its limits (its `max_descendants` and
 * `max_per_generation` config, else the defaults).
 */
async function ancestorCounts(
  conn: Conn,
  parentId: string,
  generation: number,
  exceptChild?: string,
): Promise<AncestorCount[]> {
  const live = sql.raw(liveSpawnStatuses.map((s) => `'${s}'`).join(', '));
  const except = exceptChild ?? '';
  const r = await conn.execute<{
    id: string;
    descendants: number;
    in_generation: number;
    max_descendants: unknown;
    max_per_generation: unknown;
  }>(sql`
    with recursive anc(id, depth) as (
      select id, 0 from agents where id = ${parentId}
      union all
      select a.parent_id, anc.depth + 1 from agents a join anc on a.id = anc.id where a.parent_id is not null and anc.depth < 1000
    ),
    d(root, child, generation) as (
      select s.agent_id, s.child_agent_id, s.generation from spawns s join anc on s.agent_id = anc.id
        where s.status in (${live}) and s.child_agent_id <> ${except}
      union
      select d.root, s.child_agent_id, s.generation from spawns s join d on s.agent_id = d.child
        where s.status in (${live}) and s.child_agent_id <> ${except}
    )
    select anc.id,
      (select count(*) from d where d.root = anc.id)::int as descendants,
      (select count(*) from d where d.root = anc.id and d.generation = ${generation})::int as in_generation,
      (select value from agent_config c where c.agent_id = anc.id and c.key = 'max_descendants') as max_descendants,
      (select value from agent_config c where c.agent_id = anc.id and c.key = 'max_per_generation') as max_per_generation
    from anc order by anc.depth`);
  return r.rows.map((row) => ({
    agentId: row.id,
    descendants: Number(row.descendants),
    inGeneration: Number(row.in_generation),
    limits: limitsFrom({ max_descendants: row.max_descendants, max_per_generation: row.max_per_generation }),
  }));
}

type Admission =
  | { ok: true; parent: Agent; generation: number }
  | { ok: false; code: 'no_parent' | 'name_taken' | 'limit'; reason: string; parent?: Agent };

/**
 * Whether `parentId` may spawn `childId` now: the parent exists, the name is free and no
 * ancestor's limit is reached with the child counted. Read-only.
 */
export async function admitSpawn(conn: Conn, p: { parentId: string; childId: string }): Promise<Admission> {
  const [parent] = await conn.select().from(agents).where(eq(agents.id, p.parentId));
  if (!parent) return { ok: false, code: 'no_parent', reason: `no agent ${p.parentId} to spawn from` };
  if (p.childId === p.parentId)
    return { ok: false, code: 'name_taken', reason: `name taken: ${p.childId} is the parent itself`, parent };
  const taken = await nameTaken(conn, p.parentId, p.childId);
  if (taken) return { ok: false, code: 'name_taken', reason: taken, parent };
  const generation = parent.generation + 1;
  const refusal = limitRefusal(generation, await ancestorCounts(conn, p.parentId, generation, p.childId));
  return refusal ? { ok: false, code: 'limit', reason: refusal, parent } : { ok: true, parent, generation };
}

/**
 * Serialise the admissions under one lineage: a transaction-scoped advisory lock per ancestor,
 * taken root first (every admission takes them in the same order, so two never deadlock), so
 * two children counted against the same limit are admitted one after the other.
 */
export async function lockLineage(tx: Tx, parentId: string): Promise<void> {
  await tx.execute(sql`
    with recursive anc(id, depth) as (
      select id, 0 from agents where id = ${parentId}
      union all
      select a.parent_id, anc.depth + 1 from agents a join anc on a.id = anc.id where a.parent_id is not null and anc.depth < 1000
    )
    select pg_advisory_xact_lock(hashtextextended('spawn:' || id, 0)) from (select id from anc order by depth desc) o`);
}

/** An agent's limits and what it has against them now (descendants alive or being born, per generation). */
export async function spawnLimitsOf(
  conn: Conn,
  agentId: string,
): Promise<{ limits: SpawnLimits; descendants: number; byGeneration: Record<string, number> }> {
  const [self] = await ancestorCounts(conn, agentId, -1);
  const live = sql.raw(liveSpawnStatuses.map((s) => `'${s}'`).join(', '));
  const r = await conn.execute<{ generation: number; n: number }>(sql`
    with recursive d(child, generation) as (
      select child_agent_id, generation from spawns where agent_id = ${agentId} and status in (${live})
      union
      select s.child_agent_id, s.generation from spawns s join d on s.agent_id = d.child where s.status in (${live})
    ) select generation, count(*)::int as n from d group by generation order by generation`);
  return {
    limits: self?.limits ?? limitsFrom({}),
    descendants: self?.descendants ?? 0,
    byGeneration: Object.fromEntries(r.rows.map((x) => [String(x.generation), Number(x.n)])),
  };
}

/** A person sets an agent's limits (the agent itself cannot: the keys are a human's). */
export async function setSpawnLimits(db: Db, agentId: string, limits: Partial<SpawnLimits>): Promise<void> {
  const keys = { max_descendants: limits.maxDescendants, max_per_generation: limits.maxPerGeneration };
  for (const [key, value] of Object.entries(keys)) {
    if (value === undefined) continue;
    await db
      .insert(agentConfig)
      .values({ agentId, key, value, description: 'set by a human (mindloop agents limits)' })
      .onConflictDoUpdate({ target: [agentConfig.agentId, agentConfig.key], set: { value, updatedAt: new Date() } });
  }
}

// ---- the record ---------------------------------------------------------------------------------

export async function spawnRecord(conn: Conn, childId: string, lock = false): Promise<Spawn | undefined> {
  const q = conn.select().from(spawns).where(eq(spawns.childAgentId, childId));
  const [row] = lock ? await q.for('update') : await q;
  return row;
}

/** A spawn about to copy (a new record, or a refused or rolled-back one of the same parent and name tried again). */
export async function openSpawn(
  tx: Tx,
  v: {
    parentId: string;
    childId: string;
    type: SpawnType;
    generation: number;
    goals: string[];
    budget: number;
    workflowId: string;
    status?: 'copying' | 'refused';
    reason?: string;
  },
): Promise<void> {
  const values = {
    agentId: v.parentId,
    childAgentId: v.childId,
    type: v.type,
    name: v.childId,
    status: v.status ?? 'copying',
    generation: v.generation,
    goals: v.goals,
    budget: v.budget,
    copied: {},
    rows: 0,
    spawnMs: null,
    reason: v.reason ?? null,
    workflowId: v.workflowId,
    finishedAt: v.status === 'refused' ? new Date() : null,
  } as const;
  await tx
    .insert(spawns)
    .values(values)
    .onConflictDoUpdate({
      target: spawns.childAgentId,
      set: { ...values, createdAt: new Date() },
      setWhere: and(eq(spawns.agentId, v.parentId), inArray(spawns.status, ['refused', 'rolled_back'])),
    });
}

// ---- the copy ------------------------------------------------------------------------------------

interface SpawnCopy {
  copied: Record<string, number>;
  rows: number;
}

/**
 * The child, inside `tx`: its `agents` row (kind = the spawn's type, generation, parent), the
 * parent's rows of the type's tables copied under its id (a clone's learnings into its own
 * shard, `copyLearnings`), its goals, and the peer link both
 * ways with its parent. Copied peer links become the child's: the parent's children are its
 * siblings, every other known agent a plain peer, and none is the child itself. A clone's
 * auxiliary loops are the parent's work: they are not resumed in the child.
 */
export async function createSpawnCopy(tx: Tx, p: { parent: Agent; spawn: Spawn }): Promise<SpawnCopy> {
  const { parent, spawn } = p;
  const child = spawn.childAgentId;
  const clone = spawn.type === 'clone';
  await tx.insert(agents).values({
    id: child,
    name: spawn.name,
    description: `${spawn.type} of ${parent.id}`,
    parentId: parent.id,
    kind: spawn.type,
    status: 'created',
    generation: spawn.generation,
    identity: clone ? parent.identity : {},
    lastTick: clone ? parent.lastTick : 0,
  });
  const tables = spawnCopyTables(spawn.type);
  const rows = tables.filter((t) => !learningTables.includes(t));
  const copied = await copyAgentState(tx, { parent: parent.id, target: child, prefix: `${child}:`, tables: rows });
  if (tables.includes('learnings'))
    Object.assign(copied, await copyLearnings(tx, { parent: parent.id, target: child }));
  if (tables.includes('agent_peers')) {
    const dropped = await tx
      .delete(agentPeers)
      .where(and(eq(agentPeers.agentId, child), eq(agentPeers.peerAgentId, child)))
      .returning({ id: agentPeers.id });
    copied.agent_peers = (copied.agent_peers ?? 0) - dropped.length;
    await tx
      .update(agentPeers)
      .set({ relation: sql`case when ${agentPeers.relation} = 'child' then 'sibling' else 'peer' end` })
      .where(eq(agentPeers.agentId, child));
  }
  if (clone)
    await tx
      .update(tasks)
      .set({ replStatus: 'stopped' })
      .where(and(eq(tasks.agentId, child), eq(tasks.replStatus, 'running')));
  await linkPeers(tx, parent.id, child, 'child', `spawned as a ${spawn.type}`);
  if (spawn.goals.length)
    await tx.insert(goals).values(
      spawn.goals.map((title, i) => ({
        agentId: child,
        title,
        description: `given at birth by ${parent.id}`,
        priority: spawn.goals.length - i,
      })),
    );
  return { copied, rows: Object.values(copied).reduce((a, b) => a + b, 0) };
}

/**
 * Undo a spawn whose copy committed but whose child never ran: the child's agent row (its
 * rows go with it) and the parent's link to it. A child that runs is never removed; a record
 * still `copying` has nothing committed to remove. Returns whether a child was removed.
 */
export async function removeUnbornChild(tx: Tx, spawn: Spawn): Promise<boolean> {
  if (spawn.status !== 'ready') return false;
  const removed = await tx
    .delete(agents)
    .where(and(eq(agents.id, spawn.childAgentId), eq(agents.parentId, spawn.agentId), eq(agents.kind, spawn.type)))
    .returning({ id: agents.id });
  await tx
    .delete(agentPeers)
    .where(and(eq(agentPeers.agentId, spawn.agentId), eq(agentPeers.peerAgentId, spawn.childAgentId)));
  // Its learnings went with its row; the events of its shard name it only by the shard.
  if (removed.length)
    await tx.delete(learningEvents).where(eq(learningEvents.shardType, agentShard(spawn.childAgentId)));
  return removed.length > 0;
}

/** The note a parent gets about its spawn (once per key). */
export async function noteToParent(
  conn: Conn,
  p: { parentId: string; childId: string; text: string; key: string },
): Promise<void> {
  const [parent] = await conn.select({ id: agents.id }).from(agents).where(eq(agents.id, p.parentId));
  if (!parent) return;
  await conn
    .insert(notes)
    .values({
      agentId: p.parentId,
      direction: 'in',
      source: 'system',
      sender: `spawn:${p.childId}`,
      priority: 2,
      tags: ['spawn'],
      text: p.text,
      idempotencyKey: p.key,
    })
    .onConflictDoNothing();
}

// ---- lineage --------------------------------------------------------------------------------------

export interface LineageEntry {
  id: string;
  name: string | null;
  kind: string | null;
  generation: number | null;
  /** The agent's status; null when the agent is gone (a rolled-back or refused child never existed). */
  status: string | null;
  parentId: string | null;
  /** The record of the spawn that made it, if it was spawned. */
  spawn?: {
    type: string;
    status: string;
    reason: string | null;
    createdAt: string;
    rows: number;
    spawnMs: number | null;
  };
}

export interface LineageNode extends LineageEntry {
  children: LineageNode[];
}

export interface Lineage {
  /** Root first. */
  ancestors: LineageEntry[];
  self: LineageEntry;
  descendants: LineageNode[];
}

function spawnOf(s: Spawn | null | undefined): LineageEntry['spawn'] {
  return s
    ? {
        type: s.type,
        status: s.status,
        reason: s.reason,
        createdAt: s.createdAt.toISOString(),
        rows: s.rows,
        spawnMs: s.spawnMs,
      }
    : undefined;
}

function entryOf(
  a: Pick<Agent, 'id' | 'name' | 'kind' | 'generation' | 'status' | 'parentId'>,
  s?: Spawn | null,
): LineageEntry {
  return {
    id: a.id,
    name: a.name,
    kind: a.kind,
    generation: a.generation,
    status: a.status,
    parentId: a.parentId,
    ...(s ? { spawn: spawnOf(s) } : {}),
  };
}

/** An agent's ancestors (through `parent_id`) and every spawn below it (through `spawns`), or undefined if it does not exist. */
export async function lineage(db: Conn, agentId: string): Promise<Lineage | undefined> {
  const [self] = await db.select().from(agents).where(eq(agents.id, agentId));
  if (!self) return undefined;
  const ancestors: LineageEntry[] = [];
  const seen = new Set([self.id]);
  for (let id = self.parentId; id && !seen.has(id);) {
    seen.add(id);
    const [a] = await db.select().from(agents).where(eq(agents.id, id));
    if (!a) break;
    ancestors.unshift(entryOf(a, await spawnRecord(db, a.id)));
    id = a.parentId;
  }
  const below = await db.execute<{ child_agent_id: string }>(sql`
    with recursive d(child) as (
      select child_agent_id from spawns where agent_id = ${agentId}
      union
      select s.child_agent_id from spawns s join d on s.agent_id = d.child
    ) select child as child_agent_id from d`);
  const ids = below.rows.map((r) => r.child_agent_id);
  const records = ids.length
    ? await db
        .select()
        .from(spawns)
        .where(inArray(spawns.childAgentId, ids))
        .orderBy(asc(spawns.createdAt), asc(spawns.id))
    : [];
  const alive = ids.length ? await db.select().from(agents).where(inArray(agents.id, ids)) : [];
  const byId = new Map(alive.map((a) => [a.id, a]));
  const nodes = new Map<string, LineageNode>();
  for (const s of records) {
    const a = byId.get(s.childAgentId);
    // A child that never lived (refused, rolled back) is shown by its record alone.
    const e =
      a && a.parentId === s.agentId
        ? entryOf(a, s)
        : {
            id: s.childAgentId,
            name: s.name,
            kind: s.type,
            generation: s.generation,
            status: null,
            parentId: s.agentId,
            spawn: spawnOf(s),
          };
    nodes.set(s.childAgentId, { ...e, children: [] });
  }
  const roots: LineageNode[] = [];
  for (const s of records) {
    const node = nodes.get(s.childAgentId)!;
    if (s.agentId === agentId) roots.push(node);
    else nodes.get(s.agentId)?.children.push(node);
  }
  return { ancestors, self: entryOf(self, await spawnRecord(db, self.id)), descendants: roots };
}
