/**
 * The scheduled maintenance jobs, each a short workflow that a Temporal Schedule
 * starts (workers/schedules.ts): learning decay (daily), the abstracts digest (hourly, per
 * running agent, by the agent's configured strategy), memory pruning (per running agent, by
 * its lru_limit), process-log cleanup and the embeddings backfill (hourly, per running agent).
 * All visible, pausable and triggerable in the UI;
 * each also startable by hand with JSON input (zod-checked).
 *
 * Each job runs at most once per period (a day for decay and cleanup, an hour for the digest,
 * 6 hours for pruning): the period holds the run's nominal time (the schedule's, a trigger's or
 * a backfill's; a run started by hand: its start), and the job's activity commits its work with
 * a row of the run ledger. A second run for the period changes nothing and says so.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { log, patched, proxyActivities, workflowInfo } from '@temporalio/workflow';
import { z } from 'zod';
import type { createEmbeddingActivities } from '../activities/embeddings/backfill.js';
import type { createLearningActivities } from '../activities/learnings.js';
import {
  nominalTime,
  periodOf,
  type MaintenanceJob,
  type MaintenancePeriod,
  type NominalSource,
} from '../core/maintenance-period.js';
import { copyActivity, dbActivity } from './lib/activity-options.js';
import { parseWorkflowInput } from './lib/input.js';
import { failureMessage } from './lib/infra.js';

/** `makeAbstract` of activities/forks/abstracts.ts (the abstracts strategies on real rows), as this job calls it. */
interface AbstractActivity {
  makeAbstract(input: {
    agentId: string;
    trigger: 'interval';
  }): Promise<{ abstractId: number | null; created: boolean; strategy: string; responses: number }>;
}
type Activities = ReturnType<typeof createLearningActivities> & AbstractActivity;
// Set-based SQL over the whole table: give the decay more than a point write's 10 s.
const jobs = proxyActivities<Activities>({ ...dbActivity, startToCloseTimeout: '5 minutes' });
// The backfill embeds for up to 20 minutes per agent, heartbeating after each batch (the long
// copy's preset: a killed worker's run is taken up elsewhere within the failover timeout).
const embedding = proxyActivities<ReturnType<typeof createEmbeddingActivities>>(copyActivity);

/** Set by Temporal on every run a schedule starts: the run's nominal time. */
const scheduledStartTime = defineSearchAttributeKey('TemporalScheduledStartTime', SearchAttributeType.DATETIME);

interface RunPeriod {
  period: MaintenancePeriod;
  at: string;
  source: NominalSource;
}

/**
 * The period this run is for. From workflowInfo only (the start event's search attributes,
 * workflow id and start time), so a replay derives the same period.
 */
function runPeriod(job: MaintenanceJob): RunPeriod {
  const info = workflowInfo();
  const n = nominalTime({
    scheduledStartTime: info.typedSearchAttributes.get(scheduledStartTime),
    workflowId: info.workflowId,
    startTime: info.startTime,
  });
  return { period: periodOf(job, n.at), at: n.at.toISOString(), source: n.source };
}

/** What every job's result says about its period. */
export interface PeriodResult {
  period: string;
  /** True when the period had been done already: this run changed nothing. */
  repeat: boolean;
  doneAt: string | null;
  note: string;
}

function logRun(r: RunPeriod, result: PeriodResult): void {
  log.info(result.note, {
    job: r.period.job,
    period: r.period.key,
    repeat: result.repeat,
    nominalTime: r.at,
    from: r.source,
  });
}

const decaySchema = z
  .strictObject({
    factor: z.number().gt(0).max(1).default(0.9),
    staleAfterDays: z.number().min(0).max(3650).default(7),
    deleteBelow: z.number().min(0).max(1).default(0.1),
    shardType: z.string().min(1).optional(),
  })
  .default({ factor: 0.9, staleAfterDays: 7, deleteBelow: 0.1 });
export type LearningDecayInput = z.input<typeof decaySchema>;

/** Daily: × factor for learnings not reinforced for `staleAfterDays`; delete below `deleteBelow`. Once per day. */
export async function learningDecayWorkflow(
  input?: LearningDecayInput,
): Promise<{ decayed: number; deleted: number; at: string } & PeriodResult> {
  const o = parseWorkflowInput('learningDecayWorkflow', decaySchema, input);
  // The nominal time, so that a backfilled, time-skipped or replayed run decays as of its own time.
  const run = runPeriod('learning-decay');
  const r = await jobs.decayLearningsJob({
    ...o,
    now: run.at,
    period: run.period.key,
    workflowId: workflowInfo().workflowId,
  });
  const out = { decayed: r.decayed, deleted: r.deleted, at: run.at, ...periodResult(run, r) };
  logRun(run, out);
  return out;
}

/** The period fields of an activity's result (absent from one recorded before the ledger). */
function periodResult(run: RunPeriod, r: Partial<PeriodResult>): PeriodResult {
  return {
    period: run.period.key,
    repeat: r.repeat ?? false,
    doneAt: r.doneAt ?? null,
    note: r.note ?? `${run.period.job} for ${run.period.key}: done`,
  };
}

const perAgentSchema = z.strictObject({ agentIds: z.array(z.string().min(1)).max(1000).optional() }).default({});

export interface PerAgentResult<T> {
  agents: number;
  /** The period, and a repeat when every agent's work for it had been done already. */
  period?: string;
  repeat?: boolean;
  note?: string;
  results: Array<{ agentId: string; ok: true; result: T } | { agentId: string; ok: false; error: string }>;
}

async function forEachAgent<T>(
  agentIds: string[] | undefined,
  fn: (agentId: string) => Promise<T>,
): Promise<PerAgentResult<T>> {
  const ids = agentIds ?? (await jobs.listActiveAgents());
  const results: PerAgentResult<T>['results'] = [];
  for (const agentId of ids) {
    try {
      results.push({ agentId, ok: true, result: await fn(agentId) });
    } catch (err) {
      // One agent's failure does not stop the others; it is in the result and the log.
      const error = failureMessage(err, 2000);
      log.warn('maintenance job failed for an agent', { agentId, error });
      results.push({ agentId, ok: false, error });
    }
  }
  return { agents: ids.length, results };
}

/** The per-agent result with its period; the run is a repeat when every agent's was. */
function perAgentPeriod<T extends Partial<PeriodResult>>(run: RunPeriod, r: PerAgentResult<T>): PerAgentResult<T> {
  const repeated = r.results.filter((x) => x.ok && x.result.repeat).length;
  const failed = r.results.filter((x) => !x.ok).length;
  const repeat = r.results.length > 0 && repeated === r.results.length;
  const note = repeat
    ? `${run.period.job} for ${run.period.key} already done for all ${repeated} agents: nothing changed`
    : `${run.period.job} for ${run.period.key}: ${r.results.length - repeated - failed} agents done, ${repeated} already done before, ${failed} failed`;
  logRun(run, { period: run.period.key, repeat, doneAt: null, note });
  return { agents: r.agents, period: run.period.key, repeat, note, results: r.results };
}

// The digest moved from `makeAbstract` to the ledgered `abstractsDigestJob`: a run started
// before the change must replay the activity it scheduled then.
const digestLedgerPatch = 'maintenance-digest-ledger';

/** Hourly: per running agent, an abstract of its recent responses by its configured strategy. Once per hour and agent. */
export async function abstractsDigestWorkflow(input?: z.input<typeof perAgentSchema>) {
  const o = parseWorkflowInput('abstractsDigestWorkflow', perAgentSchema, input);
  if (!patched(digestLedgerPatch))
    return forEachAgent(o.agentIds, (agentId) => jobs.makeAbstract({ agentId, trigger: 'interval' }));
  const run = runPeriod('abstracts-digest');
  const { workflowId } = workflowInfo();
  return perAgentPeriod(
    run,
    await forEachAgent(o.agentIds, (agentId) =>
      jobs.abstractsDigestJob({ agentId, period: run.period.key, workflowId }),
    ),
  );
}

/** Per running agent: archive what lies beyond its lru_limit (logged to its process log). Once per 6 hours and agent. */
export async function memoryPruningWorkflow(input?: z.input<typeof perAgentSchema>) {
  const o = parseWorkflowInput('memoryPruningWorkflow', perAgentSchema, input);
  const run = runPeriod('memory-pruning');
  const { workflowId } = workflowInfo();
  return perAgentPeriod(
    run,
    await forEachAgent(o.agentIds, (agentId) => jobs.pruneMemory({ agentId, period: run.period.key, workflowId })),
  );
}

const cleanupSchema = z
  .strictObject({ olderThanDays: z.number().int().min(0).max(3650).default(30) })
  .default({ olderThanDays: 30 });

/** Delete closed process-log entries older than N days (default 30). Once per day. */
export async function processLogCleanupWorkflow(
  input?: z.input<typeof cleanupSchema>,
): Promise<{ deleted: number } & PeriodResult> {
  const o = parseWorkflowInput('processLogCleanupWorkflow', cleanupSchema, input);
  const run = runPeriod('process-log-cleanup');
  const r = await jobs.cleanupProcessLog({
    olderThanDays: o.olderThanDays,
    now: run.at,
    period: run.period.key,
    workflowId: workflowInfo().workflowId,
  });
  const out = { deleted: r.deleted, ...periodResult(run, r) };
  logRun(run, out);
  return out;
}

/**
 * Hourly: per running agent, embed the memory rows that have no vector under its embedder (or
 * one of an older text), in batches. Once per hour and agent; an agent whose embedder is away is
 * reported and its rows are left for the next hour.
 */
export async function embeddingsBackfillWorkflow(input?: z.input<typeof perAgentSchema>) {
  const o = parseWorkflowInput('embeddingsBackfillWorkflow', perAgentSchema, input);
  const run = runPeriod('embeddings-backfill');
  const { workflowId } = workflowInfo();
  return perAgentPeriod(
    run,
    await forEachAgent(o.agentIds, (agentId) =>
      embedding.embeddingsBackfillJob({ agentId, period: run.period.key, workflowId }),
    ),
  );
}
