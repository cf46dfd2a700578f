/**
 * Every activity heartbeats while it runs (the worker's `heartbeatInterceptor`): a heartbeat
 * carries the server's cancellation to the activity, and the presets' short heartbeatTimeout
 * (workflows/lib/activity-options.ts `failoverTimeout`) lets a worker that died be noticed within
 * seconds whatever its activity was doing, while one that is slow but alive (a model thinking, a
 * database step queued under load) keeps its work. A local activity does not heartbeat: the
 * workflow task that runs it is its lease.
 */
import { Context } from '@temporalio/activity';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';

/** How often a running activity heartbeats (the SDK sends at most one a second: `heartbeatThrottle`). */
export const heartbeatEveryMs = 500;

/**
 * The longest the SDK waits between two heartbeats it sends (`Worker.create`'s
 * `maxHeartbeatThrottleInterval`): half the presets' heartbeatTimeout, so one late heartbeat is
 * not a dead worker.
 */
export const heartbeatThrottle = '1 second';

/** What each running activity's heartbeats carry (shown by `temporal workflow describe`). */
const detailsOf = new WeakMap<Context, unknown>();

/** The worker's activity interceptor: heartbeats every `everyMs` while a (non-local) activity runs. */
export function heartbeatInterceptor(everyMs = heartbeatEveryMs): ActivityInterceptorsFactory {
  return (ctx) => ({
    inbound: {
      async execute(input, next) {
        if (ctx.info.isLocal) return next(input);
        const beat = () => {
          const details = detailsOf.get(ctx);
          if (details === undefined) ctx.heartbeat();
          else ctx.heartbeat(details);
        };
        const timer = setInterval(beat, everyMs);
        try {
          return await next(input);
        } finally {
          clearInterval(timer);
        }
      },
    },
  });
}

/** The running activity's context, or undefined when called outside an activity (tests, the CLI). */
export function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

/**
 * Heartbeat now with `details`, which the running activity's later heartbeats carry too (an
 * activity's progress goes through here, not `Context.heartbeat`, so that the interceptor's
 * beats do not drop it). Nothing outside an activity or in a local one.
 */
export function heartbeat(details: unknown, ctx: Context | undefined = activityContext()): void {
  if (!ctx || ctx.info.isLocal) return;
  detailsOf.set(ctx, details);
  ctx.heartbeat(details);
}

/**
 * Run `work` with the activity's cancellation signal (undefined outside an activity), its
 * heartbeats carrying `details` until it settles.
 */
export async function withHeartbeat<T>(
  work: (signal: AbortSignal | undefined) => Promise<T>,
  options: { details?: unknown } = {},
): Promise<T> {
  const ctx = activityContext();
  if (!ctx) return work(undefined);
  if (options.details === undefined) return work(ctx.cancellationSignal);
  const before = detailsOf.get(ctx);
  detailsOf.set(ctx, options.details);
  try {
    return await work(ctx.cancellationSignal);
  } finally {
    if (before === undefined) detailsOf.delete(ctx);
    else detailsOf.set(ctx, before);
  }
}
