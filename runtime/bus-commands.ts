/**
 * Commands to agents over the bus, delivered durably: a JetStream stream keeps
 * `<root>.command.>` (work-queue retention: a command is gone once handled), and one durable
 * consumer turns each `command.agent.<id>.note|pause|resume` into the agent workflow's
 * `addNote` update or `pause` / `resume` signal.
 *
 * Exactly once per `message_id`, in three layers: the stream drops a second publish of the same
 * id (Nats-Msg-Id, within its duplicate window); the consumer acks only after Temporal accepted
 * the command, so a crash in between redelivers it; and Temporal takes the message id as the
 * update id (notes) or the signal's request id (pause/resume), so a redelivered command finds
 * the first one instead of being applied again. A command that can never be applied (bad
 * payload, refused by the workflow's validator, sent by another deployment this one does not
 * take commands from) is terminated with a logged reason; one whose agent is not running is
 * retried with backoff, and given up (logged) after `maxDeliver` deliveries.
 *
 * A sender learns at once what becomes of its command: `sendCommand` with a `check` asks the
 * deployment's Temporal whether the agent's loop runs before anything is stored, and refuses
 * with the reason when it does not. See docs/bus.md.
 */
import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiError,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type ConsumerMessages,
  type JsMsg,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import {
  isGrpcServiceError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateStage,
  type Client,
} from '@temporalio/client';
import { commandMessageTypes, type BusPayloadIn, type BusPayloadOut } from '../core/bus/catalogue.js';
import { decodeMessage } from '../core/bus/codec.js';
import type { BusHeader } from '../core/bus/header.js';
import { commandStreamName, parseAgentCommandSubject, type AgentCommand } from '../core/bus/subjects.js';
import { workflowIds } from '../core/ids.js';
import type { AddNoteInput, AddNoteResult, LoopCommandArg } from '../workflows/agent-loop/index.js';
import type { Bus } from './bus.js';

export const commandConsumerName = 'agent-commands';

export interface CommandStreamOptions {
  /** How long a delivered command may stay unacknowledged before it is delivered again (default 60 s). */
  ackWaitMs?: number;
  /** Deliveries of one command before it is given up (default 20; with the backoff about an hour). */
  maxDeliver?: number;
  /** How long an unhandled command is kept (default 7 days). */
  maxAgeMs?: number;
  /** Within this window a second publish of the same message id is dropped (default 10 min). */
  duplicateWindowMs?: number;
}

const defaults = {
  ackWaitMs: 60_000,
  maxDeliver: 20,
  maxAgeMs: 7 * 24 * 3_600_000,
  duplicateWindowMs: 10 * 60_000,
} satisfies Required<CommandStreamOptions>;

function notFound(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.status === 404;
}

/**
 * Create the command stream and its durable consumer where they are missing (idempotent; an
 * existing one keeps its configuration). Both exist from the first call on, so commands sent
 * while no consumer process runs wait for it.
 */
export async function ensureCommandStream(
  bus: Bus,
  o: CommandStreamOptions = {},
): Promise<{ stream: string; consumer: string }> {
  const cfg = { ...defaults, ...o };
  const jsm = await jetstreamManager(bus.nc);
  const stream = commandStreamName(bus.root);
  try {
    await jsm.streams.info(stream);
  } catch (err) {
    if (!notFound(err)) throw err;
    await jsm.streams.add({
      name: stream,
      subjects: [bus.subjects.all('command')],
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      discard: DiscardPolicy.Old,
      max_age: nanos(cfg.maxAgeMs),
      duplicate_window: nanos(cfg.duplicateWindowMs),
    });
  }
  try {
    await jsm.consumers.info(stream, commandConsumerName);
  } catch (err) {
    if (!notFound(err)) throw err;
    await jsm.consumers.add(stream, {
      durable_name: commandConsumerName,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(cfg.ackWaitMs),
      max_deliver: cfg.maxDeliver,
      filter_subject: bus.subjects.agentCommandsAll(),
      max_ack_pending: 1000,
    });
  }
  return { stream, consumer: commandConsumerName };
}

/** Remove the command stream (and so its consumer and every waiting command); tests and teardown. */
export async function deleteCommandStream(bus: Bus): Promise<void> {
  const jsm = await jetstreamManager(bus.nc);
  await jsm.streams.delete(commandStreamName(bus.root)).catch((err: unknown) => {
    if (!notFound(err)) throw err;
  });
}

type CommandPayload<C extends AgentCommand> = BusPayloadIn<(typeof commandMessageTypes)[C]>;

/** A command the sender was told, before anything was stored, would not be delivered. */
export class CommandRefusedError extends Error {
  override readonly name = 'CommandRefusedError';
  constructor(
    readonly agentId: string,
    readonly reason: string,
  ) {
    super(`${reason} (nothing was sent)`);
  }
}

/** Null when `agentId` takes commands now; else why not (e.g. runtime/operator.ts `whyNotRunning`). */
export type AgentCheck = (agentId: string) => Promise<string | null>;

/**
 * Send a command to an agent and wait until the stream stored it. With `check`, an agent that
 * would not take it is refused first (CommandRefusedError, nothing stored). `duplicate` is true
 * when a command with this message id was stored before (it is not stored again).
 */
export async function sendCommand<C extends AgentCommand>(
  bus: Bus,
  agentId: string,
  command: C,
  payload: CommandPayload<C>,
  o: { messageId?: string; check?: AgentCheck } = {},
): Promise<{ messageId: string; seq: number; duplicate: boolean }> {
  const subject = bus.subjects.agentCommand(agentId, command);
  const { header, body } = bus.encode(subject, commandMessageTypes[command], payload, o);
  const refused = await o.check?.(agentId);
  if (refused) throw new CommandRefusedError(agentId, refused);
  try {
    const ack = await jetstream(bus.nc).publish(subject, body, { msgID: header.message_id });
    return { messageId: header.message_id, seq: ack.seq, duplicate: ack.duplicate };
  } catch (err) {
    // Nobody answered the publish: the client reports that as JetStream not enabled.
    const e = err as Error & { cause?: { isNoResponders?: () => boolean } };
    if (e.name === 'JetStreamNotEnabled' || e.cause?.isNoResponders?.()) {
      throw new Error(
        `no JetStream stream keeps ${subject} (or the server runs without -js): a worker with NATS_URL set creates it, or \`npx mindloop bus setup\``,
      );
    }
    throw err;
  }
}

/** One command taken off the stream, checked against the registry. */
export interface AgentCommandMessage<C extends AgentCommand = AgentCommand> {
  agentId: string;
  command: C;
  messageId: string;
  header: BusHeader;
  payload: BusPayloadOut<(typeof commandMessageTypes)[C]>;
  /** 1 the first time. */
  delivery: number;
}

/** What the target made of a command: applied (or found applied before), refused for good, or to be tried again later. */
export type CommandOutcome =
  { kind: 'accepted'; detail?: string } | { kind: 'rejected'; reason: string } | { kind: 'retry'; reason: string };

/** Where commands go: the agent workflows (temporalCommandTarget) or a test's fake. */
export interface CommandTarget {
  deliver(c: AgentCommandMessage): Promise<CommandOutcome>;
}

/** The agent workflows as the target: `addNote` with update id = message id, `pause`/`resume` with request id = message id. */
export function temporalCommandTarget(client: Client, o: { timeoutMs?: number } = {}): CommandTarget {
  const timeoutMs = o.timeoutMs ?? 10_000;
  return {
    async deliver(c) {
      const workflowId = workflowIds.agent(c.agentId);
      try {
        await client.withDeadline(Date.now() + timeoutMs, async () => {
          if (c.command === 'note') {
            const note = c.payload as BusPayloadOut<'AgentNote'>;
            const input: AddNoteInput = {
              text: note.text,
              ...(note.priority !== undefined ? { priority: note.priority } : {}),
              ...(note.tags ? { tags: note.tags } : {}),
              ...(note.source ? { source: note.source } : {}),
              ...(note.sender ? { sender: note.sender } : {}),
            };
            // Accepted is enough: from then on the update is in the workflow's history and runs
            // to completion there. The same update id again attaches to it (no second note).
            await client.workflow.getHandle(workflowId).startUpdate<AddNoteResult, [AddNoteInput]>('addNote', {
              args: [input],
              updateId: c.messageId,
              waitForStage: WorkflowUpdateStage.ACCEPTED,
            });
          } else {
            // The typed client gives every signal a fresh request id; the service call with the
            // message id as request id is what makes a redelivered pause/resume a no-op.
            await client.workflowService.signalWorkflowExecution({
              namespace: client.options.namespace,
              workflowExecution: { workflowId },
              signalName: c.command,
              identity: client.options.identity,
              requestId: c.messageId,
              // The id also rides in the signal, so the loop applies it once across continue-as-new.
              input: {
                payloads: [
                  client.options.loadedDataConverter.payloadConverter.toPayload({
                    commandId: c.messageId,
                  } satisfies LoopCommandArg),
                ],
              },
            });
          }
        });
        return { kind: 'accepted' };
      } catch (err) {
        return classifyTemporalError(workflowId, err);
      }
    },
  };
}

// gRPC status codes (the service error carries the number).
const grpcNotFound = 5;
const grpcInvalidArgument = 3;

function classifyTemporalError(workflowId: string, err: unknown): CommandOutcome {
  const message = (err as Error).message;
  if (err instanceof WorkflowUpdateFailedError)
    return {
      kind: 'rejected',
      reason: `${workflowId} refused it: ${(err.cause as Error | undefined)?.message ?? message}`,
    };
  if (err instanceof WorkflowNotFoundError) return { kind: 'retry', reason: `${workflowId} is not running` };
  if (isGrpcServiceError(err)) {
    if (err.code === grpcNotFound) return { kind: 'retry', reason: `${workflowId} is not running (${err.details})` };
    if (err.code === grpcInvalidArgument)
      return { kind: 'rejected', reason: `${workflowId} refused it: ${err.details}` };
  }
  return { kind: 'retry', reason: `Temporal: ${message}` };
}

export interface CommandConsumerOptions extends CommandStreamOptions {
  /** First retry delay of a command whose agent is not running; doubles per delivery up to 5 min (default 2 s). */
  retryDelayMs?: number;
  /** Commands pulled at once (default 4: each may wait up to the target's timeout before its ack). */
  batch?: number;
  /** Other deployments whose commands are taken (MINDLOOP_BUS_PEERS); default none. */
  peers?: readonly string[];
  log?: (line: string) => void;
}

export interface CommandConsumerStats {
  accepted: number;
  rejected: number;
  retried: number;
  gaveUp: number;
}

export interface CommandConsumer {
  readonly stats: CommandConsumerStats;
  /** Stop pulling; resolves once the command in hand is finished. */
  stop(): Promise<void>;
}

/** Pull commands from the durable consumer and hand each to `target`, one at a time in stream order. */
export async function startCommandConsumer(
  bus: Bus,
  target: CommandTarget,
  o: CommandConsumerOptions = {},
): Promise<CommandConsumer> {
  const log = o.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const { stream, consumer } = await ensureCommandStream(bus, o);
  const ackWaitMs = o.ackWaitMs ?? defaults.ackWaitMs;
  const maxDeliver = o.maxDeliver ?? defaults.maxDeliver;
  const retryDelayMs = o.retryDelayMs ?? 2000;
  const peers = o.peers ?? [];
  const stats: CommandConsumerStats = { accepted: 0, rejected: 0, retried: 0, gaveUp: 0 };
  const messages: ConsumerMessages = await (
    await jetstream(bus.nc).consumers.get(stream, consumer)
  ).consume({ max_messages: o.batch ?? 4 });

  // Servers before 2.10 take `+TERM` only bare: with a reason they ignore it and redeliver.
  const [major = 0, minor = 0] = (bus.nc.info?.version ?? '0.0').split('.').map(Number);
  const termReasons = major > 2 || (major === 2 && minor >= 10);
  const term = (m: JsMsg, reason: string) => (termReasons ? m.term(reason.slice(0, 500)) : m.term());
  const terminate = (m: JsMsg, reason: string) => {
    term(m, reason);
    stats.rejected++;
  };

  async function handle(m: JsMsg): Promise<void> {
    const to = parseAgentCommandSubject(bus.root, m.subject);
    if (!to) {
      bus.reject(m.subject, 'wrong_namespace', 'not a command.agent.<id>.note|pause|resume subject (terminated)');
      return terminate(m, 'not an agent command subject');
    }
    const decoded = decodeMessage(bus.registry, bus.root, m.subject, m.string(), [commandMessageTypes[to.command]]);
    if (!decoded.ok) {
      bus.reject(m.subject, decoded.reason, `${decoded.detail} (terminated, not redelivered)`);
      return terminate(m, `${decoded.reason}: ${decoded.detail}`);
    }
    const { header, payload } = decoded.message;
    const foreign =
      header.deployment !== undefined &&
      bus.deployment !== undefined &&
      header.deployment !== bus.deployment &&
      !peers.includes(header.deployment);
    if (foreign) {
      const reason = `sent by deployment ${header.deployment}, whose commands deployment ${bus.deployment} does not take (MINDLOOP_BUS_PEERS)`;
      log(`bus: command ${to.command} ${header.message_id} for agent ${to.agentId} terminated: ${reason}`);
      return terminate(m, reason);
    }
    // Keep the command ours while Temporal takes its time (a slow update must not be redelivered meanwhile).
    const working = setInterval(() => m.working(), Math.max(1000, ackWaitMs / 3));
    let outcome: CommandOutcome;
    try {
      outcome = await target.deliver({
        agentId: to.agentId,
        command: to.command,
        messageId: header.message_id,
        header,
        payload: payload as AgentCommandMessage['payload'],
        delivery: m.info.deliveryCount,
      });
    } catch (err) {
      outcome = { kind: 'retry', reason: (err as Error).message };
    } finally {
      clearInterval(working);
    }
    const what = `command ${to.command} ${header.message_id} for agent ${to.agentId}`;
    if (outcome.kind === 'accepted') {
      stats.accepted++;
      // If this ack is lost the command comes again, and the target finds it applied.
      await m
        .ackAck()
        .catch((err: unknown) =>
          log(
            `bus: ${what}: applied, but its ack was not confirmed (${(err as Error).message}); a redelivery will find it applied`,
          ),
        );
    } else if (outcome.kind === 'rejected') {
      log(`bus: ${what} terminated: ${outcome.reason}`);
      terminate(m, outcome.reason);
    } else if (m.info.deliveryCount >= maxDeliver) {
      log(`bus: ${what} given up after ${m.info.deliveryCount} deliveries: ${outcome.reason}`);
      term(m, `gave up: ${outcome.reason}`);
      stats.gaveUp++;
    } else {
      stats.retried++;
      m.nak(Math.min(retryDelayMs * 2 ** (m.info.deliveryCount - 1), 300_000));
    }
  }

  const done = (async () => {
    try {
      for await (const m of messages) {
        try {
          await handle(m);
        } catch (err) {
          // Not acked: the stream delivers it again after ack_wait.
          log(`bus: command on ${m.subject} not handled: ${(err as Error).message}`);
        }
      }
    } catch (err) {
      // The connection closed under us: what was not acked is delivered again to the next consumer.
      log(`bus: command consumer stopped: ${(err as Error).message}`);
    }
  })();
  return {
    stats,
    async stop() {
      await messages.close().catch(() => undefined);
      await done;
    },
  };
}
