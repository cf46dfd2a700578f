/**
 * State-machine tools at run time: progressive discovery (an agent sees and calls
 * only the tools in its `discovered_tools`; any other call is refused and logged), the
 * transition function of core/state-machines.ts applied to the state stored per agent in
 * `tool_states` (so it survives continue-as-new and restarts), danger checks before an action
 * runs (a flagged one is held for human approval, not run), and every attempt logged in
 * `tool_transitions`. The built-in database tool runs structured, read-only queries on the
 * agent's own rows: the table comes from an allow-list, columns from the schema, values are
 * bound parameters, and the query runs in a READ ONLY transaction — no SQL text from the model.
 */
import { and, asc, desc, eq, getTableColumns, getTableName, ilike, or, sql, type SQL } from 'drizzle-orm';
import type { PgColumn } from 'drizzle-orm/pg-core';
import { z } from 'zod';
import { validateCommand } from '../core/catalogue.js';
import { checkDanger, defaultDangerRules, type DangerRule } from '../core/danger-zones.js';
import {
  builtinStateMachines,
  describeTool,
  stateMachineSchema,
  transition,
  validActions,
  type StateMachineDef,
} from '../core/state-machines.js';
import type { Db } from '../db/client.js';
import type { Queryable } from '../db/queries/abstracts.js';
import { statements } from '../db/prepared.js';
import {
  agentOwnedTables,
  decisionLog,
  discoveredTools,
  escalations,
  toolRegistry,
  toolStates,
  toolTransitions,
  type AgentOwnedTable,
} from '../db/schema/index.js';
import { ErrorType, nonRetryable } from './errors.js';
import { formatIssues } from '../core/zod-issues.js';
import { mcpNativeToolName } from '../core/reply-parser.js';
import { clipText, oneLine } from '../core/sanitize.js';
import { discoveredMcpTools, markMcpToolsDiscovered, searchMcpTools } from '../db/queries/mcp.js';
import type { McpServerPolicy, McpToolAnnotations, ToolSpec } from '../db/schema/index.js';
import { heldForHuman, isDestructiveTool } from '../core/mcp-policy.js';
import type { ChatToolDef } from './llm/types.js';

export interface ToolDeps {
  db: Db;
  /** The danger rules in force (default: core/danger-zones.ts defaults). */
  dangerRules?: readonly DangerRule[];
  /**
   * `db` is already a transaction (a command handler's): SET TRANSACTION READ ONLY is only
   * possible as a transaction's first statement, so queries rely on the builder alone (a
   * drizzle SELECT with bound values and the agent_id condition), inside a savepoint.
   */
  inTransaction?: boolean;
}

interface ToolCallInput {
  agentId: string;
  tool: string;
  action: string;
  args?: Record<string, unknown>;
  key: string;
  /** The escalation whose human approved a held action. */
  approvedBy?: string;
}

export type ToolCallResult =
  | { ok: true; tool: string; action: string; from: string; state: string; output: Record<string, unknown> }
  | {
      ok: false;
      tool: string;
      action: string;
      refused: 'undiscovered' | 'invalid_action' | 'held' | 'error';
      error: string;
      state?: string;
      validActions?: string[];
      dangerFlags?: string[];
    };

/** MCP tools one `discover_tools search` returns (and discovers) at most. */
const mcpSearchLimit = 10;

/** Tools every agent starts with (discovered via teaching); the database tool must be granted. */
const starterTools = ['discover_tools', 'escalate', 'request_state_machine_design'] as const;

/** Tables the database tool may read: the agent-owned ones (each row has agent_id). */
const queryableTables: Record<string, AgentOwnedTable> = Object.fromEntries(
  agentOwnedTables.map((t) => [getTableName(t), t]),
);

const scalar = z.union([z.string().max(1000), z.number(), z.boolean(), z.null()]);
const queryArgs = z.strictObject({
  table: z.string().min(1).max(64),
  columns: z.array(z.string().min(1).max(64)).min(1).max(30).optional(),
  where: z.record(z.string().min(1).max(64), scalar).optional(),
  order: z.enum(['newest', 'oldest']).optional(),
  limit: z.number().int().min(1).max(100).default(20),
});
const searchArgs = z.strictObject({ query: z.string().trim().min(1).max(100) });
const escalationListArgs = z.strictObject({ limit: z.number().int().min(1).max(50).default(10) });
const designArgs = z.strictObject({
  capability: z.string().trim().min(1, 'say what the tool must do').max(4000),
  context: z.unknown().optional(),
});
const issues = (what: string, e: z.ZodError) => `${what}: ${formatIssues(e, '(args)')}`;

function columnsOf(t: AgentOwnedTable): Map<string, PgColumn> {
  return new Map(Object.values(getTableColumns(t)).map((c) => [(c as PgColumn).name, c as PgColumn]));
}

async function definitionOf(db: Db, name: string): Promise<StateMachineDef | null> {
  if (builtinStateMachines[name]) return builtinStateMachines[name];
  const [row] = await db
    .select({ spec: toolRegistry.spec })
    .from(toolRegistry)
    .where(and(eq(toolRegistry.name, name), eq(toolRegistry.status, 'active')));
  const machine = stateMachineSchema.safeParse(row?.spec.machine);
  return machine.success ? machine.data : null;
}

async function discovered(db: Db, agentId: string): Promise<string[]> {
  const rows = await db
    .select({ name: toolRegistry.name })
    .from(discoveredTools)
    .innerJoin(toolRegistry, eq(toolRegistry.id, discoveredTools.toolId))
    .where(and(eq(discoveredTools.agentId, agentId), eq(toolRegistry.status, 'active')))
    .orderBy(asc(toolRegistry.name));
  return rows.map((r) => r.name);
}

async function runQuery(
  deps: ToolDeps,
  agentId: string,
  rawArgs: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const parsed = queryArgs.safeParse(rawArgs);
  if (!parsed.success) throw new ToolActionError(issues('database.query', parsed.error));
  const a = parsed.data;
  const table = queryableTables[a.table];
  if (!table)
    throw new ToolActionError(
      `database.query: table '${a.table}' is not one of yours; you may query: ${Object.keys(queryableTables).sort().join(', ')}`,
    );
  const cols = columnsOf(table);
  const pick = (name: string): PgColumn => {
    const c = cols.get(name);
    if (!c)
      throw new ToolActionError(
        `database.query: ${a.table} has no column '${name}'; columns: ${[...cols.keys()].join(', ')}`,
      );
    return c;
  };
  const selected = Object.fromEntries((a.columns ?? [...cols.keys()]).map((n) => [n, pick(n)]));
  const conds: SQL[] = [eq(table.agentId, agentId)]; // always: the agent's own rows only
  for (const [k, v] of Object.entries(a.where ?? {})) conds.push(v === null ? sql`${pick(k)} is null` : eq(pick(k), v));
  const idCol = cols.get('id');
  // READ ONLY: even a bug in this builder cannot write.
  const rows = await deps.db.transaction(async (tx) => {
    if (!deps.inTransaction) await tx.execute(sql`set transaction read only`);
    const q = tx
      .select(selected)
      .from(table)
      .where(and(...conds))
      .limit(a.limit);
    return idCol ? q.orderBy(a.order === 'oldest' ? asc(idCol) : desc(idCol)) : q;
  });
  return { table: a.table, rows: rows as unknown as Record<string, unknown>, count: rows.length };
}

async function effect(
  deps: ToolDeps,
  agentId: string,
  toolName: string,
  action: string,
  args: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  switch (`${toolName}.${action}`) {
    case 'database.connect':
      return { connected: true, readOnly: true };
    case 'database.disconnect':
      return { connected: false };
    case 'database.list_tables':
      return {
        tables: Object.fromEntries(Object.entries(queryableTables).map(([n, t]) => [n, [...columnsOf(t).keys()]])),
      };
    case 'database.query':
      return runQuery(deps, agentId, args);
    case 'discover_tools.list': {
      const mcp = await discoveredMcpTools(deps.db, agentId);
      return {
        discovered: await discovered(deps.db, agentId),
        ...(mcp.length ? { mcp: mcp.map((t) => mcpToolLabel(t.server, t.name, t.annotations, t.policy)) } : {}),
      };
    }
    case 'discover_tools.search': {
      const a = searchArgs.safeParse(args);
      if (!a.success) throw new ToolActionError(issues('discover_tools.search', a.error));
      const mine = new Set(await discovered(deps.db, agentId));
      const like = `%${a.data.query.replace(/[%_\\]/g, '\\$&')}%`;
      const rows = await deps.db
        .select({ name: toolRegistry.name, description: toolRegistry.description, capability: toolRegistry.capability })
        .from(toolRegistry)
        .where(
          and(
            eq(toolRegistry.status, 'active'),
            or(
              ilike(toolRegistry.name, like),
              ilike(toolRegistry.description, like),
              ilike(toolRegistry.capability, like),
            ),
          ),
        )
        .limit(20);
      const mcp = await searchMcpTools(deps.db, agentId, a.data.query, mcpSearchLimit);
      // A search result is what discovers an MCP tool: the next context lists it, and binds it natively.
      await markMcpToolsDiscovered(
        deps.db,
        agentId,
        mcp.filter((t) => t.discoveredAt === null).map((t) => t.id),
      );
      return {
        matches: rows.map((r) => ({ ...r, discovered: mine.has(r.name) })),
        hint: 'a tool you have not discovered is granted through an escalation',
        ...(mcp.length
          ? {
              mcp: mcp.map((t) => ({
                tool: mcpToolLabel(t.server, t.name, t.annotations, t.policy),
                description: oneLine(t.description ?? '', 200),
                newly: t.discoveredAt === null,
              })),
              mcpHint:
                'these MCP tools are in your context from the next tick: call one with tools.mcp {server, tool, args}',
            }
          : {}),
      };
    }
    case 'escalate.list': {
      const a = escalationListArgs.safeParse(args);
      if (!a.success) throw new ToolActionError(issues('escalate.list', a.error));
      // Read-only, the agent's own rows only; the decision is the decision_log's (one row per escalation).
      const rows = await deps.db
        .select({
          id: escalations.id,
          task: escalations.task,
          category: escalations.category,
          status: escalations.status,
          decidedBy: escalations.decidedBy,
          outcome: decisionLog.outcome,
          oversight: decisionLog.oversightAnswer,
          human: decisionLog.humanAnswer,
          created: escalations.createdAt,
        })
        .from(escalations)
        .leftJoin(decisionLog, eq(decisionLog.escalationId, escalations.id))
        .where(eq(escalations.agentId, agentId))
        .orderBy(desc(escalations.createdAt), desc(escalations.id))
        .limit(a.data.limit);
      return {
        escalations: rows.map((r) => ({
          id: r.id,
          task: r.task.slice(0, 200),
          category: r.category,
          status: r.status,
          decision: r.decidedBy
            ? { by: r.decidedBy, outcome: r.outcome, oversight: r.oversight, human: r.human }
            : null,
          created: r.created.toISOString(),
        })),
      };
    }
    case 'escalate.escalate': {
      // The same arguments, and the same error, as the `escalate` command.
      const v = validateCommand({ cmdId: 'tool', type: 'escalate', args });
      if (!v.ok) throw new ToolActionError(v.reason);
      return { requested: 'escalate.escalate', args: v.command.args as Record<string, unknown> };
    }
    case 'request_state_machine_design.request': {
      const a = designArgs.safeParse(args);
      if (!a.success)
        throw new ToolActionError(issues('invalid args for request_state_machine_design.request', a.error));
      return { requested: 'request_state_machine_design.request', args: a.data as Record<string, unknown> };
    }
    default:
      // Designed tools: the transition is the effect here. (escalate.escalate and
      // request_state_machine_design.request too, once their args are valid: the command
      // handler turns them into the escalation the agent loop starts.)
      return { requested: `${toolName}.${action}`, args };
  }
}

async function logTransition(db: Db, row: typeof toolTransitions.$inferInsert): Promise<void> {
  await db.insert(toolTransitions).values(row).onConflictDoNothing({ target: toolTransitions.idempotencyKey });
}

/** Put the built-in state-machine tools in the catalogue (idempotent). */
export async function ensureBuiltinTools(db: Db): Promise<{ names: string[] }> {
  for (const def of Object.values(builtinStateMachines)) {
    await db
      .insert(toolRegistry)
      .values({
        name: def.name,
        description: def.description,
        capability: `builtin.${def.name}`,
        kind: 'builtin',
        status: 'active',
        createdBy: 'system',
        spec: {
          states: Object.keys(def.states),
          initial: def.initial,
          transitions: Object.fromEntries(Object.entries(def.states).map(([s, d]) => [s, Object.keys(d.actions)])),
          machine: def,
        },
      })
      .onConflictDoNothing({ target: toolRegistry.name });
  }
  return { names: Object.keys(builtinStateMachines) };
}

/** Give an agent the starter tools (via teaching); the rest comes through escalations and designs. */
export async function grantStarterTools(
  db: Db,
  input: { agentId: string; tools?: string[] },
): Promise<{ discovered: string[] }> {
  const names = input.tools ?? [...starterTools];
  const rows = await db
    .select({ id: toolRegistry.id })
    .from(toolRegistry)
    .where(sql`${toolRegistry.name} in ${names}`);
  for (const r of rows)
    await db
      .insert(discoveredTools)
      .values({ agentId: input.agentId, toolId: r.id, via: 'teaching' })
      .onConflictDoNothing();
  return { discovered: await discovered(db, input.agentId) };
}

/**
 * The agent's discovered, active tools with their stored state (placeholder `agentId`): a
 * main-loop tick's context reads it within its own statement (activities/tick/context.ts).
 */
export function describedToolsQuery(db: Queryable) {
  return db
    .select(describedToolFields)
    .from(discoveredTools)
    .innerJoin(toolRegistry, eq(toolRegistry.id, discoveredTools.toolId))
    .leftJoin(toolStates, and(eq(toolStates.agentId, discoveredTools.agentId), eq(toolStates.tool, toolRegistry.name)))
    .where(and(eq(discoveredTools.agentId, sql.placeholder('agentId')), eq(toolRegistry.status, 'active')))
    .orderBy(asc(toolRegistry.name));
}

/** The fields of `describedToolsQuery`, and a row of it. */
export const describedToolFields = { name: toolRegistry.name, spec: toolRegistry.spec, state: toolStates.state };
export type DescribedToolRow = { name: string; spec: ToolSpec; state: string | null };

const toolStatements = statements('tools', (db, name) => ({
  described: describedToolsQuery(db).prepare(name('described')),
}));

export type ToolDescription = { name: string; state: string; validActions: string[]; description: string };

/** The tools of `rows` with the description a model sees (current state, valid actions). */
export function describeRows(rows: readonly DescribedToolRow[]): ToolDescription[] {
  const out = [];
  for (const { name, spec, state: stored } of rows) {
    const machine = builtinStateMachines[name] ?? stateMachineSchema.safeParse(spec.machine).data;
    if (!machine) continue;
    const state = stored && machine.states[stored] ? stored : machine.initial;
    out.push({ name, state, validActions: validActions(machine, state), description: describeTool(machine, state) });
  }
  return out;
}

/** The agent's discovered tools with the description a model sees (one query). */
export async function toolDescriptions(db: Db, input: { agentId: string }): Promise<ToolDescription[]> {
  return describeRows(await toolStatements(db).described.execute({ agentId: input.agentId }));
}

/**
 * One tool action: refused when the tool is not discovered, an error listing the valid
 * actions when invalid in the current state, held when a danger rule trips (unless a
 * human approved it: `approvedBy` = the escalation), else run and the new state stored.
 */
export async function callTool(deps: ToolDeps, input: ToolCallInput): Promise<ToolCallResult> {
  const { agentId, tool, action, key } = input;
  const args = input.args ?? {};
  const [seen] = await deps.db.select().from(toolTransitions).where(eq(toolTransitions.idempotencyKey, key));
  if (seen) return seen.output as ToolCallResult; // a retry: the first attempt's answer

  const mine = await discovered(deps.db, agentId);
  if (!mine.includes(tool)) {
    const r: ToolCallResult = {
      ok: false,
      tool,
      action,
      refused: 'undiscovered',
      error: `tool '${tool}' is not among your discovered tools (${mine.join(', ') || 'none'}); escalate to be granted it`,
    };
    await logTransition(deps.db, {
      agentId,
      tool,
      action,
      result: 'undiscovered',
      args,
      error: r.error,
      discovered: false,
      idempotencyKey: key,
      output: r,
    });
    return r;
  }
  const def = await definitionOf(deps.db, tool);
  if (!def) throw nonRetryable(ErrorType.NotFound, `tool '${tool}' has no state-machine definition`);
  const [stored] = await deps.db
    .select()
    .from(toolStates)
    .where(and(eq(toolStates.agentId, agentId), eq(toolStates.tool, tool)));
  const state = stored && def.states[stored.state] ? stored.state : def.initial;
  const t = transition(def, state, action);
  if (!t.ok) {
    const r: ToolCallResult = {
      ok: false,
      tool,
      action,
      refused: 'invalid_action',
      error: t.error,
      state,
      validActions: t.validActions,
    };
    await logTransition(deps.db, {
      agentId,
      tool,
      action,
      fromState: state,
      toState: state,
      result: 'invalid_action',
      args,
      error: t.error,
      idempotencyKey: key,
      output: r,
    });
    return r;
  }
  const flags = checkDanger(
    { kind: 'tool', name: `${tool}.${action}`, args, agentId },
    deps.dangerRules ?? defaultDangerRules,
  ).map((f) => f.rule);
  if (flags.length && !input.approvedBy) {
    const r: ToolCallResult = {
      ok: false,
      tool,
      action,
      refused: 'held',
      state,
      dangerFlags: flags,
      error: `${tool}.${action} trips danger rules (${flags.join(', ')}): held until a human approves it through an escalation`,
    };
    await logTransition(deps.db, {
      agentId,
      tool,
      action,
      fromState: state,
      toState: state,
      result: 'held',
      args,
      error: r.error,
      dangerFlags: flags,
      idempotencyKey: key,
      output: r,
    });
    return r;
  }
  let output: Record<string, unknown>;
  try {
    output = await effect(deps, agentId, tool, action, args);
  } catch (err) {
    if (!(err instanceof ToolActionError)) throw err;
    // The action failed: the machine stays where it was.
    const r: ToolCallResult = {
      ok: false,
      tool,
      action,
      refused: 'error',
      error: err.message,
      state,
      validActions: validActions(def, state),
    };
    await logTransition(deps.db, {
      agentId,
      tool,
      action,
      fromState: state,
      toState: state,
      result: 'error',
      args,
      error: err.message,
      dangerFlags: flags,
      approvedBy: input.approvedBy ?? null,
      idempotencyKey: key,
      output: r,
    });
    return r;
  }
  const r: ToolCallResult = { ok: true, tool, action, from: t.from, state: t.to, output };
  await deps.db.transaction(async (tx) => {
    await tx
      .insert(toolStates)
      .values({ agentId, tool, state: t.to })
      .onConflictDoUpdate({
        target: [toolStates.agentId, toolStates.tool],
        set: { state: t.to, updatedAt: new Date() },
      });
    await tx
      .insert(toolTransitions)
      .values({
        agentId,
        tool,
        action,
        fromState: t.from,
        toState: t.to,
        result: 'ok',
        args,
        dangerFlags: flags,
        approvedBy: input.approvedBy ?? null,
        idempotencyKey: key,
        output: r,
      })
      .onConflictDoNothing({ target: toolTransitions.idempotencyKey });
  });
  return r;
}

/** State-machine tool activities for the `mindloop` queue: the functions above, bound to their dependencies. */
export function createToolActivities(deps: ToolDeps) {
  return {
    /** Put the built-in state-machine tools in the catalogue (idempotent). */
    ensureBuiltinTools: () => ensureBuiltinTools(deps.db),
    /** Give an agent the starter tools (via teaching). */
    grantStarterTools: (input: { agentId: string; tools?: string[] }) => grantStarterTools(deps.db, input),
    /** The agent's discovered tools with the description a model sees. */
    toolDescriptions: (input: { agentId: string }) => toolDescriptions(deps.db, input),
    /** One tool action (refused, invalid, held or run). */
    callTool: (input: ToolCallInput) => callTool(deps, input),
  };
}

/** A tool action that failed for a reason the model can fix (bad args, unknown table). */
class ToolActionError extends Error {}

/**
 * The agent's discovered tools as native tool definitions (OpenAI function format), for a think
 * call that binds them (ChatRequest.tools): the description shows the current state and the valid
 * actions, and the call takes an action with its args (a `tool.call` command when the reply is read).
 */
export function toolDefinitions(tools: readonly ToolDescription[]): ChatToolDef[] {
  return tools.map((t) => ({
    name: t.name,
    description: t.description,
    parameters: {
      type: 'object',
      properties: {
        action: { type: 'string', description: `one of: ${t.validActions.join(', ')}` },
        args: { type: 'object', propertyNames: { type: 'string' }, additionalProperties: {} },
      },
      required: ['action'],
      additionalProperties: false,
    },
  }));
}

/** An MCP tool as the context and native binding see it (a row of context 2). */
export interface McpContextTool {
  server: string;
  name: string;
  description: string | null;
  inputSchema: Record<string, unknown>;
  annotations: McpToolAnnotations;
  /** Its server's policy: what the agent's file allows of it. */
  policy: McpServerPolicy;
}

/**
 * The flags an MCP tool shows the agent: read-only, or destructive (the protocol's default when the
 * server says neither), held for a human unless the agent's file allows it.
 */
export function mcpToolFlags(tool: string, a: McpToolAnnotations, policy: McpServerPolicy = {}): string[] {
  if (a.readOnlyHint === true) return ['read-only'];
  if (!isDestructiveTool(a)) return [];
  return [heldForHuman(tool, a, policy) ? 'destructive: held for a human' : 'destructive: allowed by your file'];
}

/** `server.tool [flags]`, as context 2 and discover_tools show an MCP tool. */
export function mcpToolLabel(
  server: string,
  tool: string,
  a: McpToolAnnotations,
  policy: McpServerPolicy = {},
): string {
  const flags = mcpToolFlags(tool, a, policy);
  return `${server}.${tool}${flags.length ? ` [${flags.join(', ')}]` : ''}`;
}

/** An MCP input schema as tool-calling APIs take it: an object schema, without `$schema`. */
export function mcpToolParameters(schema: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _, ...rest } = schema;
  if (rest.type !== 'object') return { type: 'object', properties: {} };
  const props = rest.properties;
  return { ...rest, properties: props && typeof props === 'object' && !Array.isArray(props) ? props : {} };
}

/**
 * The agent's discovered MCP tools as native tool definitions, named `mcp__<server>__<tool>`; a
 * tool whose name does not fit a tool name is left out (the `tools.mcp` command still calls it).
 */
export function mcpToolDefinitions(tools: readonly McpContextTool[]): ChatToolDef[] {
  return tools.flatMap((t) => {
    const name = mcpNativeToolName(t.server, t.name);
    if (!name) return [];
    const description = clipText(
      `${mcpToolLabel(t.server, t.name, t.annotations, t.policy)}: ${oneLine(t.description ?? '', 800)}`,
      1000,
    );
    return [{ name, description, parameters: mcpToolParameters(t.inputSchema) }];
  });
}
