/**
 * Two deployments on one NATS never hear each other. Two full stacks — each its own Temporal dev
 * server, its own database and its own worker process on the real NATS, under the same bus root
 * and with nothing configured to tell them apart — each run an agent `demo`. Each side's
 * deployment is derived from its own Temporal namespace; notes (through the `mindloop bus send`
 * CLI and the MCP bridge), pauses and resumes reach only their own agent; each notebook's live
 * stream and each MCP bridge's heartbeats carry only their own agent's beats; a note to an agent
 * a deployment does not run is refused at once on every path with nothing stored; and a command
 * one deployment puts on the other's subjects is refused there unless it names the sender a peer.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import type { WorkflowHandle } from '@temporalio/client';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commandStreamName } from '../../core/bus/subjects.js';
import { createDb, type DbHandle } from '../../db/client.js';
import { agents, llmRegistry, notes } from '../../db/schema/index.js';
import type { Bus } from '../../runtime/bus.js';
import { CommandRefusedError, sendCommand } from '../../runtime/bus-commands.js';
import { resolveDeployment, type Deployment } from '../../runtime/deployment.js';
import { TickFeed, type FeedEvent } from '../../runtime/notebook/index.js';
import { whyNotRunning } from '../../runtime/operator.js';
import type { AgentStatus } from '../../workflows/agent-loop/index.js';
import { startWorkerNotebook, type WorkerNotebook } from '../../workers/notebook.js';
import { freePort, repoToolsDir, testEnv } from '../helpers/env.js';
import { call, mindloopBin, ok, refused, stdioClient, type Connected } from '../helpers/mcp.js';
import { cleanupBus, testBus, testNatsUrl, testRoot, until } from '../helpers/nats.js';
import { run } from '../helpers/spawn.js';
import { startKillableStack, waitFor, type KillableStack } from '../helpers/worker-process.js';

const root = testRoot('two_deployments');
const agentId = 'demo';

interface Side {
  name: 'a' | 'b';
  ks: KillableStack;
  db: DbHandle;
  worker: ReturnType<KillableStack['spawnWorker']>;
  loop: WorkflowHandle;
  deployment: Deployment;
  /** This side's bus, as its CLI and notebook see it. */
  bus: Bus;
  notebook: WorkerNotebook;
  notebookUrl: string;
  mcp: Connected;
  /** What a user's shell has for this install. */
  env: Record<string, string>;
}

let a: Side;
let b: Side;

/** One install: its stack, its `demo` agent (model scripted:<name>), its worker on the shared NATS, its notebook and MCP bridge. */
async function install(name: 'a' | 'b'): Promise<Side> {
  const ks = await startKillableStack(`two-deployments-${name}`);
  const db = createDb(ks.dbUrl);
  await db.db.insert(agents).values({ id: agentId, name: `demo of ${name}` });
  await db.db.insert(llmRegistry).values({
    agentId,
    name: 'mind',
    provider: 'scripted',
    model: `install-${name}`,
    role: 'agent',
    priority: 1,
    params: { replies: [`Install ${name} here.`] },
  });
  const env = {
    TEMPORAL_ADDRESS: ks.stack.temporal.address,
    DATABASE_URL: ks.dbUrl,
    NATS_URL: testNatsUrl,
    MINDLOOP_BUS_ROOT: root,
    MINDLOOP_TOOLS_DIR: repoToolsDir,
    LOG_LEVEL: 'ERROR',
  };
  // Both workers join the same NATS under the same root: nothing but their Temporal tells them apart.
  const worker = ks.spawnWorker({ NATS_URL: testNatsUrl, MINDLOOP_BUS_ROOT: root });
  const loop = await ks.client.workflow.start('agentLoopWorkflow', {
    taskQueue: 'mindloop',
    workflowId: `agent/${agentId}`,
    args: [
      { agentId, reflexes: false, settings: { idle: { on: true, wakeOn: ['note', 'timeout'], timeoutMs: 1000 } } },
    ],
  });
  const deployment = await resolveDeployment(testEnv({}), async () => ks.client);
  const bus = await testBus(root, { deployment: deployment.id });
  const port = await freePort();
  const notebook = await startWorkerNotebook(
    testEnv({ MINDLOOP_NOTEBOOK_PORT: String(port) }),
    ks.stack,
    new TickFeed(),
    bus,
    () => undefined,
  );
  const mcp = await stdioClient([], env);
  return { name, ks, db, worker, loop, deployment, bus, notebook, notebookUrl: `http://127.0.0.1:${port}`, mcp, env };
}

async function incoming(s: Side): Promise<string[]> {
  const rows = await s.db.db
    .select({ text: notes.text })
    .from(notes)
    .where(and(eq(notes.agentId, agentId), eq(notes.direction, 'in')));
  return rows.map((r) => r.text).sort();
}

const status = (s: Side) => s.loop.query<AgentStatus>('status');

/** The beats a notebook's live stream (`/api/events`) carries for `ms`. */
async function liveBeats(s: Side, ms: number): Promise<FeedEvent[]> {
  const ctrl = new AbortController();
  const res = await fetch(`${s.notebookUrl}/api/events?agent=${agentId}`, { signal: ctrl.signal });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const beats: FeedEvent[] = [];
  let text = '';
  const timer = setTimeout(() => ctrl.abort(), ms);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
      const blocks = text.split('\n\n');
      text = blocks.pop() ?? '';
      for (const block of blocks) {
        if (!block.startsWith('event: beat')) continue;
        beats.push(
          JSON.parse(
            block
              .split('\n')
              .find((l) => l.startsWith('data: '))!
              .slice(6),
          ) as FeedEvent,
        );
      }
    }
  } catch (err) {
    if ((err as Error).name !== 'AbortError') throw err;
  } finally {
    clearTimeout(timer);
  }
  return beats;
}

/** `mindloop <args>` as the user of install `s` runs it. */
const cli = (s: Side, ...args: string[]) => run(process.execPath, [mindloopBin, ...args], s.env, 90_000);

beforeAll(async () => {
  [a, b] = await Promise.all([install('a'), install('b')]);
  for (const s of [a, b])
    await waitFor(`install ${s.name}'s first tick`, 120_000, async () =>
      (await status(s)).tick >= 1 ? true : undefined,
    );
}, 300_000);

afterAll(async () => {
  for (const s of [a, b]) {
    if (!s) continue;
    await s.mcp.close().catch(() => undefined);
    await s.notebook.stop();
    await s.loop.terminate('test over').catch(() => undefined);
    s.worker.kill('SIGTERM');
    await cleanupBus(s.bus);
    await s.db.close();
    await s.ks.stop();
  }
}, 120_000);

describe('two deployments on one NATS', () => {
  it('each derives its own deployment from its Temporal namespace, without configuration', () => {
    expect(a.deployment.id).toMatch(/^default-[0-9a-f]{12}$/);
    expect(b.deployment.id).toMatch(/^default-[0-9a-f]{12}$/);
    expect(a.deployment.id).not.toBe(b.deployment.id);
    expect(a.bus.root).toBe(`${root}.${a.deployment.id}`);
  });

  it('notes sent with `mindloop bus send` and over each MCP bridge reach only their own agent', async () => {
    for (const s of [a, b]) {
      for (let i = 1; i <= 3; i++) {
        const r = await cli(s, 'bus', 'send', agentId, 'note', `bus note ${i} for install ${s.name}`);
        expect(r.stderr).not.toMatch(/Error|Warning/);
        expect(r.code).toBe(0);
        expect(r.stdout).toMatch(new RegExp(`^note for demo: message [0-9a-f-]{36}, stored \\(#\\d+\\)\\n$`));
      }
      const viaMcp = ok(
        await call(s.mcp.client, 'send_note', { agent_id: agentId, text: `mcp note for install ${s.name}` }),
      );
      expect(viaMcp).toMatchObject({
        via: 'bus',
        subject: `${root}.${s.deployment.id}.command.agent.demo.note`,
        duplicate: false,
      });
    }
    const expected = (n: string) =>
      [1, 2, 3]
        .map((i) => `bus note ${i} for install ${n}`)
        .concat(`mcp note for install ${n}`)
        .sort();
    for (const s of [a, b])
      await waitFor(`install ${s.name}'s four notes`, 60_000, async () =>
        (await incoming(s)).length >= 4 ? true : undefined,
      );
    // Anything crossing over would have arrived by now, with the rest of the other side's notes.
    expect(await incoming(a)).toEqual(expected('a'));
    expect(await incoming(b)).toEqual(expected('b'));
  });

  it('a pause and a resume over the bus reach only their own agent', async () => {
    await sendCommand(
      a.bus,
      agentId,
      'pause',
      { reason: 'pause install a' },
      { check: async (id) => whyNotRunning(a.ks.client, id) },
    );
    await waitFor('install a paused', 30_000, async () => ((await status(a)).paused ? true : undefined));
    const bTick = (await status(b)).tick;
    await waitFor('install b ticking on', 30_000, async () => ((await status(b)).tick > bTick + 1 ? true : undefined));
    expect((await status(b)).paused).toBe(false);
    await sendCommand(a.bus, agentId, 'resume', {}, { check: async (id) => whyNotRunning(a.ks.client, id) });
    await waitFor('install a resumed', 30_000, async () => ((await status(a)).paused ? undefined : true));

    await sendCommand(b.bus, agentId, 'pause', { reason: 'pause install b' });
    await waitFor('install b paused', 30_000, async () => ((await status(b)).paused ? true : undefined));
    const aTick = (await status(a)).tick;
    await waitFor('install a ticking on', 30_000, async () => ((await status(a)).tick > aTick + 1 ? true : undefined));
    expect((await status(a)).paused).toBe(false);
    await sendCommand(b.bus, agentId, 'resume', {});
    await waitFor('install b resumed', 30_000, async () => ((await status(b)).paused ? undefined : true));
  });

  it("each notebook's live stream and each MCP bridge's heartbeats carry only their own agent's beats", async () => {
    for (const s of [a, b]) ok(await call(s.mcp.client, 'subscribe', { subject: 'low.agent.*' }));
    const [beatsA, beatsB] = await Promise.all([liveBeats(a, 4000), liveBeats(b, 4000)]);
    expect(beatsA.length).toBeGreaterThan(0);
    expect(beatsB.length).toBeGreaterThan(0);
    expect(new Set(beatsA.map((e) => (e as { model: string }).model))).toEqual(new Set(['scripted:install-a']));
    expect(new Set(beatsB.map((e) => (e as { model: string }).model))).toEqual(new Set(['scripted:install-b']));
    for (const s of [a, b]) {
      const hb = ok(await call(s.mcp.client, 'heartbeat'));
      const models = new Set(
        (hb.messages as Array<{ subject: string; payload: { model?: string } }>).map((m) => m.payload.model),
      );
      expect(hb.messages.length).toBeGreaterThan(0);
      expect(models).toEqual(new Set([`scripted:install-${s.name}`]));
      for (const m of hb.messages as Array<{ subject: string }>)
        expect(m.subject).toBe(`${root}.${s.deployment.id}.low.agent.demo`);
    }
  });

  it('a note to an agent this deployment does not run is refused at once on every path, with nothing stored', async () => {
    const jsm = await jetstreamManager(a.bus.nc);
    const stored = async () => (await jsm.streams.info(commandStreamName(a.bus.root))).state.last_seq;
    const before = await stored();

    const byCli = await cli(a, 'bus', 'send', 'ghost', 'note', 'anyone there?');
    expect(byCli.code).toBe(1);
    expect(byCli.stdout).toBe('');
    expect(byCli.stderr).toContain('no loop for agent ghost: start it with `mindloop start ghost` (nothing was sent)');

    const byMcp = refused(await call(a.mcp.client, 'send_note', { agent_id: 'ghost', text: 'anyone there?' }));
    expect(byMcp).toContain('no loop for agent ghost');
    expect(byMcp).toContain('nothing was sent');

    const byNotebook = await fetch(`${a.notebookUrl}/api/agents/ghost/notes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'anyone there?' }),
    });
    expect(byNotebook.status).toBe(404);
    expect(((await byNotebook.json()) as { error: string }).error).toContain('nothing was stored');

    const byNote = await cli(a, 'note', 'ghost', 'anyone there?');
    expect(byNote.code).toBe(1);
    expect(byNote.stderr).toContain('no loop for agent ghost');

    // An agent the other deployment runs is, here, an agent this deployment does not have.
    await b.db.db.insert(agents).values({ id: 'only-b', name: 'only in b' });
    const err = await sendCommand(
      a.bus,
      'only-b',
      'pause',
      {},
      { check: async (id) => whyNotRunning(a.ks.client, id) },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommandRefusedError);
    expect(await stored()).toBe(before);
  });

  it("a command put on the other deployment's subjects is refused there: the door is closed unless that side names this one a peer", async () => {
    const intoB = a.bus.toDeployment(b.deployment.id);
    expect(intoB.root).toBe(b.bus.root);
    await sendCommand(intoB, agentId, 'note', { text: 'from install a, across' });
    // B's consumer takes commands in stream order: once B's own next note is stored, the foreign one was handled.
    await sendCommand(b.bus, agentId, 'note', { text: 'b after the foreign one' });
    await waitFor("install b's own note", 60_000, async () =>
      (await incoming(b)).includes('b after the foreign one') ? true : undefined,
    );
    expect(await incoming(b)).not.toContain('from install a, across');
    expect(await incoming(a)).not.toContain('from install a, across');
    await until(
      async () =>
        (await jetstreamManager(b.bus.nc).then((m) => m.streams.info(commandStreamName(b.bus.root)))).state.messages ===
        0,
      'b’s stream empty',
      10_000,
    );
  });
});
