/**
 * Riding out an outage inside a workflow. An activity called with `fewAttempts(...)` gives up
 * after a few tries; when what stopped it is infrastructure (`Unavailable` — the database,
 * Docker or an endpoint away — or a timeout), the workflow waits with capped backoff
 * and calls it again, for as long as it takes, showing the outage in its queries meanwhile.
 * Errors of the request itself (non-retryable) are not waited out: they go to the caller.
 */
import { outageBackoffMs, rootMessage } from '../../core/failure.js';
import { ActivityFailure, ApplicationFailure, TimeoutFailure, log, patched, sleep } from '@temporalio/workflow';
import { timerText } from './ui-text.js';

/** What a workflow shows while it waits for a dependency (status/progress queries). */
export interface Degraded {
  /** The step that is waiting (`think`, `applyCommands`, `task diary.add`…). */
  step: string;
  since: string;
  attempts: number;
  lastError: string;
}

/**
 * What made an activity fail: an ActivityFailure's cause. A local activity's failure reaches the
 * workflow unwrapped (the ApplicationFailure or TimeoutFailure itself), so that is taken as it is.
 */
export function activityCause(err: unknown): unknown {
  return err instanceof ActivityFailure ? err.cause : err;
}

/**
 * The type of the failure the SDK gives an activity (local or not) still running when its
 * worker shuts down ("Worker is shutting down and this activity did not complete in time"). It
 * counts as an attempt, and after the last one the workflow sees it: the worker went away, the
 * step did not fail.
 */
const workerShutdownType = 'WorkerShutdown';

/** True for a failed activity whose cause is infrastructure (`Unavailable`, a timeout, a worker shutting down), not the request. */
export function isInfraFailure(err: unknown): boolean {
  const cause = activityCause(err);
  if (cause instanceof TimeoutFailure) return true;
  // Only what the activity said is an outage: an error of no known kind that outlasted its
  // attempts is the step's own failure, and waiting would not change it.
  if (!(cause instanceof ApplicationFailure)) return false;
  // worker-shutdown-v1: histories from before it took such a failure as the step's own.
  if (cause.type === workerShutdownType) return patched('worker-shutdown-v1');
  return cause.type === 'Unavailable';
}

/** True for a failed activity that found no LLM answering (`LlmUnavailable`): the caller waits the outage out its own way. */
export function isLlmUnavailable(err: unknown): boolean {
  const cause = activityCause(err);
  return cause instanceof ApplicationFailure && cause.type === 'LlmUnavailable';
}

/**
 * The message a person should read for a failed activity or child workflow: the innermost
 * cause's (an ActivityFailure or ChildWorkflowFailure only says that something below failed).
 */
export const failureMessage = rootMessage;

interface RideOutHooks {
  /** Called at each failed attempt (the status query reads the value it is given). */
  onDegraded?(d: Degraded): void;
  /** Called once the step succeeds after an outage (e.g. a process-log entry). */
  onRecovered?(d: Degraded, ms: number): Promise<void> | void;
}

/**
 * Call `fn` until it succeeds or fails for a reason of its own; infrastructure failures are
 * waited out (1 s, 2 s, 4 s … 30 s between attempts). Deterministic: time comes from the
 * workflow clock and the waits are timers.
 */
export async function rideOut<T>(step: string, fn: () => Promise<T>, hooks: RideOutHooks = {}): Promise<T> {
  let degraded = null as Degraded | null;
  let startedMs = 0;
  for (;;) {
    try {
      const value = await fn();
      if (degraded) {
        const ms = Date.now() - startedMs;
        log.info('dependency back', { step, attempts: degraded.attempts, ms });
        await hooks.onRecovered?.(degraded, ms);
      }
      return value;
    } catch (err) {
      if (!isInfraFailure(err)) throw err;
      if (!degraded) startedMs = Date.now();
      degraded = {
        step,
        since: degraded?.since ?? new Date().toISOString(),
        attempts: (degraded?.attempts ?? 0) + 1,
        lastError: failureMessage(err),
      };
      if (degraded.attempts === 1) log.warn('dependency unavailable, waiting', { step, error: degraded.lastError });
      hooks.onDegraded?.(degraded);
      const waitMs = outageBackoffMs(degraded.attempts);
      await sleep(waitMs, { summary: timerText.degraded(step, waitMs) });
    }
  }
}
