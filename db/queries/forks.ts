/**
 * Fork records and the rows a fork reads and writes besides its state copy
 * (db/queries/fork-copy.ts): the record, the model cost a copy has spent, a patch written to an
 * agent, the verdict, and the copy's removal. Plain table functions: the fork activities, the
 * CLI and the benchmarks share them. Each takes the pool's handle or a transaction.
 */
import { and, desc, eq, isNull, sql } from 'drizzle-orm';
import type { ForkPatch, VerdictDecision } from '../../core/fork.js';
import {
  abstracts,
  agentConfig,
  agents,
  forks,
  forkToolRegistry,
  llmCalls,
  systemPrompts,
  toolRegistry,
  verdicts,
  type Fork,
  type ForkArtifact,
} from '../schema/index.js';
import type { Queryable } from './abstracts.js';

/** `forks.usage` also holds bookkeeping (rows, spawnMs, baselineCostUsd, patchApplied). */
export const forkUsageOf = (row: { usage: unknown }) => row.usage as Record<string, unknown>;

/** Fork statuses after which the fork runs no more. */
const terminalForkStatuses: readonly string[] = ['completed', 'budget_exceeded', 'failed', 'cancelled'];

/** The fork's record, or undefined. */
export async function forkById(q: Queryable, forkId: string): Promise<Fork | undefined> {
  const [row] = await q.select().from(forks).where(eq(forks.id, forkId));
  return row;
}

/** Model cost billed to an agent id so far (all its llm_calls). */
export async function agentCostUsd(q: Queryable, agentId: string): Promise<number> {
  const [r] = await q
    .select({ usd: sql<string>`coalesce(sum(${llmCalls.costUsd}), 0)` })
    .from(llmCalls)
    .where(eq(llmCalls.agentId, agentId));
  return Number(r?.usd ?? 0);
}

/** Model cost a fork's copy has spent: its llm_calls minus the copied parent's (`baseline`). */
export async function forkSpentUsd(q: Queryable, forkAgentId: string, baseline: number): Promise<number> {
  return Math.max(0, (await agentCostUsd(q, forkAgentId)) - baseline);
}

/** One `agent_config` value (undefined when unset). */
export async function agentConfigValue(q: Queryable, agentId: string, key: string): Promise<unknown> {
  const [r] = await q
    .select({ value: agentConfig.value })
    .from(agentConfig)
    .where(and(eq(agentConfig.agentId, agentId), eq(agentConfig.key, key)));
  return r?.value;
}

/** All of an agent's `agent_config`, as an object. */
export async function agentConfigMap(q: Queryable, agentId: string): Promise<Record<string, unknown>> {
  const rows = await q
    .select({ key: agentConfig.key, value: agentConfig.value })
    .from(agentConfig)
    .where(eq(agentConfig.agentId, agentId));
  return Object.fromEntries(rows.map((c) => [c.key, c.value]));
}

/** The agent's active system prompt of a kind (the highest version), or undefined. */
export async function activeSystemPrompt(
  q: Queryable,
  agentId: string,
  kind: (typeof systemPrompts.$inferSelect)['kind'] = 'full',
): Promise<{ content: string; version: number } | undefined> {
  const [prompt] = await q
    .select({ content: systemPrompts.content, version: systemPrompts.version })
    .from(systemPrompts)
    .where(and(eq(systemPrompts.agentId, agentId), eq(systemPrompts.kind, kind), eq(systemPrompts.active, true)))
    .orderBy(desc(systemPrompts.version))
    .limit(1);
  return prompt;
}

/** The agent's newest live abstracts (id, title, summary), newest first. */
export async function recentDigests(
  q: Queryable,
  agentId: string,
  limit: number,
): Promise<Array<{ id: number; title: string; summary: string }>> {
  return q
    .select({ id: abstracts.id, title: abstracts.title, summary: abstracts.summary })
    .from(abstracts)
    .where(and(eq(abstracts.agentId, agentId), isNull(abstracts.archivedAt)))
    .orderBy(desc(abstracts.id))
    .limit(limit);
}

/** Completion tokens of the agent's recorded reply (purpose `think`) at a tick, or undefined. */
export async function recordedThinkTokens(q: Queryable, agentId: string, tick: number): Promise<number | undefined> {
  const [recorded] = await q
    .select({ completionTokens: llmCalls.completionTokens })
    .from(llmCalls)
    .where(
      and(eq(llmCalls.agentId, agentId), eq(llmCalls.tick, tick), eq(llmCalls.purpose, 'think'), eq(llmCalls.ok, true)),
    )
    .limit(1);
  return recorded?.completionTokens;
}

/**
 * Write `patch` to `agentId` (a fork's copy, or the parent after approval). Idempotent: config
 * and strategy are upserts; a prompt patch adds the next version; a tool patch goes to the
 * agent's copy of the registry only (its code runs only in the sandbox). Returns what it did.
 */
export async function applyPatchToAgent(q: Queryable, agentId: string, patch: ForkPatch, by: string): Promise<string> {
  const setConfig = async (key: string, value: unknown) =>
    q
      .insert(agentConfig)
      .values({ agentId, key, value, description: `set by ${by}` })
      .onConflictDoUpdate({
        target: [agentConfig.agentId, agentConfig.key],
        set: { value, description: `set by ${by}` },
      });
  switch (patch.kind) {
    case 'config':
      for (const [k, v] of Object.entries(patch.values)) await setConfig(k, v);
      return `config ${Object.keys(patch.values).join(', ')}`;
    case 'strategy':
      await setConfig('abstracts_strategy', patch.strategy);
      return `abstracts_strategy = ${patch.strategy}`;
    case 'prompt': {
      const [cur] = await q
        .select({ version: sql<number>`coalesce(max(${systemPrompts.version}), 0)::int` })
        .from(systemPrompts)
        .where(and(eq(systemPrompts.agentId, agentId), eq(systemPrompts.kind, patch.promptKind)));
      const version = (cur?.version ?? 0) + 1;
      await q
        .update(systemPrompts)
        .set({ active: false })
        .where(
          and(
            eq(systemPrompts.agentId, agentId),
            eq(systemPrompts.kind, patch.promptKind),
            eq(systemPrompts.active, true),
          ),
        );
      await q
        .insert(systemPrompts)
        .values({ agentId, kind: patch.promptKind, content: patch.content, version, active: true });
      return `${patch.promptKind} system prompt v${version}`;
    }
    case 'tool': {
      const [cur] = await q
        .select()
        .from(forkToolRegistry)
        .where(and(eq(forkToolRegistry.agentId, agentId), eq(forkToolRegistry.name, patch.tool)));
      const version = (cur?.version ?? 0) + 1;
      await q
        .insert(forkToolRegistry)
        .values({
          agentId,
          name: patch.tool,
          version,
          kind: 'generated',
          status: 'testing',
          implementation: patch.implementation,
          tests: patch.tests,
          patched: true,
        })
        .onConflictDoUpdate({
          target: [forkToolRegistry.agentId, forkToolRegistry.name],
          set: { version, implementation: patch.implementation, tests: patch.tests, status: 'testing', patched: true },
        });
      return `tool ${patch.tool} v${version} in the fork's registry copy (evaluated in the sandbox)`;
    }
  }
}

/**
 * A tool patch approved for the parent: the global registry's tool gets the patch's code as its
 * next version. Returns what it did, or undefined when the tool is not in the registry.
 */
export async function applyToolPatchToRegistry(
  q: Queryable,
  patch: Extract<ForkPatch, { kind: 'tool' }>,
): Promise<string | undefined> {
  const [tool] = await q.select().from(toolRegistry).where(eq(toolRegistry.name, patch.tool));
  if (!tool) return undefined;
  await q
    .update(toolRegistry)
    .set({ implementation: patch.implementation, tests: patch.tests, version: tool.version + 1 })
    .where(eq(toolRegistry.id, tool.id));
  return `tool ${patch.tool} v${tool.version + 1}`;
}

/** Mark the fork's patch applied to its copy and the fork as evaluating (usage.patchApplied). */
export async function markForkPatched(q: Queryable, forkId: string, applied: string): Promise<void> {
  await q
    .update(forks)
    .set({ status: 'evaluating', usage: sql`${forks.usage} || ${JSON.stringify({ patchApplied: applied })}::jsonb` })
    .where(eq(forks.id, forkId));
}

interface ForkVerdictRecord {
  decision: VerdictDecision;
  artifacts: ForkArtifact[];
  status: 'completed' | 'budget_exceeded' | 'failed';
  usage?: Record<string, unknown>;
}

/**
 * Store the fork's verdict (once: a second call keeps the first) and its final status and
 * usage, in one transaction of the caller's. An APPROVE of a fork that audits no other opens
 * the human gate (`pending`). Returns the verdict's id.
 */
export async function recordForkVerdict(q: Queryable, fork: Fork, v: ForkVerdictRecord): Promise<number> {
  const d = v.decision;
  await q
    .insert(verdicts)
    .values({
      agentId: fork.agentId,
      forkId: fork.id,
      verdict: d.verdict,
      confidence: Math.max(0, Math.min(1, d.confidence)),
      patchHash: fork.patchHash,
      evaluationSummary: d.summary,
      caveats: d.caveats,
      artifacts: v.artifacts,
    })
    .onConflictDoNothing({ target: verdicts.forkId });
  await q
    .update(forks)
    .set({
      status: v.status,
      finishedAt: fork.finishedAt ?? new Date(),
      error: v.status === 'completed' ? null : d.summary,
      gate: d.verdict === 'APPROVE' && !fork.auditsForkId ? (fork.gate ?? 'pending') : fork.gate,
      usage: sql`${forks.usage} || ${JSON.stringify(v.usage ?? {})}::jsonb`,
    })
    .where(eq(forks.id, fork.id));
  const [row] = await q.select({ id: verdicts.id }).from(verdicts).where(eq(verdicts.forkId, fork.id));
  return row!.id;
}

/**
 * Destroy everything of the fork but its record, verdict and artifacts: the copy's agent row
 * and (by cascade) all its rows. A fork not yet in a final status gets `status`, when given.
 * Idempotent.
 */
export async function removeForkCopy(
  q: Queryable,
  forkId: string,
  forkAgentId: string,
  status?: 'cancelled' | 'failed',
): Promise<{ removedAgent: boolean }> {
  const removed = await q
    .delete(agents)
    .where(and(eq(agents.id, forkAgentId), eq(agents.kind, 'fork')))
    .returning({ id: agents.id });
  const [row] = await q
    .select({ status: forks.status, cleanedAt: forks.cleanedAt })
    .from(forks)
    .where(eq(forks.id, forkId));
  if (row) {
    const terminal = terminalForkStatuses.includes(row.status);
    await q
      .update(forks)
      .set({
        cleanedAt: row.cleanedAt ?? new Date(),
        forkAgentId: null,
        ...(status && !terminal ? { status, finishedAt: new Date() } : {}),
      })
      .where(eq(forks.id, forkId));
  }
  return { removedAgent: removed.length > 0 };
}
