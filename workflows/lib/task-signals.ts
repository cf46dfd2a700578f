/**
 * The task loop's signals, apart from workflows/task-loop.ts: the agent loop signals its task
 * loops, and importing task-loop.ts for that would make every agent loop evaluate (and hold) the
 * task loop's module and what it imports — the command catalogue and its schemas, ~1 MB of
 * heap a workflow (see workflows/index.ts).
 */
import { defineSignal } from '@temporalio/workflow';

/** Ask the task loop to finish after its current tick. */
export const taskStopSignal = defineSignal<[{ reason?: string }?]>('stopTask');
