/**
 * What the reflexes decided, recorded in one transaction on the tick's reply row: strategies
 * and their measured effect, trust and exclusions, new emotions, fact-checks, the memory
 * manager's archiving, and the verdict itself (the row's `reflexes` column, set first as the
 * claim: whoever sets it records the tick; a racing retry reads what the first recorded).
 */
import { and, asc, eq, inArray, isNotNull, isNull, ne, sql } from 'drizzle-orm';
import { mergeEmotionList, type EmotionReading } from '../../core/emotions.js';
import type { LoopEffect } from '../../core/loop-types.js';
import { identicalPlaceholder, type Ideas } from '../../core/novelty.js';
import { clipText } from '../../core/sanitize.js';
import {
  chooseStrategy,
  defaultStrategies,
  diagnose,
  rephrasePrompt,
  updateMeanEffect,
  type SamplingParams,
  type StagnationClass,
  type StagnationDecision,
  type StagnationPolicy,
  type StrategyAction,
} from '../../core/stagnation.js';
import { defaultTrustPolicy, isExcluded, updateTrust, type Aggregate, type ValidationMode, type ValidatorRecord } from '../../core/validation.js';
import type { Db } from '../../db/client.js';
import { agentConfig, antiStagnationMetrics, llmRecentResponses, llmRegistry, notes, processLog, stagnationStrategies, tasks, unverifiedFacts } from '../../db/schema/index.js';
import { manageMemory } from './memory-manager.js';
import { reflexSettings } from './settings.js';
import { applyStrategy, diagnosisInput } from './stagnation.js';
import { recordPeerValidatorTrust } from './peers.js';
import { peerToAsk } from '../../core/society/isolation.js';
import type { ReflexDeps, ReflexView, TickReflexesInput, TickReflexesResult } from './types.js';

/** Facts stated below this confidence need a fact-check. */
const factCheckThreshold = 0.7;
/** The same fact, however it is spaced or capitalised (matches the SQL in recordFacts). */
const factKey = (fact: string) => fact.trim().replace(/\s+/g, ' ').toLowerCase();
/** A fact-check task says how its outcome is recorded (activities/commands/facts.ts). */
const factCheckDescription = (source?: string) =>
  `${source ? `source: ${source}\n` : ''}Check this fact. Record the outcome with facts.resolve {fact_id, status: verified|rejected, evidence} (facts.list shows the ids), or set this task done (verified) or failed (rejected).`;

/** Everything tickReflexes worked out before recording it. */
interface ReflexDecisions {
  decision: StagnationDecision;
  policy: StagnationPolicy;
  novelty: number;
  similarity: number;
  anxietyStreak: number;
  params: SamplingParams;
  focus: string | null;
  actions: string[];
  mode: ValidationMode;
  agg: Aggregate;
  answered: ValidatorRecord[];
  records: ValidatorRecord[];
  emo: { readings: EmotionReading[]; unknown: string[]; malformed: string[] } | null;
  nov: { ok: true; tags: string[] } | { ok: false } | null;
  ideas: Ideas;
  hash: string;
  identicalTo: number | null;
  /** The verdict's fields that the recording does not change. */
  partial: Omit<TickReflexesResult, 'params' | 'focus' | 'stagnation' | 'effects' | 'actions'>;
}

/** A strategy's effect is due: record novelty after and fold it into the strategy's mean. */
async function evaluateStrategy(tx: Db, d: ReflexDecisions): Promise<void> {
  const evaluate = d.decision.evaluate;
  if (!evaluate) return;
  const effect = d.novelty - evaluate.noveltyBefore;
  await tx.update(antiStagnationMetrics).set({ noveltyAfter: d.novelty, effect, evaluatedAt: new Date() }).where(eq(antiStagnationMetrics.id, evaluate.metricId));
  const [s] = await tx.select().from(stagnationStrategies).where(eq(stagnationStrategies.id, evaluate.strategyId));
  // The mean is over measured effects: an application that was never evaluated (its run
  // ended first) must not count, so the earlier evaluations are counted, not the uses.
  const [done] = await tx
    .select({ n: sql<number>`count(*)::int` })
    .from(antiStagnationMetrics)
    .where(and(eq(antiStagnationMetrics.strategyId, evaluate.strategyId), isNotNull(antiStagnationMetrics.evaluatedAt), ne(antiStagnationMetrics.id, evaluate.metricId)));
  if (s) await tx.update(stagnationStrategies).set({ meanEffect: updateMeanEffect(s.meanEffect, done?.n ?? 0, effect) }).where(eq(stagnationStrategies.id, s.id));
  d.actions.push(`evaluated:${s?.name ?? evaluate.strategyId}:${effect >= 0 ? '+' : ''}${effect}`);
}

/** Stagnation: diagnose it, choose the strategy with the best record for the diagnosis, apply it. */
async function applyChosenStrategy(tx: Db, input: TickReflexesInput, view: ReflexView, d: ReflexDecisions, effects: LoopEffect[]) {
  let strategies = await tx.select().from(stagnationStrategies).where(eq(stagnationStrategies.agentId, input.agentId)).orderBy(asc(stagnationStrategies.id));
  // The built-in strategies an agent lacks are seeded by name: all of them for a new agent, the
  // ones added since for an older one. A strategy it has keeps its record (to retire a built-in
  // one, disable it: a deleted one comes back).
  const have = new Set(strategies.map((s) => s.name));
  const missing = defaultStrategies.filter((s) => !have.has(s.name));
  if (missing.length > 0) {
    const added = await tx
      .insert(stagnationStrategies)
      .values(missing.map((s) => ({ agentId: input.agentId, name: s.name, class: s.class, cost: s.cost, description: s.description, params: s.params })))
      .onConflictDoNothing()
      .returning();
    strategies = [...strategies, ...added];
  }
  // Asking a peer needs a reachable one (none while isolated): otherwise it is no candidate.
  const canAskPeer = peerToAsk(view.peers, Date.now()) !== null;
  const candidates = strategies.filter((s) => canAskPeer || (s.params as { action?: StrategyAction }).action !== 'ask_peers');
  const diag = await diagnosisInput(tx, input, view.previous);
  const evaluated = await tx
    .select({ id: antiStagnationMetrics.strategyId, n: sql<number>`count(*)::int` })
    .from(antiStagnationMetrics)
    .where(and(eq(antiStagnationMetrics.agentId, input.agentId), isNotNull(antiStagnationMetrics.strategyId), isNotNull(antiStagnationMetrics.evaluatedAt)))
    .groupBy(antiStagnationMetrics.strategyId);
  const diagnosis: StagnationClass = diagnose(diag);
  const evaluations = new Map(evaluated.map((e) => [e.id, e.n]));
  const chosen = chooseStrategy(candidates.map((s) => ({ ...s, evaluations: evaluations.get(s.id) ?? 0 })), diagnosis);
  if (!chosen) return { diagnosis, pending: null };
  const applied = await applyStrategy(tx, input, chosen.params as { action?: StrategyAction; ticks?: number }, view.reply.llmRegistryId, { peers: view.peers, novelty: d.novelty, thinking: view.reply.parsed.body });
  effects.push(...applied.effects);
  if (applied.focus) d.focus = applied.focus;
  await tx.update(stagnationStrategies).set({ uses: sql`${stagnationStrategies.uses} + 1`, lastUsedAt: new Date() }).where(eq(stagnationStrategies.id, chosen.id));
  const [m] = await tx
    .insert(antiStagnationMetrics)
    .values({ agentId: input.agentId, tick: input.tick, diagnosis, action: chosen.name, strategyId: chosen.id, noveltyBefore: d.novelty, params: { ...d.params, detail: applied.detail } })
    .returning({ id: antiStagnationMetrics.id });
  d.actions.push(`strategy:${chosen.name} (${diagnosis})`);
  return { diagnosis, pending: { strategyId: chosen.id, metricId: m!.id, tick: input.tick, noveltyBefore: d.novelty } };
}

/** Trust: answers far from the consensus lose trust, close ones regain it; low trust excludes. */
async function updateTrusts(tx: Db, input: TickReflexesInput, d: ReflexDecisions): Promise<void> {
  if (d.mode !== 'normal' || d.agg.rating === null || d.agg.blocked) return;
  for (const r of d.answered) {
    const trust = updateTrust(r.trust, r.rating!, d.agg.rating, defaultTrustPolicy);
    const excluded = isExcluded(trust, defaultTrustPolicy);
    if (trust === r.trust && !excluded) continue; // nothing moved: no write (the common, agreeing case)
    // A peer validator's weight is the agent's trust in the peer: the link's trust moves.
    if (r.peer !== undefined) {
      await recordPeerValidatorTrust(tx, input, r, trust, excluded, d.partial.notes);
      continue;
    }
    await tx
      .update(llmRegistry)
      .set({ trust, ...(excluded ? { excluded: true, excludedReason: `trust ${trust} below ${defaultTrustPolicy.exclude}: far from the consensus` } : {}), updatedAt: sql`${llmRegistry.updatedAt}` })
      .where(eq(llmRegistry.id, r.registryId));
    if (excluded) {
      await tx.insert(notes).values({ agentId: input.agentId, direction: 'in', source: 'system', priority: 3, tags: ['validation'], text: `Validator "${r.name}" (#${r.registryId}) was excluded: its trust fell to ${trust} (far from the consensus).` });
      d.partial.notes.push(`validator ${r.name} excluded (trust ${trust})`);
    }
  }
}

/** Emotions outside the configured list join it. */
async function recordNewEmotions(tx: Db, input: TickReflexesInput, known: string[], unknown: string[]): Promise<void> {
  if (!unknown.length) return;
  const merged = mergeEmotionList(known, unknown);
  await tx
    .insert(agentConfig)
    .values({ agentId: input.agentId, key: 'emotions', value: merged })
    .onConflictDoUpdate({ target: [agentConfig.agentId, agentConfig.key], set: { value: merged } });
  await tx.insert(processLog).values({ agentId: input.agentId, processId: 'emotions', kind: 'emotions', status: 'close', closedAt: new Date(), tick: input.tick, message: `new emotions added to the list: ${unknown.join(', ')}` });
}

/**
 * Unverified facts (confidence < 0.7) become pending rows and fact-check tasks — once: a fact
 * stated again while its check is still pending gets no second row or task.
 */
async function recordFacts(tx: Db, input: TickReflexesInput, view: ReflexView): Promise<void> {
  const stated = new Map<string, { fact: string; confidence: number; source?: string }>();
  for (const f of view.reply.parsed.unverifiedFacts) if (f.confidence < factCheckThreshold && !stated.has(factKey(f.fact))) stated.set(factKey(f.fact), f);
  const facts = [...stated.values()].slice(0, 10);
  if (facts.length === 0) return;
  const pending = await tx
    .select({ fact: unverifiedFacts.fact })
    .from(unverifiedFacts)
    .where(and(eq(unverifiedFacts.agentId, input.agentId), eq(unverifiedFacts.status, 'pending'), inArray(sql`lower(regexp_replace(btrim(${unverifiedFacts.fact}), '\\s+', ' ', 'g'))`, facts.map((f) => factKey(f.fact)))));
  const alreadyPending = new Set(pending.map((p) => factKey(p.fact)));
  for (const f of facts.filter((x) => !alreadyPending.has(factKey(x.fact)))) {
    const [task] = await tx.insert(tasks).values({ agentId: input.agentId, title: clipText(`Fact-check: ${f.fact}`, 200), description: factCheckDescription(f.source) }).returning({ id: tasks.id });
    await tx.insert(unverifiedFacts).values({ agentId: input.agentId, fact: f.fact, confidence: Math.max(0, Math.min(1, f.confidence)), sourceTick: input.tick, responseId: view.reply.id, taskId: task!.id });
  }
}

/** Record the tick's reflexes (see the module comment); returns the verdict in force, and whether this call recorded it. */
export async function recordReflexes(deps: ReflexDeps, input: TickReflexesInput, view: ReflexView, d: ReflexDecisions): Promise<{ result: TickReflexesResult; recorded: boolean }> {
  const { db } = deps;
  const memoryEvery = deps.memoryEvery ?? 10;
  const result = await db.transaction(async (t) => {
    const tx = t as unknown as Db;
    const claimed = await tx
      .update(llmRecentResponses)
      .set({ reflexes: { pending: true } })
      .where(and(eq(llmRecentResponses.id, view.reply.id), isNull(llmRecentResponses.reflexes)))
      .returning({ id: llmRecentResponses.id });
    if (!claimed[0]) return null;

    let stagnation = d.decision.state;
    const effects: LoopEffect[] = [];
    await evaluateStrategy(tx, d);
    let diagnosis: StagnationClass | null = null;
    if (d.decision.strategy) {
      const chosen = await applyChosenStrategy(tx, input, view, d, effects);
      diagnosis = chosen.diagnosis;
      if (chosen.pending) stagnation = { ...stagnation, pending: chosen.pending };
    }
    stagnation = { ...stagnation, anxietyStreak: d.anxietyStreak };
    // Per-tick metrics row (and the Reflex-lite intervention, when it fired).
    await tx.insert(antiStagnationMetrics).values({
      agentId: input.agentId,
      tick: input.tick,
      diagnosis,
      action: d.decision.reflexLite ? 'reflex_lite' : 'tick',
      noveltyBefore: d.novelty,
      params: { ...d.params, lowStreak: stagnation.lowStreak, anxietyStreak: d.anxietyStreak, similarity: Math.round(d.similarity * 1000) / 1000, rephrase: d.focus === rephrasePrompt },
    });
    await updateTrusts(tx, input, d);
    await recordNewEmotions(tx, input, reflexSettings(view.config).known, d.emo?.unknown ?? []);
    await recordFacts(tx, input, view);
    if (input.tick % memoryEvery === 0) d.actions.push(...(await manageMemory(tx, input.agentId, input.tick, view.config)));

    const out: TickReflexesResult = { ...d.partial, params: d.params, focus: d.focus, stagnation, effects, actions: d.actions };
    await tx
      .update(llmRecentResponses)
      .set({
        reflexes: out as unknown as Record<string, unknown>,
        contentHash: d.hash,
        ...(d.identicalTo !== null ? { content: identicalPlaceholder(d.identicalTo) } : {}),
        novelty: d.novelty,
        ideas: d.ideas,
        tags: d.nov?.ok ? d.nov.tags : view.reply.tags,
        emotions: d.partial.emotions,
        rating: out.rating,
        validationMode: d.mode,
        validators: d.records,
        distribution: d.agg.distribution,
        stagnation: d.decision.stagnant,
        stagnationReason: d.decision.stagnant ? (diagnosis ?? `novelty ${d.novelty} < ${d.policy.lowNovelty}`) : null,
        stagnationActions: d.actions,
      })
      .where(eq(llmRecentResponses.id, view.reply.id));
    return out;
  });
  if (result) return { result, recorded: true };
  const [stored] = await db.select({ reflexes: llmRecentResponses.reflexes }).from(llmRecentResponses).where(eq(llmRecentResponses.id, view.reply.id));
  return { result: stored!.reflexes as unknown as TickReflexesResult, recorded: false };
}
