/**
 * The bus as MCP tools: publish, request, subscribe / unsubscribe, heartbeat. Every message goes
 * through the schema registry both ways; a refusal of any kind (a subject outside the root or
 * off the allow-list, a payload the registry refuses, no bus, no answer) is a tool error whose
 * text names the reason, never a crash of the session.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { catalogueRegistry, type BusMessageType } from '../../core/bus/catalogue.js';
import { BusSchemaError } from '../../core/bus/codec.js';
import { BusRequestError, BusUnavailableError } from '../bus.js';
import type { BusSource } from './bus-link.js';
import type { BridgeSession } from './session.js';
import { resolveSubject, SubjectRefusedError, type PublishAllowList } from './subjects.js';

/** A tool's answer: the data as compact JSON text (what every client shows; fewer tokens for a model) and as structured content. */
function toolResult(data: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(data) }], structuredContent: data };
}

/** A refusal or failure: `isError` with the reason as text. */
function toolError(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

/** The reason in words, by kind of error. */
function describeError(err: unknown): string {
  if (err instanceof SubjectRefusedError) return `refused: ${err.message}`;
  if (err instanceof BusSchemaError) return `refused by the schema registry (${err.reason}): ${err.message}`;
  if (err instanceof BusRequestError) return `request failed (${err.kind}): ${err.message}`;
  if (err instanceof BusUnavailableError) return err.message;
  return err instanceof Error ? err.message : String(err);
}

/** Run a tool body; whatever it throws becomes a tool error naming why. */
export function guarded<A>(
  fn: (args: A) => Promise<Record<string, unknown>> | Record<string, unknown>,
): (args: A) => Promise<CallToolResult> {
  return async (args) => {
    try {
      return toolResult(await fn(args));
    } catch (err) {
      return toolError(describeError(err));
    }
  };
}

interface BusToolContext {
  session: BridgeSession;
  source: BusSource;
  allow: PublishAllowList;
}

/** The registry's types and their namespaces, for the tool descriptions. */
function typeList(): string {
  const seen = new Map<string, string>();
  for (const e of catalogueRegistry().stableEntries()) seen.set(e.type, e.namespace);
  return [...seen].map(([t, ns]) => `${t} (${ns})`).join(', ');
}

const subjectArg = z.string().min(1).max(512);
const payloadArg = z.record(z.string(), z.unknown()).describe("the message's fields, as the type's schema wants them");
const typeArg = z.string().min(1).max(100);

/** Wait until the server has what was published, but not forever while the client reconnects. */
async function flushed(flush: () => Promise<void>): Promise<boolean> {
  return Promise.race([flush().then(() => true), sleep(2000, false)]);
}

function registerPublish(server: McpServer, c: BusToolContext, types: string): void {
  server.registerTool(
    'publish',
    {
      title: 'Publish a message on the bus',
      description:
        `Publish one message on the Mindloop bus (root "${c.source.root}"), checked by the schema registry. ` +
        `subject: relative to the root (e.g. dev.request.echo) or absolute (${c.source.root}.dev.request.echo); no wildcards; only subjects matching the allow-list ${c.allow.patterns.join(', ')}. ` +
        `message_type: one of ${types}; the type must travel in the subject's namespace. version: a staging version such as 1.1-alpha (only on staging.* subjects); default the latest stable generation. ` +
        'Returns the header that went out. To send an agent a note, use send_note.',
      inputSchema: {
        subject: subjectArg.describe('where to publish'),
        message_type: typeArg,
        payload: payloadArg,
        version: z.string().min(1).max(40).optional(),
      },
      annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
    },
    guarded(async ({ subject, message_type, payload, version }) => {
      const to = resolveSubject(c.source.root, subject, { wildcards: false });
      c.allow.check(to);
      const bus = c.source.require();
      const header = bus.send(to, message_type, payload, version ? { version } : {});
      return { subject: to, message_id: header.message_id, header, flushed: await flushed(() => bus.flush()) };
    }),
  );
}

function registerRequest(server: McpServer, c: BusToolContext, types: string): void {
  server.registerTool(
    'request',
    {
      title: 'Request and wait for the answer',
      description:
        `Send a request on the bus and wait for one answer of type \`expect\` (e.g. subject dev.request.echo, message_type EchoRequest, payload {"ping": "hi"}, expect EchoResponse). ` +
        `Subjects as for publish (same allow-list). Types: ${types}. timeout_ms: how long to wait (default 5000, at most 60000). ` +
        'Errors name their kind: no_responders (nobody listens), timeout, rejected (the answer failed the registry).',
      inputSchema: {
        subject: subjectArg,
        message_type: typeArg,
        payload: payloadArg,
        expect: typeArg.describe('the message type of the answer'),
        timeout_ms: z.number().int().min(1).max(60_000).default(5000),
      },
      annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
    },
    guarded(async ({ subject, message_type, payload, expect, timeout_ms }) => {
      const to = resolveSubject(c.source.root, subject, { wildcards: false });
      c.allow.check(to);
      const bus = c.source.require();
      const known = bus.registry.lookup(expect, 0, '0.0');
      if ('reason' in known && known.reason === 'unknown_type')
        throw new BusSchemaError('unknown_type', `expect: ${known.detail}`);
      const answer = await bus.request(to, message_type as BusMessageType, payload as never, {
        expect: expect as BusMessageType,
        timeoutMs: timeout_ms,
      });
      return { subject: to, answer: { subject: answer.subject, header: answer.header, payload: answer.payload } };
    }),
  );
}

function registerSubscriptions(server: McpServer, c: BusToolContext): void {
  server.registerTool(
    'subscribe',
    {
      title: 'Listen on a subject',
      description:
        `Listen on a subject under the bus root "${c.source.root}" (relative or absolute; wildcards allowed: * one token, > the rest, e.g. high.agent.*.reply or dev.>). ` +
        "Messages that pass the schema registry are kept in this session's heartbeat buffer until the next heartbeat call (when it is full the oldest go, counted); refused ones are counted. Returns the subscription id once the bus holds the subscription (active: true).",
      inputSchema: { subject: subjectArg.describe('subject or pattern to listen on') },
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    guarded(async ({ subject }) => {
      const r = c.session.subscribe(subject);
      // Answer once the server holds the subscription: a message published right after the
      // answer (by this client or any other) is then received, not lost to a race.
      const active = await flushed(() => c.source.require().flush());
      return {
        subscription: r.id,
        subject: r.subject,
        already_subscribed: r.existing,
        active,
        subscriptions: c.session.subscriptions,
      };
    }),
  );

  server.registerTool(
    'unsubscribe',
    {
      title: 'Stop listening',
      description:
        'Stop a subscription of this session, named by its id (subscription: "sub-1") or by its subject (subject: "dev.>", as given to subscribe). Messages already buffered stay for the next heartbeat.',
      inputSchema: {
        subscription: z.string().min(1).max(512).optional().describe('a subscription id (or a subscribed subject)'),
        subject: subjectArg.optional().describe('a subscribed subject (or a subscription id)'),
      },
      annotations: { readOnlyHint: true, idempotentHint: false },
    },
    guarded(({ subscription, subject }) => {
      const which = subscription ?? subject;
      if (which === undefined)
        throw new SubjectRefusedError(
          `name the subscription to stop: subscription (its id) or subject; this session holds: ${c.session.subscriptions.map((s) => `${s.id} (${s.subject})`).join(', ') || 'none'}`,
        );
      const r = c.session.unsubscribe(which);
      return { unsubscribed: r.id, subject: r.subject, subscriptions: c.session.subscriptions };
    }),
  );
}

function registerHeartbeat(server: McpServer, c: BusToolContext): void {
  server.registerTool(
    'heartbeat',
    {
      title: 'Bus health and buffered messages',
      description:
        'Bus health (connected, server, root, messages refused by the registry) and every message buffered since the last heartbeat, oldest first, each with subject, header, payload and received_at. ' +
        `Also current_count, messages_dropped_since_last_heartbeat and messages_dropped_total (the buffer holds ${c.session.buffer.capacity}; when full, the oldest go) and oldest_message_age_ms. Call it regularly.`,
      inputSchema: {},
      annotations: { readOnlyHint: false, idempotentHint: false },
    },
    guarded(() => ({ ...c.session.heartbeat() })),
  );
}

/** Register the bus tools of one session. */
export function registerBusTools(server: McpServer, c: BusToolContext): void {
  const types = typeList();
  registerPublish(server, c, types);
  registerRequest(server, c, types);
  registerSubscriptions(server, c);
  registerHeartbeat(server, c);
}
