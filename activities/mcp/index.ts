/**
 * The MCP activities: `mcpCall`, one durable call of a tool of one of the agent's MCP servers.
 *
 * Done once: the call's row (`mcp_calls`, keyed by the tick's idempotency key) is written
 * `started` before the server is asked and finished before the activity completes. A retry that
 * finds it finished returns what was recorded; one that finds it still `started` (the worker
 * died mid-call) calls again only a tool its server marks read-only or idempotent, and records
 * any other as an unknown outcome, which the agent reads and a person sees, rather than repeat it.
 *
 * Paid for: the call's worst case (its price per call plus its timeout's seconds) is held on the
 * agent's budget under `mcp:<key>` before it runs and settled with the seconds it took.
 *
 * Never fails the loop for the server's sake: a server that is down, refuses, hangs or answers
 * garbage becomes the text the agent reads.
 */
import { mergeCommandResult } from '../../db/queries/command-log.js';
import { and, eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import { budgetIds, defaultPrices, mcpCost, type PriceTable } from '../../core/lifeforce.js';
import { serverPrices } from '../../core/mcp-policy.js';
import { clipText, jsonBytes, sanitizeJson, sanitizeText } from '../../core/sanitize.js';
import type { Db } from '../../db/client.js';
import { mcpToolOf, recordMcpHealth, replaceMcpTools } from '../../db/queries/mcp.js';
import { statements } from '../../db/prepared.js';
import { release, reserve, settle, settleHold } from '../../db/queries/lifeforce.js';
import { mcpCalls, processLog, type McpCall, type McpServer } from '../../db/schema/index.js';
import { maxResultText } from '../commands/shared.js';
import { parseInput } from '../errors.js';
import { withHeartbeat } from '../heartbeat.js';
import { McpPool, type McpPoolOptions, type McpServerSpec } from './pool.js';

/** The call's row, written and finished, rendered once per database handle (the lookup is mcpToolOf's). */
const mcpStatements = statements('mcp', (db, name) => ({
  /** The call's row, `started`, unless an earlier attempt wrote it. */
  start: db
    .insert(mcpCalls)
    .values({
      agentId: sql.placeholder('agentId'),
      key: sql.placeholder('key'),
      server: sql.placeholder('server'),
      tool: sql.placeholder('tool'),
      args: sql.placeholder('args'),
      status: 'started',
    })
    .onConflictDoNothing()
    .returning({ id: mcpCalls.id })
    .prepare(name('start')),
  /** The call's outcome. */
  finish: db
    .update(mcpCalls)
    .set({
      status: sql`${sql.placeholder('status')}`,
      text: sql`${sql.placeholder('text')}`,
      structured: sql`${sql.placeholder('structured')}::jsonb`,
      isError: sql`${sql.placeholder('isError')}`,
      finishedAt: sql`now()`,
    })
    .where(eq(mcpCalls.key, sql.placeholder('key')))
    .prepare(name('finish')),
}));

/** Structured content bigger than this (as JSON) is not kept; its text still is, capped. */
const maxStructuredBytes = 16 * 1024;
/** How long one tool call may run unless the deps say otherwise. */
const defaultCallTimeoutMs = 60_000;

const mcpCallInput = z.strictObject({
  agentId: z.string().min(1),
  /** The tick's idempotency key: workflow id + tick + cmd id. */
  key: z.string().min(1).max(500),
  server: z.string().min(1).max(100),
  tool: z.string().min(1).max(128),
  args: z.record(z.string(), z.unknown()).default({}),
  /** Where the agent reads the result: its command's command_log row and process-log entry. */
  tick: z.number().int().min(0).optional(),
  cmdId: z.string().min(1).optional(),
  processId: z.string().min(1).optional(),
  /** The server's own prices as the command found them: the hold is taken beside the lookup, not after it. */
  price: z.strictObject({ perCall: z.number().min(0).optional(), perSecond: z.number().min(0).optional() }).optional(),
});
export type McpCallInput = z.input<typeof mcpCallInput>;

/** What the agent reads of one call. */
export interface McpCallResult {
  status: McpCall['status'];
  /** The text the agent reads (sanitised, at most 8 KB). */
  text: string;
  structured: Record<string, unknown> | null;
  /** A retry found the call recorded and did not call again. */
  recorded: boolean;
}

export interface McpActivityDeps {
  db: Db;
  pool: McpPool;
  prices?: PriceTable;
  callTimeoutMs?: number;
  /** Whether calls go through the lifeforce ledger (default on). */
  ledger?: boolean;
}

/** The worker's pool, which records a server's health, and its new list of tools when it says they changed. */
export function createMcpPool(db: Db, opts: Omit<McpPoolOptions, 'onToolsChanged' | 'onHealth'> = {}): McpPool {
  return new McpPool({
    ...opts,
    onHealth: (health) => {
      recordMcpHealth(db, health).catch((err: unknown) =>
        process.stderr.write(
          `mcp: the health of ${health.agentId}/${health.server} was not recorded: ${String(err)}\n`,
        ),
      );
    },
    onToolsChanged: (agentId, server, tools) => {
      replaceMcpTools(db, agentId, server, tools).catch((err: unknown) =>
        process.stderr.write(`mcp: the new tools of ${agentId}/${server} were not recorded: ${String(err)}\n`),
      );
    },
  });
}

/** The ledger key of one call's hold. */
export function mcpChargeKey(key: string): string {
  return `mcp:${key}`;
}

/** How a server is reached: its row in mcp_servers, or the values an agent file gives it. */
export function specOf(
  row: Pick<McpServer, 'name' | 'transport' | 'command' | 'args' | 'url' | 'envNames' | 'headerEnv' | 'sandbox'>,
): McpServerSpec {
  return {
    name: row.name,
    transport: row.transport,
    command: row.command,
    args: row.args,
    url: row.url,
    envNames: row.envNames,
    headerEnv: row.headerEnv,
    sandbox: row.sandbox,
  };
}

interface ToolContent {
  type: string;
  text?: string;
  mimeType?: string;
  data?: string;
  uri?: string;
  resource?: { uri?: string; text?: string; mimeType?: string };
}

/** The text of a result's content blocks; binary blocks are named, not kept. */
function contentText(content: readonly ToolContent[]): string {
  return content
    .map((c) => {
      if (c.type === 'text') return String(c.text ?? '');
      if (c.type === 'resource')
        return c.resource?.text !== undefined
          ? `[resource ${c.resource.uri ?? ''}]\n${c.resource.text}`
          : `[resource ${c.resource?.uri ?? ''}]`;
      if (c.type === 'resource_link') return `[resource link ${c.uri ?? ''}]`;
      return `[${c.type} ${c.mimeType ?? ''}, ${c.data?.length ?? 0} characters of base64 not shown]`;
    })
    .join('\n');
}

/** A server's answer made safe to store and show, as a model's reply is: no NUL, no lone surrogate, capped. */
export function sanitizeToolResult(result: { content?: unknown; structuredContent?: unknown }): {
  text: string;
  structured: Record<string, unknown> | null;
} {
  const content = Array.isArray(result.content) ? (result.content as ToolContent[]) : [];
  const text = clipText(sanitizeText(contentText(content)), maxResultText);
  const raw = result.structuredContent;
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return { text, structured: null };
  const structured = sanitizeJson(raw) as Record<string, unknown>;
  if (jsonBytes(structured) > maxStructuredBytes) return { text, structured: null };
  return { text, structured };
}

function headline(server: string, tool: string, status: McpCall['status'], ms: number | null): string {
  const how = status === 'ok' ? 'ok' : status === 'unknown' ? 'outcome unknown' : 'error';
  return `mcp ${server}.${tool}: ${how}${ms !== null ? ` in ${ms} ms` : ''}`;
}

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

type Outcome = { status: McpCall['status']; text: string; structured: Record<string, unknown> | null; ms: number };

/**
 * Before the server is asked: the tool looked up, then side by side its worst case held on the
 * agent's budget (one statement when this process wrote the budget last) and the call's row
 * written `started` — or the row an earlier attempt left read back. Both are committed before the call; a hold whose
 * call never started is released by the sweep, and a retry finds it under the same key.
 */
async function beginCall(
  db: Db,
  o: { prices: PriceTable; ledger: boolean; callTimeoutMs: number },
  input: z.output<typeof mcpCallInput>,
  chargeKey: string,
) {
  const { prices, ledger, callTimeoutMs } = o;
  const hold = (price: PriceTable) =>
    reserve(db, {
      key: chargeKey,
      budgetId: budgetIds.agent(input.agentId),
      amount: mcpCost(price, callTimeoutMs),
      operation: 'mcp_call',
      ttlMs: callTimeoutMs + prices.reservationTtlMs,
      ...(input.tick !== undefined ? { tick: input.tick } : {}),
      reason: clipText(`${input.server}.${input.tool}`, 200),
    });
  const q = mcpStatements(db);
  const started = q.start.execute({
    agentId: input.agentId,
    key: input.key,
    server: input.server,
    tool: input.tool,
    args: sanitizeJson(input.args),
  });
  // The lookup, the hold and the row are independent when the command passed the server's prices:
  // written side by side, all committed before the call. Otherwise the prices come from the lookup.
  const given =
    input.price && serverPrices(prices, { pricePerCall: input.price.perCall, pricePerSecond: input.price.perSecond });
  const [found, givenHold, [fresh]] = await Promise.all([
    mcpToolOf(db, input.agentId, input.server, input.tool),
    ledger && given ? hold(given) : undefined,
    started,
  ]);
  const a = found.tool?.annotations ?? {};
  const safeToRepeat = a.readOnlyHint === true || a.idempotentHint === true;
  const price = given ?? serverPrices(prices, found.server?.policy ?? {});
  const held = givenHold ?? (ledger && found.server && found.tool ? await hold(price) : undefined);
  const before = fresh ? undefined : (await db.select().from(mcpCalls).where(eq(mcpCalls.key, input.key)))[0];
  const step =
    before?.status === 'started' && !safeToRepeat
      ? ('died' as const)
      : before && before.status !== 'started'
        ? ('recorded' as const)
        : !found.server || !found.tool
          ? ('missing' as const)
          : held && !held.ok
            ? ('broke' as const)
            : ('call' as const);
  return { found, safeToRepeat, price, held, before, step };
}

export function createMcpActivities(deps: McpActivityDeps) {
  const { db, pool } = deps;
  const prices = deps.prices ?? defaultPrices;
  const callTimeoutMs = deps.callTimeoutMs ?? defaultCallTimeoutMs;
  const ledger = deps.ledger ?? true;

  /**
   * Write the call's outcome and the agent's view of it (one transaction), and close its hold
   * (`close`: settle or release) beside it. A worker that dies with only the first done leaves the
   * hold to its retry, which finds the call recorded and settles the price of a call (or to the sweep).
   */
  async function finish(
    input: z.output<typeof mcpCallInput>,
    o: Outcome,
    close?: () => Promise<unknown>,
  ): Promise<McpCallResult> {
    const line = headline(input.server, input.tool, o.status, o.ms);
    const text = clipText(`${line}\n${o.text}`, maxResultText);
    const write = async (tx: Db | Tx) => {
      await mcpStatements(tx).finish.execute({
        key: input.key,
        status: o.status,
        text,
        structured: o.structured === null ? null : JSON.stringify(o.structured),
        isError: o.status !== 'ok',
      });
      if (input.tick !== undefined && input.cmdId) {
        const patch = { message: clipText(line, 200), text };
        await mergeCommandResult(tx, { agentId: input.agentId, tick: input.tick, cmdId: input.cmdId }, patch);
        if (input.processId)
          await tx
            .update(processLog)
            .set({
              status: o.status === 'ok' ? 'close' : 'error',
              message: clipText(line, 500),
              payload: { server: input.server, tool: input.tool, status: o.status, durationMs: o.ms },
            })
            .where(and(eq(processLog.agentId, input.agentId), eq(processLog.processId, input.processId)));
      }
    };
    // One statement needs no transaction of its own (a call made outside a tick, as the bench's);
    // the hold is closed side by side.
    await Promise.all([input.tick !== undefined && input.cmdId ? db.transaction(write) : write(db), close?.()]);
    return { status: o.status, text, structured: o.structured, recorded: false };
  }

  /** Ask the server; every way it can fail becomes an outcome. */
  async function ask(input: z.output<typeof mcpCallInput>, server: McpServer, safeToRepeat: boolean): Promise<Outcome> {
    const t0 = Date.now();
    let client;
    try {
      // Heartbeating while the server starts: a slow start must not look like a dead worker.
      client = await withHeartbeat(() => pool.client(input.agentId, specOf(server)), {
        details: { server: input.server, starting: true },
      });
    } catch (err) {
      // Never sent: the agent may simply try again later.
      return { status: 'error', text: clipText((err as Error).message, 1000), structured: null, ms: Date.now() - t0 };
    }
    try {
      const result = await withHeartbeat(
        (signal) =>
          client.callTool({ name: input.tool, arguments: input.args }, undefined, {
            timeout: callTimeoutMs,
            ...(signal ? { signal } : {}),
          }),
        { details: { server: input.server, tool: input.tool } },
      );
      const answer = result as { content?: unknown; structuredContent?: unknown; isError?: unknown };
      const clean = sanitizeToolResult(answer);
      return { status: answer.isError === true ? 'error' : 'ok', ...clean, ms: Date.now() - t0 };
    } catch (err) {
      // Sent, and no answer: a tool that may not run twice has an unknown outcome.
      const why = clipText(sanitizeText((err as Error).message), 1000);
      return safeToRepeat
        ? { status: 'error', text: `the call failed: ${why}`, structured: null, ms: Date.now() - t0 }
        : {
            status: 'unknown',
            text: `the call was sent and did not answer (${why}); whether it took effect is unknown, and it is not repeated`,
            structured: null,
            ms: Date.now() - t0,
          };
    }
  }

  return {
    /** Call one tool of one of the agent's MCP servers, once (see the module comment). */
    async mcpCall(raw: McpCallInput): Promise<McpCallResult> {
      const input = parseInput('mcpCall', mcpCallInput, raw);
      const chargeKey = mcpChargeKey(input.key);
      const begun = await beginCall(db, { prices, ledger, callTimeoutMs }, input, chargeKey);
      const { found, price } = begun;
      if (begun.step === 'recorded') {
        // Recorded before the worker died: the hold it left is settled now (a no-op once closed).
        const b = begun.before!;
        if (ledger) await settle(db, chargeKey, mcpCost(price, 0), { status: b.status });
        return { status: b.status, text: b.text ?? '', structured: b.structured, recorded: true };
      }
      if (begun.step === 'died') {
        // The attempt before this one died after it asked the server (or may have).
        const outcome: Outcome = {
          status: 'unknown',
          text: 'the worker stopped during the call; whether it took effect is unknown, and it is not repeated',
          structured: null,
          ms: 0,
        };
        return finish(input, outcome, ledger ? () => release(db, chargeKey, 'outcome unknown') : undefined);
      }
      if (begun.step === 'missing') {
        const text = found.server
          ? `server ${input.server} has no tool ${input.tool}`
          : `the agent has no enabled MCP server named ${input.server}`;
        const taken = begun.held?.ok === true;
        return finish(
          input,
          { status: 'error', text, structured: null, ms: 0 },
          taken ? () => release(db, chargeKey, 'not called') : undefined,
        );
      }
      if (begun.step === 'broke' && begun.held && !begun.held.ok) {
        const h = begun.held;
        const text = `lifeforce exhausted: the call's ${h.needed} LF exceeds what the budget has (${h.available ?? 'unlimited'} LF, ${h.reason}); not called`;
        return finish(input, { status: 'error', text, structured: null, ms: 0 });
      }
      const outcome = await ask(input, found.server!, begun.safeToRepeat);
      const hold = begun.held?.ok ? begun.held : undefined;
      const meta = { durationMs: outcome.ms, status: outcome.status };
      const cost = mcpCost(price, outcome.ms);
      return finish(
        input,
        outcome,
        hold
          ? () => (hold.hold ? settleHold(db, hold.hold, cost, meta) : settle(db, chargeKey, cost, meta))
          : undefined,
      );
    },
  };
}
