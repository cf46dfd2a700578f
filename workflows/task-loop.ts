import {
  ActivityFailure,
  ApplicationFailure,
  TimeoutFailure,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  getExternalWorkflowHandle,
  log,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { z } from 'zod';
import { agentIdSchema } from '../core/ids.js';
import type { createActivities } from '../activities/index.js';
import { dbActivity, llmActivity } from './lib/activity-options.js';
import { parseWorkflowInput } from './lib/input.js';
import { defaultReflex } from './lib/loop-state.js';
import { agentIdSearchAttribute, kindSearchAttribute } from './lib/search-attributes.js';

type Activities = ReturnType<typeof createActivities>;
const db = proxyActivities<Activities>(dbActivity);
const llm = proxyActivities<Activities>(llmActivity);

/** Ask the task loop to finish after its current tick. */
export const taskStopSignal = defineSignal<[{ reason?: string }?]>('stopTask');
export const taskStatusQuery = defineQuery<{ taskId: number; tick: number; replStatus: string; lastSummary: string | null }>('status');
/** Same name as the agent loop's wake signal: the parent wakes when the task loop writes a note. */
const parentWakeSignal = defineSignal<[{ reason: 'note' | 'process' }]>('wake');

export const taskLoopInput = z.object({
  agentId: agentIdSchema,
  taskId: z.number().int().positive(),
  title: z.string().max(500).default(''),
  parentWorkflowId: z.string().min(1),
  maxTicks: z.number().int().positive().optional(),
  delayMs: z.number().int().min(0).max(3_600_000).default(1000),
  /** Restarts after a timeout so far (SPEC §2: timeout → restart). */
  restarts: z.number().int().min(0).default(0),
  tick: z.number().int().min(0).default(0),
});
export type TaskLoopInput = z.input<typeof taskLoopInput>;

const maxRestarts = 3;

/**
 * An auxiliary loop for one task (id `agent/<id>/task/<taskId>`): the same tick in read-only
 * mode. It reads everything, writes only notes (`source='llm:task'`) and its own task row, and
 * sends its proposals to the main loop as notes. Timeout → restart; error → task frozen for
 * review; crash → stop and notify the main loop.
 */
export async function taskLoopWorkflow(rawInput: TaskLoopInput): Promise<{ taskId: number; ticks: number; replStatus: string }> {
  const input = parseWorkflowInput('taskLoopWorkflow', taskLoopInput, rawInput);
  const { agentId, taskId } = input;
  const selfId = workflowInfo().workflowId;
  let tick = input.tick;
  let stop = false;
  let replStatus = 'running';
  let lastSummary: string | null = null;
  upsertSearchAttributes([
    { key: agentIdSearchAttribute, value: agentId },
    { key: kindSearchAttribute, value: 'task-loop' },
  ]);
  setHandler(taskStopSignal, () => {
    stop = true;
  });
  setHandler(taskStatusQuery, () => ({ taskId, tick, replStatus, lastSummary }));

  await db.setTaskLoopStatus({ agentId, taskId, replStatus: 'running', workflowId: selfId });
  try {
    while (!stop && (input.maxTicks === undefined || tick < input.maxTicks)) {
      if (workflowInfo().continueAsNewSuggested) {
        return continueAsNew<typeof taskLoopWorkflow>({ ...input, tick });
      }
      const next = tick + 1;
      const thought = await llm.think({
        agentId,
        tick: next,
        workflowId: selfId,
        now: new Date().toISOString(),
        mode: 'task',
        taskId,
        loop: { contextMode: 'standard', recentK: 5, notesMode: 'auto' },
        params: { ...defaultReflex, maxTokens: 512 },
      });
      tick = next;
      lastSummary = thought.summary;
      if (thought.commands.length || thought.rejected.length) {
        const outcomes = await db.applyCommands({
          agentId,
          tick,
          workflowId: selfId,
          mode: 'task',
          taskId,
          // applyCommands keys a task loop's commands as `task<id>.<cmd_id>` in command_log.
          commands: thought.commands,
          rejected: thought.rejected,
        });
        if (outcomes.some((o) => o.type === 'notes.send' && o.status === 'applied' && !o.duplicate)) {
          await getExternalWorkflowHandle(input.parentWorkflowId).signal(parentWakeSignal, { reason: 'note' }).catch(() => undefined);
        }
      }
      if (thought.taskStatus && ['done', 'completed', 'failed', 'cancelled'].includes(thought.taskStatus)) break;
      await condition(() => stop, input.delayMs);
    }
    replStatus = 'stopped';
    await db.setTaskLoopStatus({ agentId, taskId, replStatus: 'stopped', reason: stop ? 'stop requested' : 'task finished' });
    return { taskId, ticks: tick, replStatus };
  } catch (err) {
    const cause = err instanceof ActivityFailure ? err.cause : err;
    if (cause instanceof TimeoutFailure && input.restarts < maxRestarts) {
      log.warn('task loop timed out; restarting', { taskId, restarts: input.restarts + 1 });
      await db.setTaskLoopStatus({ agentId, taskId, replStatus: 'running', reason: 'restart after timeout', restarted: true });
      return continueAsNew<typeof taskLoopWorkflow>({ ...input, tick, restarts: input.restarts + 1 });
    }
    const message = cause instanceof Error ? cause.message : String(cause);
    // error → frozen for review; anything unexpected (a crash) → stopped. Both tell the main loop.
    const isError = cause instanceof ApplicationFailure || cause instanceof TimeoutFailure;
    replStatus = isError ? 'error' : 'stopped';
    await db.setTaskLoopStatus({ agentId, taskId, replStatus: isError ? 'error' : 'stopped', reason: message, frozen: isError });
    await db.recordNote({
      agentId,
      text: `Task loop for task #${taskId} ${isError ? 'failed and the task is frozen for review' : 'crashed and stopped'}: ${message}`,
      priority: 3,
      tags: ['task-loop', isError ? 'error' : 'crash'],
      source: 'system',
      taskId,
      idempotencyKey: `${selfId}:end:${workflowInfo().runId}`,
    });
    await getExternalWorkflowHandle(input.parentWorkflowId).signal(parentWakeSignal, { reason: 'process' }).catch(() => undefined);
    return { taskId, ticks: tick, replStatus };
  }
}
