/**
 * The process log (context 4): the agent registers external processes,
 * marks and stops them, and closes finished ones. Closed entries leave the context.
 */
import { clipText, oneLine } from '../../core/sanitize.js';
import { and, desc, eq, inArray, isNull } from 'drizzle-orm';
import { processLog } from '../../db/schema/index.js';
import { CommandError, listResult, type FamilyTypes, type HandlerMap, type Tx } from './shared.js';

/** Statuses a process ends in; `process.cleanup` closes open entries that reached one. */
const finishedProcessStatuses = ['close', 'error', 'timeout', 'offline'] as const;

async function updateOpen(tx: Tx, agentId: string, processId: string, set: Partial<typeof processLog.$inferInsert>) {
  const rows = await tx
    .update(processLog)
    .set(set)
    .where(and(eq(processLog.agentId, agentId), eq(processLog.processId, processId), isNull(processLog.closedAt)))
    .returning({ id: processLog.id });
  if (!rows.length) throw new CommandError(`no open process '${clipText(processId, 60)}'`);
  return rows.length;
}

export const processHandlers: HandlerMap<FamilyTypes<'process'>> = {
  async 'process.start'({ tx, agentId, tick, logCmdId }, a) {
    // Deterministic id: the same command always names the same process.
    const processId = `p${tick}.${logCmdId}`;
    await tx.insert(processLog).values({
      agentId,
      processId,
      kind: a.kind,
      name: a.name,
      status: 'ok',
      message: 'started',
      payload: a.payload ?? {},
      tick,
    });
    return { message: clipText(`process '${processId}' (${a.kind}: ${a.name}) started`, 200) };
  },
  async 'process.list'({ tx, agentId }, a) {
    const rows = await tx
      .select()
      .from(processLog)
      .where(and(eq(processLog.agentId, agentId), a.all ? undefined : isNull(processLog.closedAt)))
      .orderBy(desc(processLog.id))
      .limit(a.limit ?? 20);
    return listResult(
      a.all ? 'processes' : 'open processes',
      rows.map(
        (p) =>
          `${p.processId} [${p.status}${p.closedAt ? ', closed' : ''}] ${p.kind}${p.name ? `: ${oneLine(p.name, 80)}` : ''}${p.message ? ` — ${oneLine(p.message, 120)}` : ''}`,
      ),
    );
  },
  async 'process.stop'({ tx, agentId }, a) {
    await updateOpen(tx, agentId, a.process_id, {
      status: 'close',
      message: 'stopped by the agent',
      closedAt: new Date(),
    });
    return { message: clipText(`process '${a.process_id}' stopped`, 200) };
  },
  async 'process.mark'({ tx, agentId }, a) {
    await updateOpen(tx, agentId, a.process_id, {
      status: a.status,
      ...(a.message !== undefined ? { message: a.message } : {}),
      ...(a.status === 'close' ? { closedAt: new Date() } : {}),
    });
    return { message: clipText(`process '${a.process_id}' marked ${a.status}`, 200) };
  },
  async 'process.cleanup'({ tx, agentId }) {
    const rows = await tx
      .update(processLog)
      .set({ closedAt: new Date() })
      .where(
        and(
          eq(processLog.agentId, agentId),
          isNull(processLog.closedAt),
          inArray(processLog.status, [...finishedProcessStatuses]),
        ),
      )
      .returning({ processId: processLog.processId });
    return {
      message: clipText(
        `${rows.length} finished process(es) closed${rows.length ? `: ${rows.map((r) => r.processId).join(', ')}` : ''}`,
        200,
      ),
    };
  },
};
