/**
 * The worker's MCP clients: one client per (agent, server), connected on first use and shared
 * by every call of that agent to that server. A server whose process dies (or whose connection
 * closes) is marked down and started again on its next use, no sooner than a backoff that
 * doubles with each failure in a row up to a cap; a success resets it. `close()` stops every
 * server (the worker calls it when it shuts down). A stdio server whose entry has `sandbox` runs
 * in a container of the sandbox image instead of as the worker's child (see sandboxLaunch).
 *
 * Not an activity: the MCP activities and the CLI's `tools mcp add` use it.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chown, mkdir } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { clipText, sanitizeText } from '../../core/sanitize.js';
import type { McpServerSandbox, McpToolAnnotations } from '../../db/schema/mcp.js';
import { diskShares, resolveBudget } from '../../sandbox/docker-sandbox.js';
import { SANDBOX_IMAGE, SANDBOX_INIT } from '../../sandbox/image.js';
import { within } from '../../core/within.js';

/** How to reach one server: what its `mcp_servers` row holds. */
export interface McpServerSpec {
  name: string;
  transport: 'stdio' | 'http';
  command?: string | null;
  args?: readonly string[];
  url?: string | null;
  /** The worker's environment variables a stdio server receives, by name (PATH always). */
  envNames?: readonly string[];
  /** http: header name → the worker's environment variable holding its value. */
  headerEnv?: Record<string, string>;
  /** stdio: run in a container of the sandbox image (null or absent: the worker's own child). */
  sandbox?: McpServerSandbox | null;
}

/** A tool as the server listed it, checked. */
export interface McpListedTool {
  name: string;
  description: string | null;
  inputSchema: Record<string, unknown>;
  annotations: McpToolAnnotations;
}

/** Why a server could not be used: it did not start, is not MCP, listed a bad tool, or did not answer in time. */
export class McpServerError extends Error {
  constructor(
    message: string,
    readonly reason: 'start' | 'protocol' | 'schema' | 'timeout' | 'down',
  ) {
    super(message);
    this.name = 'McpServerError';
  }
}

/** The error of a step that did not answer within `ms`. */
const timedOut = (what: string, ms: number) => new McpServerError(`${what}: no answer within ${ms} ms`, 'timeout');

export interface McpTimeouts {
  /** Start the process (or reach the URL) and finish MCP's initialize handshake. */
  connectMs: number;
  /** One tools/list page. */
  listMs: number;
}

export const defaultMcpTimeouts: McpTimeouts = { connectMs: 20_000, listMs: 10_000 };

/** Backoff before a dead server is started again: base × 2^(failures−1), at most max. */
export interface McpBackoff {
  baseMs: number;
  maxMs: number;
}

const defaultBackoff: McpBackoff = { baseMs: 500, maxMs: 60_000 };

/** Tool names MCP clients can pass on to models (the providers' common rule). */
const toolNamePattern = /^[A-Za-z0-9_.-]{1,128}$/;
const maxToolsPerServer = 500;
const maxDescriptionChars = 2000;
const maxSchemaBytes = 32 * 1024;
/** The largest single message a stdio server may send. */
const maxMessageBytes = 32 * 1024 * 1024;
/** How long a failed handshake waits to see whether the process exited (then it did not start). */
const exitGraceMs = 300;
/** The last bytes of a stdio server's stderr, kept to say why it did not start. */
const stderrTailChars = 2000;

/**
 * The program and arguments that start a stdio server with only the variables its entry names
 * (and PATH): `env -i` clears the rest, since the SDK's transport would otherwise add HOME, USER,
 * SHELL and others of the worker's own.
 */
export function stdioLaunch(
  spec: McpServerSpec,
  env: Record<string, string | undefined>,
): { command: string; args: string[] } {
  if (!spec.command) throw new McpServerError(`server ${spec.name}: a stdio server needs a command`, 'start');
  const pairs = [`PATH=${env.PATH ?? ''}`];
  for (const name of spec.envNames ?? []) {
    const value = env[name];
    if (name !== 'PATH' && value !== undefined) pairs.push(`${name}=${value}`);
  }
  return { command: 'env', args: ['-i', ...pairs, spec.command, ...(spec.args ?? [])] };
}

/** Where a sandboxed server runs: its container's name and its own work directory on the host. */
export interface McpSandboxPlace {
  agentId: string;
  container: string;
  workdir: string;
}

/** The label every sandboxed server's container carries (and `<label>.agent`, `<label>.server`). */
export const MCP_SANDBOX_LABEL = 'mindloop.mcp';
/**
 * In the container: /app holds the project's node_modules (read-only) and is the working
 * directory; /work is the server's own work directory.
 */
export const MCP_SANDBOX_APP_DIR = '/app';
export const MCP_SANDBOX_WORK_DIR = '/work';
/** The container's PID 1 is the sandbox's init; a server runs as long as it is used, so its backstop is ten years. */
const serverBackstopSeconds = 10 * 365 * 24 * 3600;
/** The uid:gid a server runs as when the worker is root (nobody); otherwise the worker's own. */
const nobody = 65534;
/** What the docker CLI needs of the worker's environment to reach its engine (never passed into the container). */
const dockerClientEnv = [
  'PATH',
  'HOME',
  'DOCKER_HOST',
  'DOCKER_CONTEXT',
  'DOCKER_CONFIG',
  'DOCKER_CERT_PATH',
  'DOCKER_TLS_VERIFY',
];
const seccompPath = fileURLToPath(new URL('../../sandbox/seccomp.json', import.meta.url));

/** The project's node_modules: the nearest one above this file. */
function projectNodeModules(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'node_modules'))) return join(dir, 'node_modules');
    const up = dirname(dir);
    if (up === dir)
      throw new McpServerError("a sandboxed MCP server needs the project's node_modules, and none was found", 'start');
    dir = up;
  }
}

/**
 * The container and work directory of one agent's server. The name is the same for every start,
 * so a restarted worker removes what a dead one left running before it starts its own; a probe
 * (`tools mcp add`) gets a name of its own and never touches a worker's container. The work
 * directory is `<MINDLOOP_DATA_DIR>/mcp/<agent>/<server>` and outlives the container.
 */
export function sandboxPlace(
  agentId: string,
  server: string,
  env: Record<string, string | undefined>,
  probe = false,
): McpSandboxPlace {
  const hash = createHash('sha256').update(`${agentId}\u0000${server}`).digest('hex').slice(0, 12);
  const container = `mindloop-mcp-${agentId}-${server}-${hash}${probe ? `-probe-${process.pid}` : ''}`;
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(container))
    throw new McpServerError(`server ${server}: agent ${agentId} cannot name a container`, 'start');
  return { agentId, container, workdir: resolve(env.MINDLOOP_DATA_DIR || '.data', 'mcp', agentId, server) };
}

/** The docker CLI with only what it needs to reach the engine, and the variables the server is given. */
function dockerEnv(env: Record<string, string | undefined>, names: readonly string[] = []): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of [...dockerClientEnv, ...names]) {
    const value = env[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/**
 * The `docker run` that starts a stdio server in the sandbox image, with the sandbox's own
 * containment: read-only root, every capability dropped, no-new-privileges, the sandbox's seccomp
 * profile, the default budget's memory (memory+swap), CPUs and pids, size-limited tmpfs for /tmp
 * and /dev/shm, and no network unless the entry allows it (then Docker's default bridge). The
 * image is never pulled. Mounts:
 *  - the project's node_modules at /app/node_modules, read-only, and /app is the working
 *    directory: `node ./node_modules/<package>/…` starts an installed server;
 *  - the server's own work directory (sandboxPlace) at /work, writable: its data lives there
 *    across restarts, and nothing else of the host is reachable.
 * Named variables go in as `-e NAME`: the docker CLI reads their values from its own environment,
 * so no value is ever on a command line; PATH is the image's.
 */
export function sandboxLaunch(
  spec: McpServerSpec,
  env: Record<string, string | undefined>,
  place: McpSandboxPlace,
): { command: string; args: string[]; env: Record<string, string> } {
  if (!spec.command) throw new McpServerError(`server ${spec.name}: a stdio server needs a command`, 'start');
  const nodeModules = projectNodeModules();
  for (const path of [nodeModules, place.workdir])
    if (/[,"\n]/.test(path))
      throw new McpServerError(`server ${spec.name}: ${path} cannot be mounted (a comma or quote in it)`, 'start');
  const budget = resolveBudget();
  const disk = diskShares(budget.diskBytes);
  const named = (spec.envNames ?? []).filter((n) => n !== 'PATH' && env[n] !== undefined);
  const uid = process.getuid?.() ?? nobody;
  const user = uid === 0 ? `${nobody}:${nobody}` : `${uid}:${process.getgid?.() ?? nobody}`;
  const args = [
    'run',
    '-i',
    '--rm',
    '--pull',
    'never',
    '--name',
    place.container,
    '--label',
    `${MCP_SANDBOX_LABEL}=1`,
    '--label',
    `${MCP_SANDBOX_LABEL}.agent=${place.agentId}`,
    '--label',
    `${MCP_SANDBOX_LABEL}.server=${spec.name}`,
    ...(spec.sandbox?.network === true ? [] : ['--network', 'none']),
    '--read-only',
    '--cap-drop',
    'ALL',
    '--security-opt',
    'no-new-privileges',
    '--security-opt',
    `seccomp=${seccompPath}`,
    '--memory',
    String(budget.memoryBytes),
    '--memory-swap',
    String(budget.memoryBytes),
    '--cpus',
    String(budget.cpus),
    '--pids-limit',
    String(budget.pids),
    '--ulimit',
    'nofile=1024:1024',
    '--ulimit',
    'msgqueue=0:0',
    '--tmpfs',
    `/tmp:rw,nosuid,nodev,noexec,size=${disk.tmp},mode=1777`,
    '--tmpfs',
    '/dev/mqueue:ro,nosuid,nodev,noexec,size=4096,mode=0555',
    '--shm-size',
    String(disk.shm),
    '--user',
    user,
    '--mount',
    `type=bind,source=${nodeModules},target=${MCP_SANDBOX_APP_DIR}/node_modules,readonly`,
    '--mount',
    `type=bind,source=${place.workdir},target=${MCP_SANDBOX_WORK_DIR}`,
    '--workdir',
    MCP_SANDBOX_APP_DIR,
    // The server's stderr reaches the worker through the attached stream; nothing is kept by Docker.
    '--log-driver',
    'none',
    ...named.flatMap((n) => ['-e', n]),
    SANDBOX_IMAGE,
    SANDBOX_INIT,
    String(serverBackstopSeconds),
    spec.command,
    ...(spec.args ?? []),
  ];
  return { command: 'docker', args, env: dockerEnv(env, named) };
}

/** Run the docker CLI; its trimmed stdout, or an error carrying its stderr. */
function dockerCli(args: string[], env: Record<string, string | undefined>, timeoutMs = 30_000): Promise<string> {
  return new Promise((done, fail) => {
    execFile('docker', args, { env: dockerEnv(env), timeout: timeoutMs }, (err, stdout, stderr) => {
      if (!err) return done(stdout.trim());
      const code = (err as NodeJS.ErrnoException).code;
      fail(
        Object.assign(new Error(code === 'ENOENT' ? 'the docker CLI is not installed' : stderr.trim() || err.message), {
          code,
        }),
      );
    });
  });
}

/** Remove a server's container, running or not; one that is not there is no error. */
export async function removeSandboxContainer(
  place: McpSandboxPlace,
  env: Record<string, string | undefined>,
): Promise<void> {
  await dockerCli(['rm', '-f', place.container], env).catch((err: Error) => {
    if (!/No such container/i.test(err.message)) throw err;
  });
}

/** Before a start: the work directory exists (owned by the uid the server runs as) and no container holds the name. */
async function prepareSandbox(spec: McpServerSpec, place: McpSandboxPlace, env: Record<string, string | undefined>) {
  try {
    await mkdir(place.workdir, { recursive: true });
    if (process.getuid?.() === 0) await chown(place.workdir, nobody, nobody);
    await removeSandboxContainer(place, env);
  } catch (err) {
    throw new McpServerError(
      `server ${spec.name}: its sandbox could not be prepared: ${clipText((err as Error).message, 300)}`,
      'start',
    );
  }
}

/**
 * Whether a sandboxed server can start here: the docker CLI is installed, its engine answers and
 * has the sandbox image. An McpServerError that says how to fix what is missing.
 */
export async function checkMcpSandbox(env: Record<string, string | undefined> = process.env): Promise<void> {
  try {
    await dockerCli(['image', 'inspect', '--format', '{{.Id}}', SANDBOX_IMAGE], env, 15_000);
  } catch (err) {
    const why = clipText(sanitizeText((err as Error).message), 300);
    const fix = /no such image/i.test(why)
      ? `the sandbox image ${SANDBOX_IMAGE} is not built: build it with \`npm run sandbox:image\``
      : (err as NodeJS.ErrnoException).code === 'ENOENT'
        ? 'the docker CLI is not installed (Debian: apt-get install -y docker.io)'
        : `the Docker engine does not answer (${why}): start one or point DOCKER_HOST at one`;
    throw new McpServerError(`a sandboxed MCP server runs in a Docker container, and ${fix}`, 'start');
  }
}

function headersOf(spec: McpServerSpec, env: Record<string, string | undefined>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [header, variable] of Object.entries(spec.headerEnv ?? {})) {
    const value = env[variable];
    if (value === undefined)
      throw new McpServerError(
        `server ${spec.name}: header ${header} comes from ${variable}, which is not set in the worker's environment`,
        'start',
      );
    headers[header] = value;
  }
  return headers;
}

/** A connected client and what is known of its process. */
interface Connection {
  client: Client;
  transport: Transport;
  stderr: () => string;
  /** Stop the server: close the client and, for a sandboxed one, remove its container. */
  close: () => Promise<void>;
}

interface ConnectOptions {
  env?: Record<string, string | undefined>;
  timeouts?: McpTimeouts;
  /** Called (once) when the connection closes after it was up: the process died or the server hung up. */
  onClose?: () => void;
  /** Called with the new list when the server says its tools changed (`notifications/tools/list_changed`). */
  onToolsChanged?: (tools: McpListedTool[]) => void;
  /** Where a sandboxed server runs (required when the spec has `sandbox`). */
  place?: McpSandboxPlace;
}

/**
 * Start (or reach) one server and finish MCP's handshake. A process that does not start, exits
 * at once, or writes something other than MCP's JSON-RPC is an McpServerError with its stderr's
 * tail; nothing is left running.
 */
export async function connectMcp(spec: McpServerSpec, opts: ConnectOptions = {}): Promise<Connection> {
  const env = opts.env ?? process.env;
  const timeouts = opts.timeouts ?? defaultMcpTimeouts;
  let tail = '';
  let transport: Transport;
  const place = spec.transport === 'stdio' && spec.sandbox ? opts.place : undefined;
  if (spec.transport === 'stdio' && spec.sandbox && !place)
    throw new McpServerError(`server ${spec.name}: a sandboxed server needs its agent's place`, 'start');
  if (place) await prepareSandbox(spec, place, env);
  const removeContainer = async () => {
    if (place) await removeSandboxContainer(place, env).catch(() => undefined);
  };
  if (spec.transport === 'stdio') {
    // Room for a big answer (it is capped after it is read); one over this closes the connection.
    const stdio = new StdioClientTransport({
      ...(place ? sandboxLaunch(spec, env, place) : stdioLaunch(spec, env)),
      stderr: 'pipe',
      maxBufferSize: maxMessageBytes,
    });
    stdio.stderr?.on('data', (chunk: Buffer) => void (tail = (tail + chunk.toString('utf8')).slice(-stderrTailChars)));
    transport = stdio;
  } else {
    if (!spec.url) throw new McpServerError(`server ${spec.name}: an http server needs a url`, 'start');
    let url: URL;
    try {
      url = new URL(spec.url);
    } catch {
      throw new McpServerError(`server ${spec.name}: ${spec.url} is not a URL`, 'start');
    }
    transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: headersOf(spec, env) } });
  }
  let protocolError: string | undefined;
  let up = false;
  let closed = false;
  const client = new Client(
    { name: 'mindloop', version: '1' },
    opts.onToolsChanged
      ? {
          listChanged: {
            tools: {
              autoRefresh: false,
              onChanged: () => {
                void listMcpTools(client, spec.name, timeouts.listMs).then(opts.onToolsChanged, () => undefined);
              },
            },
          },
        }
      : {},
  );
  // Before the handshake, the first thing that is not JSON-RPC ends the wait: it is not MCP.
  let notMcp: (err: Error) => void = () => undefined;
  const garbled = new Promise<never>((_, reject) => (notMcp = reject));
  garbled.catch(() => undefined);
  client.onerror = (err) => {
    protocolError ??= err.message;
    if (!up) notMcp(err);
  };
  let exitedNow: () => void = () => undefined;
  const exit = new Promise<void>((resolve) => (exitedNow = resolve));
  client.onclose = () => {
    closed = true;
    exitedNow();
    if (up) opts.onClose?.();
  };
  const stderr = () => clipText(sanitizeText(tail.trim()), stderrTailChars);
  try {
    await within(
      Promise.race([client.connect(transport, { timeout: timeouts.connectMs }), garbled]),
      timeouts.connectMs,
      () => timedOut(`server ${spec.name} did not finish MCP's handshake`, timeouts.connectMs),
    );
  } catch (err) {
    // A write that failed (EPIPE) comes before the exit of a process that never started.
    if (!closed) await within(exit, exitGraceMs, () => timedOut('exit', exitGraceMs)).catch(() => undefined);
    const exited = closed;
    await client.close().catch(() => undefined);
    await removeContainer();
    const said = stderr();
    // A process that is gone did not start; one still running that wrote non-JSON-RPC is not MCP.
    // Over HTTP there is no process: the request's own error says what happened.
    const httpWhy = () => {
      const said = (err as Error).message;
      return sanitizeText(protocolError && protocolError !== said ? `${said} (${protocolError})` : said);
    };
    const [why, reason]: [string, McpServerError['reason']] =
      spec.transport === 'http' && !(err instanceof McpServerError)
        ? [
            `server ${spec.name} at ${spec.url ?? ''} did not finish MCP's handshake: ${clipText(httpWhy(), 300)}`,
            'start',
          ]
        : exited
          ? [`server ${spec.name} exited before MCP's handshake finished`, 'start']
          : protocolError
            ? [`server ${spec.name} does not speak MCP (${clipText(protocolError, 300)})`, 'protocol']
            : err instanceof McpServerError
              ? [err.message, err.reason]
              : [
                  `server ${spec.name} did not finish MCP's handshake: ${clipText((err as Error).message, 300)}`,
                  'protocol',
                ];
    throw new McpServerError(said ? `${why}; its stderr: ${clipText(said, 500)}` : why, reason);
  }
  up = true;
  // A container goes first: the docker CLI then exits at once, instead of waiting for the end of its stdin.
  const close = async () => {
    await removeContainer();
    await client.close().catch(() => undefined);
  };
  return { client, transport, stderr, close };
}

/** The server's tools, every page, each checked: a tool with a bad name or input schema refuses the list. */
export async function listMcpTools(client: Client, server: string, timeoutMs: number): Promise<McpListedTool[]> {
  const tools: McpListedTool[] = [];
  let cursor: string | undefined;
  do {
    let page: Awaited<ReturnType<Client['listTools']>>;
    try {
      page = await within(client.listTools(cursor ? { cursor } : {}, { timeout: timeoutMs }), timeoutMs, () =>
        timedOut(`server ${server} did not list its tools`, timeoutMs),
      );
    } catch (err) {
      if (err instanceof McpServerError) throw err;
      throw new McpServerError(
        `server ${server} listed its tools in a form MCP does not allow: ${clipText((err as Error).message, 500)}`,
        'schema',
      );
    }
    for (const t of page.tools) tools.push(checkTool(server, t));
    if (tools.length > maxToolsPerServer)
      throw new McpServerError(`server ${server} lists more than ${maxToolsPerServer} tools`, 'schema');
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}

function checkTool(
  server: string,
  t: { name: string; description?: string; inputSchema: unknown; annotations?: McpToolAnnotations },
): McpListedTool {
  if (!toolNamePattern.test(t.name))
    throw new McpServerError(
      `server ${server}: tool name ${JSON.stringify(clipText(sanitizeText(t.name), 80))} is not 1–128 of A-Z a-z 0-9 _ . -`,
      'schema',
    );
  const schema = t.inputSchema as Record<string, unknown> | null;
  if (!schema || typeof schema !== 'object' || Array.isArray(schema) || schema.type !== 'object')
    throw new McpServerError(`server ${server}: tool ${t.name}'s input schema is not a JSON Schema object`, 'schema');
  const text = JSON.stringify(schema);
  if (Buffer.byteLength(text, 'utf8') > maxSchemaBytes)
    throw new McpServerError(
      `server ${server}: tool ${t.name}'s input schema is over ${maxSchemaBytes} bytes`,
      'schema',
    );
  const a = t.annotations ?? {};
  const annotations: McpToolAnnotations = {};
  if (typeof a.title === 'string') annotations.title = clipText(sanitizeText(a.title), 200);
  for (const k of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'] as const)
    if (typeof a[k] === 'boolean') annotations[k] = a[k];
  return {
    name: t.name,
    description: t.description ? clipText(sanitizeText(t.description), maxDescriptionChars) : null,
    inputSchema: JSON.parse(sanitizeText(text)) as Record<string, unknown>,
    annotations,
  };
}

/** What `mindloop doctor` and `tools mcp list` show of one server of the pool. */
export interface McpServerHealth {
  agentId: string;
  server: string;
  state: 'connecting' | 'up' | 'down';
  /** Times it was started again after it died or failed to start. */
  restarts: number;
  lastError: string | null;
  /** When a server that is down may be started again (ms since the epoch). */
  retryAt: number | null;
}

interface Entry {
  spec: McpServerSpec;
  connecting?: Promise<Connection>;
  live?: Connection;
  failures: number;
  restarts: number;
  lastError: string | null;
  retryAt: number | null;
}

export interface McpPoolOptions {
  env?: Record<string, string | undefined>;
  timeouts?: McpTimeouts;
  backoff?: McpBackoff;
  now?: () => number;
  /** A server's tools changed: the pool's owner records the new list. */
  onToolsChanged?: (agentId: string, server: string, tools: McpListedTool[]) => void;
  /** A server came up or went down: the pool's owner records it where a person sees it. */
  onHealth?: (health: McpServerHealth) => void;
}

const sameSpec = (a: McpServerSpec, b: McpServerSpec) => JSON.stringify(a) === JSON.stringify(b);

/** The worker's MCP clients (see the module comment). */
export class McpPool {
  private readonly entries = new Map<string, Entry>();
  private closing = false;
  private readonly now: () => number;

  constructor(private readonly opts: McpPoolOptions = {}) {
    this.now = opts.now ?? Date.now;
  }

  get timeouts(): McpTimeouts {
    return this.opts.timeouts ?? defaultMcpTimeouts;
  }

  /** The shared client of (agent, server), started now if it is not running. */
  async client(agentId: string, spec: McpServerSpec): Promise<Client> {
    if (this.closing) throw new McpServerError('the worker is stopping; MCP servers are closed', 'down');
    const key = `${agentId}\u0000${spec.name}`;
    let entry = this.entries.get(key);
    if (entry && !sameSpec(entry.spec, spec)) {
      // The entry was changed (removed and added again): the old process goes.
      await this.evict(agentId, spec.name);
      entry = undefined;
    }
    if (!entry) {
      entry = { spec, failures: 0, restarts: 0, lastError: null, retryAt: null };
      this.entries.set(key, entry);
    }
    if (entry.live) return entry.live.client;
    if (!entry.connecting) {
      if (entry.retryAt !== null && this.now() < entry.retryAt)
        throw new McpServerError(
          `server ${spec.name} is down (${entry.lastError ?? 'it stopped'}); it is started again in ${Math.ceil((entry.retryAt - this.now()) / 1000)} s`,
          'down',
        );
      if (entry.failures > 0) entry.restarts++;
      entry.connecting = this.start(agentId, entry);
    }
    return (await entry.connecting).client;
  }

  private async start(agentId: string, entry: Entry): Promise<Connection> {
    const name = entry.spec.name;
    try {
      const env = this.opts.env ?? process.env;
      const live = await connectMcp(entry.spec, {
        env,
        timeouts: this.timeouts,
        ...(entry.spec.sandbox ? { place: sandboxPlace(agentId, name, env) } : {}),
        onClose: () => {
          if (entry.live !== live) return;
          entry.live = undefined;
          this.failed(entry, `server ${name} stopped${live.stderr() ? `: ${clipText(live.stderr(), 300)}` : ''}`);
          this.opts.onHealth?.(this.healthOf(agentId, entry));
        },
        ...(this.opts.onToolsChanged
          ? { onToolsChanged: (tools: McpListedTool[]) => this.opts.onToolsChanged?.(agentId, name, tools) }
          : {}),
      });
      entry.live = live;
      entry.failures = 0;
      entry.retryAt = null;
      entry.lastError = null;
      this.opts.onHealth?.(this.healthOf(agentId, entry));
      if (this.closing) await live.close();
      return live;
    } catch (err) {
      this.failed(entry, (err as Error).message);
      this.opts.onHealth?.(this.healthOf(agentId, entry));
      throw err;
    } finally {
      entry.connecting = undefined;
    }
  }

  private failed(entry: Entry, why: string): void {
    entry.failures++;
    entry.lastError = why;
    const { baseMs, maxMs } = this.opts.backoff ?? defaultBackoff;
    entry.retryAt = this.now() + Math.min(maxMs, baseMs * 2 ** (entry.failures - 1));
  }

  /** Stop one server of one agent (its entry was removed or changed). */
  async evict(agentId: string, server: string): Promise<void> {
    const key = `${agentId}\u0000${server}`;
    const entry = this.entries.get(key);
    this.entries.delete(key);
    const live = entry?.live ?? (await entry?.connecting?.catch(() => undefined));
    if (entry) entry.live = undefined;
    await live?.close();
  }

  health(): McpServerHealth[] {
    return [...this.entries.entries()].map(([key, e]) => this.healthOf(key.split('\u0000')[0] ?? '', e));
  }

  private healthOf(agentId: string, e: Entry): McpServerHealth {
    return {
      agentId,
      server: e.spec.name,
      state: e.live ? 'up' : e.connecting && e.failures === 0 ? 'connecting' : 'down',
      restarts: e.restarts,
      lastError: e.lastError,
      retryAt: e.live ? null : e.retryAt,
    };
  }

  /** Stop every server; later uses are refused. */
  async close(): Promise<void> {
    this.closing = true;
    const lives = await Promise.all(
      [...this.entries.values()].map(async (e) => e.live ?? (await e.connecting?.catch(() => undefined))),
    );
    this.entries.clear();
    await Promise.all(lives.map((l) => l?.close()));
  }
}

/**
 * Start a server once, list its tools and stop it: what `tools mcp add` checks before it stores
 * anything. A sandboxed server is started as the pool would start it for `agentId`, in a container
 * of its own name.
 */
export async function probeMcpServer(
  spec: McpServerSpec,
  opts: { env?: Record<string, string | undefined>; timeouts?: McpTimeouts; agentId?: string } = {},
): Promise<McpListedTool[]> {
  const timeouts = opts.timeouts ?? defaultMcpTimeouts;
  const env = opts.env ?? process.env;
  if (spec.sandbox && spec.transport !== 'stdio')
    throw new McpServerError(`server ${spec.name}: only a stdio server runs in the sandbox`, 'start');
  if (spec.sandbox && !opts.agentId)
    throw new McpServerError(`server ${spec.name}: a sandboxed server is probed for an agent`, 'start');
  const place = spec.sandbox && opts.agentId ? sandboxPlace(opts.agentId, spec.name, env, true) : undefined;
  const live = await connectMcp(spec, { env, timeouts, ...(place ? { place } : {}) });
  try {
    return await listMcpTools(live.client, spec.name, timeouts.listMs);
  } finally {
    await live.close();
  }
}
