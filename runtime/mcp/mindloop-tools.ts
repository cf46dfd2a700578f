/**
 * Mindloop itself as MCP tools: the agents and their latest replies (Postgres), an agent loop's
 * status (Temporal), a note to an agent, and the human tier's answers to escalations and fork
 * gates. They need no bus, except send_note, which prefers it: with a bus that has JetStream the
 * note goes through the durable command stream (the worker's consumer hands it to the workflow
 * with update id = message id); without one it goes to the workflow directly, with the same
 * update id. Either way one message id is one note, however often the client sends it.
 */
import { randomUUID } from 'node:crypto';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Client } from '@temporalio/client';
import { z } from 'zod';
import { catalogueRegistry, type BusPayloadIn } from '../../core/bus/catalogue.js';
import { makeHeader, messageIdPattern } from '../../core/bus/header.js';
import { forkIdSchema } from '../../core/fork.js';
import { agentIdSchema } from '../../core/ids.js';
import type { Db } from '../../db/client.js';
import type { Bus } from '../bus.js';
import { CommandRefusedError, ensureCommandStream, sendCommand, temporalCommandTarget } from '../bus-commands.js';
import { listAgents, recentReplies } from '../../db/queries/operator.js';
import { agentLoopStatus, answerEscalation, answerForkGate, escalationIdSchema, whyNotRunning } from '../operator.js';
import type { BusSource } from './bus-link.js';
import { guarded } from './tools.js';

interface MindloopToolContext {
  source: BusSource;
  /** Postgres; without it the database tools say so. */
  db?: Db;
  /** Temporal; without it the workflow tools say so. */
  temporal?: () => Promise<Client>;
  /** Turns a database error into one a person can act on (server away, tables missing). */
  explainDbError?: (err: unknown) => Error;
  log: (line: string) => void;
}

/** A value checked by `schema`, or an error naming `what` and why. */
function parseId<T>(what: string, schema: z.ZodType<T>, raw: string): T {
  const r = schema.safeParse(raw);
  if (!r.success) throw new Error(`bad ${what} ${JSON.stringify(raw)}: ${r.error.issues[0]?.message ?? 'invalid'}`);
  return r.data;
}

/** Run a database read; its error as the bridge was told to explain it. */
async function dbRead<T>(c: MindloopToolContext, read: (db: Db) => Promise<T>): Promise<T> {
  const db = needDb(c);
  try {
    return await read(db);
  } catch (err) {
    throw c.explainDbError ? c.explainDbError(err) : err;
  }
}

function needDb(c: MindloopToolContext): Db {
  if (!c.db)
    throw new Error(
      'this bridge has no database: start it where DATABASE_URL (or the embedded PGlite of `npm start`) is reachable',
    );
  return c.db;
}

async function needTemporal(c: MindloopToolContext): Promise<Client> {
  if (!c.temporal)
    throw new Error(
      'this bridge has no Temporal connection: start it where TEMPORAL_ADDRESS (or the dev server of `npm start`) is reachable',
    );
  return c.temporal();
}

const agentIdArg = agentIdSchema.describe('the agent id');

function registerReads(server: McpServer, c: MindloopToolContext): void {
  server.registerTool(
    'list_agents',
    {
      title: 'List agents',
      description:
        'The agents Mindloop knows (from Postgres): id, name, kind, status, operating mode, parent, last tick and when last seen.',
      inputSchema: { limit: z.number().int().min(1).max(1000).default(200) },
      annotations: { readOnlyHint: true },
    },
    guarded(async ({ limit }) => {
      const rows = await dbRead(c, (db) => listAgents(db, { limit }));
      return { count: rows.length, agents: rows };
    }),
  );

  server.registerTool(
    'agent_status',
    {
      title: "An agent loop's status",
      description:
        "The agent's loop workflow (agent/<id>): whether it runs (or how it ended) and its status query: tick, phase, paused, model, last reply, counters, lifeforce.",
      inputSchema: { agent_id: agentIdArg },
      annotations: { readOnlyHint: true },
    },
    guarded(async ({ agent_id }) => ({ ...(await agentLoopStatus(await needTemporal(c), agent_id)) })),
  );

  server.registerTool(
    'recent_replies',
    {
      title: "An agent's latest replies",
      description:
        'What the agent said at its latest ticks (from Postgres), newest first: tick, content, confidence, novelty, rating, tags.',
      inputSchema: { agent_id: agentIdArg, limit: z.number().int().min(1).max(100).default(10) },
      annotations: { readOnlyHint: true },
    },
    guarded(async ({ agent_id, limit }) => {
      const replies = await dbRead(c, (db) => recentReplies(db, agent_id, limit));
      return { agent_id, count: replies.length, replies };
    }),
  );
}

/** Buses whose command stream is known to exist (checked once per connection). */
const commandStreams = new WeakMap<Bus, Promise<void>>();

function commandStreamOf(bus: Bus): Promise<void> {
  let ready = commandStreams.get(bus);
  if (!ready) {
    ready = ensureCommandStream(bus).then(() => undefined);
    // A failure is not remembered: the next note tries again (the server may gain JetStream).
    ready.catch(() => commandStreams.delete(bus));
    commandStreams.set(bus, ready);
  }
  return ready;
}

type NotePayload = BusPayloadIn<'AgentNote'>;

/** The note through the command stream; null when there is no bus or no stream to take it. */
async function noteViaBus(
  c: MindloopToolContext,
  agentId: string,
  payload: NotePayload,
  messageId: string | undefined,
): Promise<{ result: Record<string, unknown> } | { unavailable: string }> {
  let bus: Bus;
  try {
    bus = c.source.require();
    await commandStreamOf(bus);
  } catch (err) {
    return { unavailable: (err as Error).message };
  }
  // The deployment's Temporal says first whether the agent's loop runs: a note it would never
  // take is refused to the client now, and nothing is stored.
  const check = c.temporal ? async (id: string) => whyNotRunning(await needTemporal(c), id) : undefined;
  const send = () =>
    sendCommand(bus, agentId, 'note', payload, { ...(messageId ? { messageId } : {}), ...(check ? { check } : {}) });
  const r = await send().catch(async (err: unknown) => {
    if (err instanceof CommandRefusedError) throw err;
    // The stream may have been removed since it was checked: make sure of it again, once.
    commandStreams.delete(bus);
    await commandStreamOf(bus).catch(() => {
      throw err;
    });
    return send();
  });
  return {
    result: {
      message_id: r.messageId,
      via: 'bus',
      subject: bus.subjects.agentCommand(agentId, 'note'),
      stream_seq: r.seq,
      duplicate: r.duplicate,
    },
  };
}

/** The note as the `addNote` update, update id = message id (what the bus consumer does). */
async function noteViaTemporal(
  c: MindloopToolContext,
  agentId: string,
  payload: NotePayload,
  messageId: string,
): Promise<Record<string, unknown>> {
  const entry = catalogueRegistry().latestStable('AgentNote')!;
  const parsed = entry.schema.parse(payload) as NotePayload;
  const header = makeHeader({
    type: 'AgentNote',
    generation: entry.generation,
    version: entry.version,
    messageId,
    timestamp: new Date(),
  });
  const outcome = await temporalCommandTarget(await needTemporal(c)).deliver({
    agentId,
    command: 'note',
    messageId,
    header,
    payload: parsed,
    delivery: 1,
  });
  if (outcome.kind === 'rejected') throw new Error(`the note was refused: ${outcome.reason}`);
  if (outcome.kind === 'retry')
    throw new Error(
      `the note was not delivered: ${outcome.reason}; nothing was stored, send it again with message_id ${messageId}`,
    );
  return { message_id: messageId, via: 'temporal' };
}

function registerSendNote(server: McpServer, c: MindloopToolContext): void {
  server.registerTool(
    'send_note',
    {
      title: 'Send an agent a note',
      description:
        'Send the agent a note it sees in its next ticks. Durable: through the bus command stream when the bus has one (the note waits there while no worker runs), else straight to the agent workflow. ' +
        'message_id (optional, default a new UUID) makes it exactly once: the same id again stores nothing new. Returns the message_id.',
      inputSchema: {
        agent_id: agentIdArg,
        text: z.string().trim().min(1).max(16_000),
        priority: z.number().int().min(0).max(10).optional(),
        tags: z.array(z.string().min(1).max(40)).max(20).optional(),
        message_id: z.string().regex(messageIdPattern, 'letters, digits and "_.:-", at most 128 characters').optional(),
      },
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
    },
    guarded(async ({ agent_id, text, priority, tags, message_id }) => {
      const payload: NotePayload = { text, ...(priority !== undefined ? { priority } : {}), ...(tags ? { tags } : {}) };
      const viaBus = await noteViaBus(c, agent_id, payload, message_id);
      if ('result' in viaBus) return viaBus.result;
      if (!c.temporal)
        throw new Error(
          `cannot send the note: no bus command stream (${viaBus.unavailable}) and no Temporal connection`,
        );
      c.log(`mcp bridge: note for ${agent_id} goes to Temporal directly (${viaBus.unavailable})`);
      return noteViaTemporal(c, agent_id, payload, message_id ?? randomUUID());
    }),
  );
}

const answerInput = {
  kind: z
    .enum(['escalation', 'fork'])
    .describe('an escalation (escalation/<id>) or a successor fork’s gate (fork/<id>)'),
  id: z.string().min(1).max(64).describe('the escalation id or the fork id'),
  by: z.string().trim().min(1).max(200).describe('who answers (recorded)'),
  reason: z.string().trim().min(1).max(4000).optional(),
};

type AnswerArgs = { kind: 'escalation' | 'fork'; id: string; by: string; reason?: string };

async function answer(
  c: MindloopToolContext,
  verdict: 'approve' | 'reject',
  a: AnswerArgs,
): Promise<Record<string, unknown>> {
  if (a.kind === 'escalation') {
    const id = parseId('escalation id', escalationIdSchema, a.id);
    if (verdict === 'reject' && !a.reason)
      throw new Error('rejecting an escalation needs a reason (the agent learns from it); nothing was sent');
    const arg =
      verdict === 'approve' ? { by: a.by, ...(a.reason ? { comment: a.reason } : {}) } : { by: a.by, reason: a.reason };
    const status = await answerEscalation(await needTemporal(c), id, verdict, arg);
    return { kind: 'escalation', id, verdict, status };
  }
  const id = parseId('fork id', forkIdSchema, a.id);
  const gate = await answerForkGate(
    await needTemporal(c),
    id,
    verdict === 'approve' ? 'approveFork' : 'rejectFork',
    a.by,
  );
  // The fork gate records who decided, not why.
  return { kind: 'fork', id, verdict, gate, ...(a.reason ? { reason_recorded: false } : {}) };
}

function registerAnswers(server: McpServer, c: MindloopToolContext): void {
  server.registerTool(
    'approve',
    {
      title: 'Approve, as the human tier',
      description:
        "Answer as the human: approve an escalation (beats the oversight's answer; reason is passed on as a comment) or a successor fork's gate (applies the approved patch to the parent agent). " +
        'The workflow may refuse (already decided, not waiting for a gate): the error says why.',
      inputSchema: answerInput,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false },
    },
    guarded((a) => answer(c, 'approve', a)),
  );

  server.registerTool(
    'reject',
    {
      title: 'Reject, as the human tier',
      description:
        "Answer as the human: reject an escalation (reason required) or a successor fork's gate (the patch is discarded). The workflow may refuse (already decided…): the error says why.",
      inputSchema: answerInput,
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false },
    },
    guarded((a) => answer(c, 'reject', a)),
  );
}

/** Register the Mindloop tools of one session. */
export function registerMindloopTools(server: McpServer, c: MindloopToolContext): void {
  registerReads(server, c);
  registerSendNote(server, c);
  registerAnswers(server, c);
}
