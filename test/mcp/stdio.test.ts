/**
 * `mindloop mcp` as a process, driven by real MCP clients: the SDK's Client over stdio (tools,
 * publish seen on the bus, the echo round trip, subscribe / heartbeat with --buffer, list_agents
 * from Postgres); stdout carrying nothing but MCP; the inspector CLI as an independent client;
 * a bridge started with no bus that says how to get one, still serves the Mindloop tools, and
 * connects once a NATS server appears; bad flags refused with exit 2; and `--http` with a token.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agents } from '../../db/schema/index.js';
import type { Bus, BusMessage } from '../../runtime/bus.js';
import { startEchoAgent } from '../../runtime/echo-agent.js';
import { freePort, migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { bridgeToolNames, call, httpClient, mindloopBin, ok, refused, stdioClient } from '../helpers/mcp.js';
import { cleanupBus, testBus, testNatsUrl, testRoot, until } from '../helpers/nats.js';
import { repoRoot, run, start } from '../helpers/spawn.js';

const base = testRoot('mcp_stdio');
// The bridge speaks for a named deployment (its Temporal is dead on purpose): subjects under `<base>.stdio`.
const deployment = 'stdio';
const root = `${base}.${deployment}`;
let observer: Bus;
let db: MigratedDatabase;
let deadTemporal: string;
let childEnv: Record<string, string>;

beforeAll(async () => {
  [observer, db] = await Promise.all([testBus(base, { deployment }), migratedDatabase('mindloop_mcp_stdio')]);
  await db.db.insert(agents).values([
    { id: 'scout', name: 'Scout' },
    { id: 'ranger.2', name: 'Ranger two', lastTick: 7 },
  ]);
  deadTemporal = `127.0.0.1:${await freePort()}`;
  childEnv = {
    NATS_URL: testNatsUrl,
    DATABASE_URL: db.url,
    TEMPORAL_ADDRESS: deadTemporal,
    MINDLOOP_DEPLOYMENT: deployment,
  };
});
afterAll(async () => {
  await cleanupBus(observer);
  await db?.dispose();
});

async function watch(subject: string): Promise<{ got: BusMessage[]; stop: () => void }> {
  const got: BusMessage[] = [];
  const sub = observer.subscribe(subject, (m) => void got.push(m));
  await observer.flush();
  return { got, stop: () => sub.unsubscribe() };
}

describe('mindloop mcp over stdio (the SDK client)', () => {
  it('serves every tool: publish, request, subscribe/heartbeat with --buffer, unsubscribe, list_agents; stdout stays MCP', async () => {
    const echo = startEchoAgent(observer);
    const c = await stdioClient(['--root', base, '--buffer', '5'], childEnv);
    try {
      expect((await c.client.listTools()).tools.map((t) => t.name).sort()).toEqual(bridgeToolNames);

      const w = await watch(`${root}.dev.request.stdio`);
      const sent = ok(
        await call(c.client, 'publish', {
          subject: 'dev.request.stdio',
          message_type: 'EchoRequest',
          payload: { ping: 'from stdio' },
        }),
      );
      await until(() => w.got.length === 1, 'the published message');
      expect(w.got[0]!.header.message_id).toBe(sent.header.message_id);
      w.stop();

      const answer = ok(
        await call(c.client, 'request', {
          subject: 'dev.request.echo',
          message_type: 'EchoRequest',
          payload: { ping: 'round trip' },
          expect: 'EchoResponse',
        }),
      );
      expect(answer.answer.payload).toMatchObject({ pong: 'round trip', agent: 'echo-v1' });

      ok(await call(c.client, 'subscribe', { subject: 'low.agent.*' }));
      for (let tick = 1; tick <= 8; tick++)
        observer.publish(observer.subjects.heartbeat('scout'), 'HeartbeatSignal', {
          agent_id: 'scout',
          tick,
          loop: 'main',
          replayed: false,
        });
      await observer.flush();
      let hb: Record<string, any> = {};
      await until(async () => {
        const r = ok(await call(c.client, 'heartbeat'));
        hb = r.messages.length ? r : hb;
        return r.messages.length > 0 && r.messages_dropped_total + r.current_count === 8;
      }, 'the heartbeats');
      expect(hb).toMatchObject({
        buffer_capacity: 5,
        current_count: 5,
        messages_dropped_since_last_heartbeat: 3,
        messages_dropped_total: 3,
      });
      expect(hb.messages.map((m: { payload: { tick: number } }) => m.payload.tick)).toEqual([4, 5, 6, 7, 8]);
      expect(ok(await call(c.client, 'unsubscribe', { subscription: 'low.agent.*' }))).toMatchObject({
        unsubscribed: 'sub-1',
        subscriptions: [],
      });

      const list = ok(await call(c.client, 'list_agents'));
      expect(list.agents.map((a: { id: string }) => a.id)).toEqual(['ranger.2', 'scout']);
      expect(list.agents[0]).toMatchObject({ name: 'Ranger two', lastTick: 7, status: 'created' });
      expect(ok(await call(c.client, 'recent_replies', { agent_id: 'scout', limit: 5 }))).toMatchObject({
        count: 0,
        replies: [],
      });
      // No Temporal here: the workflow tools say where they looked.
      expect(refused(await call(c.client, 'agent_status', { agent_id: 'scout' }))).toMatch(
        new RegExp(`cannot reach Temporal at ${deadTemporal}`),
      );
      expect(refused(await call(c.client, 'approve', { kind: 'escalation', id: 'e-1', by: 'me' }))).toMatch(
        /cannot reach Temporal/,
      );
      expect(refused(await call(c.client, 'approve', { kind: 'fork', id: 'bad id!', by: 'me' }))).toMatch(
        /bad fork id "bad id!"/,
      );
      expect(refused(await call(c.client, 'list_agents', { limit: 0 }))).toMatch(/Input validation error/);
      expect(c.errors).toEqual([]);
      expect(c.stderr()).toMatch(new RegExp(`mindloop mcp: serving on stdio \\(bus root ${root}`));
    } finally {
      echo.unsubscribe();
      await c.close();
    }
  });

  it('writes nothing but JSON-RPC to stdout (logs go to stderr) and exits when stdin closes', async () => {
    const proc = spawn(process.execPath, [mindloopBin, 'mcp', '--root', base], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...childEnv },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const send = (m: object) => proc.stdin.write(`${JSON.stringify(m)}\n`);
    send({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    send({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'subscribe', arguments: { subject: 'dev.raw' } },
    });
    // The first answer waits for the process to start, which a loaded machine slows.
    await until(() => stdout.includes('"id":2'), 'the subscription', 60_000);
    // A message the registry refuses: the bridge logs the refusal, which must not reach stdout.
    observer.nc.publish(`${root}.dev.raw`, 'not json at all');
    await observer.flush();
    await until(() => stderr.includes('refused a message'), 'the refusal logged');
    send({
      jsonrpc: '2.0',
      id: 3,
      method: 'tools/call',
      params: { name: 'publish', arguments: { subject: '>', message_type: 'EchoRequest', payload: {} } },
    });
    send({ jsonrpc: '2.0', id: 4, method: 'tools/list' });
    await until(() => stdout.includes('"id":3') && stdout.includes('"id":4'), 'all answers');
    proc.stdin.end();
    const code = await new Promise<number | null>((resolve) => proc.once('exit', (c) => resolve(c)));
    expect(code).toBe(0);
    const lines = stdout.split('\n').filter((l) => l !== '');
    expect(lines.length).toBe(4);
    // Answers may come in any order: each is a whole JSON-RPC message on its own line.
    const messages = lines
      .map((l) => JSON.parse(l) as { jsonrpc: string; id: number; result?: { isError?: boolean } })
      .sort((a, b) => a.id - b.id);
    expect(messages.map((m) => [m.jsonrpc, m.id])).toEqual([
      ['2.0', 1],
      ['2.0', 2],
      ['2.0', 3],
      ['2.0', 4],
    ]);
    expect(messages[2]!.result?.isError).toBe(true);
    expect(stderr).toMatch(/refused a message on .*dev\.raw: bad_json/);
    expect(stderr).toMatch(/stopping \(stdin closed\)/);
  });
});

describe('the inspector CLI drives the stdio server', () => {
  const inspectorDir = join(repoRoot, 'node_modules', '@modelcontextprotocol', 'inspector-cli', 'build');
  /** Run the inspector on `mindloop mcp`; it looks for its own package.json from its working directory, so it runs in its build folder. */
  const inspect = (args: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const p = spawn(
        process.execPath,
        [join(inspectorDir, 'index.js'), process.execPath, ...args, '--', mindloopBin, 'mcp', '--root', base],
        {
          cwd: inspectorDir,
          env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...childEnv },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const timer = setTimeout(() => p.kill('SIGKILL'), 60_000);
      p.once('error', reject);
      p.once('exit', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr });
      });
    });

  it('tools/list, and tools/call of heartbeat and publish (seen on the bus) and a refused publish', async () => {
    const listed = await inspect(['--method', 'tools/list']);
    expect(listed.code).toBe(0);
    expect((JSON.parse(listed.stdout) as { tools: Array<{ name: string }> }).tools.map((t) => t.name).sort()).toEqual(
      bridgeToolNames,
    );

    const hb = await inspect(['--method', 'tools/call', '--tool-name', 'heartbeat']);
    expect(hb.code).toBe(0);
    expect(JSON.parse(hb.stdout)).toMatchObject({
      structuredContent: { bus: { connected: true, root }, current_count: 0 },
    });

    const w = await watch(`${root}.high.agent.*.reply`);
    const pub = await inspect([
      '--method',
      'tools/call',
      '--tool-name',
      'publish',
      '--tool-arg',
      'subject=high.agent.scout.reply',
      'message_type=AgentReply',
      'payload={"agent_id":"scout","tick":3,"summary":"via the inspector","commands":0,"confidence":0.5}',
    ]);
    expect(pub.code).toBe(0);
    expect(JSON.parse(pub.stdout)).toMatchObject({ structuredContent: { subject: `${root}.high.agent.scout.reply` } });
    await until(() => w.got.length === 1, 'the reply on the bus');
    expect(w.got[0]!.payload).toMatchObject({ summary: 'via the inspector', tick: 3 });
    w.stop();

    const no = await inspect([
      '--method',
      'tools/call',
      '--tool-name',
      'publish',
      '--tool-arg',
      'subject=command.agent.scout.note',
      'message_type=AgentNote',
      'payload={"text":"x"}',
    ]);
    expect(JSON.parse(no.stdout)).toMatchObject({
      isError: true,
      content: [{ text: expect.stringMatching(/not allowed: .*allow-list/) }],
    });
  });
});

describe('mindloop mcp without a bus', () => {
  let nats: ChildProcess | undefined;
  afterAll(() => void nats?.kill('SIGKILL'));

  it('starts anyway: bus tools say how to get a bus, Mindloop tools work, and it connects once a NATS server answers', async () => {
    const port = await freePort();
    const url = `nats://127.0.0.1:${port}`;
    const c = await stdioClient(['--root', base, '--nats', url], childEnv);
    try {
      const why = refused(await call(c.client, 'heartbeat'));
      expect(why).toMatch(new RegExp(`no bus: cannot reach the bus \\(NATS\\) at ${url}`));
      expect(why).toMatch(/To get one: apt-get install -y nats-server/);
      expect(
        refused(
          await call(c.client, 'publish', { subject: 'dev.x', message_type: 'EchoRequest', payload: { ping: 'x' } }),
        ),
      ).toMatch(/no bus/);
      expect(refused(await call(c.client, 'subscribe', { subject: 'dev.x' }))).toMatch(/no bus/);
      expect(ok(await call(c.client, 'list_agents')).count).toBe(2);

      nats = spawn(process.env.NATS_SERVER_BIN ?? 'nats-server', ['-a', '127.0.0.1', '-p', String(port)], {
        stdio: 'ignore',
      });
      await until(
        async () => !(await call(c.client, 'heartbeat')).isError,
        'the bridge connected to the new server',
        30_000,
      );
      const hb = ok(await call(c.client, 'heartbeat'));
      expect(hb.bus).toMatchObject({ connected: true, root });
      ok(await call(c.client, 'subscribe', { subject: 'dev.late' }));
      ok(
        await call(c.client, 'publish', {
          subject: 'dev.late',
          message_type: 'EchoRequest',
          payload: { ping: 'finally' },
        }),
      );
      await until(async () => {
        const r = ok(await call(c.client, 'heartbeat'));
        return r.messages.some((m: { payload: { ping: string } }) => m.payload.ping === 'finally');
      }, 'the message through the new server');

      // The server goes away and comes back: the heartbeat says so, and the subscription survives.
      const gone = new Promise((resolve) => nats!.once('exit', resolve));
      nats.kill('SIGKILL');
      await gone;
      await until(
        async () => ok(await call(c.client, 'heartbeat')).bus.connected === false,
        'the heartbeat reporting the lost server',
        30_000,
      );
      nats = spawn(process.env.NATS_SERVER_BIN ?? 'nats-server', ['-a', '127.0.0.1', '-p', String(port)], {
        stdio: 'ignore',
      });
      await until(async () => ok(await call(c.client, 'heartbeat')).bus.connected === true, 'reconnected', 30_000);
      ok(
        await call(c.client, 'publish', {
          subject: 'dev.late',
          message_type: 'EchoRequest',
          payload: { ping: 'again' },
        }),
      );
      await until(
        async () =>
          ok(await call(c.client, 'heartbeat')).messages.some(
            (m: { payload: { ping: string } }) => m.payload.ping === 'again',
          ),
        'the message after the reconnect',
      );
    } finally {
      await c.close();
    }
  });
});

describe('mindloop mcp without a deployment', () => {
  it('no Temporal to name the deployment and no MINDLOOP_DEPLOYMENT: bus tools say why, on no deployment’s subjects, and Mindloop tools on the database work', async () => {
    const { MINDLOOP_DEPLOYMENT: _named, ...unnamed } = childEnv;
    const c = await stdioClient(['--root', base], unnamed);
    try {
      const why = refused(await call(c.client, 'heartbeat'));
      expect(why).toMatch(
        /^cannot tell which deployment this is: cannot reach Temporal at 127\.0\.0\.1:\d+ .*\(or set MINDLOOP_DEPLOYMENT/,
      );
      expect(
        refused(
          await call(c.client, 'publish', { subject: 'dev.x', message_type: 'EchoRequest', payload: { ping: 'x' } }),
        ),
      ).toMatch(/cannot tell which deployment this is/);
      expect(ok(await call(c.client, 'list_agents')).count).toBe(2);
      expect(c.stderr()).toContain('mindloop mcp: serving without the bus: cannot tell which deployment this is');
    } finally {
      await c.close();
    }
  });
});

describe('mindloop mcp: bad flags and --http', () => {
  const mcp = (...args: string[]) => run(process.execPath, [mindloopBin, 'mcp', ...args], childEnv, 30_000);

  it.each([
    [['--buffer', '0'], /--buffer must be an integer in 1\.\.100000, got "0"/],
    [['--buffer', 'lots'], /--buffer must be an integer/],
    [['--allow', '$SYS.>'], /--allow: allow pattern "\$SYS\.>"/],
    [['--allow', 'dev x'], /whitespace/],
    [['--root', 'a b'], /bad bus root "a b"/],
    [['--nats', 'not a url'], /bad --nats "not a url"/],
    [['--token', 'x'.repeat(20)], /--port, --host and --token go with --http/],
    [['--http', '0', '--token', 'short'], /bad --token "short": at least 16/],
    [['--http', '0', '--host', '0.0.0.0'], /refusing to bind 0\.0\.0\.0 without a token/],
    [['--http', '70000'], /port must be an integer in 0\.\.65535/],
    [['--http', '1234', '--port', '5678'], /--http 1234 and --port 5678 disagree/],
    [['--bogus'], /unknown option '--bogus'/],
  ])('mcp %j: exit 2 with the reason', async (args, why) => {
    const r = await mcp(...args);
    expect(r.stderr).toMatch(why);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
  });

  it('--http on 0.0.0.0 with a token: the URL on stderr, 401 without the token, tools with it; SIGTERM stops it', async () => {
    const token = 'cli-token-0123456789abcdef';
    const child = start(
      process.execPath,
      [mindloopBin, 'mcp', '--http', '0', '--host', '0.0.0.0', '--token', token, '--root', base],
      childEnv,
    );
    try {
      await until(
        () => /streamable HTTP at http:\/\/0\.0\.0\.0:\d+\/mcp/.test(child.output().stderr),
        'the URL',
        30_000,
      );
      const url = /streamable HTTP at (http:\/\/\S+\/mcp)/
        .exec(child.output().stderr)![1]!
        .replace('0.0.0.0', '127.0.0.1');
      const denied = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(denied.status).toBe(401);
      const c = await httpClient(url, token);
      expect((await c.client.listTools()).tools).toHaveLength(bridgeToolNames.length);
      expect(ok(await call(c.client, 'heartbeat')).bus).toMatchObject({ connected: true, root });
      await c.close();
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(child.output().stderr).toMatch(/stopping \(SIGTERM\)/);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('MINDLOOP_MCP_TOKEN stands in for --token', async () => {
    const token = 'env-token-0123456789abcdef';
    const child = start(process.execPath, [mindloopBin, 'mcp', '--http', '0', '--host', '0.0.0.0', '--root', base], {
      ...childEnv,
      MINDLOOP_MCP_TOKEN: token,
    });
    try {
      await until(
        () => /streamable HTTP at http:\/\/\S+ \(bearer token required\)/.test(child.output().stderr),
        'the URL',
        30_000,
      );
      const url = /streamable HTTP at (http:\/\/\S+\/mcp)/
        .exec(child.output().stderr)![1]!
        .replace('0.0.0.0', '127.0.0.1');
      expect(
        (
          await fetch(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: 'Bearer nope' },
            body: '{}',
          })
        ).status,
      ).toBe(401);
      const c = await httpClient(url, token);
      expect((await c.client.listTools()).tools).toHaveLength(bridgeToolNames.length);
      await c.close();
    } finally {
      child.kill('SIGKILL');
    }
  });
});
