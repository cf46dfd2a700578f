/**
 * Long-term and middle memory commands: diary, concepts and links
 * (the semantic graph), llm_memory (the notebook), abstracts. Deletes archive the row
 * (`archived_at`), so they stay restorable.
 */
import { clipText, oneLine } from '../../core/sanitize.js';
import { and, arrayContains, asc, desc, eq, ilike, inArray, isNull, or, sql } from 'drizzle-orm';
import { alias } from 'drizzle-orm/pg-core';
import {
  abstracts,
  concepts,
  diaryEntries,
  links,
  llmMemory,
  llmRecentResponses,
  type AbstractSources,
} from '../../db/schema/index.js';
import { kindTables, restoreArchived } from '../../db/queries/archive.js';
import { searchKinds } from '../../core/catalogue/memory-commands.js';
import { searchByMeaning } from '../embeddings/memory-index.js';
import type { Db } from '../../db/client.js';
import { anyOf } from '../../db/prepared.js';
import {
  CommandError,
  type HandlerResult,
  likePattern,
  listResult,
  maxResultText,
  notFound,
  tagSuffix,
  type FamilyTypes,
  type HandlerContext,
  type HandlerMap,
  type Tx,
} from './shared.js';

const now = () => new Date();

// --- diary ------------------------------------------------------------------------------------

const diaryActive = (agentId: string, id?: number) =>
  and(
    eq(diaryEntries.agentId, agentId),
    isNull(diaryEntries.archivedAt),
    id === undefined ? undefined : eq(diaryEntries.id, id),
  );

async function diarySet(ctx: HandlerContext, id: number, set: Partial<typeof diaryEntries.$inferInsert>, done: string) {
  const rows = await ctx.tx
    .update(diaryEntries)
    .set(set)
    .where(diaryActive(ctx.agentId, id))
    .returning({ id: diaryEntries.id });
  if (!rows[0]) notFound('diary entry', id);
  return { message: `diary entry #${id} ${done}` };
}

export const diaryHandlers: HandlerMap<FamilyTypes<'diary'>> = {
  async 'diary.list'(ctx, a) {
    const { tx, agentId } = ctx;
    const rows = await tx
      .select()
      .from(diaryEntries)
      .where(
        and(
          diaryActive(agentId),
          a.tag ? arrayContains(diaryEntries.tags, [a.tag]) : undefined,
          a.pinned !== undefined ? eq(diaryEntries.pinned, a.pinned) : undefined,
        ),
      )
      .orderBy(desc(diaryEntries.pinned), desc(diaryEntries.id))
      .limit(a.limit ?? 10)
      .offset(a.offset ?? 0);
    await touch(
      ctx,
      diaryEntries,
      rows.map((r) => r.id),
    );
    return listResult(
      'diary entries',
      rows.map(
        (r) =>
          `#${r.id}${r.pinned ? ' [pinned]' : ''} ${oneLine(r.title, 100)}${tagSuffix(r.tags)} — ${oneLine(r.content, 120)}`,
      ),
    );
  },
  'diary.search': (ctx, a) =>
    searchMemory(ctx, {
      query: a.query,
      kinds: ['diary'],
      limit: a.limit ?? 10,
      archived: a.archived ?? false,
      tags: a.tags,
    }),
  async 'diary.read'(ctx, a) {
    const [r] = await ctx.tx.select().from(diaryEntries).where(diaryActive(ctx.agentId, a.id));
    if (!r) notFound('diary entry', a.id);
    await touch(ctx, diaryEntries, a.id);
    return {
      message: `diary entry #${r.id}: ${oneLine(r.title, 100)}`,
      text: `#${r.id}${r.pinned ? ' [pinned]' : ''} ${r.title}${tagSuffix(r.tags)} (tick ${r.tick ?? '?'}, ${r.createdAt.toISOString()})\n${r.content}`,
    };
  },
  async 'diary.add'({ tx, agentId, tick }, a) {
    const [r] = await tx
      .insert(diaryEntries)
      .values({
        agentId,
        tick,
        title: a.title,
        content: a.content,
        tags: a.tags ?? [],
        priority: a.priority ?? 0,
        pinned: a.pinned ?? false,
        emotions: a.emotions ?? [],
      })
      .returning({ id: diaryEntries.id });
    return { message: `diary entry #${r!.id} added` };
  },
  'diary.update': (ctx, a) =>
    diarySet(ctx, a.id, { title: a.title, content: a.content, tags: a.tags, priority: a.priority }, 'updated'),
  'diary.delete': (ctx, a) => diarySet(ctx, a.id, { archivedAt: now() }, 'archived'),
  'diary.pin': (ctx, a) => diarySet(ctx, a.id, { pinned: true }, 'pinned'),
  'diary.unpin': (ctx, a) => diarySet(ctx, a.id, { pinned: false }, 'unpinned'),
};

/** Text around the first match of `query`, for search results. */
function snippet(content: string, query: string, width = 160): string {
  const i = content.toLowerCase().indexOf(query.toLowerCase());
  if (i <= 40) return oneLine(content, width);
  return `…${oneLine(content.slice(i - 40), width)}`;
}

/**
 * Access bookkeeping for the memory manager: every read command that shows a row counts one use
 * (`access_count`, `last_accessed_at`), which is what keeps it when its tier is pruned. An
 * auxiliary loop only reads.
 */
async function touch(
  ctx: SearchContext,
  table: typeof diaryEntries | typeof llmMemory | typeof concepts | typeof links,
  ids: number | readonly number[],
): Promise<void> {
  const list = typeof ids === 'number' ? [ids] : [...new Set(ids)];
  if (ctx.mode !== 'main' || list.length === 0) return;
  await ctx.tx
    .update(table)
    .set({ accessCount: sql`${table.accessCount} + 1`, lastAccessedAt: now() })
    .where(and(eq(table.agentId, ctx.agentId), inArray(table.id, list)));
}

// --- concepts and links ------------------------------------------------------------------------

const conceptActive = (agentId: string) => and(eq(concepts.agentId, agentId), isNull(concepts.archivedAt));

/** A concept by id (number) or name (string), or a CommandError naming it. */
async function resolveConcept(tx: Tx, agentId: string, ref: number | string) {
  const [c] = await tx
    .select()
    .from(concepts)
    .where(and(conceptActive(agentId), typeof ref === 'number' ? eq(concepts.id, ref) : eq(concepts.name, ref)));
  if (!c)
    throw new CommandError(
      typeof ref === 'number'
        ? `concept #${ref} not found`
        : `concept '${clipText(ref, 60)}' not found (add it with concepts.add)`,
    );
  return c;
}

export const conceptHandlers: HandlerMap<FamilyTypes<'concepts'>> = {
  async 'concepts.add'({ tx, agentId }, a) {
    const [existing] = await tx
      .select({ id: concepts.id, archivedAt: concepts.archivedAt })
      .from(concepts)
      .where(and(eq(concepts.agentId, agentId), eq(concepts.name, a.name)));
    if (existing && !existing.archivedAt)
      throw new CommandError(`concept '${clipText(a.name, 60)}' already exists (#${existing.id})`);
    const values = { description: a.description ?? null, tags: a.tags ?? [], weight: a.weight ?? 1 };
    if (existing) {
      // An archived concept of the same name comes back rather than colliding with the unique name.
      await tx
        .update(concepts)
        .set({ ...values, archivedAt: null })
        .where(eq(concepts.id, existing.id));
      return { message: `concept #${existing.id} '${clipText(a.name, 60)}' restored` };
    }
    const [r] = await tx
      .insert(concepts)
      .values({ agentId, name: a.name, ...values })
      .returning({ id: concepts.id });
    return { message: `concept #${r!.id} '${clipText(a.name, 60)}' added` };
  },
  async 'concepts.list'(ctx, a) {
    const { tx, agentId } = ctx;
    const rows = await tx
      .select()
      .from(concepts)
      .where(
        and(
          conceptActive(agentId),
          a.tag ? arrayContains(concepts.tags, [a.tag]) : undefined,
          a.query ? ilike(concepts.name, likePattern(a.query)) : undefined,
        ),
      )
      .orderBy(desc(concepts.weight), asc(concepts.name))
      .limit(a.limit ?? 20)
      .offset(a.offset ?? 0);
    await touch(
      ctx,
      concepts,
      rows.map((c) => c.id),
    );
    return listResult(
      'concepts',
      rows.map(
        (c) =>
          `#${c.id} ${c.name} (w ${c.weight})${tagSuffix(c.tags)}${c.description ? ` — ${oneLine(c.description, 120)}` : ''}`,
      ),
    );
  },
  async 'concepts.read'(ctx, a) {
    const { tx, agentId } = ctx;
    const c = await resolveConcept(tx, agentId, a.concept);
    const edges = await linkRows(tx, agentId, c.id, undefined, 30);
    // The concept, its links and the concepts at their other ends were all shown: each a use.
    await touch(ctx, concepts, [c.id, ...edges.flatMap((l) => [l.fromId, l.toId])]);
    await touch(
      ctx,
      links,
      edges.map((l) => l.id),
    );
    const lines = edges.map(renderLink);
    return {
      message: `concept #${c.id} '${clipText(c.name, 60)}' with ${edges.length} links`,
      text: `#${c.id} ${c.name} (w ${c.weight})${tagSuffix(c.tags)}\n${c.description ?? ''}\nLinks:\n${lines.length ? lines.join('\n') : '(none)'}`,
    };
  },
  async 'concepts.update'({ tx, agentId }, a) {
    const rows = await tx
      .update(concepts)
      .set({ name: a.name, description: a.description, tags: a.tags, weight: a.weight })
      .where(and(conceptActive(agentId), eq(concepts.id, a.id)))
      .returning({ id: concepts.id });
    if (!rows[0]) notFound('concept', a.id);
    return { message: `concept #${a.id} updated` };
  },
  async 'concepts.delete'({ tx, agentId }, a) {
    const rows = await tx
      .update(concepts)
      .set({ archivedAt: now() })
      .where(and(conceptActive(agentId), eq(concepts.id, a.id)))
      .returning({ id: concepts.id });
    if (!rows[0]) notFound('concept', a.id);
    return { message: `concept #${a.id} archived` };
  },
};

const fromC = alias(concepts, 'from_c');
const toC = alias(concepts, 'to_c');

async function linkRows(
  tx: Tx,
  agentId: string,
  conceptId: number | undefined,
  relation: string | undefined,
  max: number,
) {
  return tx
    .select({
      id: links.id,
      relation: links.relation,
      weight: links.weight,
      from: fromC.name,
      to: toC.name,
      fromId: links.fromConceptId,
      toId: links.toConceptId,
    })
    .from(links)
    .innerJoin(fromC, eq(fromC.id, links.fromConceptId))
    .innerJoin(toC, eq(toC.id, links.toConceptId))
    .where(
      and(
        eq(links.agentId, agentId),
        isNull(links.archivedAt),
        // A link is shown between two live concepts only.
        isNull(fromC.archivedAt),
        isNull(toC.archivedAt),
        conceptId !== undefined ? or(eq(links.fromConceptId, conceptId), eq(links.toConceptId, conceptId)) : undefined,
        relation ? eq(links.relation, relation) : undefined,
      ),
    )
    .orderBy(desc(links.weight), asc(links.id))
    .limit(max);
}

const renderLink = (l: {
  id: number;
  relation: string;
  weight: number;
  from: string;
  to: string;
  fromId: number;
  toId: number;
}) => `#${l.id} ${l.from} (#${l.fromId}) -[${l.relation}, w ${l.weight}]-> ${l.to} (#${l.toId})`;

export const linkHandlers: HandlerMap<FamilyTypes<'links'>> = {
  async 'links.add'({ tx, agentId }, a) {
    const from = await resolveConcept(tx, agentId, a.from);
    const to = await resolveConcept(tx, agentId, a.to);
    const relation = a.relation ?? 'related_to';
    const [r] = await tx
      .insert(links)
      .values({ agentId, fromConceptId: from.id, toConceptId: to.id, relation, weight: a.weight ?? 1 })
      .onConflictDoUpdate({
        target: [links.agentId, links.fromConceptId, links.toConceptId, links.relation],
        set: { weight: a.weight ?? 1, archivedAt: null },
      })
      .returning({ id: links.id });
    return { message: `link #${r!.id}: ${clipText(from.name, 50)} -[${relation}]-> ${clipText(to.name, 50)}` };
  },
  async 'links.list'(ctx, a) {
    const { tx, agentId } = ctx;
    const conceptId = a.concept !== undefined ? (await resolveConcept(tx, agentId, a.concept)).id : undefined;
    const rows = await linkRows(tx, agentId, conceptId, a.relation, a.limit ?? 20);
    await touch(
      ctx,
      links,
      rows.map((l) => l.id),
    );
    return listResult('links', rows.map(renderLink));
  },
  async 'links.delete'({ tx, agentId }, a) {
    const rows = await tx
      .update(links)
      .set({ archivedAt: now() })
      .where(and(eq(links.agentId, agentId), isNull(links.archivedAt), eq(links.id, a.id)))
      .returning({ id: links.id });
    if (!rows[0]) notFound('link', a.id);
    return { message: `link #${a.id} archived` };
  },
};

// --- llm_memory ---------------------------------------------------------------------------------

const memoryActive = (agentId: string, id?: number) =>
  and(
    eq(llmMemory.agentId, agentId),
    isNull(llmMemory.archivedAt),
    id === undefined ? undefined : eq(llmMemory.id, id),
  );

async function memorySet(ctx: HandlerContext, id: number, set: Partial<typeof llmMemory.$inferInsert>, done: string) {
  const rows = await ctx.tx
    .update(llmMemory)
    .set(set)
    .where(memoryActive(ctx.agentId, id))
    .returning({ id: llmMemory.id });
  if (!rows[0]) notFound('notebook entry', id);
  return { message: `notebook entry #${id} ${done}` };
}

export const llmMemoryHandlers: HandlerMap<FamilyTypes<'llm_memory'>> = {
  async 'llm_memory.add'({ tx, agentId }, a) {
    const [r] = await tx
      .insert(llmMemory)
      .values({
        agentId,
        content: a.content,
        title: a.title ?? null,
        tags: a.tags ?? [],
        priority: a.priority ?? 0,
        pinned: a.pinned ?? false,
      })
      .returning({ id: llmMemory.id });
    return { message: `notebook entry #${r!.id} added` };
  },
  async 'llm_memory.list'(ctx, a) {
    const { tx, agentId } = ctx;
    const rows = await tx
      .select()
      .from(llmMemory)
      .where(
        and(
          memoryActive(agentId),
          a.tag ? arrayContains(llmMemory.tags, [a.tag]) : undefined,
          a.pinned !== undefined ? eq(llmMemory.pinned, a.pinned) : undefined,
        ),
      )
      .orderBy(desc(llmMemory.pinned), desc(llmMemory.priority), desc(llmMemory.id))
      .limit(a.limit ?? 10)
      .offset(a.offset ?? 0);
    await touch(
      ctx,
      llmMemory,
      rows.map((m) => m.id),
    );
    return listResult(
      'notebook entries',
      rows.map(
        (m) =>
          `#${m.id}${m.pinned ? ' [pinned]' : ''}${m.title ? ` ${oneLine(m.title, 80)}:` : ''} ${oneLine(m.content, 140)}${tagSuffix(m.tags)}`,
      ),
    );
  },
  async 'llm_memory.read'(ctx, a) {
    const [m] = await ctx.tx.select().from(llmMemory).where(memoryActive(ctx.agentId, a.id));
    if (!m) notFound('notebook entry', a.id);
    await touch(ctx, llmMemory, a.id);
    return {
      message: `notebook entry #${m.id}`,
      text: `#${m.id}${m.pinned ? ' [pinned]' : ''} ${m.title ?? ''}${tagSuffix(m.tags)}\n${m.content}`,
    };
  },
  'llm_memory.update': (ctx, a) =>
    memorySet(ctx, a.id, { content: a.content, title: a.title, tags: a.tags, priority: a.priority }, 'updated'),
  'llm_memory.delete': (ctx, a) => memorySet(ctx, a.id, { archivedAt: now() }, 'archived'),
  'llm_memory.pin': (ctx, a) => memorySet(ctx, a.id, { pinned: true }, 'pinned'),
  'llm_memory.unpin': (ctx, a) => memorySet(ctx, a.id, { pinned: false }, 'unpinned'),
};

// --- abstracts ------------------------------------------------------------------------------------

const sourceTables = {
  responses: llmRecentResponses,
  diary: diaryEntries,
  concepts,
  links,
  abstracts,
} as const;

/** Every source id must be one of this agent's rows; returns the tick span of the responses. */
async function checkSources(
  tx: Tx,
  agentId: string,
  sources: AbstractSources,
): Promise<{ tickFrom?: number; tickTo?: number }> {
  const problems: string[] = [];
  for (const [kind, table] of Object.entries(sourceTables) as Array<
    [keyof AbstractSources, (typeof sourceTables)[keyof typeof sourceTables]]
  >) {
    const wanted = [...new Set(sources[kind] ?? [])];
    if (!wanted.length) continue;
    const found = await tx
      .select({ id: table.id })
      .from(table)
      .where(and(eq(table.agentId, agentId), inArray(table.id, wanted)));
    const have = new Set(found.map((r) => r.id));
    const missing = wanted.filter((i) => !have.has(i));
    if (missing.length) problems.push(`sources.${kind}: no #${missing.slice(0, 5).join(', #')}`);
  }
  if (problems.length) throw new CommandError(problems.join('; '));
  if (!sources.responses?.length) return {};
  const [span] = await tx
    .select({
      from: sql<number>`min(${llmRecentResponses.tick})::int`,
      to: sql<number>`max(${llmRecentResponses.tick})::int`,
    })
    .from(llmRecentResponses)
    .where(and(eq(llmRecentResponses.agentId, agentId), inArray(llmRecentResponses.id, sources.responses)));
  return { tickFrom: span?.from, tickTo: span?.to };
}

function mergeSources(a: AbstractSources, b: AbstractSources): AbstractSources {
  const out: AbstractSources = { ...a };
  for (const k of Object.keys(sourceTables) as Array<keyof AbstractSources>) {
    if (b[k]?.length) out[k] = [...new Set([...(a[k] ?? []), ...b[k]])];
  }
  return out;
}

// A fixed order: jsonb does not keep the key order the sources were written in.
const renderSources = (s: AbstractSources) =>
  (Object.keys(sourceTables) as Array<keyof AbstractSources>)
    .filter((k) => s[k]?.length)
    .map((k) => `${k} #${s[k]!.join(', #')}`)
    .join('; ');

export const abstractHandlers: HandlerMap<FamilyTypes<'abstracts'>> = {
  async 'abstracts.create'({ tx, agentId, tick }, a) {
    const span = await checkSources(tx, agentId, a.sources);
    const [r] = await tx
      .insert(abstracts)
      .values({
        agentId,
        title: a.title,
        summary: a.summary,
        tags: a.tags ?? [],
        sources: a.sources,
        auto: false,
        trigger: 'command',
        tickFrom: span.tickFrom ?? tick,
        tickTo: span.tickTo ?? tick,
      })
      .returning({ id: abstracts.id });
    return { message: `abstract #${r!.id} created from ${renderSources(a.sources)}` };
  },
  async 'abstracts.extend'({ tx, agentId, tick }, a) {
    const [cur] = await tx
      .select()
      .from(abstracts)
      .where(and(eq(abstracts.agentId, agentId), isNull(abstracts.archivedAt), eq(abstracts.id, a.id)));
    if (!cur) notFound('abstract', a.id);
    const span = a.sources ? await checkSources(tx, agentId, a.sources) : {};
    let summary = a.summary ?? cur.summary;
    if (a.append) summary = `${summary}\n\n${a.append}`;
    await tx
      .update(abstracts)
      .set({
        summary,
        sources: a.sources ? mergeSources(cur.sources, a.sources) : cur.sources,
        tags: a.tags ? [...new Set([...cur.tags, ...a.tags])] : cur.tags,
        extensions: cur.extensions + 1,
        tickTo: Math.max(cur.tickTo ?? 0, span.tickTo ?? tick),
      })
      .where(eq(abstracts.id, a.id));
    return { message: `abstract #${a.id} extended (${cur.extensions + 1} extensions)` };
  },
  async 'abstracts.list'({ tx, agentId }, a) {
    const rows = await tx
      .select()
      .from(abstracts)
      .where(
        and(
          eq(abstracts.agentId, agentId),
          isNull(abstracts.archivedAt),
          a.tag ? arrayContains(abstracts.tags, [a.tag]) : undefined,
        ),
      )
      .orderBy(desc(abstracts.id))
      .limit(a.limit ?? 10);
    return listResult(
      'abstracts',
      rows.map(
        (r) =>
          `#${r.id} ${oneLine(r.title, 100)}${tagSuffix(r.tags)} (ticks ${r.tickFrom ?? '?'}–${r.tickTo ?? '?'}) — ${oneLine(r.summary, 140)}`,
      ),
    );
  },
  async 'abstracts.read'({ tx, agentId }, a) {
    const [r] = await tx
      .select()
      .from(abstracts)
      .where(and(eq(abstracts.agentId, agentId), isNull(abstracts.archivedAt), eq(abstracts.id, a.id)));
    if (!r) notFound('abstract', a.id);
    return {
      message: `abstract #${r.id}: ${oneLine(r.title, 100)}`,
      text: clipText(
        `#${r.id} ${r.title}${tagSuffix(r.tags)} (ticks ${r.tickFrom ?? '?'}–${r.tickTo ?? '?'}; sources: ${renderSources(r.sources) || 'none'})\n${r.summary}`,
        maxResultText,
      ),
    };
  },
};

// --- memory: restore ------------------------------------------------------------------------------

export const memoryHandlers: HandlerMap<FamilyTypes<'memory'>> = {
  async 'memory.restore'({ tx, agentId }, a) {
    const table = kindTables[a.kind];
    const r = await restoreArchived(tx, { agentId, table, id: a.id });
    if (!r.restored)
      throw new CommandError(
        r.why === 'not archived' ? `${a.kind} #${a.id} is not archived` : `${a.kind} #${a.id} not found`,
      );
    return {
      message: `${a.kind} #${a.id} restored${r.also?.length ? ` (with ${r.also.join(', ')})` : ''}`,
    };
  },
  'memory.search': (ctx, a) =>
    searchMemory(ctx, {
      query: a.query,
      kinds: a.kinds ?? searchKinds,
      limit: a.limit ?? 10,
      archived: a.archived ?? false,
    }),
};

// --- search: by words and by meaning -------------------------------------------------------------

export type SearchKind = (typeof searchKinds)[number];

/** Where each kind's rows are and the SQL of what is searched (alias `t`): constants, never input. */
const searchSources: Record<SearchKind, { table: string; title: string; body: string; pinned: string }> = {
  diary: { table: 'diary_entries', title: 't.title', body: 't.content', pinned: 't.pinned' },
  note: { table: 'llm_memory', title: `coalesce(t.title, '')`, body: 't.content', pinned: 't.pinned' },
  reply: { table: 'llm_recent_responses', title: `'tick ' || t.tick`, body: 't.content', pinned: 'false' },
  concept: { table: 'concepts', title: 't.name', body: `coalesce(t.description, '')`, pinned: 'false' },
  abstract: { table: 'abstracts', title: 't.title', body: 't.summary', pinned: 'false' },
};

/** What the agent calls each kind in a result, and how a list of them is named. */
const kindLabel: Record<SearchKind, string> = {
  diary: 'diary',
  note: 'notebook',
  reply: 'reply',
  concept: 'concept',
  abstract: 'abstract',
};

interface Found {
  kind: SearchKind;
  id: number;
  title: string;
  body: string;
  tags: string[];
  pinned: boolean;
  archived: boolean;
}

/** What a search needs of a command's context (a person's search, `mindloop memory search`, reads as a task loop: no use counted). */
export type SearchContext = Pick<HandlerContext, 'tx' | 'agentId' | 'mode' | 'embedders' | 'searchIndexes'>;

export interface SearchArgs {
  query: string;
  kinds: readonly SearchKind[];
  limit: number;
  archived: boolean;
  /** Diary only: every one of these tags. */
  tags?: readonly string[];
}

/** Reciprocal-rank fusion's constant: a row's score is the sum of 1 / (k + rank) over the lists it is in. */
const rrfK = 60;
/** Meaning hits below this cosine are not memories of the query. */
const minMeaningScore = 0.3;

const wordsWhere = (src: (typeof searchSources)[SearchKind], query: string) => {
  const doc = sql.raw(`coalesce(${src.title}, '') || ' ' || coalesce(${src.body}, '')`);
  return sql`(${sql.raw(src.title)} ilike ${likePattern(query)} or ${sql.raw(src.body)} ilike ${likePattern(query)}
    or to_tsvector('simple', ${doc}) @@ plainto_tsquery('simple', ${query}))`;
};

const filters = (a: SearchArgs, kind: SearchKind) =>
  sql.join(
    [
      a.archived ? sql`true` : sql`t.archived_at is null`,
      kind === 'diary' && a.tags?.length ? sql`t.tags @> ${sql.param([...a.tags])}::text[]` : sql`true`,
    ],
    sql` and `,
  );

/** Rows whose words match: the whole query as a substring first, then all its words (any order), newest first. */
async function byWords(tx: Tx, agentId: string, a: SearchArgs, kind: SearchKind, n: number): Promise<number[]> {
  const src = searchSources[kind];
  const doc = sql.raw(`coalesce(${src.title}, '') || ' ' || coalesce(${src.body}, '')`);
  const r = await tx.execute<{ id: string | number }>(sql`
    select t.id from ${sql.raw(src.table)} t
    where t.agent_id = ${agentId} and ${filters(a, kind)} and ${wordsWhere(src, a.query)}
    order by (${sql.raw(src.body)} ilike ${likePattern(a.query)} or ${sql.raw(src.title)} ilike ${likePattern(a.query)}) desc,
      ts_rank(to_tsvector('simple', ${doc}), plainto_tsquery('simple', ${a.query})) desc, t.id desc
    limit ${n}`);
  return r.rows.map((x) => Number(x.id));
}

async function loadFound(tx: Tx, agentId: string, a: SearchArgs, kind: SearchKind, ids: number[]): Promise<Found[]> {
  if (!ids.length) return [];
  const src = searchSources[kind];
  const r = await tx.execute<{
    id: string | number;
    title: string | null;
    body: string | null;
    tags: string[] | null;
    pinned: boolean;
    archived: boolean;
  }>(sql`
    select t.id, ${sql.raw(src.title)} as title, ${sql.raw(src.body)} as body, t.tags, ${sql.raw(src.pinned)} as pinned,
      t.archived_at is not null as archived
    from ${sql.raw(src.table)} t
    where t.agent_id = ${agentId} and ${anyOf(sql`t.id`, ids)} and ${filters(a, kind)}`);
  return r.rows.map((x) => ({
    kind,
    id: Number(x.id),
    title: x.title ?? '',
    body: x.body ?? '',
    tags: x.tags ?? [],
    pinned: x.pinned,
    archived: x.archived,
  }));
}

type Meaning =
  { ok: true; hits: Array<{ kind: SearchKind; rowId: number; score: number }> } | { ok: false; why: string };

/** The search by meaning, or why there is none (no embedder, semantic memory off, the embedder failed). */
async function byMeaning(ctx: SearchContext, a: SearchArgs, n: number): Promise<Meaning> {
  if (!ctx.embedders) return { ok: false, why: 'no embedder here' };
  // Through the command's own transaction: one connection, never a second one waiting on it
  // (PGlite serves every connection from one session).
  const db = ctx.tx as unknown as Db;
  try {
    const choice = await ctx.embedders.forAgent(db, ctx.agentId);
    if (!choice.ok) return { ok: false, why: choice.reason };
    const hits = await searchByMeaning(db, {
      agentId: ctx.agentId,
      kinds: a.kinds,
      embedder: choice.embedder,
      query: a.query,
      k: n,
      minScore: minMeaningScore,
      includeArchived: a.archived,
      ...(ctx.searchIndexes ? { indexOwner: ctx.searchIndexes } : {}),
    });
    if (!hits) return { ok: false, why: 'no embedder' };
    return {
      ok: true,
      hits: hits.filter((h): h is typeof h & { kind: SearchKind } => a.kinds.includes(h.kind as SearchKind)),
    };
  } catch (err) {
    return {
      ok: false,
      why: `the embedder failed (${clipText(err instanceof Error ? err.message : String(err), 120)})`,
    };
  }
}

/**
 * Hybrid search over the agent's memory: by words (the query as a substring, or all its words)
 * and by meaning (the agent's embedder, memory-index.ts), merged by reciprocal-rank fusion. Live
 * rows only unless `archived`; an archived row is marked so, with how to restore it. Every live
 * row shown counts as a use. Without an embedder the result says it compared words only.
 */
export async function searchMemory(ctx: SearchContext, a: SearchArgs): Promise<HandlerResult> {
  const { tx, agentId } = ctx;
  const pool = Math.min(200, a.limit * 3);
  const words = new Map<string, number>();
  for (const kind of a.kinds)
    (await byWords(tx, agentId, a, kind, pool)).forEach((id, i) => words.set(`${kind}:${id}`, i));
  const meaning = await byMeaning(ctx, a, pool);
  const scores = new Map<string, { kind: SearchKind; id: number; rrf: number; words: boolean; cosine?: number }>();
  // Word hits of several kinds are ranked within their kind: a rank is a rank in its own list.
  for (const [key, rank] of words) {
    const [kind, id] = key.split(':') as [SearchKind, string];
    scores.set(key, { kind, id: Number(id), rrf: 1 / (rrfK + rank + 1), words: true });
  }
  if (meaning.ok)
    meaning.hits.forEach((h, i) => {
      const key = `${h.kind}:${h.rowId}`;
      const cur = scores.get(key) ?? { kind: h.kind, id: h.rowId, rrf: 0, words: false };
      scores.set(key, { ...cur, rrf: cur.rrf + 1 / (rrfK + i + 1), cosine: h.score });
    });
  const ranked = [...scores.values()].sort((x, y) => y.rrf - x.rrf || (y.cosine ?? 0) - (x.cosine ?? 0) || y.id - x.id);
  const found = new Map<string, Found>();
  for (const kind of a.kinds) {
    const ids = ranked.filter((r) => r.kind === kind).map((r) => r.id);
    for (const f of await loadFound(tx, agentId, a, kind, ids)) found.set(`${kind}:${f.id}`, f);
  }
  const shown = ranked.filter((r) => found.has(`${r.kind}:${r.id}`)).slice(0, a.limit);
  const oneKind = a.kinds.length === 1 && a.kinds[0] === 'diary';
  const lines = shown.map((r) => {
    const f = found.get(`${r.kind}:${r.id}`)!;
    const how = r.cosine !== undefined ? ` [${r.words ? 'words, ' : ''}meaning ${r.cosine.toFixed(2)}]` : '';
    const archived = f.archived ? ` [archived: memory.restore {kind: ${r.kind}, id: ${r.id}}]` : '';
    const head = `${oneKind ? '' : `${kindLabel[r.kind]} `}#${r.id}${f.pinned ? ' [pinned]' : ''}${archived}`;
    return `${head} ${oneLine(f.title, 100)}${tagSuffix(f.tags)} — ${snippet(f.body, a.query)}${how}`;
  });
  const touchable: Record<string, typeof diaryEntries | typeof llmMemory | typeof concepts> = {
    diary: diaryEntries,
    note: llmMemory,
    concept: concepts,
  };
  for (const [kind, table] of Object.entries(touchable))
    await touch(
      ctx,
      table,
      shown.filter((r) => r.kind === kind && !found.get(`${kind}:${r.id}`)!.archived).map((r) => r.id),
    );
  const what = oneKind ? 'diary entries' : 'memories';
  const q = clipText(a.query, 40);
  const note = meaning.ok ? '' : `(by words only: ${oneLine(meaning.why, 140)})`;
  const body = lines.length ? lines.join('\n') : `(no ${what} matching '${q}')`;
  return {
    message: `${lines.length} ${what} matching '${q}'${meaning.ok ? '' : ' (by words only)'}`,
    text: clipText(note ? `${body}\n${note}` : body, maxResultText),
  };
}
