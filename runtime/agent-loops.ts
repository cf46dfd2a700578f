/**
 * Which agents' loops are not running, and the agent rows brought in line with it: a loop
 * that failed or was terminated cannot say so itself, so whoever looks (`mindloop doctor`,
 * a worker starting) compares `agents.status` with the workflow and records what it finds.
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { and, eq, inArray } from 'drizzle-orm';
import { workflowIds } from '../core/ids.js';
import type { Db } from '../db/client.js';
import { agents, processLog } from '../db/schema/index.js';

interface LoopHealth {
  agentId: string;
  /** What the agent row says. */
  rowStatus: string;
  /** The workflow's execution status (RUNNING, FAILED, TERMINATED, COMPLETED…), or NOT_FOUND. */
  workflowStatus: string;
  closeTime: string | null;
}

/**
 * Every agent whose row says it is running or paused but whose loop workflow is not running;
 * with `fix`, those rows become `failed` (`stopped` for a loop that completed) and the process
 * log records why, once.
 */
export async function unhealthyAgentLoops(
  client: Client,
  db: Db,
  opts: { fix?: boolean; limit?: number } = {},
): Promise<LoopHealth[]> {
  const rows = await db
    .select({ id: agents.id, status: agents.status, lastTick: agents.lastTick })
    .from(agents)
    .where(inArray(agents.status, ['running', 'paused']))
    .limit(opts.limit ?? 500);
  const found: LoopHealth[] = [];
  for (const row of rows) {
    let workflowStatus = 'NOT_FOUND';
    let closeTime: string | null = null;
    try {
      const desc = await client.workflow.getHandle(workflowIds.agent(row.id)).describe();
      workflowStatus = desc.status.name;
      closeTime = desc.closeTime?.toISOString() ?? null;
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
    if (workflowStatus === 'RUNNING') continue;
    found.push({ agentId: row.id, rowStatus: row.status, workflowStatus, closeTime });
    if (!opts.fix) continue;
    const status = workflowStatus === 'COMPLETED' ? 'stopped' : 'failed';
    await db.transaction(async (tx) => {
      const updated = await tx
        .update(agents)
        .set({ status })
        .where(and(eq(agents.id, row.id), inArray(agents.status, ['running', 'paused'])))
        .returning({ id: agents.id });
      if (updated.length === 0) return;
      await tx.insert(processLog).values({
        agentId: row.id,
        processId: 'agent-loop',
        kind: 'loop_not_running',
        status: status === 'failed' ? 'error' : 'close',
        message: `the loop workflow ${workflowIds.agent(row.id)} is ${workflowStatus}${closeTime ? ` since ${closeTime}` : ''}; agent marked ${status}`,
        tick: row.lastTick,
      });
    });
  }
  return found;
}
