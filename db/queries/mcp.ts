/**
 * An agent's MCP servers and their tools: what `tools mcp add|list|remove`, the agent's
 * `mcp.call` and the MCP activities read and write.
 */
import { and, asc, eq } from 'drizzle-orm';
import type { Db } from '../client.js';
import { mcpServers, mcpTools, type McpServer, type McpTool, type McpToolAnnotations } from '../schema/index.js';

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

export async function replaceTools(tx: Tx, server: McpServer, tools: readonly McpToolRow[]): Promise<void> {
  await tx.delete(mcpTools).where(eq(mcpTools.serverId, server.id));
  if (tools.length === 0) return;
  await tx.insert(mcpTools).values(
    tools.map((t) => ({
      agentId: server.agentId,
      serverId: server.id,
      name: t.name,
      description: t.description,
      inputSchema: t.inputSchema,
      annotations: t.annotations,
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

/** One enabled server of the agent and one of its tools (either may be missing). */
export async function mcpToolOf(
  db: Pick<Db, 'select'>,
  agentId: string,
  server: string,
  tool: string,
): Promise<{ server: McpServer | undefined; tool: McpTool | undefined }> {
  const [row] = await db
    .select({ server: mcpServers, tool: mcpTools })
    .from(mcpServers)
    .leftJoin(mcpTools, and(eq(mcpTools.serverId, mcpServers.id), eq(mcpTools.name, tool)))
    .where(and(eq(mcpServers.agentId, agentId), eq(mcpServers.name, server), eq(mcpServers.enabled, true)));
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
