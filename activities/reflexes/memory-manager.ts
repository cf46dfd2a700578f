import { and, eq, inArray, isNull, lt, sql } from 'drizzle-orm';
import { emotionIntensity } from '../../core/emotions.js';
import { defaultMemoryPolicy, planMemory, type MemoryPolicy } from '../../core/memory-manager.js';
import type { Db } from '../../db/client.js';
import { goals, llmRecentResponses, processLog } from '../../db/schema/index.js';

/** The memory manager over the short tier: archive by retention and LRU, log every decision. */
export async function manageMemory(
  tx: Db,
  agentId: string,
  tick: number,
  cfg: Record<string, unknown>,
): Promise<string[]> {
  const num = (v: unknown, d: number) => (typeof v === 'number' && Number.isFinite(v) ? v : d);
  const policy: MemoryPolicy = {
    noveltyThreshold: num(cfg.novelty_threshold, defaultMemoryPolicy.noveltyThreshold),
    lruLimit: num(cfg.lru_limit, defaultMemoryPolicy.lruLimit),
    emotionWeight: num(cfg.emotion_weight, defaultMemoryPolicy.emotionWeight),
    goalFocus: num(cfg.goal_focus, defaultMemoryPolicy.goalFocus),
    diversityBoost: num(cfg.diversity_boost, defaultMemoryPolicy.diversityBoost),
  };
  // One after another: `tx` is a transaction, one connection.
  const rows = await tx
    .select({
      id: llmRecentResponses.id,
      tick: llmRecentResponses.tick,
      lastUsedTick: llmRecentResponses.lastUsedTick,
      novelty: llmRecentResponses.novelty,
      emotions: llmRecentResponses.emotions,
      tags: llmRecentResponses.tags,
    })
    .from(llmRecentResponses)
    // The newest ticks are still the context's; only evaluated rows are judged.
    .where(
      and(
        eq(llmRecentResponses.agentId, agentId),
        isNull(llmRecentResponses.archivedAt),
        lt(llmRecentResponses.tick, tick - 5),
        sql`${llmRecentResponses.novelty} is not null`,
      ),
    );
  const goalRows = await tx
    .select({ tags: goals.tags })
    .from(goals)
    .where(and(eq(goals.agentId, agentId), eq(goals.status, 'active')));
  // LRU: a reply was last used when a context last showed it (the think activity sets
  // last_used_tick), or when it was written if no context has shown it since.
  const plan = planMemory(
    rows.map((r) => ({
      id: r.id,
      novelty: r.novelty,
      emotion: emotionIntensity(r.emotions),
      tags: r.tags,
      pinned: false,
      lastUsed: Math.max(r.tick, r.lastUsedTick ?? 0),
    })),
    goalRows.flatMap((g) => g.tags),
    policy,
  );
  const archive = plan.filter((d) => d.action === 'archive');
  if (archive.length)
    await tx
      .update(llmRecentResponses)
      .set({ archivedAt: new Date() })
      .where(
        inArray(
          llmRecentResponses.id,
          archive.map((d) => d.id),
        ),
      );
  const now = new Date();
  const logRows = plan.map((d) => ({
    agentId,
    processId: 'memory-manager',
    kind: 'memory_manager',
    name: `${d.action} llm_recent_responses #${d.id}`,
    status: 'close' as const,
    closedAt: now,
    tick,
    message: `${d.action} llm_recent_responses #${d.id}: ${d.reason} (retention ${d.retention})`,
    payload: {
      table: 'llm_recent_responses',
      id: d.id,
      action: d.action,
      reason: d.reason,
      retention: d.retention,
      policy,
    },
  }));
  for (let i = 0; i < logRows.length; i += 500) await tx.insert(processLog).values(logRows.slice(i, i + 500));
  return [`memory_manager: ${archive.length} archived, ${plan.length - archive.length} kept`];
}
