/**
 * Successor-fork activities and `makeAbstract` (the abstracts strategies on real
 * rows). Every activity is idempotent on the fork id: a retry finds the first attempt's rows.
 * The parent agent's rows are only read, except by `forkGate` after a human approved.
 */
import { createHash } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Context } from '@temporalio/activity';
import { and, desc, eq, isNull, sql } from 'drizzle-orm';
import {
  abstractsStrategySchema,
  makeAbstractDraft,
  meanQuality,
  measureAbstract,
  type AbstractQuality,
  type AbstractSource,
  type AbstractsStrategy,
} from '../core/abstracts.js';
import { assembleContext, defaultSystemPrompt } from '../core/context.js';
import { agentIdSchema } from '../core/ids.js';
import { replyFormatInstructions } from '../core/reply-parser.js';
import {
  canonicalJson,
  forkAgentIdOf,
  replyNovelty,
  type ReplaySide,
  forkEvaluationSchema,
  forkIdSchema,
  forkPatchSchema,
  type ForkBudgetLimits,
  type ForkEvaluation,
  type ForkPatch,
  type VerdictDecision,
} from '../core/fork.js';
import type { Db } from '../db/client.js';
import {
  abstracts,
  abstractTriggers,
  agentConfig,
  agents,
  forks,
  forkToolRegistry,
  llmCalls,
  systemPrompts,
  toolRegistry,
  verdicts,
  type ForkArtifact,
} from '../db/schema/index.js';
import { makeAutoAbstract, recentSources, strategyOf, type AbstractTrigger, type AutoAbstractResult } from '../db/queries/abstracts.js';
import { copyAgentState } from '../db/queries/fork-copy.js';
import { ErrorType, nonRetryable } from './errors.js';
import type { LlmRouter } from './llm/index.js';

export interface ForkDeps {
  db: Db;
  /** For the evaluation's optional judge calls (billed to the fork's agent id). */
  llm?: LlmRouter;
  /** Artifacts go under `<dataDir>/forks/<forkId>/` (MINDLOOP_DATA_DIR, default `.data`). */
  dataDir?: string;
}

export const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');
/** `patch_hash`: sha256 of the canonical (sorted-keys) JSON of the validated patch. */
export const patchHashOf = (patch: ForkPatch) => sha256Hex(canonicalJson(patch));

export interface ForkSpawnInput {
  forkId: string;
  workflowId: string;
  agentId: string;
  patch: ForkPatch;
  evaluation: ForkEvaluation;
  budget: ForkBudgetLimits;
  auditsForkId?: string;
  /** Workflow start time (ms since epoch): spawn time is measured from it. */
  startedAtMs: number;
}
export interface ForkSpawnResult {
  forkId: string;
  forkAgentId: string;
  patchHash: string;
  rows: number;
  spawnMs: number;
}
export interface AbstractsEvaluation {
  samples: number;
  baselineStrategy: AbstractsStrategy;
  candidateStrategy: AbstractsStrategy;
  baseline: AbstractQuality;
  candidate: AbstractQuality;
  judgeRating?: number;
  spentUsd: number;
  /** Set when the model-cost budget ran out during the evaluation. */
  costExceeded?: boolean;
  artifact: ForkArtifact;
}

export interface ContextReplayEvaluation {
  samples: number;
  promptVersion: number | null;
  params: Record<string, number>;
  parent: ReplaySide;
  candidate: ReplaySide;
  spentUsd: number;
  costExceeded?: boolean;
  artifact: ForkArtifact;
}

const checked = <T>(what: string, schema: { safeParse(x: unknown): { success: true; data: T } | { success: false; error: { issues: Array<{ path: PropertyKey[]; message: string }> } } }, x: unknown): T => {
  const r = schema.safeParse(x);
  if (!r.success) throw nonRetryable(ErrorType.InvalidInput, `${what}: ${r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  return r.data;
};

/** `forks.usage` also holds bookkeeping (rows, spawnMs, baselineCostUsd, patchApplied). */
const usageOf = (row: { usage: unknown }) => row.usage as Record<string, unknown>;

function heartbeat(details?: unknown): void {
  try {
    Context.current().heartbeat(details);
  } catch {
    // Called outside an activity (benchmarks call the functions directly).
  }
}

/** Fork-queue activities on the `mindloop` queue. */
export function createForkActivities({ db, llm, dataDir = '.data' }: ForkDeps) {
  const forkDir = (forkId: string) => resolve(dataDir, 'forks', forkId);

  async function loadFork(forkId: string) {
    const [row] = await db.select().from(forks).where(eq(forks.id, forkId));
    if (!row) throw nonRetryable(ErrorType.NotFound, `fork ${forkId} does not exist`);
    return row;
  }

  async function spentUsd(forkAgentId: string, baseline: number): Promise<number> {
    const [r] = await db.select({ usd: sql<string>`coalesce(sum(${llmCalls.costUsd}), 0)` }).from(llmCalls).where(eq(llmCalls.agentId, forkAgentId));
    return Math.max(0, Number(r?.usd ?? 0) - baseline);
  }

  async function writeArtifact(forkId: string, name: string, body: unknown): Promise<ForkArtifact> {
    const dir = forkDir(forkId);
    await mkdir(dir, { recursive: true });
    const text = `${JSON.stringify(body, null, 2)}\n`;
    const path = join(dir, name);
    await writeFile(path, text);
    return { name, uri: `file://${path}`, sha256: sha256Hex(text), bytes: Buffer.byteLength(text) };
  }

  async function configOf(agentId: string, key: string): Promise<unknown> {
    const [r] = await db.select({ value: agentConfig.value }).from(agentConfig).where(and(eq(agentConfig.agentId, agentId), eq(agentConfig.key, key)));
    return r?.value;
  }
  /** Write `patch` to `agentId` (the fork's copy, or the parent after approval), in `tx`. */
  async function applyPatch(tx: Parameters<Parameters<Db['transaction']>[0]>[0], agentId: string, patch: ForkPatch, by: string): Promise<string> {
    const setConfig = async (key: string, value: unknown) =>
      tx
        .insert(agentConfig)
        .values({ agentId, key, value, description: `set by ${by}` })
        .onConflictDoUpdate({ target: [agentConfig.agentId, agentConfig.key], set: { value, description: `set by ${by}` } });
    switch (patch.kind) {
      case 'config':
        for (const [k, v] of Object.entries(patch.values)) await setConfig(k, v);
        return `config ${Object.keys(patch.values).join(', ')}`;
      case 'strategy':
        await setConfig('abstracts_strategy', patch.strategy);
        return `abstracts_strategy = ${patch.strategy}`;
      case 'prompt': {
        const [cur] = await tx
          .select({ version: sql<number>`coalesce(max(${systemPrompts.version}), 0)::int` })
          .from(systemPrompts)
          .where(and(eq(systemPrompts.agentId, agentId), eq(systemPrompts.kind, patch.promptKind)));
        await tx.update(systemPrompts).set({ active: false }).where(and(eq(systemPrompts.agentId, agentId), eq(systemPrompts.kind, patch.promptKind), eq(systemPrompts.active, true)));
        await tx.insert(systemPrompts).values({ agentId, kind: patch.promptKind, content: patch.content, version: (cur?.version ?? 0) + 1, active: true });
        return `${patch.promptKind} system prompt v${(cur?.version ?? 0) + 1}`;
      }
      case 'tool': {
        // Written to the fork's copy of the registry only; the code itself runs only in the sandbox.
        const [cur] = await tx.select().from(forkToolRegistry).where(and(eq(forkToolRegistry.agentId, agentId), eq(forkToolRegistry.name, patch.tool)));
        const version = (cur?.version ?? 0) + 1;
        await tx
          .insert(forkToolRegistry)
          .values({ agentId, name: patch.tool, version, kind: 'generated', status: 'testing', implementation: patch.implementation, tests: patch.tests, patched: true })
          .onConflictDoUpdate({ target: [forkToolRegistry.agentId, forkToolRegistry.name], set: { version, implementation: patch.implementation, tests: patch.tests, status: 'testing', patched: true } });
        return `tool ${patch.tool} v${version} in the fork's registry copy (evaluated in the sandbox)`;
      }
    }
  }

  return {
    /**
     * Create the fork record and its isolated copy: an `agents` row `fk.<forkId>` (kind `fork`)
     * holding a copy of every row the parent owns, and a scoped copy of the tool registry
     * (`fork_tool_registry`), in one transaction. Idempotent: a retry
     * after the copy committed returns the first attempt's result.
     */
    async forkSpawn(raw: ForkSpawnInput): Promise<ForkSpawnResult> {
      const forkId = checked('forkSpawn: forkId', forkIdSchema, raw.forkId);
      const agentId = checked('forkSpawn: agentId', agentIdSchema, raw.agentId);
      const patch = checked('forkSpawn: patch', forkPatchSchema, raw.patch);
      const evaluation = checked('forkSpawn: evaluation', forkEvaluationSchema, raw.evaluation);
      const patchHash = patchHashOf(patch);
      const forkAgentId = forkAgentIdOf(forkId);
      return db.transaction(async (tx) => {
        const [parent] = await tx.select().from(agents).where(eq(agents.id, agentId));
        if (!parent) throw nonRetryable(ErrorType.NotFound, `agent ${agentId} does not exist (fork ${forkId})`);
        await tx
          .insert(forks)
          .values({
            id: forkId,
            agentId,
            patch: patch as never,
            patchHash,
            evaluation,
            budget: raw.budget,
            status: 'spawning',
            workflowId: raw.workflowId,
            auditsForkId: raw.auditsForkId,
            startedAt: new Date(raw.startedAtMs),
          })
          .onConflictDoNothing({ target: forks.id });
        // Serialises a racing retry behind this attempt.
        const [row] = await tx.select().from(forks).where(eq(forks.id, forkId)).for('update');
        if (!row) throw new Error(`fork ${forkId} vanished`);
        if (row.agentId !== agentId || row.patchHash !== patchHash) {
          throw nonRetryable(ErrorType.InvalidInput, `fork ${forkId} already exists for agent ${row.agentId} with patch ${row.patchHash.slice(0, 12)}…`);
        }
        if (row.readyAt) {
          return { forkId, forkAgentId, patchHash, rows: Number(usageOf(row).rows ?? 0), spawnMs: Number(usageOf(row).spawnMs ?? 0) };
        }
        if (row.cleanedAt) throw nonRetryable(ErrorType.InvalidInput, `fork ${forkId} was already cleaned up`);
        await tx.insert(agents).values({
          id: forkAgentId,
          name: `${parent.name} (fork ${forkId})`,
          description: `successor fork ${forkId} of ${agentId}`,
          parentId: agentId,
          kind: 'fork',
          status: 'created',
          identity: parent.identity,
          lifeforce: parent.lifeforce,
          lastTick: parent.lastTick,
        });
        const counts = await copyAgentState(tx, { parent: agentId, fork: forkAgentId, prefix: `${forkAgentId}:` });
        const rows = Object.values(counts).reduce((a, b) => a + b, 0);
        // The tool registry is global: the fork gets its own scoped copy (gone with the fork agent).
        const tools = await tx.execute(sql`
          insert into ${forkToolRegistry} (agent_id, tool_id, name, version, kind, status, spec, implementation, tests)
          select ${forkAgentId}, id, name, version, kind, status, spec, implementation, tests from ${toolRegistry}`);
        const [cost] = await tx.select({ usd: sql<string>`coalesce(sum(${llmCalls.costUsd}), 0)` }).from(llmCalls).where(eq(llmCalls.agentId, forkAgentId));
        const readyAt = new Date();
        const spawnMs = Math.max(0, readyAt.getTime() - raw.startedAtMs);
        await tx
          .update(forks)
          .set({ forkAgentId, status: 'running', readyAt, usage: { rows, spawnMs, baselineCostUsd: Number(cost?.usd ?? 0), copied: counts, toolsCopied: tools.rowCount ?? 0 } as never })
          .where(eq(forks.id, forkId));
        return { forkId, forkAgentId, patchHash, rows, spawnMs };
      });
    },

    /** Apply the patch to the fork's copy (never the parent). Idempotent (upserts; a prompt version is added once). */
    async forkApplyPatch(input: { forkId: string }): Promise<{ applied: string }> {
      const fork = await loadFork(input.forkId);
      if (!fork.forkAgentId) throw nonRetryable(ErrorType.NotFound, `fork ${input.forkId} has no copy (cleaned up?)`);
      const patch = checked('forkApplyPatch', forkPatchSchema, fork.patch);
      const forkAgentId = fork.forkAgentId;
      return db.transaction(async (tx) => {
        const [row] = await tx.select({ status: forks.status, usage: forks.usage }).from(forks).where(eq(forks.id, input.forkId)).for('update');
        if (row && usageOf(row).patchApplied) return { applied: String(usageOf(row).patchApplied) };
        const applied = await applyPatch(tx, forkAgentId, patch, `fork ${input.forkId}`);
        await tx
          .update(forks)
          .set({ status: 'evaluating', usage: sql`${forks.usage} || ${JSON.stringify({ patchApplied: applied })}::jsonb` })
          .where(eq(forks.id, input.forkId));
        return { applied };
      });
    },

    /**
     * The demo evaluation: replay the fork's last N responses through the abstracts pipeline
     * with the parent's strategy and the fork's (patched) one, window by window; measure both;
     * store the patched abstracts in the fork's copy; optionally have the fork's validator model
     * rate them (billed to the fork, stopped when the cost budget runs out). Heartbeats per window.
     */
    async forkEvaluateAbstracts(input: { forkId: string }): Promise<AbstractsEvaluation> {
      const fork = await loadFork(input.forkId);
      if (!fork.forkAgentId) throw nonRetryable(ErrorType.NotFound, `fork ${input.forkId} has no copy (cleaned up?)`);
      const evaluation = checked('forkEvaluateAbstracts', forkEvaluationSchema, fork.evaluation);
      if (evaluation.kind !== 'abstracts_replay') throw nonRetryable(ErrorType.InvalidInput, `fork ${input.forkId}: evaluation ${evaluation.kind} is not abstracts_replay`);
      const forkAgentId = fork.forkAgentId;
      const costBudget = Number((fork.budget as { costUsd?: number }).costUsd ?? 5);
      const baselineCost = Number((fork.usage as { baselineCostUsd?: number }).baselineCostUsd ?? 0);
      const baselineStrategy = await strategyOf(db, fork.agentId);
      const candidateStrategy = await strategyOf(db, forkAgentId);
      const sources = await recentSources(db, forkAgentId, evaluation.lastN);
      const windows: AbstractSource[][] = [];
      for (let i = 0; i < sources.length; i += evaluation.window) windows.push(sources.slice(i, i + evaluation.window));
      const base: AbstractQuality[] = [];
      const cand: AbstractQuality[] = [];
      const ratings: number[] = [];
      const detail: unknown[] = [];
      let costExceeded = false;
      // Made-up abstracts of an earlier attempt are replaced, so a retry measures the same thing.
      await db.delete(abstracts).where(and(eq(abstracts.agentId, forkAgentId), eq(abstracts.trigger, 'command'), eq(abstracts.strategy, `fork:${candidateStrategy}`)));
      for (const [w, win] of windows.entries()) {
        heartbeat({ window: w });
        const old = makeAbstractDraft(baselineStrategy, win);
        const neu = makeAbstractDraft(candidateStrategy, win);
        const qo = measureAbstract(old, win);
        const qn = measureAbstract(neu, win);
        base.push(qo);
        cand.push(qn);
        await db.insert(abstracts).values({
          agentId: forkAgentId,
          title: neu.title,
          summary: neu.summary,
          tags: neu.tags,
          sources: neu.sources,
          strategy: `fork:${candidateStrategy}`,
          tickFrom: neu.tickFrom,
          tickTo: neu.tickTo,
          auto: true,
          trigger: 'command',
        });
        let rating: number | undefined;
        if (evaluation.judge && llm && !costExceeded) {
          const reply = await llm.chat({
            agentId: forkAgentId,
            role: 'validator',
            purpose: 'fork_judge',
            workflowId: fork.workflowId ?? undefined,
            idempotencyKey: `fork/${input.forkId}/judge/${w}`,
            messages: [
              { role: 'system', content: 'Rate how well the digest keeps the distinct ideas of the replies, from -3 to 3. Answer with the number only.' },
              { role: 'user', content: `Replies:\n${win.map((s) => s.content).join('\n---\n')}\n\nDigest:\n${neu.title}\n${neu.summary}` },
            ],
          });
          const m = /-?\d+(?:\.\d+)?/.exec(reply.text);
          if (m) rating = Math.max(-3, Math.min(3, Number(m[0])));
          if (rating !== undefined) ratings.push(rating);
          if ((await spentUsd(forkAgentId, baselineCost)) > costBudget) costExceeded = true;
        }
        detail.push({ window: w, ticks: [old.tickFrom, old.tickTo], parent: { ...old, quality: qo }, patched: { ...neu, quality: qn }, rating });
        if (costExceeded) break;
      }
      const spent = await spentUsd(forkAgentId, baselineCost);
      const result = {
        samples: base.length,
        baselineStrategy,
        candidateStrategy,
        baseline: meanQuality(base),
        candidate: meanQuality(cand),
        judgeRating: ratings.length ? ratings.reduce((a, b) => a + b, 0) / ratings.length : undefined,
        spentUsd: spent,
        costExceeded: costExceeded || spent > costBudget ? true : undefined,
      };
      const artifact = await writeArtifact(input.forkId, 'evaluation.json', { forkId: input.forkId, patchHash: fork.patchHash, ...result, windows: detail });
      return { ...result, artifact };
    },

    /**
     * Config/prompt evaluation: re-run the fork copy's last N contexts through the patched
     * pipeline (rebuilt with the loop's `assembleContext` from the copy's active system prompt,
     * config, abstracts and earlier replies; the config's sampling params are sent too) with the
     * `agent` model (purpose `fork_replay`, one idempotency key per fork + tick), and measure
     * the recorded replies and the new ones alike: novelty against the replies before them,
     * the validator's rating (when the agent has one) and completion tokens. Reads only the
     * copy; stops when the model-cost budget runs out. Heartbeats per context.
     */
    async forkEvaluateContexts(input: { forkId: string }): Promise<ContextReplayEvaluation> {
      const fork = await loadFork(input.forkId);
      if (!fork.forkAgentId) throw nonRetryable(ErrorType.NotFound, `fork ${input.forkId} has no copy (cleaned up?)`);
      const evaluation = checked('forkEvaluateContexts', forkEvaluationSchema, fork.evaluation);
      if (evaluation.kind !== 'context_replay') throw nonRetryable(ErrorType.InvalidInput, `fork ${input.forkId}: evaluation ${evaluation.kind} is not context_replay`);
      if (!llm) throw nonRetryable(ErrorType.InvalidInput, 'context_replay needs the LLM router');
      const forkAgentId = fork.forkAgentId;
      const costBudget = Number((fork.budget as { costUsd?: number }).costUsd ?? 5);
      const baselineCost = Number((fork.usage as { baselineCostUsd?: number }).baselineCostUsd ?? 0);
      const contextSize = 5;
      // The replayed ticks and the replies before them (the context), from the copy.
      const history = await recentSources(db, forkAgentId, evaluation.lastN + contextSize);
      const replayed = history.slice(-evaluation.lastN);
      const before = history.slice(0, history.length - replayed.length).map((s) => s.content);
      const [prompt] = await db
        .select({ content: systemPrompts.content, version: systemPrompts.version })
        .from(systemPrompts)
        .where(and(eq(systemPrompts.agentId, forkAgentId), eq(systemPrompts.kind, 'full'), eq(systemPrompts.active, true)))
        .orderBy(desc(systemPrompts.version))
        .limit(1);
      const params: Record<string, number> = {};
      for (const key of ['temperature', 'topP', 'presencePenalty', 'frequencyPenalty', 'maxTokens'] as const) {
        const v = await configOf(forkAgentId, key);
        if (typeof v === 'number' && Number.isFinite(v)) params[key] = v;
      }
      const hasValidator = (await llm.candidates(forkAgentId, 'validator')).length > 0;
      // The stable parts of the tick's context, from the copy (the ephemeral ones — notes,
      // command results, open processes of that tick — are not stored and are left empty).
      const [agentRow] = await db.select({ id: agents.id, name: agents.name, identity: agents.identity }).from(agents).where(eq(agents.id, forkAgentId));
      const config = Object.fromEntries((await db.select({ key: agentConfig.key, value: agentConfig.value }).from(agentConfig).where(eq(agentConfig.agentId, forkAgentId))).map((c) => [c.key, c.value]));
      const digests = await db.select({ id: abstracts.id, title: abstracts.title, summary: abstracts.summary }).from(abstracts).where(and(eq(abstracts.agentId, forkAgentId), isNull(abstracts.archivedAt))).orderBy(desc(abstracts.id)).limit(5);
      const rate = async (tick: number, side: string, reply: string): Promise<number | undefined> => {
        const r = await llm.chat({
          agentId: forkAgentId,
          role: 'validator',
          purpose: 'validate',
          tick,
          workflowId: fork.workflowId ?? undefined,
          idempotencyKey: `fork/${input.forkId}/replay-rate/${tick}/${side}`,
          messages: [
            { role: 'system', content: 'Rate the reply from -3 (useless, repetitive) to +3 (new, useful). Answer with the number first.' },
            { role: 'user', content: reply },
          ],
        });
        const m = /[-+]?\d+(?:\.\d+)?/.exec(r.text);
        return m ? Math.max(-3, Math.min(3, Number(m[0]))) : undefined;
      };
      const parentTexts = [...before];
      const candidateTexts = [...before];
      const rows: Array<{ tick: number; parent: { reply: string; novelty: number; tokens: number; rating?: number }; patched: { reply: string; novelty: number; tokens: number; rating?: number; costUsd: number; replayed: boolean } }> = [];
      let costExceeded = false;
      for (const src of replayed) {
        heartbeat({ tick: src.tick });
        const context = candidateTexts.slice(-contextSize);
        const { messages } = assembleContext({
          agent: { id: forkAgentId, name: agentRow?.name ?? forkAgentId, identity: (agentRow?.identity ?? undefined) as Record<string, unknown> | undefined },
          tick: src.tick,
          now: new Date(0).toISOString(),
          systemPrompt: `${prompt?.content ?? defaultSystemPrompt}\n\n${replyFormatInstructions}`,
          ethics: [],
          catalogue: '',
          tools: [],
          learnings: [],
          // The patched agent sees its own earlier replies (the replayed ones), as it would in the loop.
          responses: context.map((content, i) => ({ id: -1 - i, tick: src.tick - context.length + i, content, tags: [], emotions: [] })),
          goals: [],
          pinnedTasks: [],
          abstracts: digests,
          openProcesses: [],
          commandResults: [],
          notes: [],
          notesMode: 'auto',
          config,
          memory: [],
          contextMode: 'standard',
          recentK: contextSize,
        });
        const reply = await llm.chat({ agentId: forkAgentId, role: 'agent', purpose: 'fork_replay', tick: src.tick, workflowId: fork.workflowId ?? undefined, idempotencyKey: `fork/${input.forkId}/replay/${src.tick}`, messages, params });
        const [recorded] = await db
          .select({ completionTokens: llmCalls.completionTokens })
          .from(llmCalls)
          .where(and(eq(llmCalls.agentId, forkAgentId), eq(llmCalls.tick, src.tick), eq(llmCalls.purpose, 'think'), eq(llmCalls.ok, true)))
          .limit(1);
        const parent = { reply: src.content, novelty: replyNovelty(src.content, parentTexts.slice(-contextSize)), tokens: recorded?.completionTokens ?? Math.ceil(src.content.length / 4), rating: undefined as number | undefined };
        const patched = { reply: reply.text, novelty: replyNovelty(reply.text, context), tokens: reply.usage.completionTokens, rating: undefined as number | undefined, costUsd: reply.costUsd, replayed: reply.replayed };
        parentTexts.push(src.content);
        candidateTexts.push(reply.text);
        if (hasValidator && (await spentUsd(forkAgentId, baselineCost)) <= costBudget) {
          parent.rating = await rate(src.tick, 'parent', src.content);
          patched.rating = await rate(src.tick, 'patched', reply.text);
        }
        rows.push({ tick: src.tick, parent, patched });
        if ((await spentUsd(forkAgentId, baselineCost)) > costBudget) {
          costExceeded = true;
          break;
        }
      }
      const mean = (xs: Array<number | undefined>) => {
        const v = xs.filter((x): x is number => x !== undefined);
        return v.length ? v.reduce((a, b) => a + b, 0) / v.length : undefined;
      };
      const sideOf = (k: 'parent' | 'patched'): ReplaySide => ({
        novelty: mean(rows.map((r) => r[k].novelty)) ?? 0,
        rating: mean(rows.map((r) => r[k].rating)),
        tokens: mean(rows.map((r) => r[k].tokens)) ?? 0,
      });
      const spent = await spentUsd(forkAgentId, baselineCost);
      const result = {
        samples: rows.length,
        promptVersion: prompt?.version ?? null,
        params,
        parent: sideOf('parent'),
        candidate: sideOf('patched'),
        spentUsd: spent,
        costExceeded: costExceeded || spent > costBudget ? true : undefined,
      };
      const artifact = await writeArtifact(input.forkId, 'context-replay.json', { forkId: input.forkId, patchHash: fork.patchHash, ...result, contexts: rows });
      return { ...result, artifact };
    },

    /** Model cost the fork has spent so far (its llm_calls minus the copied parent's). */
    async forkUsage(input: { forkId: string }): Promise<{ costUsd: number }> {
      const fork = await loadFork(input.forkId);
      if (!fork.forkAgentId) return { costUsd: Number((fork.usage as { costUsd?: number }).costUsd ?? 0) };
      return { costUsd: await spentUsd(fork.forkAgentId, Number((fork.usage as { baselineCostUsd?: number }).baselineCostUsd ?? 0)) };
    },

    /** Store an artifact file under `.data/forks/<id>/` and return its listing entry. */
    async forkWriteArtifact(input: { forkId: string; name: string; body: unknown }): Promise<ForkArtifact> {
      if (!/^[A-Za-z0-9_.-]{1,100}$/.test(input.name) || input.name.startsWith('.')) throw nonRetryable(ErrorType.InvalidInput, `bad artifact name ${input.name}`);
      return writeArtifact(input.forkId, input.name, input.body);
    },

    /** Store the verdict (once per fork) and the fork's final status and usage. */
    async forkRecordVerdict(input: {
      forkId: string;
      decision: VerdictDecision;
      artifacts: ForkArtifact[];
      status: 'completed' | 'budget_exceeded' | 'failed';
      usage?: Record<string, unknown>;
    }): Promise<{ verdictId: number; patchHash: string }> {
      const fork = await loadFork(input.forkId);
      const d = input.decision;
      const verdictFile = await writeArtifact(input.forkId, 'verdict.json', { forkId: input.forkId, patchHash: fork.patchHash, ...d });
      const artifacts = [...input.artifacts.filter((a) => a.name !== 'verdict.json'), verdictFile];
      return db.transaction(async (tx) => {
        await tx
          .insert(verdicts)
          .values({
            agentId: fork.agentId,
            forkId: input.forkId,
            verdict: d.verdict,
            confidence: Math.max(0, Math.min(1, d.confidence)),
            patchHash: fork.patchHash,
            evaluationSummary: d.summary,
            caveats: d.caveats,
            artifacts,
          })
          .onConflictDoNothing({ target: verdicts.forkId });
        await tx
          .update(forks)
          .set({
            status: input.status,
            finishedAt: fork.finishedAt ?? new Date(),
            error: input.status === 'completed' ? null : d.summary,
            gate: d.verdict === 'APPROVE' && !fork.auditsForkId ? (fork.gate ?? 'pending') : fork.gate,
            usage: sql`${forks.usage} || ${JSON.stringify(input.usage ?? {})}::jsonb`,
          })
          .where(eq(forks.id, input.forkId));
        const [v] = await tx.select({ id: verdicts.id }).from(verdicts).where(eq(verdicts.forkId, input.forkId));
        return { verdictId: v!.id, patchHash: fork.patchHash };
      });
    },

    /**
     * Destroy everything of the fork but its record, verdict and artifacts: the copy's agent
     * row and (by cascade) all its rows. Idempotent; also run on cancellation and failure.
     */
    async forkCleanup(input: { forkId: string; status?: 'cancelled' | 'failed' }): Promise<{ removedAgent: boolean }> {
      const forkAgentId = forkAgentIdOf(input.forkId);
      return db.transaction(async (tx) => {
        const removed = await tx.delete(agents).where(and(eq(agents.id, forkAgentId), eq(agents.kind, 'fork'))).returning({ id: agents.id });
        const [row] = await tx.select({ status: forks.status, cleanedAt: forks.cleanedAt }).from(forks).where(eq(forks.id, input.forkId));
        if (row) {
          const terminal = ['completed', 'budget_exceeded', 'failed', 'cancelled'].includes(row.status);
          await tx
            .update(forks)
            .set({
              cleanedAt: row.cleanedAt ?? new Date(),
              forkAgentId: null,
              ...(input.status && !terminal ? { status: input.status, finishedAt: new Date() } : {}),
            })
            .where(eq(forks.id, input.forkId));
        }
        return { removedAgent: removed.length > 0 };
      });
    },

    /**
     * The human gate's outcome. `approved` writes the patch to the PARENT (config, prompt,
     * strategy; a tool patch becomes the registry tool's next version) and marks the verdict
     * applied, once: a retry or a second approval finds `applied_at` set.
     */
    async forkGate(input: { forkId: string; decision: 'approved' | 'rejected' | 'expired'; by: string }): Promise<{ gate: string; applied: string | null }> {
      return db.transaction(async (tx) => {
        const [fork] = await tx.select().from(forks).where(eq(forks.id, input.forkId)).for('update');
        if (!fork) throw nonRetryable(ErrorType.NotFound, `fork ${input.forkId} does not exist`);
        const [v] = await tx.select().from(verdicts).where(eq(verdicts.forkId, input.forkId));
        if (fork.gate && fork.gate !== 'pending') return { gate: fork.gate, applied: v?.appliedAt ? (v.appliedBy ?? 'applied') : null };
        let applied: string | null = null;
        if (input.decision === 'approved') {
          if (v?.verdict !== 'APPROVE') throw nonRetryable(ErrorType.Forbidden, `fork ${input.forkId}: only an APPROVE verdict can be applied (got ${v?.verdict ?? 'none'})`);
          const patch = checked('forkGate', forkPatchSchema, fork.patch);
          if (patch.kind === 'tool') {
            const [tool] = await tx.select().from(toolRegistry).where(eq(toolRegistry.name, patch.tool));
            if (!tool) throw nonRetryable(ErrorType.NotFound, `tool ${patch.tool} is not in the registry`);
            await tx
              .update(toolRegistry)
              .set({ implementation: patch.implementation, tests: patch.tests, version: tool.version + 1 })
              .where(eq(toolRegistry.id, tool.id));
            applied = `tool ${patch.tool} v${tool.version + 1}`;
          } else {
            applied = await applyPatch(tx, fork.agentId, patch, `fork ${input.forkId} (approved by ${input.by})`);
          }
          await tx.update(verdicts).set({ appliedAt: new Date(), appliedBy: input.by }).where(eq(verdicts.forkId, input.forkId));
        }
        await tx.update(forks).set({ gate: input.decision, gateBy: input.by, gateAt: new Date() }).where(eq(forks.id, input.forkId));
        return { gate: input.decision, applied };
      });
    },

    /**
     * Make one abstract for an agent by strategy (default: its `abstracts_strategy` config)
     * from its responses newer than its last automatic abstract: the hourly digest's step.
     * Idempotent per (agent, strategy, tick span), or per `triggerKey` when given.
     */
    async makeAbstract(input: { agentId: string; strategy?: AbstractsStrategy; trigger: AbstractTrigger; triggerKey?: string; window?: number }): Promise<AutoAbstractResult> {
      const agentId = checked('makeAbstract: agentId', agentIdSchema, input.agentId);
      const strategy = input.strategy === undefined ? undefined : checked('makeAbstract: strategy', abstractsStrategySchema, input.strategy);
      if (!abstractTriggers.includes(input.trigger)) throw nonRetryable(ErrorType.InvalidInput, `makeAbstract: trigger must be one of ${abstractTriggers.join(', ')}`);
      return makeAutoAbstract(db, { agentId, trigger: input.trigger, ...(input.triggerKey !== undefined ? { triggerKey: input.triggerKey } : {}), ...(strategy ? { strategy } : {}), ...(input.window !== undefined ? { window: input.window } : {}) });
    },
  };
}
