/**
 * `shell`: the command never runs here. The handler registers a process-log entry
 * and returns a `shell` loop effect; the agent loop runs the command as a `sandboxRun`
 * activity on the sandbox queue and `recordShellResult` (activities/shell.ts) writes the
 * output back to this command's log row and to the process, for the next tick's context.
 */
import { clipText } from '../../core/sanitize.js';
import { processLog } from '../../db/schema/index.js';
import type { HandlerMap } from './shared.js';

export const shellHandlers: HandlerMap<'shell'> = {
  async shell({ tx, agentId, tick, logCmdId, workflowId }, a) {
    // Deterministic ids: a retried applyCommands names the same process and container.
    const processId = `shell.t${tick}.${logCmdId}`;
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
      message: clipText(`shell command queued in the sandbox as process '${processId}'; its output comes with the next context`, 200),
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
