/**
 * An agent's MCP servers as its file states them, and the rules a server's entry adds to what
 * the server's own annotations say:
 *
 *   - a destructive tool (MCP's defaults: destructive unless `readOnlyHint` or
 *     `destructiveHint: false`) waits for a human unless the entry allows it (`allowDestructive`);
 *   - path arguments must lie under `allowPaths`, URL arguments must start with one of
 *     `allowUrls`, when the entry gives those lists: a call outside them is refused, not held;
 *   - a price per call and per second replaces the deployment's for that server's calls;
 *   - `grant` names the tools the agent knows from the start; the rest it finds by search.
 *
 * Pure: no I/O. Paths are compared as POSIX paths after resolving `.` and `..` against a base
 * directory (the worker's); a symbolic link is the server's to refuse.
 */
import { z } from 'zod';
import type { McpServerPolicy, McpServerSandbox, McpToolAnnotations } from '../db/schema/mcp.js';

export const mcpServerNameSchema = z
  .string()
  .trim()
  .regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'a server name: a-z, 0-9, _ and -, at most 64 characters');

const envVarName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'the NAME of an environment variable (letters, digits, _), never its value');
const headerName = /^[A-Za-z0-9-]{1,100}$/;
const httpUrl = z
  .string()
  .trim()
  .regex(/^https?:\/\/\S+$/, 'an http(s) URL');
const toolName = z.string().trim().min(1).max(128);
const price = z.number().min(0).max(1_000_000);

const emptyList = <T>(v: T[] | undefined) => (v?.length ? v : undefined);
const emptyRecord = <T>(v: Record<string, T> | undefined) => (v && Object.keys(v).length ? v : undefined);

/** One MCP server in an agent file (`tools.mcp`): stdio (`command`) or streamable HTTP (`url`). */
export const mcpServerEntrySchema = z
  .strictObject({
    name: mcpServerNameSchema,
    /** stdio: the program and its arguments (one string: a program without arguments). */
    command: z
      .preprocess(
        (v) => (typeof v === 'string' ? [v] : v),
        z.array(z.string().min(1).max(4096), { error: 'the program and its arguments: a list of strings' }),
      )
      .pipe(z.array(z.string()).min(1).max(100))
      .optional(),
    /** http: the endpoint. */
    url: httpUrl.optional(),
    /** stdio: the worker's variables the server receives, by name (PATH always). */
    env: z.array(envVarName).max(50).optional().transform(emptyList),
    /** http: header → the worker's variable holding its value. */
    headers: z.record(z.string().regex(headerName, 'a header name'), envVarName).optional().transform(emptyRecord),
    enabled: z.boolean().default(true),
    /** stdio: run the server inside the sandbox container (`true`: no network). */
    sandbox: z
      .union([z.boolean(), z.strictObject({ network: z.boolean().default(false) })])
      .optional()
      .transform((v): McpServerSandbox | undefined => (v === true ? { network: false } : v === false ? undefined : v)),
    /** Destructive tools that run without a human: `true` for all, or by name. */
    allowDestructive: z
      .union([z.boolean(), z.array(toolName).max(200)])
      .optional()
      .transform((v) => (v === false || (Array.isArray(v) && v.length === 0) ? undefined : v)),
    /** Path arguments must lie under one of these directories. */
    allowPaths: z.array(z.string().trim().min(1).max(1000)).max(50).optional(),
    /** URL arguments must start with one of these. */
    allowUrls: z.array(httpUrl).max(50).optional(),
    /** The tools the agent knows from the start (default all); the rest are found with discover_tools search. */
    grant: z.union([z.literal('all'), z.array(toolName).max(500)]).optional(),
    /** Lifeforce per call and per second of a call (default: the deployment's prices). */
    price: z.strictObject({ perCall: price.optional(), perSecond: price.optional() }).optional(),
  })
  .superRefine((e, ctx) => {
    if ((e.command === undefined) === (e.url === undefined))
      ctx.addIssue({ code: 'custom', path: [], message: 'give either command (stdio) or url (streamable HTTP)' });
    if (e.url !== undefined && e.env !== undefined)
      ctx.addIssue({ code: 'custom', path: ['env'], message: 'env is for a stdio server (command); use headers' });
    if (e.command !== undefined && e.headers !== undefined)
      ctx.addIssue({ code: 'custom', path: ['headers'], message: 'headers are for an http server (url)' });
    if (e.url !== undefined && e.sandbox !== undefined)
      ctx.addIssue({ code: 'custom', path: ['sandbox'], message: 'only a stdio server (command) runs in the sandbox' });
  });

export type McpServerEntry = z.output<typeof mcpServerEntrySchema>;

/** What an `mcp_servers` row holds of an entry (besides the agent and the source). */
export interface McpServerRowValues {
  name: string;
  transport: 'stdio' | 'http';
  command: string | null;
  args: string[];
  url: string | null;
  envNames: string[];
  headerEnv: Record<string, string>;
  enabled: boolean;
  policy: McpServerPolicy;
  sandbox: McpServerSandbox | null;
}

/** An entry as the row it becomes. */
export function rowOfEntry(e: McpServerEntry): McpServerRowValues {
  const policy: McpServerPolicy = {};
  if (e.allowDestructive !== undefined) policy.allowDestructive = e.allowDestructive;
  if (e.allowPaths !== undefined) policy.allowPaths = e.allowPaths;
  if (e.allowUrls !== undefined) policy.allowUrls = e.allowUrls;
  if (e.grant !== undefined) policy.grant = e.grant;
  if (e.price?.perCall !== undefined) policy.pricePerCall = e.price.perCall;
  if (e.price?.perSecond !== undefined) policy.pricePerSecond = e.price.perSecond;
  return {
    name: e.name,
    transport: e.command ? 'stdio' : 'http',
    command: e.command?.[0] ?? null,
    args: e.command?.slice(1) ?? [],
    url: e.url ?? null,
    envNames: e.env ?? [],
    headerEnv: e.headers ?? {},
    enabled: e.enabled,
    policy,
    sandbox: e.sandbox ?? null,
  };
}

/** A server's own prices as its entry states them (`{}`: the deployment's). */
export function entryPrice(p: McpServerPolicy): { perCall?: number; perSecond?: number } {
  return {
    ...(p.pricePerCall !== undefined ? { perCall: p.pricePerCall } : {}),
    ...(p.pricePerSecond !== undefined ? { perSecond: p.pricePerSecond } : {}),
  };
}

/** A row as the entry that states it (the canonical form: what an export writes). */
export function entryOfRow(r: McpServerRowValues): McpServerEntry {
  const p = r.policy;
  const own = entryPrice(p);
  const price = Object.keys(own).length ? own : undefined;
  const e: Record<string, unknown> = {
    name: r.name,
    command: r.transport === 'stdio' ? [r.command ?? '', ...r.args] : undefined,
    url: r.transport === 'http' ? (r.url ?? undefined) : undefined,
    env: r.envNames.length ? [...r.envNames] : undefined,
    headers: Object.keys(r.headerEnv).length ? { ...r.headerEnv } : undefined,
    enabled: r.enabled,
    sandbox: r.sandbox ? { network: r.sandbox.network === true } : undefined,
    allowDestructive: p.allowDestructive === false ? undefined : p.allowDestructive,
    allowPaths: p.allowPaths,
    allowUrls: p.allowUrls,
    grant: p.grant,
    price,
  };
  for (const k of Object.keys(e)) if (e[k] === undefined) delete e[k];
  return e as McpServerEntry;
}

/** Whether two entries start the same process (or reach the same endpoint): else the server is listed again. */
export function sameConnection(a: McpServerRowValues, b: McpServerRowValues): boolean {
  const key = (r: McpServerRowValues) =>
    JSON.stringify([r.transport, r.command, r.args, r.url, r.envNames, r.headerEnv, r.sandbox]);
  return key(a) === key(b);
}

// ---- the rules ----------------------------------------------------------------------------------

/**
 * Destructive unless the server says otherwise: MCP's defaults are readOnlyHint false and
 * destructiveHint true, so a tool without annotations counts as destructive.
 */
export function isDestructiveTool(a: McpToolAnnotations): boolean {
  return a.readOnlyHint !== true && a.destructiveHint !== false;
}

/** Whether a call of this tool waits for a human: destructive, and its server's entry does not allow it. */
export function heldForHuman(tool: string, a: McpToolAnnotations, policy: McpServerPolicy): boolean {
  if (!isDestructiveTool(a)) return false;
  const allow = policy.allowDestructive;
  return !(allow === true || (Array.isArray(allow) && allow.includes(tool)));
}

/** Argument names that hold a path (`path`, `paths`, `source`, `destination`, `file_path`, `dir`, …). */
const pathKey =
  /(^|_|-)(path|paths|file|files|filename|filepath|dir|directory|directories|folder|source|destination|root|cwd)$/i;
const urlValue = /^[a-z][a-z0-9+.-]*:\/\//i;

/** Every string under `value` with the argument name it sits under (arrays keep their name). */
function stringArgs(value: unknown, key: string, out: Array<{ key: string; value: string }>, depth = 0) {
  if (depth > 6 || out.length > 500) return out;
  if (typeof value === 'string') out.push({ key, value });
  else if (Array.isArray(value)) for (const v of value) stringArgs(v, key, out, depth + 1);
  else if (value && typeof value === 'object')
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) stringArgs(v, k, out, depth + 1);
  return out;
}

/** A POSIX path made absolute against `base`, with `.`, `..` and repeated slashes resolved. */
export function resolvePosix(base: string, p: string): string {
  const parts: string[] = [];
  for (const part of `${p.startsWith('/') ? '' : `${base}/`}${p}`.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return `/${parts.join('/')}`;
}

/** Whether `p` (resolved against `base`) lies under `dir` (resolved against `base`). */
export function pathWithin(p: string, dir: string, base: string): boolean {
  const target = resolvePosix(base, p);
  const root = resolvePosix(base, dir);
  return target === root || target.startsWith(root.endsWith('/') ? root : `${root}/`);
}

/**
 * Why the call's arguments break its server's allow-lists, or null: a path argument outside
 * `allowPaths`, a URL outside `allowUrls` (any string argument that is a URL, whatever its name;
 * a `file://` URL is read as its path).
 */
export function argumentViolation(policy: McpServerPolicy, args: Record<string, unknown>, base: string): string | null {
  const strings = stringArgs(args, '', []);
  if (policy.allowUrls)
    for (const s of strings) {
      if (!urlValue.test(s.value) || /^file:/i.test(s.value)) continue;
      if (!policy.allowUrls.some((u) => s.value.startsWith(u)))
        return `argument ${s.key || '(value)'}: ${clip(s.value)} is not under the allowed URLs (${policy.allowUrls.join(', ')})`;
    }
  if (policy.allowPaths)
    for (const s of strings) {
      const filePath = /^file:\/\//i.test(s.value) ? decodeFileUrl(s.value) : pathKey.test(s.key) ? s.value : null;
      if (filePath === null || filePath === '') continue;
      if (!policy.allowPaths.some((d) => pathWithin(filePath, d, base)))
        return `argument ${s.key}: ${clip(s.value)} is outside the allowed paths (${policy.allowPaths.join(', ')})`;
    }
  return null;
}

function decodeFileUrl(u: string): string {
  try {
    return decodeURIComponent(new URL(u).pathname);
  } catch {
    return u.replace(/^file:\/\//i, '');
  }
}

const clip = (s: string) => JSON.stringify(s.length > 120 ? `${s.slice(0, 119)}…` : s);

/** The prices of one server's calls: its entry's, else the deployment's. */
export function serverPrices<T extends { lfPerMcpCall: number; lfPerMcpSecond: number }>(
  prices: T,
  policy: McpServerPolicy,
): T {
  return {
    ...prices,
    lfPerMcpCall: policy.pricePerCall ?? prices.lfPerMcpCall,
    lfPerMcpSecond: policy.pricePerSecond ?? prices.lfPerMcpSecond,
  };
}

/** The tools the server's entry grants from the start: `all` (no `grant`, or `grant: all`) or these names. */
export function grantedNames(policy: McpServerPolicy): 'all' | readonly string[] {
  return policy.grant === undefined ? 'all' : policy.grant;
}

/** Whether the server's entry grants this tool from the start (no `grant`: every tool). */
export function grantedAtStart(policy: McpServerPolicy, tool: string): boolean {
  const names = grantedNames(policy);
  return names === 'all' || names.includes(tool);
}
