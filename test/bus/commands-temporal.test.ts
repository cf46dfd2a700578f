/**
 * Bus commands into a real agent workflow: the Temporal dev server (the real server, which
 * dedupes updates by update id and signals by request id), the product's agentLoopWorkflow with
 * typed activity fakes, NATS + JetStream, and the consumer of runtime/bus-commands.ts with
 * `temporalCommandTarget`. Notes sent while no consumer runs become exactly one stored note
 * each, in order, even when a message id comes again past the stream's duplicate check; pause
 * and resume reach the loop, and a replayed old pause does not pause it again; commands to an
 * agent that is not running are retried, then given up. Last, the worker's composition
 * (workers/bus.ts): with NATS_URL set it takes commands, answers echo and sends heartbeats and
 * agent events.
 */
import { jetstream } from '@nats-io/jetstream';
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { NativeConnection, WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { createActivities } from '../../activities/index.js';
import { BusRequestError, type Bus, type BusMessage } from '../../runtime/bus.js';
import {
  ensureCommandStream,
  sendCommand,
  startCommandConsumer,
  temporalCommandTarget,
} from '../../runtime/bus-commands.js';
import type { AgentStatus } from '../../workflows/agent-loop/index.js';
import { resolveDeployment } from '../../runtime/deployment.js';
import { startWorkerBus } from '../../workers/bus.js';
import { testEnv } from '../helpers/env.js';
import { startLoop, untilStatus, withWorker } from '../helpers/harness.js';
import { cleanupBus, testBus, testNatsUrl, testRoot, until } from '../helpers/nats.js';
import { autoPassReflexes, unlimitedLifeforce } from '../helpers/scripted.js';
import { startDevTemporal, type DevTemporal } from '../helpers/temporal.js';

type Activities = ReturnType<typeof createActivities>;

let temporal: DevTemporal;
let server: DevTemporal['server'];
let client: Client;
let connection: NativeConnection;
let bundle: WorkflowBundleWithSourceMap;
let bus: Bus & { lines: string[] };

beforeAll(async () => {
  bus = await testBus(testRoot('cmd_temporal'));
  temporal = await startDevTemporal('bus-temporal');
  ({ server, client, connection, bundle } = temporal);
});
afterAll(async () => {
  await cleanupBus(bus);
  await temporal?.stop();
});

/** Just enough of the loop's activities: ticks think nothing, notes are kept here. */
function fakes() {
  const notes: Array<{ text: string; idempotencyKey: string; priority?: number }> = [];
  const activities: Partial<Activities> = {
    ...unlimitedLifeforce,
    async loopStarted() {
      return { interruptedTaskLoops: [], config: {} };
    },
    async loopStopped() {},
    async think(input) {
      return {
        responseId: input.tick,
        summary: 'quiet',
        provider: 'fake',
        model: 'fake',
        commands: [],
        rejected: [],
        parseErrors: [],
        confidence: null,
        unverifiedFacts: 0,
        notesShown: 0,
        promptChars: 0,
        replayed: false,
      };
    },
    async applyCommands() {
      return [];
    },
    async recordNote(input) {
      // Idempotent on the key, as the real activity is (notes.idempotency_key is unique).
      const i = notes.findIndex((n) => n.idempotencyKey === input.idempotencyKey);
      if (i >= 0) return { noteId: i + 1 };
      notes.push({ text: input.text, idempotencyKey: input.idempotencyKey, priority: input.priority });
      return { noteId: notes.length };
    },
    async logProcess() {},
    async probeLlm() {
      return { ok: true, model: 'fake' };
    },
    tickReflexes: autoPassReflexes,
  };
  return { notes, activities };
}

async function status(h: WorkflowHandle): Promise<AgentStatus> {
  return h.query<AgentStatus>('status');
}

/** Publish a stored command again under a new stream id: what a sender's retry past the duplicate window looks like. */
async function replay(subject: string, body: string): Promise<void> {
  await jetstream(bus.nc).publish(subject, body, { msgID: `replay-${Math.random().toString(36).slice(2)}` });
}

describe('bus commands into agentLoopWorkflow (dev server)', () => {
  it('notes and pause/resume arrive exactly once per message id', async () => {
    const f = fakes();
    const spec = { taskQueue: 'bus-commands', workflowBundle: bundle, activities: f.activities };
    await withWorker(connection, spec, async (taskQueue) => {
      // A dotted agent id: its subject escapes the dot, its workflow id keeps it.
      const agentId = 'bus.agent';
      const h = await startLoop(client, taskQueue, {
        agentId,
        maxTicks: 10_000,
        settings: { idle: { on: true, wakeOn: ['note', 'timeout'], timeoutMs: 3_600_000 } },
      });
      await untilStatus(h, (s) => s.tick >= 1, 'the first tick', 30_000);

      // Sent while no consumer runs (the stream and its durable consumer exist, nobody pulls).
      await ensureCommandStream(bus);
      const notes = [];
      for (let i = 0; i < 5; i++)
        notes.push(await sendCommand(bus, agentId, 'note', { text: `note ${i}`, priority: 3, tags: ['bus'] }));
      const pause = await sendCommand(bus, agentId, 'pause', { reason: 'test' });
      // Note 1 and the pause again under new stream ids: past the stream's check, Temporal's must hold.
      const noteSubject = bus.subjects.agentCommand(agentId, 'note');
      const pauseSubject = bus.subjects.agentCommand(agentId, 'pause');
      await replay(
        noteSubject,
        bus.encode(noteSubject, 'AgentNote', { text: 'note 1' }, { messageId: notes[1]!.messageId }).body,
      );

      const consumer = await startCommandConsumer(bus, temporalCommandTarget(client));
      try {
        await until(() => consumer.stats.accepted === 7, 'seven commands accepted', 30_000);
        await untilStatus(h, (s) => f.notes.length === 5 && s.paused, 'five notes and the pause', 30_000);
        expect(f.notes.map((n) => n.text)).toEqual(['note 0', 'note 1', 'note 2', 'note 3', 'note 4']);
        // The update id is the message id: the note's idempotency key carries it.
        expect(f.notes.map((n) => n.idempotencyKey)).toEqual(notes.map((n) => `agent/${agentId}:note:${n.messageId}`));
        expect(f.notes[0]!.priority).toBe(3);

        await sendCommand(bus, agentId, 'resume', {});
        await untilStatus(h, (s) => !s.paused, 'resumed', 30_000);
        // The old pause comes again (same message id): the server knows its request id, so the loop stays resumed.
        await replay(
          pauseSubject,
          bus.encode(pauseSubject, 'AgentPause', { reason: 'test' }, { messageId: pause.messageId }).body,
        );
        await until(() => consumer.stats.accepted === 9, 'the replayed pause accepted', 30_000);
        // A fresh note after it proves the loop handled everything before.
        await sendCommand(bus, agentId, 'note', { text: 'last' });
        // Stored by the activity first, counted by the loop when the update completes.
        await untilStatus(h, (s) => f.notes.length === 6 && s.counters.notesReceived >= 6, 'the last note', 30_000);
        const s = await status(h);
        expect(s.paused).toBe(false);
        expect(s.counters.notesReceived).toBe(6);
        expect(f.notes.map((n) => n.text)).toEqual(['note 0', 'note 1', 'note 2', 'note 3', 'note 4', 'last']);
        expect(consumer.stats).toEqual({ accepted: 10, rejected: 0, retried: 0, gaveUp: 0 });
      } finally {
        await consumer.stop();
        await h.terminate('test over');
      }
    });
  });

  it('commands to an agent that is not running are retried, then given up with the reason', async () => {
    const lines: string[] = [];
    const consumer = await startCommandConsumer(bus, temporalCommandTarget(client), {
      maxDeliver: 2,
      retryDelayMs: 50,
      log: (l) => lines.push(l),
    });
    try {
      await sendCommand(bus, 'nobody', 'note', { text: 'hello?' });
      await sendCommand(bus, 'nobody', 'pause', {});
      await until(() => consumer.stats.gaveUp === 2, 'both given up', 30_000);
    } finally {
      await consumer.stop();
    }
    expect(
      lines.filter((l) => / for agent nobody given up after 2 deliveries: agent\/nobody is not running/.test(l)),
    ).toHaveLength(2);
  });

  it('a worker with NATS_URL takes commands, answers echo and sends heartbeats and events; stopped, it does none of these', async () => {
    const f = fakes();
    const spec = { taskQueue: 'bus-worker', workflowBundle: bundle, activities: f.activities };
    const bus0 = bus;
    await withWorker(connection, spec, async (taskQueue) => {
      const h = await startLoop(client, taskQueue, {
        agentId: 'wb',
        maxTicks: 10_000,
        settings: { idle: { on: true, wakeOn: ['note', 'timeout'], timeoutMs: 3_600_000 } },
      });
      const lines: string[] = [];
      const env = testEnv({ NATS_URL: testNatsUrl, MINDLOOP_BUS_ROOT: bus0.root });
      const started = await startWorkerBus(
        env,
        { address: server.address, namespace: 'default', connection: { address: server.address } },
        (l) => lines.push(l),
      );
      if ('off' in started) throw new Error(`no bus: ${started.off}`);
      const wb = started;
      // The worker speaks for the deployment its Temporal namespace names, under <root>.<deployment>.
      const deployment = await resolveDeployment(env, async () => client);
      expect(deployment.id).toMatch(/^default-[0-9a-f]{12}$/);
      const bus = await testBus(bus0.root, { deployment: deployment.id });
      try {
        expect(wb.summary).toBe(
          `${testNatsUrl} (NATS_URL), deployment ${deployment.id} (Temporal namespace default), subjects ${bus.root}.*: heartbeats and agent events, echo agent, agent commands`,
        );
        // Outside the deployment's subjects nobody answers.
        const outside = await bus0
          .request(
            bus0.subjects.devRequest('echo'),
            'EchoRequest',
            { ping: 'anyone?' },
            { expect: 'EchoResponse', timeoutMs: 1000 },
          )
          .catch((e: unknown) => e);
        expect(outside).toBeInstanceOf(BusRequestError);
        await sendCommand(bus, 'wb', 'note', { text: 'via the worker' });
        await until(() => f.notes.length === 1, 'the note', 30_000);
        const echo = await bus.request(
          bus.subjects.devRequest('echo'),
          'EchoRequest',
          { ping: 'worker?' },
          { expect: 'EchoResponse' },
        );
        expect(echo.payload.pong).toBe('worker?');
        const beats: BusMessage[] = [];
        const sub = bus.on(bus.subjects.heartbeat('wb'), 'HeartbeatSignal', (m) => void beats.push(m));
        const events: BusMessage[] = [];
        const eventSub = bus.subscribe(bus.subjects.agentEvents('wb'), (m) => void events.push(m));
        await bus.flush();
        wb.events.tick({ agentId: 'wb', tick: 5, mode: 'main', model: 'fake:fake', replayed: false });
        wb.events.event('wb', 'verdict', { tick: 5, validationMode: 'auto_pass', rating: null, notes: [] });
        await until(() => beats.length === 1 && events.length === 1, 'the heartbeat and the verdict');
        expect(events[0]!.header.message_type).toBe('AgentVerdict');
        sub.unsubscribe();
        eventSub.unsubscribe();
        await wb.stop();
        const gone = await bus
          .request(
            bus.subjects.devRequest('echo'),
            'EchoRequest',
            { ping: 'anyone?' },
            { expect: 'EchoResponse', timeoutMs: 1000 },
          )
          .catch((e: unknown) => e);
        expect(gone).toBeInstanceOf(BusRequestError);
      } finally {
        await wb.stop();
        await h.terminate('test over');
        await cleanupBus(bus);
      }
      expect(lines).toEqual([]);
    });
  });
});
