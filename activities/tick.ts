/**
 * The tick's activities: Think (process log → context → LLM → parse → record) as one
 * retry-safe activity, plus the small writes around it (notes, process log, loop start/stop,
 * task-loop status).
 */
import { Context } from '@temporalio/activity';
import { and, asc, desc, eq, inArray, isNull, or, sql } from 'drizzle-orm';
import { intervalAbstractDue, abstractTriggerKey } from '../core/abstracts.js';
import { configKeys, helpText, validateConfigValue } from '../core/catalogue.js';
import { assembleContext, defaultSystemPrompt, type AssembledContext, type ContextResponse } from '../core/context.js';
import { learningLine, parseFeedbackNote } from '../core/learnings.js';
import { loadLearnings, recordFeedback } from '../db/queries/learnings.js';
import type { CommandRejection, ContextMode, NotesMode, ParsedCommand, TagFilter } from '../core/loop-types.js';
import { boundForHistory } from '../core/payload-caps.js';
import { appendToolCalls, parseReply, replyFormatInstructions } from '../core/reply-parser.js';
import { structuredReplySchema, structuredReplyToText } from '../core/structured-reply.js';
import type { Db } from '../db/client.js';
import { makeAutoAbstract } from '../db/queries/abstracts.js';
import {
  agentConfig,
  agents,
  abstracts,
  commandLog,
  discoveredTools,
  ethicsPolicies,
  goals,
  llmMemory,
  llmRecentResponses,
  notes,
  processLog,
  systemPrompts,
  tasks,
} from '../db/schema/index.js';
import { commandResultText } from './commands/apply.js';
import { createToolActivities, langChainTools, toolDefinitions } from './tools.js';
import { nonRetryable } from './errors.js';
import { LlmUnavailableError, ensureDefaultRegistry, llmHeartbeatMs, nativeToolProviders, rowsFor, type LlmRouter } from './llm/index.js';

export interface TickDeps {
  db: Db;
  llm: LlmRouter;
}

export interface ThinkInput {
  agentId: string;
  tick: number;
  workflowId: string;
  /** Workflow time (ISO): the context shows it, and a retry renders the same prompt. */
  now: string;
  mode: 'main' | 'task';
  taskId?: number;
  loop: {
    contextMode: ContextMode;
    contextFilter?: TagFilter;
    recentK: number;
    notesMode: NotesMode;
    notesFilter?: { minPriority?: number; tags?: string[]; sources?: string[] };
  };
  params: { temperature: number; topP: number; presencePenalty: number; frequencyPenalty: number; maxTokens: number };
  focus?: string;
}

export interface ThinkResult {
  responseId: number | null;
  /** First line(s) of the reply, ≤ 240 chars: the status query shows it. */
  summary: string;
  provider: string;
  model: string;
  commands: ParsedCommand[];
  rejected: CommandRejection[];
  parseErrors: string[];
  confidence: number | null;
  unverifiedFacts: number;
  notesShown: number;
  promptChars: number;
  /** Task loops: the task's status after this tick's reading. */
  taskStatus?: string;
  replayed: boolean;
}

/** The think call's idempotency key: a retried tick gets the recorded answer, not a new call. */
const thinkKey = (input: ThinkInput) => `${input.workflowId}:${input.tick}:think`;

const summarize = (text: string) => {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > 240 ? `${flat.slice(0, 239)}…` : flat;
};


/** Tick activities, built from a database and an LLM router. */
export function createTickActivities({ db, llm }: TickDeps) {
  async function loadContext(input: ThinkInput) {
    const { agentId, tick } = input;
    const [agentRow] = await db.select().from(agents).where(eq(agents.id, agentId));
    if (!agentRow) throw nonRetryable('NotFound', `agent ${agentId} does not exist`);
    const notesWhere = and(
      eq(notes.agentId, agentId),
      eq(notes.direction, 'in'),
      eq(notes.hidden, false),
      // Unread, or read by this very tick (a retry must show the same notes again).
      or(isNull(notes.readAt), eq(notes.tickSeen, tick)),
      input.mode === 'task' ? eq(notes.source, 'user') : undefined,
      input.loop.notesFilter?.minPriority !== undefined ? sql`${notes.priority} >= ${input.loop.notesFilter.minPriority}` : undefined,
      input.loop.notesFilter?.sources?.length ? inArray(notes.source, input.loop.notesFilter.sources as never[]) : undefined,
      input.loop.notesFilter?.tags?.length ? sql`${notes.tags} && ${input.loop.notesFilter.tags}` : undefined,
    );
    const [prompts, ethics, responses, goalRows, taskRows, abstractRows, processes, results, noteRows, memory, config, taskRow, toolDefs, learnings, registry, previousCalls] = await Promise.all([
      db.select().from(systemPrompts).where(and(eq(systemPrompts.agentId, agentId), eq(systemPrompts.active, true))).orderBy(desc(systemPrompts.version)),
      db.select().from(ethicsPolicies).where(and(eq(ethicsPolicies.agentId, agentId), eq(ethicsPolicies.active, true))).orderBy(desc(ethicsPolicies.priority)),
      db
        .select({ id: llmRecentResponses.id, tick: llmRecentResponses.tick, content: llmRecentResponses.content, tags: llmRecentResponses.tags, emotions: llmRecentResponses.emotions })
        .from(llmRecentResponses)
        .where(and(eq(llmRecentResponses.agentId, agentId), isNull(llmRecentResponses.archivedAt), sql`${llmRecentResponses.tick} < ${tick}`))
        .orderBy(desc(llmRecentResponses.tick))
        .limit(input.loop.contextMode === 'meditation' ? 500 : input.loop.contextMode === 'concentration' ? 200 : input.loop.recentK),
      db.select().from(goals).where(and(eq(goals.agentId, agentId), eq(goals.status, 'active'))).orderBy(desc(goals.priority)).limit(10),
      db
        .select()
        .from(tasks)
        .where(and(eq(tasks.agentId, agentId), input.mode === 'task' && input.taskId ? eq(tasks.id, input.taskId) : eq(tasks.pinned, true)))
        .orderBy(desc(tasks.priority))
        .limit(10),
      db.select().from(abstracts).where(and(eq(abstracts.agentId, agentId), isNull(abstracts.archivedAt))).orderBy(desc(abstracts.id)).limit(3),
      db.select().from(processLog).where(and(eq(processLog.agentId, agentId), isNull(processLog.closedAt))).orderBy(desc(processLog.id)).limit(10),
      db
        .select()
        .from(commandLog)
        .where(
          and(
            eq(commandLog.agentId, agentId),
            eq(commandLog.tick, tick - 1),
            input.mode === 'task' ? sql`${commandLog.cmdId} like ${`task${input.taskId}.%`}` : sql`${commandLog.cmdId} not like 'task%.%'`,
          ),
        )
        .orderBy(asc(commandLog.id))
        .limit(20),
      db.select().from(notes).where(notesWhere).orderBy(desc(notes.priority), asc(notes.id)).limit(20),
      db.select().from(llmMemory).where(and(eq(llmMemory.agentId, agentId), isNull(llmMemory.archivedAt))).orderBy(desc(llmMemory.pinned), desc(llmMemory.id)).limit(10),
      db.select().from(agentConfig).where(eq(agentConfig.agentId, agentId)),
      input.taskId ? db.select().from(tasks).where(and(eq(tasks.agentId, agentId), eq(tasks.id, input.taskId))) : Promise.resolve([]),
      // The agent's discovered tools as their LangChain definitions: each description shows the
      // tool's current state and the actions valid in it (progressive discovery). One query.
      langChainTools(createToolActivities({ db }), agentId, `${agentId}/t${tick}/context`),
      // Rehydration: the agent's learnings above 0.3, read at every tick's context —
      // so at loop start and after continue-as-new too.
      loadLearnings(db, { agentId, limit: 20 }),
      // What the LLM call would look up itself, read in this batch instead (ChatRequest.preloaded).
      llm.registry(agentId),
      llm.previousCalls([thinkKey(input)]),
    ]);
    const prompt = prompts.find((p) => p.kind === 'full') ?? prompts[0];
    const focus =
      input.mode === 'task' && taskRow[0]
        ? `You are an auxiliary loop working only on task #${taskRow[0].id} "${taskRow[0].title}"${taskRow[0].description ? `: ${taskRow[0].description}` : ''}. You may read anything, write only notes (notes.send) and this task (tasks.update/tasks.status). Send proposals to the main loop as notes; set the task status to done when finished.`
        : input.focus;
    const context = assembleContext({
      agent: { id: agentRow.id, name: agentRow.name, identity: agentRow.identity },
      tick,
      now: input.now,
      systemPrompt: `${prompt?.content ?? defaultSystemPrompt}\n\n${replyFormatInstructions}`,
      ethics: ethics.map((e) => ({ title: e.title, rule: e.rule, severity: e.severity })),
      catalogue: helpText(),
      tools: toolDefs.map((t) => ({ name: t.name, description: t.description })),
      learnings: learnings.map(learningLine),
      responses: responses.map(
        (r): ContextResponse => ({ id: r.id, tick: r.tick, content: r.content, tags: r.tags, emotions: r.emotions.map((e) => ({ emotion: e.emotion, strength: e.strength })) }),
      ),
      goals: goalRows.map((g) => ({ id: g.id, title: g.title, priority: g.priority, status: g.status })),
      pinnedTasks: taskRows.map((t) => ({ id: t.id, title: t.title, priority: t.priority, status: t.status })),
      abstracts: abstractRows.map((a) => ({ id: a.id, title: a.title, summary: a.summary })),
      openProcesses: processes.map((p) => ({ processId: p.processId, name: p.name, status: p.status, message: p.message })),
      commandResults: results.map((c) => ({
        cmdId: c.cmdId,
        type: c.type,
        status: c.status,
        text: commandResultText(c),
      })),
      notes: noteRows.map((n) => ({ id: n.id, source: n.source, priority: n.priority, tags: n.tags, text: n.text })),
      notesMode: input.loop.notesMode,
      config: Object.fromEntries(config.map((c) => [c.key, c.value])),
      memory: memory.map((m) => ({ id: m.id, title: m.title, content: m.content, pinned: m.pinned })),
      contextMode: input.loop.contextMode,
      contextFilter: input.loop.contextFilter,
      recentK: input.loop.recentK,
      focus,
    });
    const every = configKeys.abstract_every.schema.safeParse(config.find((c) => c.key === 'abstract_every')?.value);
    const abstractEvery = every.success ? (every.data as number) : configKeys.abstract_every.default;
    return { context, taskStatus: taskRow[0]?.status, preloaded: { registry, previous: previousCalls }, toolDefs, abstractEvery };
  }

  /**
   * `abstract_every`: on every N-th main-loop tick, once its reply is recorded, an abstract of
   * the replies since the last one. Keyed by the tick, so a retried think (which takes the
   * recorded path) makes it if the first attempt did not, and never twice.
   */
  async function intervalAbstract(input: ThinkInput, every: number): Promise<void> {
    if (input.mode !== 'main' || !intervalAbstractDue(input.tick, every)) return;
    await makeAutoAbstract(db, { agentId: input.agentId, trigger: 'interval', triggerKey: abstractTriggerKey('interval', input.tick) });
  }

  /**
   * LRU key of the memory manager: the replies this context shows were used at this tick (main
   * loop ticks only: a task loop counts its own ticks). One batched UPDATE of a few rows, a no-op
   * on a retry; updated_at is left alone. Started next to the LLM call, so it costs no round trip.
   */
  function touchShownResponses(input: ThinkInput, context: AssembledContext): Promise<void> {
    if (input.mode !== 'main' || context.shown.responses.length === 0) return Promise.resolve();
    return db
      .update(llmRecentResponses)
      .set({ lastUsedTick: input.tick, updatedAt: sql`${llmRecentResponses.updatedAt}` })
      .where(and(inArray(llmRecentResponses.id, context.shown.responses), or(isNull(llmRecentResponses.lastUsedTick), sql`${llmRecentResponses.lastUsedTick} < ${input.tick}`)))
      .then(() => undefined);
  }

  /** While a long call runs, tell Temporal we are alive (and learn about cancellation). */
  function heartbeating<T>(work: (signal?: AbortSignal) => Promise<T>): Promise<T> {
    let ctx: Context | undefined;
    try {
      ctx = Context.current();
    } catch {
      ctx = undefined; // called outside an activity (tests)
    }
    if (!ctx) return work();
    const timer = setInterval(() => ctx.heartbeat(), llmHeartbeatMs);
    return work(ctx.cancellationSignal).finally(() => clearInterval(timer));
  }

  return {
    /**
     * One tick's thinking, idempotent on (agent, tick): a retry after the reply was recorded
     * re-reads it instead of asking the LLM again.
     */
    async think(input: ThinkInput): Promise<ThinkResult> {
      // The retry check and the context reads go out together: one round trip less on the usual
      // path (no recorded reply), a wasted context read on a retry.
      const [recorded, loaded] = await Promise.all([
        input.mode === 'main'
          ? db
              .select()
              .from(llmRecentResponses)
              .where(and(eq(llmRecentResponses.agentId, input.agentId), eq(llmRecentResponses.tick, input.tick)))
          : Promise.resolve([]),
        loadContext(input),
      ]);
      {
        const [existing] = recorded;
        if (existing) {
          await intervalAbstract(input, loaded.abstractEvery);
          const parsed = parseReply(existing.content);
          // The same caps as the first attempt's result: it rides through history too.
          return boundForHistory({
            responseId: existing.id,
            summary: summarize(parsed.body || existing.content),
            provider: 'replay',
            model: existing.reflection ?? 'recorded',
            commands: parsed.commands,
            rejected: parsed.rejected,
            parseErrors: parsed.errors,
            confidence: parsed.confidence,
            unverifiedFacts: parsed.unverifiedFacts.length,
            notesShown: 0,
            promptChars: 0,
            replayed: true,
          });
        }
      }

      const { context, taskStatus, preloaded, toolDefs } = loaded;
      const touched = touchShownResponses(input, context);
      // Awaited after the LLM call; until then a failure must not count as unhandled.
      touched.catch(() => undefined);
      // The small local model follows a JSON grammar far better than a text format.
      const candidates = rowsFor(preloaded.registry, 'agent');
      const structured = candidates[0]?.provider === 'local';
      // A model with native tool calling gets the discovered tools bound as tools (descriptions
      // show the current state and valid actions); the others read them in the prompt.
      const tools = candidates.some((r) => nativeToolProviders.has(r.provider)) ? toolDefinitions(toolDefs) : [];
      let reply;
      try {
        reply = await heartbeating((signal) =>
          llm.chat({
            agentId: input.agentId,
            role: 'agent',
            messages: context.messages,
            params: {
              temperature: input.params.temperature,
              topP: input.params.topP,
              presencePenalty: input.params.presencePenalty,
              frequencyPenalty: input.params.frequencyPenalty,
              maxTokens: input.params.maxTokens,
              ...(structured ? { jsonSchema: structuredReplySchema as unknown as Record<string, unknown> } : {}),
            },
            tick: input.tick,
            purpose: 'think',
            idempotencyKey: thinkKey(input),
            ...(tools.length ? { tools } : {}),
            preloaded,
            signal,
          }),
        );
      } catch (err) {
        if (err instanceof LlmUnavailableError) throw nonRetryable('LlmUnavailable', err.message);
        throw err;
      }
      await touched;
      // Native tool calls become tool.call commands in a command block appended to the reply, so
      // the recorded text alone gives the same commands on a retry (and reads like a text reply).
      const toolCalls = reply.toolCalls ?? [];
      const text = appendToolCalls((structured && structuredReplyToText(reply.text)) || reply.text, toolCalls);
      const parsed = parseReply(text);
      const modelName = `${reply.provider}:${reply.model}`;

      let responseId: number | null = null;
      const markSeen =
        context.shown.notes.length > 0
          ? db.update(notes).set({ readAt: new Date(), tickSeen: input.tick }).where(and(inArray(notes.id, context.shown.notes), isNull(notes.readAt)))
          : null;
      if (input.mode === 'main') {
        // One statement (data-modifying CTEs), so one round trip instead of a five-step
        // transaction: the reply (kept once per tick: a retry's insert does nothing and the
        // select finds the first one), the agent's heartbeat, the notes this context showed.
        const insert = db
          .insert(llmRecentResponses)
          .values({
            agentId: input.agentId,
            tick: input.tick,
            workflowRunId: input.workflowId,
            content: text,
            reflection: modelName,
            confidence: parsed.confidence,
            contextMode: input.loop.contextMode,
            llmRegistryId: reply.registryId,
            parseError: parsed.errors.length ? parsed.errors.join('; ').slice(0, 2000) : null,
          })
          .onConflictDoNothing()
          .returning({ id: llmRecentResponses.id });
        const heartbeat = db.update(agents).set({ lastTick: input.tick, lastSeenAt: new Date(), status: 'running' }).where(eq(agents.id, input.agentId));
        const r = await db.execute<{ id: string | number }>(sql`
          with ins as (${insert.getSQL()}), beat as (${heartbeat.getSQL()})${markSeen ? sql`, seen as (${markSeen.getSQL()})` : sql``}
          select id from ins
          union all
          select ${llmRecentResponses.id} from ${llmRecentResponses} where ${llmRecentResponses.agentId} = ${input.agentId} and ${llmRecentResponses.tick} = ${input.tick}
          limit 1`);
        responseId = r.rows[0] ? Number(r.rows[0].id) : null;
        await intervalAbstract(input, loaded.abstractEvery);
      } else {
        await db.transaction(async (tx) => {
          // Auxiliary loops are read-only: their thought goes to the process log, not to memory.
          // Once per tick: an attempt that timed out may still finish after the restarted loop
          // thought the same tick (the lock orders the two; the second finds the first's row).
          const processId = `task/${input.taskId}`;
          await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`${input.agentId}:${processId}:${input.tick}`}, 0))`);
          const [recordedTick] = await tx
            .select({ id: processLog.id })
            .from(processLog)
            .where(and(eq(processLog.agentId, input.agentId), eq(processLog.processId, processId), eq(processLog.kind, 'task_loop'), eq(processLog.tick, input.tick)))
            .limit(1);
          if (!recordedTick) {
            await tx.insert(processLog).values({
              agentId: input.agentId,
              processId,
              kind: 'task_loop',
              name: `task ${input.taskId} tick ${input.tick}`,
              status: 'ok',
              message: summarize(parsed.body || reply.text),
              payload: { tick: input.tick, content: (toolCalls.length ? text : reply.text).slice(0, 16_000), model: modelName },
              tick: input.tick,
            });
          }
          if (markSeen) await tx.execute(markSeen.getSQL());
        });
      }

      // Everything here derives from the model and rides through history: capped per list and in total.
      return boundForHistory({
        responseId,
        summary: summarize(parsed.body || reply.text),
        provider: reply.provider,
        model: reply.model,
        commands: parsed.commands,
        rejected: parsed.rejected,
        parseErrors: parsed.errors,
        confidence: parsed.confidence,
        unverifiedFacts: parsed.unverifiedFacts.length,
        notesShown: context.shown.notes.length,
        promptChars: context.chars,
        taskStatus,
        replayed: false,
      });
    },

    /** Is any LLM of this role answering? Used to leave Core Outage. */
    async probeLlm(input: { agentId: string; role: 'agent' }): Promise<{ ok: boolean; model?: string; error?: string }> {
      try {
        const r = await llm.chat({ agentId: input.agentId, role: input.role, messages: [{ role: 'user', content: 'Reply with OK.' }], params: { maxTokens: 4 } });
        return { ok: true, model: `${r.provider}:${r.model}` };
      } catch (err) {
        return { ok: false, error: (err as Error).message };
      }
    },

    /** Store an incoming note; idempotent on its key. */
    async recordNote(input: {
      agentId: string;
      text: string;
      priority: number;
      tags: string[];
      source: 'user' | 'peer' | 'system' | 'oversight' | 'human' | 'llm:task';
      sender?: string;
      taskId?: number;
      idempotencyKey: string;
    }): Promise<{ noteId: number; feedback?: { pattern: string; count: number; learningId?: number } | { error: string } }> {
      const inserted = await db
        .insert(notes)
        .values({
          agentId: input.agentId,
          direction: 'in',
          source: input.source,
          sender: input.sender,
          priority: input.priority,
          tags: input.tags,
          text: input.text,
          taskId: input.taskId,
          idempotencyKey: input.idempotencyKey,
        })
        .onConflictDoNothing({ target: notes.idempotencyKey })
        .returning({ id: notes.id });
      const id = inserted[0]?.id ?? (await db.select({ id: notes.id }).from(notes).where(eq(notes.idempotencyKey, input.idempotencyKey)))[0]?.id;
      if (id === undefined) throw new Error('note vanished after insert');
      // A user's note tagged `feedback` ("reject shell.exec: rm -rf") also counts as preference feedback (once: new notes only).
      if (inserted[0] && (input.source === 'user' || input.source === 'human') && input.tags.includes('feedback')) {
        const parsed = parseFeedbackNote(input.text);
        if (!parsed.ok) return { noteId: id, feedback: { error: parsed.reason } };
        try {
          const r = await recordFeedback(db, { agentId: input.agentId, ...parsed.feedback, source: `note:${id}` });
          return { noteId: id, feedback: { pattern: r.pattern, count: r.count, ...(r.learning ? { learningId: r.learning.id } : {}) } };
        } catch (err) {
          return { noteId: id, feedback: { error: (err as Error).message } };
        }
      }
      return { noteId: id };
    },

    /** Append to the process log (outages, recoveries, loop events). */
    async logProcess(input: { agentId: string; processId: string; kind: string; status: 'ok' | 'warning' | 'error' | 'timeout' | 'offline' | 'close'; message: string; tick: number; mode?: 'normal' | 'isolated' | 'core_outage' }): Promise<void> {
      await db.transaction(async (tx) => {
        if (input.status === 'close') {
          await tx
            .update(processLog)
            .set({ closedAt: new Date() })
            .where(and(eq(processLog.agentId, input.agentId), eq(processLog.processId, input.processId), isNull(processLog.closedAt)));
        }
        await tx.insert(processLog).values({
          agentId: input.agentId,
          processId: input.processId,
          kind: input.kind,
          status: input.status,
          message: input.message,
          tick: input.tick,
          closedAt: input.status === 'close' ? new Date() : null,
        });
        if (input.mode) await tx.update(agents).set({ operatingMode: input.mode }).where(eq(agents.id, input.agentId));
      });
    },

    /** Loop start: the agent row, a default LLM if it has none, its starter tools, and the task loops to resume. */
    async loopStarted(input: { agentId: string; name: string; workflowId: string }): Promise<{
      interruptedTaskLoops: Array<{ taskId: number; title: string }>;
      /** The agent's persisted settings (`agent_config`), applied by a fresh loop start. */
      config: Record<string, unknown>;
      /** The last tick the agent recorded: a loop started anew goes on from there. */
      lastTick?: number;
    }> {
      await db.insert(agents).values({ id: input.agentId, name: input.name, status: 'running' }).onConflictDoUpdate({ target: agents.id, set: { status: 'running' } });
      await ensureDefaultRegistry(db, input.agentId);
      // Progressive discovery: the built-in state-machine tools are in the catalogue, and
      // an agent that has discovered nothing yet is taught the starter tools (discover_tools,
      // escalate, request_state_machine_design); the rest comes through escalations and designs.
      const toolActs = createToolActivities({ db });
      await toolActs.ensureBuiltinTools();
      const [known] = await db.select({ id: discoveredTools.id }).from(discoveredTools).where(eq(discoveredTools.agentId, input.agentId)).limit(1);
      if (!known) await toolActs.grantStarterTools({ agentId: input.agentId });
      const running = await db
        .select({ id: tasks.id, title: tasks.title })
        .from(tasks)
        .where(and(eq(tasks.agentId, input.agentId), eq(tasks.replStatus, 'running'), eq(tasks.frozen, false)));
      const config = await db.select({ key: agentConfig.key, value: agentConfig.value }).from(agentConfig).where(eq(agentConfig.agentId, input.agentId));
      // The agent row's tick, or the last stored reply's when a crash came between the two.
      const last = await db.execute<{ tick: string | null }>(
        sql`select greatest((select ${agents.lastTick} from ${agents} where ${agents.id} = ${input.agentId}), (select max(${llmRecentResponses.tick}) from ${llmRecentResponses} where ${llmRecentResponses.agentId} = ${input.agentId})) as tick`,
      );
      return {
        interruptedTaskLoops: running.map((t) => ({ taskId: t.id, title: t.title })),
        config: Object.fromEntries(config.map((c) => [c.key, c.value])),
        lastTick: Number(last.rows[0]?.tick ?? 0),
      };
    },

    /** The loop ended: stopped (or finished its ticks), or failed — then the process log says why. */
    async loopStopped(input: { agentId: string; tick: number; status?: 'stopped' | 'failed'; reason?: string }): Promise<void> {
      const status = input.status ?? 'stopped';
      await db.transaction(async (tx) => {
        await tx.update(agents).set({ status, lastTick: input.tick }).where(eq(agents.id, input.agentId));
        if (status === 'failed') {
          await tx.insert(processLog).values({ agentId: input.agentId, processId: 'agent-loop', kind: 'loop_failed', status: 'error', message: input.reason ?? 'the loop failed', tick: input.tick });
        }
      });
    },

    /**
     * Record a task loop's `repl_status` (and freeze the task on error); a stop, an error or a
     * restart is also logged with its reason under `task/<id>`. Returns where the loop stands:
     * its last recorded tick (a resumed loop goes on from there) and the agent's
     * `task_loop_max_ticks`, if set.
     */
    async setTaskLoopStatus(input: {
      agentId: string;
      taskId: number;
      replStatus: 'running' | 'stopped' | 'error';
      workflowId?: string;
      reason?: string;
      frozen?: boolean;
      restarted?: boolean;
      tick?: number;
    }): Promise<{ lastTick: number; maxTicks: number | null }> {
      const processId = `task/${input.taskId}`;
      const ended = input.replStatus !== 'running';
      await db.transaction(async (tx) => {
        await tx
          .update(tasks)
          .set({
            replStatus: input.replStatus,
            ...(input.workflowId ? { replWorkflowId: input.workflowId } : {}),
            ...(input.reason && input.replStatus === 'error' ? { lastError: input.reason } : {}),
            ...(input.frozen ? { frozen: true } : {}),
            ...(input.restarted ? { replRestarts: sql`${tasks.replRestarts} + 1` } : {}),
          })
          .where(and(eq(tasks.agentId, input.agentId), eq(tasks.id, input.taskId)));
        if (!input.reason || (!ended && !input.restarted)) return;
        // A loop that ended leaves no open process behind in the agent's context.
        if (ended) await tx.update(processLog).set({ closedAt: new Date() }).where(and(eq(processLog.agentId, input.agentId), eq(processLog.processId, processId), isNull(processLog.closedAt)));
        // Its own kind: the task loop's replies are read back by (process, kind 'task_loop', tick).
        await tx.insert(processLog).values({
          agentId: input.agentId,
          processId,
          kind: 'task_loop_status',
          name: `task ${input.taskId} loop ${input.replStatus}`,
          status: input.replStatus === 'error' ? 'error' : input.restarted ? 'timeout' : 'close',
          message: input.reason.slice(0, 2000),
          tick: input.tick ?? null,
          closedAt: ended ? new Date() : null,
        });
      });
      const [[last], config] = await Promise.all([
        db
          .select({ tick: sql<number | null>`max(${processLog.tick})` })
          .from(processLog)
          .where(and(eq(processLog.agentId, input.agentId), eq(processLog.processId, processId), eq(processLog.kind, 'task_loop'))),
        db.select({ value: agentConfig.value }).from(agentConfig).where(and(eq(agentConfig.agentId, input.agentId), eq(agentConfig.key, 'task_loop_max_ticks'))),
      ]);
      const cap = config[0] ? validateConfigValue('task_loop_max_ticks', config[0].value) : null;
      return { lastTick: Number(last?.tick ?? 0), maxTicks: cap?.ok ? (cap.value as number) : null };
    },
  };
}

export type TickActivities = ReturnType<typeof createTickActivities>;