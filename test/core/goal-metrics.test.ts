/**
 * Goal metrics from goal rows: counts by status, the achieved share of the closed goals, mean and
 * median time to achieve (completed goals only), interruptions, tasks per goal, and the one-line summary.
 */
import { describe, expect, it } from 'vitest';
import { assembleContext, type ContextInput } from '../../core/context.js';
import { formatDuration, goalMetrics, goalMetricsSummary, type GoalMetricRow } from '../../core/goal-metrics.js';
import { contextInput } from '../helpers/context.js';

const t0 = Date.UTC(2026, 10, 1, 12);
const at = (minutes: number) => new Date(t0 + minutes * 60_000);

function goal(over: Partial<GoalMetricRow> & { id: number }): GoalMetricRow {
  return {
    title: `goal ${over.id}`,
    status: 'active',
    startedAt: at(0),
    createdAt: at(0),
    completedAt: null,
    failedAt: null,
    interruptions: 0,
    tasks: 0,
    openTasks: 0,
    ...over,
  };
}

describe('goalMetrics', () => {
  it('counts by status and takes the achieved share over closed goals only', () => {
    const m = goalMetrics([
      goal({ id: 1, status: 'active', tasks: 3, openTasks: 2 }),
      goal({ id: 2, status: 'paused', interruptions: 2, tasks: 1, openTasks: 1 }),
      goal({ id: 3, status: 'completed', completedAt: at(60), tasks: 2 }),
      goal({ id: 4, status: 'completed', startedAt: at(10), completedAt: at(190), tasks: 4, openTasks: 1 }),
      goal({ id: 5, status: 'failed', failedAt: at(30), interruptions: 1 }),
    ]);
    expect(m).toMatchObject({
      total: 5,
      active: 1,
      paused: 1,
      completed: 2,
      failed: 1,
      closed: 3,
      interrupted: 2,
      interruptions: 3,
      tasks: 10,
      openTasks: 4,
    });
    expect(m.achievedShare).toBeCloseTo(2 / 3);
    // 60 and 180 minutes.
    expect(m.meanMsToAchieve).toBe(120 * 60_000);
    expect(m.medianMsToAchieve).toBe(120 * 60_000);
    expect(m.tasksPerGoal).toBe(2);
    // Open goals #1 and #2: 2 + 1 open tasks.
    expect(m.openTasksPerOpenGoal).toBe(1.5);
    expect(m.perGoal.map((g) => [g.id, g.tasks, g.openTasks, g.msToAchieve])).toEqual([
      [1, 3, 2, null],
      [2, 1, 1, null],
      [3, 2, 0, 60 * 60_000],
      [4, 4, 1, 180 * 60_000],
      [5, 0, 0, null],
    ]);
  });

  it('has no share, times or per-goal means without the goals for them', () => {
    const none = goalMetrics([]);
    expect(none).toMatchObject({ total: 0, closed: 0, achievedShare: null, meanMsToAchieve: null });
    expect(none.tasksPerGoal).toBeNull();
    expect(none.openTasksPerOpenGoal).toBeNull();
    const onlyOpen = goalMetrics([goal({ id: 1, status: 'paused', interruptions: 1 })]);
    // A paused goal is not a failure: nothing is closed yet.
    expect(onlyOpen.achievedShare).toBeNull();
    expect(onlyOpen.failed).toBe(0);
    const onlyFailed = goalMetrics([goal({ id: 1, status: 'failed', failedAt: at(5) })]);
    expect(onlyFailed.achievedShare).toBe(0);
    expect(onlyFailed.openTasksPerOpenGoal).toBeNull();
  });

  it('times only completed goals, from started_at (else created_at), and takes the middle of an odd or even count', () => {
    const m = goalMetrics([
      goal({ id: 1, status: 'completed', completedAt: at(10) }),
      goal({ id: 2, status: 'completed', startedAt: null, createdAt: at(-20), completedAt: at(10) }),
      goal({ id: 3, status: 'completed', completedAt: at(100) }),
      // Reopened after a completion: its old completed_at does not count.
      goal({ id: 4, status: 'active', completedAt: at(5) }),
      // Completed before it started: unreadable, left out.
      goal({ id: 5, status: 'completed', startedAt: at(50), completedAt: at(40) }),
    ]);
    expect(m.perGoal.map((g) => g.msToAchieve)).toEqual([10 * 60_000, 30 * 60_000, 100 * 60_000, null, null]);
    expect(m.meanMsToAchieve).toBeCloseTo((140 / 3) * 60_000);
    expect(m.medianMsToAchieve).toBe(30 * 60_000);
    expect(m.completed).toBe(4);
    const even = goalMetrics([
      goal({ id: 1, status: 'completed', completedAt: at(10) }),
      goal({ id: 2, status: 'completed', completedAt: at(40) }),
    ]);
    expect(even.medianMsToAchieve).toBe(25 * 60_000);
  });
});

describe('goalMetricsSummary', () => {
  it('says counts, share, time, interruptions and tasks per goal in one line', () => {
    const m = goalMetrics([
      goal({ id: 1, status: 'active', tasks: 3, openTasks: 2 }),
      goal({ id: 2, status: 'active', tasks: 2, openTasks: 1 }),
      goal({ id: 3, status: 'completed', completedAt: at(130), tasks: 2 }),
      goal({ id: 4, status: 'completed', completedAt: at(130), tasks: 1 }),
      goal({ id: 5, status: 'failed', failedAt: at(30), tasks: 1 }),
      goal({ id: 6, status: 'paused', interruptions: 1, tasks: 5, openTasks: 3 }),
    ]);
    expect(goalMetricsSummary(m)).toBe(
      '2 active, 2 achieved of 3 closed (67 %), mean 2h10m to achieve (median 2h10m); 1 paused (1 interruption), 1 failed; 2.3 tasks/goal, 2 open per open goal',
    );
  });

  it('says when nothing is closed yet and leaves out what has no data', () => {
    expect(goalMetricsSummary(goalMetrics([goal({ id: 1 })]))).toBe(
      '1 active, none closed yet; 0 paused, 0 failed; 0 tasks/goal, 0 open per open goal',
    );
    expect(
      goalMetricsSummary(goalMetrics([goal({ id: 1, status: 'completed', completedAt: at(45), interruptions: 2 })])),
    ).toBe(
      '0 active, 1 achieved of 1 closed (100 %), mean 45m to achieve; 0 paused (2 interruptions), 0 failed; 0 tasks/goal',
    );
  });
});

describe('formatDuration', () => {
  it('picks seconds, minutes, hours and minutes, days and hours', () => {
    expect(formatDuration(45_000)).toBe('45s');
    expect(formatDuration(12 * 60_000)).toBe('12m');
    expect(formatDuration(130 * 60_000)).toBe('2h10m');
    expect(formatDuration(65 * 60_000)).toBe('1h05m');
    expect(formatDuration((3 * 24 + 4) * 3_600_000)).toBe('3d4h');
  });
});

const baseContext = contextInput();

const userText = (input: ContextInput) => assembleContext(input).messages[1]!.content;

describe('the goal record in context 3', () => {
  it('follows the active goals, one line', () => {
    const m = goalMetrics([
      goal({ id: 1, tasks: 2, openTasks: 1 }),
      goal({ id: 2, status: 'completed', completedAt: at(30) }),
    ]);
    const lines = userText({
      ...baseContext,
      goals: [{ id: 1, title: 'ship it', priority: 2, status: 'active' }],
      goalMetrics: m,
    }).split('\n');
    const i = lines.indexOf('Active goals:');
    expect(lines.slice(i, i + 3)).toEqual([
      'Active goals:',
      '- goal #1 [p2] ship it',
      `Your goal record: ${goalMetricsSummary(m)}`,
    ]);
  });

  it('is there with only closed goals, and absent without goals', () => {
    const closed = goalMetrics([goal({ id: 2, status: 'failed', failedAt: at(30) })]);
    expect(userText({ ...baseContext, goalMetrics: closed })).toContain(
      `Your goal record: ${goalMetricsSummary(closed)}`,
    );
    expect(userText({ ...baseContext, goalMetrics: goalMetrics([]) })).not.toContain('goal record');
    expect(userText(baseContext)).not.toContain('goal record');
  });
});
