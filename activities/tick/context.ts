/**
 * What a tick shows the model: the agent's snapshot (settings, ethics, registry, learnings, system
 * prompts, thinking method, MCP tools, previous replies) plus the rows only the context reads
 * (goals, tasks, abstracts, open processes, last tick's command results, notes, memory, the
 * discovered tools), all in one batch.
 */
import { and, asc, desc, eq, inArray, isNull, or, sql, type Placeholder, type SQL } from 'drizzle-orm';
import { configKeys, helpText } from '../../core/catalogue.js';
import {
  assembleContext,
  defaultSystemPrompt,
  semanticPool,
  type AssembledContext,
  type ContextInput,
  type ContextResponse,
  type SemanticQuery,
} from '../../core/context.js';
import { goalMetrics } from '../../core/goal-metrics.js';
import { learningLine } from '../../core/learnings.js';
import { replyFormatInstructions } from '../../core/reply-parser.js';
import { clipText, oneLine } from '../../core/sanitize.js';
import type { Db } from '../../db/client.js';
import { statements } from '../../db/prepared.js';
import { fieldRowsOf, jsonRows, rowsOf } from '../../db/json-rows.js';
import { goalMetricRowsOf, goalMetricRowsQuery } from '../../db/queries/goal-metrics.js';
import {
  abstracts,
  commandLog,
  goals,
  llmCalls,
  llmMemory,
  llmRecentResponses,
  notes,
  processLog,
  tasks,
} from '../../db/schema/index.js';
import { commandResultText } from '../commands/shared.js';
import { ErrorType, nonRetryable } from '../errors.js';
import type { ChatRequest, LlmRouter } from '../llm/index.js';
import {
  describedToolFields,
  describedToolsQuery,
  describeRows,
  mcpToolLabel,
  toolDescriptions,
  type DescribedToolRow,
  type McpContextTool,
  type ToolDescription,
} from '../tools.js';
import {
  snapshotReadColumns,
  snapshotReadOf,
  type AgentSnapshot,
  type LoopRef,
  type SnapshotRead,
  type TickSnapshots,
} from './snapshot.js';
import type { ContextMode, NotesMode, TagFilter } from '../../core/loop-types.js';
import type { AgentEmbedders, EmbedderChoice } from '../embeddings/agent-embedder.js';
import { replyVectorsOf, vectorsOf } from '../embeddings/cache.js';
import { within } from '../../core/within.js';

/** The think activity's input (activities/tick/think.ts): whose tick, and how its context is built. */
export interface ThinkInput {
  agentId: string;
  tick: number;
  workflowId: string;
  /** Workflow time (ISO): the context shows it, and a retry renders the same prompt. */
  now: string;
  mode: 'main' | 'task';
  taskId?: number;
  /** The task loop has a budget of its own (`task:<agent>/<task>`); otherwise it spends the agent's. */
  taskBudget?: boolean;
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

export interface ContextDeps {
  db: Db;
  llm: LlmRouter;
  snapshots: TickSnapshots;
  /** The agents' embedders (memory by meaning); without them memory compares words only. */
  embedders?: AgentEmbedders;
}

export interface LoadedContext {
  context: AssembledContext;
  snapshot: AgentSnapshot;
  taskStatus: string | undefined;
  preloaded: NonNullable<ChatRequest['preloaded']>;
  /** The discovered tools, each described in its current state with the actions valid in it. */
  tools: ToolDescription[];
  /** The discovered MCP tools context 2 lists, with their input schemas: a native think binds them. */
  mcpTools: McpContextTool[];
  abstractEvery: number;
  /** The main loop's reply of this tick, when an earlier attempt recorded it (read with the context). */
  recorded?: typeof llmRecentResponses.$inferSelect;
}

/** Learnings the context shows (the snapshot holds more, for the avoid-pattern checks). */
const learningsShown = 20;

/** Standard mode chooses by meaning among this many of the newest replies (when the agent may have an embedder). */
const standardPool = 50;
/** Abstracts read: the newest three are shown, or those chosen by meaning among these. */
const abstractPool = 20;

/** Previous replies the context reads in each mode (the candidates it chooses among). */
function contextLimit(loop: ThinkInput['loop'], semantic: boolean): number {
  if (loop.contextMode === 'meditation') return 500;
  if (loop.contextMode === 'concentration') return 200;
  return semantic ? Math.max(loop.recentK, standardPool) : loop.recentK;
}

/** Whose tick this is, as the snapshots are keyed: the main loop, or a task loop with its own task. */
export const loopOf = (input: Pick<ThinkInput, 'agentId' | 'mode' | 'taskId'>): LoopRef => ({
  agentId: input.agentId,
  ...(input.mode === 'task' && input.taskId !== undefined ? { taskId: input.taskId } : {}),
});

/** The think call's idempotency key: a retried tick gets the recorded answer, not a new call. */
export const thinkKey = (input: Pick<ThinkInput, 'workflowId' | 'tick'>) => `${input.workflowId}:${input.tick}:think`;

/**
 * The notes a context shows: unread ones, or those read by this very tick (a retry must show the
 * same notes again); a task loop's, only the user's; then the loop's notes filter, if any.
 */
function notesWhere(
  agentId: string | Placeholder,
  tick: number | Placeholder,
  task: boolean,
  filter?: ThinkInput['loop']['notesFilter'],
) {
  return and(
    eq(notes.agentId, agentId),
    eq(notes.direction, 'in'),
    eq(notes.hidden, false),
    or(isNull(notes.readAt), eq(notes.tickSeen, tick)),
    task ? eq(notes.source, 'user') : undefined,
    filter?.minPriority !== undefined ? sql`${notes.priority} >= ${filter.minPriority}` : undefined,
    filter?.sources?.length ? inArray(notes.source, filter.sources as never[]) : undefined,
    filter?.tags?.length ? sql`${notes.tags} && ${filter.tags}` : undefined,
  );
}

const unfiltered = (filter: ThinkInput['loop']['notesFilter']) =>
  filter?.minPriority === undefined && !filter?.sources?.length && !filter?.tags?.length;

/**
 * The context's reads beside the snapshot, one statement per kind of loop (db/json-rows.ts): the
 * active goals, the pinned tasks (a task loop: its own task), the newest abstracts, the open
 * processes, the command results of the loop's previous tick, the notes to show, the memory,
 * and every goal with its task counts. Rendered once per database handle; placeholders agentId,
 * tick, previousTick, and a task loop's taskId and taskPrefix.
 */
const contextStatements = statements('context', (db, name) => {
  const agentId = sql.placeholder('agentId');
  const tick = sql.placeholder('tick');
  const topTasks = (which: SQL) =>
    db
      .select()
      .from(tasks)
      .where(and(eq(tasks.agentId, agentId), which))
      .orderBy(desc(tasks.priority))
      .limit(10);
  const previousResults = (which: SQL) =>
    db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.agentId, agentId), eq(commandLog.tick, sql.placeholder('previousTick')), which))
      .orderBy(asc(commandLog.id))
      .limit(20);
  const notesFor = (task: boolean) =>
    db
      .select()
      .from(notes)
      .where(notesWhere(agentId, tick, task))
      .orderBy(desc(notes.priority), asc(notes.id))
      .limit(20);
  const shared = {
    goals: jsonRows(
      db
        .select()
        .from(goals)
        .where(and(eq(goals.agentId, agentId), eq(goals.status, 'active')))
        .orderBy(desc(goals.priority))
        .limit(10),
    ).as('goals'),
    abstracts: jsonRows(
      db
        .select()
        .from(abstracts)
        .where(and(eq(abstracts.agentId, agentId), isNull(abstracts.archivedAt)))
        .orderBy(desc(abstracts.id))
        .limit(abstractPool),
    ).as('abstracts'),
    processes: jsonRows(
      db
        .select()
        .from(processLog)
        .where(and(eq(processLog.agentId, agentId), isNull(processLog.closedAt)))
        .orderBy(desc(processLog.id))
        .limit(10),
    ).as('processes'),
    memory: jsonRows(
      db
        .select()
        .from(llmMemory)
        .where(and(eq(llmMemory.agentId, agentId), isNull(llmMemory.archivedAt)))
        .orderBy(desc(llmMemory.pinned), desc(llmMemory.id))
        .limit(10),
    ).as('memory'),
    goalMetrics: jsonRows(goalMetricRowsQuery(db)).as('goal_metrics'),
  };
  // One row of json columns, from nothing else (the snapshot reads the agent's row).
  const rows = <T extends Record<string, SQL.Aliased>>(key: string, own: T) =>
    db
      .select({ ...shared, ...own })
      .from(sql`(values (1)) as one (n)`)
      .prepare(name(key));
  return {
    // The main loop's also reads, in the same statement, what its snapshot reads at every tick
    // (activities/tick/snapshot.ts; placeholder contextLimit), the tick's reply if an earlier
    // attempt recorded it, its think call's earlier answers (placeholder thinkKey), and the
    // discovered tools.
    main: rows('main', {
      ...snapshotReadColumns(db),
      tasks: jsonRows(topTasks(eq(tasks.pinned, true))).as('tasks'),
      results: jsonRows(previousResults(sql`${commandLog.cmdId} not like 'task%.%'`)).as('results'),
      notes: jsonRows(notesFor(false)).as('notes'),
      recorded: jsonRows(
        db
          .select()
          .from(llmRecentResponses)
          .where(and(eq(llmRecentResponses.agentId, agentId), eq(llmRecentResponses.tick, tick)))
          .limit(1),
      ).as('recorded'),
      calls: jsonRows(
        db
          .select()
          .from(llmCalls)
          .where(eq(llmCalls.requestKey, sql.placeholder('thinkKey')))
          .orderBy(asc(llmCalls.id)),
      ).as('calls'),
      tools: jsonRows(describedToolsQuery(db)).as('tools'),
    }),
    // A task loop: its own task (its row also gives the focus and its status), the results of
    // the commands carrying its task's prefix, the user's notes.
    task: rows('task', {
      tasks: jsonRows(topTasks(eq(tasks.id, sql.placeholder('taskId')))).as('tasks'),
      results: jsonRows(previousResults(sql`${commandLog.cmdId} like ${sql.placeholder('taskPrefix')}`)).as('results'),
      notes: jsonRows(notesFor(true)).as('notes'),
    }),
  };
});

/** A notes filter (rarely set) reads the notes apart, with its conditions. */
function filteredNotes(db: Db, input: ThinkInput, task: boolean) {
  const filter = input.loop.notesFilter;
  if (unfiltered(filter)) return undefined;
  return db
    .select()
    .from(notes)
    .where(notesWhere(input.agentId, input.tick, task, filter))
    .orderBy(desc(notes.priority), asc(notes.id))
    .limit(20);
}

type ContextRow = Awaited<ReturnType<ReturnType<typeof contextStatements>['task']['execute']>>[number];

/** The rows every loop's context reads, decoded from its statement's row. */
function sharedRowsOf(row: ContextRow, filtered: Array<typeof notes.$inferSelect> | undefined) {
  return {
    goals: rowsOf(goals, row.goals),
    tasks: rowsOf(tasks, row.tasks),
    abstracts: rowsOf(abstracts, row.abstracts),
    processes: rowsOf(processLog, row.processes),
    results: rowsOf(commandLog, row.results),
    notes: filtered ?? rowsOf(notes, row.notes),
    memory: rowsOf(llmMemory, row.memory),
    goalMetrics: goalMetricRowsOf(row.goalMetrics),
  };
}

/**
 * The main loop's rows beside the snapshot's rare part, in one statement: the context's, what
 * the snapshot reads at every tick, the tick's reply if an earlier attempt recorded it, its think
 * call's earlier answers and the discovered tools.
 */
async function readMainRows(db: Db, input: ThinkInput, contextLimit: number) {
  const { agentId, tick } = input;
  const [[row], filtered] = await Promise.all([
    contextStatements(db).main.execute({
      agentId,
      tick,
      previousTick: tick - 1,
      thinkKey: thinkKey(input),
      contextLimit,
    }),
    filteredNotes(db, input, false),
  ]);
  return {
    ...sharedRowsOf(row!, filtered),
    recorded: rowsOf(llmRecentResponses, row!.recorded)[0],
    calls: rowsOf(llmCalls, row!.calls),
    tools: describeRows(fieldRowsOf<DescribedToolRow>(describedToolFields, row!.tools)),
    snapshot: snapshotReadOf(row!),
  };
}

/** A task loop's rows beside the snapshot: its own task, its commands' results, the user's notes. */
async function readTaskRows(db: Db, input: ThinkInput) {
  const { agentId, tick } = input;
  const [[row], filtered] = await Promise.all([
    contextStatements(db).task.execute({
      agentId,
      tick,
      previousTick: tick - 1,
      taskId: input.taskId,
      taskPrefix: `task${input.taskId}.%`,
    }),
    filteredNotes(db, input, true),
  ]);
  return sharedRowsOf(row!, filtered);
}

/** One MCP tool as context 2 lists it: `server.tool [flags]: description — args {…}`, capped. */
/** The allow-lists a tool's calls keep to, as the agent reads them. */
function allowLists(p: McpContextTool['policy']): string {
  const parts = [
    p.allowPaths?.length ? `paths only under ${p.allowPaths.join(', ')}` : '',
    p.allowUrls?.length ? `URLs only under ${p.allowUrls.join(', ')}` : '',
  ].filter(Boolean);
  return parts.length ? `; ${parts.join('; ')}` : '';
}

function mcpToolLine(t: McpContextTool): { name: string; description: string } {
  const props = (t.inputSchema.properties ?? {}) as Record<string, { type?: unknown }>;
  const required = new Set(Array.isArray(t.inputSchema.required) ? (t.inputSchema.required as string[]) : []);
  const args = Object.entries(props)
    .map(([k, v]) => `${k}${required.has(k) ? '' : '?'}: ${typeof v?.type === 'string' ? v.type : 'any'}`)
    .join(', ');
  return {
    name: mcpToolLabel(t.server, t.name, t.annotations, t.policy),
    description: clipText(`${oneLine(t.description ?? '', 200)} — args {${args}}${allowLists(t.policy)}`, 500),
  };
}

/**
 * The snapshot and the rows of this tick's context beyond it: for the main loop in one statement
 * (the snapshot then reads only what changed of its rare part); a task loop's, in one batch.
 */
async function readContextRows(deps: ContextDeps, input: ThinkInput) {
  const loop = loopOf(input);
  const limit = contextLimit(input.loop, deps.embedders !== undefined);
  // Read afresh at every think, a retry included (an outage may have been fixed meanwhile).
  const snapshotOf = (read?: SnapshotRead) =>
    deps.snapshots.snapshotOf(loop, input.tick, { contextLimit: limit, fresh: true, ...(read ? { read } : {}) });
  if (loop.taskId === undefined) {
    const { snapshot: read, calls, ...own } = await readMainRows(deps.db, input, limit);
    // What the LLM call would look up itself, read with the context (ChatRequest.preloaded).
    return { snapshot: await snapshotOf(read), own, previousCalls: calls };
  }
  const [snapshot, shared, tools, previousCalls] = await Promise.all([
    snapshotOf(),
    readTaskRows(deps.db, input),
    toolDescriptions(deps.db, { agentId: input.agentId }),
    deps.llm.previousCalls([thinkKey(input)]),
  ]);
  return { snapshot, own: { ...shared, tools, recorded: undefined }, previousCalls };
}

/** The tick's context, and what the think call needs beside it. */
export async function loadContext(deps: ContextDeps, input: ThinkInput): Promise<LoadedContext> {
  const { agentId, tick } = input;
  const { snapshot, own, previousCalls } = await readContextRows(deps, input);
  const {
    goals: goalRows,
    tasks: taskRows,
    abstracts: abstractRows,
    processes,
    results,
    notes: noteRows,
    memory,
  } = own;
  if (!snapshot.agent) throw nonRetryable(ErrorType.NotFound, `agent ${agentId} does not exist`);
  // The system prompt, the thinking method (its prompt is in context 0) and the MCP tools come
  // with the snapshot.
  const { prompts, method, mcpTools: mcpToolRows, mcpHidden: mcpHiddenRows } = snapshot;
  const prompt = prompts.find((p) => p.kind === 'full') ?? prompts[0];
  const ownTask = input.mode === 'task' && input.taskId !== undefined ? taskRows[0] : undefined;
  const focus = ownTask
    ? `You are an auxiliary loop working only on task #${ownTask.id} "${ownTask.title}"${ownTask.description ? `: ${ownTask.description}` : ''}. You may read anything, write only notes (notes.send) and this task (tasks.update/tasks.status). Send proposals to the main loop as notes; set the task status to done when finished.`
    : input.focus;
  const limit = contextLimit(input.loop, deps.embedders !== undefined);
  const responses = snapshot.previous
    .filter((r) => !r.archived)
    .slice(0, limit)
    .map((r): ContextResponse => ({
      id: r.id,
      tick: r.tick,
      content: r.content,
      tags: r.tags,
      emotions: r.emotions,
    }));
  const candidates: Candidates = {
    responses,
    abstracts: abstractRows.map((a) => ({ id: a.id, title: a.title, summary: a.summary })),
    commandResults: results.map((c) => ({
      cmdId: c.cmdId,
      type: c.type,
      status: c.status,
      text: commandResultText(c),
    })),
  };
  const focusTexts = [
    ...goalRows.map((g) => g.title),
    ...taskRows.map((t) => (ownTask && t.description ? `${t.title}: ${t.description}` : t.title)),
  ];
  // The agent's embedder, chosen from the snapshot's settings and registry; a failure counts as none.
  const embedder = await deps.embedders?.forAgent(deps.db, agentId, snapshot).catch(() => undefined);
  const chosen = (await embedCandidates(deps.db, embedder, candidates, input.loop, focusTexts)) ?? candidates;
  const context = assembleContext({
    agent: {
      id: snapshot.agent.id,
      name: snapshot.agent.name,
      description: snapshot.agent.description,
      identity: snapshot.agent.identity,
    },
    ...(method ? { thinkingMethod: method } : {}),
    tick,
    now: input.now,
    systemPrompt: `${prompt?.content ?? defaultSystemPrompt}\n\n${replyFormatInstructions}`,
    ethics: snapshot.ethics.map((e) => ({ title: e.title, rule: e.rule, severity: e.severity })),
    catalogue: helpText(),
    // Each discovered tool described in its current state with the actions valid in it
    // (progressive discovery).
    tools: own.tools.map((t) => ({ name: t.name, description: t.description })),
    mcpTools: mcpToolRows.map(mcpToolLine),
    mcpHidden: mcpHiddenRows,
    // Rehydration: the agent's learnings above the load threshold, at every tick's context —
    // so at loop start and after continue-as-new too.
    learnings: snapshot.learnings.slice(0, learningsShown).map(learningLine),
    responses: chosen.responses,
    goals: goalRows.map((g) => ({ id: g.id, title: g.title, priority: g.priority, status: g.status })),
    goalMetrics: goalMetrics(own.goalMetrics),
    pinnedTasks: taskRows.map((t) => ({ id: t.id, title: t.title, priority: t.priority, status: t.status })),
    abstracts: chosen.abstracts,
    openProcesses: processes.map((p) => ({
      processId: p.processId,
      name: p.name,
      status: p.status,
      message: p.message,
    })),
    commandResults: chosen.commandResults,
    ...(chosen.semantic ? { semantic: chosen.semantic } : {}),
    notes: noteRows.map((n) => ({
      id: n.id,
      source: n.source,
      ...(n.sender ? { sender: n.sender } : {}),
      priority: n.priority,
      tags: n.tags,
      text: n.text,
    })),
    notesMode: input.loop.notesMode,
    config: snapshot.config,
    memory: memory.map((m) => ({ id: m.id, title: m.title, content: m.content, pinned: m.pinned })),
    contextMode: input.loop.contextMode,
    contextFilter: input.loop.contextFilter,
    recentK: input.loop.recentK,
    focus,
  });
  const every = configKeys.abstract_every.schema.safeParse(snapshot.config.abstract_every);
  return {
    context,
    snapshot,
    taskStatus: ownTask?.status,
    preloaded: { registry: snapshot.registry, previous: previousCalls },
    tools: own.tools,
    mcpTools: mcpToolRows,
    abstractEvery: every.success ? (every.data as number) : configKeys.abstract_every.default,
    ...(own.recorded ? { recorded: own.recorded } : {}),
  };
}

/**
 * The context waits this long for its vectors, then chooses as without them (the embedding goes on
 * and is cached for the next tick).
 */
const embedTimeoutMs = 20_000;

/** What contexts 3 and 5 choose among, with their vectors and the query when chosen by meaning. */
interface Candidates {
  responses: ContextResponse[];
  abstracts: ContextInput['abstracts'];
  commandResults: ContextInput['commandResults'];
  semantic?: SemanticQuery;
}

/**
 * The candidates with their vectors, and the query (the goals' and tasks' texts, a concentration's
 * tags and emotions), through the embeddings cache: only texts never embedded by this model cost
 * an embedding. Meditation's candidates are its pool (`semanticPool`). Undefined, so the context
 * chooses as without embeddings, when the agent has no embedder (none given, semantic_memory off,
 * none to be had) or embedding fails or takes longer than `embedTimeoutMs`: a tick never fails for it.
 */
async function embedCandidates(
  db: Db,
  choice: EmbedderChoice | undefined,
  c: Candidates,
  loop: ThinkInput['loop'],
  focusTexts: string[],
): Promise<Candidates | undefined> {
  if (!choice?.ok) return undefined;
  const responses = semanticPool(c.responses, loop.contextMode);
  const concentration = loop.contextMode === 'concentration';
  const tags = concentration ? (loop.contextFilter?.tags ?? []).map((t) => t.replace(/[_-]+/g, ' ')) : [];
  const emotions = concentration ? (loop.contextFilter?.emotions ?? []) : [];
  const texts = [
    ...c.abstracts.map((a) => `${a.title}: ${a.summary}`),
    ...c.commandResults.map((r) => r.text || `${r.type} ${r.status}`),
    ...focusTexts,
    ...tags,
    ...emotions,
  ];
  let rv: Float32Array[];
  let vectors: Float32Array[];
  try {
    // A reply is placed by its vector, the mean of its clauses' (embedded at its own tick's novelty check).
    [rv, vectors] = await within(
      Promise.all([
        replyVectorsOf(
          db,
          choice.embedder,
          responses.map((r) => r.content),
        ),
        vectorsOf(db, choice.embedder, texts),
      ]),
      embedTimeoutMs,
      () => new Error(`no vectors within ${embedTimeoutMs} ms`),
    );
  } catch {
    return undefined;
  }
  let at = 0;
  const next = (n: number) => vectors.slice(at, (at += n));
  const [av, cv, gv, tv, ev] = [
    next(c.abstracts.length),
    next(c.commandResults.length),
    next(focusTexts.length),
    next(tags.length),
    next(emotions.length),
  ];
  return {
    responses: responses.map((r, i) => ({ ...r, vector: rv[i]! })),
    abstracts: c.abstracts.map((a, i) => ({ ...a, vector: av[i]! })),
    commandResults: c.commandResults.map((r, i) => ({ ...r, vector: cv[i]! })),
    semantic: { goals: gv, tags: tv, emotions: ev },
  };
}
