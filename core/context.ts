/**
 * Context assembly: contexts 0–8 rendered into chat messages. Pure: the
 * activity loads the rows, this module chooses and renders them, so the choice of what the
 * agent sees is unit-testable and the same on every retry.
 */
import { goalMetricsSummary, type GoalMetrics } from './goal-metrics.js';
import {
  diverseOrder,
  estimateTokens,
  fitBudget,
  rankByRelevance,
  relevance,
  selectionDefaults,
  type Vector,
} from './relevance.js';
import { clipText } from './sanitize.js';
import type { ContextMode, NotesMode, TagFilter } from './loop-types.js';

export interface ContextResponse {
  id: number;
  tick: number;
  content: string;
  tags: string[];
  emotions: Array<{ emotion: string; strength: number }>;
  /** The embedding of `content` (unit length), when the context is chosen by meaning. */
  vector?: Vector;
}

/**
 * What the agent works toward, embedded: with it (and a vector on every candidate of a part),
 * context 3's replies and abstracts and context 5's results are chosen by meaning; without it, by
 * recency and exact tags as before.
 */
export interface SemanticQuery {
  /** The active goals' titles and the pinned tasks' (or the task loop's own task). */
  goals: Vector[];
  /** A concentration filter's tags, as text. */
  tags: Vector[];
  /** A concentration filter's emotion names, as text. */
  emotions: Vector[];
}

/** Token budgets of the parts chosen by meaning (defaults: `selectionDefaults`). */
export interface ContextBudgets {
  /** Context 3's own replies (default `recentK` × `selectionDefaults.replyTokens`). */
  replies?: number;
  abstracts?: number;
  results?: number;
}

export interface ContextInput {
  /** Context 0: who the agent is (`identity`: persona, values, languages as the `identity` command sets them). */
  agent: { id: string; name: string; description?: string | null; identity?: Record<string, unknown> };
  /** Context 0: the thinking method the agent made active, if any. */
  thinkingMethod?: { name: string; prompt: string };
  tick: number;
  /** Workflow time (ISO), never the activity's wall clock, so a retry renders the same text. */
  now: string;
  /** Context 0. */
  systemPrompt: string;
  /** Context 1. */
  ethics: Array<{ title: string; rule: string; severity: string }>;
  /** Context 2: the command catalogue text and the agent's discovered tools. */
  catalogue: string;
  tools: Array<{ name: string; description: string }>;
  /** Context 2: the discovered tools of the agent's MCP servers (`server.tool [flags]`), called with `tools.mcp`. */
  mcpTools?: Array<{ name: string; description: string }>;
  /** Context 2: per MCP server, how many of its tools are not discovered yet (discover_tools search finds them). */
  mcpHidden?: Array<{ server: string; count: number }>;
  learnings: string[];
  /** Context 3 inputs: candidates, newest first; `selectResponses` picks from them. */
  responses: ContextResponse[];
  goals: Array<{ id: number; title: string; priority: number; status: string }>;
  /** Context 3: how the agent does with its goals, one line beside them (none without goals). */
  goalMetrics?: GoalMetrics;
  pinnedTasks: Array<{ id: number; title: string; priority: number; status: string }>;
  /** Context 3's abstracts, newest first: the newest three, or chosen by meaning from these. */
  abstracts: Array<{ id: number; title: string; summary: string; vector?: Vector }>;
  /** Context 4. */
  openProcesses: Array<{ processId: string; name: string | null; status: string; message: string | null }>;
  /** Context 5: results of the previous tick's commands (the entries the agent asked for). */
  commandResults: Array<{ cmdId: string; type: string; status: string; text: string; vector?: Vector }>;
  /** Context 6. */
  notes: Array<{ id: number; source: string; sender?: string; priority: number; tags: string[]; text: string }>;
  notesMode: NotesMode;
  /** Context 7. */
  config: Record<string, unknown>;
  /** Context 8: the agent's notebook. */
  memory: Array<{ id: number; title: string | null; content: string; pinned: boolean }>;
  /** Loop settings that shape the selection. */
  contextMode: ContextMode;
  contextFilter?: TagFilter;
  recentK: number;
  /** Extra instruction for this tick (a reflex's rephrasing, a task loop's focus). */
  focus?: string;
  /** Set when the agent's embedder gave vectors: the parts are chosen by meaning. */
  semantic?: SemanticQuery;
  budgets?: ContextBudgets;
}

export interface AssembledContext {
  messages: Array<{ role: 'system' | 'user'; content: string }>;
  /** Ids of what was shown, recorded with the tick for audit and for the memory manager. */
  shown: { responses: number[]; notes: number[]; memory: number[]; abstracts: number[] };
  chars: number;
}

function matchesFilter(r: ContextResponse, f: TagFilter | undefined): boolean {
  if (!f || (!f.tags?.length && !f.emotions?.length)) return true;
  const checks: boolean[] = [];
  if (f.tags?.length) checks.push(f.tags.some((t) => r.tags.includes(t)));
  if (f.emotions?.length) checks.push(f.emotions.some((e) => r.emotions.some((x) => x.emotion === e)));
  return f.op === 'and' ? checks.every(Boolean) : checks.some(Boolean);
}

/**
 * Context 3's own responses by mode: `standard` the last K; `concentration` the last K that
 * match the tag/emotion filter; `meditation` K spread evenly across the whole history (the
 * most diverse sample a deterministic rule can give without embeddings). With a semantic query
 * and a vector on every candidate, `byMeaning` chooses instead. Returned newest first.
 */
export function selectResponses(
  all: ContextResponse[],
  mode: ContextMode,
  k: number,
  filter?: TagFilter,
  semantic?: SemanticQuery,
  budget?: number,
): ContextResponse[] {
  const newestFirst = [...all].sort((a, b) => b.tick - a.tick);
  if (k <= 0 || newestFirst.length === 0) return [];
  if (semantic && newestFirst.every((r) => r.vector))
    return byMeaning(newestFirst, mode, k, filter, semantic, budget ?? k * selectionDefaults.replyTokens);
  if (mode === 'concentration') return newestFirst.filter((r) => matchesFilter(r, filter)).slice(0, k);
  if (mode === 'meditation') {
    if (newestFirst.length <= k) return newestFirst;
    const step = (newestFirst.length - 1) / (k - 1 || 1);
    const picked = new Set<number>();
    for (let i = 0; i < k; i++) picked.add(Math.round(i * step));
    return [...picked].map((i) => newestFirst[i]!);
  }
  return newestFirst.slice(0, k);
}

/** The line context 3 shows for a reply. */
const replyLine = (r: ContextResponse) => `- tick ${r.tick}: ${clipText(r.content, 600)}`;

/**
 * The replies a mode chooses among by meaning (what the activity embeds), newest first: all of
 * them; meditation's at most `selectionDefaults.meditationPool`, spread over the history by tick
 * number — the newest, and those whose tick is a multiple of the smallest power of two that keeps
 * the pool in size — so that from one tick to the next the pool barely changes and its texts stay
 * in the embeddings cache.
 */
export function semanticPool<T extends Pick<ContextResponse, 'tick' | 'id'>>(
  all: readonly T[],
  mode: ContextMode,
): T[] {
  const newestFirst = [...all].sort((a, b) => b.tick - a.tick || b.id - a.id);
  const size = selectionDefaults.meditationPool;
  if (mode !== 'meditation' || newestFirst.length <= size) return newestFirst;
  const [newest, ...older] = newestFirst;
  let stride = 2;
  const onStride = () => older.filter((r) => r.tick % stride === 0);
  while (onStride().length > size - 1) stride *= 2;
  return [newest!, ...onStride()];
}

/**
 * Concentration by meaning: a reply is about the focus when it carries one of the filter's tags or
 * its text is within `minCosine` of one, when the evaluator read one of the filter's emotions in it
 * at `minEmotionStrength` or more (combined by the filter's and/or), or, with no filter, when its
 * text is within `minCosine` of an active goal or task (any reply, with neither).
 */
function aboutFocus(r: ContextResponse, filter: TagFilter | undefined, q: SemanticQuery): boolean {
  const { minCosine, minEmotionStrength } = selectionDefaults;
  const checks: boolean[] = [];
  if (filter?.tags?.length)
    checks.push(filter.tags.some((t) => r.tags.includes(t)) || relevance(r.vector!, q.tags) >= minCosine);
  if (filter?.emotions?.length)
    checks.push(r.emotions.some((e) => filter.emotions!.includes(e.emotion) && e.strength >= minEmotionStrength));
  if (checks.length === 0) return q.goals.length === 0 || relevance(r.vector!, q.goals) >= minCosine;
  return filter?.op === 'and' ? checks.every(Boolean) : checks.some(Boolean);
}

/**
 * Context 3's replies by meaning, within `budget` tokens (fitBudget: the first of the ranking always
 * kept). `meditation`: the K most diverse (farthest point from the newest on). `concentration`: the
 * replies about the focus, most relevant to the goals, tags and emotions first, at most 2K.
 * `standard`: the newest, then the others most relevant to the goals and tasks first (newest first
 * with none), at most 2K. Returned newest first.
 */
function byMeaning(
  newestFirst: ContextResponse[],
  mode: ContextMode,
  k: number,
  filter: TagFilter | undefined,
  q: SemanticQuery,
  budget: number,
): ContextResponse[] {
  const vectorOf = (r: ContextResponse) => r.vector!;
  const tokens = (r: ContextResponse) => estimateTokens(replyLine(r));
  const max = k * selectionDefaults.maxRepliesFactor;
  const ordered = [...newestFirst].sort((a, b) => b.tick - a.tick || b.id - a.id);
  let ranked: ContextResponse[];
  if (mode === 'meditation') {
    ranked = diverseOrder(semanticPool(ordered, mode), vectorOf, k);
  } else if (mode === 'concentration') {
    const about = ordered.filter((r) => aboutFocus(r, filter, q));
    ranked = rankByRelevance(about, vectorOf, [...q.goals, ...q.tags, ...q.emotions]);
  } else {
    const [newest, ...rest] = ordered;
    ranked = [newest!, ...(q.goals.length ? rankByRelevance(rest, vectorOf, q.goals) : rest)];
  }
  const kept = new Set(fitBudget(ranked, tokens, budget, max).map((r) => r.id));
  return ordered.filter((r) => kept.has(r.id));
}

type AbstractItem = ContextInput['abstracts'][number];
const abstractLine = (a: AbstractItem) => `- #${a.id} ${a.title}: ${clipText(a.summary, 400)}`;

/**
 * Context 3's abstracts (given newest first): the newest three; by meaning, the most relevant to
 * the goals and tasks first (newest first with none) within `budget` tokens, at most
 * `selectionDefaults.maxAbstracts`. Returned newest first.
 */
export function selectAbstracts(
  all: AbstractItem[],
  semantic?: SemanticQuery,
  budget: number = selectionDefaults.abstractTokens,
): AbstractItem[] {
  if (!semantic || !all.every((a) => a.vector)) return all.slice(0, 3);
  const ordered = [...all].sort((a, b) => b.id - a.id);
  const ranked = semantic.goals.length ? rankByRelevance(ordered, (a) => a.vector!, semantic.goals) : ordered;
  const kept = new Set(
    fitBudget(ranked, (a) => estimateTokens(abstractLine(a)), budget, selectionDefaults.maxAbstracts).map((a) => a.id),
  );
  return ordered.filter((a) => kept.has(a.id));
}

type ResultItem = ContextInput['commandResults'][number];
const resultLine = (c: ResultItem) => `- ${c.cmdId} ${c.type} [${c.status}]: ${clipText(c.text, 1500)}`;

/**
 * Context 5's lines: every result in full; by meaning, when they exceed `budget` tokens, those most
 * relevant to the goals and tasks (in order, with none) fill it and the others are listed without
 * their text. Always in the order the commands ran.
 */
export function commandResultLines(
  all: ResultItem[],
  semantic?: SemanticQuery,
  budget: number = selectionDefaults.resultTokens,
): string[] {
  const full = all.map(resultLine);
  const total = full.reduce((n, l) => n + estimateTokens(l), 0);
  if (!semantic || !all.every((c) => c.vector) || total <= budget) return full;
  const items = all.map((c, i) => ({ ...c, id: i }));
  const ranked = semantic.goals.length ? rankByRelevance(items, (c) => c.vector!, semantic.goals) : items;
  const kept = new Set(fitBudget(ranked, (c) => estimateTokens(full[c.id]!), budget).map((c) => c.id));
  return all.map((c, i) =>
    kept.has(i)
      ? full[i]!
      : `- ${c.cmdId} ${c.type} [${c.status}]: (text left out: context 5 holds ${budget} tokens of results, the most relevant to your goals first)`,
  );
}

/** Context 0's lines about the agent itself; identity fields of the wrong shape are left out. */
function identityLines(agent: ContextInput['agent'], method: ContextInput['thinkingMethod']): string[] {
  const id = agent.identity ?? {};
  const str = (v: unknown) => (typeof v === 'string' && v.trim() !== '' ? v.trim() : null);
  const list = (v: unknown) =>
    Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string' && x.trim() !== '') : [];
  const persona = str(id.persona);
  const values = list(id.values);
  const languages = list(id.languages);
  return [
    `Your name is ${agent.name} (agent id ${agent.id}).`,
    ...(str(agent.description) ? [`About you: ${clipText(agent.description!.trim(), 2000)}`] : []),
    ...(persona ? [`Your persona: ${clipText(persona, 4000)}`] : []),
    ...(values.length ? [`Your values: ${values.map((v) => clipText(v, 200)).join('; ')}`] : []),
    ...(languages.length ? [`Your languages: ${languages.join(', ')}`] : []),
    ...(method
      ? [`Thinking method in use — ${method.name}: ${clipText(method.prompt, 4000)} (thinking_methods.stop ends it)`]
      : []),
  ];
}

/**
 * Context 2's MCP tools: the discovered ones, then one line per server with tools not discovered
 * yet (a discover_tools search finds them, and what it finds is listed from the next tick).
 */
const findThem =
  'find them with discover_tools search <words> (tool.call {tool: discover_tools, action: search, args: {query}})';

function mcpToolLines(
  tools: NonNullable<ContextInput['mcpTools']>,
  hidden: NonNullable<ContextInput['mcpHidden']>,
): string[] {
  const more = hidden.filter((h) => h.count > 0);
  if (tools.length === 0 && more.length === 0) return [];
  return [
    'Tools of your MCP servers (call one with tools.mcp {server, tool, args}; the result comes with the next context):',
    ...tools.map((t) => `- ${t.name}: ${t.description}`),
    ...more.map((h) => `- server ${h.server}: ${h.count} more ${h.count === 1 ? 'tool' : 'tools'}; ${findThem}`),
  ];
}

function section(n: number, title: string, body: string[]): string {
  return `## Context ${n} — ${title}\n${body.length ? body.join('\n') : '(none)'}`;
}

/**
 * Render contexts 0–8 into two messages. The system message holds contexts 0–2 (who the agent is,
 * its ethics, its commands and tools) and nothing else, so it is byte-identical from tick to tick
 * while those do not change: providers serve it from their prompt cache. Everything that changes
 * with the tick (learnings, contexts 3–8, the tick number and time, the focus) is the user message.
 */
export function assembleContext(input: ContextInput): AssembledContext {
  const responses = selectResponses(
    input.responses,
    input.contextMode,
    input.recentK,
    input.contextFilter,
    input.semantic,
    input.budgets?.replies,
  );
  const byMeaningShown = input.semantic !== undefined && input.responses.every((r) => r.vector);
  const abstractsShown = selectAbstracts(input.abstracts, input.semantic, input.budgets?.abstracts);
  const system = [
    section(0, 'who you are', [input.systemPrompt, ...identityLines(input.agent, input.thinkingMethod)]),
    section(
      1,
      'ethics (never break these)',
      input.ethics.map((e) => `- [${e.severity}] ${e.title}: ${e.rule}`),
    ),
    section(2, 'commands and tools', [
      input.catalogue,
      ...(input.tools.length
        ? [
            'Tools you have discovered (call one with tool.call {tool, action, args?}; only these are callable):',
            ...input.tools.map((t) => `- ${t.name}: ${t.description}`),
          ]
        : []),
      ...mcpToolLines(input.mcpTools ?? [], input.mcpHidden ?? []),
    ]),
  ].join('\n\n');

  const notesBody =
    input.notesMode === 'manual'
      ? input.notes.length
        ? [
            `${input.notes.length} unread note(s), ids ${input.notes.map((n) => n.id).join(', ')} — read them with notes.read`,
          ]
        : []
      : input.notes.map(
          (n) =>
            `- note #${n.id} from ${n.source}${n.sender ? ` ${n.sender}` : ''} (priority ${n.priority}${n.tags.length ? `, ${n.tags.join(',')}` : ''}): ${clipText(n.text, 2000)}`,
        );

  const user = [
    // Learnings change with their confidence: they lead the per-tick message, not the stable one.
    ...(input.learnings.length ? [['What you have learned:', ...input.learnings.map((l) => `- ${l}`)].join('\n')] : []),
    section(
      3,
      `your recent thoughts (${input.contextMode}, ${responses.length}${byMeaningShown ? ', by meaning' : ''})`,
      [
        ...[...responses].reverse().map(replyLine),
        ...(input.goals.length
          ? ['Active goals:', ...input.goals.map((g) => `- goal #${g.id} [p${g.priority}] ${g.title}`)]
          : []),
        ...(input.goalMetrics?.total ? [`Your goal record: ${goalMetricsSummary(input.goalMetrics)}`] : []),
        ...(input.pinnedTasks.length
          ? [
              'Pinned tasks:',
              ...input.pinnedTasks.map((t) => `- task #${t.id} [p${t.priority}, ${t.status}] ${t.title}`),
            ]
          : []),
        ...(abstractsShown.length ? ['Abstracts:', ...abstractsShown.map(abstractLine)] : []),
      ],
    ),
    section(
      4,
      'open processes',
      input.openProcesses.map((p) => `- ${p.processId} ${p.name ?? ''} [${p.status}] ${p.message ?? ''}`.trimEnd()),
    ),
    section(
      5,
      'results of your last commands',
      commandResultLines(input.commandResults, input.semantic, input.budgets?.results),
    ),
    section(6, `incoming notes (${input.notesMode})`, notesBody),
    section(7, 'config and time', [
      `tick ${input.tick}, time ${input.now}`,
      ...Object.entries(input.config).map(([k, v]) => `${k} = ${JSON.stringify(v)}`),
    ]),
    section(
      8,
      'your notebook (llm_memory)',
      input.memory.map(
        (m) => `- #${m.id}${m.pinned ? ' (pinned)' : ''} ${m.title ? `${m.title}: ` : ''}${clipText(m.content, 500)}`,
      ),
    ),
    input.focus
      ? `Focus for this tick: ${input.focus}`
      : 'Think about what matters now, then act with commands if useful.',
  ].join('\n\n');

  return {
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: user },
    ],
    shown: {
      responses: responses.map((r) => r.id),
      notes: input.notesMode === 'auto' ? input.notes.map((n) => n.id) : [],
      memory: input.memory.map((m) => m.id),
      abstracts: abstractsShown.map((a) => a.id),
    },
    chars: system.length + user.length,
  };
}

/** The default system prompt when the agent has none in `system_prompts`. */
export const defaultSystemPrompt = [
  'You are an autonomous agent that thinks in a continuous loop. Each tick you see your recent',
  'thoughts, your goals and tasks, notes from your user, and the results of your last commands.',
  'Write a short thought that moves your goals forward, then, if useful, commands to act:',
  'keep a diary, manage goals and tasks, answer notes, write to your notebook.',
].join(' ');
