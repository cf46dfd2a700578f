/**
 * Nerve activities: one decision of a nerve (core/nerves/) on one observation. Who decides
 * follows the mode (core/nerves/modes.ts `choose`): the LLM, a learned rule, or the compiled
 * table. Each decision holds its state's cost on the nerve's lifeforce budget before it runs
 * and settles it after; the LLM call is charged by the router, to the same budget. The
 * decision's row and the learning it causes are written together (db/queries/nerves.ts), so a
 * retry with the same key finds the first attempt's decision instead of deciding again.
 */
import { randomUUID } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/activity';
import { z } from 'zod';
import { agentIdSchema } from '../core/ids.js';
import { budgetIds, defaultPrices, lfCeil, lfRound, type PriceTable } from '../core/lifeforce.js';
import { nerveNames, nerves } from '../core/nerves/index.js';
import { choose, defaultLearning, learn, learningConfigSchema, modeOf, modeSettings, type DecidedBy, type Learner, type LearningConfig, type NerveEvent, type NerveMode } from '../core/nerves/modes.js';
import { actionSchema, judge, nervePrompt, observationSchema, parseAction, stateCost, type NerveDef, type Outcome } from '../core/nerves/nerve.js';
import { clipText } from '../core/sanitize.js';
import { transition } from '../core/state-machines.js';
import { formatIssues } from '../core/zod-issues.js';
import type { Db } from '../db/client.js';
import { carveBudget, ensureBudget, release, reserve, settle, type ReserveRequest, type ReserveResult } from '../db/queries/lifeforce.js';
import { decisionByKey, eventsOfDecision, loadLearner, recordDecision } from '../db/queries/nerves.js';
import type { NerveDecisionRow } from '../db/schema/nerves.js';
import { ErrorType, nonRetryable } from './errors.js';
import { activityContext, withHeartbeat } from './heartbeat.js';
import { LifeforceExhaustedError, LlmUnavailable, LlmUnavailableError, type ChatResult, type LlmRouter } from './llm/index.js';

export interface NerveDeps {
  db: Db;
  llm: LlmRouter;
  /** The price table the decision's `lf` prices the LLM call by (the router's). */
  prices?: PriceTable;
}

/** How long a decision's hold may stay open before the sweep returns it (its worker died). */
const holdTtlMs = 60_000;

export const nerveDecideInput = z
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
    if (!nerves[d.nerve].machine.states[d.state]) ctx.addIssue({ code: 'custom', path: ['state'], message: `'${d.state}' is not a state of the ${d.nerve} nerve` });
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

/** The LF of a call as the price table prices it: its USD price and its tokens (core/lifeforce.ts llmCost). */
function callLf(prices: PriceTable, r: ChatResult): number {
  return lfCeil(r.costUsd * prices.lfPerUsd + ((r.usage.promptTokens + r.usage.completionTokens) / 1000) * prices.lfPer1kTokens);
}

/** A nerve spends its own budget, carved from the agent's on first use (the agent's is unlimited until configured). */
async function openNerveBudget(db: Db, agentId: string, nerve: string, at: number): Promise<void> {
  const parentId = budgetIds.agent(agentId);
  await ensureBudget(db, { id: parentId, agentId, scope: 'agent', settings: { capacity: null }, at });
  await carveBudget(db, { parentId, id: budgetIds.nerve(agentId, nerve), agentId, scope: 'nerve', amount: null, at });
}

/** The hold of a decision's state cost on the nerve's budget. */
function holdRequest(d: Decide, cost: number): ReserveRequest {
  return { key: `nerve:${d.key}`, budgetId: budgetIds.nerve(d.agentId, d.nerve), amount: cost, operation: 'nerve', ttlMs: holdTtlMs, at: d.at, reason: `${d.nerve} ${d.state}` };
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
  if (held.ok && held.closed) {
    req.key = `${req.key}#${randomUUID()}`;
    held = await reserve(db, req);
  }
  if (!held.ok) {
    throw nonRetryable(ErrorType.LifeforceExhausted, `lifeforce exhausted: budget ${held.budgetId} cannot cover ${held.needed} LF for a ${d.nerve} decision (${held.reason}; available ${held.available ?? 'unlimited'} LF)`, {
      budgetId: held.budgetId,
      reason: held.reason,
      needed: held.needed,
      available: held.available,
    });
  }
  return req.key;
}

/** Ask the LLM: the action its reply names (null when none), the reply when unreadable, the call's LF. */
async function askModel(deps: NerveDeps, def: NerveDef, d: Decide, holdKey: string): Promise<{ action: string | null; reply: string | null; lf: number }> {
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
    return { action, reply: action === null ? clipText(result.text, 200) : null, lf: callLf(deps.prices ?? defaultPrices, result) };
  } catch (err) {
    // The decision will not be made now: its hold goes back (a later attempt holds anew).
    if (err instanceof LifeforceExhaustedError || err instanceof LlmUnavailableError) await release(deps.db, holdKey, `decision not made: ${err.message}`);
    if (err instanceof LifeforceExhaustedError) throw nonRetryable(ErrorType.LifeforceExhausted, err.message, err.details);
    if (err instanceof LlmUnavailableError) {
      throw ApplicationFailure.create({ type: LlmUnavailable, message: err.message, nonRetryable: true, details: [{ agentId: err.agentId, role: err.role, attempts: err.attempts }] });
    }
    throw err;
  }
}

function resultOf(row: NerveDecisionRow, modeAfter: NerveMode, events: NerveEvent[], replayed: boolean): NerveDecideResult {
  return { action: row.action, to: row.toState, decidedBy: row.decidedBy, mode: row.mode, modeAfter, outcome: row.outcome, lf: row.lf, latencyMs: row.latencyMs, events, replayed };
}

/** A retry of a decision already made: its row and events; its hold settled (once) if the first attempt stopped short. */
async function replay(db: Db, row: NerveDecisionRow, learner: Learner, cfg: LearningConfig, cost: number): Promise<NerveDecideResult> {
  const [events] = await Promise.all([eventsOfDecision(db, row.id), row.ledgerKey ? settle(db, row.ledgerKey, cost) : undefined]);
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
      const parsed = nerveDecideInput.safeParse(input);
      if (!parsed.success) throw nonRetryable(ErrorType.InvalidInput, `nerveDecide: ${formatIssues(parsed.error, '(input)')}`);
      const d = parsed.data;
      const def = nerves[d.nerve];
      const cfg = d.learning ?? defaultLearning;
      const cost = stateCost(def, d.state);
      const bucket = def.bucket(d.observation);
      // The hold, the retry check and the learning are independent: one round trip's wait for all three.
      const first = reserve(db, holdRequest(d, cost));
      // Awaited below on every path; this only keeps an early return from leaving it unhandled.
      void first.catch(() => undefined);
      const [stored, learner] = await Promise.all([decisionByKey(db, d.key), loadLearner(db, d.agentId, d.nerve, cfg.window)]);
      if (stored) {
        await first.catch(() => undefined);
        return replay(db, stored, learner, cfg, cost);
      }
      const holdKey = await holdCost(db, d, cost, first);

      const choice = choose(d.mode, learner, cfg, def, d.state, bucket);
      const asked = choice.by === 'llm' ? await askModel(deps, def, d, holdKey) : { action: choice.action, reply: null, lf: 0 };
      const latencyMs = Math.round(performance.now() - started);
      const outcome = judge(def, d.state, d.observation, asked.action);
      const moved = asked.action === null ? null : transition(def.machine, d.state, asked.action);
      const to = moved?.ok ? moved.to : d.state;
      const fact = { state: d.state, bucket, action: asked.action, decidedBy: choice.by, outcome, at: d.at };
      const [, recorded] = await Promise.all([
        settle(db, holdKey, cost),
        recordDecision(
          db,
          { agentId: d.agentId, nerve: d.nerve, ...fact, toState: to, mode: choice.mode, lf: lfRound(cost + asked.lf), latencyMs, reply: asked.reply, ledgerKey: holdKey, key: d.key },
          cfg,
        ),
      ]);
      const after = learn(learner, fact, cfg).learner;
      return resultOf(recorded.row, modeOf(after, cfg), recorded.events, !recorded.recorded);
    },
  };
}
