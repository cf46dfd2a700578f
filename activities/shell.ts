/**
 * The `mindloop`-queue half of the agent's `shell` command: after the sandbox ran it, the
 * result goes to the command's command_log row (its `text` is shown in the next tick's
 * context 5) and to its process-log entry (context 4). Idempotent: it overwrites the same rows.
 */
import { mergeCommandResult } from '../db/queries/command-log.js';
import { and, eq } from 'drizzle-orm';
import type { Db } from '../db/client.js';
import { processLog } from '../db/schema/index.js';
import type { SandboxRunResult } from '../sandbox/sandbox.js';
import { clipText } from '../core/sanitize.js';
import { maxResultText } from './commands/shared.js';
import { shellChargeKey } from './commands/shell.js';
import { defaultPrices, type PriceTable } from '../core/lifeforce.js';
import { closeSandboxRun } from './sandbox-charge.js';

interface RecordShellResultInput {
  agentId: string;
  tick: number;
  /** The command_log cmd_id of the `shell` command. */
  cmdId: string;
  processId: string;
  command: string;
  /** The sandbox's result, or null when the sandbox could not run it (`error` says why). */
  result: SandboxRunResult | null;
  error?: string;
}

/** One line: how the run ended. */
function shellSummary(input: Pick<RecordShellResultInput, 'result' | 'error'>): string {
  const r = input.result;
  if (!r) return `not run: ${input.error ?? 'the sandbox is unavailable'}`;
  const end =
    r.status === 'budget_exceeded'
      ? `budget_exceeded: ${r.exceeded}${r.detail ? ` (${r.detail})` : ''}`
      : `exit ${r.exitCode}`;
  return `${end} in ${r.durationMs} ms${r.truncated ? ', output truncated' : ''}`;
}

/** The text the agent sees: command, how it ended, stdout and stderr (clipped to 8 KB). */
function shellResultText(input: Pick<RecordShellResultInput, 'command' | 'result' | 'error'>): string {
  const parts = [`$ ${input.command}`, shellSummary(input)];
  if (input.result?.stdout) parts.push(`--- stdout ---\n${input.result.stdout}`);
  if (input.result?.stderr) parts.push(`--- stderr ---\n${input.result.stderr}`);
  return clipText(parts.join('\n'), maxResultText);
}

function processStatus(input: RecordShellResultInput): 'close' | 'error' | 'timeout' | 'offline' {
  if (!input.result) return 'offline';
  if (input.result.status === 'ok') return 'close';
  if (input.result.exceeded === 'wall_time') return 'timeout';
  return 'error';
}

export function createShellActivities({ db, prices = defaultPrices }: { db: Db; prices?: PriceTable }) {
  return {
    /** Store a sandboxed `shell` run's output on its command_log row and process-log entry. */
    async recordShellResult(input: RecordShellResultInput): Promise<{ summary: string }> {
      const summary = shellSummary(input);
      const text = shellResultText(input);
      const patch = {
        message: clipText(`shell: ${summary}`, 200),
        text,
        ...(text.length >= maxResultText ? { truncated: true } : {}),
      };
      await db.transaction(async (tx) => {
        await mergeCommandResult(tx, input, patch);
        await tx
          .update(processLog)
          .set({
            status: processStatus(input),
            message: clipText(summary, 500),
            payload: {
              command: input.command,
              exitCode: input.result?.exitCode ?? null,
              status: input.result?.status ?? 'unavailable',
              ...(input.result?.exceeded ? { exceeded: input.result.exceeded } : {}),
              stdout: clipText(input.result?.stdout ?? '', 4096),
              stderr: clipText(input.result?.stderr ?? input.error ?? '', 4096),
              durationMs: input.result?.durationMs ?? null,
              imageId: input.result?.imageId ?? null,
            },
          })
          .where(and(eq(processLog.agentId, input.agentId), eq(processLog.processId, input.processId)));
      });
      // The run's hold: charged its wall seconds, or released when it did not run.
      const ran = input.result ? { durationMs: input.result.durationMs, cpus: 1, status: input.result.status } : null;
      await closeSandboxRun(db, prices, shellChargeKey(input.agentId, input.processId), ran, input.error);
      return { summary };
    },
  };
}
