/**
 * The MCP bridge: any MCP client (Claude Desktop, an IDE, LangChain) gets the bus and Mindloop
 * as tools. A bridge serves any number of sessions, each on a transport of its own (stdio, one
 * streamable HTTP session, an in-memory pair): every session is its own MCP server with its own
 * subscriptions and heartbeat buffer, and closing the transport ends them.
 */
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { Client } from '@temporalio/client';
import type { Db } from '../../db/client.js';
import { Bus } from '../bus.js';
import { fixedBusSource, type BusSource } from './bus-link.js';
import { registerMindloopTools } from './mindloop-tools.js';
import { BridgeSession } from './session.js';
import { PublishAllowList } from './subjects.js';
import { registerBusTools } from './tools.js';

export const defaultBufferSize = 100;
/** The largest heartbeat buffer a session may have. */
export const maxBufferSize = 100_000;

export interface CreateBridgeOptions {
  /** The bus (its owner closes it), or a source that connects and reconnects by itself (BusLink). */
  bus: Bus | BusSource;
  /** Postgres, for list_agents and recent_replies. */
  db?: Db;
  /** Temporal, for agent_status, approve / reject and send_note without a bus: a client, or how to get one when first needed. */
  temporal?: Client | (() => Promise<Client>);
  /** Heartbeat buffer per session (default 100). */
  bufferSize?: number;
  /** Subject patterns (NATS wildcards, relative to the root) clients may publish to beyond the defaults. */
  allow?: readonly string[];
  /** Turns a database error into one a person can act on. */
  explainDbError?: (err: unknown) => Error;
  /** Where the bridge logs (never stdout: on stdio that is the protocol's). Default stderr. */
  log?: (line: string) => void;
  /** The name clients see. */
  name?: string;
}

/** One client's session: its MCP server and its bus state. */
export interface BridgeSessionHandle {
  readonly id: string;
  readonly server: McpServer;
  readonly state: BridgeSession;
  close(): Promise<void>;
}

export interface Bridge {
  readonly root: string;
  readonly allow: PublishAllowList;
  readonly sessions: ReadonlyMap<string, BridgeSessionHandle>;
  /** Serve a new session on `transport`; it ends when the transport closes. */
  connect(transport: Transport, o?: { sessionId?: string }): Promise<BridgeSessionHandle>;
  /** Close every session (the bus, database and Temporal stay with whoever gave them). */
  close(): Promise<void>;
}

const packageVersion = '0.1.0';

/** A bridge over the given bus, database and Temporal; refuses a bad buffer size or allow pattern at once. */
export function createBridge(o: CreateBridgeOptions): Bridge {
  const source: BusSource = o.bus instanceof Bus ? fixedBusSource(o.bus) : o.bus;
  const bufferSize = o.bufferSize ?? defaultBufferSize;
  if (!Number.isInteger(bufferSize) || bufferSize < 1 || bufferSize > maxBufferSize)
    throw new RangeError(`bufferSize must be an integer in 1..${maxBufferSize}, got ${bufferSize}`);
  const allow = new PublishAllowList(source.root, o.allow ?? []);
  const log = o.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const temporal =
    o.temporal === undefined
      ? undefined
      : typeof o.temporal === 'function'
        ? o.temporal
        : (
            (c: Client) => () =>
              Promise.resolve(c)
          )(o.temporal);
  const sessions = new Map<string, BridgeSessionHandle>();

  return {
    root: source.root,
    allow,
    sessions,
    async connect(transport, opts = {}) {
      const id = opts.sessionId ?? randomUUID();
      if (sessions.has(id)) throw new Error(`session ${id} exists already`);
      const server = new McpServer(
        { name: o.name ?? 'mindloop', version: packageVersion },
        {
          instructions: `Mindloop's message bus (root "${source.root}") and its agents. Call heartbeat regularly to receive what your subscriptions buffered.`,
        },
      );
      const state = new BridgeSession(id, source, bufferSize, log);
      registerBusTools(server, { session: state, source, allow });
      registerMindloopTools(server, { source, db: o.db, temporal, explainDbError: o.explainDbError, log });
      const handle: BridgeSessionHandle = { id, server, state, close: () => server.close() };
      server.server.onclose = () => {
        state.close();
        sessions.delete(id);
      };
      sessions.set(id, handle);
      try {
        await server.connect(transport);
      } catch (err) {
        state.close();
        sessions.delete(id);
        throw err;
      }
      return handle;
    },
    async close() {
      await Promise.allSettled([...sessions.values()].map((s) => s.close()));
      sessions.clear();
    },
  };
}
