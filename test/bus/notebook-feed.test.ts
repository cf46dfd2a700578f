/**
 * The notebook's live feed filled from the real NATS: what a worker's event sink publishes (a
 * heartbeat, the reply, the verdict, an escalation, a learning) reaches the feed as the page's
 * events, for every agent or one, with nothing refused; once stopped it hears nothing more; and
 * the in-process sink says the same.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentEventSink } from '../../activities/agent-events.js';
import type { Bus } from '../../runtime/bus.js';
import { agentEventSink } from '../../runtime/bus-agents.js';
import { TickFeed, feedFromBus, feedSink, type FeedEvent } from '../../runtime/notebook/index.js';
import { cleanupBus, testBus, testRoot, until } from '../helpers/nats.js';

const root = testRoot('notebook_feed');
let bus: Bus & { lines: string[] };
let worker: Bus & { lines: string[] };

beforeAll(async () => {
  [bus, worker] = await Promise.all([testBus(root), testBus(root)]);
});
afterAll(async () => {
  await worker?.close();
  await cleanupBus(bus);
});

/** One tick's worth of what the activities tell their sink. */
function tellTick(sink: AgentEventSink, agentId: string, tick: number): void {
  sink.tick({
    agentId,
    tick,
    mode: 'main',
    model: 'scripted:x',
    replayed: false,
    lifeforce: { charged: 3, available: 97 },
  });
  sink.event(agentId, 'reply', {
    tick,
    summary: `said <b>${tick}</b>`,
    model: 'scripted:x',
    commands: 1,
    confidence: 0.5,
  });
  sink.event(agentId, 'verdict', { tick, validationMode: 'normal', rating: 1.5, notes: ['fine'] });
}

const expected = (agentId: string, tick: number): FeedEvent[] => [
  { kind: 'beat', agentId, tick, loop: 'main', model: 'scripted:x', lifeforce: { charged: 3, available: 97 } },
  { kind: 'reply', agentId, tick, summary: `said <b>${tick}</b>`, model: 'scripted:x', commands: 1, confidence: 0.5 },
  { kind: 'verdict', agentId, tick, validationMode: 'normal', rating: 1.5, notes: ['fine'] },
];

describe('the notebook feed', () => {
  it('from the bus: every agent’s beats and events, or one agent’s; nothing refused; nothing after stop', async () => {
    const feed = new TickFeed();
    const all: FeedEvent[] = [];
    const one: FeedEvent[] = [];
    feed.subscribe((e) => all.push(e));
    feed.subscribe((e) => one.push(e), 'agent.1');
    const sub = feedFromBus(feed, bus);
    await bus.flush();
    const sink = agentEventSink(worker);
    tellTick(sink, 'agent.1', 7);
    tellTick(sink, 'other', 3);
    sink.event('agent.1', 'escalation', {
      escalationId: 'agent.1.t7.e1',
      category: 'code',
      reason: 'is this right?',
      humanRequired: true,
      tick: 7,
    });
    sink.event('agent.1', 'learning', {
      shardType: 'agent:agent.1',
      predicate: 'avoid_pattern',
      args: { pattern: 'rm' },
      confidence: 0.4,
      reinforced: false,
    });
    await worker.flush();
    await until(() => all.length === 8, 'eight feed events');
    const ofAgent = (id: string) => all.filter((e) => e.agentId === id);
    // Each subject's messages arrive in order; the subjects among themselves need not.
    expect(ofAgent('other')).toEqual(expect.arrayContaining(expected('other', 3)));
    expect(ofAgent('agent.1')).toEqual(
      expect.arrayContaining([
        ...expected('agent.1', 7),
        {
          kind: 'escalation',
          agentId: 'agent.1',
          escalationId: 'agent.1.t7.e1',
          reason: 'code: is this right?',
          humanRequired: true,
          tick: 7,
        },
        { kind: 'learning', agentId: 'agent.1', predicate: 'avoid_pattern', shard: 'agent:agent.1', confidence: 0.4 },
      ]),
    );
    expect(one).toHaveLength(5);
    expect(bus.rejections.snapshot().total).toBe(0);
    sub.stop();
    tellTick(sink, 'agent.1', 8);
    await worker.flush();
    await new Promise((r) => setTimeout(r, 200));
    expect(all).toHaveLength(8);
  });

  it('in-process: the worker’s sink tells the feed the same events; a failing listener does not reach it', () => {
    const lines: string[] = [];
    const feed = new TickFeed((l) => lines.push(l));
    const got: FeedEvent[] = [];
    feed.subscribe(() => {
      throw new Error('page gone');
    });
    feed.subscribe((e) => got.push(e));
    tellTick(feedSink(feed), 'agent.1', 7);
    expect(got).toEqual(expected('agent.1', 7));
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/a feed listener failed: page gone/);
  });
});
