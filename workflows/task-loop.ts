import {
  ActivityFailure,
  ApplicationFailure,
  ContinueAsNew,
  TimeoutFailure,
  condition,
  defineQuery,
  defineSignal,
  getExternalWorkflowHandle,
  log,
  patched,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { continueAsNewWithFailover } from './lib/continue-as-new.js';
import { z } from 'zod';
import { agentIdSchema } from '../core/ids.js';
import { configKeys } from '../core/catalogue.js';
import type { createActivities } from '../activities/index.js';
import { dbActivity, llmActivity } from './lib/activity-options.js';
import { parseWorkflowInput } from './lib/input.js';
import { lifeforceShortfallOf } from './lib/lifeforce.js';
import { budgetIds } from '../core/lifeforce.js';
import { defaultReflex } from './lib/loop-state.js';
import { agentIdSearchAttribute, kindSearchAttribute } from './lib/search-attributes.js';
import { handlerText, timerText } from './lib/ui-text.js';
import { taskStopSignal } from './lib/task-signals.js';
import { failureMessage } from './lib/infra.js';
import { outageBackoffMs } from '../core/failure.js';

type Activities = ReturnType<typeof createActivities>;
const db = proxyActivities<Activities>(dbActivity);

export interface TaskLoopStatus {
  taskId: number;
  tick: number;
  replStatus: string;
  lastSummary: string | null;
  /** The tick cap in force (the command's, else the agent's `task_loop_max_ticks`, else its default). */
  maxTicks: number | null;
  /** Why the loop stopped or froze, once it has. */
  reason: string | null;
  /** An LLM outage or an unavailable dependency the loop is waiting out (the same tick is tried again). */
  waiting: { since: string; attempts: number; lastError: string } | null;
}

/** Ask the task loop to finish after its current tick (defined apart, so that the agent loop need not import this module). */
export { taskStopSignal };
/** Tick, repl status, last summary, tick cap, stop reason, outage wait. */
export const taskStatusQuery = defineQuery<TaskLoopStatus>('status');
/** Same name as the agent loop's wake signal: the parent wakes when the task loop writes a note. */
const parentWakeSignal = defineSignal<[{ reason: 'note' | 'process' }]>('wake');

export const taskLoopInput = z.object({
  agentId: agentIdSchema,
  taskId: z.number().int().positive(),
  title: z.string().max(500).default(''),
  parentWorkflowId: z.string().min(1),
  /** Tick cap from the command that started the loop; unset: the agent's `task_loop_max_ticks`. */
  maxTicks: z.number().int().positive().optional(),
  delayMs: z.number().int().min(0).max(3_600_000).default(1000),
  /** How long one tick's think may run before it counts as a timeout (default: the LLM preset's 10 minutes). */
  thinkTimeoutMs: z.number().int().min(1000).max(3_600_000).optional(),
  /** Restarts after a timeout so far (timeout → restart, at most `maxRestarts`). */
  restarts: z.number().int().min(0).default(0),
  tick: z.number().int().min(0).default(0),
});
export type TaskLoopInput = z.input<typeof taskLoopInput>;

export interface TaskLoopResult {
  taskId: number;
  ticks: number;
  replStatus: 'stopped' | 'error';
  reason: string;
}

const maxRestarts = 3;
const causeOf = (err: unknown) => (err instanceof ActivityFailure && err.cause ? err.cause : err);

/** No LLM answers, or a dependency is away: not the task's fault, so the tick is tried again later. */
function isOutage(err: unknown): boolean {
  const cause = causeOf(err);
  // Only what the activity said is an outage: an error of no known kind is the tick's own
  // failure (the task is frozen for review), not a reason to wait forever.
  return (
    err instanceof ActivityFailure &&
    cause instanceof ApplicationFailure &&
    (cause.type === 'LlmUnavailable' || cause.type === 'Unavailable')
  );
}

/**
 * An auxiliary loop for one task (id `agent/<id>/task/<taskId>`): the same tick in read-only
 * mode. It reads everything, writes only notes (`source='llm:task'`) and its own task row, and
 * sends its proposals to the main loop as notes. It runs at most its tick cap. When its think
 * fails: a timeout restarts the loop (continue-as-new, at most 3 times); a worker lost mid-tick
 * (heartbeat timeout) or a failure of the loop's own code is a crash: the loop stops and tells
 * the main loop; an error of the request freezes the task for review (`repl_status` 'error')
 * and tells the main loop; an LLM outage or a dependency away is waited out.
 */
export async function taskLoopWorkflow(rawInput: TaskLoopInput): Promise<TaskLoopResult> {
  const run = startTaskLoop(rawInput);
  await openTaskLoop(run);
  const { input } = run;
  let ticked: TaskLoopResult | 'continue' | undefined;
  try {
    ticked = await runTicks(run);
  } catch (err) {
    return endOnFailure(run, err);
  }
  if (ticked === 'continue') return continueAsNewWithFailover<typeof taskLoopWorkflow>({ ...input, tick: run.tick });
  if (ticked) return ticked;
  if (run.stop) return finish(run, 'stopped', 'stop requested', null);
  const why = `tick cap reached: ${run.tick} of ${run.maxTicks} ticks`;
  // Older histories ended at their input's cap without telling the main loop.
  return finish(
    run,
    'stopped',
    why,
    run.capped
      ? { text: `Task loop for task #${input.taskId} stopped before the task was done: ${why}.`, kind: 'tick-cap' }
      : null,
  );
}

/** A task loop's run: its input, its think activity, what its status query shows, and what its markers decided. */
interface TaskRun {
  input: z.infer<typeof taskLoopInput>;
  selfId: string;
  llm: typeof db;
  tick: number;
  stop: boolean;
  replStatus: string;
  lastSummary: string | null;
  reason: string | null;
  waiting: TaskLoopStatus['waiting'];
  maxTicks: number | null;
  /** task-loop-cap-v1 in force. */
  capped: boolean;
  /** task-budget-v1 in force. */
  budgeted: boolean;
  /** Whether the loop's own budget was carved (then it is closed at the end). */
  taskBudget: boolean;
}

/** The input checked, the run's state, its search attributes and handlers. */
function startTaskLoop(rawInput: TaskLoopInput): TaskRun {
  const input = parseWorkflowInput('taskLoopWorkflow', taskLoopInput, rawInput);
  const { agentId, taskId } = input;
  // One attempt: the loop itself decides what a failed think means, because its rules differ by
  // cause (a timeout restarts, a worker lost mid-tick is a crash, an error freezes the task, an
  // outage is waited out), and a retry inside the server would hide all of them.
  const llm = proxyActivities<Activities>({
    ...llmActivity,
    ...(input.thinkTimeoutMs !== undefined ? { startToCloseTimeout: input.thinkTimeoutMs } : {}),
    retry: { ...llmActivity.retry, maximumAttempts: 1 },
  });
  const run: TaskRun = {
    input,
    selfId: workflowInfo().workflowId,
    llm,
    tick: input.tick,
    stop: false,
    replStatus: 'running',
    lastSummary: null,
    reason: null,
    waiting: null,
    maxTicks: input.maxTicks ?? null,
    capped: false,
    budgeted: false,
    taskBudget: false,
  };
  upsertSearchAttributes([
    { key: agentIdSearchAttribute, value: agentId },
    { key: kindSearchAttribute, value: 'task-loop' },
  ]);
  const stopNow = () => {
    run.stop = true;
  };
  setHandler(taskStopSignal, stopNow, { description: handlerText.task.stopTask });
  setHandler(
    taskStatusQuery,
    () => ({
      taskId,
      tick: run.tick,
      replStatus: run.replStatus,
      lastSummary: run.lastSummary,
      maxTicks: run.maxTicks,
      reason: run.reason,
      waiting: run.waiting,
    }),
    { description: handlerText.task.status },
  );
  return run;
}

/** The loop marked running; its tick cap and first tick, and its own budget, as its markers say. */
async function openTaskLoop(run: TaskRun): Promise<void> {
  const { agentId, taskId } = run.input;
  const started = await db.setTaskLoopStatus({ agentId, taskId, replStatus: 'running', workflowId: run.selfId });
  // task-loop-cap-v1: the agent's task_loop_max_ticks (or its default) caps a loop the command
  // gave no cap; a loop resumed after an interruption goes on from its last recorded tick (its
  // next ticks must not reuse the keys of the ones it already thought). Histories from before
  // ran uncapped from the tick in their input.
  run.capped = patched('task-loop-cap-v1');
  if (run.capped) {
    run.maxTicks ??= started?.maxTicks ?? configKeys.task_loop_max_ticks.default;
    run.tick = Math.max(run.tick, started?.lastTick ?? 0);
  }
  // task-budget-v1: the loop spends a budget carved from the agent's (unlimited from an unlimited
  // agent, else a quarter of what it has left); it returns the rest when the loop ends. A carve
  // refused (the agent is exhausted) leaves the loop on the agent's own budget, which refuses too.
  run.budgeted = patched('task-budget-v1');
  if (run.budgeted) {
    const carved = await db.openChildBudget({
      parentId: budgetIds.agent(agentId),
      id: budgetIds.task(agentId, taskId),
      agentId,
      scope: 'task',
      amount: null,
      at: new Date().toISOString(),
    });
    run.taskBudget = carved.ok;
  }
}

/**
 * Tick until a stop, the cap, or continue-as-new suggested (`continue`); a task its think reports
 * ended finishes the loop here (its result).
 */
async function runTicks(run: TaskRun): Promise<TaskLoopResult | 'continue' | undefined> {
  const { input } = run;
  while (!run.stop && (run.maxTicks === null || run.tick < run.maxTicks)) {
    if (workflowInfo().continueAsNewSuggested) return 'continue';
    const next = run.tick + 1;
    const thought = await thinkWaitingOutOutages(run, next);
    if (!thought) break; // stopped while waiting
    run.tick = next;
    run.lastSummary = thought.summary;
    if (thought.commands.length || thought.invalid?.length || thought.rejected.length) {
      const outcomes = await db.applyCommands({
        agentId: input.agentId,
        tick: run.tick,
        workflowId: run.selfId,
        mode: 'task',
        taskId: input.taskId,
        // applyCommands keys a task loop's commands as `task<id>.<cmd_id>` in command_log.
        commands: thought.commands,
        ...(thought.validated ? { validated: true, invalid: thought.invalid ?? [] } : {}),
        rejected: thought.rejected,
      });
      if (outcomes.some((o) => o.type === 'notes.send' && o.status === 'applied' && !o.duplicate)) {
        await getExternalWorkflowHandle(input.parentWorkflowId)
          .signal(parentWakeSignal, { reason: 'note' })
          .catch(() => undefined);
      }
    }
    if (thought.taskStatus && ['done', 'completed', 'failed', 'cancelled'].includes(thought.taskStatus)) {
      return await finish(run, 'stopped', `task ${thought.taskStatus}`, null);
    }
    if (run.maxTicks !== null && run.tick >= run.maxTicks) break;
    await condition(() => run.stop, input.delayMs, { summary: timerText.taskPacing(input.delayMs) });
  }
  return undefined;
}

/** A failed tick: a timeout restarts (or, too often, freezes), a lifeforce shortfall stops, an error freezes, anything else is a crash. */
async function endOnFailure(run: TaskRun, err: unknown): Promise<TaskLoopResult> {
  const { input, tick } = run;
  const { agentId, taskId } = input;
  if (err instanceof ContinueAsNew) throw err;
  const cause = causeOf(err);
  const message = failureMessage(err, 500);
  if (cause instanceof TimeoutFailure && cause.timeoutType !== 'HEARTBEAT') {
    if (input.restarts < maxRestarts) {
      log.warn('task loop timed out; restarting', { taskId, restarts: input.restarts + 1 });
      await db.setTaskLoopStatus({
        agentId,
        taskId,
        replStatus: 'running',
        reason: `restart after a timeout (${message})`,
        restarted: true,
        tick,
      });
      return continueAsNewWithFailover<typeof taskLoopWorkflow>({ ...input, tick, restarts: input.restarts + 1 });
    }
    const why = `timed out ${maxRestarts + 1} times in a row (${message})`;
    return finish(run, 'error', why, {
      text: `Task loop for task #${taskId} failed and the task is frozen for review: ${why}`,
      kind: 'error',
    });
  }
  const shortfall = run.budgeted ? lifeforceShortfallOf(err) : null;
  if (shortfall) {
    // Nothing ran; the task is not at fault: the loop stops (not frozen) and tells the main loop.
    const why = `lifeforce exhausted: ${shortfall.budgetId} cannot cover ${shortfall.needed} LF (available ${shortfall.available ?? 'unlimited'} LF)`;
    return finish(run, 'stopped', why, { text: `Task loop for task #${taskId} stopped: ${why}.`, kind: 'lifeforce' });
  }
  if (cause instanceof ApplicationFailure && err instanceof ActivityFailure) {
    return finish(run, 'error', message, {
      text: `Task loop for task #${taskId} failed and the task is frozen for review: ${message}`,
      kind: 'error',
    });
  }
  // A worker lost mid-tick (its heartbeat stopped), or the loop's own code failed.
  const why =
    cause instanceof TimeoutFailure
      ? `crashed: the worker running tick ${tick + 1} was lost (${message})`
      : `crashed: ${message}`;
  return finish(run, 'stopped', why, {
    text: `Task loop for task #${taskId} crashed and stopped: ${why}`,
    kind: 'crash',
  });
}

/** Record the end; `notify` (a note to the main loop, tagged `kind`) wakes the parent too. */
async function finish(
  run: TaskRun,
  status: 'stopped' | 'error',
  why: string,
  notify: { text: string; kind: 'error' | 'crash' | 'tick-cap' | 'lifeforce' } | null,
): Promise<TaskLoopResult> {
  const { agentId, taskId } = run.input;
  run.replStatus = status;
  run.reason = why;
  await db.setTaskLoopStatus({
    agentId,
    taskId,
    replStatus: status,
    reason: why,
    frozen: status === 'error',
    tick: run.tick,
  });
  if (run.taskBudget) await db.closeChildBudget({ budgetId: budgetIds.task(agentId, taskId), reason: why });
  if (notify) {
    await db.recordNote({
      agentId,
      text: notify.text,
      priority: 3,
      tags: ['task-loop', notify.kind],
      source: 'system',
      taskId,
      idempotencyKey: `${run.selfId}:end:${workflowInfo().runId}`,
    });
    await getExternalWorkflowHandle(run.input.parentWorkflowId)
      .signal(parentWakeSignal, { reason: 'process' })
      .catch(() => undefined);
  }
  return { taskId, ticks: run.tick, replStatus: status, reason: why };
}

/** One tick's think; an outage (no LLM answers, a dependency away) is waited out with backoff. Null when stopped meanwhile. */
async function thinkWaitingOutOutages(run: TaskRun, next: number) {
  const { agentId, taskId } = run.input;
  for (let attempt = 1; ; attempt++) {
    try {
      const thought = await run.llm.think({
        agentId,
        tick: next,
        workflowId: run.selfId,
        now: new Date().toISOString(),
        mode: 'task',
        taskId,
        ...(run.taskBudget ? { taskBudget: run.taskBudget } : {}),
        loop: { contextMode: 'standard', recentK: 5, notesMode: 'auto' },
        params: { ...defaultReflex, maxTokens: 512 },
      });
      run.waiting = null;
      return thought;
    } catch (err) {
      if (!isOutage(err)) throw err;
      run.waiting = {
        since: run.waiting?.since ?? new Date().toISOString(),
        attempts: attempt,
        lastError: failureMessage(err, 500),
      };
      if (attempt === 1) log.warn('task loop waiting out an outage', { taskId, error: run.waiting.lastError });
      const backoffMs = outageBackoffMs(attempt);
      if (await condition(() => run.stop, backoffMs, { summary: timerText.taskOutage(backoffMs, attempt) }))
        return null;
    }
  }
}
