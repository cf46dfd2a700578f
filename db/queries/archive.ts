/** The memory manager's archive is reversible: un-archive one row of a memory tier. */
import { and, eq, sql } from 'drizzle-orm';
import type { Db } from '../client.js';
import { diaryEntries, llmMemory, llmRecentResponses, processLog } from '../schema/index.js';

export interface RestoreInput {
  agentId: string;
  table: 'llm_recent_responses' | 'diary_entries' | 'llm_memory';
  id: number;
}
export const restorableTables = ['llm_recent_responses', 'diary_entries', 'llm_memory'] as const;

/** Un-archive one row (activity and CLI); the restore is logged in `process_log` like the archiving was. */
export async function restoreArchived(db: Db, input: RestoreInput): Promise<{ restored: boolean }> {
  const t = { llm_recent_responses: llmRecentResponses, diary_entries: diaryEntries, llm_memory: llmMemory }[
    input.table
  ];
  if (!t)
    throw new RangeError(`restore: unknown table ${String(input.table)} (expected ${restorableTables.join(', ')})`);
  const r = await db
    .update(t)
    .set({ archivedAt: null })
    .where(and(eq(t.id, input.id), eq(t.agentId, input.agentId), sql`${t.archivedAt} is not null`))
    .returning({ id: t.id });
  await db.insert(processLog).values({
    agentId: input.agentId,
    processId: 'memory-manager',
    kind: 'memory_manager',
    status: 'close',
    closedAt: new Date(),
    message: `restore ${input.table} #${input.id}: ${r[0] ? 'restored' : 'not archived or not found'}`,
  });
  return { restored: r.length > 0 };
}
