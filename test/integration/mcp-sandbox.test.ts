/**
 * MCP servers run in the sandbox container (`sandbox` on their entry), on the real Docker engine
 * with the real server-memory and server-filesystem from node_modules: `tools mcp add --sandbox`
 * probes the server in a container and stores `sandbox`; the pool and `mcpCall` list and call its
 * tools there; the container has no network, a read-only root, the sandbox's limits, only the
 * project's node_modules (read-only) and the server's own work directory, and only the variables
 * the entry names; a killed container is started again on next use; closing the pool removes it.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpActivities, createMcpPool } from '../../activities/mcp/index.js';
import {
  MCP_SANDBOX_LABEL,
  sandboxLaunch,
  sandboxPlace,
  type McpPool,
  type McpServerSpec,
} from '../../activities/mcp/pool.js';
import { agents, mcpServers } from '../../db/schema/index.js';
import { dockerSkipped, requireDocker } from '../helpers/docker.js';
import { migratedDatabase, tempDir, type MigratedDatabase } from '../helpers/env.js';
import { repoRoot, run, type Ran } from '../helpers/spawn.js';

const cli = join(repoRoot, 'bin', 'mindloop.mjs');
/** Inside the container the project's node_modules lie under the working directory. */
const memoryServer = './node_modules/@modelcontextprotocol/server-memory/dist/index.js';
const filesystemServer = './node_modules/@modelcontextprotocol/server-filesystem/dist/index.js';
const secret = `not-for-the-server-${process.pid}`;

let database: MigratedDatabase;
let tmp: { path: string; remove(): void };
let dataDir: string;
let env: Record<string, string | undefined>;
let pool: McpPool;

const memorySpec: McpServerSpec = {
  name: 'memory',
  transport: 'stdio',
  command: 'node',
  args: [memoryServer],
  envNames: ['MEMORY_FILE_PATH'],
  sandbox: {},
};

async function mindloop(extra: Record<string, string>, ...args: string[]): Promise<Ran> {
  return run(process.execPath, [cli, ...args], {
    DATABASE_URL: database.url,
    MINDLOOP_DATA_DIR: dataDir,
    MINDLOOP_NOTEBOOK_PORT: 'off',
    NATS_URL: 'off',
    ...extra,
  });
}

function docker(...args: string[]): string {
  return execFileSync('docker', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

interface Inspected {
  Id: string;
  State: { Running: boolean };
  Config: { Env: string[]; User: string };
  HostConfig: {
    NetworkMode: string;
    ReadonlyRootfs: boolean;
    Memory: number;
    NanoCpus: number;
    PidsLimit: number;
    CapDrop: string[];
  };
}

function inspect(container: string): Inspected | null {
  try {
    return (JSON.parse(docker('inspect', container)) as Inspected[])[0] ?? null;
  } catch {
    return null;
  }
}

/** The containers of one agent's sandboxed servers, probes included. */
const containersOf = (agentId: string) =>
  docker('ps', '-a', '--format', '{{.Names}}', '--filter', `label=${MCP_SANDBOX_LABEL}.agent=${agentId}`)
    .split('\n')
    .filter(Boolean);

const textOf = (r: unknown) =>
  ((r as { content: { type: string; text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('\n');

describe.skipIf(dockerSkipped)('MCP servers in the sandbox', () => {
  beforeAll(async () => {
    await requireDocker();
    database = await migratedDatabase('mcp_sandbox');
    tmp = tempDir('mcp-sandbox-');
    dataDir = join(tmp.path, 'data');
    env = {
      PATH: process.env.PATH,
      MINDLOOP_DATA_DIR: dataDir,
      MEMORY_FILE_PATH: '/work/memory.jsonl',
      SECRET_TOKEN: secret,
    };
    await database.db.insert(agents).values([
      { id: 'ada', name: 'Ada' },
      { id: 'bob', name: 'Bob' },
    ]);
    pool = createMcpPool(database.db, { env, backoff: { baseMs: 100, maxMs: 200 } });
  }, 180_000);

  afterAll(async () => {
    await pool?.close();
    for (const agentId of ['ada', 'bob']) for (const c of containersOf(agentId)) docker('rm', '-f', c);
    await database?.dispose();
    tmp?.remove();
  });

  it('launches docker run with the limits and no network, passing variables by name and never by value', () => {
    const place = sandboxPlace('ada', 'memory', env);
    const launch = sandboxLaunch(memorySpec, env, place);
    expect(launch.command).toBe('docker');
    const line = launch.args.join(' ');
    expect(line).toContain(`--name ${place.container}`);
    expect(line).toMatch(/--network none .*--read-only --cap-drop ALL/);
    expect(line).toContain('-e MEMORY_FILE_PATH ');
    expect(line).not.toContain('/work/memory.jsonl');
    expect(line).not.toContain(secret);
    expect(line).toContain(`type=bind,source=${join(repoRoot, 'node_modules')},target=/app/node_modules,readonly`);
    expect(line).toContain(`type=bind,source=${join(dataDir, 'mcp', 'ada', 'memory')},target=/work`);
    // The docker CLI holds the named value in its environment; the rest stays with the worker.
    expect(launch.env.MEMORY_FILE_PATH).toBe('/work/memory.jsonl');
    expect(launch.env.SECRET_TOKEN).toBeUndefined();
    const open = sandboxLaunch({ ...memorySpec, sandbox: { network: true } }, env, place);
    expect(open.args).not.toContain('--network');
  });

  it('tools mcp add --sandbox probes in a container and stores sandbox; list shows it', async () => {
    const added = await mindloop(
      {},
      'tools',
      'mcp',
      'add',
      'ada',
      'files',
      '--sandbox',
      '--',
      'node',
      filesystemServer,
      '/work',
      '/app',
    );
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toMatch(/added MCP server files to ada \(in the sandbox, without network\): 14 tools/);
    const [row] = await database.db
      .select()
      .from(mcpServers)
      .where(and(eq(mcpServers.agentId, 'ada'), eq(mcpServers.name, 'files')));
    expect(row?.sandbox).toEqual({ network: false });
    // The probe's container went with it.
    expect(containersOf('ada')).toEqual([]);
    const list = await mindloop({}, 'tools', 'mcp', 'list', 'ada');
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^files\s+stdio\s+enabled\s+person\s+14\s+not started\s+no network\s+node /m);
  }, 90_000);

  it('refuses --sandbox for an http server, and when no Docker engine answers, storing nothing', async () => {
    const http = await mindloop(
      {},
      'tools',
      'mcp',
      'add',
      'bob',
      'web',
      '--sandbox',
      '--url',
      'http://127.0.0.1:9/mcp',
    );
    expect(http.code).toBe(2);
    expect(http.stderr).toMatch(/--sandbox runs a stdio server .* an http server runs elsewhere/);
    const noEngine = await mindloop(
      { DOCKER_HOST: `unix://${join(tmp.path, 'no-docker.sock')}` },
      ...['tools', 'mcp', 'add', 'bob', 'files', '--sandbox', '--', 'node', filesystemServer, '/work'],
    );
    expect(noEngine.code).not.toBe(0);
    expect(noEngine.stderr).toMatch(/runs in a Docker container, and the Docker engine does not answer/);
    expect(await database.db.select().from(mcpServers).where(eq(mcpServers.agentId, 'bob'))).toEqual([]);
  }, 60_000);

  it('calls a sandboxed server through mcpCall; it reaches only its own work directory and node_modules', async () => {
    const workdir = sandboxPlace('ada', 'files', env).workdir;
    writeFileSync(join(workdir, 'hello.txt'), 'hello from the work directory\n');
    const acts = createMcpActivities({ db: database.db, pool, ledger: false });
    const call = (n: number, tool: string, args: Record<string, unknown>) =>
      acts.mcpCall({ agentId: 'ada', key: `agent/ada:mcp:${n}:c1`, server: 'files', tool, args });

    const read = await call(1, 'read_text_file', { path: '/work/hello.txt' });
    expect(read.status).toBe('ok');
    expect(read.text).toContain('hello from the work directory');
    // The project's own files (package.json, .env, …) are not in the container: only node_modules.
    const app = await call(2, 'list_directory', { path: '/app' });
    expect(app.status).toBe('ok');
    expect(app.text).toMatch(/\[DIR\] node_modules/);
    expect(app.text).not.toMatch(/package\.json/);
    const wrote = await call(3, 'write_file', { path: '/work/out.txt', content: 'written inside' });
    expect(wrote.status).toBe('ok');
    expect(readFileSync(join(workdir, 'out.txt'), 'utf8')).toBe('written inside');
    const readOnly = await call(4, 'write_file', { path: '/app/node_modules/planted.txt', content: 'x' });
    expect(readOnly.status).toBe('error');
    expect(readOnly.text).toMatch(/read-only file system|EROFS/i);
    expect(existsSync(join(repoRoot, 'node_modules', 'planted.txt'))).toBe(false);
  }, 90_000);

  it('runs with no network and the limits, and gives the server only the variables its entry names', async () => {
    const client = await pool.client('ada', memorySpec);
    await client.callTool({
      name: 'create_entities',
      arguments: { entities: [{ name: 'Ada', entityType: 'person', observations: ['lives in a container'] }] },
    });
    const place = sandboxPlace('ada', 'memory', env);
    expect(readFileSync(join(place.workdir, 'memory.jsonl'), 'utf8')).toContain('lives in a container');
    const c = inspect(place.container);
    expect(c?.State.Running).toBe(true);
    expect(c?.HostConfig).toMatchObject({
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      Memory: 256 << 20,
      NanoCpus: 1e9,
      PidsLimit: 128,
      CapDrop: ['ALL'],
    });
    expect(c?.Config.User).toBe(
      process.getuid?.() === 0 ? '65534:65534' : `${process.getuid?.()}:${process.getgid?.()}`,
    );
    expect(c?.Config.Env).toContain('MEMORY_FILE_PATH=/work/memory.jsonl');
    expect(c?.Config.Env.some((e) => e.startsWith('SECRET_TOKEN=') || e.includes(secret))).toBe(false);
    // Not a child with the worker's PATH either: the image's own.
    expect(c?.Config.Env.find((e) => e.startsWith('PATH='))).toBe('PATH=/usr/local/bin:/bin');

    const open = await pool.client('ada', { ...memorySpec, name: 'open', sandbox: { network: true } });
    await open.listTools();
    expect(inspect(sandboxPlace('ada', 'open', env).container)?.HostConfig.NetworkMode).not.toBe('none');
    await pool.evict('ada', 'open');
    expect(inspect(sandboxPlace('ada', 'open', env).container)).toBeNull();
  }, 90_000);

  it('starts a killed container again on next use, with its work directory kept', async () => {
    const place = sandboxPlace('ada', 'memory', env);
    const before = inspect(place.container);
    expect(before?.State.Running).toBe(true);
    docker('kill', place.container);
    await expect.poll(() => pool.health().find((h) => h.server === 'memory')?.state, { timeout: 10_000 }).toBe('down');
    await new Promise((r) => setTimeout(r, 300));
    const client = await pool.client('ada', memorySpec);
    const graph = await client.callTool({ name: 'read_graph', arguments: {} });
    expect(textOf(graph)).toContain('lives in a container');
    const after = inspect(place.container);
    expect(after?.State.Running).toBe(true);
    expect(after?.Id).not.toBe(before?.Id);
    expect(pool.health().find((h) => h.server === 'memory')).toMatchObject({ state: 'up', restarts: 1 });
  }, 60_000);

  it('a leftover container of a dead worker is replaced, and closing the pool removes the containers', async () => {
    const other = createMcpPool(database.db, { env });
    const place = sandboxPlace('ada', 'memory', env);
    const left = inspect(place.container)?.Id;
    // Another pool (a restarted worker) starting the same server removes the one still running.
    const client = await other.client('ada', memorySpec);
    expect(textOf(await client.callTool({ name: 'read_graph', arguments: {} }))).toContain('lives in a container');
    expect(inspect(place.container)?.Id).not.toBe(left);
    await other.close();
    expect(inspect(place.container)).toBeNull();
    await pool.close();
    expect(containersOf('ada')).toEqual([]);
    expect(readdirSync(place.workdir)).toContain('memory.jsonl');
  }, 60_000);
});
