/**
 * Starting Mindloop's workflows from a client (`mindloop start`, `mindloop forks demo`,
 * `npm start`): the workflow id, the task queue and the summary and details the Temporal UI
 * shows for the run, in one place for every caller.
 */
import type { Client, WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { workflowIds } from '../core/ids.js';
import { forkBudgetDefaults, type SuccessorForkInput } from '../core/fork.js';
import type { BudgetSettingsInput } from '../core/lifeforce.js';
import type { agentLoopWorkflow } from '../workflows/agent-loop/index.js';
import { agentLoopText, forkText, spawnText } from '../workflows/lib/ui-text.js';
import { workflowFailover } from '../workflows/lib/activity-options.js';
import type { successorForkWorkflow } from '../workflows/successor-fork.js';
import type { SpawnInput } from '../core/society/spawn.js';
import type { spawnWorkflow } from '../workflows/spawn.js';

/** The task queue the workflows run on. */
export const workflowTaskQueue = 'mindloop';

interface AgentLoopStart {
  agentId: string;
  name?: string;
  /** Pause between ticks (the loop's `delayMs`); unset: the agent's saved setting or the default. */
  delayMs?: number;
  /** Complete after this many ticks; unset: run until stopped. */
  maxTicks?: number;
  /** The agent's budget when it is created (a later start keeps the budget it has). */
  lifeforce?: BudgetSettingsInput;
}

/** Start agent/<id>'s loop, or find the one already running (its first start's input holds). */
export function startAgentLoop(
  client: Client,
  o: AgentLoopStart,
  taskQueue = workflowTaskQueue,
): Promise<WorkflowHandleWithFirstExecutionRunId<typeof agentLoopWorkflow>> {
  return client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
    workflowId: workflowIds.agent(o.agentId),
    taskQueue,
    args: [
      {
        agentId: o.agentId,
        name: o.name,
        maxTicks: o.maxTicks,
        settings: o.delayMs === undefined ? undefined : { delayMs: o.delayMs },
        ...(o.lifeforce ? { lifeforce: o.lifeforce } : {}),
      },
    ],
    workflowIdConflictPolicy: 'USE_EXISTING',
    ...workflowFailover,
    ...agentLoopText(o),
  });
}

/**
 * Start successor fork fork/<forkId>. `from` is what the patch replaces (the current abstracts
 * strategy, say), for the summary only.
 */
export function startSuccessorFork(
  client: Client,
  input: SuccessorForkInput & { forkId: string },
  o: { from?: string; taskQueue?: string } = {},
): Promise<WorkflowHandleWithFirstExecutionRunId<typeof successorForkWorkflow>> {
  return client.workflow.start<typeof successorForkWorkflow>('successorForkWorkflow', {
    workflowId: workflowIds.fork(input.forkId),
    taskQueue: o.taskQueue ?? workflowTaskQueue,
    args: [input],
    ...workflowFailover,
    ...forkText({ ...input, from: o.from, wallMs: input.budget?.wallMs ?? forkBudgetDefaults.wallMs }),
  });
}

/** Start spawn `agent/<parent>/spawn/<name>`: a descendant of `parentId` is born (the outcome is the workflow's result). */
export function startSpawn(
  client: Client,
  input: SpawnInput & { parentId: string; name: string },
  taskQueue = workflowTaskQueue,
): Promise<WorkflowHandleWithFirstExecutionRunId<typeof spawnWorkflow>> {
  return client.workflow.start<typeof spawnWorkflow>('spawnWorkflow', {
    workflowId: workflowIds.spawn(input.parentId, input.name),
    taskQueue,
    args: [input],
    ...workflowFailover,
    ...spawnText(input),
  });
}
