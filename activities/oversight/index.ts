/**
 * The oversight tier and the escalation's database side, on the `mindloop` queue:
 *
 * - oversight/graph.ts: the oversight graph and `runOversight`, the activity that runs it
 * - oversight/escalation.ts: the escalation's rows while it runs
 * - oversight/finish.ts: `finishEscalation`, the escalation settled
 *
 * Each activity is idempotent (keys, upserts), so retries are safe.
 */
import { bindActivities } from '../bind.js';
import { finishEscalation } from './finish.js';
import {
  markAwaitingHuman,
  openEscalation,
  recordDesignRound,
  recordHumanAnswer,
  recordOversightAnswer,
  registerDesignedTool,
} from './escalation.js';
import { runOversight, type OversightDeps } from './graph.js';

export { ensureOversightModel } from '../llm/index.js';
export { buildOversightGraph, OversightErrorType, type OversightDeps, type OversightRun } from './graph.js';
export type { FinishEscalationInput, FinishEscalationResult } from './finish.js';

/** Oversight and escalation activities for the `mindloop` queue. */
export function createOversightActivities(deps: OversightDeps) {
  return bindActivities(deps, {
    openEscalation,
    runOversight,
    recordOversightAnswer,
    markAwaitingHuman,
    recordDesignRound,
    recordHumanAnswer,
    registerDesignedTool,
    finishEscalation,
  });
}
