/** Writes to an agent's command_log that other steps than applyCommands make. */
import { and, eq, sql } from 'drizzle-orm';
import { commandLog } from '../schema/index.js';
import type { Queryable } from './abstracts.js';

/** What a later step adds to a command's stored result: the line the agent reads, and the text. */
export interface CommandResultPatch {
  message: string;
  text?: string;
  truncated?: boolean;
}

/**
 * Add what a command's follow-up found (a shell run's output, a tool call's result, a spoken
 * reply) to its command_log row, read in the agent's next context. Merged: the effects stored
 * with the row stay, so a retried applyCommands still returns them.
 */
export async function mergeCommandResult(
  q: Queryable,
  at: { agentId: string; tick: number; cmdId: string },
  patch: CommandResultPatch,
): Promise<void> {
  await q
    .update(commandLog)
    .set({ result: sql`coalesce(${commandLog.result}, '{}'::jsonb) || ${JSON.stringify(patch)}::jsonb` })
    .where(and(eq(commandLog.agentId, at.agentId), eq(commandLog.tick, at.tick), eq(commandLog.cmdId, at.cmdId)));
}
