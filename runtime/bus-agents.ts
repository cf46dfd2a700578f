/**
 * What agents put on the bus: the tick heartbeat (`low.agent.<id>`) and their events
 * (`high.agent.<id>.reply|escalation|verdict|learning`). Every publish here is fire-and-forget:
 * it returns before the network is touched, and a bus that is down or a payload the registry
 * refuses is logged, never thrown at the caller (an agent's tick must not fail for its
 * heartbeat).
 */
import { eventMessageTypes, type BusPayloadIn } from '../core/bus/catalogue.js';
import type { AgentEvent } from '../core/bus/subjects.js';
import type { TickBeat, TickObserver } from '../activities/tick/tick-beat.js';
import type { Bus } from './bus.js';

type EventPayload<E extends AgentEvent> = BusPayloadIn<(typeof eventMessageTypes)[E]>;

/** A dropped publish says so at most once a minute per kind, so a bus outage does not flood the log. */
function quietly(log: (line: string) => void): (what: string, err: unknown) => void {
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

/** Publish an agent's tick heartbeat; throws what `Bus.publish` throws (`heartbeatObserver` never does). */
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

/** The observer the `mindloop` worker gives `createActivities`: a heartbeat per finished tick. */
export function heartbeatObserver(bus: Bus, log: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): TickObserver {
  const dropped = quietly(log);
  return (beat) => {
    try {
      publishHeartbeat(bus, beat);
    } catch (err) {
      dropped('heartbeat', err);
    }
  };
}

/** Publishers of an agent's events, each fire-and-forget (see the module comment). */
export function agentEventPublisher(bus: Bus, log: (line: string) => void = (l) => process.stderr.write(`${l}\n`)) {
  const dropped = quietly(log);
  const emit = <E extends AgentEvent>(event: E) => (agentId: string, payload: Omit<EventPayload<E>, 'agent_id'>): boolean => {
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
  };
}
export type AgentEventPublisher = ReturnType<typeof agentEventPublisher>;
