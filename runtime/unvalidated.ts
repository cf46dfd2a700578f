/**
 * A human's answer to a command the reflexes held as unvalidated (`mindloop unvalidated
 * approve|reject`). Approving runs the command once through the ordinary command path
 * (`applyCommands`: catalogue validation, command_log, idempotency by cmd id) under the key
 * `approved.<row id>`, marked approved by the human so the danger checks do not hold it
 * again; the held row then records the outcome. Approving twice finds the first run.
 */
import { and, desc, eq } from 'drizzle-orm';
import type { CommandOutcome } from '../core/loop-types.js';
import type { Db } from '../db/client.js';
import { commandLog } from '../db/schema/index.js';
import { applyCommands } from '../activities/tick/apply-commands.js';

/** Commands whose effect only the agent loop carries out (the sandbox run of `shell`). */
const loopOnly: ReadonlySet<string> = new Set(['shell']);

interface HeldCommand {
  id: number;
  tick: number;
  cmdId: string;
  type: string;
  args: Record<string, unknown>;
  rating: number | null;
  threshold: number | null;
  reason: string | null;
}

/** The agent's unvalidated commands, newest first. */
export async function listUnvalidated(db: Db, agentId: string, limit = 50): Promise<HeldCommand[]> {
  return db
    .select({
      id: commandLog.id,
      tick: commandLog.tick,
      cmdId: commandLog.cmdId,
      type: commandLog.type,
      args: commandLog.args,
      rating: commandLog.rating,
      threshold: commandLog.threshold,
      reason: commandLog.reason,
    })
    .from(commandLog)
    .where(and(eq(commandLog.agentId, agentId), eq(commandLog.status, 'unvalidated')))
    .orderBy(desc(commandLog.id))
    .limit(limit);
}

type HumanAnswer = { ok: true; outcome: CommandOutcome } | { ok: false; error: string };

async function heldRow(db: Db, agentId: string, id: number) {
  const [row] = await db
    .select()
    .from(commandLog)
    .where(and(eq(commandLog.id, id), eq(commandLog.agentId, agentId)));
  return row;
}

/** Run a held command once, as approved by `by`; the held row records the outcome. */
export async function approveUnvalidated(
  db: Db,
  input: { agentId: string; id: number; by: string },
): Promise<HumanAnswer> {
  const row = await heldRow(db, input.agentId, input.id);
  if (!row) return { ok: false, error: `no command #${input.id} for ${input.agentId}` };
  const cmdId = `approved.${row.id}`;
  const [earlier] = await db
    .select({ id: commandLog.id })
    .from(commandLog)
    .where(and(eq(commandLog.agentId, input.agentId), eq(commandLog.tick, row.tick), eq(commandLog.cmdId, cmdId)));
  if (row.status !== 'unvalidated' && !earlier)
    return { ok: false, error: `command #${row.id} is ${row.status}, not unvalidated` };
  if (loopOnly.has(row.type)) {
    return {
      ok: false,
      error: `${row.type} runs in the sandbox from the agent loop, not from here: set auto_pass_destructive or give the agent a validator, and it can run it again`,
    };
  }
  const [outcome] = await applyCommands(
    { db },
    {
      agentId: input.agentId,
      tick: row.tick,
      mode: 'main',
      ...(row.workflowId ? { workflowId: row.workflowId } : {}),
      commands: [
        { cmdId, type: row.type, args: row.args, ...(row.description ? { description: row.description } : {}) },
      ],
      approvedBy: input.by,
    },
  );
  if (!outcome) return { ok: false, error: `command #${row.id} produced no outcome` };
  // Conditional on the held state: a second approve (or a crash after the run) changes nothing twice.
  await db
    .update(commandLog)
    .set({
      status: outcome.status,
      reason:
        `approved by ${input.by}: ran as ${cmdId} (${outcome.message}); held because ${row.reason ?? 'unvalidated'}`.slice(
          0,
          2000,
        ),
    })
    .where(and(eq(commandLog.id, row.id), eq(commandLog.status, 'unvalidated')));
  return { ok: true, outcome };
}

/** Record a human's refusal of a held command: it never runs. */
export async function rejectUnvalidated(
  db: Db,
  input: { agentId: string; id: number; by: string; reason?: string },
): Promise<HumanAnswer> {
  const row = await heldRow(db, input.agentId, input.id);
  if (!row) return { ok: false, error: `no command #${input.id} for ${input.agentId}` };
  const [updated] = await db
    .update(commandLog)
    .set({
      status: 'rejected',
      reason:
        `rejected by ${input.by}${input.reason ? `: ${input.reason}` : ''}; held because ${row.reason ?? 'unvalidated'}`.slice(
          0,
          2000,
        ),
    })
    .where(and(eq(commandLog.id, row.id), eq(commandLog.status, 'unvalidated')))
    .returning({ id: commandLog.id });
  if (!updated) return { ok: false, error: `command #${row.id} is ${row.status}, not unvalidated` };
  return {
    ok: true,
    outcome: {
      cmdId: row.cmdId,
      type: row.type,
      status: 'rejected',
      message: `rejected by ${input.by}`,
      duplicate: false,
      effects: [],
    },
  };
}
