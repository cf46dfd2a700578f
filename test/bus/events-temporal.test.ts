/**
 * A ticking agent on the bus, end to end: the Temporal dev server runs the product's
 * agentLoopWorkflow on a worker with the real activities (real Postgres, the scripted model and
 * a scripted validator) and the worker's event sink on the real NATS. Each tick the workflow
 * made is one heartbeat, one reply and one verdict, matching what Postgres recorded for that
 * tick; the command a tick got wrong becomes a learning (threshold 1), published too.
 */
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { agentConfig, agents, learnings, llmRecentResponses, llmRegistry } from '../../db/schema/index.js';
import type { Bus, BusMessage } from '../../runtime/bus.js';
import { agentEventSink } from '../../runtime/bus-agents.js';
import { startLoop, withWorker } from '../helpers/harness.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { cleanupBus, testBus, testRoot, until } from '../helpers/nats.js';
import { thinkScript } from '../helpers/scripted.js';
import { startDevTemporal, type DevTemporal } from '../helpers/temporal.js';

const root = testRoot('events_temporal');
let bus: Bus & { lines: string[] };
let workerBus: Bus & { lines: string[] };
let database: MigratedDatabase;
let temporal: DevTemporal;

beforeAll(async () => {
  [bus, workerBus, database, temporal] = await Promise.all([
    testBus(root),
    testBus(root),
    migratedDatabase('mindloop_bus_events_loop', 6),
    startDevTemporal('bus-events'),
  ]);
}, 120_000);
afterAll(async () => {
  await workerBus?.close();
  await cleanupBus(bus);
  await temporal?.stop();
  await database?.dispose();
});

/** Tick 2's diary.add lacks its content: a rejected edit, which at threshold 1 is a learning. */
function say(tick: number): string {
  const diary =
    tick === 2
      ? { title: 'Forgot the content' }
      : { title: `Watch ${tick}`, content: `The lighthouse blinked ${tick} times.` };
  const commands = tick === 3 ? '' : `\n${renderCommandBlock([{ cmdId: `d${tick}`, type: 'diary.add', args: diary }])}`;
  return `Tick ${tick}: I keep watch over the lighthouse.\nConfidence: 0.7${commands}`;
}

describe('a ticking agent publishes its heartbeats and events (dev server, real activities)', () => {
  it('each tick the workflow made: one heartbeat, one reply, one verdict, as recorded; the learning it made', async () => {
    const agentId = 'keeper.1';
    await database.db.insert(agents).values({ id: agentId, name: 'Keeper' });
    await database.db.insert(llmRegistry).values([
      { agentId, name: 'mind', provider: 'scripted', model: 'keeper-mind', role: 'agent', priority: 1 },
      { agentId, name: 'judge', provider: 'scripted', model: 'keeper-judge', role: 'validator', priority: 1 },
    ]);
    await database.db.insert(agentConfig).values({ agentId, key: 'learning_threshold', value: 1 });

    const sinkLog: string[] = [];
    const activities = createActivities({
      db: database.db,
      llm: {
        env: {},
        toolsDir: repoToolsDir,
        scriptedReply: thinkScript((messages) =>
          say(Number(/tick (\d+), time/.exec(messages.map((m) => m.content).join('\n'))?.[1] ?? 0)),
        ),
      },
      events: agentEventSink(workerBus, (l) => sinkLog.push(l)),
    });
    const events: BusMessage[] = [];
    const beats: BusMessage[] = [];
    const subs = [
      bus.subscribe(bus.subjects.agentEvents(agentId), (m) => void events.push(m)),
      bus.on(bus.subjects.heartbeat(agentId), 'HeartbeatSignal', (m) => void beats.push(m)),
    ];
    await bus.flush();

    const spec = { taskQueue: 'bus-events', workflowBundle: temporal.bundle, activities };
    const result = await withWorker(temporal, spec, async (taskQueue) => {
      const h = await startLoop(temporal.client, taskQueue, { agentId, maxTicks: 3, settings: { delayMs: 0 } });
      return h.result();
    });
    expect(result).toEqual({ agentId, ticks: 3, reason: 'max_ticks' });

    const recorded = (
      await database.db.select().from(llmRecentResponses).where(eq(llmRecentResponses.agentId, agentId))
    ).sort((a, b) => a.tick - b.tick);
    expect(recorded.map((r) => r.tick)).toEqual([1, 2, 3]);
    const [learned] = await database.db.select().from(learnings).where(eq(learnings.agentId, agentId));
    expect(learned).toMatchObject({ factPredicate: 'avoid_error', shardType: `agent:${agentId}` });

    const kind = (m: BusMessage) => m.subject.split('.').at(-1)!;
    const payloads = (event: string) =>
      events.filter((m) => kind(m) === event).map((m) => m.payload as Record<string, unknown>);
    await until(
      () =>
        beats.length >= 3 &&
        payloads('reply').length >= 3 &&
        payloads('verdict').length >= 3 &&
        payloads('learning').length >= 1,
      'three ticks of beats, replies and verdicts, and the learning',
    );
    for (const s of subs) s.unsubscribe();

    expect(beats.map((m) => m.payload)).toEqual(
      recorded.map((r) =>
        expect.objectContaining({
          agent_id: agentId,
          tick: r.tick,
          loop: 'main',
          model: 'scripted:keeper-mind',
          replayed: false,
        }),
      ),
    );
    expect(payloads('reply')).toEqual(
      recorded.map((r) => ({
        agent_id: agentId,
        tick: r.tick,
        summary: expect.stringMatching(new RegExp(`^Tick ${r.tick}: I keep watch over the lighthouse\\.`)),
        model: 'scripted:keeper-mind',
        commands: r.tick === 3 ? 0 : 1,
        confidence: 0.7,
      })),
    );
    // The verdict of each tick is the one recorded on its reply row (a validator answered: normal mode, a rating).
    expect(payloads('verdict')).toEqual(
      recorded.map((r) => ({
        agent_id: agentId,
        tick: r.tick,
        validation_mode: r.validationMode,
        rating: r.rating,
        notes: expect.any(Array),
      })),
    );
    expect(recorded.every((r) => r.validationMode === 'normal' && r.rating === 1)).toBe(true);
    expect(payloads('learning')).toEqual([
      {
        agent_id: agentId,
        predicate: 'avoid_error',
        subject: `agent:${agentId}`,
        object: expect.any(String),
        confidence: learned!.confidence,
      },
    ]);
    expect(JSON.parse(payloads('learning')[0]!.object as string)).toEqual(learned!.factArgs);
    // In the order the loop did the work: think, reflexes, then tick 2's commands.
    expect(
      events.map((m) =>
        kind(m) === 'learning' ? 'learning' : `${kind(m)}:${String((m.payload as { tick: number }).tick)}`,
      ),
    ).toEqual(['reply:1', 'verdict:1', 'reply:2', 'verdict:2', 'learning', 'reply:3', 'verdict:3']);
    expect(sinkLog).toEqual([]);
  });
});
