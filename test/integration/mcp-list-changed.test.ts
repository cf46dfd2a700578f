/**
 * A server that says its tools changed (`notifications/tools/list_changed`) has its new list in
 * mcp_tools: the worker's pool (createMcpPool) lists the tools again and replaces the rows.
 *
 * The server is @modelcontextprotocol/server-everything from npm, a reference server nobody here
 * wrote: once a client's handshake is done it registers the tools that depend on the client's
 * capabilities (simulate-research-query always), and its SDK tells the client the list changed.
 * The pool lists tools only when told so, so a stale list stored beforehand is replaced only by
 * that notification.
 */
import { join } from 'node:path';
import { asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpPool, specOf } from '../../activities/mcp/index.js';
import { listMcpTools, type McpPool } from '../../activities/mcp/pool.js';
import { insertMcpServer } from '../../db/queries/mcp.js';
import { agents, mcpServers, mcpTools, type McpServer } from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { repoRoot } from '../helpers/spawn.js';

const everythingBin = join(repoRoot, 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');

let database: MigratedDatabase;
let pool: McpPool;
let server: McpServer;

beforeAll(async () => {
  database = await migratedDatabase('mcp_list_changed', 2);
  await database.db.insert(agents).values({ id: 'ada', name: 'Ada' });
  // What `tools mcp add` stored some time ago: one tool the server no longer lists.
  server = await insertMcpServer(
    database.db,
    {
      agentId: 'ada',
      name: 'everything',
      transport: 'stdio',
      command: process.execPath,
      args: [everythingBin, 'stdio'],
      source: 'person',
    },
    [{ name: 'stale_tool', description: 'gone since', inputSchema: { type: 'object' }, annotations: {} }],
  );
  await database.db
    .update(mcpServers)
    .set({ listedAt: new Date(Date.now() - 3_600_000) })
    .where(eq(mcpServers.id, server.id));
  pool = createMcpPool(database.db, { env: { PATH: process.env.PATH } });
}, 60_000);

afterAll(async () => {
  await pool?.close();
  await database?.dispose();
});

const storedTools = () =>
  database.db.select().from(mcpTools).where(eq(mcpTools.serverId, server.id)).orderBy(asc(mcpTools.name));

describe('notifications/tools/list_changed', () => {
  it("replaces the server's rows in mcp_tools with the list it gives after it says its tools changed", async () => {
    const startedAt = Date.now();
    const client = await pool.client('ada', specOf(server));
    await expect
      .poll(async () => (await storedTools()).map((t) => t.name), { timeout: 15_000, interval: 100 })
      .toContain('simulate-research-query');

    // Exactly the server's list now: the stale tool is gone, every tool it lists is there once.
    const listed = await listMcpTools(client, 'everything', 10_000);
    const rows = await storedTools();
    expect(rows.map((t) => t.name)).toEqual(listed.map((t) => t.name).sort());
    expect(rows.map((t) => t.name)).not.toContain('stale_tool');
    expect(rows.map((t) => t.name)).toEqual(expect.arrayContaining(['echo', 'get-sum', 'simulate-research-query']));
    expect(rows.every((t) => t.agentId === 'ada')).toBe(true);

    // Each tool as the server describes it, annotations included.
    const echo = rows.find((t) => t.name === 'echo')!;
    expect(echo.annotations).toEqual({
      readOnlyHint: true,
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: false,
    });
    expect(echo.inputSchema).toMatchObject({ type: 'object', properties: { message: { type: 'string' } } });
    expect(rows.find((t) => t.name === 'simulate-research-query')!.annotations).toMatchObject({
      readOnlyHint: false,
      idempotentHint: false,
    });

    // The row says when the list was taken, and that the worker saw the server up.
    const row = async () => (await database.db.select().from(mcpServers).where(eq(mcpServers.id, server.id)))[0]!;
    expect((await row()).listedAt!.getTime()).toBeGreaterThanOrEqual(startedAt - 1000);
    await expect.poll(async () => (await row()).health).toBe('up');
    expect(await row()).toMatchObject({ restarts: 0, lastError: null });
  }, 60_000);
});
