/**
 * A run's start and its end by continue-as-new: the agent's row, its lifeforce budget, the
 * agent file it was started with, the task loops a restart interrupted; and the state carried
 * into the next run.
 */
import { ApplicationFailure, allHandlersFinished, condition, patched, workflowInfo } from '@temporalio/workflow';
import { continueAsNewWithFailover } from '../lib/continue-as-new.js';
import type { LoopSettingsPatch } from '../../core/agent-file/render.js';
import { failureMessage } from '../lib/infra.js';
import { InvalidInputError } from '../lib/input.js';
import { applyConfigValues } from '../lib/loop-state.js';
import { startTaskLoop } from './children.js';
import type { Loop } from './loop.js';
import { records } from './proxies.js';
import type { agentLoopWorkflow } from './workflow.js';

/** Loop start (and every continue-as-new): identity row, lifeforce budget, interrupted task loops. */
export async function begin(loop: Loop): Promise<void> {
  const { agentId, state, input } = loop;
  const fileSettings = input.agentFile && !input.carryOver ? await applyFileAtStart(loop, input.agentFile) : undefined;
  const started = await loop.rideOut('loopStarted', () =>
    records.loopStarted({ agentId, name: input.name ?? agentId, workflowId: loop.selfId }),
  );
  loop.started = true;
  // lifeforce-v1: the agent's budget (created unlimited unless the input sets it); older histories have none.
  if (patched('lifeforce-v1')) {
    const at = new Date().toISOString();
    const v = await loop.rideOut('ensureAgentBudget', () =>
      records.ensureAgentBudget({ agentId, ...(input.lifeforce ? { settings: input.lifeforce } : {}), at }),
    );
    loop.lifeforce = {
      budgetId: v.budgetId,
      available: v.available,
      capacity: v.capacity,
      lastCharge: null,
      priorityKey: v.priorityKey,
      explicitPriority: v.explicitPriority,
      onExhausted: v.onExhausted,
      exhausted: null,
    };
  }
  if (!input.carryOver) {
    // A loop started anew (after `stop`, a failure or a termination) goes on from the agent's
    // last recorded tick, not from tick 1. (Histories from before lastTick replay with 0.)
    if (started.lastTick) state.tick = started.lastTick;
    // A fresh start (a new agent, or one restarted after `stop`) resumes the configuration the
    // agent saved with config.set; settings given in the input still win. (Histories recorded
    // before loopStarted returned `config` replay with nothing to apply.)
    applyConfigValues(state.settings, started.config ?? {});
    if (input.settings) loop.applySettings(input.settings);
    if (fileSettings) loop.applySettings(fileSettings);
  }
  for (const t of started.interruptedTaskLoops) await startTaskLoop(loop, t.taskId, t.title);
}

/**
 * The agent file the loop was started with (from the Temporal UI, say): checked and written like
 * `mindloop apply`, before the first tick. A file refused fails the start at once, naming why.
 */
async function applyFileAtStart(loop: Loop, document: Record<string, unknown>): Promise<LoopSettingsPatch> {
  try {
    const requestKey = `${loop.selfId}:file:${workflowInfo().firstExecutionRunId}`;
    const r = await loop.rideOut('applyAgentFile', () =>
      records.applyAgentFile({
        agentId: loop.agentId,
        document,
        requestKey,
        appliedBy: 'temporal-ui',
        source: 'agentLoopWorkflow input',
      }),
    );
    return r.loopSettings;
  } catch (err) {
    throw ApplicationFailure.create({
      type: InvalidInputError,
      nonRetryable: true,
      message: `agentLoopWorkflow: invalid input — ${failureMessage(err)}`,
    });
  }
}

/** Let the handlers finish, then continue as new with the state carried over (an agent file given at the start is applied: dropped). */
export async function continueAsNewWithState(loop: Loop): Promise<never> {
  loop.phase = 'stopping';
  await condition(allHandlersFinished);
  loop.state.counters.continuedAsNew++;
  const { agentFile: _applied, ...input } = loop.input;
  return continueAsNewWithFailover<typeof agentLoopWorkflow>({ ...input, carryOver: loop.state });
}
