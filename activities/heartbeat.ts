/**
 * Heartbeats for activities that wait on something slow (an LLM, a task, a sub-agent). A
 * heartbeat carries the server's cancellation to the activity and lets a dead worker be noticed
 * within the preset's heartbeatTimeout, long before startToCloseTimeout.
 */
import { Context } from '@temporalio/activity';

/** How often a waiting activity heartbeats (the presets' heartbeatTimeout is a few times this). */
export const heartbeatEveryMs = 2_000;

/** The running activity's context, or undefined when called outside an activity (tests, the CLI). */
export function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

/**
 * Run `work`, heartbeating every `everyMs` (with `details`, shown by `temporal workflow describe`)
 * until it settles (a local activity does not heartbeat). `work` gets the activity's cancellation signal; outside an activity it runs
 * as it is.
 */
export async function withHeartbeat<T>(
  work: (signal: AbortSignal | undefined) => Promise<T>,
  options: { everyMs?: number; details?: unknown } = {},
): Promise<T> {
  const ctx = activityContext();
  if (!ctx) return work(undefined);
  // A local activity has no heartbeat: the workflow task that runs it is its lease.
  if (ctx.info.isLocal) return work(ctx.cancellationSignal);
  const beat = () => (options.details === undefined ? ctx.heartbeat() : ctx.heartbeat(options.details));
  const timer = setInterval(beat, options.everyMs ?? heartbeatEveryMs);
  try {
    return await work(ctx.cancellationSignal);
  } finally {
    clearInterval(timer);
  }
}
