/**
 * `mindloop mcp`: the MCP bridge for any MCP client (Claude Desktop, an IDE, LangChain): the bus
 * (publish, request, subscribe, a buffered heartbeat) and Mindloop (agents, status, notes, the
 * human tier's answers) as tools. On stdio by default — then stdout carries MCP and nothing else,
 * every log line goes to stderr — or streamable HTTP with `--http`. Without a bus it still
 * serves (bus tools say how to get one) and connects once a bus answers. See docs/mcp.md.
 */
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { Client, type Connection } from '@temporalio/client';
import type { Command } from 'commander';
import { busRootSchema } from '../core/bus/subjects.js';
import { createDb } from '../db/client.js';
import { envSchema, loadEnvOrExit, type Env } from '../env.js';
import { defaultNatsUrl } from '../runtime/bus.js';
import { BusLink, offBusSource, type BusSource } from '../runtime/mcp/bus-link.js';
import { defaultMcpHttpPort, isLoopbackHost, startHttpBridge } from '../runtime/mcp/http.js';
import { createBridge, defaultBufferSize, maxBufferSize, type CreateBridgeOptions } from '../runtime/mcp/server.js';
import { PublishAllowList } from '../runtime/mcp/subjects.js';
import { resolveDeployment } from '../runtime/deployment.js';
import { connectTemporal, databaseUrl, explainDbError } from '../runtime/operator.js';
import { numberArg, schemaArg } from './args.js';

interface McpOptions {
  http?: number | true;
  port?: number;
  host?: string;
  token?: string;
  allow: string[];
  buffer: number;
  root?: string;
  nats?: string;
}

const log = (line: string): void => void process.stderr.write(`${line}\n`);
const portArg = numberArg('port', 0, 65535);

/** Temporal, connected when a tool first needs it (and again after a failed try). */
function lazyTemporal(env: Env): { get: () => Promise<Client>; close: () => Promise<void> } {
  let pending: Promise<{ connection: Connection; client: Client }> | undefined;
  return {
    get: async () => {
      pending ??= connectTemporal(env).then(
        (connection) => ({ connection, client: new Client({ connection, namespace: env.TEMPORAL_NAMESPACE }) }),
        (err: unknown) => {
          pending = undefined;
          throw err;
        },
      );
      return (await pending).client;
    },
    close: async () => {
      const p = pending;
      pending = undefined;
      await p?.then((t) => t.connection.close()).catch(() => undefined);
    },
  };
}

/**
 * The bus as configured: --nats, else NATS_URL, else the local default; `off` means none. It is
 * this deployment's bus: without a deployment (no Temporal to tell it, no MINDLOOP_DEPLOYMENT)
 * the bridge serves without a bus and says why, rather than speak on another deployment's subjects.
 */
async function busSource(
  env: Env,
  o: McpOptions,
  root: string,
  temporal: () => Promise<Client>,
): Promise<BusSource & { close?: () => Promise<void> }> {
  const url = o.nats ?? env.NATS_URL ?? defaultNatsUrl;
  if (url === 'off') return offBusSource(root);
  let deployment: string;
  try {
    deployment = (await resolveDeployment(env, temporal)).id;
  } catch (err) {
    const why = (err as Error).message;
    log(`mindloop mcp: serving without the bus: ${why}`);
    return offBusSource(root, why);
  }
  return BusLink.open({ url, root, deployment, name: 'mindloop-mcp', log });
}

/** Refuse contradictory or incomplete options before anything starts. */
function checkOptions(cmd: Command, o: McpOptions, root: string): { port: number } | null {
  const http = o.http !== undefined;
  if (!http && (o.port !== undefined || o.host !== undefined || o.token !== undefined))
    cmd.error('mindloop mcp: --port, --host and --token go with --http (stdio needs none of them)', { exitCode: 2 });
  if (typeof o.http === 'number' && o.port !== undefined && o.port !== o.http)
    cmd.error(`mindloop mcp: --http ${o.http} and --port ${o.port} disagree`, { exitCode: 2 });
  try {
    new PublishAllowList(root, o.allow);
  } catch (err) {
    cmd.error(`mindloop mcp: --allow: ${(err as Error).message}`, { exitCode: 2 });
  }
  return http ? { port: typeof o.http === 'number' ? o.http : (o.port ?? defaultMcpHttpPort) } : null;
}

/** Serve one session on stdin/stdout until the client goes away or a signal stops us. */
async function serveStdio(options: CreateBridgeOptions): Promise<void> {
  // stdout belongs to the protocol: a stray console.log from any library must not corrupt it.
  console.log = console.info = console.debug = (...args: unknown[]) => console.error(...args);
  const bridge = createBridge(options);
  const transport = new StdioServerTransport();
  const ended = new Promise<string>((resolve) => {
    process.stdin.once('end', () => resolve('stdin closed'));
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => resolve(sig));
  });
  const session = await bridge.connect(transport);
  const closed = new Promise<string>((resolve) => {
    const prev = session.server.server.onclose;
    session.server.server.onclose = () => {
      prev?.();
      resolve('the client closed the session');
    };
  });
  log(
    `mindloop mcp: serving on stdio (bus root ${bridge.root}; publish allowed to ${bridge.allow.patterns.join(', ')})`,
  );
  const why = await Promise.race([ended, closed]);
  log(`mindloop mcp: stopping (${why})`);
  await bridge.close();
}

/** Serve streamable HTTP until a signal stops us. */
async function serveHttp(
  options: CreateBridgeOptions,
  o: McpOptions,
  port: number,
  token: string | undefined,
): Promise<void> {
  const http = await startHttpBridge({ ...options, host: o.host ?? '127.0.0.1', port, ...(token ? { token } : {}) });
  log(
    `mindloop mcp: streamable HTTP at ${http.url}${token ? ' (bearer token required)' : ''}; bus root ${http.bridge.root}; publish allowed to ${http.bridge.allow.patterns.join(', ')}`,
  );
  const sig = await new Promise<string>((resolve) => {
    for (const s of ['SIGINT', 'SIGTERM'] as const) process.once(s, () => resolve(s));
  });
  log(`mindloop mcp: stopping (${sig})`);
  await http.close();
}

export function registerMcpCommand(program: Command): void {
  program
    .command('mcp')
    .description(
      'serve the bus and Mindloop to MCP clients (Claude Desktop, IDEs, LangChain): stdio by default, streamable HTTP with --http',
    )
    .option(
      '--http [port]',
      `serve streamable HTTP on /mcp instead of stdio (default port ${defaultMcpHttpPort}; 0 picks a free one)`,
      portArg,
    )
    .option('--port <port>', 'the HTTP port (same as --http <port>)', portArg)
    .option('--host <host>', 'the HTTP bind address (default 127.0.0.1; any other needs --token)')
    .option(
      '--token <token>',
      'every HTTP request must carry Authorization: Bearer <token> (default MINDLOOP_MCP_TOKEN)',
      schemaArg('--token', envSchema.shape.MINDLOOP_MCP_TOKEN.unwrap()),
    )
    .option(
      '--allow <pattern>',
      'also let clients publish to this subject pattern (relative to the root, NATS wildcards, e.g. meta.attention.*); repeatable',
      (v: string, prev: string[]) => [...prev, v],
      [] as string[],
    )
    .option(
      '--buffer <n>',
      'heartbeat buffer per session (the oldest messages go when it is full)',
      numberArg('--buffer', 1, maxBufferSize),
      defaultBufferSize,
    )
    .option('--root <root>', 'the bus root (default MINDLOOP_BUS_ROOT)', schemaArg('bus root', busRootSchema))
    .option(
      '--nats <url>',
      'the NATS server (default NATS_URL, else nats://127.0.0.1:4222; off: no bus)',
      schemaArg('--nats', envSchema.shape.NATS_URL.unwrap()),
    )
    .action(async function (this: Command, o: McpOptions) {
      const env = loadEnvOrExit();
      const root = o.root ?? env.MINDLOOP_BUS_ROOT;
      const http = checkOptions(this, o, root);
      const token = o.token ?? env.MINDLOOP_MCP_TOKEN;
      // Checked again where the server binds; said here first, before anything connects.
      if (http && o.host && !token && !isLoopbackHost(o.host))
        this.error(
          `mindloop mcp: refusing to bind ${o.host} without a token: give --token <secret> (or MINDLOOP_MCP_TOKEN), or bind 127.0.0.1`,
          { exitCode: 2 },
        );
      const temporal = lazyTemporal(env);
      const bus = await busSource(env, o, root, temporal.get);
      const db = createDb(databaseUrl(env), { max: 4 });
      const options: CreateBridgeOptions = {
        bus,
        db: db.db,
        temporal: temporal.get,
        bufferSize: o.buffer,
        allow: o.allow,
        explainDbError: (err) => explainDbError(err, env),
        log,
      };
      try {
        if (http) await serveHttp(options, o, http.port, token);
        else await serveStdio(options);
      } finally {
        await Promise.allSettled([bus.close?.(), db.close(), temporal.close()]);
      }
      process.exit(0);
    });
}
