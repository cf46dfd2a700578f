/**
 * The embedder's health, one agent at a time, in the process log (process id `embedder`): an OPEN
 * entry (status `offline`) while the agent's embedder is away, with when and why; closed (status
 * `ok`, `closed_at` = when it came back) once it answers again. The novelty reflex writes it
 * (activities/tick/reflexes.ts); `mindloop status` and the notebook read the newest entry. The
 * entry carries no tick, so the anti-stagnation reflex does not count it as new data.
 */
import { and, desc, eq, isNull, sql, type Placeholder, type SQL } from 'drizzle-orm';
import type { Db } from '../client.js';
import { processLog } from '../schema/index.js';

export const embedderProcessId = 'embedder';

export type EmbedderHealth =
  { state: 'away'; since: string; reason: string } | { state: 'back'; since: string; reason: string; backAt: string };

interface AwayPayload {
  since: string;
  reason: string;
  tick?: number;
}

const open = (agentId: string | Placeholder) =>
  and(eq(processLog.agentId, agentId), eq(processLog.processId, embedderProcessId), isNull(processLog.closedAt));

/** Whether the agent's embedder has an open away entry, as a column of a statement that reads the agent by id. */
export function embedderAwaySql(agentId: string | Placeholder): SQL<boolean> {
  return sql<boolean>`exists (select 1 from ${processLog} where ${open(agentId)})`;
}

/** Records the embedder as away (once: an entry already open keeps its first time and reason); true when it opened one. */
export async function markEmbedderAway(
  db: Db,
  agentId: string,
  reason: string,
  at: Date,
  tick?: number,
): Promise<boolean> {
  const [already] = await db.select({ id: processLog.id }).from(processLog).where(open(agentId)).limit(1);
  if (already) return false;
  const payload: AwayPayload = { since: at.toISOString(), reason, ...(tick !== undefined ? { tick } : {}) };
  await db.insert(processLog).values({
    agentId,
    processId: embedderProcessId,
    kind: 'embedder',
    name: 'embedder',
    status: 'offline',
    message: `embedder away since ${payload.since}: ${reason} (novelty compares words only)`,
    payload: { ...payload },
  });
  return true;
}

/** Closes the open away entry, if any, saying when the embedder came back; true when one was open. */
export async function markEmbedderBack(db: Db, agentId: string, at: Date): Promise<boolean> {
  const closed = await db
    .update(processLog)
    .set({ status: 'ok', closedAt: at, message: `embedder back since ${at.toISOString()}` })
    .where(open(agentId))
    .returning({ id: processLog.id });
  return closed.length > 0;
}

/** The newest embedder entry of the agent as health, or null when it was never away. */
export async function embedderHealth(db: Db, agentId: string): Promise<EmbedderHealth | null> {
  const [row] = await db
    .select({ closedAt: processLog.closedAt, payload: processLog.payload })
    .from(processLog)
    .where(and(eq(processLog.agentId, agentId), eq(processLog.processId, embedderProcessId)))
    .orderBy(desc(processLog.id))
    .limit(1);
  if (!row) return null;
  const p = (row.payload ?? {}) as Partial<AwayPayload>;
  const since = typeof p.since === 'string' ? p.since : '?';
  const reason = typeof p.reason === 'string' ? p.reason : 'unknown';
  return row.closedAt
    ? { state: 'back', since, reason, backAt: row.closedAt.toISOString() }
    : { state: 'away', since, reason };
}

/** The health as a person reads it. */
export function embedderHealthLine(h: EmbedderHealth): string {
  return h.state === 'away'
    ? `embedder away since ${h.since}: ${h.reason} (novelty compares words only)`
    : `embedder back since ${h.backAt} (was away since ${h.since}: ${h.reason})`;
}
