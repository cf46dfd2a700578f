/**
 * The bridge over streamable HTTP on `/mcp`, with sessions: an `initialize` without a session id
 * opens one (its own MCP server, subscriptions and buffer) and the answer carries its id in
 * `Mcp-Session-Id`; later requests name it; DELETE, or an hour without a request, ends it.
 *
 * Guarded in this order: the path; the Host header and the Origin (a loopback bridge answers
 * only to loopback names, so a web page cannot reach it through a DNS name rebound to
 * 127.0.0.1); the bearer token, compared in constant time. The bridge binds 127.0.0.1 unless
 * told otherwise, and any other address only with a token.
 */
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { sendJson } from '../http-json.js';
import { createBridge, type Bridge, type CreateBridgeOptions } from './server.js';

export const mcpPath = '/mcp';
export const defaultMcpHttpPort = 8790;
/** A token shorter than this is refused: it must not be guessable. */
export const minTokenLength = 16;
const maxBodyBytes = 4 * 1024 * 1024;
const loopbackNames = ['localhost', '127.0.0.1', '[::1]', '::1'];

type HttpBridgeOptions =
  (Partial<CreateBridgeOptions> & { bridge: Bridge }) | (CreateBridgeOptions & { bridge?: undefined });

export type StartHttpBridgeOptions = HttpBridgeOptions & {
  /** Default 127.0.0.1; any non-loopback address needs `token`. */
  host?: string;
  /** Default 8790; 0 picks a free port. */
  port?: number;
  /** When set, every request must carry `Authorization: Bearer <token>`. */
  token?: string;
  /** Host names (without port) accepted in Host and Origin besides the loopback names. */
  allowedHosts?: readonly string[];
  /** A session without a request for this long is closed (default 1 hour). */
  idleTimeoutMs?: number;
};

export interface HttpBridge {
  /** `http://<host>:<port>/mcp`. */
  url: string;
  bridge: Bridge;
  /** Stop listening and end every session (and the bridge, when this call made it). */
  close(): Promise<void>;
}

export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** Equal tokens, compared in time that does not depend on where they differ (or on their lengths). */
export function tokensEqual(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

function sendError(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  if (res.headersSent) return void res.end();
  sendJson(res, status, { jsonrpc: '2.0', error: { code: -32000, message }, id: null }, headers);
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBodyBytes) throw Object.assign(new Error(`request body over ${maxBodyBytes} bytes`), { status: 413 });
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw Object.assign(new Error('the body is not JSON'), { status: 400 });
  }
}

/** Why the Host or Origin header is refused, or null. `names` null: not checked (a non-loopback bind without allowedHosts). */
function originProblem(req: IncomingMessage, names: readonly string[] | null): string | null {
  if (!names) return null;
  const host = req.headers.host;
  if (!host) return 'missing Host header';
  let hostname: string;
  try {
    hostname = new URL(`http://${host}`).hostname;
  } catch {
    return `invalid Host header ${JSON.stringify(host)}`;
  }
  if (!names.includes(hostname)) return `Host ${hostname} is not served here`;
  const origin = req.headers.origin;
  if (origin === undefined) return null;
  let originHost: string;
  try {
    originHost = new URL(origin).hostname;
  } catch {
    return `invalid Origin ${JSON.stringify(origin)}`;
  }
  return names.includes(originHost) ? null : `Origin ${origin} is not allowed`;
}

/** Check the options that make a bridge reachable from elsewhere; a refusal says what to add. */
function checkExposure(host: string, token: string | undefined): void {
  if (token !== undefined && token.length < minTokenLength)
    throw new Error(`the token must be at least ${minTokenLength} characters (e.g. \`openssl rand -hex 32\`)`);
  if (!isLoopbackHost(host) && token === undefined) {
    throw new Error(
      `refusing to bind ${host} without a token: anyone who reaches it could publish on the bus and answer escalations. Give --token <secret> (or MINDLOOP_MCP_TOKEN), or bind 127.0.0.1`,
    );
  }
}

interface Live {
  transport: StreamableHTTPServerTransport;
  lastSeen: number;
}

/** Serve the bridge over streamable HTTP; resolves once it listens. */
export async function startHttpBridge(o: StartHttpBridgeOptions): Promise<HttpBridge> {
  const host = o.host ?? '127.0.0.1';
  const token = o.token;
  checkExposure(host, token);
  const ownBridge = !o.bridge;
  const bridge = o.bridge ?? createBridge(o as CreateBridgeOptions);
  const log = o.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const names: readonly string[] | null =
    isLoopbackHost(host) || o.allowedHosts?.length
      ? [...loopbackNames, ...(isLoopbackHost(host) ? [] : [host]), ...(o.allowedHosts ?? [])]
      : null;
  const live = new Map<string, Live>();
  const idleMs = o.idleTimeoutMs ?? 3_600_000;

  async function open(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const id = randomUUID();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => id,
      onsessioninitialized: () => void live.set(id, { transport, lastSeen: Date.now() }),
    });
    transport.onclose = () => void live.delete(id);
    await bridge.connect(transport, { sessionId: id });
    await transport.handleRequest(req, res, body);
    // An initialize the transport refused opened no session: its server goes too.
    if (!live.has(id)) await transport.close();
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://bridge').pathname;
    if (path !== mcpPath) return sendError(res, 404, `not found: the MCP endpoint is ${mcpPath}`);
    const refused = originProblem(req, names);
    if (refused) return sendError(res, 403, refused);
    if (token !== undefined) {
      const auth = req.headers.authorization ?? '';
      const given = /^Bearer (.+)$/i.exec(auth)?.[1] ?? '';
      if (!tokensEqual(given, token))
        return sendError(res, 401, 'unauthorized: send Authorization: Bearer <token>', {
          'www-authenticate': 'Bearer',
        });
    }
    const sessionId = req.headers['mcp-session-id'];
    if (typeof sessionId === 'string') {
      const s = live.get(sessionId);
      if (!s) return sendError(res, 404, 'session not found (it was closed or never opened): initialize a new one');
      s.lastSeen = Date.now();
      return s.transport.handleRequest(req, res);
    }
    if (req.method !== 'POST')
      return sendError(res, 400, 'no session: open one with an initialize request (POST, no Mcp-Session-Id header)');
    const body = await readJson(req);
    if (!(isInitializeRequest(body) || (Array.isArray(body) && body.some((m) => isInitializeRequest(m))))) {
      return sendError(res, 400, 'no session: the first request must be initialize (without an Mcp-Session-Id header)');
    }
    return open(req, res, body);
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      const status = (err as { status?: number }).status ?? 500;
      if (status === 500) log(`mcp bridge: HTTP ${req.method} ${req.url}: ${(err as Error).message}`);
      sendError(res, status, (err as Error).message);
    });
  });
  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const [id, s] of live)
        if (now - s.lastSeen > idleMs)
          void s.transport
            .close()
            .then(() => log(`mcp bridge: session ${id} closed after ${Math.round(idleMs / 1000)} s without a request`));
    },
    Math.min(60_000, idleMs),
  );
  sweep.unref();

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? defaultMcpHttpPort, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const shownHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shownHost}:${port}${mcpPath}`,
    bridge,
    async close() {
      clearInterval(sweep);
      await Promise.allSettled([...live.values()].map((s) => s.transport.close()));
      live.clear();
      if (ownBridge) await bridge.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
