/**
 * One timeout/retry preset per kind of activity. Workflows pick a preset by name
 * instead of inventing timeouts inline.
 */
import type { ActivityOptions, LocalActivityOptions } from '@temporalio/workflow';

// Errors of the request itself (activities/errors.ts): retrying would repeat them. Everything
// else — above all `Unavailable`, a database or endpoint that is away — is retried.
const nonRetryableErrorTypes = [
  'InvalidInput',
  'InvalidRequest',
  'Unexpected',
  'NotFound',
  'Forbidden',
  'BudgetExceeded',
  'LlmUnavailable',
  'LifeforceExhausted',
];

/**
 * How long the work of a worker that died waits before another worker takes it over: the
 * heartbeat timeout of every activity (each heartbeats every half second while it runs,
 * activities/heartbeat.ts, so one that is slow but alive keeps its work) and the workflow task
 * timeout of every workflow this code starts (a local activity running in a task extends it
 * by itself). With the sticky queue's own timeout (workers/queues.ts), a dead worker's agents
 * tick again on another within about three seconds.
 */
export const failoverTimeout = '2 seconds';

/** What every workflow start and continue-as-new of this code passes: the failover's task timeout. */
export const workflowFailover = { workflowTaskTimeout: failoverTimeout } as const;

/**
 * Short, idempotent database reads and writes. No attempt limit: a database that is away for
 * an hour must not end a long-lived workflow; the backoff is capped so the work resumes within
 * 30 s of its return. Errors of the request are non-retryable, so they cannot loop here.
 */
export const dbActivity: ActivityOptions = {
  startToCloseTimeout: '10 seconds',
  heartbeatTimeout: failoverTimeout,
  retry: {
    initialInterval: '200 milliseconds',
    backoffCoefficient: 2,
    maximumInterval: '30 seconds',
    nonRetryableErrorTypes,
  },
};

/**
 * One LLM call: slow and rate limited; failover between providers happens inside (no provider
 * answering is the non-retryable `LlmUnavailable`, which the caller handles). No attempt limit,
 * for the same reason as dbActivity: the database work around the call may be waiting out an outage.
 */
export const llmActivity: ActivityOptions = {
  startToCloseTimeout: '10 minutes',
  // A killed worker's call is retried elsewhere after the failover timeout, not the 10 minutes.
  heartbeatTimeout: failoverTimeout,
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute', nonRetryableErrorTypes },
};

/**
 * One call of an MCP server's tool: the server may take a while to start (20 s) and the call up
 * to a minute. A killed worker's call is taken up elsewhere after the failover timeout; the
 * retry finds the call's row and never repeats a call whose outcome is unknown.
 */
export const mcpActivity: ActivityOptions = {
  startToCloseTimeout: '3 minutes',
  heartbeatTimeout: failoverTimeout,
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute', nonRetryableErrorTypes },
};

/**
 * The tick's think when its model answered fast the last time: a local activity, run by the
 * worker that holds the workflow task, inside that task (no activity task, no second workflow
 * task: the result is recorded as a marker when the task completes). The llm preset's timeout
 * and retries (a few attempts, then the loop rides the outage out as it does for the
 * activity); no heartbeat, since the workflow task is its lease: a worker that dies while it
 * runs loses the task, and the worker that takes it over runs the think again, which finds the
 * tick's recorded reply.
 */
export const localLlmActivity: LocalActivityOptions = {
  startToCloseTimeout: llmActivity.startToCloseTimeout!,
  retry: { ...llmActivity.retry, maximumAttempts: 3 },
};

/**
 * Copying an agent's rows into a new agent (a spawned child): one transaction, long on a big
 * agent. A worker killed mid-copy is noticed within the failover timeout and the copy starts
 * over on another (the killed one's transaction never commits). No attempt limit, as for
 * dbActivity.
 */
export const copyActivity: ActivityOptions = {
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: failoverTimeout,
  retry: dbActivity.retry,
};

/**
 * The same preset, giving up after a few attempts so that the calling workflow sees the outage
 * and rides it out itself (workflows/lib/infra.ts): it shows a `degraded` phase in its queries
 * and logs the recovery, which an activity retrying inside the server cannot.
 */
export function fewAttempts(options: ActivityOptions, maximumAttempts = 3): ActivityOptions {
  return { ...options, retry: { ...options.retry, maximumAttempts } };
}

/**
 * The preset with a task priority (core/priority.ts `priorityFor`): under a backlog on the
 * activity's task queue, a lower `priorityKey` is taken first. No priority leaves the preset as
 * it is, so the activity inherits the workflow's.
 */
export function withPriority(options: ActivityOptions, priority?: { priorityKey: number }): ActivityOptions {
  return priority ? { ...options, priority: { ...options.priority, priorityKey: priority.priorityKey } } : options;
}

/** A sandboxed container run: heartbeats so that cancellation reaches the container. */
export const sandboxActivity: ActivityOptions = {
  taskQueue: 'sandbox',
  startToCloseTimeout: '1 hour',
  // The run heartbeats every second; the SDK sends one at most every 0.8 × this timeout, and a
  // cancellation only reaches the activity with a heartbeat's answer: 5 s here means a
  // cancelled run's container is killed within ~4 s (20 s took ~17 s).
  heartbeatTimeout: '5 seconds',
  retry: { initialInterval: '2 seconds', maximumAttempts: 3, nonRetryableErrorTypes },
};

/**
 * The speech engine's activity (the Python worker) on the queue the route chose, at the job's
 * priority. It gives up waiting for a worker after `scheduleToStartMs` (the job then asks for a
 * route again); input it refuses is never retried. The engine heartbeats every 2 s, so a worker
 * that died mid-job is noticed within the heartbeat timeout.
 */
export function speechEngineActivity(o: {
  queue: string;
  scheduleToStartMs: number;
  runMs: number;
  priorityKey: number;
  inputErrors: readonly string[];
}): ActivityOptions {
  return {
    taskQueue: o.queue,
    scheduleToStartTimeout: o.scheduleToStartMs,
    startToCloseTimeout: o.runMs,
    heartbeatTimeout: '30 seconds',
    retry: {
      initialInterval: '1 second',
      backoffCoefficient: 2,
      maximumInterval: '30 seconds',
      maximumAttempts: 3,
      nonRetryableErrorTypes: [...o.inputErrors],
    },
    priority: { priorityKey: o.priorityKey },
  };
}

/** A campaign task (activities/campaign-tasks.ts): may run long, retried a few times before it counts as failed. */
export const campaignTaskActivity: ActivityOptions = {
  startToCloseTimeout: '2 hours',
  heartbeatTimeout: failoverTimeout,
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '30 seconds',
    maximumAttempts: 3,
    nonRetryableErrorTypes,
  },
};
