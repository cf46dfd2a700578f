/**
 * Nerve activities: one decision of a nerve (core/nerves/) on one observation. Who decides
 * follows the mode (core/nerves/modes.ts `choose`): the LLM, a learned rule, or the compiled
 * table. Each decision holds its state's cost on the nerve's lifeforce budget before it runs
 * and settles it after; the LLM call is charged by the router, to the same budget. The
 * decision's row and the learning it causes are written together (db/queries/nerves.ts), so a
 * retry with the same key finds the first attempt's decision instead of deciding again.
 *
 * A nerve in reflex decides in its workflow instead (core/nerves/arc.ts): `nerveArmReflex` leases
 * its budget for the next decisions and compiles the table; `nerveFlushReflex` records what the
 * workflow decided on it, learns from it and settles the lease.
 */
import { ApplicationFailure } from '@temporalio/activity';
import { z } from 'zod';
import { agentIdSchema } from '../core/ids.js';
import { budgetIds, defaultPrices, lfCeil, lfRound, type PriceTable } from '../core/lifeforce.js';
import { nerveNames, nerves } from '../core/nerves/index.js';
import { affordable, arcCost, leaseCostPerDecision, maxArcSize } from '../core/nerves/arc.js';
import {
  choose,
  compileTable,
  defaultLearning,
  learn,
  learningConfigSchema,
  modeOf,
  modeSettings,
  type DecidedBy,
  type Learner,
  type LearningConfig,
  type NerveEvent,
  type NerveMode,
  type TransitionTable,
} from '../core/nerves/modes.js';
import {
  actionSchema,
  judge,
  nervePrompt,
  observationSchema,
  parseAction,
  stateCost,
  type NerveDef,
  type Outcome,
} from '../core/nerves/nerve.js';
import { clipText } from '../core/sanitize.js';
import { transition } from '../core/state-machines.js';
import type { Db } from '../db/client.js';
import {
  carveBudget,
  release,
  reopened,
  reserve,
  settle,
  type ReserveRequest,
  type ReserveResult,
} from '../db/queries/lifeforce.js';
import {
  decisionByKey,
  eventsOfDecision,
  loadLearner,
  recordDecision,
  recordDecisions,
  type NewNerveDecision,
} from '../db/queries/nerves.js';
import type { NerveDecisionRow } from '../db/schema/nerves.js';
import { parseInput } from './errors.js';
import { activityContext, withHeartbeat } from './heartbeat.js';
import {
  LifeforceExhaustedError,
  LlmUnavailable,
  LlmUnavailableError,
  type ChatResult,
  type LlmRouter,
} from './llm/index.js';

interface NerveDeps {
  db: Db;
  llm: LlmRouter;
  /** The price table the decision's `lf` prices the LLM call by (the router's). */
  prices?: PriceTable;
}

/** How long a decision's hold may stay open before the sweep returns it (its worker died). */
const holdTtlMs = 60_000;
/**
 * How long a reflex arc's lease may stay open. The workflow makes the leased decisions and
 * schedules the flush in the workflow task that receives the lease (the decisions are pure), so
 * this only has to outlast a worker's crash and the workflow's replay elsewhere; a lease whose
 * workflow is gone is released by the sweep after it.
 */
const leaseTtlMs = 10 * 60_000;

const nerveDecideInput = z
  .strictObject({
    agentId: agentIdSchema,
    nerve: z.enum(nerveNames),
    state: z.string().min(1).max(64),
    observation: observationSchema,
    mode: z.enum(modeSettings).default('auto'),
    /** Workflow id + run + step: the decision's idempotency key (and its LLM call's). */
    key: z.string().min(1).max(400),
    /** The decision's time in ms (the workflow's clock). */
    at: z.number().int().min(0),
    learning: learningConfigSchema.optional(),
  })
  .superRefine((d, ctx) => {
    if (!nerves[d.nerve].machine.states[d.state])
      ctx.addIssue({ code: 'custom', path: ['state'], message: `'${d.state}' is not a state of the ${d.nerve} nerve` });
  });
export type NerveDecideInput = z.input<typeof nerveDecideInput>;
type Decide = z.output<typeof nerveDecideInput>;

export interface NerveDecideResult {
  /** null: the model named no valid action; the nerve stays in its state. */
  action: string | null;
  to: string;
  decidedBy: DecidedBy;
  /** The mode the decision was made in. */
  mode: NerveMode;
  /** The mode the nerve's rules have earned after it. */
  modeAfter: NerveMode;
  outcome: Outcome;
  /** The state's cost, plus the LLM call's as priced. */
  lf: number;
  latencyMs: number;
  /** Promotions and demotions this decision caused. */
  events: NerveEvent[];
  /** A retry that found the decision already made. */
  replayed: boolean;
}

const nerveArmReflexInput = z.strictObject({
  agentId: agentIdSchema,
  nerve: z.enum(nerveNames),
  /** A forced reflex arms always; `auto` only where the rules have earned reflex. */
  mode: z.enum(['auto', 'reflex']),
  /** Workflow id + run + the lease's first step: the lease's ledger key. */
  key: z.string().min(1).max(400),
  /** Decisions to lease (fewer when the budget covers fewer). */
  decisions: z.number().int().min(1).max(maxArcSize),
  /** The time in ms (the workflow's clock). */
  at: z.number().int().min(0),
  learning: learningConfigSchema.optional(),
});
export type NerveArmReflexInput = z.input<typeof nerveArmReflexInput>;
type ArmReflex = z.output<typeof nerveArmReflexInput>;

type NerveArmReflexResult =
  | {
      armed: true;
      /** The lease's ledger key: the flush settles it. */
      leaseKey: string;
      /** Decisions the lease covers. */
      decisions: number;
      /** LF held: `decisions` × `perDecision`. */
      reserved: number;
      /** The costliest state's cost, what each leased decision is held at. */
      perDecision: number;
      table: TransitionTable;
      /** The mode the rules have earned. */
      mode: NerveMode;
    }
  /** `auto` on a nerve whose rules do not earn reflex (any more): decide with `nerveDecide`. */
  | { armed: false; mode: NerveMode };

const arcDecisionSchema = z.strictObject({
  key: z.string().min(1).max(400),
  state: z.string().min(1).max(64),
  bucket: z.string().min(1).max(64),
  action: z.string().min(1).max(64),
  to: z.string().min(1).max(64),
  outcome: z.enum(['ok', 'bad']).nullable(),
  lf: z.number().min(0).max(1_000_000),
  at: z.number().int().min(0),
});

const nerveFlushReflexInput = z
  .strictObject({
    agentId: agentIdSchema,
    nerve: z.enum(nerveNames),
    /** The lease the decisions were made on (nerveArmReflex's `leaseKey`). */
    leaseKey: z.string().min(1).max(500),
    /** The buffered decisions, in order (core/nerves/arc.ts ArcDecision). */
    decisions: z.array(arcDecisionSchema).max(maxArcSize),
    learning: learningConfigSchema.optional(),
  })
  .superRefine((f, ctx) => {
    const { states } = nerves[f.nerve].machine;
    f.decisions.forEach((d, i) => {
      if (!states[d.state])
        ctx.addIssue({
          code: 'custom',
          path: ['decisions', i, 'state'],
          message: `'${d.state}' is not a state of the ${f.nerve} nerve`,
        });
    });
  });
export type NerveFlushReflexInput = z.input<typeof nerveFlushReflexInput>;

interface NerveFlushReflexResult {
  /** Decisions recorded now (fewer than flushed: a retry found them recorded). */
  recorded: number;
  /** Promotions and demotions the decisions caused (a demotion of the rule that decided badly). */
  events: NerveEvent[];
  /** The mode the nerve's rules have earned after them. */
  modeAfter: NerveMode;
  /** What the lease was settled at: the decisions' state costs. */
  charged: number;
  /** The lease had been settled before (a retry). */
  replayed: boolean;
}

/** The LF of a call as the price table prices it: its USD price and its tokens (core/lifeforce.ts llmCost). */
function callLf(prices: PriceTable, r: ChatResult): number {
  return lfCeil(
    r.costUsd * prices.lfPerUsd + ((r.usage.promptTokens + r.usage.completionTokens) / 1000) * prices.lfPer1kTokens,
  );
}

/**
 * A nerve spends its own budget, carved from the agent's on first use (the carve creates the
 * agent's budget, unlimited, if it has none yet).
 */
async function openNerveBudget(db: Db, agentId: string, nerve: string, at: number): Promise<void> {
  await carveBudget(db, {
    parentId: budgetIds.agent(agentId),
    id: budgetIds.nerve(agentId, nerve),
    agentId,
    scope: 'nerve',
    amount: null,
    at,
  });
}

/** A budget that cannot cover what a nerve needs: the non-retryable `LifeforceExhausted` the workflow pauses on. */
function exhausted(
  agentId: string,
  refused: { budgetId: string; reason: string; needed: number; available: number | null },
): LifeforceExhaustedError {
  return new LifeforceExhaustedError(refused.budgetId, refused.reason, refused.needed, refused.available, agentId);
}

/** The hold of a decision's state cost on the nerve's budget. */
function holdRequest(d: Decide, cost: number): ReserveRequest {
  return {
    key: `nerve:${d.key}`,
    budgetId: budgetIds.nerve(d.agentId, d.nerve),
    amount: cost,
    operation: 'nerve',
    ttlMs: holdTtlMs,
    at: d.at,
    reason: `${d.nerve} ${d.state}`,
  };
}

/**
 * The hold `first` (already asked for), with the nerve's budget opened if it had none: the ledger
 * key it is held under. A budget that cannot cover it stops the nerve (non-retryable).
 */
async function holdCost(db: Db, d: Decide, cost: number, first: Promise<ReserveResult>): Promise<string> {
  const req = holdRequest(d, cost);
  let held = await first;
  if (!held.ok && held.reason === 'missing') {
    await openNerveBudget(db, d.agentId, d.nerve, d.at);
    held = await reserve(db, req);
  }
  // Closed already (released when the LLM's budget refused, or by the sweep): hold anew.
  if (held.ok && held.closed) held = await reserve(db, reopened(req));
  if (!held.ok) throw exhausted(d.agentId, held);
  return held.key;
}

/**
 * The lease of a reflex arc: `decisions` × the costliest state's cost held on the nerve's budget
 * (opened if it had none). A budget that cannot cover them all leases as many as it covers; one
 * that cannot cover one decision stops the nerve (non-retryable). A retry finds its first
 * attempt's lease.
 */
async function holdLease(
  db: Db,
  d: ArmReflex,
  perDecision: number,
): Promise<{ leaseKey: string; decisions: number; reserved: number }> {
  const budgetId = budgetIds.nerve(d.agentId, d.nerve);
  const request = (key: string, n: number): ReserveRequest => ({
    key,
    budgetId,
    amount: lfRound(n * perDecision),
    operation: 'nerve',
    ttlMs: leaseTtlMs,
    at: d.at,
    reason: `${d.nerve} reflex arc: ${n} decisions`,
    metadata: { decisions: n },
  });
  const base = `nerve-arc:${d.key}`;
  let key = base;
  let n = d.decisions;
  let held = await reserve(db, request(key, n));
  if (!held.ok && held.reason === 'missing') {
    await openNerveBudget(db, d.agentId, d.nerve, d.at);
    held = await reserve(db, request(key, n));
  }
  if (!held.ok && held.reason !== 'closed' && held.reason !== 'missing') {
    // The refused hold wrote nothing: the same key, for as many as the budget covers.
    n = affordable(n, perDecision, held.available);
    if (n === 0) throw exhausted(d.agentId, { ...held, needed: perDecision });
    held = await reserve(db, request(key, n));
  }
  // Closed already: a lease armed at this step was flushed before the run continued as new. The
  // next free key is found again by a retry (no random suffix), so a retry never holds twice.
  for (let i = 2; held.ok && held.closed; i++) {
    if (i > 20) throw new Error(`nerveArmReflex: ${base} was leased and closed ${i - 1} times`);
    key = `${base}#${i}`;
    held = await reserve(db, request(key, n));
  }
  if (!held.ok) throw exhausted(d.agentId, held);
  // A retry's hold is the first attempt's, whose size the budget may have set lower.
  const decisions = held.replayed && perDecision > 0 ? Math.round(held.amount / perDecision) : n;
  return { leaseKey: key, decisions, reserved: held.amount };
}

/**
 * A lease the sweep released before its flush came (its workflow was away past the deadline):
 * the decisions are charged anew under a key of their own, found again by a retry. A budget that
 * cannot cover them now leaves them recorded and uncharged (they were made; nothing is overspent).
 */
async function chargeLate(
  db: Db,
  f: { agentId: string; nerve: string; leaseKey: string; decisions: readonly { at: number }[] },
  cost: number,
): Promise<number> {
  const key = `${f.leaseKey}/late`;
  const at = Math.max(...f.decisions.map((d) => d.at));
  const held = await reserve(db, {
    key,
    budgetId: budgetIds.nerve(f.agentId, f.nerve),
    amount: cost,
    operation: 'nerve',
    ttlMs: leaseTtlMs,
    at,
    reason: `${f.nerve} reflex arc: ${f.decisions.length} decisions flushed after their lease was released`,
  });
  if (!held.ok) {
    activityContext()?.log.warn(
      'nerve decisions recorded uncharged: their lease was released and the budget cannot cover them now',
      { leaseKey: f.leaseKey, cost, reason: held.reason },
    );
    return 0;
  }
  return (await settle(db, key, cost, { lateFor: f.leaseKey })).charged;
}

/** Ask the LLM: the action its reply names (null when none), the reply when unreadable, the call's LF. */
async function askModel(
  deps: NerveDeps,
  def: NerveDef,
  d: Decide,
  holdKey: string,
): Promise<{ action: string | null; reply: string | null; lf: number }> {
  try {
    const result = await withHeartbeat(
      (signal) =>
        deps.llm.chat({
          agentId: d.agentId,
          role: 'agent',
          purpose: 'nerve',
          messages: nervePrompt(def, d.state, d.observation),
          idempotencyKey: d.key,
          // One action of the state's (held to it where the provider takes a schema); greedy,
          // since it is a decision and not prose.
          params: { maxTokens: 16, temperature: 0, jsonSchema: actionSchema(def, d.state) },
          workflowId: activityContext()?.info.workflowExecution?.workflowId,
          lifeforce: { budgetId: budgetIds.nerve(d.agentId, d.nerve), at: d.at },
          ...(signal ? { signal } : {}),
        }),
      { details: { waitingFor: 'llm' } },
    );
    const action = parseAction(def, d.state, result.text);
    return {
      action,
      reply: action === null ? clipText(result.text, 200) : null,
      lf: callLf(deps.prices ?? defaultPrices, result),
    };
  } catch (err) {
    // The decision will not be made now: its hold goes back (a later attempt holds anew).
    if (err instanceof LifeforceExhaustedError || err instanceof LlmUnavailableError)
      await release(deps.db, holdKey, `decision not made: ${err.message}`);
    if (err instanceof LlmUnavailableError) {
      throw ApplicationFailure.create({
        type: LlmUnavailable,
        message: err.message,
        nonRetryable: true,
        details: [{ agentId: err.agentId, role: err.role, attempts: err.attempts }],
      });
    }
    throw err;
  }
}

function resultOf(
  row: NerveDecisionRow,
  modeAfter: NerveMode,
  events: NerveEvent[],
  replayed: boolean,
): NerveDecideResult {
  return {
    action: row.action,
    to: row.toState,
    decidedBy: row.decidedBy,
    mode: row.mode,
    modeAfter,
    outcome: row.outcome,
    lf: row.lf,
    latencyMs: row.latencyMs,
    events,
    replayed,
  };
}

/** A retry of a decision already made: its row and events; its hold settled (once) if the first attempt stopped short. */
async function replay(
  db: Db,
  row: NerveDecisionRow,
  learner: Learner,
  cfg: LearningConfig,
  cost: number,
): Promise<NerveDecideResult> {
  const [events] = await Promise.all([
    eventsOfDecision(db, row.id),
    row.ledgerKey ? settle(db, row.ledgerKey, cost) : undefined,
  ]);
  return resultOf(row, modeOf(learner, cfg), events, true);
}

/** Nerve activities for the `mindloop` queue. */
export function createNerveActivities(deps: NerveDeps) {
  const { db } = deps;
  return {
    /**
     * One decision of a nerve in `state` on `observation`: by the LLM, a rule or the table as
     * the mode says; its state's cost held and settled on the nerve's budget; recorded and
     * learned from. An unreadable reply is a bad decision and the nerve stays in its state. A
     * budget that cannot cover the decision (or the LLM call) fails it as the non-retryable
     * `LifeforceExhausted`; no LLM answering, as `LlmUnavailable`.
     */
    async nerveDecide(input: NerveDecideInput): Promise<NerveDecideResult> {
      const started = performance.now();
      const d = parseInput('nerveDecide', nerveDecideInput, input);
      const def = nerves[d.nerve];
      const cfg = d.learning ?? defaultLearning;
      const cost = stateCost(def, d.state);
      const bucket = def.bucket(d.observation);
      // The hold, the retry check and the learning are independent: one round trip's wait for all three.
      const first = reserve(db, holdRequest(d, cost));
      // Awaited below on every path; this only keeps an early return from leaving it unhandled.
      void first.catch(() => undefined);
      const [stored, learner] = await Promise.all([
        decisionByKey(db, d.key),
        loadLearner(db, d.agentId, d.nerve, cfg.window),
      ]);
      if (stored) {
        await first.catch(() => undefined);
        return replay(db, stored, learner, cfg, cost);
      }
      const holdKey = await holdCost(db, d, cost, first);

      const choice = choose(d.mode, learner, cfg, def, d.state, bucket);
      const asked =
        choice.by === 'llm' ? await askModel(deps, def, d, holdKey) : { action: choice.action, reply: null, lf: 0 };
      const latencyMs = Math.round(performance.now() - started);
      const outcome = judge(def, d.state, d.observation, asked.action);
      const moved = asked.action === null ? null : transition(def.machine, d.state, asked.action);
      const to = moved?.ok ? moved.to : d.state;
      const fact = { state: d.state, bucket, action: asked.action, decidedBy: choice.by, outcome, at: d.at };
      const [, recorded] = await Promise.all([
        settle(db, holdKey, cost),
        recordDecision(
          db,
          {
            agentId: d.agentId,
            nerve: d.nerve,
            ...fact,
            toState: to,
            mode: choice.mode,
            lf: lfRound(cost + asked.lf),
            latencyMs,
            reply: asked.reply,
            ledgerKey: holdKey,
            key: d.key,
          },
          cfg,
        ),
      ]);
      const after = learn(learner, fact, cfg).learner;
      return resultOf(recorded.row, modeOf(after, cfg), recorded.events, !recorded.recorded);
    },

    /**
     * Arm a nerve's reflex arc: its table compiled from the rules, and a lease on its budget for
     * the next decisions (each at the costliest state's cost), which the workflow then decides
     * itself. `auto` arms only where the rules have earned reflex. A budget that cannot cover one
     * decision fails it as the non-retryable `LifeforceExhausted`.
     */
    async nerveArmReflex(input: NerveArmReflexInput): Promise<NerveArmReflexResult> {
      const d = parseInput('nerveArmReflex', nerveArmReflexInput, input);
      const def = nerves[d.nerve];
      const cfg = d.learning ?? defaultLearning;
      const learner = await loadLearner(db, d.agentId, d.nerve, cfg.window);
      const mode = modeOf(learner, cfg);
      if (d.mode === 'auto' && mode !== 'reflex') return { armed: false, mode };
      const perDecision = leaseCostPerDecision(def);
      const lease = await holdLease(db, d, perDecision);
      return { armed: true, ...lease, perDecision, table: compileTable(learner, def), mode };
    },

    /**
     * Flush a reflex arc: the decisions the workflow made on its table recorded in one insert
     * (by the table, in reflex, under the lease's ledger key), the learning they cause (a rule
     * that decided badly is demoted), and the lease settled at their state costs. Idempotent: a
     * retry records, learns and charges nothing twice.
     */
    async nerveFlushReflex(input: NerveFlushReflexInput): Promise<NerveFlushReflexResult> {
      const f = parseInput('nerveFlushReflex', nerveFlushReflexInput, input);
      const cfg = f.learning ?? defaultLearning;
      const rows: NewNerveDecision[] = f.decisions.map((d) => ({
        agentId: f.agentId,
        nerve: f.nerve,
        state: d.state,
        bucket: d.bucket,
        action: d.action,
        toState: d.to,
        decidedBy: 'table',
        mode: 'reflex',
        outcome: d.outcome,
        lf: d.lf,
        // Decided in workflow code, well under a millisecond.
        latencyMs: 0,
        reply: null,
        ledgerKey: f.leaseKey,
        key: d.key,
        at: d.at,
      }));
      const cost = arcCost(f.decisions);
      // The settle and the record are independent and each idempotent: one round trip's wait for both.
      const [closed, recorded] = await Promise.all([
        settle(db, f.leaseKey, cost, { decisions: f.decisions.length }),
        recordDecisions(db, rows, cfg),
      ]);
      // Closed before at nothing while the decisions cost something: released, not settled by an earlier attempt.
      const charged =
        closed.replayed && closed.charged === 0 && cost > 0 ? await chargeLate(db, f, cost) : closed.charged;
      // After the record: the mode follows the demotions and the recent window it just changed.
      const learner = await loadLearner(db, f.agentId, f.nerve, cfg.window);
      return {
        recorded: recorded.recorded,
        events: recorded.events,
        modeAfter: modeOf(learner, cfg),
        charged,
        replayed: closed.replayed,
      };
    },
  };
}
