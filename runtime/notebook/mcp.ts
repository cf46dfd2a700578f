/**
 * An agent's MCP servers behind the API: `GET /api/agents/<id>/mcp` answers each server the agent
 * is granted with what the workers last saw of it (up, down with the last error, or not started;
 * its restarts), its tools with their annotations, and its recent calls, newest first, each with
 * its status, tool, times and text clipped. A call of unknown outcome (a worker lost it midway:
 * it may or may not have happened, and is never made again by itself) is counted per server over
 * the last 24 h, since a person must look at it. Calls of a server no longer granted are listed
 * under its name, marked removed. Read-only; an unknown agent is a 404 naming it.
 *
 * Tool descriptions, titles and call texts come from the servers and are hostile: they are sent
 * as JSON strings only, and the page shows them as text.
 */
import { and, asc, count, desc, eq, sql } from 'drizzle-orm';
import type { Hono } from 'hono';
import { oneLine } from '../../core/sanitize.js';
import type { Db } from '../../db/client.js';
import { agents, mcpCalls, mcpServers, mcpTools, type McpToolAnnotations } from '../../db/schema/index.js';
import { NotebookError, ids } from './actions.js';

/** The most calls listed per server. */
const callsPerServer = 20;
/** The most characters of a call's text, of a tool's description, and of a server's last error the page gets. */
const maxCallText = 300;
const maxDescription = 500;
const maxError = 500;

export interface NotebookMcpCall {
  id: number;
  tool: string;
  status: 'started' | 'ok' | 'error' | 'unknown';
  isError: boolean;
  /** The result's text on one line, clipped (null: none yet). */
  text: string | null;
  createdAt: string;
  finishedAt: string | null;
}

export interface NotebookMcpTool {
  name: string;
  title: string | null;
  description: string | null;
  annotations: McpToolAnnotations;
}

export interface NotebookMcpServer {
  name: string;
  /** Not granted any more: only its calls are left. */
  removed: boolean;
  transport: 'stdio' | 'http' | null;
  enabled: boolean;
  source: 'file' | 'person' | null;
  /** What the workers last saw: up, down, or null when no worker started it since it was added. */
  health: 'up' | 'down' | null;
  healthAt: string | null;
  lastError: string | null;
  restarts: number;
  listedAt: string | null;
  tools: NotebookMcpTool[];
  calls: NotebookMcpCall[];
  /** Calls of unknown outcome in the last 24 h. */
  unknownCalls: number;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** The agent's servers by name, each with its tools and recent calls; null when there is no such agent. */
export async function agentMcpServers(db: Db, agentId: string): Promise<NotebookMcpServer[] | null> {
  const [agent] = await db.select({ id: agents.id }).from(agents).where(eq(agents.id, agentId));
  if (!agent) return null;
  const servers = await db
    .select()
    .from(mcpServers)
    .where(eq(mcpServers.agentId, agentId))
    .orderBy(asc(mcpServers.name));
  const tools = await db.select().from(mcpTools).where(eq(mcpTools.agentId, agentId)).orderBy(asc(mcpTools.name));
  const recent = db
    .select({
      id: mcpCalls.id,
      server: mcpCalls.server,
      tool: mcpCalls.tool,
      status: mcpCalls.status,
      isError: mcpCalls.isError,
      text: mcpCalls.text,
      createdAt: mcpCalls.createdAt,
      finishedAt: mcpCalls.finishedAt,
      n: sql<number>`row_number() over (partition by ${mcpCalls.server} order by ${mcpCalls.createdAt} desc, ${mcpCalls.id} desc)`.as(
        'n',
      ),
    })
    .from(mcpCalls)
    .where(eq(mcpCalls.agentId, agentId))
    .as('recent');
  const calls = await db
    .select()
    .from(recent)
    .where(sql`${recent.n} <= ${callsPerServer}`)
    .orderBy(desc(recent.createdAt), desc(recent.id));
  const unknown = await db
    .select({ server: mcpCalls.server, n: count() })
    .from(mcpCalls)
    .where(
      and(
        eq(mcpCalls.agentId, agentId),
        eq(mcpCalls.status, 'unknown'),
        sql`coalesce(${mcpCalls.finishedAt}, ${mcpCalls.createdAt}) > now() - interval '24 hours'`,
      ),
    )
    .groupBy(mcpCalls.server);
  const unknownOf = new Map(unknown.map((u) => [u.server, u.n]));
  const callsOf = (server: string): NotebookMcpCall[] =>
    calls
      .filter((c) => c.server === server)
      .map((c) => ({
        id: Number(c.id),
        tool: c.tool,
        status: c.status,
        isError: c.isError,
        text: c.text === null ? null : oneLine(c.text, maxCallText),
        createdAt: c.createdAt.toISOString(),
        finishedAt: iso(c.finishedAt),
      }));
  const shown: NotebookMcpServer[] = servers.map((s) => ({
    name: s.name,
    removed: false,
    transport: s.transport,
    enabled: s.enabled,
    source: s.source,
    health: s.health,
    healthAt: iso(s.healthAt),
    lastError: s.lastError === null ? null : oneLine(s.lastError, maxError),
    restarts: s.restarts,
    listedAt: iso(s.listedAt),
    tools: tools
      .filter((t) => t.serverId === s.id)
      .map((t) => ({
        name: t.name,
        title: t.annotations.title ?? null,
        description: t.description === null ? null : oneLine(t.description, maxDescription),
        annotations: t.annotations,
      })),
    calls: callsOf(s.name),
    unknownCalls: unknownOf.get(s.name) ?? 0,
  }));
  const granted = new Set(servers.map((s) => s.name));
  const gone = [...new Set(calls.map((c) => c.server))].filter((name) => !granted.has(name)).sort();
  for (const name of gone)
    shown.push({
      name,
      removed: true,
      transport: null,
      enabled: false,
      source: null,
      health: null,
      healthAt: null,
      lastError: null,
      restarts: 0,
      listedAt: null,
      tools: [],
      calls: callsOf(name),
      unknownCalls: unknownOf.get(name) ?? 0,
    });
  return shown;
}

/** The route under /api/agents/<id>/mcp. */
export function mcpRoutes(app: Hono, d: { db: Db }): void {
  app.get('/api/agents/:id/mcp', async (c) => {
    const id = ids.agent(c.req.param('id'));
    const servers = await agentMcpServers(d.db, id);
    if (!servers) throw new NotebookError(404, `no agent ${id}`);
    return c.json({ agentId: id, servers, now: new Date().toISOString() });
  });
}
