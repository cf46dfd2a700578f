/**
 * Progressive discovery of MCP tools and their native binding: a relisted server keeps what the
 * agent discovered and grants new tools by its policy; context 2 lists the discovered tools and a
 * "more tools" line per server; `discover_tools search` finds the agent's MCP tools and discovers
 * them, `list` shows them; native calls of `mcp__<server>__<tool>` become `tools.mcp` commands.
 * The database parts run on the real Postgres.
 */
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callTool, createToolActivities, mcpToolDefinitions, mcpToolParameters } from '../../activities/tools.js';
import { assembleContext } from '../../core/context.js';
import {
  appendToolCalls,
  mcpNativeToolName,
  parseMcpNativeToolName,
  parseReply,
  toolCallsToCommands,
} from '../../core/reply-parser.js';
import { replaceTools, searchMcpTools, setMcpToolDiscovered, type McpToolRow } from '../../db/queries/mcp.js';
import { agents, mcpServers, mcpTools, type McpServerPolicy } from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { contextInput } from '../helpers/context.js';

let handle: MigratedDatabase;

beforeAll(async () => {
  handle = await migratedDatabase('mcp_discovery');
  const tools = createToolActivities({ db: handle.db });
  await tools.ensureBuiltinTools();
  await handle.db.insert(agents).values([
    { id: 'ada', name: 'Ada' },
    { id: 'bob', name: 'Bob' },
  ]);
  await tools.grantStarterTools({ agentId: 'ada' });
  await tools.grantStarterTools({ agentId: 'bob' });
}, 60_000);

afterAll(async () => {
  await handle?.dispose();
});

const tool = (name: string, description = `does ${name}`, annotations = {}): McpToolRow => ({
  name,
  description,
  inputSchema: { type: 'object', properties: {} },
  annotations,
});

async function addServer(agentId: string, name: string, policy: McpServerPolicy, tools: McpToolRow[]) {
  return handle.db.transaction(async (tx) => {
    const [row] = await tx
      .insert(mcpServers)
      .values({ agentId, name, transport: 'stdio', command: 'srv', source: 'person', policy })
      .returning();
    await replaceTools(tx, row!, tools);
    return row!;
  });
}

async function discoveredOf(serverId: number): Promise<Record<string, Date | null>> {
  const rows = await handle.db
    .select({ name: mcpTools.name, at: mcpTools.discoveredAt })
    .from(mcpTools)
    .where(eq(mcpTools.serverId, serverId))
    .orderBy(asc(mcpTools.name));
  return Object.fromEntries(rows.map((r) => [r.name, r.at]));
}

describe('replaceTools', () => {
  it('discovers the granted tools of a new list, and keeps what was discovered when the server is listed again', async () => {
    const server = await addServer('ada', 'notes', { grant: ['read'] }, [tool('read'), tool('write'), tool('erase')]);
    const first = await discoveredOf(server.id);
    expect(first.read).toBeInstanceOf(Date);
    expect(first.write).toBeNull();
    expect(first.erase).toBeNull();

    // The agent found `write` by search; the server then lists again: `erase` gone, `append` new.
    expect(await setMcpToolDiscovered(handle.db, 'ada', 'notes', 'write', true)).toBe('changed');
    const found = (await discoveredOf(server.id)).write;
    await handle.db.transaction((tx) => replaceTools(tx, server, [tool('read'), tool('write'), tool('append')]));
    const after = await discoveredOf(server.id);
    expect(Object.keys(after)).toEqual(['append', 'read', 'write']);
    expect(after.read).toEqual(first.read);
    expect(after.write).toEqual(found);
    expect(after.append).toBeNull();

    // A list that grants the new name discovers it; an empty list leaves nothing.
    await handle.db.transaction((tx) =>
      replaceTools(tx, { ...server, policy: { grant: ['read', 'append'] } }, [tool('append'), tool('read')]),
    );
    expect((await discoveredOf(server.id)).append).toBeInstanceOf(Date);
    await handle.db.transaction((tx) => replaceTools(tx, server, []));
    expect(await discoveredOf(server.id)).toEqual({});
  });

  it('grants every tool when the policy has no grant, or grants all', async () => {
    const open = await addServer('ada', 'open', {}, [tool('a'), tool('b')]);
    expect(Object.values(await discoveredOf(open.id)).every((d) => d instanceof Date)).toBe(true);
    const all = await addServer('ada', 'everything', { grant: 'all' }, [tool('a'), tool('b')]);
    expect(Object.values(await discoveredOf(all.id)).every((d) => d instanceof Date)).toBe(true);
    const none = await addServer('ada', 'closed', { grant: [] }, [tool('a')]);
    expect(await discoveredOf(none.id)).toEqual({ a: null });
  });

  it("a person's grant and revocation set and clear the discovery, and name what is missing", async () => {
    expect(await setMcpToolDiscovered(handle.db, 'ada', 'closed', 'a', true)).toBe('changed');
    expect(await setMcpToolDiscovered(handle.db, 'ada', 'closed', 'a', true)).toBe('unchanged');
    expect(await setMcpToolDiscovered(handle.db, 'ada', 'closed', 'a', false)).toBe('changed');
    expect(await setMcpToolDiscovered(handle.db, 'ada', 'closed', 'nope', true)).toBe('no_tool');
    expect(await setMcpToolDiscovered(handle.db, 'ada', 'nope', 'a', true)).toBe('no_server');
    // Another agent's server of that name is not this agent's.
    expect(await setMcpToolDiscovered(handle.db, 'bob', 'closed', 'a', true)).toBe('no_server');
  });
});

describe('discover_tools with MCP tools', () => {
  let server: Awaited<ReturnType<typeof addServer>>;

  beforeAll(async () => {
    server = await addServer('bob', 'kb', { grant: ['read_graph'] }, [
      tool('read_graph', 'Read the whole knowledge graph', { readOnlyHint: true }),
      tool('create_entities', 'Create entities in the knowledge graph', { destructiveHint: false }),
      tool('delete_entities', 'Delete entities and their relations'),
      tool('search_nodes', 'Search the graph for nodes matching a query', { readOnlyHint: true }),
      tool('open_nodes', 'Open entities by their names'),
      ...Array.from({ length: 12 }, (_, i) => tool(`entities_helper_${String(i).padStart(2, '0')}`, 'a helper')),
    ]);
    // A disabled server is never searched.
    const off = await addServer('bob', 'off', { grant: [] }, [tool('create_entities', 'Create entities')]);
    await handle.db.update(mcpServers).set({ enabled: false }).where(eq(mcpServers.id, off.id));
  });

  it('ranks the MCP tools by words in their name, then in their description, at most 10', async () => {
    const found = await searchMcpTools(handle.db, 'bob', 'CREATE entities');
    // create_entities has both words in its name; the others one; open_nodes only in its description.
    expect(found.map((t) => `${t.server}.${t.name}`).slice(0, 3)).toEqual([
      'kb.create_entities',
      'kb.delete_entities',
      'kb.entities_helper_00',
    ]);
    expect(found).toHaveLength(10);
    expect(found.map((t) => t.name)).not.toContain('open_nodes');
    expect((await searchMcpTools(handle.db, 'bob', 'names')).map((t) => t.name)).toEqual(['open_nodes']);
    expect(found.every((t) => t.server === 'kb')).toBe(true);
    expect(await searchMcpTools(handle.db, 'bob', '  ,, ')).toEqual([]);
    expect(await searchMcpTools(handle.db, 'ada', 'graph')).toEqual([]);
  });

  it('a search shows the matches as server.tool with flags and discovers them; list then includes them', async () => {
    const before = await discoveredOf(server.id);
    expect(before.create_entities).toBeNull();
    const r = await callTool(
      { db: handle.db },
      { agentId: 'bob', tool: 'discover_tools', action: 'search', args: { query: 'graph' }, key: 'search-1' },
    );
    expect(r.ok).toBe(true);
    const out = (r as Extract<typeof r, { ok: true }>).output;
    expect(out.mcp).toEqual([
      { tool: 'kb.read_graph [read-only]', description: 'Read the whole knowledge graph', newly: false },
      {
        tool: 'kb.create_entities',
        description: 'Create entities in the knowledge graph',
        newly: true,
      },
      {
        tool: 'kb.search_nodes [read-only]',
        description: 'Search the graph for nodes matching a query',
        newly: true,
      },
    ]);
    expect(out.mcpHint).toMatch(/tools\.mcp \{server, tool, args\}/);
    const after = await discoveredOf(server.id);
    expect(after.create_entities).toBeInstanceOf(Date);
    expect(after.search_nodes).toBeInstanceOf(Date);
    expect(after.read_graph).toEqual(before.read_graph);
    expect(after.delete_entities).toBeNull();

    const list = await callTool(
      { db: handle.db },
      { agentId: 'bob', tool: 'discover_tools', action: 'list', key: 'list-1' },
    );
    expect((list as Extract<typeof list, { ok: true }>).output.mcp).toEqual([
      'kb.create_entities',
      'kb.read_graph [read-only]',
      'kb.search_nodes [read-only]',
    ]);
  });

  it('inside a transaction that rolls back, the search discovers nothing', async () => {
    await handle.db
      .transaction(async (tx) => {
        await callTool(
          { db: tx as unknown as typeof handle.db, inTransaction: true },
          { agentId: 'bob', tool: 'discover_tools', action: 'search', args: { query: 'delete' }, key: 'search-2' },
        );
        expect((await discoveredOf(server.id)).delete_entities).toBeNull();
        const [row] = await tx
          .select({ at: mcpTools.discoveredAt })
          .from(mcpTools)
          .where(and(eq(mcpTools.serverId, server.id), eq(mcpTools.name, 'delete_entities')));
        expect(row!.at).toBeInstanceOf(Date);
        throw new Error('roll back');
      })
      .catch((e: Error) => expect(e.message).toBe('roll back'));
    expect((await discoveredOf(server.id)).delete_entities).toBeNull();
  });
});

const baseContext = contextInput();

const findThem =
  'find them with discover_tools search <words> (tool.call {tool: discover_tools, action: search, args: {query}})';

describe('context 2', () => {
  it('lists the discovered MCP tools, then one line per server with tools not discovered', () => {
    const system = assembleContext({
      ...baseContext,
      mcpTools: [{ name: 'kb.read_graph [read-only]', description: 'Read the graph — args {}' }],
      mcpHidden: [
        { server: 'kb', count: 3 },
        { server: 'files', count: 1 },
        { server: 'done', count: 0 },
      ],
    }).messages[0]!.content;
    const lines = system.split('\n');
    const at = lines.findIndex((l) => l.startsWith('Tools of your MCP servers'));
    expect(lines.slice(at + 1, at + 4)).toEqual([
      '- kb.read_graph [read-only]: Read the graph — args {}',
      `- server kb: 3 more tools; ${findThem}`,
      `- server files: 1 more tool; ${findThem}`,
    ]);
    expect(system).not.toContain('server done');
  });

  it('shows the "more tools" line when nothing is discovered, and no MCP section when a server has no tools', () => {
    const hiddenOnly = assembleContext({ ...baseContext, mcpTools: [], mcpHidden: [{ server: 'kb', count: 2 }] });
    expect(hiddenOnly.messages[0]!.content).toMatch(/Tools of your MCP servers[^\n]*\n- server kb: 2 more tools;/);
    const none = assembleContext({ ...baseContext, mcpTools: [], mcpHidden: [{ server: 'kb', count: 0 }] });
    expect(none.messages[0]!.content).not.toContain('Tools of your MCP servers');
  });
});

describe('native binding of MCP tools', () => {
  it('names a tool mcp__<server>__<tool> only when the name reads back as the same server and tool', () => {
    expect(mcpNativeToolName('memory', 'read_graph')).toBe('mcp__memory__read_graph');
    expect(mcpNativeToolName('everything', 'get-sum')).toBe('mcp__everything__get-sum');
    expect(parseMcpNativeToolName('mcp__memory__read__graph')).toEqual({ server: 'memory', tool: 'read__graph' });
    expect(mcpNativeToolName('my__srv', 'x')).toBeNull();
    expect(mcpNativeToolName('srv_', 'x')).toBeNull();
    expect(mcpNativeToolName('srv', 'read.file')).toBeNull();
    expect(mcpNativeToolName('srv', 'x'.repeat(60))).toBeNull();
  });

  it('binds the discovered tools with their flags and sanitised input schemas, leaving out names that do not fit', () => {
    const defs = mcpToolDefinitions([
      {
        server: 'kb',
        name: 'create_entities',
        description: 'Create\nentities',
        inputSchema: {
          $schema: 'http://json-schema.org/draft-07/schema#',
          type: 'object',
          properties: { entities: { type: 'array' } },
          required: ['entities'],
        },
        annotations: {},
        policy: {},
      },
      {
        server: 'kb',
        name: 'read.graph',
        description: 'x',
        inputSchema: { type: 'object' },
        annotations: {},
        policy: {},
      },
      {
        server: 'kb',
        name: 'peek',
        description: null,
        inputSchema: {},
        annotations: { readOnlyHint: true },
        policy: { allowDestructive: true },
      },
    ]);
    expect(defs).toEqual([
      {
        name: 'mcp__kb__create_entities',
        description: 'kb.create_entities [destructive: held for a human]: Create entities',
        parameters: { type: 'object', properties: { entities: { type: 'array' } }, required: ['entities'] },
      },
      { name: 'mcp__kb__peek', description: 'kb.peek [read-only]: ', parameters: { type: 'object', properties: {} } },
    ]);
    expect(mcpToolParameters({ type: 'object', properties: [] })).toEqual({ type: 'object', properties: {} });
  });

  it('turns a native call of mcp__<server>__<tool> into tools.mcp, and rejects a malformed one', () => {
    const { commands, rejected } = toolCallsToCommands([
      { id: 'call_1', name: 'mcp__memory__create_entities', args: { entities: [{ name: 'A' }] } },
      { id: 'call_2', name: 'mcp__memory', args: {} },
      { id: 'call_3', name: 'mcp__memory__read_graph', rawArgs: '{oops', error: 'Unexpected token' },
      { id: 'call_4', name: 'database', args: { action: 'connect' } },
    ]);
    expect(commands).toEqual([
      {
        cmdId: 'call_1',
        type: 'tools.mcp',
        args: { server: 'memory', tool: 'create_entities', args: { entities: [{ name: 'A' }] } },
      },
      { cmdId: 'call_4', type: 'tool.call', args: { tool: 'database', action: 'connect' } },
    ]);
    expect(rejected).toEqual([
      expect.objectContaining({
        cmdId: 'call_2',
        type: 'tools.mcp',
        reason: expect.stringMatching(/not an MCP tool name: expected mcp__<server>__<tool>/),
      }),
      expect.objectContaining({
        cmdId: 'call_3',
        type: 'tools.mcp',
        reason: expect.stringMatching(/malformed arguments \(Unexpected token\)/),
      }),
    ]);
  });

  it('a stored reply with native MCP calls parses again to the same commands and rejections', () => {
    const calls = [
      { id: 'call_a', name: 'mcp__kb__search_nodes', args: { query: 'x' } },
      { id: 'call_b', name: 'mcp____x', args: {} },
    ];
    const stored = appendToolCalls('I look it up.', calls);
    const again = parseReply(stored);
    const direct = toolCallsToCommands(calls);
    expect(again.commands).toEqual(direct.commands);
    expect(again.commands).toEqual([
      { cmdId: 'call_a', type: 'tools.mcp', args: { server: 'kb', tool: 'search_nodes', args: { query: 'x' } } },
    ]);
    expect(again.rejected.map((r) => r.cmdId)).toEqual(['call_b']);
    expect(again.body).toBe('I look it up.');
  });
});
