/**
 * An agent's MCP servers and their tools: what `tools mcp add|list|remove`, the agent's
 * `mcp.call` and the MCP activities read and write.
 */
import { and, asc, eq, ilike, inArray, isNotNull, isNull, or, sql, type SQL } from 'drizzle-orm';
import type { Db } from '../client.js';
import { statements } from '../prepared.js';
import { grantedAtStart } from '../../core/mcp-policy.js';
import type { Queryable } from './abstracts.js';
import {
  mcpServers,
  mcpTools,
  type McpServer,
  type McpServerPolicy,
  type McpServerSandbox,
  type McpTool,
  type McpToolAnnotations,
} from '../schema/index.js';

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

export interface NewMcpServer {
  agentId: string;
  name: string;
  transport: 'stdio' | 'http';
  command?: string | null;
  args?: string[];
  url?: string | null;
  envNames?: string[];
  headerEnv?: Record<string, string>;
  /** Absent: every tool granted, the deployment's defaults for the rest. */
  policy?: McpServerPolicy;
  /** Run in the sandbox container (null or absent: the worker's own child process). */
  sandbox?: McpServerSandbox | null;
  source: 'file' | 'person';
}

export interface McpToolRow {
  name: string;
  description: string | null;
  inputSchema: Record<string, unknown>;
  annotations: McpToolAnnotations;
}

/** Store a server with the tools it listed, in one transaction; a server of that name already there is an error. */
export async function insertMcpServer(db: Db, server: NewMcpServer, tools: readonly McpToolRow[]): Promise<McpServer> {
  return db.transaction(async (tx) => {
    const [row] = await tx
      .insert(mcpServers)
      .values({ ...server, listedAt: new Date() })
      .onConflictDoNothing()
      .returning();
    if (!row) throw new Error(`agent ${server.agentId} already has an MCP server named ${server.name}`);
    await replaceTools(tx, row, tools);
    return row;
  });
}

/** Replace a server's tools with the list it gave now (a `tools/list_changed`). */
export async function replaceMcpTools(
  db: Db,
  agentId: string,
  server: string,
  tools: readonly McpToolRow[],
): Promise<void> {
  await db.transaction(async (tx) => {
    const [row] = await tx
      .update(mcpServers)
      .set({ listedAt: new Date() })
      .where(and(eq(mcpServers.agentId, agentId), eq(mcpServers.name, server)))
      .returning();
    if (row) await replaceTools(tx, row, tools);
  });
}

/**
 * Replace a server's tools with the list it gave now (added, listed again, `list_changed`). A tool
 * the agent had discovered stays discovered (carried by name); a new one is discovered now when the
 * server's policy grants it from the start, and otherwise waits for a search or a person's grant.
 */
export async function replaceTools(tx: Tx, server: McpServer, tools: readonly McpToolRow[]): Promise<void> {
  const before = await tx
    .delete(mcpTools)
    .where(eq(mcpTools.serverId, server.id))
    .returning({ name: mcpTools.name, discoveredAt: mcpTools.discoveredAt });
  if (tools.length === 0) return;
  const known = new Map(before.map((t) => [t.name, t.discoveredAt]));
  const now = new Date();
  await tx.insert(mcpTools).values(
    tools.map((t) => ({
      agentId: server.agentId,
      serverId: server.id,
      name: t.name,
      description: t.description,
      inputSchema: t.inputSchema,
      annotations: t.annotations,
      discoveredAt: known.get(t.name) ?? (grantedAtStart(server.policy ?? {}, t.name) ? now : null),
    })),
  );
}

/** The agent's servers, by name, each with its tools by name. */
export async function mcpServersOf(db: Db, agentId: string): Promise<Array<McpServer & { tools: McpTool[] }>> {
  const servers = await db
    .select()
    .from(mcpServers)
    .where(eq(mcpServers.agentId, agentId))
    .orderBy(asc(mcpServers.name));
  const tools = await db.select().from(mcpTools).where(eq(mcpTools.agentId, agentId)).orderBy(asc(mcpTools.name));
  return servers.map((s) => ({ ...s, tools: tools.filter((t) => t.serverId === s.id) }));
}

const lookups = statements('mcp_lookup', (db, name) => ({
  toolOf: db
    .select({ server: mcpServers, tool: mcpTools })
    .from(mcpServers)
    .leftJoin(mcpTools, and(eq(mcpTools.serverId, mcpServers.id), eq(mcpTools.name, sql.placeholder('tool'))))
    .where(
      and(
        eq(mcpServers.agentId, sql.placeholder('agentId')),
        eq(mcpServers.name, sql.placeholder('server')),
        eq(mcpServers.enabled, true),
      ),
    )
    .prepare(name('tool_of')),
}));

/** One enabled server of the agent and one of its tools (either may be missing); every call makes it, so it is prepared. */
export async function mcpToolOf(
  db: Queryable,
  agentId: string,
  server: string,
  tool: string,
): Promise<{ server: McpServer | undefined; tool: McpTool | undefined }> {
  const [row] = await lookups(db).toolOf.execute({ agentId, server, tool });
  return { server: row?.server, tool: row?.tool ?? undefined };
}

/** Remove a server (its tools go with it); false when the agent has none of that name. */
export async function deleteMcpServer(db: Db, agentId: string, name: string): Promise<boolean> {
  const gone = await db
    .delete(mcpServers)
    .where(and(eq(mcpServers.agentId, agentId), eq(mcpServers.name, name)))
    .returning({ id: mcpServers.id });
  return gone.length > 0;
}

/** What a worker saw of a server's process, for `tools mcp list` (the last report wins). */
export async function recordMcpHealth(
  db: Db,
  h: { agentId: string; server: string; state: string; restarts: number; lastError: string | null },
): Promise<void> {
  await db
    .update(mcpServers)
    .set({
      health: h.state === 'up' ? 'up' : 'down',
      healthAt: new Date(),
      lastError: h.lastError,
      restarts: h.restarts,
    })
    .where(and(eq(mcpServers.agentId, h.agentId), eq(mcpServers.name, h.server)));
}

/**
 * A person's grant (`on`) or revocation of one tool: it enters the agent's context (discovered now,
 * an earlier discovery kept) or leaves it. What changed, or which of server and tool is missing.
 */
export async function setMcpToolDiscovered(
  db: Db,
  agentId: string,
  server: string,
  tool: string,
  on: boolean,
): Promise<'changed' | 'unchanged' | 'no_server' | 'no_tool'> {
  return db.transaction(async (tx) => {
    const [s] = await tx
      .select({ id: mcpServers.id })
      .from(mcpServers)
      .where(and(eq(mcpServers.agentId, agentId), eq(mcpServers.name, server)));
    if (!s) return 'no_server';
    const [t] = await tx
      .select({ id: mcpTools.id, discoveredAt: mcpTools.discoveredAt })
      .from(mcpTools)
      .where(and(eq(mcpTools.serverId, s.id), eq(mcpTools.name, tool)));
    if (!t) return 'no_tool';
    if ((t.discoveredAt !== null) === on) return 'unchanged';
    await tx
      .update(mcpTools)
      .set({ discoveredAt: on ? new Date() : null, updatedAt: new Date() })
      .where(eq(mcpTools.id, t.id));
    return 'changed';
  });
}

/** One MCP tool as discovery shows it. */
export interface McpToolFound {
  id: number;
  server: string;
  name: string;
  description: string | null;
  annotations: McpToolAnnotations;
  /** Its server's policy (what the agent's file allows of it). */
  policy: McpServerPolicy;
  discoveredAt: Date | null;
}

const foundColumns = {
  id: mcpTools.id,
  server: mcpServers.name,
  name: mcpTools.name,
  description: mcpTools.description,
  annotations: mcpTools.annotations,
  policy: mcpServers.policy,
  discoveredAt: mcpTools.discoveredAt,
};

/** The tools of the agent's enabled servers that are in its context, by server and name. */
export async function discoveredMcpTools(db: Pick<Db, 'select'>, agentId: string): Promise<McpToolFound[]> {
  return db
    .select(foundColumns)
    .from(mcpTools)
    .innerJoin(mcpServers, eq(mcpServers.id, mcpTools.serverId))
    .where(and(eq(mcpTools.agentId, agentId), eq(mcpServers.enabled, true), isNotNull(mcpTools.discoveredAt)))
    .orderBy(asc(mcpServers.name), asc(mcpTools.name));
}

/** The words of a search: lower case, split on anything but letters and digits, at most 10. */
export function searchWords(query: string): string[] {
  return [
    ...new Set(
      query
        .toLowerCase()
        .split(/[^\p{L}\p{N}]+/u)
        .filter((w) => w.length > 0),
    ),
  ].slice(0, 10);
}

/**
 * Score of one tool for the words: per word, 3 when the tool's name (or `server.tool`) has it,
 * 1 when only the description has it; a tool whose name holds every word gains 2 more.
 */
export function searchScore(t: { server: string; name: string; description: string | null }, words: string[]): number {
  const name = `${t.server}.${t.name}`.toLowerCase();
  const description = (t.description ?? '').toLowerCase();
  let score = 0;
  for (const w of words) score += name.includes(w) ? 3 : description.includes(w) ? 1 : 0;
  return words.length > 0 && words.every((w) => name.includes(w)) ? score + 2 : score;
}

/** Candidates a search ranks at most (the best `limit` of them are returned). */
const searchCandidates = 500;

/**
 * The agent's MCP tools (enabled servers) whose name or description has any of the query's words,
 * case-insensitive, best first (searchScore, then server and name), at most `limit`.
 */
export async function searchMcpTools(
  db: Pick<Db, 'select'>,
  agentId: string,
  query: string,
  limit = 10,
): Promise<McpToolFound[]> {
  const words = searchWords(query);
  if (words.length === 0) return [];
  const conds: SQL[] = words.flatMap((w) => {
    const like = `%${w.replace(/[%_\\]/g, '\\$&')}%`;
    return [ilike(mcpTools.name, like), ilike(mcpTools.description, like), ilike(mcpServers.name, like)];
  });
  const rows = await db
    .select(foundColumns)
    .from(mcpTools)
    .innerJoin(mcpServers, eq(mcpServers.id, mcpTools.serverId))
    .where(and(eq(mcpTools.agentId, agentId), eq(mcpServers.enabled, true), or(...conds)))
    .orderBy(asc(mcpServers.name), asc(mcpTools.name))
    .limit(searchCandidates);
  return rows
    .map((r) => ({ r, score: searchScore(r, words) }))
    .filter((x) => x.score > 0)
    .sort((a, b) => b.score - a.score)
    .slice(0, limit)
    .map((x) => x.r);
}

/** Put these tools in the agent's context (those already there keep their first discovery). */
export async function markMcpToolsDiscovered(db: Pick<Db, 'update'>, agentId: string, ids: number[]): Promise<void> {
  if (ids.length === 0) return;
  await db
    .update(mcpTools)
    .set({ discoveredAt: sql`now()`, updatedAt: sql`now()` })
    .where(and(eq(mcpTools.agentId, agentId), inArray(mcpTools.id, ids), isNull(mcpTools.discoveredAt)));
}
