/**
 * What the notebook (the web page `npm start` serves) reads: an agent's ticks with their
 * commands, verdicts and the exact prompt each tick sent its model (or, for a tick without one,
 * the records of what its context carried); its memory (diary,
 * goals, tasks, learnings with the reason they exist, facts, notes); what waits for a human
 * (escalations, danger-zone holds, fork gates); and the series its pictures draw. Read-only:
 * every change goes through a workflow's update or signal.
 */
import { and, asc, desc, eq, gte, inArray, isNull, lt, or, sql } from 'drizzle-orm';
import { agentShard, decayStep, learningDefaults } from '../../core/learnings.js';
import { available, regenerate } from '../../core/lifeforce.js';
import { workflowIds } from '../../core/ids.js';
import type { Db } from '../client.js';
import { stateOf } from './lifeforce.js';
import {
  agents,
  commandLog,
  decisionLog,
  diaryEntries,
  escalations,
  forks,
  goals,
  learnings,
  lifeforceBudgets,
  lifeforceLedger,
  llmCalls,
  llmRecentResponses,
  notes,
  tasks,
  tickPrompts,
  unverifiedFacts,
  verdicts,
} from '../schema/index.js';

/** One agent's row as the page heads it, or undefined. */
export async function agentRow(db: Db, agentId: string) {
  const [row] = await db
    .select({
      id: agents.id,
      name: agents.name,
      kind: agents.kind,
      status: agents.status,
      operatingMode: agents.operatingMode,
      parentId: agents.parentId,
      lastTick: agents.lastTick,
      lastSeenAt: agents.lastSeenAt,
      createdAt: agents.createdAt,
    })
    .from(agents)
    .where(eq(agents.id, agentId));
  return row;
}

/** Longest reply text a tick list row carries (the full text comes with the tick). */
const summaryChars = 400;

/** How a command of a tick ended, as a person reads it: run, kept for want of a rating, held for a human, or refused. */
type CommandOutcomeKind = 'applied' | 'unvalidated' | 'held' | 'rejected' | 'error';

/** The kind of one command_log row: a refusal whose reason says it was held is a hold. */
function commandKind(status: string, reason: string | null): CommandOutcomeKind {
  if (status === 'applied') return 'applied';
  if (status === 'unvalidated') return /^held\b/i.test(reason ?? '') ? 'held' : 'unvalidated';
  if (status === 'rejected') return /^held\b/i.test(reason ?? '') ? 'held' : 'rejected';
  return 'error';
}

/** The main loop's rows (a task loop's commands carry their own workflow id). */
function mainLoop(agentId: string) {
  return or(eq(commandLog.workflowId, workflowIds.agent(agentId)), isNull(commandLog.workflowId));
}

/** An agent's ticks, newest first: a page of `limit` before `before` (exclusive), each with its command counts. */
export async function tickPage(db: Db, agentId: string, o: { before?: number; limit: number }) {
  const rows = await db
    .select({
      tick: llmRecentResponses.tick,
      summary: sql<string>`left(${llmRecentResponses.content}, ${summaryChars})`,
      chars: sql<number>`length(${llmRecentResponses.content})::int`,
      novelty: llmRecentResponses.novelty,
      rating: llmRecentResponses.rating,
      validationMode: llmRecentResponses.validationMode,
      confidence: llmRecentResponses.confidence,
      emotions: llmRecentResponses.emotions,
      tags: llmRecentResponses.tags,
      stagnation: llmRecentResponses.stagnation,
      parseError: llmRecentResponses.parseError,
      contextMode: llmRecentResponses.contextMode,
      createdAt: llmRecentResponses.createdAt,
    })
    .from(llmRecentResponses)
    .where(
      and(
        eq(llmRecentResponses.agentId, agentId),
        o.before !== undefined ? lt(llmRecentResponses.tick, o.before) : undefined,
      ),
    )
    .orderBy(desc(llmRecentResponses.tick))
    .limit(o.limit);
  const ticks = rows.map((r) => r.tick);
  const counts = ticks.length
    ? await db
        .select({ tick: commandLog.tick, status: commandLog.status, reason: commandLog.reason })
        .from(commandLog)
        .where(and(eq(commandLog.agentId, agentId), inArray(commandLog.tick, ticks), mainLoop(agentId)))
    : [];
  const byTick = new Map<number, Record<CommandOutcomeKind, number>>();
  for (const c of counts) {
    const t = byTick.get(c.tick) ?? { applied: 0, unvalidated: 0, held: 0, rejected: 0, error: 0 };
    t[commandKind(c.status, c.reason)]++;
    byTick.set(c.tick, t);
  }
  return rows.map((r) => ({
    ...r,
    commands: byTick.get(r.tick) ?? { applied: 0, unvalidated: 0, held: 0, rejected: 0, error: 0 },
  }));
}

/**
 * One tick in full: the reply with its verdict, emotions and novelty; its commands and how each
 * ended; the model calls made for it; and its context: the exact messages its model was sent
 * (`prompt`, stored for the agent's recent ticks), and the rows that record what the context
 * carried (the notes it read, the previous tick's command results): all that a tick without a
 * stored prompt shows (one older than the agent's kept ticks, one recorded before prompts were
 * kept, one whose reply a retry re-read from an earlier attempt's model call).
 */
export async function tickDetail(db: Db, agentId: string, tick: number) {
  const [reply] = await db
    .select()
    .from(llmRecentResponses)
    .where(and(eq(llmRecentResponses.agentId, agentId), eq(llmRecentResponses.tick, tick)));
  if (!reply) return undefined;
  const commandColumns = {
    cmdId: commandLog.cmdId,
    type: commandLog.type,
    args: commandLog.args,
    description: commandLog.description,
    status: commandLog.status,
    reason: commandLog.reason,
    result: commandLog.result,
    rating: commandLog.rating,
    threshold: commandLog.threshold,
  };
  const [commands, previous, notesRead, calls, [prompt]] = await Promise.all([
    db
      .select(commandColumns)
      .from(commandLog)
      .where(and(eq(commandLog.agentId, agentId), eq(commandLog.tick, tick), mainLoop(agentId)))
      .orderBy(asc(commandLog.id)),
    db
      .select(commandColumns)
      .from(commandLog)
      .where(and(eq(commandLog.agentId, agentId), eq(commandLog.tick, tick - 1), mainLoop(agentId)))
      .orderBy(asc(commandLog.id)),
    db
      .select({
        id: notes.id,
        source: notes.source,
        sender: notes.sender,
        priority: notes.priority,
        tags: notes.tags,
        text: notes.text,
        createdAt: notes.createdAt,
      })
      .from(notes)
      .where(and(eq(notes.agentId, agentId), eq(notes.direction, 'in'), eq(notes.tickSeen, tick)))
      .orderBy(asc(notes.id)),
    db
      .select({
        purpose: llmCalls.purpose,
        provider: llmCalls.provider,
        model: llmCalls.model,
        ok: llmCalls.ok,
        error: llmCalls.error,
        promptTokens: llmCalls.promptTokens,
        completionTokens: llmCalls.completionTokens,
        latencyMs: llmCalls.latencyMs,
        costUsd: llmCalls.costUsd,
      })
      .from(llmCalls)
      // The main loop's calls of this tick: their request keys are `agent/<id>:<tick>:<purpose>…`.
      .where(
        and(
          eq(llmCalls.agentId, agentId),
          eq(llmCalls.tick, tick),
          sql`starts_with(${llmCalls.requestKey}, ${`${workflowIds.agent(agentId)}:${tick}:`})`,
        ),
      )
      .orderBy(asc(llmCalls.id)),
    db
      .select({ messages: tickPrompts.messages, chars: tickPrompts.chars, promptTokens: tickPrompts.promptTokens })
      .from(tickPrompts)
      .where(and(eq(tickPrompts.agentId, agentId), eq(tickPrompts.tick, tick))),
  ]);
  const withKind = <T extends { status: string; reason: string | null }>(rows: T[]) =>
    rows.map((c) => ({ ...c, kind: commandKind(c.status, c.reason) }));
  const { id: _id, agentId: _agent, contentHash: _hash, ...shown } = reply;
  return {
    reply: shown,
    commands: withKind(commands),
    calls,
    context: { prompt: prompt ?? null, notes: notesRead, previousResults: withKind(previous), previousTick: tick - 1 },
  };
}

/** Why a learning exists, in one line: the rule, pattern and count that produced it, or where it came from. */
function learningWhy(l: { derivation: Record<string, unknown> | null; sourceCampaign: string | null }): string {
  const d = l.derivation;
  if (d && typeof d.pattern === 'string')
    return `${typeof d.explain === 'string' ? d.explain : String(d.rule)}: "${d.pattern}" counted ${String(d.count)}× (threshold ${String(d.threshold)})`;
  if (l.sourceCampaign) return `from campaign ${l.sourceCampaign}`;
  return 'saved directly (no counted derivation)';
}

/** The agent's long-term memory as the notebook shows it: newest first, each list capped. */
export async function agentMemory(db: Db, agentId: string, limit = 50) {
  const [diary, goalRows, taskRows, learningRows, facts, noteRows] = await Promise.all([
    db
      .select({
        id: diaryEntries.id,
        title: diaryEntries.title,
        content: diaryEntries.content,
        source: diaryEntries.source,
        tags: diaryEntries.tags,
        emotions: diaryEntries.emotions,
        tick: diaryEntries.tick,
        pinned: diaryEntries.pinned,
        createdAt: diaryEntries.createdAt,
      })
      .from(diaryEntries)
      .where(and(eq(diaryEntries.agentId, agentId), isNull(diaryEntries.archivedAt)))
      .orderBy(desc(diaryEntries.id))
      .limit(limit),
    db
      .select({
        id: goals.id,
        title: goals.title,
        description: goals.description,
        status: goals.status,
        priority: goals.priority,
        failureReason: goals.failureReason,
        createdAt: goals.createdAt,
      })
      .from(goals)
      .where(eq(goals.agentId, agentId))
      .orderBy(desc(goals.id))
      .limit(limit),
    db
      .select({
        id: tasks.id,
        title: tasks.title,
        status: tasks.status,
        priority: tasks.priority,
        replStatus: tasks.replStatus,
        lastError: tasks.lastError,
        createdAt: tasks.createdAt,
      })
      .from(tasks)
      .where(eq(tasks.agentId, agentId))
      .orderBy(desc(tasks.id))
      .limit(limit),
    agentLearnings(db, agentId, limit),
    db
      .select({
        id: unverifiedFacts.id,
        fact: unverifiedFacts.fact,
        confidence: unverifiedFacts.confidence,
        status: unverifiedFacts.status,
        resolution: unverifiedFacts.resolution,
        sourceTick: unverifiedFacts.sourceTick,
        createdAt: unverifiedFacts.createdAt,
      })
      .from(unverifiedFacts)
      .where(eq(unverifiedFacts.agentId, agentId))
      .orderBy(desc(unverifiedFacts.id))
      .limit(limit),
    db
      .select({
        id: notes.id,
        direction: notes.direction,
        source: notes.source,
        sender: notes.sender,
        recipient: notes.recipient,
        text: notes.text,
        tags: notes.tags,
        tickSeen: notes.tickSeen,
        createdAt: notes.createdAt,
      })
      .from(notes)
      .where(and(eq(notes.agentId, agentId), eq(notes.hidden, false)))
      .orderBy(desc(notes.id))
      .limit(limit),
  ]);
  return { diary, goals: goalRows, tasks: taskRows, learnings: learningRows, facts, notes: noteRows };
}

/** The learnings of the agent's own shard (and any saved in its name), strongest first, each with why. */
async function agentLearnings(db: Db, agentId: string, limit: number) {
  const rows = await db
    .select({
      id: learnings.id,
      shardType: learnings.shardType,
      predicate: learnings.factPredicate,
      args: learnings.factArgs,
      confidence: learnings.confidence,
      reinforcements: learnings.reinforcements,
      learnedAt: learnings.learnedAt,
      derivation: learnings.derivation,
      sourceCampaign: learnings.sourceCampaign,
    })
    .from(learnings)
    .where(or(eq(learnings.shardType, agentShard(agentId)), eq(learnings.agentId, agentId)))
    .orderBy(desc(learnings.confidence), desc(learnings.learnedAt))
    .limit(limit);
  return rows.map(({ derivation, sourceCampaign, ...l }) => ({
    ...l,
    why: learningWhy({ derivation, sourceCampaign }),
  }));
}

/** Days a learning's confidence is projected over in the decay picture. */
const decayDays = 45;

/**
 * The series the agent's pictures draw: novelty and rating per tick, each validator's trust at
 * each tick it voted, each learning's confidence projected day by day under the daily decay
 * (if never reinforced again), and the lifeforce balance from the ledger.
 */
export async function agentSeries(db: Db, agentId: string, o: { ticks?: number; now?: Date } = {}) {
  const now = o.now ?? new Date();
  const recent = await db
    .select({
      tick: llmRecentResponses.tick,
      novelty: llmRecentResponses.novelty,
      rating: llmRecentResponses.rating,
      validators: llmRecentResponses.validators,
    })
    .from(llmRecentResponses)
    .where(eq(llmRecentResponses.agentId, agentId))
    .orderBy(desc(llmRecentResponses.tick))
    .limit(o.ticks ?? 200);
  recent.reverse();
  const trust: Record<string, Array<{ tick: number; trust: number }>> = {};
  for (const r of recent)
    for (const v of r.validators) if (!v.self) (trust[v.name] ??= []).push({ tick: r.tick, trust: v.trust });
  const learned = await agentLearnings(db, agentId, 12);
  const decay = learned.map((l) => {
    const points: Array<{ day: number; confidence: number }> = [{ day: 0, confidence: l.confidence }];
    let c = l.confidence;
    for (let d = 1; d <= decayDays; d++) {
      const s = decayStep({ confidence: c, learnedAt: l.learnedAt }, new Date(now.getTime() + d * 86_400_000));
      if (s.deleted) break;
      c = s.confidence;
      points.push({ day: d, confidence: c });
    }
    return { id: l.id, label: `#${l.id} ${l.predicate}`, points };
  });
  return {
    ticks: recent.map((r) => ({ tick: r.tick, novelty: r.novelty, rating: r.rating })),
    trust,
    decay: {
      loadAbove: learningDefaults.loadAbove,
      deleteBelow: learningDefaults.deleteBelow,
      days: decayDays,
      learnings: decay,
    },
    lifeforce: await lifeforceSeries(db, agentId, now),
  };
}

/** Ledger entries drawn, at most (the newest). */
const ledgerPoints = 300;

/**
 * The agent budget over time, walked back from its current row through the ledger: what it has
 * not spent (available plus what is held for running work: reservations, child budgets), which a
 * settle or a withdrawal lowers and a grant raises (a reserve and its release only move LF
 * between the two). Regeneration has no ledger entry, so before one the line is drawn lower
 * than it was. `available` is what could be reserved now. An unlimited budget has no balance:
 * its cumulative spend is drawn instead.
 */
async function lifeforceSeries(db: Db, agentId: string, now: Date) {
  const budgetId = `agent:${agentId}`;
  const [budget] = await db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, budgetId));
  if (!budget) return null;
  const entries = await db
    .select({ at: lifeforceLedger.createdAt, kind: lifeforceLedger.kind, amount: lifeforceLedger.amount })
    .from(lifeforceLedger)
    .where(
      and(
        eq(lifeforceLedger.budgetId, budgetId),
        inArray(lifeforceLedger.kind, ['settle', 'grant', 'withdraw']),
        gte(lifeforceLedger.createdAt, new Date(now.getTime() - 7 * 86_400_000)),
      ),
    )
    .orderBy(desc(lifeforceLedger.id))
    .limit(ledgerPoints);
  const state = regenerate(stateOf(budget), now.getTime());
  const unlimited = state.balance === null;
  // Walking back: `level` is the value after each entry, newest first.
  let level = unlimited ? state.spent : state.balance! + state.reserved;
  const points: Array<{ at: string; value: number }> = [{ at: now.toISOString(), value: round(level) }];
  for (const e of entries) {
    points.push({ at: e.at.toISOString(), value: round(level) });
    if (unlimited) level -= e.kind === 'settle' ? e.amount : 0;
    else level += e.kind === 'grant' ? -e.amount : e.amount;
  }
  points.reverse();
  return {
    budgetId,
    unlimited,
    capacity: state.capacity,
    available: available(state),
    measure: unlimited ? 'spent' : 'unspent',
    points,
  };
}

const round = (x: number) => Math.round(x * 100) / 100;

/** Escalation statuses that may still take a human answer. */
const openEscalationStatuses = ['open', 'in_progress', 'awaiting_human'] as const;

/**
 * What waits for a human: escalations not settled yet (a held danger-zone command among them,
 * marked by its danger flags) and fork verdicts at the human gate, with their deadlines.
 */
export async function inbox(db: Db, o: { agentId?: string; limit?: number } = {}) {
  const limit = o.limit ?? 200;
  const escalationRows = await db
    .select({
      id: escalations.id,
      agentId: escalations.agentId,
      task: escalations.task,
      category: escalations.category,
      status: escalations.status,
      whatITried: escalations.whatITried,
      solution: escalations.solution,
      teachingMoment: escalations.teachingMoment,
      deadlineAt: escalations.deadlineAt,
      createdAt: escalations.createdAt,
      dangerFlags: decisionLog.dangerFlags,
      proposal: decisionLog.proposal,
      oversightAnswer: decisionLog.oversightAnswer,
      tick: decisionLog.tick,
    })
    .from(escalations)
    .leftJoin(decisionLog, eq(decisionLog.escalationId, escalations.id))
    .where(
      and(
        inArray(escalations.status, [...openEscalationStatuses]),
        o.agentId ? eq(escalations.agentId, o.agentId) : undefined,
      ),
    )
    .orderBy(asc(escalations.deadlineAt), asc(escalations.createdAt))
    .limit(limit);
  const forkRows = await db
    .select({
      id: forks.id,
      agentId: forks.agentId,
      patch: forks.patch,
      status: forks.status,
      gate: forks.gate,
      createdAt: forks.createdAt,
      verdict: verdicts.verdict,
      confidence: verdicts.confidence,
      summary: verdicts.evaluationSummary,
      caveats: verdicts.caveats,
      artifacts: verdicts.artifacts,
      verdictAt: verdicts.createdAt,
    })
    .from(forks)
    .innerJoin(verdicts, eq(verdicts.forkId, forks.id))
    .where(and(eq(forks.gate, 'pending'), o.agentId ? eq(forks.agentId, o.agentId) : undefined))
    .orderBy(asc(forks.createdAt))
    .limit(limit);
  return {
    escalations: escalationRows.map((e) => ({
      ...e,
      dangerFlags: e.dangerFlags ?? [],
      kind: (e.dangerFlags ?? []).length ? ('danger_hold' as const) : ('escalation' as const),
    })),
    forks: forkRows,
  };
}
