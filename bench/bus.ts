/**
 * `npm run bench -- bus`, on the real NATS (NATS_URL, default 127.0.0.1:4222) under a root of
 * its own:
 * - echo request/reply through the MCP bridge (`mindloop mcp`, its `request` tool asking the echo
 *   agent on the bus) over stdio and over streamable HTTP, beside raw NATS request/reply of the
 *   same message to the same echo agent, in alternating blocks of one run (ratio; target ≤ 2× raw);
 * - publish throughput through the stdio bridge (`publish` tool calls, 8 in flight);
 * - command-to-workflow latency: a note published on `command.agent.<id>.note` until the agent's
 *   workflow accepted it (the durable consumer's update passed the workflow's validator and is
 *   in its history), with the product's agent loop on the embedded stack.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createActivities } from '../activities/index.js';
import { agents, llmRegistry } from '../db/schema/index.js';
import { connectBus, defaultNatsUrl, type Bus } from '../runtime/bus.js';
import {
  deleteCommandStream,
  sendCommand,
  startCommandConsumer,
  temporalCommandTarget,
} from '../runtime/bus-commands.js';
import type { agentLoopWorkflow } from '../workflows/agent-loop/index.js';
import { benchStack, summarize, withBenchWorker } from './lib.js';

/** The benchmark's sizes; `smoke` a few round trips of each path, publishes and notes. */
export const busSizes = {
  full: { blocks: 4, perBlock: 250, warmup: 50, publishes: 2000, notes: 100, noteWarmup: 10 },
  smoke: { blocks: 1, perBlock: 5, warmup: 2, publishes: 20, notes: 3, noteWarmup: 1 },
};
type BusSizes = typeof busSizes.full;
const inFlight = 8;
const repoRoot = join(import.meta.dirname, '..');
/** The CLI as users run it (`npx mindloop`, an MCP client's config): the compiled build, not the TypeScript sources. */
const cli = join(repoRoot, 'bin', 'mindloop.mjs');

/** A tool call's result, parsed (the bridge answers JSON text); throws a tool error. */
async function call(mcp: McpClient, name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const r = (await mcp.callTool({ name, arguments: args })) as {
    isError?: boolean;
    content: Array<{ type: string; text?: string }>;
  };
  const text = r.content.find((c) => c.type === 'text')?.text ?? '';
  if (r.isError) throw new Error(`${name}: ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** The bench's own bus root and deployment (its processes' subjects live under `<root>.<deployment>`): named, so no process must ask a Temporal for it. */
const busRoot = `mindloop_bench_${process.pid}`;
const deployment = `bench-${process.pid}`;

/** A `mindloop …` CLI process (the compiled build) on the bench's bus root and deployment; stderr is kept for its ready line and errors. */
function mindloop(args: string[], url: string): ChildProcess & { stderrText: () => string } {
  const child = spawn(process.execPath, [cli, ...args], {
    cwd: repoRoot,
    env: {
      ...process.env,
      NATS_URL: url,
      MINDLOOP_BUS_ROOT: busRoot,
      MINDLOOP_DEPLOYMENT: deployment,
      LOG_LEVEL: 'WARN',
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  return Object.assign(child, { stderrText: () => err });
}

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await probe();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`bench: timed out waiting for ${what}`);
}

/** Round trips of `once`, after a warm-up. */
async function block(once: () => Promise<unknown>, n: number, into: number[]): Promise<void> {
  for (let i = 0; i < n; i++) into.push(await timed(once));
}

/**
 * Echo round trips, in alternating blocks: raw NATS from this process, and an MCP client here
 * calling the `request` tool of `mindloop mcp` over stdio and over streamable HTTP. The echo agent
 * and both bridges are processes of their own (`mindloop bus echo-agent`, `mindloop mcp`), as a
 * user runs them, so every path crosses the same process boundary to the echo agent. Then the
 * publish throughput through the stdio bridge.
 */
async function measureEcho(
  bus: Bus,
  url: string,
  { blocks, perBlock, warmup, publishes }: BusSizes,
): Promise<{ raw: number[]; stdio: number[]; http: number[]; publishPerS: number }> {
  const echo = mindloop(['bus', 'echo-agent'], url);
  const httpBridge = mindloop(['mcp', '--http', '0'], url);
  const stdioClient = new McpClient({ name: 'mindloop-bench', version: '1' });
  const httpClient = new McpClient({ name: 'mindloop-bench', version: '1' });
  try {
    const subject = bus.subjects.devRequest('echo');
    const rawOnce = () => bus.request(subject, 'EchoRequest', { ping: 'bench' }, { expect: 'EchoResponse' });
    await until('the echo agent', () =>
      rawOnce().then(
        () => true,
        () => undefined,
      ),
    ).catch((err: Error) => {
      throw new Error(`${err.message} (its stderr: ${echo.stderrText().trim() || 'nothing'})`);
    });
    const httpUrl = await until(
      'the HTTP bridge',
      () => /streamable HTTP at ([^\s;]+)/.exec(httpBridge.stderrText())?.[1],
    );
    await httpClient.connect(new StreamableHTTPClientTransport(new URL(httpUrl)));
    await stdioClient.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [cli, 'mcp'],
        cwd: repoRoot,
        env: {
          ...(process.env as Record<string, string>),
          NATS_URL: url,
          MINDLOOP_BUS_ROOT: busRoot,
          MINDLOOP_DEPLOYMENT: deployment,
          LOG_LEVEL: 'WARN',
        },
        stderr: 'ignore',
      }),
    );
    const echoArgs = {
      subject: 'dev.request.echo',
      message_type: 'EchoRequest',
      payload: { ping: 'bench' },
      expect: 'EchoResponse',
    };
    const stdioOnce = () => call(stdioClient, 'request', echoArgs);
    const httpOnce = () => call(httpClient, 'request', echoArgs);
    const raw: number[] = [];
    const stdio: number[] = [];
    const http: number[] = [];
    for (const once of [rawOnce, stdioOnce, httpOnce]) await block(once, warmup, []);
    for (let b = 0; b < blocks; b++) {
      await block(rawOnce, perBlock, raw);
      await block(stdioOnce, perBlock, stdio);
      await block(httpOnce, perBlock, http);
    }
    let sent = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (sent < publishes) {
          sent++;
          await call(stdioClient, 'publish', {
            subject: 'dev.bench.load',
            message_type: 'EchoRequest',
            payload: { ping: 'load' },
          });
        }
      }),
    );
    const publishPerS = publishes / ((performance.now() - t0) / 1000);
    return { raw, stdio, http, publishPerS };
  } finally {
    await Promise.allSettled([stdioClient.close(), httpClient.close()]);
    for (const child of [echo, httpBridge]) child.kill('SIGTERM');
  }
}

/** Publish a note, wait until the agent's workflow accepted it; the product's loop, idle until a note wakes it. */
async function measureCommands(bus: Bus, { notes, noteWarmup }: BusSizes): Promise<number[]> {
  const { env, stack, stop } = await benchStack();
  try {
    const db = stack.db.db;
    const agentId = 'bench-bus';
    await db.insert(agents).values({ id: agentId, name: agentId }).onConflictDoNothing();
    await db.insert(llmRegistry).values({
      agentId,
      name: 'instant',
      provider: 'scripted',
      model: 'instant',
      role: 'agent',
      priority: 1,
      params: { replies: ['Noted.'] },
    });
    const activities = createActivities({ db, llm: { env: {}, toolsDir: env.MINDLOOP_TOOLS_DIR } });
    return await withBenchWorker(stack, { taskQueue: 'bench-bus', activities }, async (client) => {
      const h = await client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
        taskQueue: 'bench-bus',
        workflowId: `agent/${agentId}`,
        args: [{ agentId, reflexes: false, settings: { idle: { on: true, wakeOn: ['note'], timeoutMs: 3_600_000 } } }],
      });
      const consumer = await startCommandConsumer(bus, temporalCommandTarget(client), {
        log: (l) => process.stderr.write(`  ${l}\n`),
      });
      const samples: number[] = [];
      try {
        for (let i = -noteWarmup; i < notes; i++) {
          const before = consumer.stats.accepted;
          const t0 = performance.now();
          await sendCommand(bus, agentId, 'note', { text: `bench note ${i}` }, { messageId: `bench-${randomUUID()}` });
          while (consumer.stats.accepted === before) {
            if (performance.now() - t0 > 30_000)
              throw new Error(
                `note ${i} was not accepted within 30 s (retried ${consumer.stats.retried}, rejected ${consumer.stats.rejected})`,
              );
            await new Promise((r) => setTimeout(r, 1));
          }
          if (i >= 0) samples.push(performance.now() - t0);
        }
      } finally {
        await consumer.stop();
        await h.terminate('benchmark done');
      }
      return samples;
    });
  } finally {
    await stop();
  }
}

export async function measureBus(
  z: BusSizes = busSizes.full,
): Promise<{ metrics: Record<string, number>; notes: Record<string, string> }> {
  const url = process.env.NATS_URL && process.env.NATS_URL !== 'off' ? process.env.NATS_URL : defaultNatsUrl;
  const bus = await connectBus({
    url,
    root: busRoot,
    deployment,
    name: 'mindloop-bench',
    log: (l) => process.stderr.write(`  ${l}\n`),
  });
  try {
    const echo = await measureEcho(bus, url, z);
    const commands = await measureCommands(bus, z);
    const raw = summarize(echo.raw);
    const bridged = summarize(echo.stdio);
    const http = summarize(echo.http);
    const cmd = summarize(commands);
    return {
      metrics: {
        echo_rt_p50_ms: bridged.p50,
        echo_rt_p99_ms: bridged.p99,
        raw_nats_rt_p50_ms: raw.p50,
        raw_nats_rt_p99_ms: raw.p99,
        echo_ratio_vs_raw: bridged.p50 / raw.p50,
        echo_http_rt_p50_ms: http.p50,
        echo_http_rt_p99_ms: http.p99,
        echo_http_ratio_vs_raw: http.p50 / raw.p50,
        publish_per_s: echo.publishPerS,
        command_to_workflow_p50_ms: cmd.p50,
        command_to_workflow_p99_ms: cmd.p99,
      },
      notes: {
        nats: `${url}, root ${bus.root}, deployment ${deployment}`,
        echo: `EchoRequest → the echo agent (its own process, \`mindloop bus echo-agent\`) → EchoResponse; ${z.blocks} alternating blocks of ${z.perBlock} round trips per path after ${z.warmup} warm-up, one at a time. echo_rt = the SDK's MCP client calling the request tool of \`mindloop mcp\` over stdio; echo_http_rt = the same over streamable HTTP (\`mindloop mcp --http\`); raw_nats_rt = the same message by NATS request/reply from the bench process`,
        target: 'echo_ratio_vs_raw <= 2',
        publish: `${z.publishes} publish tool calls through the stdio bridge, ${inFlight} in flight, each checked by the schema registry`,
        command: `${z.notes} notes, one at a time: sendCommand (JetStream, acknowledged on disk) until the durable consumer's addNote update was accepted by the agent's workflow (embedded Temporal dev server, PGlite)`,
      },
    };
  } finally {
    await deleteCommandStream(bus).catch(() => undefined);
    await bus.close();
  }
}
