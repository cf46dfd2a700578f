/**
 * The scheduled maintenance jobs (SPEC §7), each a short workflow that a Temporal Schedule
 * starts (workers/schedules.ts): learning decay (daily), the abstracts digest (hourly, per
 * running agent, by the agent's configured strategy), memory pruning (per running agent, by
 * its lru_limit) and process-log cleanup. All visible, pausable and triggerable in the UI;
 * each also startable by hand with JSON input (zod-checked).
 */
import { log, proxyActivities } from '@temporalio/workflow';
import { z } from 'zod';
import type { createLearningActivities } from '../activities/learnings.js';
import { dbActivity } from './lib/activity-options.js';
import { parseWorkflowInput } from './lib/input.js';

/** `makeAbstract` of activities/forks.ts (the abstracts strategies on real rows), as this job calls it. */
interface AbstractActivity {
  makeAbstract(input: { agentId: string; trigger: 'interval' }): Promise<{ abstractId: number | null; created: boolean; strategy: string; responses: number }>;
}
type Activities = ReturnType<typeof createLearningActivities> & AbstractActivity;
// Set-based SQL over the whole table: give the decay more than a point write's 10 s.
const jobs = proxyActivities<Activities>({ ...dbActivity, startToCloseTimeout: '5 minutes' });

const decaySchema = z
  .strictObject({
    factor: z.number().gt(0).max(1).default(0.9),
    staleAfterDays: z.number().min(0).max(3650).default(7),
    deleteBelow: z.number().min(0).max(1).default(0.1),
    shardType: z.string().min(1).optional(),
  })
  .default({ factor: 0.9, staleAfterDays: 7, deleteBelow: 0.1 });
export type LearningDecayInput = z.input<typeof decaySchema>;

/** Daily: × factor for learnings not reinforced for `staleAfterDays`; delete below `deleteBelow`. */
export async function learningDecayWorkflow(input?: LearningDecayInput): Promise<{ decayed: number; deleted: number; at: string }> {
  const o = parseWorkflowInput('learningDecayWorkflow', decaySchema, input);
  // The workflow's clock, so that a time-skipped or replayed run decays as of its own time.
  const at = new Date().toISOString();
  const r = await jobs.decayLearningsJob({ ...o, now: at });
  log.info('learning decay', { decayed: r.decayed, deleted: r.deleted, at });
  return { decayed: r.decayed, deleted: r.deleted, at };
}

const perAgentSchema = z.strictObject({ agentIds: z.array(z.string().min(1)).max(1000).optional() }).default({});

export interface PerAgentResult<T> {
  agents: number;
  results: Array<{ agentId: string; ok: true; result: T } | { agentId: string; ok: false; error: string }>;
}

async function forEachAgent<T>(agentIds: string[] | undefined, fn: (agentId: string) => Promise<T>): Promise<PerAgentResult<T>> {
  const ids = agentIds ?? (await jobs.listActiveAgents());
  const results: PerAgentResult<T>['results'] = [];
  for (const agentId of ids) {
    try {
      results.push({ agentId, ok: true, result: await fn(agentId) });
    } catch (err) {
      // One agent's failure does not stop the others; it is in the result and the log.
      const error = err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
      log.warn('maintenance job failed for an agent', { agentId, error });
      results.push({ agentId, ok: false, error });
    }
  }
  return { agents: ids.length, results };
}

/** Hourly: per running agent, an abstract of its recent responses by its configured strategy. */
export async function abstractsDigestWorkflow(input?: z.input<typeof perAgentSchema>) {
  const o = parseWorkflowInput('abstractsDigestWorkflow', perAgentSchema, input);
  return forEachAgent(o.agentIds, (agentId) => jobs.makeAbstract({ agentId, trigger: 'interval' }));
}

/** Per running agent: archive what lies beyond its lru_limit (logged to its process log). */
export async function memoryPruningWorkflow(input?: z.input<typeof perAgentSchema>) {
  const o = parseWorkflowInput('memoryPruningWorkflow', perAgentSchema, input);
  return forEachAgent(o.agentIds, (agentId) => jobs.pruneMemory({ agentId }));
}

const cleanupSchema = z.strictObject({ olderThanDays: z.number().int().min(0).max(3650).default(30) }).default({ olderThanDays: 30 });

/** Delete closed process-log entries older than N days (default 30). */
export async function processLogCleanupWorkflow(input?: z.input<typeof cleanupSchema>): Promise<{ deleted: number }> {
  const o = parseWorkflowInput('processLogCleanupWorkflow', cleanupSchema, input);
  return jobs.cleanupProcessLog({ olderThanDays: o.olderThanDays, now: new Date().toISOString() });
}
