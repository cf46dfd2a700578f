/**
 * What every worker of Mindloop's workflows and activities runs with, so that the work of a
 * worker that dies moves to another within seconds (with the presets' heartbeat and workflow
 * task timeouts, workflows/lib/activity-options.ts `failoverTimeout`):
 * - every activity heartbeats while it runs (activities/heartbeat.ts), the SDK sending at most
 *   one a second;
 * - a workflow task waits on the sticky queue of the worker that holds the workflow in its cache
 *   for one second, then any worker may take it (with a replay of the history). A live worker
 *   picks its sticky tasks up within milliseconds; one that is too loaded to do so within a
 *   second is better relieved by another.
 */
import type { WorkerOptions } from '@temporalio/worker';
import { heartbeatInterceptor, heartbeatThrottle } from '../activities/heartbeat.js';

export const stickyQueueScheduleToStartMs = 1_000;

export const failoverWorkerOptions = {
  stickyQueueScheduleToStartTimeout: stickyQueueScheduleToStartMs,
  maxHeartbeatThrottleInterval: heartbeatThrottle,
  interceptors: { activity: [heartbeatInterceptor()] },
} satisfies Partial<WorkerOptions>;
