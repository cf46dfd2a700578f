/**
 * MCP tools: the MCP servers an agent may use, the tools each server listed, and every call
 * made to them. Kept apart from `tool_registry`, which is one shared catalogue keyed by a
 * globally unique name: an MCP server belongs to one agent, its tools are named by the server
 * (two agents' servers may both list `read_file`), and a server's list is replaced whenever it
 * is listed again.
 */
import { boolean, check, index, integer, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { agentId } from './agents.js';
import { bigintRef, jsonbOf, oneOf, rowId, textArray, timestamps, tstz } from './_columns.js';

export const mcpTransports = ['stdio', 'http'] as const;
export const mcpServerSources = ['file', 'person'] as const;
export const mcpServerHealths = ['up', 'down'] as const;
export const mcpCallStatuses = ['started', 'ok', 'error', 'unknown'] as const;

/** The MCP annotations of a tool that drive policy (absent: the protocol's defaults). */
export interface McpToolAnnotations {
  title?: string;
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

/**
 * What an agent may do with one server's tools, beyond what the server's annotations say: from
 * the agent file's entry or a person's flags. Absent keys: the defaults (nothing destructive
 * allowed, no argument allow-lists, the deployment's prices, every tool granted).
 */
export interface McpServerPolicy {
  /** Destructive tools that run without a human: `true` for all, or the tools by name. */
  allowDestructive?: boolean | string[];
  /** Path arguments must lie under one of these directories (absolute, or relative to the worker's directory). */
  allowPaths?: string[];
  /** URL arguments must start with one of these prefixes (`https://api.example.org/`). */
  allowUrls?: string[];
  /** Tools listed in the agent's context from the start (`all`, or by name); the rest are found by search. */
  grant?: 'all' | string[];
  /** Lifeforce per call and per second of a call (absent: the deployment's prices). */
  pricePerCall?: number;
  pricePerSecond?: number;
}

/** A server run inside the sandbox container instead of as the worker's child. */
export interface McpServerSandbox {
  /** Whether the container may reach the network (default: no). */
  network?: boolean;
}

export const mcpServers = pgTable(
  'mcp_servers',
  {
    id: rowId(),
    agentId: agentId(),
    name: text('name').notNull(),
    transport: text('transport', { enum: mcpTransports }).notNull(),
    /** stdio: the program and its arguments. */
    command: text('command'),
    args: textArray('args'),
    /** http: the streamable HTTP endpoint. */
    url: text('url'),
    /** Names of the worker's environment variables a stdio server receives (values are never stored). */
    envNames: textArray('env_names'),
    /** http: `Header=VAR` pairs, the header's value read from the worker's variable VAR. */
    headerEnv: jsonbOf<Record<string, string>>('header_env', {}),
    enabled: boolean('enabled').notNull().default(true),
    policy: jsonbOf<McpServerPolicy>('policy', {}),
    /** Run inside the sandbox container (null: the worker's own child process). */
    sandbox: jsonb('sandbox').$type<McpServerSandbox>(),
    source: text('source', { enum: mcpServerSources }).notNull(),
    /** When the tools were last listed. */
    listedAt: tstz('listed_at'),
    /** The worker's view of its process: `up` or `down` (null: not started since it was added). */
    health: text('health', { enum: mcpServerHealths }),
    healthAt: tstz('health_at'),
    /** Why it last failed to start or stopped. */
    lastError: text('last_error'),
    /** Times a worker started it again after it died or failed to start. */
    restarts: integer('restarts').notNull().default(0),
    ...timestamps,
  },
  (t) => [
    uniqueIndex('mcp_servers_agent_id_name_uq').on(t.agentId, t.name),
    check('mcp_servers_transport_check', oneOf(t.transport, mcpTransports)),
    check('mcp_servers_source_check', oneOf(t.source, mcpServerSources)),
    check('mcp_servers_health_check', oneOf(t.health, mcpServerHealths)),
  ],
);

export const mcpTools = pgTable(
  'mcp_tools',
  {
    id: rowId(),
    agentId: agentId(),
    serverId: bigintRef('server_id')
      .notNull()
      .references(() => mcpServers.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    description: text('description'),
    inputSchema: jsonbOf<Record<string, unknown>>('input_schema', {}),
    annotations: jsonbOf<McpToolAnnotations>('annotations', {}),
    /** When the agent came to know the tool (granted, or found by search); null: not in its context. */
    discoveredAt: tstz('discovered_at'),
    ...timestamps,
  },
  (t) => [
    uniqueIndex('mcp_tools_server_id_name_uq').on(t.serverId, t.name),
    index('mcp_tools_agent_id_idx').on(t.agentId),
  ],
);

/**
 * One row per durable call, keyed by the tick's idempotency key. It is written `started`
 * before the server is asked and finished (`ok`, `error`, `unknown`) before the activity
 * completes, so a retry finds it instead of calling again.
 */
export const mcpCalls = pgTable(
  'mcp_calls',
  {
    id: rowId(),
    agentId: agentId(),
    key: text('key').notNull().unique('mcp_calls_key_uq'),
    server: text('server').notNull(),
    tool: text('tool').notNull(),
    args: jsonb('args').$type<Record<string, unknown>>(),
    status: text('status', { enum: mcpCallStatuses }).notNull(),
    /** What the agent reads: the result's text, sanitised and capped. */
    text: text('text'),
    /** The result's structured content, sanitised and capped (null when it had none or was too big). */
    structured: jsonb('structured').$type<Record<string, unknown>>(),
    isError: boolean('is_error').notNull().default(false),
    finishedAt: tstz('finished_at'),
    ...timestamps,
  },
  (t) => [
    index('mcp_calls_agent_id_created_at_idx').on(t.agentId, t.createdAt),
    check('mcp_calls_status_check', oneOf(t.status, mcpCallStatuses)),
  ],
);

export type McpServer = typeof mcpServers.$inferSelect;
export type McpTool = typeof mcpTools.$inferSelect;
export type McpCall = typeof mcpCalls.$inferSelect;
