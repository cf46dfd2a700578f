/** Fact-checks: the outcome of checking a fact the agent stated with low confidence. */
import { and, eq, notInArray } from 'drizzle-orm';
import { clipText } from '../../core/sanitize.js';
import type { Db } from '../client.js';
import { tasks, unverifiedFacts } from '../schema/index.js';

export interface ResolveFactInput {
  agentId: string;
  factId: number;
  status: 'verified' | 'rejected';
  resolution: string;
}

/**
 * Record a fact-check's outcome on its `unverified_facts` row and close its task if still open.
 * The one code path of the CLI (`fact-resolve`), the activity, the agent's `facts.resolve` and
 * a fact-check task set done/failed (inside the command's transaction).
 */
export async function resolveFact(
  db: Pick<Db, 'update'>,
  input: ResolveFactInput,
): Promise<{ ok: boolean; taskId: number | null }> {
  const [f] = await db
    .update(unverifiedFacts)
    .set({ status: input.status, resolution: clipText(input.resolution, 2000), resolvedAt: new Date() })
    .where(and(eq(unverifiedFacts.id, input.factId), eq(unverifiedFacts.agentId, input.agentId)))
    .returning({ taskId: unverifiedFacts.taskId });
  if (!f) return { ok: false, taskId: null };
  if (f.taskId) {
    await db
      .update(tasks)
      .set({ status: 'done', completedAt: new Date() })
      .where(
        and(
          eq(tasks.id, f.taskId),
          eq(tasks.agentId, input.agentId),
          notInArray(tasks.status, ['done', 'failed', 'cancelled']),
        ),
      );
  }
  return { ok: true, taskId: f.taskId };
}
