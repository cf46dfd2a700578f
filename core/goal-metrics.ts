/**
 * Goal metrics: how an agent does with its goals, computed from its goal rows and the count of
 * tasks on each. Pure: the rows are loaded elsewhere (db/queries/goal-metrics.ts), so the
 * definitions below are unit-testable and the same wherever they are shown (the status command,
 * the notebook, the agent's own context).
 *
 * Definitions:
 * - closed goals are those `completed` or `failed`; `active` and `paused` goals are open.
 * - the achieved share is completed / (completed + failed): of the goals that came to an end,
 *   the part that was achieved. Null while no goal is closed (a paused goal is not a failure).
 * - the time to achieve a completed goal is `completed_at` − `started_at` (`created_at` where
 *   `started_at` is missing), wall-clock: a pause in between counts, since the pause itself is not
 *   timed. Only goals whose status is `completed` count (a reopened goal keeps its old
 *   `completed_at`); a completion stamped before the start is left out as unreadable.
 * - paused is the goals paused now; interrupted is the goals paused at least once (the
 *   `interruptions` counter, bumped on each active → paused), interruptions the sum of that counter.
 * - tasks per goal is the mean number of tasks linked to a goal, over every goal; open tasks are
 *   those `open`, `in_progress` or `blocked`, and open tasks per goal is their mean over the open goals.
 */

/** One goal as the metrics read it, with the count of its tasks. */
export interface GoalMetricRow {
  id: number;
  title: string;
  status: string;
  startedAt: Date | null;
  createdAt: Date;
  completedAt: Date | null;
  failedAt: Date | null;
  interruptions: number;
  /** Tasks linked to the goal, in any status. */
  tasks: number;
  /** Of those, the ones not finished (`open`, `in_progress`, `blocked`). */
  openTasks: number;
}

/** One goal's figures. */
export interface GoalFigures {
  id: number;
  title: string;
  status: string;
  tasks: number;
  openTasks: number;
  interruptions: number;
  /** Milliseconds from start to completion; null unless the goal is completed. */
  msToAchieve: number | null;
}

export interface GoalMetrics {
  total: number;
  active: number;
  paused: number;
  completed: number;
  failed: number;
  /** completed + failed. */
  closed: number;
  /** completed / closed, 0–1; null while nothing is closed. */
  achievedShare: number | null;
  meanMsToAchieve: number | null;
  medianMsToAchieve: number | null;
  /** Goals paused at least once. */
  interrupted: number;
  /** Times goals were paused, all goals together. */
  interruptions: number;
  /** Tasks linked to any goal. */
  tasks: number;
  openTasks: number;
  /** tasks / total; null without goals. */
  tasksPerGoal: number | null;
  /** Open tasks over the open (active or paused) goals; null without open goals. */
  openTasksPerOpenGoal: number | null;
  perGoal: GoalFigures[];
}

/** The statuses of a finished task; every other status is open. */
export const finishedTaskStatuses = ['done', 'failed', 'cancelled'] as const;

function msToAchieve(g: GoalMetricRow): number | null {
  if (g.status !== 'completed' || !g.completedAt) return null;
  const start = g.startedAt ?? g.createdAt;
  const ms = g.completedAt.getTime() - start.getTime();
  return Number.isFinite(ms) && ms >= 0 ? ms : null;
}

const mean = (xs: number[]): number | null => (xs.length ? xs.reduce((s, x) => s + x, 0) / xs.length : null);

function median(xs: number[]): number | null {
  if (!xs.length) return null;
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The metrics of one agent's goals. */
export function goalMetrics(rows: readonly GoalMetricRow[]): GoalMetrics {
  const perGoal = rows.map((g): GoalFigures => ({
    id: g.id,
    title: g.title,
    status: g.status,
    tasks: g.tasks,
    openTasks: g.openTasks,
    interruptions: g.interruptions,
    msToAchieve: msToAchieve(g),
  }));
  const count = (status: string) => rows.filter((g) => g.status === status).length;
  const [active, paused, completed, failed] = ['active', 'paused', 'completed', 'failed'].map(count) as [
    number,
    number,
    number,
    number,
  ];
  const closed = completed + failed;
  const durations = perGoal.map((g) => g.msToAchieve).filter((ms): ms is number => ms !== null);
  const tasks = rows.reduce((s, g) => s + g.tasks, 0);
  const openTasks = rows.reduce((s, g) => s + g.openTasks, 0);
  const open = rows.filter((g) => g.status === 'active' || g.status === 'paused');
  return {
    total: rows.length,
    active,
    paused,
    completed,
    failed,
    closed,
    achievedShare: closed ? completed / closed : null,
    meanMsToAchieve: mean(durations),
    medianMsToAchieve: median(durations),
    interrupted: rows.filter((g) => g.interruptions > 0).length,
    interruptions: rows.reduce((s, g) => s + g.interruptions, 0),
    tasks,
    openTasks,
    tasksPerGoal: rows.length ? tasks / rows.length : null,
    openTasksPerOpenGoal: open.length ? open.reduce((s, g) => s + g.openTasks, 0) / open.length : null,
    perGoal,
  };
}

/** A duration for a person: `45s`, `12m`, `2h10m`, `3d4h`. */
export function formatDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m}m`;
  if (m < 24 * 60) return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
  const h = Math.round(m / 60);
  return `${Math.floor(h / 24)}d${h % 24}h`;
}

const oneDecimal = (x: number) => (Math.round(x * 10) / 10).toString();

/**
 * The metrics in one line: `3 active, 2 achieved of 3 closed (67 %), mean 2h10m to achieve
 * (median 1h05m); 1 paused, 1 failed; 2.3 tasks/goal, 1.5 open per open goal`. Parts without data are left out.
 */
export function goalMetricsSummary(m: GoalMetrics): string {
  const achieved =
    m.achievedShare === null
      ? 'none closed yet'
      : `${m.completed} achieved of ${m.closed} closed (${Math.round(m.achievedShare * 100)} %)`;
  const time =
    m.meanMsToAchieve === null
      ? ''
      : `, mean ${formatDuration(m.meanMsToAchieve)} to achieve${
          m.completed > 1 && m.medianMsToAchieve !== null ? ` (median ${formatDuration(m.medianMsToAchieve)})` : ''
        }`;
  const interruptions = m.interruptions ? ` (${m.interruptions} interruption${m.interruptions === 1 ? '' : 's'})` : '';
  const tasks = [
    m.tasksPerGoal === null ? '' : `${oneDecimal(m.tasksPerGoal)} tasks/goal`,
    m.openTasksPerOpenGoal === null ? '' : `${oneDecimal(m.openTasksPerOpenGoal)} open per open goal`,
  ]
    .filter(Boolean)
    .join(', ');
  return [
    `${m.active} active, ${achieved}${time}`,
    `${m.paused} paused${interruptions}, ${m.failed} failed`,
    ...(tasks ? [tasks] : []),
  ].join('; ');
}
