/** A task loop's standing: its `repl_status`, why it stopped or restarted, and where it resumes. */
import { and, eq, isNull, sql } from 'drizzle-orm';
import { validateConfigValue } from '../../core/catalogue.js';
import type { Db } from '../../db/client.js';
import { agentConfig, processLog, tasks } from '../../db/schema/index.js';

/** Task-loop bookkeeping activities, built from a database. */
export function createTaskLoopActivities({ db }: { db: Db }) {
  return {
    /**
     * Record a task loop's `repl_status` (and freeze the task on error); a stop, an error or a
     * restart is also logged with its reason under `task/<id>`. Returns where the loop stands:
     * its last recorded tick (a resumed loop goes on from there) and the agent's
     * `task_loop_max_ticks`, if set.
     */
    async setTaskLoopStatus(input: {
      agentId: string;
      taskId: number;
      replStatus: 'running' | 'stopped' | 'error';
      workflowId?: string;
      reason?: string;
      frozen?: boolean;
      restarted?: boolean;
      tick?: number;
    }): Promise<{ lastTick: number; maxTicks: number | null }> {
      const processId = `task/${input.taskId}`;
      const ended = input.replStatus !== 'running';
      await db.transaction(async (tx) => {
        await tx
          .update(tasks)
          .set({
            replStatus: input.replStatus,
            ...(input.workflowId ? { replWorkflowId: input.workflowId } : {}),
            ...(input.reason && input.replStatus === 'error' ? { lastError: input.reason } : {}),
            ...(input.frozen ? { frozen: true } : {}),
            ...(input.restarted ? { replRestarts: sql`${tasks.replRestarts} + 1` } : {}),
          })
          .where(and(eq(tasks.agentId, input.agentId), eq(tasks.id, input.taskId)));
        if (!input.reason || (!ended && !input.restarted)) return;
        // A loop that ended leaves no open process behind in the agent's context.
        if (ended)
          await tx
            .update(processLog)
            .set({ closedAt: new Date() })
            .where(
              and(
                eq(processLog.agentId, input.agentId),
                eq(processLog.processId, processId),
                isNull(processLog.closedAt),
              ),
            );
        // Its own kind: the task loop's replies are read back by (process, kind 'task_loop', tick).
        await tx.insert(processLog).values({
          agentId: input.agentId,
          processId,
          kind: 'task_loop_status',
          name: `task ${input.taskId} loop ${input.replStatus}`,
          status: input.replStatus === 'error' ? 'error' : input.restarted ? 'timeout' : 'close',
          message: input.reason.slice(0, 2000),
          tick: input.tick ?? null,
          closedAt: ended ? new Date() : null,
        });
      });
      const [[last], config] = await Promise.all([
        db
          .select({ tick: sql<number | null>`max(${processLog.tick})` })
          .from(processLog)
          .where(
            and(
              eq(processLog.agentId, input.agentId),
              eq(processLog.processId, processId),
              eq(processLog.kind, 'task_loop'),
            ),
          ),
        db
          .select({ value: agentConfig.value })
          .from(agentConfig)
          .where(and(eq(agentConfig.agentId, input.agentId), eq(agentConfig.key, 'task_loop_max_ticks'))),
      ]);
      const cap = config[0] ? validateConfigValue('task_loop_max_ticks', config[0].value) : null;
      return { lastTick: Number(last?.tick ?? 0), maxTicks: cap?.ok ? (cap.value as number) : null };
    },
  };
}
