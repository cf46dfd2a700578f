/**
 * Durable command delivery (runtime/bus-commands.ts) on the real NATS + JetStream, with a fake
 * target standing in for Temporal (it dedupes by message id, as Temporal does by update id /
 * request id; test/bus/commands-temporal.test.ts runs the real agent workflow):
 * - commands sent while no consumer runs are all delivered once the consumer starts, each
 *   exactly once, in order; a second send of a message id is dropped by the stream;
 * - a bad command (payload, version, type) or one the target refuses is terminated with its
 *   reason and never delivered again;
 * - a command whose agent is not running is retried with backoff, and given up after
 *   maxDeliver deliveries, logged;
 * - a consumer that dies after the target applied a command but before its ack: the command is
 *   delivered again to the next consumer, and the target finds it applied (applied once).
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { afterAll, describe, expect, it } from 'vitest';
import { commandStreamName } from '../../core/bus/subjects.js';
import { makeHeader } from '../../core/bus/header.js';
import type { Bus } from '../../runtime/bus.js';
import {
  CommandRefusedError,
  ensureCommandStream,
  sendCommand,
  startCommandConsumer,
  type AgentCommandMessage,
  type CommandOutcome,
  type CommandTarget,
} from '../../runtime/bus-commands.js';
import { cleanupBus, testBus, testRoot, until } from '../helpers/nats.js';

/** A target that applies each message id once, like Temporal; `decide` may refuse or defer. */
function fakeTarget(
  decide: (c: AgentCommandMessage, delivery: number) => CommandOutcome | Promise<CommandOutcome> = () => ({
    kind: 'accepted',
  }),
) {
  const deliveries = new Map<string, number>();
  const applied: AgentCommandMessage[] = [];
  const target: CommandTarget = {
    async deliver(c) {
      const n = (deliveries.get(c.messageId) ?? 0) + 1;
      deliveries.set(c.messageId, n);
      const outcome = await decide(c, n);
      if (outcome.kind === 'accepted' && !applied.some((a) => a.messageId === c.messageId)) applied.push(c);
      return outcome;
    },
  };
  return { target, deliveries, applied };
}

const buses: Bus[] = [];
async function busFor(label: string): Promise<Bus & { lines: string[] }> {
  const bus = await testBus(testRoot(label));
  buses.push(bus);
  return bus;
}
afterAll(async () => {
  for (const b of buses) await cleanupBus(b);
});

async function waitingInStream(bus: Bus): Promise<number> {
  const info = await (await jetstreamManager(bus.nc)).streams.info(commandStreamName(bus.root));
  return info.state.messages;
}

describe('commands reach their target durably, exactly once per message id', () => {
  it('N commands sent while no consumer runs are all delivered once it starts, once each, in order', async () => {
    const bus = await busFor('cmd_durable');
    // Before any stream exists a send fails saying what is missing.
    await expect(sendCommand(bus, 'two', 'pause', {})).rejects.toThrow(
      `no JetStream stream keeps ${bus.root}.command.agent.two.pause (or the server runs without -js)`,
    );
    await ensureCommandStream(bus);
    const sent: string[] = [];
    for (let i = 0; i < 20; i++) {
      const agent = i % 2 ? 'agent.one' : 'two';
      const r = await sendCommand(bus, agent, 'note', { text: `note ${i}`, priority: i % 10 });
      expect(r.duplicate).toBe(false);
      sent.push(r.messageId);
    }
    sent.push((await sendCommand(bus, 'two', 'pause', { reason: 'lunch' })).messageId);
    sent.push((await sendCommand(bus, 'two', 'resume', {})).messageId);
    // The same message id again (a sender's retry): the stream keeps the first only.
    const again = await sendCommand(bus, 'two', 'note', { text: 'note 0, sent twice' }, { messageId: sent[0] });
    expect(again).toMatchObject({ messageId: sent[0], duplicate: true });
    expect(await waitingInStream(bus)).toBe(22);

    const fake = fakeTarget();
    const consumer = await startCommandConsumer(bus, fake.target);
    await until(() => fake.applied.length === 22, '22 commands applied');
    await new Promise((r) => setTimeout(r, 300)); // nothing more comes
    await consumer.stop();
    expect(fake.applied.map((c) => c.messageId)).toEqual(sent);
    expect([...fake.deliveries.values()].every((n) => n === 1)).toBe(true);
    expect(fake.applied[1]).toMatchObject({
      agentId: 'agent.one',
      command: 'note',
      payload: { text: 'note 1', priority: 1 },
      delivery: 1,
    });
    expect(fake.applied[0]!.payload).toEqual({ text: 'note 0', priority: 0 });
    expect(fake.applied.slice(-2).map((c) => [c.command, c.payload])).toEqual([
      ['pause', { reason: 'lunch' }],
      ['resume', {}],
    ]);
    expect(consumer.stats).toEqual({ accepted: 22, rejected: 0, retried: 0, gaveUp: 0 });
    // Work-queue retention: a handled command is gone from the stream.
    expect(await waitingInStream(bus)).toBe(0);
  });

  it('a bad command, or one the target refuses, is terminated with its reason and not delivered again', async () => {
    const bus = await busFor('cmd_bad');
    await ensureCommandStream(bus, { ackWaitMs: 1000 });
    const js = jetstream(bus.nc);
    const subject = bus.subjects.agentCommand('a', 'note');
    const raw = (id: string, h: object, payload: unknown, on = subject) =>
      js.publish(
        on,
        JSON.stringify({
          header: {
            ...makeHeader({ type: 'AgentNote', generation: 1, version: '1.0', messageId: id, timestamp: new Date() }),
            ...h,
          },
          payload,
        }),
        { msgID: id },
      );
    await raw('bad-payload', {}, { text: '   ' });
    await raw('bad-version', { schema: { generation: 4, version: '4.0' } }, { text: 'hi' });
    await raw('wrong-type', { message_type: 'AgentPause' }, {});
    await js.publish(subject, 'not json', { msgID: 'not-json' });
    await raw('refused', {}, { text: 'please refuse me' });
    await raw('fine', {}, { text: 'fine' });

    const fake = fakeTarget((c) =>
      (c.payload as { text: string }).text.includes('refuse')
        ? { kind: 'rejected', reason: 'agent/a refused it: invalid note' }
        : { kind: 'accepted' },
    );
    const lines: string[] = [];
    const consumer = await startCommandConsumer(bus, fake.target, { log: (l) => lines.push(l) });
    await until(() => consumer.stats.rejected === 5 && consumer.stats.accepted === 1, 'five terminated, one applied');
    await new Promise((r) => setTimeout(r, 2500)); // past ack_wait: nothing comes back
    await consumer.stop();
    expect([...fake.deliveries.entries()]).toEqual([
      ['refused', 1],
      ['fine', 1],
    ]);
    expect(consumer.stats).toEqual({ accepted: 1, rejected: 5, retried: 0, gaveUp: 0 });
    expect(bus.rejections.snapshot().byReason).toEqual({
      bad_payload: 1,
      unknown_version: 1,
      unexpected_type: 1,
      bad_json: 1,
    });
    expect(bus.rejections.recent[0]!.detail).toMatch(
      /^AgentNote 1\.0: payload\.text: .* \(terminated, not redelivered\)$/,
    );
    expect(lines).toContain('bus: command note refused for agent a terminated: agent/a refused it: invalid note');
    expect(await waitingInStream(bus)).toBe(0);
  });

  it('a command whose agent is not running is retried with backoff, then given up after maxDeliver, logged', async () => {
    const bus = await busFor('cmd_retry');
    await ensureCommandStream(bus, { maxDeliver: 3 });
    const late = await sendCommand(bus, 'sleepy', 'pause', {});
    const ghost = await sendCommand(bus, 'ghost', 'note', { text: 'hello?' });
    const fake = fakeTarget((c, n) =>
      c.agentId === 'ghost' || n < 3
        ? { kind: 'retry', reason: `agent/${c.agentId} is not running` }
        : { kind: 'accepted' },
    );
    const lines: string[] = [];
    const consumer = await startCommandConsumer(bus, fake.target, {
      retryDelayMs: 50,
      maxDeliver: 3,
      log: (l) => lines.push(l),
    });
    await until(
      () => consumer.stats.accepted === 1 && consumer.stats.gaveUp === 1,
      'one applied on its third delivery, one given up',
    );
    await consumer.stop();
    expect(fake.deliveries.get(late.messageId)).toBe(3);
    expect(fake.deliveries.get(ghost.messageId)).toBe(3);
    expect(fake.applied.map((c) => c.messageId)).toEqual([late.messageId]);
    expect(consumer.stats).toEqual({ accepted: 1, rejected: 0, retried: 4, gaveUp: 1 });
    expect(lines).toEqual([
      `bus: command note ${ghost.messageId} for agent ghost given up after 3 deliveries: agent/ghost is not running`,
    ]);
  });

  it('a consumer that dies between applying and acking: the next one gets the command again and the target applies it once', async () => {
    const first = await busFor('cmd_crash');
    await ensureCommandStream(first, { ackWaitMs: 1000 });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await sendCommand(first, 'crashy', 'note', { text: `n${i}` })).messageId);
    // One "Temporal" for both consumers: it remembers what it applied, by message id.
    let dieOn: string | undefined = ids[2];
    const fake = fakeTarget(async (c) => {
      if (c.messageId === dieOn) {
        dieOn = undefined;
        await first.nc.close(); // the process dies right after the workflow accepted the command
      }
      return { kind: 'accepted' };
    });
    const lines: string[] = [];
    const dying = await startCommandConsumer(first, fake.target, { log: (l) => lines.push(l) });
    await until(() => first.closed, 'the first consumer to die');
    await dying.stop();
    expect(lines.some((l) => l.includes(`${ids[2]} for agent crashy: applied, but its ack was not confirmed`))).toBe(
      true,
    );

    const second = await testBus(first.root);
    buses.push(second);
    const consumer = await startCommandConsumer(second, fake.target);
    await until(
      () => fake.applied.length === 5 && (fake.deliveries.get(ids[2]!) ?? 0) === 2,
      'all five applied, the unacked one delivered twice',
    );
    await consumer.stop();
    expect(fake.applied.map((c) => c.messageId).sort()).toEqual([...ids].sort());
    expect(fake.deliveries.get(ids[2]!)).toBe(2);
    expect(await waitingInStream(second)).toBe(0);
  });
});

describe('deployments: whose commands a consumer takes, and a sender told before anything is stored', () => {
  it("a command from another deployment is terminated unless the consumer names that deployment a peer; its own and a peer's are applied", async () => {
    const root = testRoot('cmd_deployments');
    const [prod, staging, lab] = await Promise.all([
      testBus(root, { deployment: 'prod' }),
      testBus(root, { deployment: 'staging' }),
      testBus(root, { deployment: 'lab' }),
    ]);
    buses.push(prod, staging, lab);
    expect(prod.root).toBe(`${root}.prod`);
    await ensureCommandStream(prod);
    // Staging and the lab put commands on prod's subjects; each carries its sender.
    const fromStaging = await sendCommand(staging.toDeployment('prod'), 'a1', 'note', { text: 'from staging' });
    const fromLab = await sendCommand(lab.toDeployment('prod'), 'a1', 'note', { text: 'from the lab' });
    const own = await sendCommand(prod, 'a1', 'note', { text: 'from prod' });
    const fake = fakeTarget();
    const lines: string[] = [];
    const consumer = await startCommandConsumer(prod, fake.target, { peers: ['lab'], log: (l) => lines.push(l) });
    await until(() => consumer.stats.accepted + consumer.stats.rejected === 3, 'three handled');
    await consumer.stop();
    expect(fake.applied.map((c) => [c.messageId, c.header.deployment])).toEqual([
      [fromLab.messageId, 'lab'],
      [own.messageId, 'prod'],
    ]);
    expect(lines).toEqual([
      `bus: command note ${fromStaging.messageId} for agent a1 terminated: sent by deployment staging, whose commands deployment prod does not take (MINDLOOP_BUS_PEERS)`,
    ]);
    expect(await waitingInStream(prod)).toBe(0);
  });

  it('a check that refuses: CommandRefusedError with the reason, and nothing stored', async () => {
    const bus = await busFor('cmd_check');
    await ensureCommandStream(bus);
    const err = await sendCommand(
      bus,
      'ghost',
      'note',
      { text: 'hello?' },
      { check: async (id) => (id === 'ghost' ? 'no loop for agent ghost' : null) },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommandRefusedError);
    expect((err as Error).message).toBe('no loop for agent ghost (nothing was sent)');
    expect(await waitingInStream(bus)).toBe(0);
    const ok = await sendCommand(
      bus,
      'alive',
      'note',
      { text: 'hello' },
      { check: async (id) => (id === 'ghost' ? 'no loop for agent ghost' : null) },
    );
    expect(ok.seq).toBe(1);
  });
});
