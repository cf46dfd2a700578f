/**
 * A real MCP server (@modelcontextprotocol/server-memory from npm) that misbehaves mid-call: its
 * memory file is a FIFO nobody writes, so every call it makes hangs. A call that times out, and
 * one whose server is killed while it waits, has an unknown outcome when the tool may not run
 * twice (the agent reads that it is not repeated) and is a plain error when the tool is
 * read-only; either way the loop's activity completes, its row is finished, and a retry returns
 * what was recorded without calling again.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpActivities, createMcpPool, mcpChargeKey } from '../../activities/mcp/index.js';
import { configureBudget } from '../../db/queries/lifeforce.js';
import { probeMcpServer, type McpPool } from '../../activities/mcp/pool.js';
import { insertMcpServer } from '../../db/queries/mcp.js';
import { agents, lifeforceLedger, mcpCalls } from '../../db/schema/index.js';
import { migratedDatabase, tempDir, type MigratedDatabase } from '../helpers/env.js';
import { repoRoot } from '../helpers/spawn.js';

const memoryBin = join(repoRoot, 'node_modules', '@modelcontextprotocol', 'server-memory', 'dist', 'index.js');
const spec = {
  name: 'memory',
  transport: 'stdio' as const,
  command: process.execPath,
  args: [memoryBin],
  envNames: ['MEMORY_FILE_PATH'],
};

let database: MigratedDatabase;
let tmp: { path: string; remove(): void };
let pool: McpPool;

beforeAll(async () => {
  database = await migratedDatabase('mcp_misbehaving');
  tmp = tempDir('mcp-misbehaving-');
  const fifo = join(tmp.path, 'hangs.jsonl');
  execFileSync('mkfifo', [fifo]);
  await database.db.insert(agents).values({ id: 'ada', name: 'Ada' });
  // Listed with a real file; then run by a pool whose servers read the FIFO.
  const tools = await probeMcpServer(spec, {
    env: { PATH: process.env.PATH, MEMORY_FILE_PATH: join(tmp.path, 'memory.jsonl') },
  });
  await insertMcpServer(database.db, { agentId: 'ada', source: 'person', ...spec }, tools);
  pool = createMcpPool(database.db, {
    env: { PATH: process.env.PATH, MEMORY_FILE_PATH: fifo },
    backoff: { baseMs: 200, maxMs: 400 },
  });
}, 60_000);

afterAll(async () => {
  await pool?.close();
  await database?.dispose();
  tmp?.remove();
});

const create = (key: string) => ({
  agentId: 'ada',
  key,
  server: 'memory',
  tool: 'create_entities',
  args: { entities: [{ name: 'Once', entityType: 'thing', observations: [] }] },
});

describe('a server that hangs', () => {
  it('a call that times out is unknown when it may not run twice, an error when read-only; a retry does not call again', async () => {
    const acts = createMcpActivities({ db: database.db, pool, callTimeoutMs: 1500 });
    const t0 = Date.now();
    const hung = await acts.mcpCall(create('hang:1'));
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(hung).toMatchObject({ status: 'unknown', recorded: false });
    expect(hung.text).toMatch(/^mcp memory\.create_entities: outcome unknown in \d+ ms\n/);
    expect(hung.text).toMatch(/did not answer .*whether it took effect is unknown, and it is not repeated/);
    const again = await acts.mcpCall(create('hang:1'));
    expect(again).toMatchObject({ status: 'unknown', recorded: true, text: hung.text });

    const read = await acts.mcpCall({ agentId: 'ada', key: 'hang:2', server: 'memory', tool: 'read_graph', args: {} });
    expect(read.status).toBe('error');
    expect(read.text).toMatch(/the call failed/);
    const rows = await database.db.select().from(mcpCalls).where(eq(mcpCalls.agentId, 'ada'));
    expect(rows.filter((r) => r.key.startsWith('hang:')).map((r) => [r.key, r.status])).toEqual([
      ['hang:1', 'unknown'],
      ['hang:2', 'error'],
    ]);
  }, 60_000);
});

describe('a server killed mid-call', () => {
  it('ends the call as unknown at once (not at its timeout), and the next call starts the server again', async () => {
    const acts = createMcpActivities({ db: database.db, pool, callTimeoutMs: 30_000 });
    const t0 = Date.now();
    const call = acts.mcpCall(create('kill:1'));
    // The call is sent (its row is started) and hangs on the FIFO: kill the server now.
    await expect
      .poll(async () => (await database.db.select().from(mcpCalls).where(eq(mcpCalls.key, 'kill:1')))[0]?.status, {
        timeout: 10_000,
      })
      .toBe('started');
    await new Promise((r) => setTimeout(r, 300));
    const client = await pool.client('ada', spec);
    const pid = (client.transport as { pid?: number | null } | undefined)?.pid;
    expect(pid).toBeGreaterThan(0);
    process.kill(pid!, 'SIGKILL');
    const r = await call;
    expect(Date.now() - t0).toBeLessThan(20_000);
    expect(r.status).toBe('unknown');
    expect(r.text).toMatch(/whether it took effect is unknown, and it is not repeated/);
    await expect
      .poll(() => pool.health().find((h) => h.agentId === 'ada' && h.server === 'memory')?.state)
      .toBe('down');
    // After the backoff the server is started again (a new process) for the next call.
    await new Promise((r) => setTimeout(r, 500));
    const next = await pool.client('ada', spec);
    const pid2 = (next.transport as { pid?: number | null } | undefined)?.pid;
    expect(pid2).toBeGreaterThan(0);
    expect(pid2).not.toBe(pid);
    expect(pool.health().find((h) => h.server === 'memory')).toMatchObject({ state: 'up', restarts: 1 });
  }, 60_000);
});

describe("a call that names its server's prices", () => {
  it('holds them beside the lookup; a tool that is not there releases the hold, charging nothing', async () => {
    const acts = createMcpActivities({ db: database.db, pool, callTimeoutMs: 1500 });
    const key = 'priced:1';
    const r = await acts.mcpCall({
      agentId: 'ada',
      key,
      server: 'memory',
      tool: 'no_such_tool',
      args: {},
      price: { perCall: 2 },
    });
    expect(r).toMatchObject({ status: 'error', text: expect.stringMatching(/server memory has no tool no_such_tool/) });
    const entries = await database.db
      .select()
      .from(lifeforceLedger)
      .where(eq(lifeforceLedger.reservationKey, mcpChargeKey(key)));
    const hold = await database.db
      .select()
      .from(lifeforceLedger)
      .where(eq(lifeforceLedger.idempotencyKey, mcpChargeKey(key)));
    expect(hold.map((h) => [h.kind, h.amount])).toEqual([['reserve', 2]]);
    expect(entries.map((e) => [e.kind, e.amount])).toEqual([['release', 0]]);
  });
});

describe('a budget that cannot cover the call', () => {
  it('refuses it before the server is asked: an error the agent reads, recorded once, nothing held', async () => {
    await configureBudget(database.db, 'ada', { capacity: 0.5 });
    const acts = createMcpActivities({ db: database.db, pool, callTimeoutMs: 1500 });
    const call = { agentId: 'ada', key: 'poor:1', server: 'memory', tool: 'read_graph', args: {} };
    const r = await acts.mcpCall(call);
    expect(r.status).toBe('error');
    expect(r.text).toMatch(
      /^mcp memory\.read_graph: error in 0 ms\nlifeforce exhausted: the call's 1 LF exceeds .*; not called/,
    );
    expect(await acts.mcpCall(call)).toMatchObject({ recorded: true, text: r.text });
    const holds = await database.db
      .select()
      .from(lifeforceLedger)
      .where(and(eq(lifeforceLedger.idempotencyKey, mcpChargeKey('poor:1')), eq(lifeforceLedger.kind, 'reserve')));
    expect(holds).toEqual([]);
  });
});
