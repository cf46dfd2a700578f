/**
 * The agent loop's activities, each proxy named after the work it reaches. A few attempts each,
 * then the loop itself rides the outage out (ride-out.ts), so that its status shows `degraded`
 * and the recovery is logged.
 */
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { createActivities } from '../../activities/index.js';
import type { createSandboxActivities } from '../../activities/sandbox.js';
import {
  dbActivity,
  fewAttempts,
  llmActivity,
  localLlmActivity,
  mcpActivity,
  sandboxActivity,
  withPriority,
} from '../lib/activity-options.js';
import { reflexActivity } from '../lib/reflexes.js';

export type Activities = ReturnType<typeof createActivities>;

/** The agent's records in the database: notes, commands, process log, lifeforce, task loops. */
export const records = proxyActivities<Activities>(fewAttempts(dbActivity));
/** The models: the think, the outage probe, one-off questions. */
export const models = proxyActivities<Activities>(fewAttempts(llmActivity));
/** The agent's MCP tool calls (each one durable and done once: activities/mcp/). */
export const mcpTools = proxyActivities<Activities>(fewAttempts(mcpActivity));
/** The tick's reflexes (emotions, novelty, validation) in one activity. */
export const reflexSteps = proxyActivities<Activities>(reflexActivity);
/** The agent's `shell`, on the sandbox queue only; no sandbox worker within 2 min = not run. */
export const sandbox = proxyActivities<ReturnType<typeof createSandboxActivities>>({
  ...sandboxActivity,
  scheduleToStartTimeout: '2 minutes',
});
/** The think as a local activity: for a model that answered fast the last time (think.ts). */
export const localModels = proxyLocalActivities<Activities>(localLlmActivity);
/** The tick's commands as a local activity: after a local think (workflow.ts); a failure goes to `records`. */
export const localRecords = proxyLocalActivities<Activities>({
  startToCloseTimeout: dbActivity.startToCloseTimeout!,
  retry: { ...dbActivity.retry, maximumAttempts: 2 },
});
/** The reflexes as a local activity: after a fast think, when they were fast the last time (workflow.ts). */
export const localReflexSteps = proxyLocalActivities<Activities>({
  startToCloseTimeout: reflexActivity.startToCloseTimeout!,
  retry: { ...reflexActivity.retry, maximumAttempts: 2 },
});

const modelsByPriority = new Map<number, Activities>();
/** The models at a task priority: under a backlog, agents with more lifeforce are served first. */
export function modelsAt(priorityKey: number | undefined): Activities {
  if (priorityKey === undefined) return models;
  let proxy = modelsByPriority.get(priorityKey);
  if (!proxy)
    modelsByPriority.set(
      priorityKey,
      (proxy = proxyActivities<Activities>(withPriority(fewAttempts(llmActivity), { priorityKey }))),
    );
  return proxy;
}
