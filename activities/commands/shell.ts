/**
 * `shell`: the command never runs here. The handler registers a process-log entry
 * and returns a `shell` loop effect; the agent loop runs the command as a `sandboxRun`
 * activity on the sandbox queue and `recordShellResult` (activities/shell.ts) writes the
 * output back to this command's log row and to the process, for the next tick's context.
 */
import { budgetIds } from '../../core/lifeforce.js';
import { clipText } from '../../core/sanitize.js';
import { processLog } from '../../db/schema/index.js';
import { holdSandboxRun } from '../sandbox-charge.js';
import { CommandError, type HandlerMap } from './shared.js';

/** The wall time a `shell` run gets unless it names its own. */
const defaultShellTimeoutMs = 30_000;

/** The ledger key of a `shell` run's (or a designed tool action's) hold: settled by recordShellResult when the run is recorded. */
export function shellChargeKey(agentId: string, processId: string): string {
  return `sandbox:${agentId}/${processId}`;
}

export const shellHandlers: HandlerMap<'shell'> = {
  async shell({ tx, agentId, tick, logCmdId, workflowId, prices }, a) {
    // Deterministic ids: a retried applyCommands names the same process and container.
    const processId = `shell.t${tick}.${logCmdId}`;
    // The run's worst case (its wall budget on one CPU) is held before it is queued: a budget
    // that cannot cover it refuses the command, and nothing runs.
    const wallMs = a.timeout_ms ?? defaultShellTimeoutMs;
    const held = await holdSandboxRun(tx, prices, {
      key: shellChargeKey(agentId, processId),
      budgetId: budgetIds.agent(agentId),
      wallMs,
      cpus: 1,
      tick,
      reason: a.command,
    });
    if (!held.ok)
      throw new CommandError(
        `lifeforce exhausted: the run's ${held.needed} LF (${wallMs} ms of sandbox) exceeds what the budget has (${held.available ?? 'unlimited'} LF, ${held.reason})`,
      );
    await tx.insert(processLog).values({
      agentId,
      processId,
      kind: 'shell',
      name: clipText(a.command, 200),
      status: 'ok',
      message: 'queued for the sandbox',
      payload: { command: a.command, ...(a.timeout_ms ? { timeoutMs: a.timeout_ms } : {}) },
      tick,
    });
    return {
      message: clipText(
        `shell command queued in the sandbox as process '${processId}'; its output comes with the next context`,
        200,
      ),
      effects: [
        {
          kind: 'shell',
          processId,
          cmdId: logCmdId,
          key: `${workflowId ?? `agent/${agentId}`}:shell:${tick}:${logCmdId}`,
          command: a.command,
          ...(a.timeout_ms ? { timeoutMs: a.timeout_ms } : {}),
        },
      ],
    };
  },
};
