/**
 * What agents put on the bus (runtime/bus-agents.ts, activities/tick/tick-beat.ts), on the real
 * NATS: a finished think becomes a HeartbeatSignal on low.agent.<id>; the events reach
 * high.agent.<id>.<event>; publishing is fire-and-forget (returns at once, no promise) and a
 * closed bus or a refused payload never reaches the tick, only the log (once a minute per kind).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ThinkInput, ThinkResult } from '../../activities/tick/think.js';
import { observeTicks, type TickBeat } from '../../activities/tick/tick-beat.js';
import type { Bus, BusMessage } from '../../runtime/bus.js';
import { agentEventPublisher, heartbeatObserver } from '../../runtime/bus-agents.js';
import { cleanupBus, testBus, testRoot, until } from '../helpers/nats.js';

const root = testRoot('agents');
let bus: Bus & { lines: string[] };
beforeAll(async () => {
  bus = await testBus(root);
});
afterAll(async () => {
  await cleanupBus(bus);
});

const input = (tick: number): ThinkInput => ({
  agentId: 'pulse.1',
  tick,
  workflowId: 'agent/pulse.1',
  now: new Date().toISOString(),
  mode: 'main',
  loop: { contextMode: 'standard', recentK: 3, notesMode: 'auto' },
  params: { temperature: 0.7, topP: 1, presencePenalty: 0, frequencyPenalty: 0, maxTokens: 100 },
});
const result: ThinkResult = { responseId: 1, summary: 's', provider: 'scripted', model: 'm', commands: [], rejected: [], parseErrors: [], confidence: null, unverifiedFacts: 0, notesShown: 0, promptChars: 1, replayed: false, lifeforce: { budgetId: 'agent:pulse.1', charged: 2.5, available: 97.5 } };

describe('tick heartbeat', () => {
  it('each finished think publishes a HeartbeatSignal on low.agent.<id>', async () => {
    const got: BusMessage[] = [];
    const sub = bus.on(bus.subjects.heartbeat('pulse.1'), 'HeartbeatSignal', (m) => void got.push(m));
    await bus.flush();
    const acts = observeTicks({ think: async (_i: ThinkInput) => result }, heartbeatObserver(bus));
    expect(await acts.think(input(7))).toBe(result);
    await until(() => got.length === 1, 'the heartbeat');
    expect(got[0]!.subject).toBe(`${root}.low.agent.pulse~2E1`);
    expect(got[0]!.payload).toEqual({ agent_id: 'pulse.1', tick: 7, loop: 'main', model: 'scripted:m', replayed: false, lifeforce: { charged: 2.5, available: 97.5 } });
    sub.unsubscribe();
  });

  it('a failed think sends no beat; a throwing observer never fails the tick', async () => {
    const beats: TickBeat[] = [];
    const failing = observeTicks({ think: async (_i: ThinkInput): Promise<ThinkResult> => Promise.reject(new Error('model away')) }, (b) => void beats.push(b));
    await expect(failing.think(input(1))).rejects.toThrow('model away');
    expect(beats).toEqual([]);
    const lines: string[] = [];
    const rude = observeTicks({ think: async (_i: ThinkInput) => result }, () => {
      throw new Error('observer broke');
    }, (l) => lines.push(l));
    expect(await rude.think(input(2))).toBe(result);
    expect(lines).toEqual(['tick beat of pulse.1 tick 2 not sent: observer broke']);
  });

  it('publishing is fire-and-forget: synchronous, quick, and silent but logged when the bus is closed', async () => {
    const lines: string[] = [];
    const other = await testBus(root);
    const observe = heartbeatObserver(other, (l) => lines.push(l));
    const beat: TickBeat = { agentId: 'quick', tick: 1, mode: 'main', model: 'x:y', replayed: false };
    const t0 = performance.now();
    for (let i = 0; i < 1000; i++) expect(observe({ ...beat, tick: i })).toBeUndefined();
    // Generous on a loaded machine: the point is microseconds, not a network round trip each.
    expect(performance.now() - t0).toBeLessThan(1000);
    await other.close();
    for (let i = 0; i < 5; i++) expect(() => observe(beat)).not.toThrow();
    expect(lines).toEqual(['bus: heartbeat not published (1 dropped so far): closed connection']);
  });
});

describe('agent events', () => {
  it('reply, escalation, verdict and learning reach high.agent.<id>.<event>; a bad payload is logged, not thrown', async () => {
    const got: BusMessage[] = [];
    const sub = bus.subscribe(bus.subjects.agentEvents('scribe'), (m) => void got.push(m));
    await bus.flush();
    const lines: string[] = [];
    const events = agentEventPublisher(bus, (l) => lines.push(l));
    expect(events.reply('scribe', { tick: 3, summary: 'said hi', commands: 1, confidence: 0.8 })).toBe(true);
    expect(events.escalation('scribe', { escalation_id: 'esc-1', reason: 'unsure', severity: 'high' })).toBe(true);
    expect(events.verdict('scribe', { tick: 3, validation_mode: 'strict', rating: 4, notes: ['ok'] })).toBe(true);
    expect(events.learning('scribe', { predicate: 'prefers', subject: 'user', object: 'short answers', confidence: 0.6 })).toBe(true);
    expect(events.reply('scribe', { tick: -1, summary: 'x', commands: 0, confidence: null })).toBe(false);
    await until(() => got.length === 4, 'four events');
    expect(got.map((m) => [m.subject.split('.').at(-1), m.header.message_type])).toEqual([
      ['reply', 'AgentReply'],
      ['escalation', 'AgentEscalation'],
      ['verdict', 'AgentVerdict'],
      ['learning', 'AgentLearning'],
    ]);
    expect(got[0]!.payload).toEqual({ agent_id: 'scribe', tick: 3, summary: 'said hi', commands: 1, confidence: 0.8 });
    expect(lines).toEqual([expect.stringMatching(/^bus: reply not published \(1 dropped so far\): AgentReply 1\.0: payload\.tick: Too small/)]);
    sub.unsubscribe();
  });
});
