/**
 * Progressive discovery of MCP tools in a running agent loop, with the real server-memory from npm
 * and a model behind an OpenAI-compatible endpoint (the local fake, scripted per tick): the server
 * grants only read_graph, so the first context lists it and says how many more tools the server
 * has; a discover_tools search (a native tool call) finds create_entities, the next context lists
 * it and binds it natively as mcp__memory__create_entities, the model calls it that way and the
 * call happens. A person's `tools mcp grant|revoke` sets and clears a tool's discovery.
 */
import { join } from 'node:path';
import { and, asc, eq, isNotNull } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { createMcpPool } from '../../activities/mcp/index.js';
import { probeMcpServer } from '../../activities/mcp/pool.js';
import { replaceTools } from '../../db/queries/mcp.js';
import { startStack } from '../../runtime/stack.js';
import { agents, commandLog, llmRegistry, mcpCalls, mcpServers, mcpTools } from '../../db/schema/index.js';
import { freePort, migratedDatabase, repoToolsDir, tempDir, testEnv, type MigratedDatabase } from '../helpers/env.js';
import { chatCompletion, startFakeOpenAiServer, type FakeOpenAiServer } from '../helpers/fake-openai-server.js';
import { runTicks } from '../helpers/harness.js';
import { thinkScript } from '../helpers/scripted.js';
import { repoRoot, run } from '../helpers/spawn.js';

const cli = join(repoRoot, 'bin', 'mindloop.mjs');
const memoryBin = join(repoRoot, 'node_modules', '@modelcontextprotocol', 'server-memory', 'dist', 'index.js');

let database: MigratedDatabase;
let tmp: { path: string; remove(): void };
let memoryFile: string;
let llm: FakeOpenAiServer;

/** What the model is told to answer at each think, counted from 0. */
function answer(body: Record<string, unknown>, thinkIndex: number) {
  const tools = ((body.tools ?? []) as Array<{ function: { name: string } }>).map((t) => t.function.name);
  if (thinkIndex === 0)
    return chatCompletion('I need to write to my graph; I look for a tool.', [
      {
        id: 'call_search',
        name: 'discover_tools',
        arguments: JSON.stringify({ action: 'search', args: { query: 'create entities' } }),
      },
    ]);
  if (thinkIndex === 1 && tools.includes('mcp__memory__create_entities'))
    return chatCompletion('I found it; I note who I am.', [
      {
        id: 'call_create',
        name: 'mcp__memory__create_entities',
        arguments: JSON.stringify({ entities: [{ name: 'Cy', entityType: 'agent', observations: ['finds tools'] }] }),
      },
    ]);
  return chatCompletion('I read what my tools answered.');
}

beforeAll(async () => {
  database = await migratedDatabase('mcp_discovery_it');
  tmp = tempDir('mcp-discovery-');
  memoryFile = join(tmp.path, 'memory.jsonl');
  let thinks = 0;
  llm = await startFakeOpenAiServer({ answer: (body) => answer(body, thinks++) });
  const db = database.db;
  await db.insert(agents).values({ id: 'cy', name: 'Cy' });
  await db.insert(llmRegistry).values([
    {
      agentId: 'cy',
      name: 'fake-openai',
      provider: 'openai',
      model: 'gpt-fake',
      role: 'agent',
      priority: 1,
      baseUrl: llm.baseUrl,
      params: { timeoutMs: 5000 },
    },
    { agentId: 'cy', name: 'mini-emotion', provider: 'scripted', model: 'mini', role: 'emotion', priority: 1 },
    { agentId: 'cy', name: 'mini-novelty', provider: 'scripted', model: 'mini', role: 'novelty', priority: 1 },
    { agentId: 'cy', name: 'mini-validator', provider: 'scripted', model: 'mini', role: 'validator', priority: 1 },
  ]);
  // What an agent file's entry with `grant: [read_graph]` stores: the server, its listed tools.
  const entry = {
    name: 'memory',
    transport: 'stdio' as const,
    command: process.execPath,
    args: [memoryBin],
    envNames: ['MEMORY_FILE_PATH'],
  };
  const listed = await probeMcpServer(entry, { env: { PATH: process.env.PATH, MEMORY_FILE_PATH: memoryFile } });
  await db.transaction(async (tx) => {
    const [server] = await tx
      .insert(mcpServers)
      .values({ agentId: 'cy', source: 'file', policy: { grant: ['read_graph'] }, ...entry })
      .returning();
    await replaceTools(tx, server!, listed);
  });
}, 60_000);

afterAll(async () => {
  await llm?.close();
  await database?.dispose();
  tmp?.remove();
});

const discovered = async () =>
  (
    await database.db
      .select({ name: mcpTools.name })
      .from(mcpTools)
      .where(and(eq(mcpTools.agentId, 'cy'), isNotNull(mcpTools.discoveredAt)))
      .orderBy(asc(mcpTools.name))
  ).map((t) => t.name);

const messagesOf = (i: number) => JSON.stringify(llm.chatRequests()[i]!.body.messages);
const toolsOf = (i: number) =>
  (llm.chatRequests()[i]!.body.tools as Array<{ function: { name: string; parameters: Record<string, unknown> } }>).map(
    (t) => t.function,
  );

describe('MCP tools found by search, then called natively', () => {
  it('lists the granted tool and the rest as a count; a search discovers one; the model calls it natively', async () => {
    expect(await discovered()).toEqual(['read_graph']);
    const stack = await startStack({
      env: testEnv({
        MINDLOOP_DATA_DIR: join(tmp.path, 'data'),
        TEMPORAL_PORT: await freePort(),
        DATABASE_URL: database.url,
      }),
      ui: false,
    });
    const db = database.db;
    const mcp = createMcpPool(db, { env: { PATH: process.env.PATH, MEMORY_FILE_PATH: memoryFile } });
    try {
      const activities = createActivities({
        db,
        llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: thinkScript(() => 'unused') },
        mcp,
      });
      expect(await runTicks(stack.temporal.connection, activities, { agentId: 'cy', ticks: 3 })).toEqual({
        agentId: 'cy',
        ticks: 3,
        reason: 'max_ticks',
      });
    } finally {
      await mcp.close();
      await stack.stop();
    }

    // Tick 1: only the granted tool, and a line saying how many more there are.
    expect(llm.chatRequests()).toHaveLength(3);
    expect(messagesOf(0)).toContain('- memory.read_graph [read-only]: ');
    expect(messagesOf(0)).toContain('- server memory: 8 more tools; find them with discover_tools search');
    expect(messagesOf(0)).not.toContain('memory.create_entities');
    expect(toolsOf(0).map((t) => t.name)).toContain('mcp__memory__read_graph');
    expect(toolsOf(0).map((t) => t.name)).not.toContain('mcp__memory__create_entities');

    // The search found create_entities (and the other tools its words match) and discovered them.
    const [search] = await db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.agentId, 'cy'), eq(commandLog.cmdId, 'call_search')));
    expect(search).toMatchObject({ type: 'tool.call', status: 'applied', tick: 1 });
    expect(JSON.stringify(search!.result)).toContain('memory.create_entities');
    expect(await discovered()).toContain('create_entities');

    // Tick 2: the context lists it, the tools bind it with its input schema; fewer tools are hidden.
    expect(messagesOf(1)).toMatch(/- memory\.create_entities: [^"]*args \{entities: array\}/);
    expect(messagesOf(1)).not.toContain('- server memory: 8 more tools');
    const bound = toolsOf(1).find((t) => t.name === 'mcp__memory__create_entities');
    expect(bound?.parameters).toMatchObject({ type: 'object', properties: { entities: { type: 'array' } } });
    expect(bound?.parameters).not.toHaveProperty('$schema');

    // The native call became tools.mcp and the server was called once.
    const [call] = await db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.agentId, 'cy'), eq(commandLog.cmdId, 'call_create')));
    expect(call).toMatchObject({ type: 'tools.mcp', status: 'applied', tick: 2 });
    const calls = await db.select().from(mcpCalls).where(eq(mcpCalls.agentId, 'cy'));
    expect(calls.map((c) => [c.server, c.tool, c.status])).toEqual([['memory', 'create_entities', 'ok']]);
    expect(calls[0]!.args).toEqual({ entities: [{ name: 'Cy', entityType: 'agent', observations: ['finds tools'] }] });
    // Tick 3 read its result.
    expect(messagesOf(2)).toContain('mcp memory.create_entities: ok');
  }, 240_000);

  it('a person grants and revokes one tool with tools mcp grant|revoke', async () => {
    const env = { DATABASE_URL: database.url, MINDLOOP_NOTEBOOK_PORT: 'off', NATS_URL: 'off' };
    const undiscovered = (await database.db.select().from(mcpTools).where(eq(mcpTools.agentId, 'cy'))).find(
      (t) => t.discoveredAt === null,
    )!;
    const grant = await run(process.execPath, [cli, 'tools', 'mcp', 'grant', 'cy', `memory.${undiscovered.name}`], env);
    expect(grant.stderr).toBe('');
    expect(grant.stdout).toContain(`granted memory.${undiscovered.name} to cy`);
    expect(await discovered()).toContain(undiscovered.name);
    const revoke = await run(
      process.execPath,
      [cli, 'tools', 'mcp', 'revoke', 'cy', `memory.${undiscovered.name}`],
      env,
    );
    expect(revoke.stdout).toContain(`revoked memory.${undiscovered.name} from cy's context`);
    expect(await discovered()).not.toContain(undiscovered.name);
    const missing = await run(process.execPath, [cli, 'tools', 'mcp', 'grant', 'cy', 'memory.no_such_tool'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('MCP server memory of cy lists no tool no_such_tool');
    expect((await run(process.execPath, [cli, 'tools', 'mcp', 'grant', 'cy', 'nodot'], env)).code).toBe(2);
  }, 60_000);
});
