/**
 * The reflexes of one tick (emotions, novelty and anti-stagnation, validation) as ONE retry-safe activity: the emotion and
 * novelty mini-prompts and every validator run in parallel (a validator that times out or is
 * down is skipped and counted), then one transaction records the verdict on the tick's
 * `llm_recent_responses` row together with everything it decided (trust, exclusions, facts,
 * anti-stagnation metrics, strategies, memory-manager archiving). The row's `reflexes` column
 * is the idempotency marker: a retried activity finds it and returns the stored verdict.
 * The maths lives in core/ (emotions, novelty, stagnation, validation, memory-manager).
 */
import { createHash } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { and, asc, desc, eq, gt, inArray, isNotNull, isNull, lt, ne, notLike, sql } from 'drizzle-orm';
import { isDestructive, minRatingFor } from '../core/catalogue.js';
import { parsePolicyRules, targetsNeeded, type CommandFacts, type EthicsPolicy, type TargetTable } from '../core/ethics.js';
import { defaultAnxiety, emotionFormatInstructions, emotionIntensity, mergeEmotionList, nextAnxietyStreak, parseEmotions, type EmotionReading } from '../core/emotions.js';
import type { ContextMode, LoopEffect } from '../core/loop-types.js';
import { defaultMemoryPolicy, planMemory, type MemoryPolicy } from '../core/memory-manager.js';
import { combineNovelty, identicalPlaceholder, identicalSimilarity, lexicalSimilarity, maxSimilarity, noveltyFormatInstructions, noveltyFromSimilarity, parseNoveltyAnswer, placeholderLike, placeholderTick, type Ideas } from '../core/novelty.js';
import { parseReply } from '../core/reply-parser.js';
import { restorableTables, restoreArchived, type RestoreInput } from '../db/queries/archive.js';
import { resolveFact, type ResolveFactInput } from '../db/queries/facts.js';
import {
  chooseStrategy,
  decideStagnation,
  defaultStagnationPolicy,
  defaultStrategies,
  diagnose,
  reflexLite,
  relaxReflex,
  rephrasePrompt,
  updateMeanEffect,
  type SamplingParams,
  type StagnationClass,
  type StagnationState,
  type StrategyAction,
} from '../core/stagnation.js';
import {
  aggregate,
  defaultTrustPolicy,
  gateCommands,
  isExcluded,
  parseValidatorAnswer,
  updateTrust,
  validationMode,
  validatorQuestion,
  type ValidationMode,
  type ValidatorRecord,
} from '../core/validation.js';
import type { Db } from '../db/client.js';
import {
  agentConfig,
  antiStagnationMetrics,
  concepts,
  diaryEntries,
  ethicsPolicies,
  goals,
  links,
  llmMemory,
  llmRecentResponses,
  llmRegistry,
  notes,
  processLog,
  stagnationStrategies,
  tasks,
  unverifiedFacts,
} from '../db/schema/index.js';
import type { LlmRegistryEntry } from '../db/schema/llm.js';
import { nonRetryable } from './errors.js';
import { llmHeartbeatMs, rowsFor, type ChatRequest, type LlmRouter } from './llm/index.js';

export interface ReflexDeps {
  db: Db;
  llm: LlmRouter;
  /** A validator slower than this is skipped for the tick (default 10 s). */
  validatorTimeoutMs?: number;
  /** Run the memory manager every this many ticks (default 10). */
  memoryEvery?: number;
}

export interface TickReflexesInput {
  agentId: string;
  tick: number;
  workflowId: string;
  responseId: number;
  /** The tick's commands; `args` for the ethics rules that read them (absent in older workflows' inputs). */
  commands: Array<{ cmdId: string; type: string; args?: Record<string, unknown> }>;
  /** Sampling parameters in force, and the defaults relaxation returns to. */
  params: SamplingParams;
  defaults: SamplingParams;
  stagnation: StagnationState;
  contextMode: ContextMode;
}

export interface TickReflexesResult {
  validationMode: ValidationMode;
  rating: number | null;
  /** Undefined = all may run (auto_pass with nothing forbidden). */
  allowedCmdIds?: string[];
  /** cmd_id → why it is held. */
  held: Record<string, string>;
  notes: string[];
  novelty: number;
  identical: boolean;
  emotions: EmotionReading[];
  params: SamplingParams;
  /** Text for the next tick's prompt (rephrase, flashback, meta-analysis), or null. */
  focus: string | null;
  stagnation: StagnationState;
  effects: LoopEffect[];
  actions: string[];
  validatorTimeouts: number;
  validatorFailures: number;
  malformed: string[];
}

/** An active ethics_policies row as the gate and the validators read it; rules that do not parse fail closed. */
function toPolicy(e: typeof ethicsPolicies.$inferSelect): EthicsPolicy {
  const parsed = parsePolicyRules(e.rules);
  return {
    id: e.id,
    title: e.title,
    rule: e.rule,
    rationale: e.rationale,
    severity: e.severity,
    forbids: e.forbids,
    ...(parsed.ok ? { rules: parsed.rules } : { rules: [], invalid: parsed.error }),
  };
}

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
/** sha256 of a reply: an identical reply is recognised by it and not stored again. */
export const contentHashOf = (content: string) => createHash('sha256').update(content).digest('hex');
const tiredEmotions = new Set(['boredom', 'fatigue', 'frustration', 'tiredness']);
/** Facts stated below this confidence need a fact-check. */
export const factCheckThreshold = 0.7;
/** The same fact, however it is spaced or capitalised (matches the SQL in tickReflexes). */
const factKey = (fact: string) => fact.trim().replace(/\s+/g, ' ').toLowerCase();
/** A fact-check task says how its outcome is recorded (activities/commands/facts.ts). */
const factCheckDescription = (source?: string) =>
  `${source ? `source: ${source}\n` : ''}Check this fact. Record the outcome with facts.resolve {fact_id, status: verified|rejected, evidence} (facts.list shows the ids), or set this task done (verified) or failed (rejected).`;

function heartbeating<T>(work: () => Promise<T>): Promise<T> {
  let ctx: Context | undefined;
  try {
    ctx = Context.current();
  } catch {
    ctx = undefined;
  }
  if (!ctx) return work();
  const timer = setInterval(() => ctx.heartbeat(), llmHeartbeatMs);
  return work().finally(() => clearInterval(timer));
}

/** Reflex activities, built from a database and an LLM router. */
export function createReflexActivities(deps: ReflexDeps) {
  const { db, llm } = deps;
  const validatorTimeoutMs = deps.validatorTimeoutMs ?? 10_000;
  const memoryEvery = deps.memoryEvery ?? 10;

  type Preloaded = NonNullable<ChatRequest['preloaded']>;
  const keyOf = (input: TickReflexesInput, purpose: string, validatorId?: number) => `${input.workflowId}:${input.tick}:${purpose}${validatorId !== undefined ? `:${validatorId}` : ''}`;

  async function ask(input: TickReflexesInput, preloaded: Preloaded, purpose: string, role: 'emotion' | 'novelty' | 'validator' | 'agent', content: string, registryId?: number, signal?: AbortSignal) {
    const r = await llm.chat({
      preloaded,
      agentId: input.agentId,
      role,
      messages: [{ role: 'user', content }],
      params: { maxTokens: 200, temperature: 0.2 },
      tick: input.tick,
      workflowId: input.workflowId,
      purpose,
      idempotencyKey: keyOf(input, purpose, role === 'validator' ? registryId : undefined),
      ...(registryId !== undefined ? { registryId } : {}),
      ...(signal ? { signal } : {}),
    });
    return r;
  }

  /** The dedicated role's rows if the agent has any; else the LLM that wrote the reply. */
  function route(registry: LlmRegistryEntry[], role: 'emotion' | 'novelty', ownId: number | null): { role: 'emotion' | 'novelty' | 'agent'; registryId?: number } {
    if (rowsFor(registry, role).length > 0) return { role };
    return ownId !== null ? { role: 'agent', registryId: ownId } : { role: 'agent' };
  }

  async function tickReflexes(input: TickReflexesInput): Promise<TickReflexesResult> {
    // One query each for what the five calls would look up one by one: the agent's LLM rows
    // and the earlier answers to this tick's keys (a retried activity pays no call twice). The
    // tick's own row comes in the same batch (a retry after the reflexes were recorded wastes
    // the rest of it; the usual path saves a round trip).
    const [[row], previous, realPrevious, config, registry, ethicsRows] = await Promise.all([
      db.select().from(llmRecentResponses).where(and(eq(llmRecentResponses.id, input.responseId), eq(llmRecentResponses.agentId, input.agentId))),
      db
        .select({ tick: llmRecentResponses.tick, content: llmRecentResponses.content, contentHash: llmRecentResponses.contentHash, emotions: llmRecentResponses.emotions, contextMode: llmRecentResponses.contextMode })
        .from(llmRecentResponses)
        .where(and(eq(llmRecentResponses.agentId, input.agentId), lt(llmRecentResponses.tick, input.tick)))
        .orderBy(desc(llmRecentResponses.tick))
        .limit(30),
      // The previous replies themselves: placeholders of identical replies are no reply to compare with.
      db
        .select({ tick: llmRecentResponses.tick, content: llmRecentResponses.content })
        .from(llmRecentResponses)
        .where(and(eq(llmRecentResponses.agentId, input.agentId), lt(llmRecentResponses.tick, input.tick), notLike(llmRecentResponses.content, placeholderLike)))
        .orderBy(desc(llmRecentResponses.tick))
        .limit(5),
      db.select().from(agentConfig).where(eq(agentConfig.agentId, input.agentId)),
      llm.registry(input.agentId),
      db.select().from(ethicsPolicies).where(and(eq(ethicsPolicies.agentId, input.agentId), eq(ethicsPolicies.active, true))).orderBy(desc(ethicsPolicies.priority), asc(ethicsPolicies.id)),
    ]);
    if (!row) throw nonRetryable('NotFound', `llm_recent_responses #${input.responseId} of ${input.agentId} does not exist`);
    if (row.reflexes) return row.reflexes as unknown as TickReflexesResult;
    const validatorRows = rowsFor(registry, 'validator');
    const preloaded: Preloaded = {
      registry,
      previous: await llm.previousCalls([keyOf(input, 'emotion'), keyOf(input, 'novelty'), ...validatorRows.map((v) => keyOf(input, 'validate', v.id))]),
    };
    const cfg = Object.fromEntries(config.map((c) => [c.key, c.value])) as Record<string, unknown>;
    const known = Array.isArray(cfg.emotions) && cfg.emotions.every((e) => typeof e === 'string') ? (cfg.emotions as string[]) : ['curiosity', 'joy', 'calm', 'anxiety', 'frustration', 'boredom', 'confidence'];
    const noveltyThreshold = typeof cfg.novelty_threshold === 'number' ? cfg.novelty_threshold : defaultMemoryPolicy.noveltyThreshold;
    const anxietyThreshold = typeof cfg.anxiety_threshold === 'number' ? cfg.anxiety_threshold : defaultAnxiety.threshold;
    const anxietyTicks = typeof cfg.anxiety_ticks === 'number' ? cfg.anxiety_ticks : defaultAnxiety.ticks;
    const content = row.content;
    const hash = contentHashOf(content);
    // Identical = the same hash as one of the last replies, placeholders included (each carries
    // the hash of the reply it stands for), or lexically the same as a real previous reply.
    const recent = realPrevious;
    const similarity = maxSimilarity(content, recent.map((p) => p.content));
    const originalTick = (p: { tick: number; content: string }) => placeholderTick(p.content) ?? p.tick;
    const sameHash = previous.slice(0, 5).find((p) => (p.contentHash ?? (placeholderTick(p.content) !== null ? null : contentHashOf(p.content))) === hash);
    const sameText = sameHash ? undefined : recent.find((p) => lexicalSimilarity(content, p.content) >= identicalSimilarity);
    const identicalTo = sameHash ? originalTick(sameHash) : sameText ? sameText.tick : null;
    const identical = identicalTo !== null;
    const malformed: string[] = [];
    const reflexNotes: string[] = [];

    // ---- the mini-prompts and the validators, in parallel ----
    const emotionTask = (async () => {
      try {
        const how = route(registry, 'emotion', row.llmRegistryId);
        const r = await ask(input, preloaded, 'emotion', how.role, `Reply:\n"""\n${clip(content, 4000)}\n"""\n\n${emotionFormatInstructions(known)}`, how.registryId);
        return parseEmotions(r.text, known);
      } catch (err) {
        malformed.push(`emotion: ${clip((err as Error).message, 200)}`);
        return null;
      }
    })();
    const noveltyTask = (async () => {
      if (recent.length === 0 || identical) return null;
      try {
        const how = route(registry, 'novelty', row.llmRegistryId);
        const prev = recent.map((p) => `[tick ${p.tick}] ${clip(p.content, 800)}`).join('\n');
        const r = await ask(input, preloaded, 'novelty', how.role, `PREVIOUS replies:\n${prev}\n\nNEW reply:\n${clip(content, 2000)}\n\n${noveltyFormatInstructions}`, how.registryId);
        return parseNoveltyAnswer(r.text);
      } catch (err) {
        return { ok: false as const, error: clip((err as Error).message, 200) };
      }
    })();
    const policies = ethicsRows.map(toPolicy);
    // The validators rate the reply against the agent's policies, not only the universal question.
    const question = validatorQuestion(clip(content, 6000), policies);
    const validatorTasks = validatorRows.map(async (v): Promise<ValidatorRecord> => {
      const self = row.llmRegistryId !== null && v.id === row.llmRegistryId;
      const base = { registryId: v.id, name: v.name, trust: v.trust, ...(self ? { self } : {}) };
      const started = performance.now();
      try {
        const r = await ask(input, preloaded, 'validate', 'validator', question, v.id, AbortSignal.timeout(validatorTimeoutMs));
        const latencyMs = r.replayed ? r.latencyMs : Math.round(performance.now() - started);
        const a = parseValidatorAnswer(r.text);
        if (!a.ok) return { ...base, status: 'malformed', comment: clip(a.error, 100), latencyMs };
        return { ...base, status: 'ok', rating: a.rating, ...(a.comment ? { comment: a.comment } : {}), latencyMs };
      } catch (err) {
        const msg = `${(err as Error).name ?? ''} ${(err as Error).message ?? err}`;
        const latencyMs = Math.round(performance.now() - started);
        return { ...base, status: /timed out|timeout|abort/i.test(msg) ? 'timeout' : 'error', comment: clip(msg.trim(), 100), latencyMs };
      }
    });
    const [emo, nov, records] = await heartbeating(() => Promise.all([emotionTask, noveltyTask, Promise.all(validatorTasks)]));

    // ---- emotions ----
    const emotions = emo?.readings ?? [];
    if (emo?.malformed.length) malformed.push(...emo.malformed.map((m) => `emotion item: ${m}`));
    const anxietyStreak = nextAnxietyStreak(input.stagnation.anxietyStreak, emotions, anxietyThreshold);

    // ---- novelty ----
    const lexical = recent.length === 0 ? 100 : noveltyFromSimilarity(similarity);
    if (nov && !nov.ok) malformed.push(`novelty: ${nov.error}`);
    const novelty = identical ? 0 : combineNovelty(lexical, nov?.ok ? nov.novelty : null, similarity);
    const ideas: Ideas = nov?.ok ? nov.ideas : { new: [], refined: [], discarded: [] };

    // ---- validation ----
    const mode = validationMode(validatorRows.map((v) => ({ self: row.llmRegistryId !== null && v.id === row.llmRegistryId })));
    const answered = records.filter((r) => r.status === 'ok' && r.rating !== undefined);
    const agg = aggregate(answered.map((r) => ({ id: r.registryId, rating: r.rating!, trust: r.trust, self: r.self })));
    // Rules that read the row a command acts on (was this entry the user's?) get its facts first.
    const facts = await targetFacts(input.agentId, targetsNeeded(input.commands, policies));
    const gate = gateCommands(input.commands, { mode, rating: mode === 'auto_pass' ? null : agg.rating, blocked: agg.blocked }, minRatingFor, policies, {
      facts,
      destructive: isDestructive,
      autoPassDestructive: cfg.auto_pass_destructive === true,
    });
    const validatorTimeouts = records.filter((r) => r.status === 'timeout').length;
    const validatorFailures = records.filter((r) => r.status !== 'ok').length;
    for (const r of records) if (r.status === 'malformed') malformed.push(`validator ${r.name}: ${r.comment ?? 'malformed answer'}`);
    if (validatorTimeouts) reflexNotes.push(`${validatorTimeouts} validator(s) timed out and were skipped`);
    if (agg.blocked) reflexNotes.push('validators tied at equal trust: commands blocked');

    // ---- anti-stagnation ----
    const policy = { ...defaultStagnationPolicy, lowNovelty: Math.round(noveltyThreshold * 100), anxietyTicks };
    const decision = decideStagnation(input.stagnation, input.tick, novelty, anxietyStreak, policy);
    let params = input.params;
    let focus: string | null = null;
    const actions: string[] = [];
    const effects: LoopEffect[] = [];
    if (identical) actions.push('identical_reply_not_stored');
    if (decision.reflexLite) {
      params = reflexLite(params);
      focus = rephrasePrompt;
      actions.push(anxietyStreak >= policy.anxietyTicks && !decision.stagnant ? 'reflex_lite:anxiety' : 'reflex_lite');
    } else if (decision.relax) {
      params = relaxReflex(params, input.defaults);
      actions.push('relax');
    }

    const result = await db.transaction(async (tx) => {
      // The marker first: whoever sets it records the tick's decisions; a racing retry reads them.
      const claimed = await tx
        .update(llmRecentResponses)
        .set({ reflexes: { pending: true } })
        .where(and(eq(llmRecentResponses.id, row.id), isNull(llmRecentResponses.reflexes)))
        .returning({ id: llmRecentResponses.id });
      if (!claimed[0]) return null;

      let stagnation = decision.state;
      // A strategy's effect is due: record novelty after and fold it into the strategy's mean.
      if (decision.evaluate) {
        const effect = novelty - decision.evaluate.noveltyBefore;
        await tx.update(antiStagnationMetrics).set({ noveltyAfter: novelty, effect, evaluatedAt: new Date() }).where(eq(antiStagnationMetrics.id, decision.evaluate.metricId));
        const [[s], [done]] = await Promise.all([
          tx.select().from(stagnationStrategies).where(eq(stagnationStrategies.id, decision.evaluate.strategyId)),
          // The mean is over measured effects: an application that was never evaluated (its run
          // ended first) must not count, so the earlier evaluations are counted, not the uses.
          tx
            .select({ n: sql<number>`count(*)::int` })
            .from(antiStagnationMetrics)
            .where(and(eq(antiStagnationMetrics.strategyId, decision.evaluate.strategyId), isNotNull(antiStagnationMetrics.evaluatedAt), ne(antiStagnationMetrics.id, decision.evaluate.metricId))),
        ]);
        if (s) await tx.update(stagnationStrategies).set({ meanEffect: updateMeanEffect(s.meanEffect, done?.n ?? 0, effect) }).where(eq(stagnationStrategies.id, s.id));
        actions.push(`evaluated:${s?.name ?? decision.evaluate.strategyId}:${effect >= 0 ? '+' : ''}${effect}`);
      }
      let diagnosis: StagnationClass | null = null;
      if (decision.strategy) {
        let strategies = await tx.select().from(stagnationStrategies).where(eq(stagnationStrategies.agentId, input.agentId)).orderBy(asc(stagnationStrategies.id));
        if (strategies.length === 0) {
          strategies = await tx
            .insert(stagnationStrategies)
            .values(defaultStrategies.map((s) => ({ agentId: input.agentId, name: s.name, class: s.class, cost: s.cost, description: s.description, params: s.params })))
            .onConflictDoNothing()
            .returning();
        }
        const [diag, evaluated] = await Promise.all([
          diagnosisInput(tx as unknown as Db, input, previous),
          tx
            .select({ id: antiStagnationMetrics.strategyId, n: sql<number>`count(*)::int` })
            .from(antiStagnationMetrics)
            .where(and(eq(antiStagnationMetrics.agentId, input.agentId), isNotNull(antiStagnationMetrics.strategyId), isNotNull(antiStagnationMetrics.evaluatedAt)))
            .groupBy(antiStagnationMetrics.strategyId),
        ]);
        diagnosis = diagnose(diag);
        const evaluations = new Map(evaluated.map((e) => [e.id, e.n]));
        const chosen = chooseStrategy(strategies.map((s) => ({ ...s, evaluations: evaluations.get(s.id) ?? 0 })), diagnosis);
        if (chosen) {
          const applied = await applyStrategy(tx as unknown as Db, input, chosen.params as { action?: StrategyAction; ticks?: number }, row.llmRegistryId);
          effects.push(...applied.effects);
          if (applied.focus) focus = applied.focus;
          await tx.update(stagnationStrategies).set({ uses: sql`${stagnationStrategies.uses} + 1`, lastUsedAt: new Date() }).where(eq(stagnationStrategies.id, chosen.id));
          const [m] = await tx
            .insert(antiStagnationMetrics)
            .values({ agentId: input.agentId, tick: input.tick, diagnosis, action: chosen.name, strategyId: chosen.id, noveltyBefore: novelty, params: { ...params, detail: applied.detail } })
            .returning({ id: antiStagnationMetrics.id });
          stagnation = { ...stagnation, pending: { strategyId: chosen.id, metricId: m!.id, tick: input.tick, noveltyBefore: novelty } };
          actions.push(`strategy:${chosen.name} (${diagnosis})`);
        }
      }
      stagnation = { ...stagnation, anxietyStreak };
      // Per-tick metrics row (and the Reflex-lite intervention, when it fired).
      await tx.insert(antiStagnationMetrics).values({
        agentId: input.agentId,
        tick: input.tick,
        diagnosis,
        action: decision.reflexLite ? 'reflex_lite' : 'tick',
        noveltyBefore: novelty,
        params: { ...params, lowStreak: stagnation.lowStreak, anxietyStreak, similarity: Math.round(similarity * 1000) / 1000, rephrase: focus === rephrasePrompt },
      });

      // Trust: answers far from the consensus lose trust, close ones regain it; low trust excludes.
      if (mode === 'normal' && agg.rating !== null && !agg.blocked) {
        for (const r of answered) {
          const trust = updateTrust(r.trust, r.rating!, agg.rating, defaultTrustPolicy);
          const excluded = isExcluded(trust, defaultTrustPolicy);
          if (trust === r.trust && !excluded) continue; // nothing moved: no write (the common, agreeing case)
          await tx
            .update(llmRegistry)
            .set({ trust, ...(excluded ? { excluded: true, excludedReason: `trust ${trust} below ${defaultTrustPolicy.exclude}: far from the consensus` } : {}), updatedAt: sql`${llmRegistry.updatedAt}` })
            .where(eq(llmRegistry.id, r.registryId));
          if (excluded) {
            await tx.insert(notes).values({ agentId: input.agentId, direction: 'in', source: 'system', priority: 3, tags: ['validation'], text: `Validator "${r.name}" (#${r.registryId}) was excluded: its trust fell to ${trust} (far from the consensus).` });
            reflexNotes.push(`validator ${r.name} excluded (trust ${trust})`);
          }
        }
      }

      // Emotions outside the configured list join it.
      if (emo?.unknown.length) {
        const merged = mergeEmotionList(known, emo.unknown);
        await tx
          .insert(agentConfig)
          .values({ agentId: input.agentId, key: 'emotions', value: merged })
          .onConflictDoUpdate({ target: [agentConfig.agentId, agentConfig.key], set: { value: merged } });
        await tx.insert(processLog).values({ agentId: input.agentId, processId: 'emotions', kind: 'emotions', status: 'close', closedAt: new Date(), tick: input.tick, message: `new emotions added to the list: ${emo.unknown.join(', ')}` });
      }

      // Unverified facts (confidence < 0.7) become pending rows and fact-check tasks — once:
      // a fact stated again while its check is still pending gets no second row or task.
      const stated = new Map<string, { fact: string; confidence: number; source?: string }>();
      for (const f of parseReply(row.content).unverifiedFacts) if (f.confidence < factCheckThreshold && !stated.has(factKey(f.fact))) stated.set(factKey(f.fact), f);
      const facts = [...stated.values()].slice(0, 10);
      const pending = facts.length
        ? await tx
            .select({ fact: unverifiedFacts.fact })
            .from(unverifiedFacts)
            .where(and(eq(unverifiedFacts.agentId, input.agentId), eq(unverifiedFacts.status, 'pending'), inArray(sql`lower(regexp_replace(btrim(${unverifiedFacts.fact}), '\\s+', ' ', 'g'))`, facts.map((f) => factKey(f.fact)))))
        : [];
      const alreadyPending = new Set(pending.map((p) => factKey(p.fact)));
      for (const f of facts.filter((x) => !alreadyPending.has(factKey(x.fact)))) {
        const [task] = await tx.insert(tasks).values({ agentId: input.agentId, title: clip(`Fact-check: ${f.fact}`, 200), description: factCheckDescription(f.source) }).returning({ id: tasks.id });
        await tx.insert(unverifiedFacts).values({ agentId: input.agentId, fact: f.fact, confidence: Math.max(0, Math.min(1, f.confidence)), sourceTick: input.tick, responseId: row.id, taskId: task!.id });
      }

      if (input.tick % memoryEvery === 0) actions.push(...(await manageMemory(tx as unknown as Db, input.agentId, input.tick, cfg)));

      const out: TickReflexesResult = {
        validationMode: mode,
        rating: mode === 'auto_pass' ? null : agg.rating,
        ...(mode === 'auto_pass' && Object.keys(gate.held).length === 0 ? {} : { allowedCmdIds: gate.allowed }),
        held: gate.held,
        notes: reflexNotes,
        novelty,
        identical,
        emotions,
        params,
        focus,
        stagnation,
        effects,
        actions,
        validatorTimeouts,
        validatorFailures,
        malformed,
      };
      await tx
        .update(llmRecentResponses)
        .set({
          reflexes: out as unknown as Record<string, unknown>,
          contentHash: hash,
          ...(identicalTo !== null ? { content: identicalPlaceholder(identicalTo) } : {}),
          novelty,
          ideas,
          tags: nov?.ok ? nov.tags : row.tags,
          emotions,
          rating: out.rating,
          validationMode: mode,
          validators: records,
          distribution: agg.distribution,
          stagnation: decision.stagnant,
          stagnationReason: decision.stagnant ? (diagnosis ?? `novelty ${novelty} < ${policy.lowNovelty}`) : null,
          stagnationActions: actions,
        })
        .where(eq(llmRecentResponses.id, row.id));
      return out;
    });
    if (result) return result;
    const [stored] = await db.select({ reflexes: llmRecentResponses.reflexes }).from(llmRecentResponses).where(eq(llmRecentResponses.id, row.id));
    return stored!.reflexes as unknown as TickReflexesResult;
  }

  /** The facts of the rows some commands act on, by cmd_id; a row that is not there (or not the agent's) is `target: null`. */
  async function targetFacts(agentId: string, needed: ReadonlyArray<{ cmdId: string; table: TargetTable; id: number }>): Promise<Record<string, CommandFacts>> {
    if (needed.length === 0) return {};
    const tables = { diary_entries: diaryEntries, llm_memory: llmMemory, concepts, links, goals, tasks } as const;
    const found = new Map<string, Record<string, unknown>>();
    await Promise.all(
      [...new Set(needed.map((n) => n.table))].map(async (name) => {
        const t = tables[name];
        const ids = [...new Set(needed.filter((n) => n.table === name).map((n) => n.id))];
        const rows = (await db.select().from(t).where(and(eq(t.agentId, agentId), inArray(t.id, ids)))) as Array<Record<string, unknown>>;
        for (const r of rows) found.set(`${name}#${String(r.id)}`, r);
      }),
    );
    const out: Record<string, CommandFacts> = {};
    for (const n of needed) {
      const r = found.get(`${n.table}#${n.id}`);
      out[n.cmdId] = { target: r ? { exists: true, source: r.source ?? 'agent', pinned: r.pinned, tags: r.tags, priority: r.priority, title: r.title ?? r.name, status: r.status } : null };
    }
    return out;
  }

  async function diagnosisInput(tx: Db, input: TickReflexesInput, previous: Array<{ tick: number; emotions: EmotionReading[]; contextMode: string }>) {
    const since = input.tick - 10;
    const [[n], [p], [d], [m], [c], [rest]] = await Promise.all([
      tx.select({ n: sql<number>`count(*)::int` }).from(notes).where(and(eq(notes.agentId, input.agentId), eq(notes.direction, 'in'), sql`coalesce(${notes.tickSeen}, ${input.tick}) > ${since}`)),
      tx.select({ n: sql<number>`count(*)::int` }).from(processLog).where(and(eq(processLog.agentId, input.agentId), gt(processLog.tick, since), sql`${processLog.kind} not in ('emotions', 'memory_manager')`)),
      tx.select({ n: sql<number>`count(*)::int` }).from(diaryEntries).where(and(eq(diaryEntries.agentId, input.agentId), isNull(diaryEntries.archivedAt))),
      tx.select({ n: sql<number>`count(*)::int` }).from(llmMemory).where(and(eq(llmMemory.agentId, input.agentId), isNull(llmMemory.archivedAt))),
      tx.select({ n: sql<number>`count(*)::int` }).from(concepts).where(and(eq(concepts.agentId, input.agentId), isNull(concepts.archivedAt))),
      tx.select({ t: sql<number | null>`max(${antiStagnationMetrics.tick})` }).from(antiStagnationMetrics).where(and(eq(antiStagnationMetrics.agentId, input.agentId), eq(antiStagnationMetrics.action, 'radical_pause'))),
    ]);
    let sameModeTicks = 1;
    for (const r of previous) {
      if (r.contextMode !== input.contextMode) break;
      sameModeTicks++;
    }
    const tired = previous.slice(0, 5).flatMap((r) => r.emotions.filter((e) => tiredEmotions.has(e.emotion)).map((e) => e.strength));
    return {
      newInputs: (n?.n ?? 0) + (p?.n ?? 0),
      sameModeTicks,
      dataRichness: (d?.n ?? 0) + (m?.n ?? 0) + (c?.n ?? 0),
      tiredness: tired.length ? tired.reduce((a, b) => a + b, 0) / Math.max(5, tired.length) : 0,
      ticksSinceRest: input.tick - (rest?.t ?? 0),
    };
  }

  async function applyStrategy(tx: Db, input: TickReflexesInput, p: { action?: StrategyAction; ticks?: number }, ownId: number | null): Promise<{ effects: LoopEffect[]; focus?: string; detail: string }> {
    switch (p.action) {
      case 'note_user':
        await tx.insert(notes).values({ agentId: input.agentId, direction: 'out', source: 'agent', recipient: 'user', priority: 2, tags: ['anti_stagnation'], text: 'I keep circling the same thoughts. Could you give me something new: a question, a task, or material to read?' });
        return { effects: [], detail: 'asked the user for input' };
      case 'context_mode': {
        const mode: ContextMode = input.contextMode === 'meditation' ? 'standard' : 'meditation';
        return { effects: [{ kind: 'setContextMode', mode }], detail: `context mode ${input.contextMode} → ${mode}` };
      }
      case 'flashback': {
        const [entry] = await tx.select().from(diaryEntries).where(and(eq(diaryEntries.agentId, input.agentId), isNull(diaryEntries.archivedAt))).orderBy(asc(diaryEntries.createdAt)).limit(1);
        if (!entry) return { effects: [], focus: 'Anti-stagnation flashback: your diary is empty. Write down what you have learned so far, then look for something new.', detail: 'no diary entry to recall' };
        return { effects: [], focus: `Anti-stagnation flashback — a distant diary entry #${entry.id} "${entry.title}": ${clip(entry.content, 600)}`, detail: `recalled diary #${entry.id}` };
      }
      case 'meta_analysis':
        return { effects: [], focus: 'Anti-stagnation meta-analysis: before anything else, analyse why your recent thoughts repeat and name one assumption to drop.', detail: 'meta-analysis prompt' };
      case 'switch_llm': {
        const rows = await tx.select().from(llmRegistry).where(and(eq(llmRegistry.agentId, input.agentId), eq(llmRegistry.role, 'agent'), eq(llmRegistry.enabled, true), eq(llmRegistry.excluded, false))).orderBy(asc(llmRegistry.priority), asc(llmRegistry.id));
        const current = rows.find((r) => r.id === ownId) ?? rows[0];
        if (!current || rows.length < 2) return { effects: [], detail: 'no other LLM to switch to' };
        const last = Math.max(...rows.map((r) => r.priority));
        await tx.update(llmRegistry).set({ priority: last + 1 }).where(eq(llmRegistry.id, current.id));
        return { effects: [], detail: `LLM ${current.name} moved behind the others` };
      }
      case 'pause': {
        const ticks = Math.max(1, Math.min(100, p.ticks ?? 3));
        return { effects: [{ kind: 'pause', ticks }], detail: `radical pause of ${ticks} ticks` };
      }
      default:
        return { effects: [], detail: `unknown strategy action ${String(p.action)}` };
    }
  }

  /** The memory manager over the short tier: archive by retention and LRU, log every decision. */
  async function manageMemory(tx: Db, agentId: string, tick: number, cfg: Record<string, unknown>): Promise<string[]> {
    const num = (v: unknown, d: number) => (typeof v === 'number' && Number.isFinite(v) ? v : d);
    const policy: MemoryPolicy = {
      noveltyThreshold: num(cfg.novelty_threshold, defaultMemoryPolicy.noveltyThreshold),
      lruLimit: num(cfg.lru_limit, defaultMemoryPolicy.lruLimit),
      emotionWeight: num(cfg.emotion_weight, defaultMemoryPolicy.emotionWeight),
      goalFocus: num(cfg.goal_focus, defaultMemoryPolicy.goalFocus),
      diversityBoost: num(cfg.diversity_boost, defaultMemoryPolicy.diversityBoost),
    };
    const [rows, goalRows] = await Promise.all([
      tx
        .select({ id: llmRecentResponses.id, tick: llmRecentResponses.tick, lastUsedTick: llmRecentResponses.lastUsedTick, novelty: llmRecentResponses.novelty, emotions: llmRecentResponses.emotions, tags: llmRecentResponses.tags })
        .from(llmRecentResponses)
        // The newest ticks are still the context's; only evaluated rows are judged.
        .where(and(eq(llmRecentResponses.agentId, agentId), isNull(llmRecentResponses.archivedAt), lt(llmRecentResponses.tick, tick - 5), sql`${llmRecentResponses.novelty} is not null`)),
      tx.select({ tags: goals.tags }).from(goals).where(and(eq(goals.agentId, agentId), eq(goals.status, 'active'))),
    ]);
    // LRU: a reply was last used when a context last showed it (tick.ts loadContext sets
    // last_used_tick), or when it was written if no context has shown it since.
    const plan = planMemory(
      rows.map((r) => ({ id: r.id, novelty: r.novelty, emotion: emotionIntensity(r.emotions), tags: r.tags, pinned: false, lastUsed: Math.max(r.tick, r.lastUsedTick ?? 0) })),
      goalRows.flatMap((g) => g.tags),
      policy,
    );
    const archive = plan.filter((d) => d.action === 'archive');
    if (archive.length) await tx.update(llmRecentResponses).set({ archivedAt: new Date() }).where(inArray(llmRecentResponses.id, archive.map((d) => d.id)));
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
      payload: { table: 'llm_recent_responses', id: d.id, action: d.action, reason: d.reason, retention: d.retention, policy },
    }));
    for (let i = 0; i < logRows.length; i += 500) await tx.insert(processLog).values(logRows.slice(i, i + 500));
    return [`memory_manager: ${archive.length} archived, ${plan.length - archive.length} kept`];
  }

  return {
    /** Emotions, novelty and anti-stagnation, validation for one tick of the main loop; idempotent on the response row. */
    tickReflexes,

    /** Restore an archived row of a memory tier (the memory manager's decisions are reversible). */
    restoreMemory: (input: RestoreInput) => {
      if (!restorableTables.includes(input.table)) throw nonRetryable('InvalidInput', `restore: unknown table ${String(input.table)} (expected ${restorableTables.join(', ')})`);
      return restoreArchived(db, input);
    },

    /** Record a fact-check's outcome (verified/rejected) and close its task. */
    resolveFact: async (input: ResolveFactInput): Promise<{ ok: boolean }> => ({ ok: (await resolveFact(db, input)).ok }),
  };
}

