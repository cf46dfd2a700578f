/**
 * The notebook's live feed: each finished tick (its beat), the reply, the verdict, an escalation
 * opened and a learning saved, as the agents' activities tell them once their own write has
 * committed. Two sources fill it, one at a time:
 *
 * - the bus, when the process has one: the heartbeats on `<root>.low.agent.*` and the events on
 *   `<root>.high.agent.*.<event>` of every worker on the same root, in this process or another;
 * - otherwise the worker in this process, through a tee of its event sink (`feedSink`).
 *
 * Not Postgres LISTEN/NOTIFY: the embedded PGlite serves every client over one session, and its
 * socket hands a notification to whichever client's query is running, not to the listener.
 * A feed is a side channel: a listener that throws is logged and never reaches the tick.
 */
import type { AgentEventKind, AgentEvents, AgentEventSink, TickBeat } from '../../activities/agent-events.js';
import type { BusPayloadOut } from '../../core/bus/catalogue.js';
import type { Bus } from '../bus.js';

/** One thing that happened to an agent, as the page receives it. */
export type FeedEvent =
  | {
      kind: 'beat';
      agentId: string;
      tick: number;
      loop: 'main' | 'task';
      taskId?: number;
      model: string;
      lifeforce?: { charged: number; available: number | null };
    }
  | {
      kind: 'reply';
      agentId: string;
      tick: number;
      summary: string;
      model: string;
      commands: number;
      confidence: number | null;
    }
  | { kind: 'verdict'; agentId: string; tick: number; validationMode: string; rating: number | null; notes: string[] }
  | { kind: 'escalation'; agentId: string; escalationId: string; reason: string; humanRequired: boolean; tick?: number }
  | { kind: 'learning'; agentId: string; predicate: string; shard: string; confidence: number };

type Listener = (e: FeedEvent) => void;

/** Listeners by agent (or all agents); `publish` tells each one that asked. */
export class TickFeed {
  private readonly listeners = new Set<{ agentId: string | undefined; fn: Listener }>();

  constructor(private readonly log: (line: string) => void = () => undefined) {}

  /** Hear every event of `agentId` (every agent's when undefined); returns the unsubscribe. */
  subscribe(fn: Listener, agentId?: string): () => void {
    const entry = { agentId, fn };
    this.listeners.add(entry);
    return () => void this.listeners.delete(entry);
  }

  publish(e: FeedEvent): void {
    for (const l of this.listeners) {
      if (l.agentId !== undefined && l.agentId !== e.agentId) continue;
      try {
        l.fn(e);
      } catch (err) {
        // Why swallowed: a page that went away must not fail the worker that told us.
        this.log(`notebook: a feed listener failed: ${(err as Error).message}`);
      }
    }
  }

  get listenerCount(): number {
    return this.listeners.size;
  }
}

/** An activity's event as a feed event. */
function fromSink<K extends AgentEventKind>(agentId: string, kind: K, event: AgentEvents[K]): FeedEvent {
  const e = event as AgentEvents[AgentEventKind];
  switch (kind) {
    case 'reply': {
      const r = e as AgentEvents['reply'];
      return {
        kind: 'reply',
        agentId,
        tick: r.tick,
        summary: r.summary,
        model: r.model,
        commands: r.commands,
        confidence: r.confidence,
      };
    }
    case 'verdict': {
      const v = e as AgentEvents['verdict'];
      return {
        kind: 'verdict',
        agentId,
        tick: v.tick,
        validationMode: v.validationMode,
        rating: v.rating,
        notes: v.notes,
      };
    }
    case 'escalation': {
      const x = e as AgentEvents['escalation'];
      return {
        kind: 'escalation',
        agentId,
        escalationId: x.escalationId,
        reason: `${x.category}: ${x.reason}`,
        humanRequired: x.humanRequired,
        ...(x.tick !== undefined ? { tick: x.tick } : {}),
      };
    }
    default: {
      const l = e as AgentEvents['learning'];
      return { kind: 'learning', agentId, predicate: l.predicate, shard: l.shardType, confidence: l.confidence };
    }
  }
}

const beatOf = (b: TickBeat): FeedEvent => ({
  kind: 'beat',
  agentId: b.agentId,
  tick: b.tick,
  loop: b.mode,
  ...(b.taskId !== undefined ? { taskId: b.taskId } : {}),
  model: b.model,
  ...(b.lifeforce ? { lifeforce: b.lifeforce } : {}),
});

/** The sink a worker in this process tells when there is no bus: every beat and event goes to `feed`. */
export function feedSink(feed: TickFeed): AgentEventSink {
  return {
    tick: (beat) => feed.publish(beatOf(beat)),
    event: (agentId, kind, event) => feed.publish(fromSink(agentId, kind, event)),
  };
}

const busEvents = {
  reply: 'AgentReply',
  verdict: 'AgentVerdict',
  escalation: 'AgentEscalation',
  learning: 'AgentLearning',
} as const;

/** A bus message of one of the agents' event types as a feed event. */
function fromBus(
  type: (typeof busEvents)[keyof typeof busEvents] | 'HeartbeatSignal',
  p: Record<string, unknown>,
): FeedEvent {
  switch (type) {
    case 'HeartbeatSignal': {
      const b = p as BusPayloadOut<'HeartbeatSignal'>;
      return {
        kind: 'beat',
        agentId: b.agent_id,
        tick: b.tick,
        loop: b.loop,
        ...(b.task_id !== undefined ? { taskId: b.task_id } : {}),
        model: b.model ?? '',
        ...(b.lifeforce ? { lifeforce: b.lifeforce } : {}),
      };
    }
    case 'AgentReply': {
      const r = p as BusPayloadOut<'AgentReply'>;
      return {
        kind: 'reply',
        agentId: r.agent_id,
        tick: r.tick,
        summary: r.summary,
        model: r.model ?? '',
        commands: r.commands,
        confidence: r.confidence,
      };
    }
    case 'AgentVerdict': {
      const v = p as BusPayloadOut<'AgentVerdict'>;
      return {
        kind: 'verdict',
        agentId: v.agent_id,
        tick: v.tick,
        validationMode: v.validation_mode,
        rating: v.rating,
        notes: v.notes,
      };
    }
    case 'AgentEscalation': {
      const x = p as BusPayloadOut<'AgentEscalation'>;
      return {
        kind: 'escalation',
        agentId: x.agent_id,
        escalationId: x.escalation_id,
        reason: x.reason,
        humanRequired: x.severity === 'high',
        ...(x.tick !== undefined ? { tick: x.tick } : {}),
      };
    }
    default: {
      const l = p as BusPayloadOut<'AgentLearning'>;
      return {
        kind: 'learning',
        agentId: l.agent_id,
        predicate: l.predicate,
        shard: l.subject ?? '',
        confidence: l.confidence,
      };
    }
  }
}

/**
 * Fill `feed` from the bus: every agent's heartbeat and its reply, verdict, escalation and
 * learning events under the bus's root (each subscription takes only its own type, checked by
 * the registry). Returns the unsubscribe.
 */
export function feedFromBus(feed: TickFeed, bus: Bus): { stop(): void } {
  const subs = [
    bus.subscribe(
      bus.subjects.heartbeats(),
      (m) => feed.publish(fromBus('HeartbeatSignal', m.payload as Record<string, unknown>)),
      { types: ['HeartbeatSignal'] },
    ),
  ];
  // `<root>.high.agent.*.*` with its last token named: one subject per event this feed takes.
  const anyAgent = bus.subjects.agentEvents();
  for (const [event, type] of Object.entries(busEvents)) {
    const subject = `${anyAgent.slice(0, -1)}${event}`;
    subs.push(
      bus.subscribe(subject, (m) => feed.publish(fromBus(type, m.payload as Record<string, unknown>)), {
        types: [type],
      }),
    );
  }
  return {
    stop() {
      for (const s of subs) s.unsubscribe();
    },
  };
}
