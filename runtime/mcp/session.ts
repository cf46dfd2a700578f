/**
 * One MCP client's view of the bus: its subscriptions and its heartbeat buffer. Messages that
 * arrive on a subscribed subject are checked against the schema registry (a refused one is
 * counted, logged and never buffered) and kept in a bounded buffer until the next heartbeat
 * drains it; when the buffer was full and pushed old messages out, the heartbeat says how many
 * and the bridge tells the bus too (`<root>.meta.health.buffer_drop`, a BufferDrop).
 */
import type { Subscription } from '@nats-io/transport-node';
import { decodeMessage, RejectionCounter } from '../../core/bus/codec.js';
import type { BusHeader } from '../../core/bus/header.js';
import type { Bus } from '../bus.js';
import { BoundedBuffer } from './buffer.js';
import type { BusSource } from './bus-link.js';
import { resolveSubject, SubjectRefusedError } from './subjects.js';

/** A message as the heartbeat hands it over. */
export interface BufferedMessage {
  subject: string;
  header: BusHeader;
  payload: unknown;
  /** When the bridge received it (ISO 8601). */
  received_at: string;
}

interface Held extends BufferedMessage {
  receivedMs: number;
}

interface SessionSubscription {
  id: string;
  subject: string;
  sub: Subscription;
}

/** Subscriptions one session may hold at once. */
const maxSubscriptionsPerSession = 64;

export interface HeartbeatReport {
  bus: {
    connected: boolean;
    server: string | null;
    root: string;
    /** Messages refused by the registry: on this bus connection in all, and on this session's subscriptions by reason. */
    rejections: { total: number; session: number; session_by_reason: Record<string, number> };
    error?: string;
  };
  subscriptions: Array<{ id: string; subject: string }>;
  buffer_capacity: number;
  /** Messages held just before this heartbeat drained them. */
  current_count: number;
  messages_dropped_since_last_heartbeat: number;
  messages_dropped_total: number;
  /** Age of the oldest message drained, null when there was none. */
  oldest_message_age_ms: number | null;
  /** Whether a BufferDrop went out on the bus for the drops reported here. */
  buffer_drop_published: boolean;
  messages: BufferedMessage[];
}

export class BridgeSession {
  readonly buffer: BoundedBuffer<Held>;
  readonly rejections = new RejectionCounter();
  private readonly subs = new Map<string, SessionSubscription>();
  private nextSub = 1;
  private closed = false;

  constructor(
    /** Also names the buffer in a BufferDrop (`mcp-bridge:<id>`). */
    readonly id: string,
    private readonly source: BusSource,
    capacity: number,
    private readonly log: (line: string) => void,
    private readonly now: () => number = Date.now,
  ) {
    this.buffer = new BoundedBuffer<Held>(capacity);
  }

  get subscriptions(): Array<{ id: string; subject: string }> {
    return [...this.subs.values()].map(({ id, subject }) => ({ id, subject }));
  }

  /** Listen on `raw` (wildcards allowed, under the root); the same subject twice is one subscription. */
  subscribe(raw: string): { id: string; subject: string; existing: boolean } {
    if (this.closed) throw new Error('this MCP session is closed');
    const subject = resolveSubject(this.source.root, raw, { wildcards: true });
    const existing = [...this.subs.values()].find((s) => s.subject === subject);
    if (existing) return { id: existing.id, subject, existing: true };
    if (this.subs.size >= maxSubscriptionsPerSession)
      throw new SubjectRefusedError(
        `this session already holds ${maxSubscriptionsPerSession} subscriptions: unsubscribe some first`,
      );
    const bus = this.source.require();
    const sub = bus.nc.subscribe(subject);
    const id = `sub-${this.nextSub++}`;
    this.subs.set(id, { id, subject, sub });
    void this.pump(bus, sub);
    return { id, subject, existing: false };
  }

  /** Check and buffer each message of `sub` until it ends. */
  private async pump(bus: Bus, sub: Subscription): Promise<void> {
    try {
      for await (const msg of sub) {
        const r = decodeMessage(bus.registry, bus.root, msg.subject, msg.string());
        if (!r.ok) {
          this.rejections.add({ subject: msg.subject, reason: r.reason, detail: r.detail });
          bus.reject(msg.subject, r.reason, r.detail);
          continue;
        }
        const at = this.now();
        this.buffer.push({
          subject: msg.subject,
          header: r.message.header,
          payload: r.message.payload,
          received_at: new Date(at).toISOString(),
          receivedMs: at,
        });
      }
    } catch (err) {
      this.log(`mcp bridge: session ${this.id}: subscription ended: ${(err as Error).message}`);
    }
  }

  /** Stop listening on a subscription (by its id, or by its subject as given to subscribe). */
  unsubscribe(which: string): { id: string; subject: string } {
    let found = this.subs.get(which);
    if (!found) {
      let subject: string | undefined;
      try {
        subject = resolveSubject(this.source.root, which, { wildcards: true });
      } catch {
        subject = undefined;
      }
      found = [...this.subs.values()].find((s) => s.subject === subject);
    }
    if (!found) {
      const held = this.subscriptions.map((s) => `${s.id} (${s.subject})`).join(', ') || 'none';
      throw new SubjectRefusedError(`no subscription ${JSON.stringify(which)} in this session; it holds: ${held}`);
    }
    this.subs.delete(found.id);
    found.sub.unsubscribe();
    return { id: found.id, subject: found.subject };
  }

  /**
   * Bus health and the buffer's contents. Without a bus it throws (a tool error) and keeps the
   * buffer as it is, so nothing drained is lost on an answer the client may not read.
   */
  heartbeat(): HeartbeatReport {
    const bus = this.source.require();
    const state = this.source.state();
    const oldest = this.buffer.peekOldest();
    const now = this.now();
    const drained = this.buffer.drain();
    let published = false;
    if (drained.droppedSinceLast > 0) {
      try {
        bus.publish(bus.subjects.bufferDrop(), 'BufferDrop', {
          buffer: `mcp-bridge:${this.id}`,
          capacity: this.buffer.capacity,
          dropped: drained.droppedSinceLast,
          dropped_total: drained.droppedTotal,
        });
        published = true;
      } catch (err) {
        this.log(`mcp bridge: session ${this.id}: BufferDrop not published: ${(err as Error).message}`);
      }
    }
    return {
      bus: {
        connected: state.connected,
        server: state.server,
        root: bus.root,
        rejections: {
          total: bus.rejections.total,
          session: this.rejections.total,
          session_by_reason: { ...this.rejections.byReason },
        },
        ...(state.error ? { error: state.error } : {}),
      },
      subscriptions: this.subscriptions,
      buffer_capacity: this.buffer.capacity,
      current_count: drained.countBefore,
      messages_dropped_since_last_heartbeat: drained.droppedSinceLast,
      messages_dropped_total: drained.droppedTotal,
      oldest_message_age_ms: oldest ? Math.max(0, now - oldest.receivedMs) : null,
      buffer_drop_published: published,
      messages: drained.items.map(({ subject, header, payload, received_at }) => ({
        subject,
        header,
        payload,
        received_at,
      })),
    };
  }

  /** End every subscription; what is buffered goes with the session. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const s of this.subs.values()) {
      try {
        s.sub.unsubscribe();
      } catch {
        // A connection closed first took its subscriptions with it.
      }
    }
    this.subs.clear();
  }
}
