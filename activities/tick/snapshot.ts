/**
 * One read of an agent per tick. Think, the reflexes and applyCommands all need the agent's
 * settings, ethics policies, LLM registry, learnings, its previous replies and the tick's own
 * reply. The first of them to run reads them in one batch; the others take that snapshot,
 * keyed by (agent, tick), instead of reading the same rows again — and the reply is parsed once.
 *
 * The snapshot is the tick's view of the agent as it began: what the tick's own commands write
 * is seen by the next tick. It lives in the worker's memory, so an activity that runs on
 * another worker, or after a restart, reads the same rows itself. Only the newest tick of each
 * loop is kept, and at most `maxAgents` loops. The previous replies are the loop's own: the main
 * loop's from llm_recent_responses, a task loop's (which counts its own ticks) from the process log.
 *
 * What rarely changes (the agent's settings, ethics policies, usable LLM rows, learnings, active
 * system prompts and thinking method, MCP servers and tools) is kept per agent beside a
 * fingerprint of those rows, which the agent's row read returns on every tick (`rareVersionSql`):
 * when it is the one kept, the eight reads are skipped. Every write of
 * those rows changes it (each writes new row versions), whoever writes them: commands, the CLI,
 * agent files, forks, the maintenance jobs.
 *
 * This module is the store's only writer: `snapshotOf` and `replyOf` read through it (keeping
 * what they read), `recordReply` keeps the reply think parsed. What they hand out is not changed
 * by anyone else.
 */
import {
  and,
  asc,
  count,
  desc,
  eq,
  isNotNull,
  isNull,
  lt,
  notLike,
  sql,
  type Placeholder,
  type SQL,
} from 'drizzle-orm';
import type { LoadedLearning } from '../../core/learnings.js';
import type { McpContextTool } from '../tools.js';
import { placeholderLike } from '../../core/novelty.js';
import type { ParsedReply } from '../../core/loop-types.js';
import { parseReply } from '../../core/reply-parser.js';
import type { Db } from '../../db/client.js';
import { statements } from '../../db/prepared.js';
import { fieldRowsOf, jsonRows, rowsOf } from '../../db/json-rows.js';
import type { Queryable } from '../../db/queries/abstracts.js';
import { loadLearnings } from '../../db/queries/learnings.js';
import { peerPresenceSql } from '../../db/queries/peer-presence.js';
import { embedderAwaySql } from '../../db/queries/embedder-health.js';
import type { PeerPresence } from '../../core/society/isolation.js';
import {
  agentConfig,
  agents,
  ethicsPolicies,
  llmRecentResponses,
  mcpServers,
  mcpTools,
  processLog,
  systemPrompts,
  thinkingMethods,
  type Agent,
  type EthicsPolicy as EthicsPolicyRow,
  type SystemPrompt,
} from '../../db/schema/index.js';
import type { LlmRegistryEntry } from '../../db/schema/index.js';
import type { LlmRouter } from '../llm/index.js';

/** A previous reply, with what the context and the reflexes read of it. */
export interface PreviousReply {
  id: number;
  tick: number;
  content: string;
  contentHash: string | null;
  tags: string[];
  emotions: Array<{ emotion: string; strength: number }>;
  contextMode: string;
  archived: boolean;
}

/** The tick's own reply as think recorded it (main loop), parsed once. */
export type TickReply = Readonly<{
  id: number;
  content: string;
  parsed: ParsedReply;
  llmRegistryId: number | null;
  tags: string[];
  /** The reflexes' recorded verdict when the reply was read from its row after they ran (null when think kept it). */
  reflexes: unknown;
}>;

/** The agent as one tick read it (read-only: the store keeps it for the tick's other activities). */
export type AgentSnapshot = Readonly<{
  agentId: string;
  tick: number;
  agent: Agent | undefined;
  /** `agent_config` as key → value. */
  config: Record<string, unknown>;
  /** Active ethics policies, by priority (highest first), then id. */
  ethics: EthicsPolicyRow[];
  registry: LlmRegistryEntry[];
  /** Learnings above the load threshold, by confidence then recency (up to `learningLimit`). */
  learnings: LoadedLearning[];
  /** Active system prompts, newest version first. */
  prompts: SystemPrompt[];
  /** The thinking method the agent made active and enabled (`thinking_methods.use`), if any. */
  method: { name: string; prompt: string } | undefined;
  /** The discovered tools of the agent's enabled MCP servers (the first `mcpToolsShown` by server and name). */
  mcpTools: McpContextTool[];
  /** Per enabled server, how many of its tools the agent has not discovered (a search finds them). */
  mcpHidden: Array<{ server: string; count: number }>;
  /** The loop's own replies before this tick, newest first (see `previousRepliesQuery`, `taskRepliesQuery`). */
  previous: PreviousReply[];
  /** Known peers (not blocked), most trusted first, with what tells whether each is reachable (read with the agent row). */
  peers: PeerPresence[];
  /** Whether the agent's embedder has an open away entry (read with the agent row): the reflexes close it once it answers. */
  embedderAway: boolean;
}>;

/** At most this many MCP tools are listed in context 2 (the first by server and name). */
export const mcpToolsShown = 50;

/** Learnings a snapshot holds: the context shows the first few, applyCommands checks the avoid_patterns among all. */
export const learningLimit = 200;
/** Previous replies the reflexes compare a reply with (identical hash, novelty). */
export const reflexWindow = { recent: 30, real: 5 } as const;

/**
 * The previous replies a tick needs, each row once: the newest `contextLimit` not archived (the
 * context), the newest 30 whatever their state (identical-reply check), and the newest 5 that
 * are not placeholders of a repeated reply (novelty). Three index scans, one round trip. A task
 * loop reads its own instead (`readTaskReplies`).
 */
async function readPreviousReplies(
  db: Db,
  loop: LoopRef,
  tick: number,
  contextLimit: number,
): Promise<PreviousReply[]> {
  const { agentId, taskId } = loop;
  if (taskId !== undefined) return readTaskReplies(db, agentId, taskId, tick, contextLimit);
  return previousRepliesOf(await snapshotStatements(db).previous.execute({ agentId, tick, contextLimit }));
}

/** A previous reply's fields, as `previousRepliesQuery` selects them (`PreviousReply`). */
const previousColumns = {
  id: llmRecentResponses.id,
  tick: llmRecentResponses.tick,
  content: llmRecentResponses.content,
  contentHash: llmRecentResponses.contentHash,
  tags: llmRecentResponses.tags,
  emotions: llmRecentResponses.emotions,
  contextMode: llmRecentResponses.contextMode,
  archived: sql<boolean>`${llmRecentResponses.archivedAt} is not null`.as('archived'),
};

/** The rows of `previousRepliesQuery` as the snapshot keeps them: newest first. */
function previousRepliesOf(rows: readonly PreviousReply[]): PreviousReply[] {
  return rows
    .map((r) => ({ ...r, emotions: r.emotions.map((e) => ({ emotion: e.emotion, strength: e.strength })) }))
    .sort((a, b) => b.tick - a.tick);
}

function previousRepliesQuery(db: Queryable) {
  const [agentId, tick, contextLimit] = [
    sql.placeholder('agentId'),
    sql.placeholder('tick'),
    sql.placeholder('contextLimit'),
  ];
  const cols = previousColumns;
  const before = and(eq(llmRecentResponses.agentId, agentId), lt(llmRecentResponses.tick, tick));
  const live = db
    .select(cols)
    .from(llmRecentResponses)
    .where(and(before, isNull(llmRecentResponses.archivedAt)))
    .orderBy(desc(llmRecentResponses.tick))
    .limit(contextLimit);
  const recent = db
    .select(cols)
    .from(llmRecentResponses)
    .where(before)
    .orderBy(desc(llmRecentResponses.tick))
    .limit(reflexWindow.recent);
  const real = db
    .select(cols)
    .from(llmRecentResponses)
    .where(and(before, notLike(llmRecentResponses.content, placeholderLike)))
    .orderBy(desc(llmRecentResponses.tick))
    .limit(reflexWindow.real);
  return live.union(recent).union(real);
}

/**
 * A task loop's previous replies: the newest `contextLimit` its own earlier ticks recorded in the
 * process log (`task/<id>`, kind `task_loop`, one row a tick). They are not the main loop's: the
 * two loops count their ticks apart. The reflexes do not run on a task loop, so nothing else is read.
 */
async function readTaskReplies(
  db: Db,
  agentId: string,
  taskId: number,
  tick: number,
  contextLimit: number,
): Promise<PreviousReply[]> {
  if (contextLimit <= 0) return [];
  const rows = await snapshotStatements(db).taskPrevious.execute({
    agentId,
    processId: `task/${taskId}`,
    tick,
    contextLimit,
  });
  return rows.map((r) => ({
    id: r.id,
    tick: Number(r.tick),
    content: r.content,
    contentHash: null,
    tags: [],
    emotions: [],
    contextMode: 'standard',
    archived: false,
  }));
}

function taskRepliesQuery(db: Queryable) {
  return db
    .select({
      id: processLog.id,
      tick: processLog.tick,
      content: sql<string>`coalesce(${processLog.payload}->>'content', ${processLog.message}, '')`.as('content'),
    })
    .from(processLog)
    .where(
      and(
        eq(processLog.agentId, sql.placeholder('agentId')),
        eq(processLog.processId, sql.placeholder('processId')),
        eq(processLog.kind, 'task_loop'),
        isNotNull(processLog.tick),
        lt(processLog.tick, sql.placeholder('tick')),
      ),
    )
    .orderBy(desc(processLog.tick), desc(processLog.id))
    .limit(sql.placeholder('contextLimit'));
}

/**
 * A fingerprint of the rows the rare part of a snapshot is read from (`RarePart`): per table, the
 * number of the agent's rows and a 64-bit hash summed over their row versions (`xmin`, the
 * transaction that wrote the version, and `ctid`, where it lies). An insert, update or delete
 * writes or removes a row version, so it changes the fingerprint; so may a vacuum that moves rows
 * (which only costs a read). Index scans on each table's agent column, a few rows each.
 */
function rareVersionSql(agentId: Placeholder) {
  const agent = sql`${agentId}::text`;
  const own = sql`agent_id = ${agent}`;
  const kept: Array<[string, SQL]> = [
    ['agent_config', own],
    ['ethics_policies', own],
    ['llm_registry', own],
    ['learnings', sql`agent_id = ${agent} or shard_type = 'agent:' || ${agent}`],
    ['system_prompts', own],
    ['thinking_methods', own],
    ['mcp_servers', own],
    ['mcp_tools', own],
  ];
  const of = ([table, where]: [string, SQL]) =>
    sql`(select count(*)::text || '.' || coalesce(sum(hashtextextended(xmin::text || ctid::text, 0)), 0)::text from ${sql.identifier(table)} where ${where})`;
  return sql<string>`${sql.join(kept.map(of), sql` || '|' || `)}`.as('rare');
}

/** The snapshot's statements, rendered once per database handle. */
const snapshotStatements = statements('snapshot', (db, name) => {
  const agentId = sql.placeholder('agentId');
  return {
    agent: db
      .select({
        agent: agents,
        peers: peerPresenceSql(agentId),
        embedderAway: embedderAwaySql(agentId).as('embedder_away'),
        rare: rareVersionSql(agentId),
      })
      .from(agents)
      .where(eq(agents.id, agentId))
      .prepare(name('agent')),
    config: db
      .select({ key: agentConfig.key, value: agentConfig.value })
      .from(agentConfig)
      .where(eq(agentConfig.agentId, agentId))
      .prepare(name('config')),
    ethics: db
      .select()
      .from(ethicsPolicies)
      .where(and(eq(ethicsPolicies.agentId, agentId), eq(ethicsPolicies.active, true)))
      .orderBy(desc(ethicsPolicies.priority), asc(ethicsPolicies.id))
      .prepare(name('ethics')),
    prompts: db
      .select()
      .from(systemPrompts)
      .where(and(eq(systemPrompts.agentId, agentId), eq(systemPrompts.active, true)))
      .orderBy(desc(systemPrompts.version))
      .prepare(name('prompts')),
    method: db
      .select({ name: thinkingMethods.name, prompt: thinkingMethods.prompt })
      .from(thinkingMethods)
      .where(
        and(eq(thinkingMethods.agentId, agentId), eq(thinkingMethods.active, true), eq(thinkingMethods.enabled, true)),
      )
      .limit(1)
      .prepare(name('method')),
    mcpTools: db
      .select({
        server: mcpServers.name,
        name: mcpTools.name,
        description: mcpTools.description,
        inputSchema: mcpTools.inputSchema,
        annotations: mcpTools.annotations,
        policy: mcpServers.policy,
      })
      .from(mcpTools)
      .innerJoin(mcpServers, eq(mcpServers.id, mcpTools.serverId))
      .where(and(eq(mcpTools.agentId, agentId), eq(mcpServers.enabled, true), isNotNull(mcpTools.discoveredAt)))
      .orderBy(asc(mcpServers.name), asc(mcpTools.name))
      .limit(mcpToolsShown)
      .prepare(name('mcp_tools')),
    mcpHidden: db
      .select({ server: mcpServers.name, count: count() })
      .from(mcpTools)
      .innerJoin(mcpServers, eq(mcpServers.id, mcpTools.serverId))
      .where(and(eq(mcpTools.agentId, agentId), eq(mcpServers.enabled, true), isNull(mcpTools.discoveredAt)))
      .groupBy(mcpServers.name)
      .orderBy(asc(mcpServers.name))
      .prepare(name('mcp_hidden')),
    previous: previousRepliesQuery(db).prepare(name('previous')),
    taskPrevious: taskRepliesQuery(db).prepare(name('task_previous')),
  };
});

/** What a snapshot reads that rarely changes, as read at `version` (`rareVersionSql`). */
interface RarePart {
  version: string;
  config: Record<string, unknown>;
  ethics: EthicsPolicyRow[];
  registry: LlmRegistryEntry[];
  learnings: LoadedLearning[];
  prompts: SystemPrompt[];
  method: { name: string; prompt: string } | undefined;
  mcpTools: McpContextTool[];
  mcpHidden: Array<{ server: string; count: number }>;
}

/** The rare part kept per agent (`maxAgents` at most, the least recently read dropped first). */
type RareParts = Map<string, RarePart>;

async function readRare(db: Db, llm: Pick<LlmRouter, 'registry'>, agentId: string, version: string): Promise<RarePart> {
  const statements = snapshotStatements(db);
  const [config, ethics, registry, learnings, prompts, [method], mcpTools, hidden] = await Promise.all([
    statements.config.execute({ agentId }),
    statements.ethics.execute({ agentId }),
    llm.registry(agentId),
    loadLearnings(db, { agentId, limit: learningLimit }),
    statements.prompts.execute({ agentId }),
    statements.method.execute({ agentId }),
    statements.mcpTools.execute({ agentId }),
    statements.mcpHidden.execute({ agentId }),
  ]);
  const settings = Object.fromEntries(config.map((c) => [c.key, c.value]));
  const mcpHidden = hidden.map((h) => ({ server: h.server, count: Number(h.count) }));
  return { version, config: settings, ethics, registry, learnings, prompts, method, mcpTools, mcpHidden };
}

/** What a snapshot reads at every tick: the agent's row, its peers, its embedder's state, the rare part's fingerprint, the previous replies. */
export interface SnapshotRead {
  agent: Agent | undefined;
  peers: PeerPresence[];
  embedderAway: boolean;
  rare: string;
  previous: PreviousReply[];
}

/**
 * The main loop's `SnapshotRead` as columns of another statement (the tick's context reads them
 * with its own rows: activities/tick/context.ts); placeholders agentId, tick and contextLimit.
 * `snapshotReadOf` decodes them.
 */
export function snapshotReadColumns(db: Queryable) {
  const agentId = sql.placeholder('agentId');
  return {
    agentRow: jsonRows(db.select().from(agents).where(eq(agents.id, agentId))).as('agent_row'),
    peers: peerPresenceSql(agentId).as('peers'),
    embedderAway: embedderAwaySql(agentId).as('embedder_away'),
    rare: rareVersionSql(agentId),
    previous: jsonRows(previousRepliesQuery(db)).as('previous'),
  };
}

/** The columns of `snapshotReadColumns` as read. */
export function snapshotReadOf(row: {
  agentRow: unknown;
  peers: PeerPresence[];
  embedderAway: boolean;
  rare: string;
  previous: unknown;
}): SnapshotRead {
  return {
    agent: rowsOf(agents, row.agentRow)[0],
    peers: row.peers,
    embedderAway: row.embedderAway,
    rare: row.rare,
    previous: previousRepliesOf(fieldRowsOf<PreviousReply>(previousColumns, row.previous)),
  };
}

/** The agent's row (with the rare part's fingerprint) and the previous replies, in one batch. */
async function readEveryTick(db: Db, loop: LoopRef, tick: number, contextLimit: number): Promise<SnapshotRead> {
  const [[row], previous] = await Promise.all([
    snapshotStatements(db).agent.execute({ agentId: loop.agentId }),
    readPreviousReplies(db, loop, tick, contextLimit),
  ]);
  return {
    agent: row?.agent,
    peers: row?.peers ?? [],
    embedderAway: row?.embedderAway ?? false,
    rare: row?.rare ?? '',
    previous,
  };
}

/**
 * The tick's snapshot: what is read at every tick (`readEveryTick`, unless `read` brings it); the
 * rare part from `rare` when its fingerprint is the one just read, else read after it (so what is
 * kept is never older than its fingerprint: a write between the two reads makes the next tick
 * read again).
 */
async function readSnapshot(
  db: Db,
  llm: Pick<LlmRouter, 'registry'>,
  rare: RareParts,
  maxAgents: number,
  loop: LoopRef,
  tick: number,
  contextLimit: number,
  read?: SnapshotRead,
): Promise<AgentSnapshot> {
  const { agentId } = loop;
  const every = read ?? (await readEveryTick(db, loop, tick, contextLimit));
  const version = every.rare;
  let part = rare.get(agentId);
  rare.delete(agentId);
  if (part?.version !== version) part = await readRare(db, llm, agentId, version);
  rare.set(agentId, part);
  if (rare.size > maxAgents) rare.delete(rare.keys().next().value!);
  return {
    agentId,
    tick,
    agent: every.agent,
    // Copies: a tick's snapshot is its own, whatever a reader does with it.
    config: { ...part.config },
    ethics: [...part.ethics],
    registry: [...part.registry],
    learnings: [...part.learnings],
    prompts: [...part.prompts],
    method: part.method,
    mcpTools: [...part.mcpTools],
    mcpHidden: [...part.mcpHidden],
    previous: every.previous,
    peers: every.peers,
    embedderAway: every.embedderAway,
  };
}

/** The tick's reply read from its row (by id: the reflexes name it), or undefined when there is none. */
async function readTickReply(db: Db, agentId: string, responseId: number): Promise<TickReply | undefined> {
  const [row] = await db
    .select()
    .from(llmRecentResponses)
    .where(and(eq(llmRecentResponses.id, responseId), eq(llmRecentResponses.agentId, agentId)));
  return row ? tickReplyOf(row) : undefined;
}

/** A stored reply as the tick's reply (parsed here, once). */
export function tickReplyOf(
  row: Pick<typeof llmRecentResponses.$inferSelect, 'id' | 'content' | 'llmRegistryId' | 'tags' | 'reflexes'>,
): TickReply {
  return {
    id: row.id,
    content: row.content,
    parsed: parseReply(row.content),
    llmRegistryId: row.llmRegistryId,
    tags: row.tags,
    reflexes: row.reflexes,
  };
}

/** The per-worker store of tick snapshots (newest tick per loop); see the module comment. */
export interface TickSnapshots {
  /**
   * The snapshot of (loop, tick): this worker's, or read now (the previous replies up to
   * `contextLimit`, default none beyond the reflexes' window) and kept. `fresh` reads anew even
   * when one is held: think, the tick's first activity, does, so a retried think sees what
   * changed meanwhile (a registry row fixed during an outage). `read`: what is read at every
   * tick, read already (with `fresh`).
   */
  snapshotOf(
    loop: LoopRef,
    tick: number,
    options?: { contextLimit?: number; fresh?: boolean; read?: SnapshotRead },
  ): Promise<AgentSnapshot>;
  /** The tick's reply `responseId`: the one think kept on this worker, else read from its row (kept beside this worker's snapshot of the tick). */
  replyOf(loop: LoopRef, tick: number, responseId: number): Promise<TickReply | undefined>;
  /** What this worker holds of (loop, tick), never reading: the snapshot once read, and the reply once kept. */
  held(loop: LoopRef, tick: number): { snapshot?: AgentSnapshot; reply?: TickReply } | undefined;
  /** Keep the tick's reply as think parsed and recorded it: the one write of a reply, once per tick. */
  recordReply(loop: LoopRef, tick: number, reply: TickReply): void;
}

/** Whose ticks: the agent's main loop, or one of its task loops (which count their own ticks). */
export interface LoopRef {
  agentId: string;
  taskId?: number;
}
const loopKey = (loop: LoopRef) => (loop.taskId === undefined ? loop.agentId : `${loop.agentId}#task${loop.taskId}`);

interface Entry {
  tick: number;
  snapshot: Promise<AgentSnapshot>;
  value?: AgentSnapshot;
  reply?: TickReply;
}

export function createTickSnapshots(deps: {
  db: Db;
  llm: Pick<LlmRouter, 'registry'>;
  maxAgents?: number;
}): TickSnapshots {
  const maxAgents = deps.maxAgents ?? 1000;
  const held = new Map<string, Entry>();
  const rare: RareParts = new Map();
  const entryOf = (loop: LoopRef, tick: number) => {
    const entry = held.get(loopKey(loop));
    return entry && entry.tick === tick ? entry : undefined;
  };
  function read(loop: LoopRef, tick: number, contextLimit: number, every?: SnapshotRead): Entry {
    const key = loopKey(loop);
    const fresh: Entry = {
      tick,
      snapshot: readSnapshot(deps.db, deps.llm, rare, maxAgents, loop, tick, contextLimit, every),
    };
    // A failed read is not kept: the next activity (or the retry) reads again.
    fresh.snapshot.then(
      (s) => (fresh.value = s),
      () => held.get(key) === fresh && held.delete(key),
    );
    held.delete(key);
    held.set(key, fresh);
    if (held.size > maxAgents) held.delete(held.keys().next().value!);
    return fresh;
  }
  return {
    snapshotOf(loop, tick, options = {}) {
      const entry = options.fresh ? undefined : entryOf(loop, tick);
      return (entry ?? read(loop, tick, options.contextLimit ?? 0, options.read)).snapshot;
    },
    async replyOf(loop, tick, responseId) {
      const own = entryOf(loop, tick)?.reply;
      if (own?.id === responseId) return own;
      const reply = await readTickReply(deps.db, loop.agentId, responseId);
      const entry = entryOf(loop, tick);
      if (reply && entry) entry.reply = reply;
      return reply;
    },
    held(loop, tick) {
      const entry = entryOf(loop, tick);
      return (
        entry && { ...(entry.value ? { snapshot: entry.value } : {}), ...(entry.reply ? { reply: entry.reply } : {}) }
      );
    },
    recordReply(loop, tick, reply) {
      const entry = entryOf(loop, tick);
      if (entry) entry.reply = reply;
    },
  };
}
