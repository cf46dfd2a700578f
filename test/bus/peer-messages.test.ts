/**
 * A peer message on the bus (real NATS): the sink the worker gives the activities turns the
 * `message` event of `messages.send` into an AgentMessage on `high.agent.<sender>.message`,
 * clipped to its stable schema; a payload the schema refuses is logged, never thrown.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { messageCatalogue } from '../../core/bus/catalogue.js';
import type { Bus, BusMessage } from '../../runtime/bus.js';
import { agentEventPublisher, agentEventSink } from '../../runtime/bus-agents.js';
import { cleanupBus, testBus, testRoot, until } from '../helpers/nats.js';

const root = testRoot('peer_messages');
let bus: Bus & { lines: string[] };
beforeAll(async () => {
  bus = await testBus(root);
});
afterAll(async () => {
  await cleanupBus(bus);
});

describe('AgentMessage', () => {
  it("a sent message reaches high.agent.<sender>.message, clipped to generation 1's limits", async () => {
    const got: BusMessage[] = [];
    const sub = bus.on(bus.subjects.agentEvent('ana.1', 'message'), 'AgentMessage', (m) => void got.push(m));
    await bus.flush();
    const lines: string[] = [];
    const sink = agentEventSink(bus, (l) => lines.push(l));
    sink.event('ana.1', 'message', { to: 'ben', noteId: 7, tick: 3, text: 'hello', priority: 2, tags: ['greeting'] });
    sink.event('ana.1', 'message', {
      to: 'ben',
      noteId: 8,
      tick: 4,
      text: 'y'.repeat(5000),
      priority: 99,
      tags: Array.from({ length: 30 }, (_, i) => `t${i}${'z'.repeat(100)}`),
    });
    await until(() => got.length === 2, 'two messages');
    expect(got[0]!.subject).toBe(`${root}.high.agent.ana~2E1.message`);
    expect(got[0]!.payload).toEqual({
      agent_id: 'ana.1',
      to: 'ben',
      note_id: 7,
      tick: 3,
      text: 'hello',
      priority: 2,
      tags: ['greeting'],
    });
    const long = got[1]!.payload as { text: string; priority: number; tags: string[] };
    expect(long.text).toHaveLength(2000);
    expect(long.priority).toBe(10);
    expect(long.tags).toHaveLength(20);
    expect(long.tags.every((t) => t.length === 64)).toBe(true);
    for (const m of got) expect(messageCatalogue.AgentMessage.stable[0].safeParse(m.payload).success).toBe(true);
    expect(lines).toEqual([]);
    sub.unsubscribe();
  });

  it('a payload the schema refuses is logged, not thrown', () => {
    const lines: string[] = [];
    const publish = agentEventPublisher(bus, (l) => lines.push(l));
    expect(publish.message('ana', { to: 'ben', note_id: 0, tick: 1, text: 'x', priority: 1, tags: [] })).toBe(false);
    expect(lines).toEqual([
      expect.stringMatching(
        /^bus: message not published \(1 dropped so far\): AgentMessage 1\.0: payload\.note_id: Too small/,
      ),
    ]);
  });
});
