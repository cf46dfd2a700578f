/**
 * Commands published on the bus reach an agent's workflow across a worker kill: the real
 * Temporal dev server, Postgres and NATS (JetStream), the worker as a child process
 * (`workers/main.ts --queue mindloop`, on the bus under a root of this test's own). Notes are
 * sent while it runs, it is SIGKILLed, more are sent while none runs, a new one starts: every
 * note is stored exactly once, none lost, none twice.
 */
import type { Client } from '@temporalio/client';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type DbHandle } from '../../db/client.js';
import { agents, llmRegistry, notes } from '../../db/schema/index.js';
import type { Bus } from '../../runtime/bus.js';
import { ensureCommandStream, sendCommand } from '../../runtime/bus-commands.js';
import type { AgentStatus, agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import { cleanupBus, testBus, testNatsUrl, testRoot } from '../helpers/nats.js';
import { untilStatus } from '../helpers/harness.js';
import { startKillableStack, waitFor, type KillableStack } from '../helpers/worker-process.js';

let ks: KillableStack;
let client: Client;
let handle: DbHandle;
let bus: Bus;

beforeAll(async () => {
  ks = await startKillableStack('bus-kill');
  ({ client } = ks);
  handle = createDb(ks.dbUrl);
  // The worker and this test speak for one deployment, named here (no Temporal namespace needed).
  bus = await testBus(testRoot('kill'), { deployment: 'kill' });
}, 180_000);
afterAll(async () => {
  await cleanupBus(bus);
  await handle?.close();
  await ks?.stop();
});

const onBus = () =>
  ks.spawnWorker({ NATS_URL: testNatsUrl, MINDLOOP_BUS_ROOT: bus.busRoot, MINDLOOP_DEPLOYMENT: 'kill' });

describe('bus commands survive a worker kill', () => {
  it('30 notes, the worker SIGKILLed after 10 and restarted after 20: each stored once', async () => {
    const db = handle.db;
    const agentId = 'listener';
    await db.insert(agents).values({ id: agentId, name: agentId });
    await db.insert(llmRegistry).values({
      agentId,
      name: 'mind',
      provider: 'scripted',
      model: 'scripted',
      role: 'agent',
      priority: 1,
      params: { replies: ['Noted.'] },
    });
    // A short ack wait: a command the killed worker had applied but not acked comes back in 2 s, not 60.
    await ensureCommandStream(bus, { ackWaitMs: 2000 });

    let worker = onBus();
    try {
      const h = await client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
        taskQueue: 'mindloop',
        workflowId: `agent/${agentId}`,
        args: [{ agentId, reflexes: false, settings: { idle: { on: true, wakeOn: ['note'], timeoutMs: 3_600_000 } } }],
      });
      await untilStatus(h, (s) => s.tick >= 1, 'the first tick', 90_000);
      const stored = async () =>
        (
          await db
            .select({ text: notes.text })
            .from(notes)
            .where(and(eq(notes.agentId, agentId), eq(notes.direction, 'in')))
        ).map((n) => n.text);

      const sent: string[] = [];
      const send = async (i: number) => {
        sent.push(`note ${i}`);
        await sendCommand(bus, agentId, 'note', { text: `note ${i}` });
      };
      for (let i = 0; i < 10; i++) await send(i);
      // Killed while it works through them: some stored, maybe one applied but not acked.
      await waitFor('some notes stored', 60_000, async () => ((await stored()).length >= 3 ? true : undefined), 20);
      const exited = new Promise((r) => worker.once('exit', r));
      worker.kill('SIGKILL');
      await exited;
      for (let i = 10; i < 20; i++) await send(i);
      worker = onBus();
      for (let i = 20; i < 30; i++) await send(i);

      await waitFor('all 30 notes', 120_000, async () => ((await stored()).length >= 30 ? true : undefined));
      // Long enough for a redelivery of anything unacked (ack wait 2 s) to land, if it were to double.
      await new Promise((r) => setTimeout(r, 5000));
      const texts = await stored();
      expect(texts).toHaveLength(30);
      expect([...texts].sort()).toEqual([...sent].sort());
      expect((await h.query<AgentStatus>('status')).counters.notesReceived).toBe(30);
      await h.terminate('test over');
    } finally {
      if (worker.exitCode === null) worker.kill('SIGKILL');
    }
  }, 300_000);
});
