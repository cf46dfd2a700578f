/**
 * MCP servers over streamable HTTP, the server being Mindloop's own bridge (runtime/mcp/http.ts)
 * behind a bearer token: the pool's probe lists its tools when `--header-env` supplies the token
 * from the worker's environment, and a server that refuses the request (no token), a variable
 * that is not set, and a URL where nothing listens are clear errors.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeMcpServer } from '../../activities/mcp/pool.js';
import type { Bus } from '../../runtime/bus.js';
import { startHttpBridge, type HttpBridge } from '../../runtime/mcp/http.js';
import { freePort } from '../helpers/env.js';
import { cleanupBus, testBus, testRoot } from '../helpers/nats.js';

const token = 'a-token-long-enough-for-the-bridge';
let bus: Bus;
let http: HttpBridge;

beforeAll(async () => {
  bus = await testBus(testRoot('mcp_tools_http'));
  http = await startHttpBridge({ bus, port: 0, token, log: () => undefined });
});
afterAll(async () => {
  await http?.close();
  await cleanupBus(bus);
});

const spec = (url: string, headerEnv: Record<string, string> = { Authorization: 'BRIDGE_AUTH' }) => ({
  name: 'bridge',
  transport: 'http' as const,
  url,
  headerEnv,
});

describe('an MCP server over streamable HTTP', () => {
  it('lists its tools with the header its entry names, read from the environment', async () => {
    const tools = await probeMcpServer(spec(http.url), { env: { BRIDGE_AUTH: `Bearer ${token}` } });
    expect(tools.map((t) => t.name)).toContain('heartbeat');
    expect(tools.every((t) => t.inputSchema.type === 'object')).toBe(true);
  });

  it('refuses, clearly: no token, a variable not set, nothing listening', async () => {
    await expect(probeMcpServer(spec(http.url, {}), { env: {} })).rejects.toThrow(
      /server bridge at http:\/\/127\.0\.0\.1:\d+\/mcp did not finish MCP's handshake: .*unauthorized/,
    );
    await expect(probeMcpServer(spec(http.url), { env: {} })).rejects.toThrow(
      /header Authorization comes from BRIDGE_AUTH, which is not set/,
    );
    const nobody = `http://127.0.0.1:${await freePort()}/mcp`;
    await expect(
      probeMcpServer(spec(nobody), {
        env: { BRIDGE_AUTH: 'x' },
        timeouts: { connectMs: 5_000, listMs: 5_000 },
      }),
    ).rejects.toThrow(/server bridge at .* did not finish MCP's handshake: fetch failed/);
  });
});
