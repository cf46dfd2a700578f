/**
 * What agents put on the bus (runtime/bus-agents.ts, activities/tick/tick-beat.ts), on the real
 * NATS: a finished think becomes a HeartbeatSignal on low.agent.<id> and, for the main loop, an
 * AgentReply; the events reach high.agent.<id>.<event>, clipped to their schemas' limits;
 * publishing is fire-and-forget (returns at once, no promise) and a closed bus or a refused
 * payload never reaches the tick, only the log (once a minute per kind).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardEvents, type AgentEventSink, type TickBeat } from '../../activities/agent-events.js';
import type { ThinkInput, ThinkResult } from '../../activities/tick/think.js';
import { observeThink } from '../../activities/tick/tick-beat.js';
import { messageCatalogue } from '../../core/bus/catalogue.js';
import type { Bus, BusMessage } from '../../runtime/bus.js';
import { agentEventPublisher, agentEventSink } from '../../runtime/bus-agents.js';
import { cleanupBus, testBus, testRoot, until } from '../helpers/nats.js';

const root = testRoot('agents');
let bus: Bus & { lines: string[] };
beforeAll(async () => {
  bus = await testBus(root);
});
afterAll(async () => {
  await cleanupBus(bus);
});

const input = (tick: number, task?: number): ThinkInput => ({
  agentId: 'pulse.1',
  tick,
  workflowId: 'agent/pulse.1',
  now: new Date().toISOString(),
  mode: task === undefined ? 'main' : 'task',
  ...(task === undefined ? {} : { taskId: task }),
  loop: { contextMode: 'standard', recentK: 3, notesMode: 'auto' },
  params: { temperature: 0.7, topP: 1, presencePenalty: 0, frequencyPenalty: 0, maxTokens: 100 },
});
const cmd = (cmdId: string) => ({ cmdId, type: 'diary.add', args: {} });
const result: ThinkResult = {
  responseId: 1,
  summary: 's',
  provider: 'scripted',
  model: 'm',
  commands: [cmd('a'), cmd('b')],
  rejected: [],
  parseErrors: [],
  confidence: 0.4,
  unverifiedFacts: 0,
  notesShown: 0,
  promptChars: 1,
  replayed: false,
  lifeforce: { budgetId: 'agent:pulse.1', charged: 2.5, available: 97.5 },
};

/** A sink that keeps what it is told. */
function recorder() {
  const told: Array<{ beat: TickBeat } | { agentId: string; kind: string; event: unknown }> = [];
  const sink: AgentEventSink = {
    tick: (beat) => void told.push({ beat }),
    event: (agentId, kind, event) => void told.push({ agentId, kind, event }),
  };
  return { told, sink };
}

describe('tick heartbeat and reply', () => {
  it('each finished think publishes a HeartbeatSignal on low.agent.<id>; a main-loop tick also an AgentReply, a task-loop tick none', async () => {
    const beats: BusMessage[] = [];
    const replies: BusMessage[] = [];
    const subs = [
      bus.on(bus.subjects.heartbeat('pulse.1'), 'HeartbeatSignal', (m) => void beats.push(m)),
      bus.on(bus.subjects.agentEvent('pulse.1', 'reply'), 'AgentReply', (m) => void replies.push(m)),
    ];
    await bus.flush();
    const acts = observeThink({ think: async (_i: ThinkInput) => result }, agentEventSink(bus));
    expect(await acts.think(input(7))).toBe(result);
    await until(() => beats.length === 1 && replies.length === 1, 'the heartbeat and the reply');
    expect(beats[0]!.subject).toBe(`${root}.low.agent.pulse~2E1`);
    expect(beats[0]!.payload).toEqual({
      agent_id: 'pulse.1',
      tick: 7,
      loop: 'main',
      model: 'scripted:m',
      replayed: false,
      lifeforce: { charged: 2.5, available: 97.5 },
    });
    expect(replies[0]!.subject).toBe(`${root}.high.agent.pulse~2E1.reply`);
    expect(replies[0]!.payload).toEqual({
      agent_id: 'pulse.1',
      tick: 7,
      summary: 's',
      model: 'scripted:m',
      commands: 2,
      confidence: 0.4,
    });

    // A task loop's tick 2 beats (with its task) but says nothing as a reply; the next main tick does.
    await acts.think(input(2, 4));
    await acts.think(input(8));
    await until(() => beats.length === 3 && replies.length === 2, 'two more beats and one more reply');
    expect(beats[1]!.payload).toMatchObject({ tick: 2, loop: 'task', task_id: 4 });
    expect(replies.map((m) => (m.payload as { tick: number }).tick)).toEqual([7, 8]);
    for (const s of subs) s.unsubscribe();
  });

  it('a failed think tells nothing; a throwing sink never fails the tick', async () => {
    const { told, sink } = recorder();
    const failing = observeThink(
      { think: async (_i: ThinkInput): Promise<ThinkResult> => Promise.reject(new Error('model away')) },
      sink,
    );
    await expect(failing.think(input(1))).rejects.toThrow('model away');
    expect(told).toEqual([]);
    const broken: AgentEventSink = {
      tick: () => {
        throw new Error('sink broke');
      },
      event: () => {
        throw new Error('sink broke too');
      },
    };
    const lines: string[] = [];
    expect(
      await observeThink({ think: async (_i: ThinkInput) => result }, broken, (l) => lines.push(l)).think(input(2)),
    ).toBe(result);
    expect(lines).toEqual(['tick beat of pulse.1 tick 2 not sent: sink broke']);
    // Guarded (as createActivities guards it), each call is caught on its own: the reply is still attempted.
    const guarded: string[] = [];
    expect(
      await observeThink(
        { think: async (_i: ThinkInput) => result },
        guardEvents(broken, (l) => guarded.push(l)),
      ).think(input(3)),
    ).toBe(result);
    expect(guarded).toEqual([
      'tick beat of pulse.1 tick 3 not sent: sink broke',
      'reply event of pulse.1 not sent: sink broke too',
    ]);
  });

  it('publishing is fire-and-forget: synchronous, quick, and silent but logged when the bus is closed', async () => {
    const lines: string[] = [];
    const other = await testBus(root);
    const sink = agentEventSink(other, (l) => lines.push(l));
    const beat: TickBeat = { agentId: 'quick', tick: 1, mode: 'main', model: 'x:y', replayed: false };
    const t0 = performance.now();
    for (let i = 0; i < 1000; i++) {
      expect(sink.tick({ ...beat, tick: i })).toBeUndefined();
      expect(
        sink.event('quick', 'reply', { tick: i, summary: 'hi', model: 'x:y', commands: 0, confidence: null }),
      ).toBeUndefined();
    }
    // Generous on a loaded machine: the point is microseconds, not a network round trip each.
    expect(performance.now() - t0).toBeLessThan(1000);
    await other.close();
    for (let i = 0; i < 5; i++) {
      expect(() => sink.tick(beat)).not.toThrow();
      expect(() =>
        sink.event('quick', 'verdict', { tick: 1, validationMode: 'normal', rating: 1, notes: [] }),
      ).not.toThrow();
    }
    expect(lines).toEqual([
      'bus: heartbeat not published (1 dropped so far): closed connection',
      'bus: verdict not published (2 dropped so far): closed connection',
    ]);
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
    expect(
      events.learning('scribe', { predicate: 'prefers', subject: 'user', object: 'short answers', confidence: 0.6 }),
    ).toBe(true);
    expect(events.reply('scribe', { tick: -1, summary: 'x', commands: 0, confidence: null })).toBe(false);
    await until(() => got.length === 4, 'four events');
    expect(got.map((m) => [m.subject.split('.').at(-1), m.header.message_type])).toEqual([
      ['reply', 'AgentReply'],
      ['escalation', 'AgentEscalation'],
      ['verdict', 'AgentVerdict'],
      ['learning', 'AgentLearning'],
    ]);
    expect(got[0]!.payload).toEqual({ agent_id: 'scribe', tick: 3, summary: 'said hi', commands: 1, confidence: 0.8 });
    expect(lines).toEqual([
      expect.stringMatching(
        /^bus: reply not published \(1 dropped so far\): AgentReply 1\.0: payload\.tick: Too small/,
      ),
    ]);
    sub.unsubscribe();
  });

  it('the sink maps each event to its payload, clipped to the schema: long texts, too many notes, numbers out of range', async () => {
    const got: BusMessage[] = [];
    const sub = bus.subscribe(bus.subjects.agentEvents('clipper'), (m) => void got.push(m));
    await bus.flush();
    const lines: string[] = [];
    const sink = agentEventSink(bus, (l) => lines.push(l));
    const long = 'x'.repeat(5000);
    sink.event('clipper', 'reply', { tick: 1, summary: long, model: `p:${long}`, commands: 3, confidence: 1.7 });
    sink.event('clipper', 'verdict', {
      tick: 1,
      validationMode: 'normal',
      rating: Number.NaN,
      notes: Array.from({ length: 30 }, (_, i) => `${i} ${long}`),
    });
    sink.event('clipper', 'escalation', {
      escalationId: 'clipper.t1.c1',
      category: 'code',
      reason: long,
      humanRequired: true,
      tick: 1,
    });
    sink.event('clipper', 'escalation', {
      escalationId: 'clipper.t2.c1',
      category: 'general',
      reason: 'why',
      humanRequired: false,
    });
    sink.event('clipper', 'learning', {
      shardType: 'agent:clipper',
      predicate: 'style_preference',
      args: { style: long, stance: 'prefer' },
      confidence: 0.5,
      reinforced: false,
    });
    await until(() => got.length === 5, 'five events');
    expect(lines).toEqual([]);
    // Every payload parses under its own stable schema (generation 1).
    for (const m of got)
      expect(messageCatalogue[m.header.message_type as 'AgentReply'].stable[0].safeParse(m.payload).success).toBe(true);
    const [reply, verdict, urgent, plain, learning] = got.map((m) => m.payload as Record<string, unknown>);
    expect(reply).toMatchObject({ tick: 1, commands: 3, confidence: 1 });
    expect((reply!.summary as string).length).toBe(2000);
    expect((reply!.model as string).length).toBe(200);
    expect(verdict).toMatchObject({ tick: 1, validation_mode: 'normal', rating: null });
    expect(verdict!.notes).toHaveLength(20);
    expect((verdict!.notes as string[]).every((n) => n.length === 500)).toBe(true);
    expect((verdict!.notes as string[])[19]!.startsWith('19 ')).toBe(true);
    expect(urgent).toMatchObject({ agent_id: 'clipper', escalation_id: 'clipper.t1.c1', severity: 'high', tick: 1 });
    expect((urgent!.reason as string).startsWith('code: xxx')).toBe(true);
    expect((urgent!.reason as string).length).toBe(2000);
    expect(plain).toEqual({
      agent_id: 'clipper',
      escalation_id: 'clipper.t2.c1',
      reason: 'general: why',
      severity: 'medium',
    });
    expect(learning).toMatchObject({ predicate: 'style_preference', subject: 'agent:clipper', confidence: 0.5 });
    expect((learning!.object as string).startsWith('{"style":"xxx')).toBe(true);
    expect((learning!.object as string).length).toBe(2000);
    sub.unsubscribe();
  });
});
