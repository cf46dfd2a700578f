/**
 * Nerve decisions and their learning on the tables of db/schema/nerves.ts. A decision's row and
 * the learning it causes are written in one transaction, guarded by the decision's idempotency
 * key: a retried decision finds its row (and its events) instead of counting twice. A reflex
 * arc's buffered decisions are written the same way, in one multi-row insert.
 */
import { and, desc, eq, inArray, sql } from 'drizzle-orm';
import {
  learnKey,
  undoKey,
  type DecidedBy,
  type KeyStats,
  type Learner,
  type LearningConfig,
  type NerveEvent,
  type NerveMode,
} from '../../core/nerves/modes.js';
import type { Outcome } from '../../core/nerves/nerve.js';
import type { Db } from '../client.js';
import {
  nerveDecisions,
  nerveRuleEvents,
  nerveRules,
  type NerveDecisionRow,
  type NerveRuleEventRow,
  type NerveRuleRow,
} from '../schema/nerves.js';
import type { Queryable } from './abstracts.js';

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

/** A case's learning as core/nerves/modes.ts reads it. */
function statsOf(row: NerveRuleRow): KeyStats {
  return {
    state: row.state,
    bucket: row.bucket,
    counts: row.counts,
    rule:
      row.action === null
        ? null
        : {
            action: row.action,
            support: row.support,
            agreement: row.agreement,
            promotedAt: row.promotedAt?.getTime() ?? 0,
          },
  };
}

/** The columns of a case's learning (the rule's, or zeros without one). */
function columnsOf(s: KeyStats) {
  return {
    action: s.rule?.action ?? null,
    support: s.rule?.support ?? 0,
    agreement: s.rule?.agreement ?? 0,
    counts: s.counts,
  };
}

export async function decisionByKey(q: Queryable, key: string): Promise<NerveDecisionRow | undefined> {
  const [row] = await q.select().from(nerveDecisions).where(eq(nerveDecisions.idempotencyKey, key));
  return row;
}

/** The promotions and demotions a decision caused, in order. */
export async function eventsOfDecision(q: Queryable, decisionId: number): Promise<NerveEvent[]> {
  const rows = await q
    .select({ event: nerveRuleEvents.event })
    .from(nerveRuleEvents)
    .where(eq(nerveRuleEvents.decisionId, decisionId))
    .orderBy(nerveRuleEvents.id);
  return rows.map((r) => r.event as unknown as NerveEvent);
}

/** A nerve's learning: every case it decided, and the cases of its last `window` decisions. */
export async function loadLearner(q: Queryable, agentId: string, nerve: string, window: number): Promise<Learner> {
  const [rows, recent] = await Promise.all([
    q
      .select()
      .from(nerveRules)
      .where(and(eq(nerveRules.agentId, agentId), eq(nerveRules.nerve, nerve))),
    q
      .select({ state: nerveDecisions.state, bucket: nerveDecisions.bucket })
      .from(nerveDecisions)
      .where(and(eq(nerveDecisions.agentId, agentId), eq(nerveDecisions.nerve, nerve)))
      .orderBy(desc(nerveDecisions.id))
      .limit(window),
  ]);
  const keys: Learner['keys'] = {};
  for (const r of rows) keys[`${r.state}/${r.bucket}`] = statsOf(r);
  return { keys, recent: recent.reverse().map((r) => `${r.state}/${r.bucket}`) };
}

export interface NewNerveDecision {
  agentId: string;
  nerve: string;
  state: string;
  bucket: string;
  action: string | null;
  toState: string;
  decidedBy: DecidedBy;
  mode: NerveMode;
  outcome: Outcome;
  lf: number;
  latencyMs: number;
  reply: string | null;
  ledgerKey: string | null;
  key: string;
  /** The decision's time (ms): promotions and demotions are stamped with it. */
  at: number;
}

interface RecordedDecision {
  /** False: the key was recorded before (a retry); `row` and `events` are the first attempt's. */
  recorded: boolean;
  row: NerveDecisionRow;
  events: NerveEvent[];
}

async function insertEvents(
  tx: Tx,
  d: Pick<NewNerveDecision, 'agentId' | 'nerve'>,
  events: NerveEvent[],
  decisionId: number,
): Promise<void> {
  if (events.length === 0) return;
  await tx.insert(nerveRuleEvents).values(
    events.map((e) => ({
      agentId: d.agentId,
      nerve: d.nerve,
      kind: e.kind,
      state: e.state,
      bucket: e.bucket,
      action: e.action,
      support: e.support,
      agreement: e.agreement,
      decisionId,
      event: e as unknown as Record<string, unknown>,
    })),
  );
}

/** The case's row, created if new, locked for the rest of the transaction. */
async function lockCase(
  tx: Tx,
  c: { agentId: string; nerve: string; state: string; bucket: string },
): Promise<NerveRuleRow> {
  const [row] = await tx
    .insert(nerveRules)
    .values(c)
    .onConflictDoUpdate({
      target: [nerveRules.agentId, nerveRules.nerve, nerveRules.state, nerveRules.bucket],
      set: { updatedAt: sql`${nerveRules.updatedAt}` },
    })
    .returning();
  return row!;
}

/** The row of a decision. */
function rowOf(d: NewNerveDecision) {
  return {
    agentId: d.agentId,
    nerve: d.nerve,
    state: d.state,
    bucket: d.bucket,
    action: d.action,
    toState: d.toState,
    decidedBy: d.decidedBy,
    mode: d.mode,
    outcome: d.outcome,
    lf: d.lf,
    latencyMs: d.latencyMs,
    reply: d.reply,
    ledgerKey: d.ledgerKey,
    idempotencyKey: d.key,
  };
}

/** Only the model's choices and bad outcomes can change a case; the rest is an insert alone. */
const learnsFrom = (d: Pick<NewNerveDecision, 'decidedBy' | 'outcome'>) => d.decidedBy === 'llm' || d.outcome === 'bad';

/**
 * Record a decision and learn from it (core/nerves/modes.ts `learnKey`): the case's counters,
 * its rule, and the promotion or demotion events. A decision that cannot change the learning
 * (a rule's or the table's that went well, or one nothing judged) is a single insert.
 */
export async function recordDecision(
  db: Db,
  d: NewNerveDecision,
  cfg: Pick<LearningConfig, 'promoteAfter' | 'agreement'>,
): Promise<RecordedDecision> {
  const values = rowOf(d);
  const done = learnsFrom(d)
    ? await db.transaction(async (tx) => {
        const [row] = await tx.insert(nerveDecisions).values(values).onConflictDoNothing().returning();
        return row ? { recorded: true, row, events: await learnFrom(tx, d, row.id, cfg) } : undefined;
      })
    : await db
        .insert(nerveDecisions)
        .values(values)
        .onConflictDoNothing()
        .returning()
        .then(([row]) => (row ? { recorded: true, row, events: [] } : undefined));
  if (done) return done;
  const row = await decisionByKey(db, d.key);
  if (!row) throw new Error(`nerve_decisions: the row of ${d.key} vanished`);
  return { recorded: false, row, events: await eventsOfDecision(db, row.id) };
}

interface RecordedDecisions {
  /** How many were recorded now; fewer than asked: the rest were recorded before (a retry). */
  recorded: number;
  /** The promotions and demotions the decisions caused, in order (a retry's are the first attempt's). */
  events: NerveEvent[];
}

/** The promotions and demotions of the decisions under these keys, in order. */
async function eventsOfDecisionKeys(q: Queryable, keys: string[]): Promise<NerveEvent[]> {
  if (keys.length === 0) return [];
  const rows = await q
    .select({ event: nerveRuleEvents.event })
    .from(nerveRuleEvents)
    .innerJoin(nerveDecisions, eq(nerveDecisions.id, nerveRuleEvents.decisionId))
    .where(inArray(nerveDecisions.idempotencyKey, keys))
    .orderBy(nerveRuleEvents.id);
  return rows.map((r) => r.event as unknown as NerveEvent);
}

/**
 * Record decisions in one multi-row insert, in order, and learn from those that can change a
 * case (as `recordDecision`, each on its locked case), all in one transaction when any learns:
 * the rows and their learning land together or not at all. Idempotent by each decision's key: a
 * retried batch records and learns nothing twice, and answers with the first attempt's events.
 */
export async function recordDecisions(
  db: Db,
  ds: NewNerveDecision[],
  cfg: Pick<LearningConfig, 'promoteAfter' | 'agreement'>,
): Promise<RecordedDecisions> {
  if (ds.length === 0) return { recorded: 0, events: [] };
  const values = ds.map(rowOf);
  const inserted = ds.some(learnsFrom)
    ? await db.transaction(async (tx) => {
        const rows = await tx
          .insert(nerveDecisions)
          .values(values)
          .onConflictDoNothing()
          .returning({ id: nerveDecisions.id, key: nerveDecisions.idempotencyKey });
        const ids = new Map(rows.map((r) => [r.key, r.id]));
        const events: NerveEvent[] = [];
        for (const d of ds) {
          const id = ids.get(d.key);
          if (id !== undefined && learnsFrom(d)) events.push(...(await learnFrom(tx, d, id, cfg)));
        }
        return { recorded: rows.length, events };
      })
    : {
        recorded: (
          await db.insert(nerveDecisions).values(values).onConflictDoNothing().returning({ id: nerveDecisions.id })
        ).length,
        events: [],
      };
  if (inserted.recorded === ds.length) return inserted;
  return {
    recorded: inserted.recorded,
    events: await eventsOfDecisionKeys(
      db,
      ds.map((d) => d.key),
    ),
  };
}

/** Apply one decision to its case (locked): the new counters and rule, and its events logged. */
async function learnFrom(
  tx: Tx,
  d: NewNerveDecision,
  decisionId: number,
  cfg: Pick<LearningConfig, 'promoteAfter' | 'agreement'>,
): Promise<NerveEvent[]> {
  const locked = await lockCase(tx, { agentId: d.agentId, nerve: d.nerve, state: d.state, bucket: d.bucket });
  const before = statsOf(locked);
  const { stats, events } = learnKey(before, d, cfg);
  if (stats === before) return events;
  const promoted = events.find((e) => e.kind === 'promote');
  const demoted = events.find((e) => e.kind === 'demote');
  await tx
    .update(nerveRules)
    .set({
      ...columnsOf(stats),
      ...(promoted ? { promotedAt: new Date(promoted.at) } : {}),
      ...(demoted ? { demotedAt: new Date(demoted.at) } : {}),
    })
    .where(eq(nerveRules.id, locked.id));
  await insertEvents(tx, d, events, decisionId);
  return events;
}

type UndoOutcome = { ok: true; undoId: number; event: NerveEvent } | { ok: false; reason: string };

/**
 * Reverse a promotion or a demotion by its event id (core/nerves/modes.ts `undoKey`): the case
 * goes back, and an `undo` event records it. Refused when the case has moved on (the rule was
 * demoted since, or a new one promoted), or when the event was undone already.
 */
export async function undoRuleEvent(db: Db, eventId: number): Promise<UndoOutcome> {
  return db.transaction(async (tx) => {
    const [ev] = await tx.select().from(nerveRuleEvents).where(eq(nerveRuleEvents.id, eventId));
    if (!ev) return { ok: false as const, reason: `no nerve event #${eventId}` };
    if (ev.kind === 'undo') return { ok: false as const, reason: `event #${eventId} is an undo itself` };
    const [again] = await tx
      .select({ id: nerveRuleEvents.id })
      .from(nerveRuleEvents)
      .where(eq(nerveRuleEvents.undoes, eventId));
    if (again) return { ok: false as const, reason: `event #${eventId} was undone already (#${again.id})` };
    const event = ev.event as unknown as NerveEvent;
    const locked = await lockCase(tx, { agentId: ev.agentId, nerve: ev.nerve, state: ev.state, bucket: ev.bucket });
    const r = undoKey(statsOf(locked), event);
    if (!r.ok) return r;
    await tx
      .update(nerveRules)
      .set({ ...columnsOf(r.value), ...(r.value.rule ? { promotedAt: new Date(r.value.rule.promotedAt) } : {}) })
      .where(eq(nerveRules.id, locked.id));
    const [row] = await tx
      .insert(nerveRuleEvents)
      .values({
        agentId: ev.agentId,
        nerve: ev.nerve,
        kind: 'undo',
        state: ev.state,
        bucket: ev.bucket,
        action: ev.action,
        support: ev.support,
        agreement: ev.agreement,
        undoes: ev.id,
        event: ev.event,
      })
      .returning({ id: nerveRuleEvents.id });
    return { ok: true as const, undoId: row!.id, event };
  });
}

/** A nerve's cases (its rules where `action` is set), by state and bucket. */
export async function nerveRuleRows(q: Queryable, agentId: string, nerve: string): Promise<NerveRuleRow[]> {
  return q
    .select()
    .from(nerveRules)
    .where(and(eq(nerveRules.agentId, agentId), eq(nerveRules.nerve, nerve)))
    .orderBy(nerveRules.state, nerveRules.bucket);
}

/** A nerve's promotions, demotions and undos, newest first. */
export async function nerveRuleEventRows(
  q: Queryable,
  agentId: string,
  nerve: string,
  limit = 50,
): Promise<NerveRuleEventRow[]> {
  return q
    .select()
    .from(nerveRuleEvents)
    .where(and(eq(nerveRuleEvents.agentId, agentId), eq(nerveRuleEvents.nerve, nerve)))
    .orderBy(desc(nerveRuleEvents.id))
    .limit(limit);
}

export interface NerveDecisionCount {
  mode: NerveMode;
  decidedBy: DecidedBy;
  decisions: number;
  bad: number;
  lf: number;
}

/** How a nerve's decisions were made: per mode and decider, how many, how many went wrong, their LF. */
export async function nerveDecisionCounts(q: Queryable, agentId: string, nerve: string): Promise<NerveDecisionCount[]> {
  const rows = await q
    .select({
      mode: nerveDecisions.mode,
      decidedBy: nerveDecisions.decidedBy,
      decisions: sql<number>`count(*)::int`,
      bad: sql<number>`(count(*) filter (where ${nerveDecisions.outcome} = 'bad'))::int`,
      lf: sql<string>`coalesce(sum(${nerveDecisions.lf}), 0)`,
    })
    .from(nerveDecisions)
    .where(and(eq(nerveDecisions.agentId, agentId), eq(nerveDecisions.nerve, nerve)))
    .groupBy(nerveDecisions.mode, nerveDecisions.decidedBy)
    .orderBy(nerveDecisions.mode, nerveDecisions.decidedBy);
  return rows.map((r) => ({ ...r, lf: Number(r.lf) }));
}
