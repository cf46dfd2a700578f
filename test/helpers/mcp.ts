/**
 * MCP clients for the bridge tests: the SDK's own Client over streamable HTTP or over stdio (the
 * `mindloop mcp` process), and unwrapping of tool results — a success's structured content, a
 * refusal's text — that fails the test when the result is of the other kind.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { join } from 'node:path';
import { repoRoot } from './spawn.js';

export const mindloopBin = join(repoRoot, 'bin', 'mindloop.mjs');

/** The tools every bridge offers. */
export const bridgeToolNames = [
  'agent_status',
  'approve',
  'heartbeat',
  'list_agents',
  'publish',
  'recent_replies',
  'reject',
  'request',
  'send_note',
  'subscribe',
  'unsubscribe',
];

export interface Connected {
  client: Client;
  /** The transport's errors (a line on stdout that is not MCP shows up here). */
  errors: Error[];
  close(): Promise<void>;
}

function track(client: Client): Error[] {
  const errors: Error[] = [];
  client.onerror = (e) => void errors.push(e);
  return errors;
}

/** An SDK client on the bridge at `url` (a bearer token when given). */
export async function httpClient(
  url: string,
  token?: string,
): Promise<Connected & { transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(
    new URL(url),
    token ? { requestInit: { headers: { Authorization: `Bearer ${token}` } } } : undefined,
  );
  const client = new Client({ name: 'mindloop-test', version: '1.0.0' });
  const errors = track(client);
  await client.connect(transport);
  return {
    client,
    transport,
    errors,
    async close() {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    },
  };
}

/** An SDK client on `mindloop mcp <args>` spawned over stdio; its stderr is collected in `stderr()`. */
export async function stdioClient(
  args: string[],
  env: Record<string, string>,
): Promise<Connected & { stderr: () => string; pid: () => number | null }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [mindloopBin, 'mcp', ...args],
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    cwd: repoRoot,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const client = new Client({ name: 'mindloop-test', version: '1.0.0' });
  const errors = track(client);
  await client.connect(transport);
  return { client, errors, stderr: () => stderr, pid: () => transport.pid, close: () => client.close() };
}

export function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return client.callTool({ name, arguments: args }) as Promise<CallToolResult>;
}

function text(r: CallToolResult): string {
  return r.content.map((c) => (c.type === 'text' ? c.text : `[${c.type}]`)).join('\n');
}

/** The structured content of a successful call; fails with the error text otherwise. */
export function ok<T = Record<string, any>>(r: CallToolResult): T {
  if (r.isError) throw new Error(`expected success, got the tool error: ${text(r)}`);
  return r.structuredContent as T;
}

/** The text of a refused call; fails when the call succeeded. */
export function refused(r: CallToolResult): string {
  if (!r.isError) throw new Error(`expected a tool error, got: ${text(r)}`);
  return text(r);
}
