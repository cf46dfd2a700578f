/**
 * mcp-tools: what calling an MCP tool through the agent's path costs beyond calling it bare, on
 * the embedded Temporal dev server and the real Postgres (a scratch database), against the real
 * `@modelcontextprotocol/server-memory` run with node from its installed dist entry.
 *
 * - direct: a bare MCP SDK client (Client + StdioClientTransport, the server launched exactly as
 *   the worker's pool launches it) calling the read-only `read_graph`; wall clock around each call.
 * - agent: the same call as the `mcpCall` activity (the worker's pool from createMcpPool, the real
 *   database: its mcp_calls row, the ledger's hold and settle), each with a fresh idempotency key.
 * - activity round trip: a no-op activity, measured the same way in the same run.
 *
 * How the agent's call is timed: both it and the no-op run inside bench/workflows.ts's
 * `activityRoundTripsWorkflow`, a long-running workflow that calls its activity back to back and
 * notes the workflow clock after each result; a call's time is the gap between two such marks,
 * i.e. from scheduling the activity to the workflow task that sees its result (what the agent
 * loop waits for). The worker serves that workflow's one activity name with a body chosen by the
 * workflow's id: nothing for the round trip, `mcpCall` for the agent's call. So the two differ only
 * in the activity's body; a client's wall clock around a whole short workflow would add a
 * workflow start and end to one side and is not used. The three kinds run in alternating blocks,
 * so the machine's drift hits each alike.
 *
 * Throughput: 20 agents, each with its own server row and so its own server process in the pool,
 * each running such a workflow at once; completed calls / client wall seconds from the starts to
 * the last result (the servers started and warm beforehand).
 *
 * The call is given no tick: the agent loop's patch of the command's command_log and process_log
 * rows (one more update in the same transaction) is left out, as the bench agents have none.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { createMcpActivities, createMcpPool, type McpCallResult } from '../activities/mcp/index.js';
import { probeMcpServer, stdioLaunch, type McpPool, type McpServerSpec } from '../activities/mcp/pool.js';
import { insertMcpServer } from '../db/queries/mcp.js';
import { agents } from '../db/schema/index.js';
import type { Stack } from '../runtime/stack.js';
import { benchStack, scratchDatabase, summarize } from './lib.js';
import { withBaselineWorker } from './temporal-baseline.js';

const memoryBin = join(
  import.meta.dirname,
  '..',
  'node_modules',
  '@modelcontextprotocol',
  'server-memory',
  'dist',
  'index.js',
);
const tool = 'read_graph';
const serverName = 'memory';
/** The target: the agent's path may add at most a no-op activity's round trip plus this. */
export const overheadSlackMs = 5;

export interface McpToolsSizes {
  /** Calls of each kind (direct, agent, no-op), split over `blocks` alternating blocks. */
  calls: number;
  blocks: number;
  /** Uncounted calls of each kind first (server start, bundle load, connections). */
  warmup: number;
  /** Agents calling at once, and calls each. */
  agents: number;
  callsPerAgent: number;
  /** How long the transaction count waits for Postgres' idle backends to report theirs. */
  statsWaitMs: number;
}

export const mcpToolsSizes: { full: McpToolsSizes; smoke: McpToolsSizes } = {
  full: { calls: 200, blocks: 4, warmup: 10, agents: 20, callsPerAgent: 20, statsWaitMs: 11_000 },
  smoke: { calls: 6, blocks: 2, warmup: 2, agents: 2, callsPerAgent: 3, statsWaitMs: 1_000 },
};

const agentIdOf = (i: number) => `mcp-bench-${i}`;

/** What the bench's activity did, by kind: the mcpCall bodies' own durations and any call that was not ok. */
interface Tally {
  bodyMs: number[];
  failures: string[];
  seq: number;
}

/**
 * The one activity name of bench/workflows.ts, its body chosen by the workflow id: `mcp/<agent>/…`
 * calls the agent's tool through mcpCall with a fresh key; anything else returns at once.
 */
function routedActivity(call: (agentId: string, key: string) => Promise<McpCallResult>, tally: Tally) {
  return {
    async noop(): Promise<void> {
      const workflowId = Context.current().info.workflowExecution?.workflowId ?? '';
      if (!workflowId.startsWith('mcp/')) return;
      const agentId = workflowId.split('/')[1]!;
      const t0 = performance.now();
      // Never throws: a failed call is tallied (and fails the bench), not retried by Temporal.
      const r = await call(agentId, `${workflowId}/${tally.seq++}`).catch(
        (err: unknown) => ({ status: 'error', text: String(err) }) as McpCallResult,
      );
      tally.bodyMs.push(performance.now() - t0);
      if (r.status !== 'ok' || r.recorded) tally.failures.push(`${agentId}: ${r.status} ${r.text.slice(0, 200)}`);
    },
  };
}

/** A bare MCP client of its own server process, launched as the pool launches one. */
async function directClient(spec: McpServerSpec, env: Record<string, string | undefined>): Promise<McpClient> {
  const client = new McpClient({ name: 'mindloop-bench', version: '1' });
  await client.connect(new StdioClientTransport({ ...stdioLaunch(spec, env), stderr: 'ignore' }));
  return client;
}

/** The gaps between a workflow's marks: one per activity call, in ms of the workflow clock. */
async function workflowGaps(client: Client, taskQueue: string, workflowId: string, n: number): Promise<number[]> {
  const marks: number[] = await client.workflow.execute('activityRoundTripsWorkflow', {
    taskQueue,
    workflowId,
    args: [n],
  });
  return marks.slice(1).map((t, i) => t - marks[i]!);
}

async function seedAgents(stack: Stack, spec: McpServerSpec, env: Record<string, string | undefined>, n: number) {
  const db = stack.db.db;
  const ids = Array.from({ length: n }, (_, i) => agentIdOf(i));
  await db.insert(agents).values(ids.map((id) => ({ id, name: id })));
  // As `tools mcp add` does: started once and listed, then stored with its tools (one probe serves all rows).
  const listed = await probeMcpServer(spec, { env });
  if (!listed.some((t) => t.name === tool && t.annotations.readOnlyHint === true))
    throw new Error(`server-memory lists no read-only ${tool}: ${listed.map((t) => t.name).join(', ')}`);
  for (const agentId of ids)
    await insertMcpServer(
      db,
      { agentId, source: 'person', ...spec, args: [...(spec.args ?? [])], envNames: [...(spec.envNames ?? [])] },
      listed,
    );
  return ids;
}

/**
 * The database's committed transactions so far, as Postgres counts them. An idle backend reports
 * its counts at most 10 s after its last report (Postgres 15), so the read waits that long first.
 */
async function committedTransactions(stack: Stack, waitMs: number): Promise<number> {
  await new Promise((r) => setTimeout(r, waitMs));
  const { rows } = await stack.db.pool.query<{ n: string }>(
    'select xact_commit::text as n from pg_stat_database where datname = current_database()',
  );
  return Number(rows[0]?.n ?? Number.NaN);
}

/** One single-row insert committed on its own, as Postgres here makes it durable: the unit mcpCall's commits cost. */
async function commitMs(stack: Stack, n: number): Promise<number[]> {
  const pool = stack.db.pool;
  await pool.query('create table bench_commit (id serial primary key, v text)');
  const ms: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      await pool.query("insert into bench_commit (v) values ('x')");
      ms.push(performance.now() - t0);
    }
  } finally {
    await pool.query('drop table bench_commit');
  }
  return ms;
}

/** Measure on a stack whose database is the real Postgres. */
export async function measureMcpTools(
  stack: Stack,
  sizes: McpToolsSizes,
  memoryFile: string,
): Promise<Record<string, number>> {
  const env = { PATH: process.env.PATH, MEMORY_FILE_PATH: memoryFile };
  const spec: McpServerSpec = {
    name: serverName,
    transport: 'stdio',
    command: process.execPath,
    args: [memoryBin],
    envNames: ['MEMORY_FILE_PATH'],
  };
  const ids = await seedAgents(stack, spec, env, Math.max(1, sizes.agents));
  const direct = await directClient(spec, env);
  // A small graph for read_graph to return (a few hundred bytes of JSON), shared by every server.
  await direct.callTool({
    name: 'create_entities',
    arguments: {
      entities: ['river', 'orbit', 'quartz', 'meadow', 'cipher'].map((name, i) => ({
        name,
        entityType: 'bench',
        observations: [`observation ${i} of ${name}`, `another about ${name}`],
      })),
    },
  });
  const pool: McpPool = createMcpPool(stack.db.db, { env });
  const mcp = createMcpActivities({ db: stack.db.db, pool });
  const tally: Tally = { bodyMs: [], failures: [], seq: 0 };
  // As the agent loop calls it: the command passed the server's prices (none of its own here).
  const call = (agentId: string, key: string) =>
    mcp.mcpCall({ agentId, key, server: serverName, tool, args: {}, price: {} });
  try {
    return await withBaselineWorker(
      stack,
      async (client, taskQueue) => {
        const solo = ids[0]!;
        const directOnce = async () => {
          const t0 = performance.now();
          const r = await direct.callTool({ name: tool, arguments: {} });
          const ms = performance.now() - t0;
          if (r.isError) throw new Error(`direct ${tool} failed: ${JSON.stringify(r.content)}`);
          return ms;
        };
        // Warm-up, uncounted: each kind's first calls pay for the pool's server start, bundle load, connections.
        for (let i = 0; i < sizes.warmup; i++) await directOnce();
        await workflowGaps(client, taskQueue, `noop/warm-${Date.now()}`, sizes.warmup);
        await workflowGaps(client, taskQueue, `mcp/${solo}/warm-${Date.now()}`, sizes.warmup);
        tally.bodyMs.length = 0;

        const per = Math.max(1, Math.round(sizes.calls / sizes.blocks));
        const xactsBefore = await committedTransactions(stack, sizes.statsWaitMs);
        const directMs: number[] = [];
        const agentMs: number[] = [];
        const noopMs: number[] = [];
        for (let b = 0; b < sizes.blocks; b++) {
          for (let i = 0; i < per; i++) directMs.push(await directOnce());
          noopMs.push(...(await workflowGaps(client, taskQueue, `noop/${b}-${Date.now()}`, per)));
          agentMs.push(...(await workflowGaps(client, taskQueue, `mcp/${solo}/${b}-${Date.now()}`, per)));
        }
        const bodyMs = [...tally.bodyMs];
        // The solo agent's calls were the database's only work in the blocks (one more: the count's own read).
        const xactsPerCall =
          ((await committedTransactions(stack, sizes.statsWaitMs)) - xactsBefore - 1) / bodyMs.length;
        const commit = summarize(await commitMs(stack, Math.max(10, per)));

        // Every agent's server started and warm before the clock runs.
        await Promise.all(ids.map((id) => workflowGaps(client, taskQueue, `mcp/${id}/warm-many-${Date.now()}`, 2)));
        const before = tally.bodyMs.length;
        const t0 = performance.now();
        await Promise.all(
          ids.map((id) => workflowGaps(client, taskQueue, `mcp/${id}/many-${Date.now()}`, sizes.callsPerAgent)),
        );
        const seconds = (performance.now() - t0) / 1000;
        const manyCalls = tally.bodyMs.length - before;

        if (tally.failures.length)
          throw new Error(`${tally.failures.length} mcpCall(s) were not ok: ${tally.failures.slice(0, 3).join('; ')}`);
        const d = summarize(directMs);
        const a = summarize(agentMs);
        const n = summarize(noopMs);
        const body = summarize(bodyMs);
        return {
          agent_call_p50_ms: a.p50,
          agent_call_p99_ms: a.p99,
          direct_call_p50_ms: d.p50,
          direct_call_p99_ms: d.p99,
          overhead_p50_ms: a.p50 - d.p50,
          activity_rt_p50_ms: n.p50,
          activity_rt_p99_ms: n.p99,
          overhead_p50_ratio_to_activity_rt: (a.p50 - d.p50) / n.p50,
          overhead_beyond_activity_rt_p50_ms: a.p50 - d.p50 - n.p50,
          mcp_call_body_p50_ms: body.p50,
          bookkeeping_p50_ms: body.p50 - d.p50,
          db_transactions_per_call: xactsPerCall,
          pg_commit_p50_ms: commit.p50,
          calls_per_s_20_agents: manyCalls / seconds,
          calls_20_agents: manyCalls,
          calls_each: a.n,
        };
      },
      { activities: routedActivity(call, tally) },
    );
  } finally {
    await pool.close();
    await direct.close().catch(() => undefined);
  }
}

/** The whole benchmark: its own stack on a scratch database of the real Postgres, dropped afterwards. */
export async function runMcpTools(
  sizes: McpToolsSizes,
): Promise<{ metrics: Record<string, number>; notes: Record<string, string> }> {
  const scratch = await scratchDatabase('mindloop_bench_mcp');
  const dir = mkdtempSync(join(tmpdir(), 'mindloop-bench-mcp-'));
  try {
    const { stack, stop } = await benchStack({ databaseUrl: scratch.url });
    let metrics: Record<string, number>;
    try {
      metrics = await measureMcpTools(stack, sizes, join(dir, 'memory.jsonl'));
    } finally {
      await stop();
    }
    const met = metrics.overhead_p50_ms! <= metrics.activity_rt_p50_ms! + overheadSlackMs;
    const per = Math.max(1, Math.round(sizes.calls / sizes.blocks));
    return {
      metrics,
      notes: {
        tool: `${tool} of @modelcontextprotocol/server-memory (node ${memoryBin.slice(memoryBin.indexOf('node_modules'))}), a graph of 5 entities`,
        direct: `a bare MCP SDK client (Client + StdioClientTransport) of its own server process, launched as the pool launches one; wall clock around callTool; ${sizes.blocks} blocks of ${per} calls`,
        agent: `the mcpCall activity (the worker's pool, the real Postgres: mcp_calls row, ledger hold and settle), a fresh key each; workflow clock from scheduling the activity to the workflow task that sees its result, inside one long-running workflow per block (bench/workflows.ts activityRoundTripsWorkflow); ${sizes.blocks} blocks of ${per} calls alternating with direct and no-op blocks`,
        activity_rt: 'the same workflow and worker, the activity body empty, in the same blocks',
        breakdown:
          'mcp_call_body_p50_ms: the mcpCall function itself inside the activity (wall clock); bookkeeping_p50_ms = that − direct_call_p50_ms (its database work); overhead_beyond_activity_rt_p50_ms = overhead − activity_rt; db_transactions_per_call: committed transactions of the scratch database per timed agent call (pg_stat_database, read-only ones included); pg_commit_p50_ms: one single-row insert committed alone on the same database, same run (what one durable commit costs here)',
        many: `${sizes.agents} agents, each its own mcp_servers row and server process in the pool, ${sizes.callsPerAgent} calls each at once; completed calls / client wall seconds from the starts to the last result, servers warm`,
        stack:
          'Temporal CLI dev server (SQLite) + the real Postgres (a scratch database, dropped afterwards); one worker in this process',
        targets: `overhead_p50_ms <= activity_rt_p50_ms + ${overheadSlackMs} (${metrics.overhead_p50_ms!.toFixed(1)} <= ${(metrics.activity_rt_p50_ms! + overheadSlackMs).toFixed(1)}): ${met ? 'met' : 'missed'}`,
      },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await scratch.drop();
  }
}
