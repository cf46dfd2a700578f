/**
 * The workflows an agent loop starts and lets go: task loops, nerves, speech, spawns, escalations
 * and tool generation. Each is detached (ParentClosePolicy.ABANDON): it outlives this run, a
 * continue-as-new and a stop of the loop, and reports back by a note and a wake. A child already
 * running under its id (a retried tick, a restart) is that child going on, not a failure.
 */
import {
  ParentClosePolicy,
  getExternalWorkflowHandle,
  log,
  startChild,
  type ChildWorkflowOptions,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError, type Workflow } from '@temporalio/common';
import type { LoopEffect } from '../../core/loop-types.js';
import { workflowIds } from '../../core/ids.js';
import {
  escalationInputText,
  nerveText,
  spawnText,
  speechText,
  taskLoopText,
  toolGenerationText,
  type StartText,
} from '../lib/ui-text.js';
import { workflowFailover } from '../lib/activity-options.js';
import { failureMessage } from '../lib/infra.js';
import { taskStopSignal } from '../lib/task-signals.js';
import type { Loop } from './loop.js';
import { records } from './proxies.js';
// Children are started by type name: importing their modules would make every agent loop
// evaluate (and hold) their code and schemas too (see workflows/index.ts).
import type { taskLoopWorkflow } from '../task-loop.js';
import type { toolGenerationWorkflow } from '../tool-generation.js';
import type { escalationWorkflow } from '../escalation.js';
import type { nerveWorkflow, NerveWorkflowInput } from '../nerve.js';
import type { speechWorkflow } from '../speech.js';
import type { spawnWorkflow } from '../spawn.js';

export type EffectOf<K extends LoopEffect['kind']> = Extract<LoopEffect, { kind: K }>;

/**
 * Start `type` as a detached child at the loop's priority, with its Temporal UI text. Null when
 * it started or already runs under that id; otherwise the failure, logged as "<what> not started".
 */
export async function startDetached<W extends Workflow>(
  loop: Loop,
  type: string,
  options: { workflowId: string; args: Parameters<W> } & StartText,
  what: string,
  context: Record<string, unknown>,
): Promise<unknown> {
  try {
    const childOptions: ChildWorkflowOptions = {
      ...options,
      ...workflowFailover,
      parentClosePolicy: ParentClosePolicy.ABANDON,
      ...loop.childPriority(),
    };
    await startChild(type, childOptions);
    return null;
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return null;
    log.warn(`${what} not started`, { ...context, error: failureMessage(err) });
    return err;
  }
}

/** A task loop `agent/<id>/task/<taskId>`; the parent re-attaches to it when it starts again. */
export async function startTaskLoop(loop: Loop, taskId: number, title: string, maxTicks?: number): Promise<void> {
  const { agentId } = loop;
  const workflowId = workflowIds.task(agentId, taskId);
  const args: Parameters<typeof taskLoopWorkflow> = [
    { agentId, taskId, title, parentWorkflowId: loop.selfId, maxTicks },
  ];
  const text = taskLoopText({ agentId, taskId, title, maxTicks });
  if (
    (await startDetached<typeof taskLoopWorkflow>(
      loop,
      'taskLoopWorkflow',
      { workflowId, args, ...text },
      'task loop',
      { taskId },
    )) === null
  ) {
    loop.state.taskLoops[String(taskId)] = workflowId;
  }
}

export async function stopTaskLoop(loop: Loop, taskId: number): Promise<void> {
  const { agentId, state } = loop;
  const workflowId = state.taskLoops[String(taskId)] ?? workflowIds.task(agentId, taskId);
  try {
    await getExternalWorkflowHandle(workflowId).signal(taskStopSignal, { reason: 'stopped by the main loop' });
  } catch (err) {
    // Already finished: record the stop so it is not resumed at the next start.
    log.info('task loop already closed', { taskId, error: String(err) });
    await loop.rideOut('setTaskLoopStatus', () =>
      records.setTaskLoopStatus({ agentId, taskId, replStatus: 'stopped', reason: 'stopped by the main loop' }),
    );
  }
  delete state.taskLoops[String(taskId)];
}

/** The nerve `agent/<id>/nerve/<name>`: one run at a time, so one already running goes on. */
export async function startNerve(loop: Loop, e: EffectOf<'startNerve'>): Promise<void> {
  const { agentId } = loop;
  const args: Parameters<typeof nerveWorkflow> = [
    {
      agentId,
      nerve: e.nerve as NerveWorkflowInput['nerve'],
      steps: e.steps,
      seed: e.seed,
      mode: e.mode as NerveWorkflowInput['mode'],
    },
  ];
  await startDetached<typeof nerveWorkflow>(
    loop,
    'nerveWorkflow',
    {
      workflowId: workflowIds.nerve(agentId, e.nerve),
      args,
      ...nerveText({ agentId, nerve: e.nerve, steps: e.steps }),
    },
    'nerve',
    { nerve: e.nerve },
  );
}

/** The agent's `speak`: `speech/<id>/<tick>/<cmdId>`, which holds the lifeforce and writes the outcome onto the command's log row. */
export async function startSpeech(loop: Loop, e: EffectOf<'speak'>, tick: number): Promise<void> {
  const { agentId } = loop;
  const requestedBy = { workflowId: loop.selfId, tick, cmdId: e.cmdId };
  const args: Parameters<typeof speechWorkflow> = [
    { kind: 'speak', agentId, text: e.text, ...(e.lang ? { lang: e.lang } : {}), requestedBy },
  ];
  await startDetached<typeof speechWorkflow>(
    loop,
    'speechWorkflow',
    {
      workflowId: workflowIds.speech(agentId, tick, e.cmdId),
      args,
      ...speechText({ agentId, kind: 'speak', text: e.text, requestedBy }),
    },
    'speech',
    { cmdId: e.cmdId },
  );
}

/** The agent's `spawn`: `agent/<id>/spawn/<name>`; the descendant runs its own loop, the outcome comes back as a note. */
export async function startSpawn(loop: Loop, e: EffectOf<'spawn'>, tick: number): Promise<void> {
  const { agentId } = loop;
  const requestedBy = { workflowId: loop.selfId, tick, cmdId: e.cmdId };
  const input = {
    parentId: agentId,
    type: e.type,
    name: e.name,
    ...(e.goals ? { goals: e.goals } : {}),
    ...(e.budget !== undefined ? { budget: e.budget } : {}),
    requestedBy,
  };
  await startDetached<typeof spawnWorkflow>(
    loop,
    'spawnWorkflow',
    { workflowId: workflowIds.spawn(agentId, e.name), args: [input], ...spawnText(input) },
    'spawn',
    { name: e.name },
  );
}

/** `escalation/<id>`: its answer comes back as a note and a wake. */
export async function startEscalation(loop: Loop, e: EffectOf<'escalate'>): Promise<void> {
  const args: Parameters<typeof escalationWorkflow> = [e.input as Parameters<typeof escalationWorkflow>[0]];
  await startDetached<typeof escalationWorkflow>(
    loop,
    'escalationWorkflow',
    { workflowId: workflowIds.escalation(e.escalationId), args, ...escalationInputText(e.escalationId, e.input) },
    'escalation',
    { escalationId: e.escalationId },
  );
}

/** Tool generation for a capability: one at a time per capability, so one already generating goes on. */
export async function startToolGeneration(loop: Loop, e: EffectOf<'generateTool'>, tick: number): Promise<void> {
  const { agentId } = loop;
  const requestedBy = { workflowId: loop.selfId, tick, cmdId: e.cmdId };
  const input = { agentId, capability: e.capability, description: e.description, requestedBy };
  await startDetached<typeof toolGenerationWorkflow>(
    loop,
    'toolGenerationWorkflow',
    { workflowId: workflowIds.tool(agentId, e.capability), args: [input], ...toolGenerationText(input) },
    'tool generation',
    { capability: e.capability },
  );
}
