/**
 * What an agent's activities tell an observer once their own work is recorded: each finished
 * tick (its beat), what the agent said at a main-loop tick, the validators' verdict on it, an
 * escalation opened, a learning saved or reinforced. The `mindloop` worker's bus turns them into
 * messages (runtime/bus-agents.ts); without a bus nobody is told.
 *
 * The sink is a plain dependency of the activity factories (no module state). It is told only
 * after the activity's own write committed, it must return at once, and it never reaches the
 * activity: `guardEvents` catches and logs whatever a sink throws. A retried activity may tell
 * it twice; it is a feed, not a ledger.
 */
import { agentShard } from '../core/learnings.js';
import { isPlainObject } from '../core/values.js';

/** A tick's beat: what a finished `think` tells the sink. */
export interface TickBeat {
  agentId: string;
  tick: number;
  /** The main loop's tick, or a task loop's (`taskId`). */
  mode: 'main' | 'task';
  taskId?: number;
  /** `provider:model`. */
  model: string;
  replayed: boolean;
  lifeforce?: { charged: number; available: number | null };
}

/** What the agent said at a main-loop tick, in brief. */
interface ReplyEvent {
  tick: number;
  summary: string;
  /** `provider:model`. */
  model: string;
  commands: number;
  confidence: number | null;
}

/** The validators' verdict on a tick, as recorded on its reply row. */
interface VerdictEvent {
  tick: number;
  validationMode: string;
  rating: number | null;
  notes: string[];
}

/** An escalation was opened for the agent (its row is written). */
interface EscalationEvent {
  escalationId: string;
  category: string;
  /** The task the agent escalated. */
  reason: string;
  humanRequired: boolean;
  tick?: number;
}

/** A learning the store saved (or reinforced), in the agent's name. */
interface LearningEvent {
  shardType: string;
  predicate: string;
  args: Record<string, unknown>;
  confidence: number;
  reinforced: boolean;
}

/** The agent sent a peer a message (`messages.send`): it is stored as a note on the receiver. */
interface MessageEvent {
  to: string;
  /** The receiver's note. */
  noteId: number;
  tick: number;
  text: string;
  priority: number;
  tags: string[];
}

export interface AgentEvents {
  reply: ReplyEvent;
  verdict: VerdictEvent;
  escalation: EscalationEvent;
  learning: LearningEvent;
  message: MessageEvent;
}
export type AgentEventKind = keyof AgentEvents;

/** Told of an agent's ticks and events; both must return at once and should not throw. */
export interface AgentEventSink {
  tick(beat: TickBeat): void;
  event<K extends AgentEventKind>(agentId: string, kind: K, event: AgentEvents[K]): void;
}

const stderrLine = (line: string) => void process.stderr.write(`${line}\n`);

/** `sink` that never throws: a failure is one log line, and the activity goes on. */
export function guardEvents(sink: AgentEventSink, log: (line: string) => void = stderrLine): AgentEventSink {
  return {
    tick(beat) {
      try {
        sink.tick(beat);
      } catch (err) {
        // Why swallowed: the beat is a side channel; the tick's work is done and recorded.
        log(`tick beat of ${beat.agentId} tick ${beat.tick} not sent: ${(err as Error).message}`);
      }
    },
    event(agentId, kind, event) {
      try {
        sink.event(agentId, kind, event);
      } catch (err) {
        // Why swallowed: the event follows a committed write; failing now would only retry that work.
        log(`${kind} event of ${agentId} not sent: ${(err as Error).message}`);
      }
    },
  };
}

/**
 * Tell `events` of a learning the store saved in `agentId`'s name (none without an agent: a
 * learning of no agent has no subject to go on). `args` are what the store's guard accepted.
 */
export function tellLearning(
  events: AgentEventSink | undefined,
  agentId: string | null | undefined,
  l: { shardType: string; predicate: string; args: unknown; confidence: number; reinforced: boolean },
): void {
  if (!events || !agentId) return;
  const args = isPlainObject(l.args) ? l.args : {};
  events.event(agentId, 'learning', {
    shardType: l.shardType,
    predicate: l.predicate,
    args,
    confidence: l.confidence,
    reinforced: l.reinforced,
  });
}

/**
 * A feedback count that derived (or reinforced) a learning tells `events` of it; other counts
 * tell nothing. The shard is the feedback's, by default the agent's own (as the store counts it).
 */
export function tellFeedbackLearning(
  events: AgentEventSink | undefined,
  f: { agentId: string; shardType?: string },
  r: { learning?: { predicate: string; args: Record<string, unknown>; confidence: number; reinforced: boolean } },
): void {
  if (r.learning) tellLearning(events, f.agentId, { shardType: f.shardType ?? agentShard(f.agentId), ...r.learning });
}
