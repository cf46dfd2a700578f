/**
 * What agents put on the bus: the tick heartbeat (`low.agent.<id>`) and their events
 * (`high.agent.<id>.reply|escalation|verdict|learning`). Every publish here is fire-and-forget:
 * it returns before the network is touched, and a bus that is down or a payload the registry
 * refuses is logged, never thrown at the caller (an agent's tick must not fail for its
 * heartbeat).
 */
import { eventMessageTypes, type BusPayloadIn } from '../core/bus/catalogue.js';
import type { AgentEvent } from '../core/bus/subjects.js';
import { clipText } from '../core/sanitize.js';
import type { AgentEvents, AgentEventSink, TickBeat } from '../activities/agent-events.js';
import type { Bus } from './bus.js';

type EventPayload<E extends AgentEvent> = BusPayloadIn<(typeof eventMessageTypes)[E]>;
type Log = (line: string) => void;
const stderrLine: Log = (l) => void process.stderr.write(`${l}\n`);

/** A dropped publish says so at most once a minute per kind, so a bus outage does not flood the log. */
function quietly(log: Log): (what: string, err: unknown) => void {
  const last = new Map<string, number>();
  let dropped = 0;
  return (what, err) => {
    dropped++;
    const now = Date.now();
    if (now - (last.get(what) ?? 0) < 60_000) return;
    last.set(what, now);
    log(`bus: ${what} not published (${dropped} dropped so far): ${(err as Error).message}`);
  };
}

/** Publish an agent's tick heartbeat; throws what `Bus.publish` throws (`agentEventSink` never does). */
export function publishHeartbeat(bus: Bus, beat: TickBeat): void {
  bus.publish(bus.subjects.heartbeat(beat.agentId), 'HeartbeatSignal', {
    agent_id: beat.agentId,
    tick: beat.tick,
    loop: beat.mode,
    ...(beat.taskId !== undefined ? { task_id: beat.taskId } : {}),
    model: beat.model.slice(0, 200),
    replayed: beat.replayed,
    ...(beat.lifeforce ? { lifeforce: beat.lifeforce } : {}),
  });
}

function eventPublishers(bus: Bus, dropped: (what: string, err: unknown) => void) {
  const emit =
    <E extends AgentEvent>(event: E) =>
    (agentId: string, payload: Omit<EventPayload<E>, 'agent_id'>): boolean => {
      try {
        bus.send(bus.subjects.agentEvent(agentId, event), eventMessageTypes[event], { agent_id: agentId, ...payload });
        return true;
      } catch (err) {
        dropped(event, err);
        return false;
      }
    };
  return {
    reply: emit('reply'),
    escalation: emit('escalation'),
    verdict: emit('verdict'),
    learning: emit('learning'),
    message: emit('message'),
  };
}

/** Publishers of an agent's events, each fire-and-forget (see the module comment); true when sent. */
export function agentEventPublisher(bus: Bus, log: Log = stderrLine) {
  return eventPublishers(bus, quietly(log));
}
export type AgentEventPublisher = ReturnType<typeof agentEventPublisher>;

/** A confidence inside the schema's [0, 1]; a number that is not one becomes null. */
const unit = (x: number | null): number | null =>
  x === null || !Number.isFinite(x) ? null : Math.min(1, Math.max(0, x));

/** JSON of a learning's args for the message's `object`; what JSON cannot show becomes a note of it. */
function argsText(args: Record<string, unknown>): string {
  try {
    return JSON.stringify(args);
  } catch {
    return '(args not serialisable)';
  }
}

/**
 * An activity's event as its message payload (without `agent_id`), clipped to the schema's
 * limits. A learning's `subject` is the shard it was stored in (`agent:<id>`, `tools`, …) and
 * its `object` the JSON of its args. An escalation that needs a human is `high`, one the
 * oversight tier answers alone `medium`; its reason is `<category>: <task>`.
 */
export const eventPayloads: { [E in AgentEvent]: (e: AgentEvents[E]) => Omit<EventPayload<E>, 'agent_id'> } = {
  reply: (e) => ({
    tick: e.tick,
    summary: clipText(e.summary, 2000),
    model: clipText(e.model, 200),
    commands: e.commands,
    confidence: unit(e.confidence),
  }),
  verdict: (e) => ({
    tick: e.tick,
    validation_mode: clipText(e.validationMode, 40),
    rating: e.rating !== null && Number.isFinite(e.rating) ? e.rating : null,
    notes: e.notes.slice(0, 20).map((n) => clipText(n, 500)),
  }),
  escalation: (e) => ({
    escalation_id: clipText(e.escalationId, 200),
    reason: clipText(`${e.category}: ${e.reason}`, 2000),
    severity: e.humanRequired ? 'high' : 'medium',
    ...(e.tick !== undefined ? { tick: e.tick } : {}),
  }),
  learning: (e) => ({
    predicate: clipText(e.predicate, 200),
    subject: clipText(e.shardType, 200),
    object: clipText(argsText(e.args), 2000),
    confidence: unit(e.confidence) ?? 0,
  }),
  message: (e) => ({
    to: e.to,
    note_id: e.noteId,
    tick: e.tick,
    text: clipText(e.text, 2000),
    priority: Math.max(0, Math.min(10, Math.round(e.priority))),
    tags: e.tags.slice(0, 20).map((t) => clipText(t, 64)),
  }),
};

/**
 * The sink the `mindloop` worker gives `createActivities`: a heartbeat per finished tick and
 * each event on its subject, fire-and-forget. It never throws: a closed bus or a refused payload
 * is logged at most once a minute per kind.
 */
export function agentEventSink(bus: Bus, log: Log = stderrLine): AgentEventSink {
  const dropped = quietly(log);
  const publish = eventPublishers(bus, dropped);
  const send = <E extends AgentEvent>(agentId: string, kind: E, event: AgentEvents[E]): void => {
    let payload: Omit<EventPayload<E>, 'agent_id'>;
    try {
      payload = eventPayloads[kind](event);
    } catch (err) {
      dropped(kind, err);
      return;
    }
    (publish[kind] as (agentId: string, payload: Omit<EventPayload<E>, 'agent_id'>) => boolean)(agentId, payload);
  };
  return {
    tick(beat) {
      try {
        publishHeartbeat(bus, beat);
      } catch (err) {
        dropped('heartbeat', err);
      }
    },
    event: send,
  };
}
