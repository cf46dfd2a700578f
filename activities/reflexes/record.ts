/**
 * What the reflexes decided, recorded on the tick's reply row: strategies and their measured
 * effect, trust and exclusions, new emotions, fact-checks, the memory manager's archiving, and
 * the verdict itself (the row's `reflexes` column). The verdict is written last, only where the
 * column is still empty: whoever writes it records the tick, and an attempt that finds it written
 * (a racing retry) rolls back what it wrote before it and reads the first one's. A tick with
 * nothing to write beside the verdict (most ticks) records it in one statement, with no
 * transaction around it.
 */
import { and, asc, eq, inArray, isNotNull, isNull, ne, sql, TransactionRollbackError } from 'drizzle-orm';
import { mergeEmotionList } from '../../core/emotions.js';
import type { LoopEffect } from '../../core/loop-types.js';
import { identicalPlaceholder, reflectionOf, type Ideas } from '../../core/novelty.js';
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
  type StagnationState,
  type StrategyAction,
} from '../../core/stagnation.js';
import {
  defaultTrustPolicy,
  isExcluded,
  updateTrust,
  type Aggregate,
  type ValidationMode,
  type ValidatorRecord,
} from '../../core/validation.js';
import type { Db } from '../../db/client.js';
import { rowOf, rowsOf } from '../../db/json-rows.js';
import { executeNamed } from '../../db/prepared.js';
import {
  agentConfig,
  antiStagnationMetrics,
  llmRecentResponses,
  llmRegistry,
  notes,
  processLog,
  stagnationStrategies,
  tasks,
  unverifiedFacts,
} from '../../db/schema/index.js';
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

/**
 * What the reflexes decided before recording it, by step. Recording adds to the verdict (a
 * strategy's actions, focus and effects, trust notes, the memory manager's actions) and
 * returns it whole.
 */
export interface ReflexDecisions {
  /** The verdict as decided so far. */
  verdict: Omit<TickReflexesResult, 'stagnation' | 'effects'>;
  /** Anti-stagnation: the decision for this tick and what its metrics row keeps. */
  stagnation: { decision: StagnationDecision; policy: StagnationPolicy; anxietyStreak: number; similarity: number };
  /** Validation: the consensus, and the validators' answers (all of them, and those that rated) for their trust. */
  validation: { agg: Aggregate; records: ValidatorRecord[]; answered: ValidatorRecord[] };
  /** What the reply's row keeps beside the verdict, and the emotions new to the agent's list. */
  reply: { hash: string; identicalTo: number | null; ideas: Ideas; tags: string[]; newEmotions: string[] };
}

/** A strategy's effect is due: record novelty after and fold it into the strategy's mean; returns the action to report. */
async function evaluateStrategy(
  tx: Db,
  evaluate: StagnationDecision['evaluate'],
  novelty: number,
): Promise<string | null> {
  if (!evaluate) return null;
  const effect = novelty - evaluate.noveltyBefore;
  // The metrics row evaluated, with the strategy and (the mean is over measured effects: an
  // application never evaluated, its run ended first, must not count) its earlier evaluations.
  const evaluated = tx
    .update(antiStagnationMetrics)
    .set({ noveltyAfter: novelty, effect, evaluatedAt: new Date() })
    .where(eq(antiStagnationMetrics.id, evaluate.metricId));
  const earlier = tx
    .select({ n: sql<number>`count(*)::int` })
    .from(antiStagnationMetrics)
    .where(
      and(
        eq(antiStagnationMetrics.strategyId, evaluate.strategyId),
        isNotNull(antiStagnationMetrics.evaluatedAt),
        ne(antiStagnationMetrics.id, evaluate.metricId),
      ),
    );
  const read = await executeNamed<Record<string, unknown> & { done: number }>(
    tx,
    'reflexes',
    sql`with evaluated as (${evaluated.getSQL()})
      select s.*, (${earlier.getSQL()}) as done from ${stagnationStrategies} s where s.id = ${evaluate.strategyId}`,
  );
  const raw = read.rows[0];
  const s = raw ? rowOf(stagnationStrategies, raw) : undefined;
  if (s)
    await executeNamed(
      tx,
      'reflexes',
      tx
        .update(stagnationStrategies)
        .set({ meanEffect: updateMeanEffect(s.meanEffect, Number(raw!.done), effect) })
        .where(eq(stagnationStrategies.id, s.id)),
    );
  return `evaluated:${s?.name ?? evaluate.strategyId}:${effect >= 0 ? '+' : ''}${effect}`;
}

/** What applying a strategy gives the verdict: its diagnosis, the evaluation it leaves pending, its effects, the focus it sets and its action. */
interface StrategyApplied {
  diagnosis: StagnationClass;
  pending: StagnationState['pending'];
  effects: LoopEffect[];
  focus?: string;
  action?: string;
}

/** Stagnation: diagnose it, choose the strategy with the best record for the diagnosis, apply it. */
async function applyChosenStrategy(
  tx: Db,
  input: TickReflexesInput,
  view: ReflexView,
  novelty: number,
  params: SamplingParams,
): Promise<StrategyApplied> {
  let strategies = rowsOf(
    stagnationStrategies,
    (
      await executeNamed(
        tx,
        'reflexes',
        tx
          .select()
          .from(stagnationStrategies)
          .where(eq(stagnationStrategies.agentId, input.agentId))
          .orderBy(asc(stagnationStrategies.id)),
      )
    ).rows,
  );
  // The built-in strategies an agent lacks are seeded by name: all of them for a new agent, the
  // ones added since for an older one. A strategy it has keeps its record (to retire a built-in
  // one, disable it: a deleted one comes back).
  const have = new Set(strategies.map((s) => s.name));
  const missing = defaultStrategies.filter((s) => !have.has(s.name));
  if (missing.length > 0) {
    const added = await tx
      .insert(stagnationStrategies)
      .values(
        missing.map((s) => ({
          agentId: input.agentId,
          name: s.name,
          class: s.class,
          cost: s.cost,
          description: s.description,
          params: s.params,
        })),
      )
      .onConflictDoNothing()
      .returning();
    strategies = [...strategies, ...added];
  }
  // Asking a peer needs a reachable one (none while isolated): otherwise it is no candidate.
  const canAskPeer = peerToAsk(view.peers, Date.now()) !== null;
  const candidates = strategies.filter(
    (s) => canAskPeer || (s.params as { action?: StrategyAction }).action !== 'ask_peers',
  );
  const diag = await diagnosisInput(tx, input, view.previous);
  const diagnosis: StagnationClass = diagnose(diag);
  const chosen = chooseStrategy(
    candidates.map((s) => ({ ...s, evaluations: diag.evaluations.get(s.id) ?? 0 })),
    diagnosis,
  );
  if (!chosen) return { diagnosis, pending: null, effects: [] };
  const applied = await applyStrategy(
    tx,
    input,
    chosen.params as { action?: StrategyAction; ticks?: number },
    view.reply.llmRegistryId,
    { peers: view.peers, novelty, thinking: view.reply.parsed.body },
  );
  // The strategy's use and its metrics row, in one statement.
  const used = tx
    .update(stagnationStrategies)
    .set({ uses: sql`${stagnationStrategies.uses} + 1`, lastUsedAt: new Date() })
    .where(eq(stagnationStrategies.id, chosen.id));
  const metric = tx
    .insert(antiStagnationMetrics)
    .values({
      agentId: input.agentId,
      tick: input.tick,
      diagnosis,
      action: chosen.name,
      strategyId: chosen.id,
      noveltyBefore: novelty,
      params: { ...params, detail: applied.detail },
    })
    .returning({ id: antiStagnationMetrics.id });
  const [m] = (
    await executeNamed<{ id: string | number }>(tx, 'reflexes', sql`with used as (${used.getSQL()}) ${metric.getSQL()}`)
  ).rows;
  return {
    diagnosis,
    pending: { strategyId: chosen.id, metricId: Number(m!.id), tick: input.tick, noveltyBefore: novelty },
    effects: applied.effects,
    ...(applied.focus ? { focus: applied.focus } : {}),
    action: `strategy:${chosen.name} (${diagnosis})`,
  };
}

/** Trust: answers far from the consensus lose trust, close ones regain it; low trust excludes. Returns the verdict's notes of it. */
/** A validator whose trust moves (or which falls below the exclusion threshold) with this verdict. */
interface TrustChange {
  record: ValidatorRecord;
  trust: number;
  excluded: boolean;
}

/** The validators whose trust this verdict moves: none unless the verdict is a normal, unblocked consensus. */
function trustChanges(mode: ValidationMode, { agg, answered }: ReflexDecisions['validation']): TrustChange[] {
  if (mode !== 'normal' || agg.rating === null || agg.blocked) return [];
  const changes: TrustChange[] = [];
  for (const r of answered) {
    const trust = updateTrust(r.trust, r.rating!, agg.rating, defaultTrustPolicy);
    const excluded = isExcluded(trust, defaultTrustPolicy);
    if (trust !== r.trust || excluded) changes.push({ record: r, trust, excluded }); // agreeing: no write
  }
  return changes;
}

async function updateTrusts(tx: Db, input: TickReflexesInput, changes: TrustChange[]): Promise<string[]> {
  const notesOut: string[] = [];
  for (const { record: r, trust, excluded } of changes) {
    // A peer validator's weight is the agent's trust in the peer: the link's trust moves.
    if (r.peer !== undefined) {
      await recordPeerValidatorTrust(tx, input, r, trust, excluded, notesOut);
      continue;
    }
    await tx
      .update(llmRegistry)
      .set({
        trust,
        ...(excluded
          ? {
              excluded: true,
              excludedReason: `trust ${trust} below ${defaultTrustPolicy.exclude}: far from the consensus`,
            }
          : {}),
        updatedAt: sql`${llmRegistry.updatedAt}`,
      })
      .where(eq(llmRegistry.id, r.registryId));
    if (excluded) {
      await tx.insert(notes).values({
        agentId: input.agentId,
        direction: 'in',
        source: 'system',
        priority: 3,
        tags: ['validation'],
        text: `Validator "${r.name}" (#${r.registryId}) was excluded: its trust fell to ${trust} (far from the consensus).`,
      });
      notesOut.push(`validator ${r.name} excluded (trust ${trust})`);
    }
  }
  return notesOut;
}

/** Emotions outside the configured list join it. */
async function recordNewEmotions(tx: Db, input: TickReflexesInput, known: string[], unknown: string[]): Promise<void> {
  if (!unknown.length) return;
  const merged = mergeEmotionList(known, unknown);
  await tx
    .insert(agentConfig)
    .values({ agentId: input.agentId, key: 'emotions', value: merged })
    .onConflictDoUpdate({ target: [agentConfig.agentId, agentConfig.key], set: { value: merged } });
  await tx.insert(processLog).values({
    agentId: input.agentId,
    processId: 'emotions',
    kind: 'emotions',
    status: 'close',
    closedAt: new Date(),
    tick: input.tick,
    message: `new emotions added to the list: ${unknown.join(', ')}`,
  });
}

/** The reply's unverified facts (confidence < 0.7) that need a check, each once, at most ten. */
function factsToCheck(view: ReflexView): StatedFact[] {
  const stated = new Map<string, StatedFact>();
  for (const f of view.reply.parsed.unverifiedFacts)
    if (f.confidence < factCheckThreshold && !stated.has(factKey(f.fact))) stated.set(factKey(f.fact), f);
  return [...stated.values()].slice(0, 10);
}

type StatedFact = { fact: string; confidence: number; source?: string };

/**
 * The facts to check become pending rows and fact-check tasks — once: a fact stated again while
 * its check is still pending gets no second row or task.
 */
async function recordFacts(tx: Db, input: TickReflexesInput, view: ReflexView, facts: StatedFact[]): Promise<void> {
  if (facts.length === 0) return;
  const pending = await tx
    .select({ fact: unverifiedFacts.fact })
    .from(unverifiedFacts)
    .where(
      and(
        eq(unverifiedFacts.agentId, input.agentId),
        eq(unverifiedFacts.status, 'pending'),
        inArray(
          sql`lower(regexp_replace(btrim(${unverifiedFacts.fact}), '\\s+', ' ', 'g'))`,
          facts.map((f) => factKey(f.fact)),
        ),
      ),
    );
  const alreadyPending = new Set(pending.map((p) => factKey(p.fact)));
  for (const f of facts.filter((x) => !alreadyPending.has(factKey(x.fact)))) {
    const [task] = await tx
      .insert(tasks)
      .values({
        agentId: input.agentId,
        title: clipText(`Fact-check: ${f.fact}`, 200),
        description: factCheckDescription(f.source),
      })
      .returning({ id: tasks.id });
    await tx.insert(unverifiedFacts).values({
      agentId: input.agentId,
      fact: f.fact,
      confidence: Math.max(0, Math.min(1, f.confidence)),
      sourceTick: input.tick,
      responseId: view.reply.id,
      taskId: task!.id,
    });
  }
}

/**
 * The verdict on the reply's row, and the tick's metrics row with it, where no verdict is
 * recorded yet (one statement: data-modifying CTEs). Returns whether this call wrote it.
 */
async function writeVerdict(
  tx: Db,
  input: TickReflexesInput,
  view: ReflexView,
  d: ReflexDecisions,
  out: TickReflexesResult,
  diagnosis: StagnationClass | null,
): Promise<boolean> {
  const { verdict, stagnation: st, validation, reply } = d;
  const recorded = tx
    .update(llmRecentResponses)
    .set({
      reflexes: out as unknown as Record<string, unknown>,
      contentHash: reply.hash,
      ...(reply.identicalTo !== null ? { content: identicalPlaceholder(reply.identicalTo) } : {}),
      novelty: verdict.novelty,
      ideas: reply.ideas,
      reflection: reflectionOf(reply.ideas),
      tags: reply.tags,
      emotions: verdict.emotions,
      rating: out.rating,
      validationMode: verdict.validationMode,
      validators: validation.records,
      distribution: validation.agg.distribution,
      stagnation: st.decision.stagnant,
      stagnationReason: st.decision.stagnant
        ? (diagnosis ?? `novelty ${verdict.novelty} < ${st.policy.lowNovelty}`)
        : null,
      stagnationActions: out.actions,
    })
    .where(and(eq(llmRecentResponses.id, view.reply.id), isNull(llmRecentResponses.reflexes)))
    .returning({ id: llmRecentResponses.id });
  // The per-tick metrics row (and the Reflex-lite intervention, when it fired), only beside a
  // verdict this statement wrote.
  const params = {
    ...verdict.params,
    lowStreak: out.stagnation.lowStreak,
    anxietyStreak: st.anxietyStreak,
    similarity: Math.round(st.similarity * 1000) / 1000,
    rephrase: out.focus === rephrasePrompt,
  };
  const m = antiStagnationMetrics;
  const column = (c: { name: string }) => sql.identifier(c.name);
  const r = await executeNamed<{ n: number }>(
    tx,
    'reflexes',
    sql`with recorded as (${recorded.getSQL()}),
      metrics as (
        insert into ${m} (${column(m.agentId)}, ${column(m.tick)}, ${column(m.diagnosis)}, ${column(m.action)}, ${column(m.noveltyBefore)}, ${column(m.params)})
        select ${input.agentId}::text, ${input.tick}::bigint, ${diagnosis}::text, ${st.decision.reflexLite ? 'reflex_lite' : 'tick'}::text, ${verdict.novelty}::real, ${JSON.stringify(params)}::jsonb
        from recorded
      )
      select count(*)::int as n from recorded`,
  );
  return Number(r.rows[0]?.n ?? 0) > 0;
}

/** Record the tick's reflexes (see the module comment); returns the verdict in force, and whether this call recorded it. */
export async function recordReflexes(
  deps: ReflexDeps,
  input: TickReflexesInput,
  view: ReflexView,
  d: ReflexDecisions,
): Promise<{ result: TickReflexesResult; recorded: boolean }> {
  const { db } = deps;
  const { verdict, stagnation: st } = d;
  // What is written beside the verdict, each step's input; on most ticks, nothing.
  const beside = {
    evaluate: st.decision.evaluate,
    strategy: st.decision.strategy,
    trust: trustChanges(verdict.validationMode, d.validation),
    newEmotions: d.reply.newEmotions,
    facts: factsToCheck(view),
    memoryTick: input.tick % (deps.memoryEvery ?? 10) === 0,
  };
  const alone =
    !beside.evaluate &&
    !beside.strategy &&
    beside.trust.length === 0 &&
    beside.newEmotions.length === 0 &&
    beside.facts.length === 0 &&
    !beside.memoryTick;

  /** Everything the verdict decided, the verdict last; null when another attempt recorded it first. */
  const record = async (tx: Db): Promise<TickReflexesResult | null> => {
    const actions = [...verdict.actions];
    let focus = verdict.focus;
    let stagnation = st.decision.state;
    const effects: LoopEffect[] = [];
    const evaluated = await evaluateStrategy(tx, beside.evaluate, verdict.novelty);
    if (evaluated) actions.push(evaluated);
    let diagnosis: StagnationClass | null = null;
    if (beside.strategy) {
      const chosen = await applyChosenStrategy(tx, input, view, verdict.novelty, verdict.params);
      diagnosis = chosen.diagnosis;
      effects.push(...chosen.effects);
      if (chosen.focus) focus = chosen.focus;
      if (chosen.action) actions.push(chosen.action);
      if (chosen.pending) stagnation = { ...stagnation, pending: chosen.pending };
    }
    stagnation = { ...stagnation, anxietyStreak: st.anxietyStreak };
    const trustNotes = await updateTrusts(tx, input, beside.trust);
    await recordNewEmotions(tx, input, reflexSettings(view.config).known, beside.newEmotions);
    await recordFacts(tx, input, view, beside.facts);
    if (beside.memoryTick) actions.push(...(await manageMemory(tx, input.agentId, input.tick, view.config)));
    const out: TickReflexesResult = {
      ...verdict,
      notes: [...verdict.notes, ...trustNotes],
      focus,
      stagnation,
      effects,
      actions,
    };
    return (await writeVerdict(tx, input, view, d, out, diagnosis)) ? out : null;
  };

  // With nothing beside it, the verdict's statement is the whole record; otherwise a transaction,
  // rolled back when the verdict was recorded meanwhile.
  const result = alone
    ? await record(db)
    : await db
        .transaction(async (t) => (await record(t as unknown as Db)) ?? t.rollback())
        .catch((err: unknown) => {
          if (err instanceof TransactionRollbackError) return null;
          throw err;
        });
  if (result) return { result, recorded: true };
  const [stored] = await db
    .select({ reflexes: llmRecentResponses.reflexes })
    .from(llmRecentResponses)
    .where(eq(llmRecentResponses.id, view.reply.id));
  return { result: stored!.reflexes as unknown as TickReflexesResult, recorded: false };
}
