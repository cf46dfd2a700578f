/**
 * The bridge's Mindloop tools against the real thing: the Temporal dev server running the
 * product's workflows on the real activities (the scripted model as every LLM), a fresh Postgres
 * database, NATS with the worker's command consumer, and the SDK's Client over streamable HTTP.
 * list_agents and recent_replies read Postgres; agent_status asks the running loop; send_note
 * reaches the running agent through the bus command stream — one note per message id however
 * often it is sent, also when a bridge without a bus sends it straight to the workflow; approve
 * and reject answer escalations and fork gates as the human tier, and the workflows decide.
 */
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ScriptedReplyFn } from '../../activities/llm/index.js';
import { createToolActivities } from '../../activities/tools.js';
import { agentConfig, agents, decisionLog, llmRegistry, notes } from '../../db/schema/index.js';
import type { Bus } from '../../runtime/bus.js';
import { startCommandConsumer, temporalCommandTarget, type CommandConsumer } from '../../runtime/bus-commands.js';
import { offBusSource } from '../../runtime/mcp/bus-link.js';
import { startHttpBridge, type HttpBridge } from '../../runtime/mcp/http.js';
import { startDevServer, type DevServer } from '../../runtime/temporal-dev-server.js';
import { startSuccessorFork } from '../../runtime/workflow-starts.js';
import { escalationStatusQuery, type EscalationResult, type EscalationStatus } from '../../workflows/escalation.js';
import { forkStateQuery } from '../../workflows/successor-fork.js';
import { freePort, migratedDatabase, repoToolsDir, tempDir, toolPath, type MigratedDatabase } from '../helpers/env.js';
import { seedForkableAgent } from '../helpers/fork-fixture.js';
import { startLoop, startWorkers, untilQuery, untilStatus, type RunningWorkers } from '../helpers/harness.js';
import { call, httpClient, ok, refused, type Connected } from '../helpers/mcp.js';
import { cleanupBus, testBus, testRoot, until } from '../helpers/nats.js';
import { thinkScript } from '../helpers/scripted.js';
import { bundle as bundleWorkflows, productWorkflowsPath } from '../helpers/temporal.js';

const data = tempDir('mcp-mindloop');
const agentId = 'mcp.agent';
let db: MigratedDatabase;
let server: DevServer;
let client: Client;
let native: NativeConnection;
let workers: RunningWorkers;
let bridgeBus: Bus;
let consumerBus: Bus;
let consumer: CommandConsumer;
let http: HttpBridge;
let mcp: Connected;
let loop: WorkflowHandle;

/** The agent answers a note it saw; otherwise it ticks quietly. The oversight approves. */
const think = thinkScript((messages, i) => {
  const user = messages.find((m) => m.role === 'user')?.content ?? '';
  return user.includes('hello over MCP') ? 'I read the note that came over MCP.' : `Tick ${i + 1}: quiet.`;
});
const scripted: ScriptedReplyFn = (c) =>
  c.purpose?.startsWith('oversight')
    ? JSON.stringify({
        verdict: 'approve',
        solution: 'Go ahead.',
        teaching_moment: 'Ask early.',
        recommended_tools: [],
        needs_human: false,
      })
    : think(c);

beforeAll(async () => {
  const root = testRoot('mcp_mindloop');
  [db, bridgeBus, consumerBus] = await Promise.all([
    migratedDatabase('mindloop_mcp_tools'),
    testBus(root),
    testBus(root),
  ]);
  server = await startDevServer({
    binary: toolPath('temporal'),
    dataDir: data.path,
    port: await freePort(),
    uiPort: 0,
    namespace: 'default',
    ui: false,
  });
  const [connection, nativeConnection, bundle] = await Promise.all([
    Connection.connect({ address: server.address }),
    NativeConnection.connect({ address: server.address }),
    bundleWorkflows(productWorkflowsPath),
  ]);
  client = new Client({ connection });
  native = nativeConnection;
  await db.db.insert(agents).values([
    { id: agentId, name: 'MCP agent' },
    { id: 'esc.agent', name: 'Escalating agent' },
  ]);
  await db.db.insert(llmRegistry).values([
    { agentId, name: 'script', provider: 'scripted', model: 'scripted-mcp', role: 'agent', priority: 1 },
    {
      agentId: 'esc.agent',
      name: 'overseer',
      provider: 'scripted',
      model: 'scripted-oversight',
      role: 'oversight',
      priority: 1,
    },
  ]);
  await createToolActivities({ db: db.db }).grantStarterTools({ agentId: 'esc.agent' });
  await seedForkableAgent(db.db, 'fk-a');
  await seedForkableAgent(db.db, 'fk-b');
  workers = await startWorkers(native, [
    {
      taskQueue: 'mindloop',
      workflowBundle: bundle,
      activities: createActivities({
        db: db.db,
        llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: scripted },
        dataDir: data.path,
      }),
    },
  ]);
  consumer = await startCommandConsumer(consumerBus, temporalCommandTarget(client), { log: () => undefined });
  http = await startHttpBridge({ bus: bridgeBus, db: db.db, temporal: client, port: 0, log: () => undefined });
  mcp = await httpClient(http.url);
  loop = await startLoop(client, 'mindloop', {
    agentId,
    maxTicks: 10_000,
    settings: { idle: { on: true, wakeOn: ['note', 'timeout'], timeoutMs: 3_600_000 } },
  });
  await untilStatus(loop, (s) => s.tick >= 1, 'the first tick', 60_000);
}, 180_000);
afterAll(async () => {
  await mcp?.close();
  await http?.close();
  await consumer?.stop();
  await loop?.terminate('test over').catch(() => undefined);
  await workers?.stop();
  await native?.close();
  await client?.connection.close();
  await server?.stop();
  await cleanupBus(consumerBus);
  await cleanupBus(bridgeBus);
  await db?.dispose();
  data.remove();
}, 60_000);

const incoming = (key?: string) =>
  db.db
    .select()
    .from(notes)
    .where(
      and(
        eq(notes.agentId, agentId),
        eq(notes.direction, 'in'),
        ...(key ? [eq(notes.idempotencyKey, `agent/${agentId}:note:${key}`)] : []),
      ),
    );

describe('Mindloop tools over MCP (dev server, Postgres, NATS)', () => {
  it('list_agents, agent_status and recent_replies show the running agent', async () => {
    const list = ok(await call(mcp.client, 'list_agents'));
    expect(list.agents.map((a: { id: string }) => a.id)).toEqual(
      expect.arrayContaining([agentId, 'esc.agent', 'fk-a', 'fk-b']),
    );
    expect(list.agents.find((a: { id: string }) => a.id === agentId)).toMatchObject({
      name: 'MCP agent',
      kind: 'root',
    });

    const s = ok(await call(mcp.client, 'agent_status', { agent_id: agentId }));
    expect(s).toMatchObject({
      workflowId: `agent/${agentId}`,
      execution: { status: 'RUNNING', closeTime: null },
      status: { agentId, llm: 'scripted:scripted-mcp' },
    });
    expect(s.status.tick).toBeGreaterThanOrEqual(1);
    expect(refused(await call(mcp.client, 'agent_status', { agent_id: 'nobody' }))).toMatch(
      /no loop for agent nobody: start it with `mindloop start nobody`/,
    );
    expect(refused(await call(mcp.client, 'agent_status', { agent_id: 'a/b' }))).toMatch(/Input validation error/);

    const r = ok(await call(mcp.client, 'recent_replies', { agent_id: agentId, limit: 5 }));
    expect(r.count).toBeGreaterThanOrEqual(1);
    expect(r.replies.at(-1)).toMatchObject({ tick: 1, content: 'Tick 1: quiet.' });
  });

  it('send_note goes through the bus command stream to the running agent: stored once per message id, and the agent answers it', async () => {
    const first = ok(
      await call(mcp.client, 'send_note', {
        agent_id: agentId,
        text: 'hello over MCP',
        priority: 4,
        tags: ['mcp'],
        message_id: 'mcp-note-1',
      }),
    );
    expect(first).toMatchObject({
      message_id: 'mcp-note-1',
      via: 'bus',
      duplicate: false,
      subject: bridgeBus.subjects.agentCommand(agentId, 'note'),
    });
    const again = ok(
      await call(mcp.client, 'send_note', {
        agent_id: agentId,
        text: 'hello over MCP',
        priority: 4,
        tags: ['mcp'],
        message_id: 'mcp-note-1',
      }),
    );
    expect(again).toMatchObject({ message_id: 'mcp-note-1', via: 'bus', duplicate: true });

    await until(async () => (await incoming('mcp-note-1')).length === 1, 'the note in Postgres', 30_000);
    const [stored] = await incoming('mcp-note-1');
    expect(stored).toMatchObject({ text: 'hello over MCP', priority: 4, tags: ['mcp'] });
    // The note woke the idle agent, and its next reply answers it.
    await until(
      async () =>
        ok(await call(mcp.client, 'recent_replies', { agent_id: agentId, limit: 1 })).replies[0]?.content ===
        'I read the note that came over MCP.',
      "the agent's answer",
      30_000,
    );
    expect(consumer.stats).toMatchObject({ accepted: 1, rejected: 0 });

    // A fresh id without one given: a new note.
    const fresh = ok(await call(mcp.client, 'send_note', { agent_id: agentId, text: 'a second note' }));
    expect(fresh.message_id).toMatch(/^[0-9a-f-]{36}$/);
    await until(async () => (await incoming(fresh.message_id)).length === 1, 'the second note', 30_000);

    expect(refused(await call(mcp.client, 'send_note', { agent_id: agentId, text: '   ' }))).toMatch(
      /Input validation error/,
    );
    expect(
      refused(await call(mcp.client, 'send_note', { agent_id: agentId, text: 'x', message_id: 'has space' })),
    ).toMatch(/Input validation error/);
    expect(refused(await call(mcp.client, 'send_note', { agent_id: agentId, text: 'x', priority: 11 }))).toMatch(
      /Input validation error/,
    );
  });

  it('without a bus, send_note goes straight to the workflow with the message id as update id: still once per id', async () => {
    const busless = await startHttpBridge({
      bus: offBusSource(bridgeBus.root),
      db: db.db,
      temporal: client,
      port: 0,
      log: () => undefined,
    });
    const c = await httpClient(busless.url);
    try {
      expect(
        refused(
          await call(c.client, 'publish', { subject: 'dev.x', message_type: 'EchoRequest', payload: { ping: 'x' } }),
        ),
      ).toMatch(/the bus is off/);
      const a = ok(
        await call(c.client, 'send_note', { agent_id: agentId, text: 'no bus here', message_id: 'mcp-note-2' }),
      );
      expect(a).toEqual({ message_id: 'mcp-note-2', via: 'temporal' });
      ok(await call(c.client, 'send_note', { agent_id: agentId, text: 'no bus here', message_id: 'mcp-note-2' }));
      // The note sent over the bus before, sent again past the stream: Temporal knows the id.
      ok(await call(c.client, 'send_note', { agent_id: agentId, text: 'hello over MCP', message_id: 'mcp-note-1' }));
      await until(async () => (await incoming('mcp-note-2')).length === 1, 'the note', 30_000);
      // Let the loop take anything else it was given before counting.
      await untilStatus(loop, (s) => s.counters.notesReceived === 3, 'the loop counted three notes', 30_000);
      expect(await incoming('mcp-note-2')).toHaveLength(1);
      expect(await incoming('mcp-note-1')).toHaveLength(1);
      expect(await incoming()).toHaveLength(3);
      expect(
        refused(await call(c.client, 'send_note', { agent_id: 'nobody', text: 'anyone?', message_id: 'mcp-note-3' })),
      ).toMatch(/not delivered: agent\/nobody is not running.*send it again with message_id mcp-note-3/);
    } finally {
      await c.close();
      await busless.close();
    }
  });

  it('approve and reject an escalation as the human tier; a reject without a reason sends nothing', async () => {
    const start = (id: string) =>
      client.workflow.start('escalationWorkflow', {
        taskQueue: 'mindloop',
        workflowId: `escalation/${id}`,
        args: [{ escalationId: id, agentId: 'esc.agent', task: `decide ${id}`, humanRequired: true }],
      });
    const waiting = async (h: WorkflowHandle) =>
      untilQuery(h, escalationStatusQuery, (s) => s.phase === 'awaiting_human', 'awaiting the human', 60_000);
    const h1 = await start('mcp-esc-1');
    const h2 = await start('mcp-esc-2');
    await Promise.all([waiting(h1), waiting(h2)]);

    expect(refused(await call(mcp.client, 'reject', { kind: 'escalation', id: 'mcp-esc-1', by: 'tester' }))).toMatch(
      /needs a reason.*nothing was sent/,
    );
    expect((await h1.query<EscalationStatus>('status')).phase).toBe('awaiting_human');

    const approved = ok(
      await call(mcp.client, 'approve', { kind: 'escalation', id: 'mcp-esc-1', by: 'tester', reason: 'checked it' }),
    );
    expect(approved).toMatchObject({
      kind: 'escalation',
      id: 'mcp-esc-1',
      verdict: 'approve',
      status: { human: { verdict: 'approve', by: 'tester' } },
    });
    expect(await h1.result()).toMatchObject<Partial<EscalationResult>>({ outcome: 'approved', decidedBy: 'human' });
    expect(refused(await call(mcp.client, 'approve', { kind: 'escalation', id: 'mcp-esc-1', by: 'tester' }))).toMatch(
      /escalation mcp-esc-1|no running escalation mcp-esc-1/,
    );

    ok(await call(mcp.client, 'reject', { kind: 'escalation', id: 'mcp-esc-2', by: 'tester', reason: 'not now' }));
    expect(await h2.result()).toMatchObject<Partial<EscalationResult>>({ outcome: 'denied', decidedBy: 'human' });
    const [row] = await db.db.select().from(decisionLog).where(eq(decisionLog.escalationId, 'mcp-esc-2'));
    expect(row).toMatchObject({ humanAnswer: 'reject', humanComment: 'not now' });

    expect(refused(await call(mcp.client, 'approve', { kind: 'escalation', id: 'no-such-esc', by: 'tester' }))).toMatch(
      /no running escalation no-such-esc/,
    );
    expect(refused(await call(mcp.client, 'approve', { kind: 'escalation', id: 'bad id', by: 'tester' }))).toMatch(
      /bad escalation id "bad id"/,
    );
    expect(refused(await call(mcp.client, 'approve', { kind: 'campaign', id: 'x', by: 'tester' }))).toMatch(
      /Input validation error/,
    );
  });

  it("approve and reject a successor fork's gate: approve applies the patch to the parent, reject leaves it", async () => {
    const strategy = async (id: string) =>
      (
        await db.db
          .select()
          .from(agentConfig)
          .where(and(eq(agentConfig.agentId, id), eq(agentConfig.key, 'abstracts_strategy')))
      )[0]?.value;
    const fork = (parent: string, forkId: string) =>
      startSuccessorFork(client, {
        agentId: parent,
        forkId,
        patch: { kind: 'strategy', strategy: 'keyword_cluster' },
        evaluation: { kind: 'abstracts_replay', lastN: 30, window: 10 },
      });
    const [fa, fb] = await Promise.all([fork('fk-a', 'mcp-fork-a'), fork('fk-b', 'mcp-fork-b')]);
    for (const h of [fa, fb])
      await untilQuery(
        h,
        forkStateQuery,
        (s) => s.phase === 'awaiting_approval',
        `${h.workflowId} at the gate`,
        90_000,
      );

    const a = ok(await call(mcp.client, 'approve', { kind: 'fork', id: 'mcp-fork-a', by: 'tester' }));
    expect(a).toMatchObject({
      kind: 'fork',
      verdict: 'approve',
      gate: { gate: 'approved', applied: 'abstracts_strategy = keyword_cluster' },
    });
    expect(await strategy('fk-a')).toBe('keyword_cluster');

    const b = ok(await call(mcp.client, 'reject', { kind: 'fork', id: 'mcp-fork-b', by: 'tester', reason: 'not yet' }));
    expect(b).toMatchObject({
      kind: 'fork',
      verdict: 'reject',
      gate: { gate: 'rejected', applied: null },
      reason_recorded: false,
    });
    expect(await strategy('fk-b')).toBe('recency');
    expect(await fb.result()).toMatchObject({ gate: 'rejected' });

    expect(refused(await call(mcp.client, 'approve', { kind: 'fork', id: 'mcp-fork-b', by: 'tester' }))).toMatch(
      /fork mcp-fork-b|no fork workflow fork\/mcp-fork-b is running/,
    );
  });
});
