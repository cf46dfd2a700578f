/**
 * The period of a scheduled maintenance run: each job runs at most once per period, and the
 * period is the job's interval bucket (UTC-aligned) that holds the run's nominal time — the
 * time the schedule meant it for, not the time it happened to start. Pure: no clock, no I/O.
 */

const hourMs = 3_600_000;
const dayMs = 24 * hourMs;

/** Each maintenance job and the length of its period (its schedule's interval). */
export const maintenanceJobs = {
  'learning-decay': { workflowType: 'learningDecayWorkflow', periodMs: dayMs },
  'abstracts-digest': { workflowType: 'abstractsDigestWorkflow', periodMs: hourMs },
  'memory-pruning': { workflowType: 'memoryPruningWorkflow', periodMs: 6 * hourMs },
  'process-log-cleanup': { workflowType: 'processLogCleanupWorkflow', periodMs: dayMs },
  'embeddings-backfill': { workflowType: 'embeddingsBackfillWorkflow', periodMs: hourMs },
} as const;
export type MaintenanceJob = keyof typeof maintenanceJobs;
export const maintenanceJobNames = Object.keys(maintenanceJobs) as MaintenanceJob[];

export interface MaintenancePeriod {
  job: MaintenanceJob;
  /** `2026-11-24` for a day, `2026-11-24T13` for an hour or a 6-hour bucket (its first hour). */
  key: string;
  /** ISO start (inclusive) and end (exclusive) of the bucket. */
  start: string;
  end: string;
}

/** The period of `job` that holds the instant `at`. */
export function periodOf(job: MaintenanceJob, at: Date): MaintenancePeriod {
  const ms = at.getTime();
  if (!Number.isFinite(ms)) throw new RangeError(`periodOf(${job}): not a valid time`);
  const len = maintenanceJobs[job].periodMs;
  const startMs = Math.floor(ms / len) * len;
  const start = new Date(startMs).toISOString();
  return {
    job,
    key: len >= dayMs ? start.slice(0, 10) : start.slice(0, 13),
    start,
    end: new Date(startMs + len).toISOString(),
  };
}

/** The period a key names, or undefined when the key is not one of `job`'s period keys. */
export function periodFromKey(job: MaintenanceJob, key: string): MaintenancePeriod | undefined {
  const m = /^(\d{4}-\d{2}-\d{2})(?:T(\d{2}))?$/.exec(key);
  if (!m) return undefined;
  const at = new Date(`${m[1]}T${m[2] ?? '00'}:00:00.000Z`);
  if (Number.isNaN(at.getTime())) return undefined;
  const p = periodOf(job, at);
  // Only the canonical key of a bucket: `2026-11-24T05` is not a 6-hour bucket, nor a day.
  return p.key === key ? p : undefined;
}

// A scheduled run's workflow id is the action's id + '-' + the nominal time, second precision.
const scheduledIdSuffix = /-(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z)$/;

/** The nominal time a schedule appended to a workflow id, if it did. */
export function nominalTimeFromWorkflowId(workflowId: string): Date | undefined {
  const m = scheduledIdSuffix.exec(workflowId);
  if (!m) return undefined;
  const d = new Date(m[1]!);
  // Not a real calendar time (Feb 31 would roll over to March): not a schedule's suffix.
  return Number.isNaN(d.getTime()) || d.toISOString().slice(0, 19) !== m[1]!.slice(0, 19) ? undefined : d;
}

export type NominalSource = 'schedule' | 'workflow-id' | 'start';

/**
 * The time a run is for: the schedule's `TemporalScheduledStartTime` (a scheduled run, a
 * trigger — the trigger's time — or a backfill — the backfilled time), else the time in a
 * scheduled workflow id, else the run's own start (a workflow started by hand).
 */
export function nominalTime(o: { scheduledStartTime?: Date | null; workflowId: string; startTime: Date }): {
  at: Date;
  source: NominalSource;
} {
  if (o.scheduledStartTime && Number.isFinite(o.scheduledStartTime.getTime()))
    return { at: o.scheduledStartTime, source: 'schedule' };
  const fromId = nominalTimeFromWorkflowId(o.workflowId);
  if (fromId) return { at: fromId, source: 'workflow-id' };
  return { at: o.startTime, source: 'start' };
}

/** The line a repeated run logs and returns. */
export function repeatNote(job: MaintenanceJob, periodKey: string, doneAt: string | null): string {
  return `${job} for ${periodKey} already done at ${doneAt ?? 'an unknown time'}: nothing changed`;
}
