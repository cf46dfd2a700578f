/**
 * Automatic abstracts on real rows: the agent's recent responses digested by its configured
 * strategy, plus the diary entries and concepts it chose in that span. Shared by the hourly
 * digest, the every-N-ticks trigger (the think activity), and the triggers that fire inside a
 * command's transaction (a goal or task closing, a context mode change). Takes the pool's
 * Drizzle handle or a transaction alike.
 */
import { and, arrayOverlaps, between, desc, eq, gt, inArray, isNull, or } from 'drizzle-orm';
import type { NodePgQueryResultHKT } from 'drizzle-orm/node-postgres';
import type { PgDatabase } from 'drizzle-orm/pg-core';
import {
  abstractsStrategySchema,
  defaultAbstractsStrategy,
  makeAbstractDraft,
  type AbstractDraft,
  type AbstractSource,
  type AbstractsStrategy,
} from '../../core/abstracts.js';
import type { Schema } from '../client.js';
import {
  abstracts,
  abstractTriggers,
  agentConfig,
  concepts,
  diaryEntries,
  llmRecentResponses,
  type AbstractSources,
} from '../schema/index.js';

/** The pool's handle or a transaction (commands make their abstracts inside their own). */
export type Queryable = PgDatabase<NodePgQueryResultHKT, Schema>;
export type AbstractTrigger = (typeof abstractTriggers)[number];

/** The agent's `abstracts_strategy` (the default when unset or malformed). */
export async function strategyOf(q: Queryable, agentId: string): Promise<AbstractsStrategy> {
  const [r] = await q
    .select({ value: agentConfig.value })
    .from(agentConfig)
    .where(and(eq(agentConfig.agentId, agentId), eq(agentConfig.key, 'abstracts_strategy')));
  const parsed = abstractsStrategySchema.safeParse(r?.value);
  return parsed.success ? parsed.data : defaultAbstractsStrategy;
}

/** The agent's last `limit` live responses (after `afterTick`, when given), oldest first. */
export async function recentSources(
  q: Queryable,
  agentId: string,
  limit: number,
  afterTick?: number,
): Promise<AbstractSource[]> {
  const rows = await q
    .select({
      id: llmRecentResponses.id,
      tick: llmRecentResponses.tick,
      content: llmRecentResponses.content,
      tags: llmRecentResponses.tags,
      ideas: llmRecentResponses.ideas,
    })
    .from(llmRecentResponses)
    .where(
      and(
        eq(llmRecentResponses.agentId, agentId),
        isNull(llmRecentResponses.archivedAt),
        afterTick === undefined ? undefined : gt(llmRecentResponses.tick, afterTick),
      ),
    )
    .orderBy(desc(llmRecentResponses.tick))
    .limit(limit);
  return rows
    .reverse()
    .map((r) => ({ id: r.id, tick: r.tick, content: r.content, tags: r.tags, ideas: r.ideas?.new ?? [] }));
}

/**
 * The digest also names what the agent chose to keep in its span: diary entries written in
 * those ticks (pinned, then higher priority first) and the graph's concepts that share the
 * digest's tags. Their ids join the sources, their titles the summary and their tags the
 * digest's. The strategy's own draft (what a fork compares) is left as it is.
 */
async function withChosenEntries(
  q: Queryable,
  agentId: string,
  draft: AbstractDraft,
): Promise<AbstractDraft & { sources: AbstractSources }> {
  const diary = await q
    .select({ id: diaryEntries.id, title: diaryEntries.title, tags: diaryEntries.tags })
    .from(diaryEntries)
    .where(
      and(
        eq(diaryEntries.agentId, agentId),
        isNull(diaryEntries.archivedAt),
        between(diaryEntries.tick, draft.tickFrom, draft.tickTo),
      ),
    )
    .orderBy(desc(diaryEntries.pinned), desc(diaryEntries.priority), desc(diaryEntries.id))
    .limit(5);
  const graph = draft.tags.length
    ? await q
        .select({ id: concepts.id, name: concepts.name })
        .from(concepts)
        .where(
          and(
            eq(concepts.agentId, agentId),
            isNull(concepts.archivedAt),
            or(inArray(concepts.name, draft.tags), arrayOverlaps(concepts.tags, draft.tags)),
          ),
        )
        .orderBy(desc(concepts.weight), desc(concepts.id))
        .limit(5)
    : [];
  if (diary.length === 0 && graph.length === 0) return draft;
  const lines = [draft.summary];
  if (diary.length) lines.push(`Diary: ${diary.map((d) => `"${d.title}" (#${d.id})`).join(', ')}.`);
  if (graph.length) lines.push(`Concepts: ${graph.map((c) => `${c.name} (#${c.id})`).join(', ')}.`);
  return {
    ...draft,
    summary: lines.join('\n'),
    tags: [...new Set([...draft.tags, ...diary.flatMap((d) => d.tags)])].slice(0, 12),
    sources: {
      ...draft.sources,
      ...(diary.length ? { diary: diary.map((d) => d.id) } : {}),
      ...(graph.length ? { concepts: graph.map((c) => c.id) } : {}),
    },
  };
}

interface AutoAbstractInput {
  agentId: string;
  trigger: AbstractTrigger;
  /** Idempotency key of the firing (`abstractTriggerKey`); unset for the hourly digest. */
  triggerKey?: string;
  /** Default: the agent's `abstracts_strategy`. */
  strategy?: AbstractsStrategy;
  /** Most responses digested (default 50). */
  window?: number;
}

export interface AutoAbstractResult {
  abstractId: number | null;
  created: boolean;
  strategy: AbstractsStrategy;
  responses: number;
}

/**
 * Make one automatic abstract from the responses newer than the agent's last automatic one.
 * Nothing new to digest: no abstract. Idempotent: per `triggerKey` when given (a retry, or a
 * second firing of the same trigger in the same tick, finds the first abstract), else per
 * (agent, strategy, tick span).
 */
export async function makeAutoAbstract(q: Queryable, input: AutoAbstractInput): Promise<AutoAbstractResult> {
  const { agentId, triggerKey } = input;
  const strategy = input.strategy ?? (await strategyOf(q, agentId));
  if (triggerKey !== undefined) {
    const [fired] = await q
      .select({ id: abstracts.id })
      .from(abstracts)
      .where(and(eq(abstracts.agentId, agentId), eq(abstracts.triggerKey, triggerKey)));
    if (fired) return { abstractId: fired.id, created: false, strategy, responses: 0 };
  }
  const [last] = await q
    .select({ tickTo: abstracts.tickTo })
    .from(abstracts)
    .where(and(eq(abstracts.agentId, agentId), eq(abstracts.auto, true), isNull(abstracts.archivedAt)))
    .orderBy(desc(abstracts.tickTo))
    .limit(1);
  const sources = await recentSources(q, agentId, input.window ?? 50, last?.tickTo ?? undefined);
  if (sources.length === 0) return { abstractId: null, created: false, strategy, responses: 0 };
  const draft = await withChosenEntries(q, agentId, makeAbstractDraft(strategy, sources));
  if (triggerKey === undefined) {
    const [existing] = await q
      .select({ id: abstracts.id })
      .from(abstracts)
      .where(
        and(
          eq(abstracts.agentId, agentId),
          eq(abstracts.strategy, strategy),
          eq(abstracts.tickFrom, draft.tickFrom),
          eq(abstracts.tickTo, draft.tickTo),
        ),
      );
    if (existing) return { abstractId: existing.id, created: false, strategy, responses: sources.length };
  }
  const [row] = await q
    .insert(abstracts)
    .values({
      agentId,
      title: draft.title,
      summary: draft.summary,
      tags: draft.tags,
      sources: draft.sources,
      strategy,
      tickFrom: draft.tickFrom,
      tickTo: draft.tickTo,
      auto: true,
      trigger: input.trigger,
      triggerKey,
    })
    // A concurrent attempt with the same key won: its abstract is the one.
    .onConflictDoNothing()
    .returning({ id: abstracts.id });
  if (row) return { abstractId: row.id, created: true, strategy, responses: sources.length };
  const [winner] = await q
    .select({ id: abstracts.id })
    .from(abstracts)
    .where(and(eq(abstracts.agentId, agentId), eq(abstracts.triggerKey, triggerKey ?? '')));
  return { abstractId: winner?.id ?? null, created: false, strategy, responses: sources.length };
}
