/**
 * A worker SIGKILLed in the middle of an MCP call does not make the call twice. The agent's
 * `tools.mcp` asks the real server-memory to create an entity; the first worker's server reads
 * its memory file from a FIFO nobody writes, so the call hangs until the worker is killed. The
 * worker that takes the activity over (after its heartbeat timeout) finds the call started and
 * not finished, and, create_entities being neither read-only nor idempotent, records an unknown
 * outcome instead of calling: the second worker's memory holds no entity, and the agent reads
 * that the outcome is unknown.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeMcpServer } from '../../activities/mcp/pool.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { createDb, type DbHandle } from '../../db/client.js';
import { insertMcpServer } from '../../db/queries/mcp.js';
import { agentConfig, agents, commandLog, llmRegistry, mcpCalls } from '../../db/schema/index.js';
import type { agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import { tempDir } from '../helpers/env.js';
import { repoRoot } from '../helpers/spawn.js';
import { startKillableStack, waitFor, type KillableStack } from '../helpers/worker-process.js';

const memoryBin = join(repoRoot, 'node_modules', '@modelcontextprotocol', 'server-memory', 'dist', 'index.js');
const agentId = 'kilroy';

let ks: KillableStack;
let handle: DbHandle;
let tmp: { path: string; remove(): void };
let fifo: string;
let memoryFile: string;

/** The processes whose environment names `path` (the servers the killed worker left): stopped by pid. */
function killServersOf(path: string): void {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`MEMORY_FILE_PATH=${path}`))
        process.kill(Number(pid), 'SIGKILL');
    } catch {
      // Gone already, or not ours to read.
    }
  }
}

beforeAll(async () => {
  ks = await startKillableStack('mcp-worker-kill');
  handle = createDb(ks.dbUrl, { max: 2 });
  tmp = tempDir('mcp-kill-');
  fifo = join(tmp.path, 'hangs.jsonl');
  execFileSync('mkfifo', [fifo]);
  memoryFile = join(tmp.path, 'memory.jsonl');
  const db = handle.db;
  await db.insert(agents).values({ id: agentId, name: agentId });
  const call = renderCommandBlock([
    {
      cmdId: 'k1',
      type: 'tools.mcp',
      args: {
        server: 'memory',
        tool: 'create_entities',
        args: { entities: [{ name: 'Once', entityType: 'thing', observations: [] }] },
      },
    },
  ]);
  await db.insert(llmRegistry).values({
    agentId,
    name: 'script',
    provider: 'scripted',
    model: 'scripted-kill',
    role: 'agent',
    priority: 1,
    params: { replies: [`I write it down.\n${call}`, ...Array.from({ length: 40 }, () => 'I wait and read.')] },
  });
  await db.insert(agentConfig).values({ agentId, key: 'auto_pass_destructive', value: true });
  const spec = {
    name: 'memory',
    transport: 'stdio' as const,
    command: process.execPath,
    args: [memoryBin],
    envNames: ['MEMORY_FILE_PATH'],
  };
  const tools = await probeMcpServer(spec, { env: { PATH: process.env.PATH, MEMORY_FILE_PATH: memoryFile } });
  await insertMcpServer(db, { agentId, source: 'person', ...spec }, tools);
}, 120_000);

afterAll(async () => {
  if (fifo) killServersOf(fifo);
  await handle?.close();
  await ks?.stop();
  tmp?.remove();
});

describe('an MCP call whose worker is SIGKILLed mid-call', () => {
  it('is not repeated: an unknown outcome is recorded, and the server holds no second entity', async () => {
    const db = handle.db;
    let worker = ks.spawnWorker({ MEMORY_FILE_PATH: fifo });
    try {
      const h = await ks.client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
        taskQueue: 'mindloop',
        workflowId: `agent/${agentId}`,
        args: [{ agentId, maxTicks: 3, settings: { delayMs: 0 } }],
      });
      // The call is started (its row written) and hangs on the FIFO: the worker dies now.
      await waitFor('the call started', 90_000, async () => {
        const [call] = await db.select().from(mcpCalls).where(eq(mcpCalls.agentId, agentId));
        return call?.status === 'started' ? call : undefined;
      });
      worker.kill('SIGKILL');
      await new Promise<void>((resolve) =>
        worker.exitCode !== null || worker.signalCode ? resolve() : worker.once('exit', () => resolve()),
      );
      killServersOf(fifo);
      // A new worker's scripted model starts its replies afresh: from now on it only thinks, so
      // that any entity in the second memory could only come from the first call made again.
      await db
        .update(llmRegistry)
        .set({ params: { replies: ['I wait and read.'] } })
        .where(eq(llmRegistry.agentId, agentId));
      worker = ks.spawnWorker({ MEMORY_FILE_PATH: memoryFile });
      expect(await h.result()).toMatchObject({ agentId, ticks: 3, reason: 'max_ticks' });
    } finally {
      if (worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL');
    }

    const calls = await db.select().from(mcpCalls).where(eq(mcpCalls.agentId, agentId));
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ status: 'unknown', tool: 'create_entities' });
    const [row] = await db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.agentId, agentId), eq(commandLog.cmdId, 'k1')));
    expect(row!.result).toMatchObject({
      text: expect.stringMatching(/outcome unknown[\s\S]*whether it took effect is unknown, and it is not repeated/),
    });
    // The server the second worker runs holds nothing: the call was not made again.
    const graph = await probeGraph();
    expect(graph).not.toContain('Once');
  }, 240_000);
});

/** read_graph on the second worker's memory file, through the real server. */
async function probeGraph(): Promise<string> {
  const { connectMcp } = await import('../../activities/mcp/pool.js');
  const live = await connectMcp(
    {
      name: 'memory',
      transport: 'stdio',
      command: process.execPath,
      args: [memoryBin],
      envNames: ['MEMORY_FILE_PATH'],
    },
    { env: { PATH: process.env.PATH, MEMORY_FILE_PATH: memoryFile } },
  );
  try {
    const r = await live.client.callTool({ name: 'read_graph', arguments: {} });
    return JSON.stringify(r);
  } finally {
    await live.client.close();
  }
}
