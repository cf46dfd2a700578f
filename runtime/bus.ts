/**
 * The message bus (NATS): connect, and publish / subscribe / request through the schema
 * registry, so that nothing unchecked goes out and nothing unchecked comes in. The bus is
 * optional, like Docker: without it everything else runs, and `connectBus` says in one line why
 * it cannot connect and where `mindloop doctor` tells how to get one. Subjects, header and
 * stages: core/bus/ and docs/bus.md.
 */
import { randomUUID } from 'node:crypto';
import {
  connect,
  headers as natsHeaders,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';
import {
  catalogueRegistry,
  type BusMessageType,
  type BusPayloadIn,
  type BusPayloadOut,
} from '../core/bus/catalogue.js';
import {
  decodeMessage,
  encodeMessage,
  RejectionCounter,
  type DecodedMessage,
  type RejectReason,
} from '../core/bus/codec.js';
import type { BusHeader } from '../core/bus/header.js';
import type { SchemaRegistry } from '../core/bus/registry.js';
import { busSubjects, defaultBusRoot, deploymentRoot, type BusSubjects } from '../core/bus/subjects.js';

export const defaultNatsUrl = 'nats://127.0.0.1:4222';
/** How to get a bus, for error messages and `mindloop doctor`. */
export const busInstallHint =
  'apt-get install -y nats-server && (nats-server -js -a 127.0.0.1 -p 4222 -sd /var/lib/nats-server > /var/log/nats-server.log 2>&1 &), then NATS_URL=nats://127.0.0.1:4222';

export class BusUnavailableError extends Error {
  override readonly name = 'BusUnavailableError';
}

/** A request that got no valid answer: nobody listens, no answer in time, or an answer the registry refused. */
export class BusRequestError extends Error {
  override readonly name = 'BusRequestError';
  constructor(
    readonly kind: 'no_responders' | 'timeout' | 'rejected',
    message: string,
  ) {
    super(message);
  }
}

/** A message that passed the registry, with where to answer it. */
export interface BusMessage<P = unknown> extends DecodedMessage {
  payload: P;
  /** The request's reply inbox, when the sender waits for an answer. */
  reply?: string;
}

export interface SendOptions {
  /** A staging version (only on `<root>.staging.*`); default the type's latest stable generation. */
  version?: string;
  /** Default a new UUID. */
  messageId?: string;
  inReplyTo?: string;
  /** The inbox an answer goes to (request/reply by hand). */
  reply?: string;
}

export interface ConnectBusOptions {
  /** Default NATS_URL's default, nats://127.0.0.1:4222 (comma-separated for a cluster). */
  url?: string;
  root?: string;
  /**
   * The deployment this connection speaks for (runtime/deployment.ts): its subjects live under
   * `<root>.<deployment>` and every message it sends carries it; a function is asked once NATS
   * answers (a failure closes the connection and is thrown). Omitted (tests, benchmarks on a
   * root of their own): the root alone.
   */
  deployment?: string | (() => Promise<string>);
  /** The connection's name, as the server's monitoring shows it. */
  name?: string;
  registry?: SchemaRegistry;
  /** How long the first connect may take (default 2 s). */
  timeoutMs?: number;
  /** Keep reconnecting forever after a lost connection (long-running processes); default false (give up after ~20 s). */
  reconnectForever?: boolean;
  log?: (line: string) => void;
}

/** Connect to the bus; a BusUnavailableError says why not and how to get one. */
export async function connectBus(o: ConnectBusOptions = {}): Promise<Bus> {
  const url = o.url ?? defaultNatsUrl;
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers: url.split(',').map((s) => s.trim()),
      name: o.name ?? 'mindloop',
      timeout: o.timeoutMs ?? 2000,
      maxReconnectAttempts: o.reconnectForever ? -1 : 10,
      reconnectTimeWait: 2000,
      // A failed request is told by its kind (no responders, timeout), never by its stack: no
      // stack capture per request.
      noAsyncTraces: true,
    });
  } catch (err) {
    const cause = (err as { cause?: Error }).cause?.message ?? (err as Error).message;
    throw new BusUnavailableError(
      `cannot reach the bus (NATS) at ${url}: ${cause}. The bus is optional: everything else runs without it; \`npx mindloop doctor\` says how to start one`,
    );
  }
  let deployment: string | undefined;
  try {
    deployment = typeof o.deployment === 'function' ? await o.deployment() : o.deployment;
  } catch (err) {
    await nc.close();
    throw err;
  }
  return new Bus(
    nc,
    o.root ?? defaultBusRoot,
    o.registry ?? catalogueRegistry(),
    o.log ?? ((line) => process.stderr.write(`${line}\n`)),
    deployment,
  );
}

/** A connection to the bus under one deployment's root, speaking only what the registry knows. */
export class Bus {
  /** Where this connection's subjects live: `<bus root>.<deployment>`, or the bus root without a deployment. */
  readonly root: string;
  readonly subjects: BusSubjects;
  readonly staging: BusSubjects;
  /** Every message this connection's subscribers refused, by reason. */
  readonly rejections = new RejectionCounter();

  constructor(
    readonly nc: NatsConnection,
    /** The bus root shared by every deployment on this NATS (MINDLOOP_BUS_ROOT). */
    readonly busRoot: string,
    readonly registry: SchemaRegistry,
    private readonly log: (line: string) => void,
    /** The deployment whose subjects this connection speaks on. */
    readonly deployment?: string,
    /** The deployment every message it sends carries as its sender: its own, except through `toDeployment`. */
    readonly sender: string | undefined = deployment,
  ) {
    this.root = deployment === undefined ? busRoot : deploymentRoot(busRoot, deployment);
    this.subjects = busSubjects(this.root, 'stable');
    this.staging = busSubjects(this.root, 'staging');
  }

  /**
   * The same connection speaking into another deployment's subjects: the door between
   * deployments. Its messages still carry this deployment as the sender; the other side takes
   * them only when its MINDLOOP_BUS_PEERS names this deployment.
   */
  toDeployment(deployment: string): Bus {
    return deployment === this.deployment
      ? this
      : new Bus(this.nc, this.busRoot, this.registry, this.log, deployment, this.sender);
  }

  /** The body and NATS headers of a message (for JetStream publishes); a BusSchemaError when it does not fit the registry. */
  encode(
    subject: string,
    type: string,
    payload: unknown,
    o: SendOptions = {},
  ): { header: BusHeader; body: string; headers: MsgHdrs } {
    const { header, body } = encodeMessage(this.registry, this.root, subject, type, payload, {
      messageId: o.messageId ?? randomUUID(),
      timestamp: new Date(),
      version: o.version,
      inReplyTo: o.inReplyTo,
      deployment: this.sender,
    });
    const headers = natsHeaders();
    // JetStream drops a second publish of the same id (within the stream's duplicate window).
    headers.set('Nats-Msg-Id', header.message_id);
    return { header, body, headers };
  }

  /**
   * Publish without waiting on the network (NATS buffers, and during a reconnect keeps the
   * buffer); throws only for a message the registry refuses or a closed connection.
   */
  send(subject: string, type: string, payload: unknown, o: SendOptions = {}): BusHeader {
    const { header, body, headers } = this.encode(subject, type, payload, o);
    this.nc.publish(subject, body, { headers, ...(o.reply ? { reply: o.reply } : {}) });
    return header;
  }

  /** `send` for a catalogue type, typed by its current stable generation. */
  publish<T extends BusMessageType>(
    subject: string,
    type: T,
    payload: BusPayloadIn<T>,
    o: Omit<SendOptions, 'version'> = {},
  ): BusHeader {
    return this.send(subject, type, payload, o);
  }

  /** Check a received message; a refused one is counted and logged with its reason, and gives null. */
  accept(subject: string, body: string, expect?: readonly string[]): DecodedMessage | null {
    const r = decodeMessage(this.registry, this.root, subject, body, expect);
    if (r.ok) return r.message;
    this.reject(subject, r.reason, r.detail);
    return null;
  }

  /** Count and log a refused message. */
  reject(subject: string, reason: RejectReason, detail: string): void {
    this.rejections.add({ subject, reason, detail });
    this.log(`bus: refused a message on ${subject}: ${reason}: ${detail}`);
  }

  /**
   * Call `handler` with every valid message on `subject` (wildcards allowed), one at a time in
   * arrival order; refused messages never reach it. `types` limits what it takes.
   */
  subscribe(
    subject: string,
    handler: (m: BusMessage) => void | Promise<void>,
    o: { queue?: string; types?: readonly string[] } = {},
  ): Subscription {
    const sub = this.nc.subscribe(subject, { ...(o.queue ? { queue: o.queue } : {}) });
    void (async () => {
      for await (const msg of sub) {
        const decoded = this.accept(msg.subject, msg.string(), o.types);
        if (!decoded) continue;
        try {
          await handler({ ...decoded, ...(msg.reply ? { reply: msg.reply } : {}) });
        } catch (err) {
          this.log(`bus: handler for ${msg.subject} failed: ${(err as Error).message}`);
        }
      }
    })();
    return sub;
  }

  /** `subscribe` for one catalogue type, its payload typed. */
  on<T extends BusMessageType>(
    subject: string,
    type: T,
    handler: (m: BusMessage<BusPayloadOut<T>>) => void | Promise<void>,
    o: { queue?: string } = {},
  ): Subscription {
    return this.subscribe(subject, (m) => handler(m as BusMessage<BusPayloadOut<T>>), { ...o, types: [type] });
  }

  /** Send a request and wait for one answer of type `expect`. */
  async request<T extends BusMessageType, R extends BusMessageType>(
    subject: string,
    type: T,
    payload: BusPayloadIn<T>,
    o: { expect: R; timeoutMs?: number },
  ): Promise<BusMessage<BusPayloadOut<R>>> {
    const { body, headers } = this.encode(subject, type, payload);
    const timeout = o.timeoutMs ?? 5000;
    let answer: Msg;
    try {
      answer = await this.nc.request(subject, body, { timeout, headers });
    } catch (err) {
      const e = err as Error & { isNoResponders?: () => boolean };
      if (e.isNoResponders?.()) throw new BusRequestError('no_responders', `nobody answers on ${subject}`);
      if (e.name === 'TimeoutError')
        throw new BusRequestError('timeout', `no answer on ${subject} within ${timeout} ms`);
      throw err;
    }
    // An answer arrives on an inbox, not a bus subject: it is checked as if sent on the request's subject.
    const decoded = this.accept(subject, answer.string(), [o.expect]);
    if (!decoded)
      throw new BusRequestError(
        'rejected',
        `the answer on ${subject} was refused: ${this.rejections.recent.at(-1)?.detail ?? 'see the log'}`,
      );
    return decoded as BusMessage<BusPayloadOut<R>>;
  }

  /** Answer `to` on its reply inbox (nothing when it has none). */
  respond<T extends BusMessageType>(
    to: BusMessage,
    subject: string,
    type: T,
    payload: BusPayloadIn<T>,
  ): BusHeader | null {
    if (!to.reply) return null;
    const { body, header } = this.encode(subject, type, payload, { inReplyTo: to.header.message_id });
    this.nc.publish(to.reply, body);
    return header;
  }

  /** Wait until everything published so far reached the server. */
  flush(): Promise<void> {
    return this.nc.flush();
  }

  get closed(): boolean {
    return this.nc.isClosed();
  }

  /** Let subscriptions finish what they hold, flush, and close. */
  async close(): Promise<void> {
    if (this.nc.isClosed()) return;
    await this.nc.drain().catch(() => this.nc.close());
  }
}
