/**
 * The bridge over streamable HTTP (runtime/mcp/http.ts) with the SDK's own Client, on the real
 * NATS: the tool list; publish seen by a bus subscriber; request to the echo agent and its
 * no_responders / timeout errors; subscribe → heartbeat → unsubscribe; refusals that name their
 * reason and lose nothing (allow-list, schema registry, hostile subjects, bad arguments); the
 * buffer overflow with its BufferDrop on the bus; one buffer per session, cleaned up on close;
 * the token (401 without or with a wrong one), no non-loopback bind without a token, and the
 * Host / Origin checks against DNS rebinding.
 */
import { request as httpRequest } from 'node:http';
import type { Subscription } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Bus, BusMessage } from '../../runtime/bus.js';
import { startEchoAgent } from '../../runtime/echo-agent.js';
import { startHttpBridge, type HttpBridge } from '../../runtime/mcp/http.js';
import { bridgeToolNames, call, httpClient, ok, refused, type Connected } from '../helpers/mcp.js';
import { cleanupBus, testBus, testRoot, until } from '../helpers/nats.js';

const root = testRoot('mcp_http');
let observer: Bus;
let bridgeBus: Bus;
let http: HttpBridge;
let echo: Subscription;
const clients: Connected[] = [];

beforeAll(async () => {
  [observer, bridgeBus] = await Promise.all([testBus(root), testBus(root)]);
  echo = startEchoAgent(observer);
  await observer.flush();
  http = await startHttpBridge({ bus: bridgeBus, port: 0, log: () => undefined });
});
afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await http?.close();
  echo?.unsubscribe();
  await cleanupBus(bridgeBus);
  await cleanupBus(observer);
});

async function connect(url = http.url, token?: string) {
  const c = await httpClient(url, token);
  clients.push(c);
  return c;
}

/** Messages of `type` on `subject`, as an observer on the bus sees them. */
async function watch(subject: string, type?: string): Promise<{ got: BusMessage[]; stop: () => void }> {
  const got: BusMessage[] = [];
  const sub = observer.subscribe(subject, (m) => void got.push(m), type ? { types: [type] } : {});
  await observer.flush();
  return { got, stop: () => sub.unsubscribe() };
}

/** Heartbeats until `n` messages came in (each heartbeat drains), then their union. */
async function collect(c: Connected, n: number): Promise<Array<Record<string, any>>> {
  const all: Array<Record<string, any>> = [];
  await until(async () => {
    all.push(...ok(await call(c.client, 'heartbeat')).messages);
    return all.length >= n;
  }, `${n} buffered messages`);
  return all;
}

describe('MCP bridge over streamable HTTP', () => {
  it('lists its tools, each with a description and an input schema', async () => {
    const c = await connect();
    const { tools } = await c.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(bridgeToolNames);
    for (const t of tools) {
      expect(t.description?.length).toBeGreaterThan(40);
      expect(t.inputSchema.type).toBe('object');
    }
    expect(tools.find((t) => t.name === 'publish')!.inputSchema.required).toEqual([
      'subject',
      'message_type',
      'payload',
    ]);
    expect(c.errors).toEqual([]);
  });

  it('publish: a subscriber on the bus gets the message, relative or absolute subject', async () => {
    const c = await connect();
    const w = await watch(`${root}.dev.request.*`, 'EchoRequest');
    const a = ok(
      await call(c.client, 'publish', {
        subject: 'dev.request.mcp',
        message_type: 'EchoRequest',
        payload: { ping: 'relative' },
      }),
    );
    const b = ok(
      await call(c.client, 'publish', {
        subject: `${root}.dev.request.mcp`,
        message_type: 'EchoRequest',
        payload: { ping: 'absolute' },
      }),
    );
    expect(a.message_id).toBe(a.header.message_id);
    expect(a).toMatchObject({
      subject: `${root}.dev.request.mcp`,
      flushed: true,
      header: { message_type: 'EchoRequest', schema: { generation: 1, version: '1.0' } },
    });
    await until(() => w.got.length === 2, 'both messages');
    expect(w.got.map((m) => m.payload)).toEqual([{ ping: 'relative' }, { ping: 'absolute' }]);
    expect(w.got.map((m) => m.header.message_id)).toEqual([a.header.message_id, b.header.message_id]);
    w.stop();
  });

  it('request: the echo agent answers; nobody listening is no_responders; silence is timeout', async () => {
    const c = await connect();
    const r = ok(
      await call(c.client, 'request', {
        subject: 'dev.request.echo',
        message_type: 'EchoRequest',
        payload: { ping: 'over mcp' },
        expect: 'EchoResponse',
      }),
    );
    expect(r.answer).toMatchObject({
      subject: `${root}.dev.request.echo`,
      payload: { pong: 'over mcp', agent: 'echo-v1' },
      header: { message_type: 'EchoResponse', in_reply_to: expect.any(String) },
    });
    expect(
      refused(
        await call(c.client, 'request', {
          subject: 'dev.request.nobody',
          message_type: 'EchoRequest',
          payload: { ping: 'x' },
          expect: 'EchoResponse',
        }),
      ),
    ).toMatch(/^request failed \(no_responders\): nobody answers on/);
    const mute = observer.nc.subscribe(`${root}.dev.request.mute`);
    await observer.flush();
    const started = Date.now();
    expect(
      refused(
        await call(c.client, 'request', {
          subject: 'dev.request.mute',
          message_type: 'EchoRequest',
          payload: { ping: 'x' },
          expect: 'EchoResponse',
          timeout_ms: 300,
        }),
      ),
    ).toMatch(/^request failed \(timeout\): no answer .* within 300 ms/);
    expect(Date.now() - started).toBeLessThan(5000);
    mute.unsubscribe();
    expect(
      refused(
        await call(c.client, 'request', {
          subject: 'dev.request.echo',
          message_type: 'EchoRequest',
          payload: { ping: 'x' },
          expect: 'NoSuchType',
        }),
      ),
    ).toMatch(/unknown_type.*NoSuchType/);
    expect(
      refused(
        await call(c.client, 'request', {
          subject: 'dev.request.echo',
          message_type: 'EchoRequest',
          payload: { ping: 'x' },
          expect: 'EchoResponse',
          timeout_ms: 60_001,
        }),
      ),
    ).toMatch(/Input validation error/);
  });

  it('subscribe → the heartbeat hands over what arrived (refused messages counted, not buffered); unsubscribe stops it', async () => {
    const c = await connect();
    const s = ok(await call(c.client, 'subscribe', { subject: 'high.agent.*.reply' }));
    expect(s).toMatchObject({
      subscription: 'sub-1',
      subject: `${root}.high.agent.*.reply`,
      already_subscribed: false,
    });
    expect(ok(await call(c.client, 'subscribe', { subject: `${root}.high.agent.*.reply` }))).toMatchObject({
      subscription: 'sub-1',
      already_subscribed: true,
    });
    ok(await call(c.client, 'subscribe', { subject: 'dev.sentinel' }));
    for (let tick = 1; tick <= 3; tick++)
      observer.publish(observer.subjects.agentEvent('a.1', 'reply'), 'AgentReply', {
        agent_id: 'a.1',
        tick,
        summary: `tick ${tick}`,
        commands: 0,
        confidence: null,
      });
    observer.nc.publish(`${root}.high.agent.x.reply`, JSON.stringify({ header: { nope: true }, payload: {} }));
    await observer.flush();
    const got = await collect(c, 3);
    expect(got.map((m) => m.payload.tick)).toEqual([1, 2, 3]);
    expect(got[0]).toMatchObject({
      subject: `${root}.high.agent.a~2E1.reply`,
      header: { message_type: 'AgentReply' },
      received_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    const hb = ok(await call(c.client, 'heartbeat'));
    expect(hb.bus).toMatchObject({
      connected: true,
      root,
      rejections: { session: 1, session_by_reason: { bad_header: 1 } },
    });
    expect(hb.subscriptions).toEqual([
      { id: 'sub-1', subject: `${root}.high.agent.*.reply` },
      { id: 'sub-2', subject: `${root}.dev.sentinel` },
    ]);

    expect(ok(await call(c.client, 'unsubscribe', { subscription: 'sub-1' }))).toMatchObject({
      unsubscribed: 'sub-1',
      subject: `${root}.high.agent.*.reply`,
    });
    observer.publish(observer.subjects.agentEvent('a.1', 'reply'), 'AgentReply', {
      agent_id: 'a.1',
      tick: 4,
      summary: 'unheard',
      commands: 0,
      confidence: null,
    });
    observer.publish(`${root}.dev.sentinel`, 'EchoRequest', { ping: 'after' });
    const after = await collect(c, 1);
    // The sentinel was published after the reply, on the same connection: had the reply been heard, it would be here first.
    expect(after.map((m) => m.subject)).toEqual([`${root}.dev.sentinel`]);
    expect(refused(await call(c.client, 'unsubscribe', {}))).toMatch(
      /name the subscription to stop: .*sub-2 \(.*dev\.sentinel\)/,
    );
    expect(ok(await call(c.client, 'unsubscribe', { subject: 'dev.sentinel' }))).toMatchObject({
      unsubscribed: 'sub-2',
    });
    expect(refused(await call(c.client, 'unsubscribe', { subscription: 'sub-1' }))).toMatch(
      /no subscription "sub-1" in this session; it holds: none/,
    );
  });

  it('refusals name their reason and lose nothing: allow-list, schema registry, hostile subjects, bad arguments', async () => {
    const c = await connect();
    ok(await call(c.client, 'subscribe', { subject: 'dev.kept' }));
    observer.publish(`${root}.dev.kept`, 'EchoRequest', { ping: 'kept 1' });
    observer.publish(`${root}.dev.kept`, 'EchoRequest', { ping: 'kept 2' });
    const commands = await watch(`${root}.command.>`);

    const note = { subject: 'command.agent.x.note', message_type: 'AgentNote', payload: { text: 'sneaky' } };
    expect(refused(await call(c.client, 'publish', note))).toMatch(
      /^refused: publishing to .*command\.agent\.x\.note is not allowed: .*allow-list \(dev\.>, low\.>, high\.>, staging\.>\)/,
    );
    expect(refused(await call(c.client, 'request', { ...note, expect: 'EchoResponse' }))).toMatch(/not allowed/);
    expect(
      refused(
        await call(c.client, 'publish', {
          subject: 'meta.health.buffer_drop',
          message_type: 'BufferDrop',
          payload: { buffer: 'x', capacity: 1, dropped: 1, dropped_total: 1 },
        }),
      ),
    ).toMatch(/not allowed/);

    expect(
      refused(
        await call(c.client, 'publish', {
          subject: 'dev.request.echo',
          message_type: 'EchoRequest',
          payload: { pong: 1 },
        }),
      ),
    ).toMatch(/^refused by the schema registry \(bad_payload\): EchoRequest 1\.0: /);
    expect(
      refused(
        await call(c.client, 'publish', {
          subject: 'dev.x',
          message_type: 'AgentReply',
          payload: { agent_id: 'a', tick: 1, summary: 's', commands: 0, confidence: null },
        }),
      ),
    ).toMatch(/\(wrong_namespace\).*AgentReply travels in high, not dev/);
    expect(refused(await call(c.client, 'publish', { subject: 'dev.x', message_type: 'Nope', payload: {} }))).toMatch(
      /\(unknown_type\)/,
    );
    expect(
      refused(
        await call(c.client, 'publish', {
          subject: 'dev.x',
          message_type: 'EchoRequest',
          payload: { ping: 'x' },
          version: '1.1-alpha',
        }),
      ),
    ).toMatch(/\(unknown_version\)/);

    for (const [subject, why] of [
      ['>', /wildcard/],
      [`${root}.command.>`, /wildcard/],
      ['mindloop.command.>', /wildcard/],
      ['mindloop.command.agent.x.note', /outside the bus root/],
      ['dev.request echo', /whitespace/],
      ['$JS.API.INFO', /token "\$JS"/],
      ['other.root.dev.x', /outside the bus root/],
    ] as const) {
      expect(
        refused(await call(c.client, 'publish', { subject, message_type: 'EchoRequest', payload: { ping: 'x' } })),
      ).toMatch(why);
    }
    expect(refused(await call(c.client, 'subscribe', { subject: '$SYS.>' }))).toMatch(/token "\$SYS"/);
    expect(refused(await call(c.client, 'subscribe', { subject: 'elsewhere.>' }))).toMatch(/outside the bus root/);
    expect(refused(await call(c.client, 'subscribe', { subject: 'mindloop.command.>' }))).toMatch(
      /outside the bus root/,
    );
    expect(refused(await call(c.client, 'subscribe', { subject: 'dev. x' }))).toMatch(/whitespace/);

    expect(refused(await call(c.client, 'publish', { subject: 'dev.x', message_type: 'EchoRequest' }))).toMatch(
      /Input validation error.*payload/s,
    );
    expect(refused(await call(c.client, 'publish', { subject: 42, message_type: 'EchoRequest', payload: {} }))).toMatch(
      /Input validation error/,
    );
    expect(refused(await call(c.client, 'no_such_tool'))).toMatch(/Tool no_such_tool not found/);

    // Nothing refused went out, and what was buffered before is all still there.
    const kept = await collect(c, 2);
    expect(kept.map((m) => m.payload.ping)).toEqual(['kept 1', 'kept 2']);
    expect(commands.got).toEqual([]);
    commands.stop();
    expect(c.errors).toEqual([]);
  });

  it('overflow: 250 into a buffer of 100 → 100 handed over, 150 dropped (since and in all), one BufferDrop on the bus; the next heartbeat: 0 since, 150 in all', async () => {
    const c = await connect();
    const session = http.bridge.sessions.get(c.transport.sessionId!)!;
    const drops = await watch(observer.subjects.bufferDrop(), 'BufferDrop');
    ok(await call(c.client, 'subscribe', { subject: 'dev.flood' }));
    for (let i = 0; i < 250; i++) observer.publish(`${root}.dev.flood`, 'EchoRequest', { ping: String(i) });
    await observer.flush();
    await until(() => session.state.buffer.droppedTotal === 150, 'all 250 at the bridge');

    const first = ok(await call(c.client, 'heartbeat'));
    expect(first).toMatchObject({
      buffer_capacity: 100,
      current_count: 100,
      messages_dropped_since_last_heartbeat: 150,
      messages_dropped_total: 150,
      buffer_drop_published: true,
    });
    expect(first.messages.map((m: { payload: { ping: string } }) => m.payload.ping)).toEqual(
      Array.from({ length: 100 }, (_, i) => String(150 + i)),
    );
    expect(first.oldest_message_age_ms).toBeGreaterThanOrEqual(0);
    await until(() => drops.got.length === 1, 'the BufferDrop');
    expect(drops.got[0]!.payload).toEqual({
      buffer: `mcp-bridge:${session.id}`,
      capacity: 100,
      dropped: 150,
      dropped_total: 150,
    });

    const second = ok(await call(c.client, 'heartbeat'));
    expect(second).toMatchObject({
      current_count: 0,
      messages_dropped_since_last_heartbeat: 0,
      messages_dropped_total: 150,
      oldest_message_age_ms: null,
      buffer_drop_published: false,
      messages: [],
    });
    // A sentinel from the bridge's own connection, on the same subject: any second BufferDrop would arrive before it.
    bridgeBus.publish(bridgeBus.subjects.bufferDrop(), 'BufferDrop', {
      buffer: 'sentinel',
      capacity: 1,
      dropped: 1,
      dropped_total: 1,
    });
    await until(() => drops.got.some((m) => (m.payload as { buffer: string }).buffer === 'sentinel'), 'the sentinel');
    expect(drops.got.map((m) => (m.payload as { buffer: string }).buffer)).toEqual([
      `mcp-bridge:${session.id}`,
      'sentinel',
    ]);
    drops.stop();
  });

  it('each session has its own buffer and subscriptions; closing a session ends them', async () => {
    const a = await connect();
    const b = await connect();
    const sa = http.bridge.sessions.get(a.transport.sessionId!)!;
    // Each subscribe answers once the server holds the subscription, so the publish right after reaches both.
    for (const c of [a, b]) expect(ok(await call(c.client, 'subscribe', { subject: 'dev.shared' })).active).toBe(true);
    observer.publish(`${root}.dev.shared`, 'EchoRequest', { ping: 'one' });
    await collect(a, 1);
    expect((await collect(b, 1)).map((m) => m.payload.ping)).toEqual(['one']);
    expect(sa.state.subscriptions).toHaveLength(1);
    await a.close();
    await until(() => !http.bridge.sessions.has(sa.id), 'the session gone');
    expect(sa.state.subscriptions).toEqual([]);
    // The closed session's id is not served any more.
    const gone = await fetch(http.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-session-id': sa.id,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(gone.status).toBe(404);
    observer.publish(`${root}.dev.shared`, 'EchoRequest', { ping: 'two' });
    expect((await collect(b, 1)).map((m) => m.payload.ping)).toEqual(['two']);
  });
});

const token = 'tok-0123456789abcdef0123456789abcdef';
const initialize = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

/** A raw HTTP POST (Host and Origin as given, which fetch would not let us set). */
function rawPost(
  url: string,
  headers: Record<string, string>,
  body = initialize,
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      },
      (res) => {
        let data = '';
        res.on('data', (d: Buffer) => (data += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('MCP bridge over HTTP: who may talk to it', () => {
  it('refuses to bind a non-loopback address without a token, and a token too short to be one', async () => {
    await expect(startHttpBridge({ bus: bridgeBus, host: '0.0.0.0', port: 0 })).rejects.toThrow(
      /refusing to bind 0\.0\.0\.0 without a token/,
    );
    await expect(startHttpBridge({ bus: bridgeBus, host: '0.0.0.0', port: 0, token: 'short' })).rejects.toThrow(
      /at least 16 characters/,
    );
  });

  it('bound to 0.0.0.0 with a token: 401 without it or with a wrong one, served with it', async () => {
    const open = await startHttpBridge({ bus: bridgeBus, host: '0.0.0.0', port: 0, token, log: () => undefined });
    try {
      const url = open.url.replace('0.0.0.0', '127.0.0.1');
      const none = await rawPost(url, {});
      expect(none.status).toBe(401);
      expect(none.headers['www-authenticate']).toBe('Bearer');
      expect((await rawPost(url, { authorization: `Bearer ${token}x` })).status).toBe(401);
      expect((await rawPost(url, { authorization: token })).status).toBe(401);
      await expect(httpClient(url, 'wrong-token-0123456789')).rejects.toMatchObject({
        code: 401,
        message: expect.stringMatching(/unauthorized/),
      });
      await expect(httpClient(url)).rejects.toMatchObject({ code: 401 });
      const c = await httpClient(url, token);
      expect(ok(await call(c.client, 'heartbeat')).bus.connected).toBe(true);
      await c.close();
    } finally {
      await open.close();
    }
  });

  it('on loopback with a token set, the token is required too', async () => {
    const local = await startHttpBridge({ bus: bridgeBus, port: 0, token, log: () => undefined });
    try {
      expect((await rawPost(local.url, {})).status).toBe(401);
      const c = await httpClient(local.url, token);
      expect((await c.client.listTools()).tools).toHaveLength(bridgeToolNames.length);
      await c.close();
    } finally {
      await local.close();
    }
  });

  it('a loopback bridge answers only loopback Host and Origin names (DNS rebinding); wrong paths and sessions are refused', async () => {
    const port = new URL(http.url).port;
    const evilHost = await rawPost(http.url, { host: `evil.example:${port}` });
    expect(evilHost.status).toBe(403);
    expect(evilHost.body).toMatch(/Host evil\.example is not served here/);
    const evilOrigin = await rawPost(http.url, { origin: 'http://evil.example' });
    expect(evilOrigin.status).toBe(403);
    expect(evilOrigin.body).toMatch(/Origin http:\/\/evil\.example is not allowed/);
    const fine = await rawPost(http.url, { host: `localhost:${port}`, origin: `http://localhost:${port}` });
    expect(fine.status).toBe(200);
    expect(fine.headers['mcp-session-id']).toEqual(expect.any(String));
    expect((await rawPost(http.url.replace('/mcp', '/other'), {})).status).toBe(404);
    expect((await rawPost(http.url, {}, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }))).status).toBe(
      400,
    );
    expect((await rawPost(http.url, {}, '{not json')).status).toBe(400);
    expect((await rawPost(http.url, { 'mcp-session-id': 'no-such-session' })).status).toBe(404);
  });
});
