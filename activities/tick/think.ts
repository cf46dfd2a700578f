/**
 * Think: one tick's context → LLM → parse → record, as one retry-safe activity, idempotent on
 * (agent, tick): a retry after the reply was recorded re-reads it instead of asking again.
 */
import { and, eq, inArray, isNull, lte, or, sql, type SQLWrapper } from 'drizzle-orm';
import { intervalAbstractDue, abstractTriggerKey } from '../../core/abstracts.js';
import type { AssembledContext } from '../../core/context.js';
import type { CommandRejection, InvalidCommand, ParsedCommand, ParsedReply } from '../../core/loop-types.js';
import { boundForHistory, historyCaps } from '../../core/payload-caps.js';
import { configKeys, validateCommand } from '../../core/catalogue.js';
import { observePeers, type PeerObservation } from '../../core/society/isolation.js';
import { appendToolCalls, parseReply } from '../../core/reply-parser.js';
import { clipText, jsonBytes } from '../../core/sanitize.js';
import { promptForRecord, tickPromptLimits, type StoredPrompt } from '../../core/tick-prompt.js';
import { structuredReplySchema, structuredReplyToText } from '../../core/structured-reply.js';
import type { Db } from '../../db/client.js';
import { anyOf, shapedStatement } from '../../db/prepared.js';
import { makeAutoAbstract } from '../../db/queries/abstracts.js';
import { agents, llmRecentResponses, llmRegistry, notes, processLog, tickPrompts } from '../../db/schema/index.js';
import { budgetIds } from '../../core/lifeforce.js';
import { ErrorType, nonRetryable } from '../errors.js';
import { withHeartbeat } from '../heartbeat.js';
import {
  activityRequestKey,
  LlmUnavailableError,
  nativeToolProviders,
  rowsFor,
  type ChatResult,
  type LlmRouter,
} from '../llm/index.js';
import { mcpToolDefinitions, toolDefinitions } from '../tools.js';
import { loadContext, loopOf, thinkKey, type ContextDeps, type LoadedContext, type ThinkInput } from './context.js';
import { tickReplyOf, type TickReply } from './snapshot.js';

export type { ThinkInput } from './context.js';

export interface ThinkResult {
  responseId: number | null;
  /** First line(s) of the reply, ≤ 240 chars: the status query shows it. */
  summary: string;
  provider: string;
  model: string;
  /** The reply's commands; when `validated`, only the valid ones, with their validated args. */
  commands: ParsedCommand[];
  rejected: CommandRejection[];
  /** Set when each command was checked against the catalogue here: applyCommands does not check them again. */
  validated?: true;
  /** The commands the catalogue refused (with `validated`), each as applyCommands records it. */
  invalid?: InvalidCommand[];
  parseErrors: string[];
  confidence: number | null;
  unverifiedFacts: number;
  notesShown: number;
  promptChars: number;
  /** Task loops: the task's status after this tick's reading. */
  taskStatus?: string;
  /** The ledger's charge for this tick's call and what the budget has left. */
  lifeforce?: { budgetId: string; charged: number; available: number | null };
  /** Main loop: the agent's peers as this tick found them (the loop's Isolated mode follows them). */
  peers?: PeerObservation;
  replayed: boolean;
  /** How long the model took to answer, when this call asked it (the loop thinks locally after a fast answer). */
  modelMs?: number;
  /** How long this think took in all, its reads and writes included. */
  thinkMs?: number;
}

type ThinkDeps = ContextDeps;

const summarize = (text: string) => clipText(text.replace(/\s+/g, ' ').trim(), 240);

/** The longest reason command_log keeps for a refused command. */
const maxRefusalReason = 2000;

/**
 * Each command checked against the catalogue, once, here: a valid one keeps its validated args
 * (ids as numbers, defaults filled); a refused one becomes an `invalid` entry with the status and
 * reason applyCommands records for it. Duplicate cmd_ids were refused by the parser already.
 * When the validated result would not fit the history bound, the unvalidated one goes as it is
 * (no `validated` mark: applyCommands then validates each command itself).
 */
function validated(result: ThinkResult): ThinkResult {
  const commands: ParsedCommand[] = [];
  const invalid: InvalidCommand[] = [];
  for (const cmd of result.commands) {
    const v = validateCommand(cmd);
    if (v.ok) commands.push(v.command as unknown as ParsedCommand);
    else
      invalid.push({
        ...cmd,
        status: v.code === 'unknown' ? 'unknown' : 'rejected',
        reason: clipText(v.reason, maxRefusalReason),
        at: commands.length,
      });
  }
  const out: ThinkResult = { ...result, commands, validated: true, ...(invalid.length ? { invalid } : {}) };
  return jsonBytes(out) < historyCaps.maxResultBytes ? out : result;
}

/** What a tick's reply becomes in history (everything derived from the model is capped there). */
function thinkResult(
  parsed: ParsedReply,
  fallback: string,
  fields: Omit<ThinkResult, 'summary' | 'commands' | 'rejected' | 'parseErrors' | 'confidence' | 'unverifiedFacts'>,
): ThinkResult {
  return validated(
    boundForHistory({
      ...fields,
      summary: summarize(parsed.body || fallback),
      commands: parsed.commands,
      rejected: parsed.rejected,
      parseErrors: parsed.errors,
      confidence: parsed.confidence,
      unverifiedFacts: parsed.unverifiedFacts.length,
    }),
  );
}

/**
 * `abstract_every`: on every N-th main-loop tick, once its reply is recorded, an abstract of
 * the replies since the last one. Keyed by the tick, so a retried think (which takes the
 * recorded path) makes it if the first attempt did not, and never twice.
 */
async function intervalAbstract(db: Db, input: ThinkInput, every: number): Promise<void> {
  if (input.mode !== 'main' || !intervalAbstractDue(input.tick, every)) return;
  await makeAutoAbstract(db, {
    agentId: input.agentId,
    trigger: 'interval',
    triggerKey: abstractTriggerKey('interval', input.tick),
  });
}

/** Ask the agent's LLM, heartbeating meanwhile; no LLM answering is `LlmUnavailable` (the loop's Core Outage). */
async function askModel(
  llm: LlmRouter,
  input: ThinkInput,
  loaded: LoadedContext,
): Promise<{ reply: ChatResult; structured: boolean }> {
  // The small local model follows a JSON grammar far better than a text format.
  const candidates = rowsFor(loaded.preloaded.registry, 'agent');
  const structured = candidates[0]?.provider === 'local';
  // A model with native tool calling gets the discovered tools bound as tools (descriptions
  // show the current state and valid actions), and the discovered MCP tools as `mcp__<server>__<tool>`
  // with their input schemas; the others read them in the prompt.
  const tools = candidates.some((r) => nativeToolProviders.has(r.provider))
    ? [...toolDefinitions(loaded.tools), ...mcpToolDefinitions(loaded.mcpTools)]
    : [];
  try {
    const reply = await withHeartbeat((signal) =>
      llm.chat({
        agentId: input.agentId,
        role: 'agent',
        messages: loaded.context.messages,
        params: {
          ...input.params,
          ...(structured ? { jsonSchema: structuredReplySchema as unknown as Record<string, unknown> } : {}),
        },
        tick: input.tick,
        purpose: 'think',
        idempotencyKey: thinkKey(input),
        ...(tools.length ? { tools } : {}),
        preloaded: loaded.preloaded,
        // A task loop spends its own budget, carved from the agent's when it started.
        lifeforce: {
          at: Date.parse(input.now),
          ...(input.mode === 'task' && input.taskId !== undefined && input.taskBudget
            ? { budgetId: budgetIds.task(input.agentId, input.taskId) }
            : {}),
        },
        ...(signal ? { signal } : {}),
      }),
    );
    return { reply, structured };
  } catch (err) {
    if (err instanceof LlmUnavailableError) throw nonRetryable(ErrorType.LlmUnavailable, err.message);
    throw err;
  }
}

/** Which parts a reply's record has beside the reply and the heartbeat: shown notes, prompt, shown replies (`r`: none). */
type ReplyShape = `${'s' | ''}${'p' | ''}${'t' | ''}` | 'r';

/**
 * A main-loop reply's record, one statement (data-modifying CTEs, one round trip): the reply
 * (kept once per tick: a retry's insert does nothing and the select finds the first one), the
 * agent's heartbeat, the notes this context showed (`s`), the prompt the model was sent (`p`,
 * once per tick too; the agent's prompts older than its last `keptTicks` ticks go), the replies
 * it showed, used at this tick for the memory manager (`t`). Rendered once per shape.
 */
const replyRecord = shapedStatement<ReplyShape>('reply', (db, shape) => {
  const p = <T = unknown>(name: string) => sql.placeholder(name) as unknown as T;
  const agentId = p<string>('agentId');
  const tick = p<number>('tick');
  const insert = db
    .insert(llmRecentResponses)
    .values({
      agentId,
      tick,
      workflowRunId: p('workflowRunId'),
      content: p('content'),
      confidence: p('confidence'),
      contextMode: p('contextMode'),
      llmRegistryId: p('llmRegistryId'),
      parseError: p('parseError'),
    })
    .onConflictDoNothing()
    .returning({ id: llmRecentResponses.id });
  const heartbeat = db
    .update(agents)
    .set({ lastTick: tick, lastSeenAt: p('now'), status: 'running' })
    .where(eq(agents.id, agentId));
  const markSeen = db
    .update(notes)
    .set({ readAt: p('now'), tickSeen: tick })
    .where(and(anyOf(notes.id, sql.placeholder('shownNotes')), isNull(notes.readAt)));
  const savePrompt = db
    .insert(tickPrompts)
    .values({ agentId, tick, messages: p('messages'), chars: p('chars'), promptTokens: p('promptTokens') })
    .onConflictDoNothing();
  // updated_at left alone; a no-op on a retry.
  const touchShown = db
    .update(llmRecentResponses)
    .set({ lastUsedTick: tick, updatedAt: sql`${llmRecentResponses.updatedAt}` })
    .where(
      and(
        anyOf(llmRecentResponses.id, sql.placeholder('shownResponses')),
        or(isNull(llmRecentResponses.lastUsedTick), sql`${llmRecentResponses.lastUsedTick} < ${tick}`),
      ),
    );
  // One row a tick at most leaves the window, found through the (agent_id, tick) index.
  const prunePrompts = db
    .delete(tickPrompts)
    .where(and(eq(tickPrompts.agentId, agentId), lte(tickPrompts.tick, p<number>('pruneTo'))));
  const part = (key: string, as: string, q: SQLWrapper) =>
    shape.includes(key) ? sql`, ${sql.raw(as)} as (${q.getSQL()})` : sql``;
  return sql`
    with ins as (${insert.getSQL()}), beat as (${heartbeat.getSQL()}), pruned as (${prunePrompts.getSQL()})${part('s', 'seen', markSeen)}${part('p', 'prompt', savePrompt)}${part('t', 'touched', touchShown)}
    select id, true as inserted from ins
    union all
    select ${llmRecentResponses.id}, false from ${llmRecentResponses} where ${llmRecentResponses.agentId} = ${agentId} and ${llmRecentResponses.tick} = ${tick}
    limit 1`;
});

/** Record a main-loop reply (`replyRecord`). Returns the row id, and whether this call inserted it. */
async function recordMainReply(
  db: Db,
  input: ThinkInput,
  text: string,
  parsed: ParsedReply,
  reply: ChatResult,
  shown: AssembledContext['shown'],
  prompt: StoredPrompt | null,
): Promise<{ id: number | null; inserted: boolean }> {
  const shape = `${shown.notes.length ? 's' : ''}${prompt ? 'p' : ''}${shown.responses.length ? 't' : ''}` || 'r';
  const r = await replyRecord<{ id: string | number; inserted: boolean }>(db, shape as ReplyShape, {
    agentId: input.agentId,
    tick: input.tick,
    workflowRunId: input.workflowId,
    content: text,
    confidence: parsed.confidence,
    contextMode: input.loop.contextMode,
    llmRegistryId: reply.registryId,
    parseError: parsed.errors.length ? parsed.errors.join('; ').slice(0, 2000) : null,
    now: new Date(),
    pruneTo: input.tick - tickPromptLimits.keptTicks,
    ...(shown.notes.length ? { shownNotes: shown.notes } : {}),
    ...(prompt ? { messages: prompt.messages, chars: prompt.chars, promptTokens: reply.usage.promptTokens } : {}),
    ...(shown.responses.length ? { shownResponses: shown.responses } : {}),
  });
  const row = r.rows[0];
  return { id: row ? Number(row.id) : null, inserted: row?.inserted === true };
}

/**
 * Record a task loop's reply. Auxiliary loops are read-only: their thought goes to the process
 * log, not to memory. Once per tick: an attempt that timed out may still finish after the
 * restarted loop thought the same tick (the lock orders the two; the second finds the first's row).
 */
async function recordTaskReply(
  db: Db,
  input: ThinkInput,
  text: string,
  parsed: ParsedReply,
  reply: ChatResult,
  shownNotes: number[],
): Promise<void> {
  const processId = `task/${input.taskId}`;
  const hadToolCalls = (reply.toolCalls ?? []).length > 0;
  await db.transaction(async (tx) => {
    await tx.execute(
      sql`select pg_advisory_xact_lock(hashtextextended(${`${input.agentId}:${processId}:${input.tick}`}, 0))`,
    );
    const [recordedTick] = await tx
      .select({ id: processLog.id })
      .from(processLog)
      .where(
        and(
          eq(processLog.agentId, input.agentId),
          eq(processLog.processId, processId),
          eq(processLog.kind, 'task_loop'),
          eq(processLog.tick, input.tick),
        ),
      )
      .limit(1);
    if (!recordedTick) {
      await tx.insert(processLog).values({
        agentId: input.agentId,
        processId,
        kind: 'task_loop',
        name: `task ${input.taskId} tick ${input.tick}`,
        status: 'ok',
        message: summarize(parsed.body || reply.text),
        payload: {
          tick: input.tick,
          content: (hadToolCalls ? text : reply.text).slice(0, 16_000),
          model: `${reply.provider}:${reply.model}`,
        },
        tick: input.tick,
      });
    }
    if (shownNotes.length)
      await tx
        .update(notes)
        .set({ readAt: new Date(), tickSeen: input.tick })
        .where(and(inArray(notes.id, shownNotes), isNull(notes.readAt)));
  });
}

/**
 * The main loop's view of its peers, from the snapshot's read of the agent row (no query of its
 * own). Reachability is judged by the worker's clock, the clock that wrote the peers' rows.
 */
function peersSeen(input: ThinkInput, loaded: LoadedContext): { peers?: PeerObservation } {
  if (input.mode !== 'main') return {};
  const n = configKeys.isolation_ticks.schema.safeParse(loaded.snapshot.config.isolation_ticks);
  return {
    peers: observePeers(loaded.snapshot.peers, Date.now(), n.success ? n.data : configKeys.isolation_ticks.default),
  };
}

/**
 * The reflexes and applyCommands of this tick read its reply, parsed here once, from the
 * worker's snapshots (another worker reads the recorded row). Returns it.
 */
function keepReply(deps: ThinkDeps, input: ThinkInput, reply: TickReply): TickReply {
  deps.snapshots.recordReply(loopOf(input), input.tick, reply);
  return reply;
}

/** A retried tick whose reply is already recorded: the same result, from the stored text. */
async function recordedThought(
  deps: ThinkDeps,
  input: ThinkInput,
  loaded: LoadedContext,
  row: typeof llmRecentResponses.$inferSelect,
): Promise<ThinkResult> {
  await intervalAbstract(deps.db, input, loaded.abstractEvery);
  const { parsed } = keepReply(deps, input, tickReplyOf(row));
  // The model that wrote it, by its registry row (the row may have gone since).
  const [by] =
    row.llmRegistryId === null
      ? []
      : await deps.db
          .select({ provider: llmRegistry.provider, model: llmRegistry.model })
          .from(llmRegistry)
          .where(eq(llmRegistry.id, row.llmRegistryId));
  // The same caps as the first attempt's result: it rides through history too.
  return thinkResult(parsed, row.content, {
    responseId: row.id,
    provider: 'replay',
    model: by ? `${by.provider}:${by.model}` : 'recorded',
    notesShown: 0,
    promptChars: 0,
    ...peersSeen(input, loaded),
    replayed: true,
  });
}

/** One tick's thinking (see the module comment). */
async function think(deps: ThinkDeps, input: ThinkInput): Promise<ThinkResult> {
  const began = performance.now();
  const { db } = deps;
  // The retry check is read with the context (one statement on the usual path, where no reply is
  // recorded; a wasted context on a retry).
  const loaded = await loadContext(deps, input);
  if (input.mode === 'main' && loaded.recorded) return recordedThought(deps, input, loaded, loaded.recorded);

  const { context } = loaded;
  const asked = performance.now();
  const { reply, structured } = await askModel(deps.llm, input, loaded);
  const modelMs = Math.round(performance.now() - asked);
  // Native tool calls become tool.call (tools.mcp) commands in a command block appended to the reply, so
  // the recorded text alone gives the same commands on a retry (and reads like a text reply).
  const text = appendToolCalls((structured && structuredReplyToText(reply.text)) || reply.text, reply.toolCalls ?? []);
  const parsed = parseReply(text);

  let responseId: number | null = null;
  if (input.mode === 'main') {
    // The messages as sent. A reply re-read from llm_calls (an earlier attempt's model answer)
    // answered that attempt's prompt, which this one may not repeat exactly: none is stored then.
    const prompt = reply.replayed ? null : promptForRecord(context.messages);
    const r = await recordMainReply(db, input, text, parsed, reply, context.shown, prompt);
    responseId = r.id;
    // Kept only when this attempt inserted the row: one that lost the race reads the winner's.
    if (r.inserted && r.id !== null)
      keepReply(deps, input, {
        id: r.id,
        content: text,
        parsed,
        llmRegistryId: reply.registryId,
        tags: [],
        reflexes: null,
      });
    await intervalAbstract(db, input, loaded.abstractEvery);
  } else {
    await recordTaskReply(db, input, text, parsed, reply, context.shown.notes);
    keepReply(deps, input, { id: 0, content: text, parsed, llmRegistryId: reply.registryId, tags: [], reflexes: null });
  }

  return thinkResult(parsed, reply.text, {
    responseId,
    provider: reply.provider,
    model: reply.model,
    notesShown: context.shown.notes.length,
    promptChars: context.chars,
    ...(loaded.taskStatus !== undefined ? { taskStatus: loaded.taskStatus } : {}),
    ...(reply.lifeforce ? { lifeforce: reply.lifeforce } : {}),
    ...peersSeen(input, loaded),
    replayed: false,
    modelMs,
    thinkMs: Math.round(performance.now() - began),
  });
}

/** Is any LLM of this role answering? Used to leave Core Outage. */
async function probeLlm(
  llm: LlmRouter,
  input: { agentId: string; role: 'agent' },
): Promise<{ ok: boolean; model?: string; error?: string }> {
  try {
    // Keyed by this activity: a retried probe finds the answer (and the hold) of its first attempt.
    const idempotencyKey = activityRequestKey('probe');
    const r = await llm.chat({
      agentId: input.agentId,
      role: input.role,
      messages: [{ role: 'user', content: 'Reply with OK.' }],
      params: { maxTokens: 4 },
      ...(idempotencyKey ? { idempotencyKey } : {}),
    });
    return { ok: true, model: `${r.provider}:${r.model}` };
  } catch (err) {
    return { ok: false, error: (err as Error).message };
  }
}

/** Think activities, built from a database, an LLM router, the tick snapshots and the tools' dependencies. */
export function createThinkActivities(deps: ThinkDeps) {
  return {
    /** One tick's thinking, idempotent on (agent, tick). */
    think: (input: ThinkInput) => think(deps, input),
    /** Is any LLM of this role answering? */
    probeLlm: (input: { agentId: string; role: 'agent' }) => probeLlm(deps.llm, input),
  };
}
