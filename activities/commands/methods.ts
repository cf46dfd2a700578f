/**
 * How the agent steers its own thinking: thinking methods (one active at a time; its prompt is
 * in every context while it is), break-loop strategies applied on demand (through the same
 * `applyStrategy` the automatic anti-stagnation uses, and measured the same way), and the tag
 * counts across its memory.
 */
import { and, asc, eq, gte, isNotNull, isNull, sql } from 'drizzle-orm';
import { defaultStagnationPolicy, defaultStrategies, type StrategyAction } from '../../core/stagnation.js';
import type { LoopEffect } from '../../core/loop-types.js';
import type { Db } from '../../db/client.js';
import {
  antiStagnationMetrics,
  concepts,
  diaryEntries,
  goals,
  llmMemory,
  llmRecentResponses,
  notes,
  stagnationStrategies,
  tasks,
  thinkingMethods,
} from '../../db/schema/index.js';
import { applyStrategy } from '../reflexes/stagnation.js';
import { oneLine } from '../../core/sanitize.js';
import { CommandError, listResult, tagSuffix, type FamilyTypes, type HandlerMap, type Tx } from './shared.js';

const names = (rows: ReadonlyArray<{ name: string }>) => (rows.length ? rows.map((r) => r.name).join(', ') : 'none');

export const thinkingMethodHandlers: HandlerMap<FamilyTypes<'thinking_methods'>> = {
  async 'thinking_methods.list'({ tx, agentId }) {
    const rows = await tx
      .select()
      .from(thinkingMethods)
      .where(eq(thinkingMethods.agentId, agentId))
      .orderBy(asc(thinkingMethods.name));
    return listResult(
      'thinking methods',
      rows.map(
        (m) =>
          `${m.name}${m.active ? ' [active]' : ''}${m.enabled ? '' : ' [disabled]'} (used ${m.uses}×)${tagSuffix(m.tags)}${m.description ? ` ${oneLine(m.description, 120)} —` : ''} prompt: ${oneLine(m.prompt, 160)}`,
      ),
    );
  },

  async 'thinking_methods.add'({ tx, agentId }, a) {
    const [row] = await tx
      .insert(thinkingMethods)
      .values({ agentId, name: a.name, prompt: a.prompt, description: a.description ?? null, tags: a.tags ?? [] })
      .onConflictDoNothing()
      .returning({ id: thinkingMethods.id });
    if (!row) throw new CommandError(`name: a thinking method '${a.name}' exists already`);
    return { message: `thinking method '${a.name}' added (#${row.id}); thinking_methods.use makes it active` };
  },

  async 'thinking_methods.use'({ tx, agentId }, a) {
    const rows = await tx
      .select()
      .from(thinkingMethods)
      .where(eq(thinkingMethods.agentId, agentId))
      .orderBy(asc(thinkingMethods.name));
    const method = rows.find((m) => m.name === a.name);
    if (!method) throw new CommandError(`name: no thinking method '${a.name}' (yours: ${names(rows)})`);
    if (!method.enabled) throw new CommandError(`name: thinking method '${a.name}' is disabled`);
    if (method.active) return { message: `thinking method '${a.name}' is already active` };
    // One active method at a time: the context carries one instruction, not a pile of them.
    await tx
      .update(thinkingMethods)
      .set({ active: false, updatedAt: new Date() })
      .where(and(eq(thinkingMethods.agentId, agentId), eq(thinkingMethods.active, true)));
    await tx
      .update(thinkingMethods)
      .set({ active: true, uses: sql`${thinkingMethods.uses} + 1`, updatedAt: new Date() })
      .where(eq(thinkingMethods.id, method.id));
    return { message: `thinking method '${a.name}' is active from your next tick (thinking_methods.stop ends it)` };
  },

  async 'thinking_methods.stop'({ tx, agentId }) {
    const stopped = await tx
      .update(thinkingMethods)
      .set({ active: false, updatedAt: new Date() })
      .where(and(eq(thinkingMethods.agentId, agentId), eq(thinkingMethods.active, true)))
      .returning({ name: thinkingMethods.name });
    if (!stopped.length) throw new CommandError('no thinking method is active');
    return { message: `thinking method '${stopped.map((s) => s.name).join(', ')}' stopped` };
  },
};

/**
 * The agent's strategies. The built-in ones it lacks are seeded by name, as the automatic
 * anti-stagnation does: a strategy it has keeps its record.
 */
async function strategiesOf(tx: Tx, agentId: string) {
  const rows = await tx
    .select()
    .from(stagnationStrategies)
    .where(eq(stagnationStrategies.agentId, agentId))
    .orderBy(asc(stagnationStrategies.id));
  const have = new Set(rows.map((s) => s.name));
  const missing = defaultStrategies.filter((s) => !have.has(s.name));
  if (missing.length === 0) return rows;
  const added = await tx
    .insert(stagnationStrategies)
    .values(
      missing.map((s) => ({
        agentId,
        name: s.name,
        class: s.class,
        cost: s.cost,
        description: s.description,
        params: s.params,
      })),
    )
    .onConflictDoNothing()
    .returning();
  return [...rows, ...added];
}

/**
 * A strategy applied at tick p is measured by the reflexes of tick p + evaluateAfter, which run
 * before that tick's commands: until then its metrics row is open and another one must wait.
 */
async function openMeasurement(tx: Tx, agentId: string, tick: number) {
  const [row] = await tx
    .select({ tick: antiStagnationMetrics.tick, action: antiStagnationMetrics.action })
    .from(antiStagnationMetrics)
    .where(
      and(
        eq(antiStagnationMetrics.agentId, agentId),
        isNotNull(antiStagnationMetrics.strategyId),
        isNull(antiStagnationMetrics.evaluatedAt),
        gte(antiStagnationMetrics.tick, tick - (defaultStagnationPolicy.evaluateAfter - 1)),
      ),
    )
    .limit(1);
  return row;
}

export const stagnationStrategyHandlers: HandlerMap<FamilyTypes<'stagnation_strategies'>> = {
  async 'stagnation_strategies.list'({ tx, agentId }, a) {
    // A read (task loops may list too): the built-in strategies not seeded yet are shown, not written.
    const rows = await tx
      .select()
      .from(stagnationStrategies)
      .where(eq(stagnationStrategies.agentId, agentId))
      .orderBy(asc(stagnationStrategies.id));
    const have = new Set(rows.map((s) => s.name));
    const all = [
      ...rows,
      ...defaultStrategies
        .filter((s) => !have.has(s.name))
        .map((s) => ({ ...s, enabled: true, uses: 0, meanEffect: 0 })),
    ];
    return listResult(
      'stagnation strategies',
      all
        .filter((s) => a.class === undefined || s.class === a.class)
        .map((s) => {
          const effect =
            s.uses === 0
              ? 'not measured'
              : `mean effect ${s.meanEffect >= 0 ? '+' : ''}${Math.round(s.meanEffect * 10) / 10}`;
          return `${s.name} (${s.class}, action ${String(s.params.action)}, cost ${s.cost})${s.enabled ? '' : ' [disabled]'} used ${s.uses}×, ${effect}${s.description ? ` — ${oneLine(s.description, 120)}` : ''}`;
        }),
    );
  },

  async 'stagnation_strategies.add'({ tx, agentId }, a) {
    await strategiesOf(tx, agentId);
    const params: { action: StrategyAction; ticks?: number } = {
      action: a.action,
      ...(a.ticks !== undefined ? { ticks: a.ticks } : {}),
    };
    const [row] = await tx
      .insert(stagnationStrategies)
      .values({ agentId, name: a.name, class: a.class, cost: a.cost ?? 1, description: a.description ?? null, params })
      .onConflictDoNothing()
      .returning({ id: stagnationStrategies.id });
    if (!row) throw new CommandError(`name: a strategy '${a.name}' exists already`);
    return { message: `strategy '${a.name}' added (#${row.id}, ${a.class}, action ${a.action})` };
  },

  async 'stagnation_strategies.use'({ tx, agentId, tick, logCmdId, workflowId }, a) {
    const all = await strategiesOf(tx, agentId);
    const s = all.find((x) => x.name === a.name);
    if (!s) throw new CommandError(`name: no strategy '${a.name}' (yours: ${names(all)})`);
    if (!s.enabled) throw new CommandError(`name: strategy '${a.name}' is disabled`);
    const open = await openMeasurement(tx, agentId, tick);
    if (open)
      throw new CommandError(
        `name: '${open.action}' (applied at tick ${open.tick}) is still being measured; use a strategy again from tick ${open.tick + defaultStagnationPolicy.evaluateAfter + 1}`,
      );
    // This tick's reply as the reflexes recorded it (they ran before the commands): the novelty
    // the effect is measured against, the context mode and the model in use.
    const [reply] = await tx
      .select({
        novelty: llmRecentResponses.novelty,
        contextMode: llmRecentResponses.contextMode,
        llmRegistryId: llmRecentResponses.llmRegistryId,
      })
      .from(llmRecentResponses)
      .where(and(eq(llmRecentResponses.agentId, agentId), eq(llmRecentResponses.tick, tick)));
    const params = s.params as { action?: StrategyAction; ticks?: number };
    const applied = await applyStrategy(
      tx as unknown as Db,
      { agentId, tick, workflowId: workflowId ?? `agent/${agentId}`, contextMode: reply?.contextMode ?? 'standard' },
      params,
      reply?.llmRegistryId ?? null,
    );
    if (applied.effects.length === 0 && !applied.focus && applied.detail.startsWith('unknown strategy action')) {
      throw new CommandError(`name: '${s.name}' cannot be applied: ${applied.detail}`);
    }
    await tx
      .update(stagnationStrategies)
      .set({ uses: sql`${stagnationStrategies.uses} + 1`, lastUsedAt: new Date() })
      .where(eq(stagnationStrategies.id, s.id));
    const noveltyBefore = reply?.novelty ?? null;
    const [m] = await tx
      .insert(antiStagnationMetrics)
      .values({
        agentId,
        tick,
        diagnosis: null,
        action: s.name,
        strategyId: s.id,
        noveltyBefore,
        params: { source: 'command', cmdId: logCmdId, detail: applied.detail },
      })
      .returning({ id: antiStagnationMetrics.id });
    const measure: LoopEffect = {
      kind: 'measureStrategy',
      strategyId: s.id,
      metricId: m!.id,
      tick,
      noveltyBefore,
      ...(applied.focus ? { focus: applied.focus } : {}),
    };
    const when =
      noveltyBefore === null
        ? 'not measured (this tick has no novelty score)'
        : `its effect on novelty (now ${noveltyBefore}) is measured at tick ${tick + defaultStagnationPolicy.evaluateAfter}`;
    return {
      message: `strategy '${s.name}' applied: ${applied.detail}; ${when}`,
      effects: [...applied.effects, measure],
    };
  },
};

/** The tables `tags.stats` counts, each with the rows that count (not archived, not hidden). */
function taggedRows(agentId: string) {
  return sql`
    select unnest(${diaryEntries.tags}) as tag, 'diary' as source from ${diaryEntries} where ${diaryEntries.agentId} = ${agentId} and ${diaryEntries.archivedAt} is null
    union all select unnest(${concepts.tags}), 'concepts' from ${concepts} where ${concepts.agentId} = ${agentId} and ${concepts.archivedAt} is null
    union all select unnest(${llmMemory.tags}), 'notebook' from ${llmMemory} where ${llmMemory.agentId} = ${agentId} and ${llmMemory.archivedAt} is null
    union all select unnest(${notes.tags}), 'notes' from ${notes} where ${notes.agentId} = ${agentId} and ${notes.hidden} = false
    union all select unnest(${llmRecentResponses.tags}), 'replies' from ${llmRecentResponses} where ${llmRecentResponses.agentId} = ${agentId} and ${llmRecentResponses.archivedAt} is null
    union all select unnest(${goals.tags}), 'goals' from ${goals} where ${goals.agentId} = ${agentId}
    union all select unnest(${tasks.tags}), 'tasks' from ${tasks} where ${tasks.agentId} = ${agentId}`;
}

export const tagHandlers: HandlerMap<'tags.stats'> = {
  async 'tags.stats'({ tx, agentId }, a) {
    const tagFilter = a.tag !== undefined ? sql`where tag = ${a.tag}` : sql``;
    const res = await tx.execute<{ tag: string; source: string; n: number }>(
      sql`select tag, source, count(*)::int as n from (${taggedRows(agentId)}) t ${tagFilter} group by tag, source`,
    );
    const byTag = new Map<string, { total: number; sources: Array<[string, number]> }>();
    for (const r of res.rows) {
      const t = byTag.get(r.tag) ?? { total: 0, sources: [] };
      t.total += r.n;
      t.sources.push([r.source, r.n]);
      byTag.set(r.tag, t);
    }
    const sorted = [...byTag.entries()].sort((x, y) => y[1].total - x[1].total || x[0].localeCompare(y[0]));
    const shown = sorted.slice(0, a.limit ?? 20);
    const lines = shown.map(
      ([tag, t]) =>
        `${tag}: ${t.total} (${t.sources
          .sort((x, y) => y[1] - x[1] || x[0].localeCompare(y[0]))
          .map(([s, n]) => `${s} ${n}`)
          .join(', ')})`,
    );
    if (a.tag !== undefined)
      return {
        message: `tag '${a.tag}' is used ${shown[0]?.[1].total ?? 0} times`,
        text: lines.length ? lines.join('\n') : `(tag '${a.tag}' is not used)`,
      };
    return {
      message: `${sorted.length} tags${sorted.length > shown.length ? `, the ${shown.length} most used shown` : ''}`,
      text: lines.length ? lines.join('\n') : '(no tags)',
    };
  },
};
