/**
 * `mindloop tools mcp add|list|remove`: the MCP servers a person grants an agent. `add` starts the
 * server once, lists its tools and stores them only when it answered as MCP; a server that does not
 * start, exits at once, speaks something else or lists a tool with an invalid schema is refused and
 * nothing is stored. Values of environment variables are never stored: only their names. A stdio
 * server added with `--sandbox` runs in a container of the sandbox image (without network unless
 * `--network`); it is probed there, as the worker will run it.
 */
import { InvalidArgumentError, type Command } from 'commander';
import { mcpServerEntrySchema, mcpServerNameSchema, rowOfEntry } from '../core/mcp-policy.js';
import { formatIssues } from '../core/zod-issues.js';
import { oneLine } from '../core/sanitize.js';
import { secretSource } from '../env.js';
import { agentIdArg, schemaArg } from './args.js';
import { requireAgent, withDb } from './client.js';
import type { McpServerPolicy } from '../db/schema/index.js';
import { table } from './table.js';
import { registerMcpGrantCommands } from './tools-grant.js';

const out = (s: string): void => {
  process.stdout.write(`${s}\n`);
};

const envName = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `--env VAR`, repeatable: the NAME of a variable the server receives. */
function collectEnv(value: string, previous: string[] = []): string[] {
  if (!envName.test(value))
    throw new InvalidArgumentError(`--env ${value}: the NAME of an environment variable (letters, digits, _)`);
  return [...previous, value];
}

/** `--header-env Header=VAR`, repeatable. */
function collectHeader(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const m = /^([A-Za-z0-9-]{1,100})=([A-Za-z_][A-Za-z0-9_]*)$/.exec(value);
  if (!m) throw new InvalidArgumentError(`--header-env ${value}: Header=VAR, VAR the NAME of an environment variable`);
  return { ...previous, [m[1]!]: m[2]! };
}

interface AddOptions {
  url?: string;
  env: string[];
  headerEnv: Record<string, string>;
  sandbox?: boolean;
  network?: boolean;
  allowDestructive: string[];
  allowPath: string[];
  allowUrl: string[];
  grant: string[];
  pricePerCall?: string;
  pricePerSecond?: string;
  json?: boolean;
}

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/** The policy the flags state, checked as an agent file's entry is (so both refuse the same things). */
function policyOf(name: string, o: AddOptions): { ok: true; policy: McpServerPolicy } | { ok: false; error: string } {
  const price: { perCall?: number; perSecond?: number } = {};
  for (const [flag, key, v] of [
    ['--price-per-call', 'perCall', o.pricePerCall],
    ['--price-per-second', 'perSecond', o.pricePerSecond],
  ] as const) {
    if (v === undefined) continue;
    if (v.trim() === '' || !Number.isFinite(Number(v))) return { ok: false, error: `${flag} ${v}: a number of LF` };
    price[key] = Number(v);
  }
  const entry = mcpServerEntrySchema.safeParse({
    name,
    command: ['(flags only)'],
    ...(o.allowDestructive.length
      ? { allowDestructive: o.allowDestructive.includes('all') ? true : o.allowDestructive }
      : {}),
    ...(o.allowPath.length ? { allowPaths: o.allowPath } : {}),
    ...(o.allowUrl.length ? { allowUrls: o.allowUrl } : {}),
    ...(o.grant.length ? { grant: o.grant.includes('all') ? 'all' : o.grant } : {}),
    ...(Object.keys(price).length ? { price } : {}),
  });
  if (!entry.success) return { ok: false, error: formatIssues(entry.error, 'flags') };
  return { ok: true, policy: rowOfEntry(entry.data).policy };
}

export function registerToolCommands(program: Command): void {
  const tools = program.command('tools').description("an agent's tools from outside: MCP servers (tools mcp …)");
  const mcp = tools.command('mcp').description("the agent's MCP servers: add, list, remove");

  mcp
    .command('add')
    .description('grant an agent an MCP server, after starting it once and listing its tools')
    .argument('<agent>', 'the agent', agentIdArg)
    .argument('<name>', 'the server name the agent calls it by', schemaArg('server name', mcpServerNameSchema))
    .argument('[command...]', 'stdio: the program and its arguments, after --')
    .option('--url <url>', 'streamable HTTP: the endpoint (instead of a command)')
    .option('--env <VAR>', 'a variable the stdio server receives, by NAME (repeatable; PATH always)', collectEnv, [])
    .option(
      '--header-env <Header=VAR>',
      'http: a header whose value is the variable VAR (repeatable)',
      collectHeader,
      {},
    )
    .option('--sandbox', "stdio: run the server in a container of the sandbox image, not as the worker's child")
    .option('--network', 'with --sandbox: the container may reach the network (default: none)')
    .option(
      '--allow-destructive <tool>',
      'a destructive tool that runs without a human (repeatable; all: every one)',
      collect,
      [],
    )
    .option('--allow-path <dir>', 'path arguments must lie under one of these directories (repeatable)', collect, [])
    .option('--allow-url <prefix>', 'URL arguments must start with one of these (repeatable)', collect, [])
    .option(
      '--grant <tool>',
      "a tool in the agent's context from the start (repeatable; default all; the rest are found by search)",
      collect,
      [],
    )
    .option('--price-per-call <lf>', "lifeforce per call (default: the deployment's price)")
    .option('--price-per-second <lf>', "lifeforce per second of a call (default: the deployment's price)")
    .option('--json', 'print JSON')
    .action(async function (this: Command, agentId: string, name: string, command: string[], o: AddOptions) {
      if (command.length > 0 === (o.url !== undefined))
        this.error('mindloop tools mcp add: give either -- <command…> (stdio) or --url <url> (http)', { exitCode: 2 });
      if (o.url !== undefined && !/^https?:\/\/[^\s]+$/.test(o.url))
        this.error(`mindloop tools mcp add: --url ${o.url} is not an http(s) URL`, { exitCode: 2 });
      if (o.url === undefined && Object.keys(o.headerEnv).length > 0)
        this.error('mindloop tools mcp add: --header-env is for an http server', { exitCode: 2 });
      if (o.sandbox && o.url !== undefined)
        this.error(
          'mindloop tools mcp add: --sandbox runs a stdio server (a command) in a container; ' +
            'an http server runs elsewhere and is reached at its URL',
          { exitCode: 2 },
        );
      if (o.network && !o.sandbox)
        this.error('mindloop tools mcp add: --network is for a --sandbox server', { exitCode: 2 });
      const policy = policyOf(name, o);
      if (!policy.ok) this.error(`mindloop tools mcp add: ${policy.error}`, { exitCode: 2 });
      const { checkMcpSandbox, probeMcpServer } = await import('../activities/mcp/pool.js');
      const { insertMcpServer } = await import('../db/queries/mcp.js');
      const entry = o.url
        ? { name, transport: 'http' as const, url: o.url, headerEnv: o.headerEnv }
        : {
            name,
            transport: 'stdio' as const,
            command: command[0]!,
            args: command.slice(1),
            envNames: o.env,
            sandbox: o.sandbox ? { network: o.network === true } : null,
          };
      const row = await withDb(async (db) => {
        await requireAgent(db, agentId);
        // Docker first: without an engine and the image a sandboxed server cannot start, and the reason is plain.
        if (o.sandbox) await checkMcpSandbox(secretSource());
        // Started once here, stopped at once: the worker starts its own on first use.
        const listed = await probeMcpServer(entry, { env: secretSource(), agentId });
        const server = await insertMcpServer(
          db,
          { agentId, source: 'person', policy: policy.policy, ...entry },
          listed,
        );
        return { server, listed };
      });
      if (o.json) return out(JSON.stringify({ ...row.server, tools: row.listed }, null, 2));
      const where = o.sandbox ? ` (in the sandbox, ${o.network ? 'with' : 'without'} network)` : '';
      out(`added MCP server ${name} to ${agentId}${where}: ${row.listed.length} tools`);
      for (const t of row.listed) out(`  ${t.name}${flags(t.annotations)} — ${oneLine(t.description, 100)}`);
    });

  mcp
    .command('list')
    .description("the agent's MCP servers and their tools")
    .argument('<agent>', 'the agent', agentIdArg)
    .option('--json', 'print JSON')
    .action(async (agentId: string, o: { json?: boolean }) => {
      const { mcpServersOf } = await import('../db/queries/mcp.js');
      const servers = await withDb(async (db) => {
        await requireAgent(db, agentId);
        return mcpServersOf(db, agentId);
      });
      if (o.json) return out(JSON.stringify(servers, null, 2));
      if (servers.length === 0) return out(`${agentId} has no MCP servers (tools mcp add)`);
      const rows = servers.map((s) => [
        s.name,
        s.transport,
        s.enabled ? 'enabled' : 'disabled',
        s.source,
        String(s.tools.length),
        healthText(s),
        s.sandbox ? (s.sandbox.network ? 'with network' : 'no network') : '-',
        oneLine(s.transport === 'stdio' ? [s.command ?? '', ...s.args].join(' ') : (s.url ?? ''), 80),
      ]);
      out(table(['server', 'transport', 'state', 'source', 'tools', 'health', 'sandbox', 'runs'], rows, '').join('\n'));
      for (const s of servers) {
        out(`\n${s.name}:${policyText(s.policy)}`);
        for (const t of s.tools) out(`  ${t.name}${flags(t.annotations)} — ${oneLine(t.description, 100)}`);
      }
    });

  mcp
    .command('remove')
    .description('take an MCP server (and its tools) from an agent')
    .argument('<agent>', 'the agent', agentIdArg)
    .argument('<name>', 'the server', schemaArg('server name', mcpServerNameSchema))
    .action(async (agentId: string, name: string) => {
      const { deleteMcpServer } = await import('../db/queries/mcp.js');
      const gone = await withDb((db) => deleteMcpServer(db, agentId, name));
      if (!gone) throw new Error(`${agentId} has no MCP server named ${name}`);
      out(`removed MCP server ${name} from ${agentId}`);
    });
  registerMcpGrantCommands(mcp);
}

/** What a server's entry allows beyond its annotations, in one line (empty: the defaults). */
function policyText(p: McpServerPolicy): string {
  const parts = [
    p.allowDestructive === true ? 'every destructive tool runs without a human' : '',
    Array.isArray(p.allowDestructive) ? `runs without a human: ${p.allowDestructive.join(', ')}` : '',
    p.allowPaths ? `paths under ${p.allowPaths.join(', ')}` : '',
    p.allowUrls ? `URLs under ${p.allowUrls.join(', ')}` : '',
    Array.isArray(p.grant) ? `granted at start: ${p.grant.join(', ')}` : '',
    p.pricePerCall !== undefined ? `${p.pricePerCall} LF a call` : '',
    p.pricePerSecond !== undefined ? `${p.pricePerSecond} LF a second` : '',
  ].filter(Boolean);
  return parts.length ? ` (${parts.join('; ')})` : '';
}

/** What the workers last saw of the server's process. */
function healthText(s: { health: string | null; restarts: number; lastError: string | null }): string {
  if (s.health === null) return 'not started';
  const restarts = s.restarts ? ` (restarted ${s.restarts}×)` : '';
  return s.health === 'up' ? `up${restarts}` : `down${restarts}: ${oneLine(s.lastError ?? '', 60)}`;
}

/** The annotations that drive policy, as a short tag list. */
function flags(a: {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}) {
  const f = [
    a.readOnlyHint ? 'read-only' : '',
    a.destructiveHint ? 'destructive' : '',
    a.idempotentHint ? 'idempotent' : '',
    a.openWorldHint ? 'open-world' : '',
  ].filter(Boolean);
  return f.length ? ` [${f.join(', ')}]` : '';
}
