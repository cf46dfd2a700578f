/**
 * The memory manager's archive is reversible: un-archive one row of a memory tier (the agent's
 * `memory.restore`, the person's `mindloop memory restore`, the reflexes' restore activity).
 * A link lives between two live concepts: restoring a link restores its archived endpoints too.
 * Restoring a concept does not bring its links back; each is restored on its own.
 */
import { and, eq, inArray, isNotNull } from 'drizzle-orm';
import type { Db } from '../client.js';
import {
  abstracts,
  concepts,
  diaryEntries,
  links,
  llmMemory,
  llmRecentResponses,
  processLog,
} from '../schema/index.js';

/** What a restore names: a kind (what the agent calls it) and the table it lives in. */
export const kindTables = {
  diary: 'diary_entries',
  note: 'llm_memory',
  reply: 'llm_recent_responses',
  concept: 'concepts',
  link: 'links',
  abstract: 'abstracts',
} as const;
export type RestoreKind = keyof typeof kindTables;
export const restoreKinds = Object.keys(kindTables) as RestoreKind[];
export const restorableTables = [
  'llm_recent_responses',
  'diary_entries',
  'llm_memory',
  'concepts',
  'links',
  'abstracts',
] as const;
export type RestorableTable = (typeof restorableTables)[number];

export interface RestoreInput {
  agentId: string;
  table: RestorableTable;
  id: number;
}

/** A kind or a table name → the table; undefined when it is neither. */
export function restoreTableOf(name: string): RestorableTable | undefined {
  if (Object.hasOwn(kindTables, name)) return kindTables[name as RestoreKind];
  return (restorableTables as readonly string[]).includes(name) ? (name as RestorableTable) : undefined;
}

const tables = {
  llm_recent_responses: llmRecentResponses,
  diary_entries: diaryEntries,
  llm_memory: llmMemory,
  concepts,
  links,
  abstracts,
} as const;

type Q = Db | Parameters<Parameters<Db['transaction']>[0]>[0];

export interface RestoreResult {
  restored: boolean;
  /** What came back with it (a link's archived concepts), as `concepts #id`. */
  also?: string[];
  /** Why nothing came back: not found, or not archived. */
  why?: 'not found' | 'not archived';
}

/** Un-archive one row; the restore is logged in `process_log` like the archiving was. */
export async function restoreArchived(db: Q, input: RestoreInput): Promise<RestoreResult> {
  const t = tables[input.table];
  if (!t)
    throw new RangeError(`restore: unknown table ${String(input.table)} (expected ${restorableTables.join(', ')})`);
  const r = await db
    .update(t)
    .set({ archivedAt: null })
    .where(and(eq(t.id, input.id), eq(t.agentId, input.agentId), isNotNull(t.archivedAt)))
    .returning({ id: t.id });
  const also: string[] = [];
  let why: RestoreResult['why'];
  if (!r[0]) {
    const [row] = await db
      .select({ id: t.id })
      .from(t)
      .where(and(eq(t.id, input.id), eq(t.agentId, input.agentId)));
    why = row ? 'not archived' : 'not found';
  } else if (input.table === 'links') {
    const [l] = await db
      .select({ from: links.fromConceptId, to: links.toConceptId })
      .from(links)
      .where(eq(links.id, input.id));
    const back = await db
      .update(concepts)
      .set({ archivedAt: null })
      .where(and(inArray(concepts.id, [l!.from, l!.to]), isNotNull(concepts.archivedAt)))
      .returning({ id: concepts.id });
    also.push(...back.map((c) => `concepts #${c.id}`));
  }
  await db.insert(processLog).values({
    agentId: input.agentId,
    processId: 'memory-manager',
    kind: 'memory_manager',
    name: `restore ${input.table} #${input.id}`,
    status: 'close',
    closedAt: new Date(),
    message: `restore ${input.table} #${input.id}: ${r[0] ? `restored${also.length ? ` with ${also.join(', ')}` : ''}` : `${why}`}`,
    payload: { table: input.table, id: input.id, action: 'restore', restored: r.length > 0, also },
  });
  return { restored: r.length > 0, ...(also.length ? { also } : {}), ...(why ? { why } : {}) };
}
