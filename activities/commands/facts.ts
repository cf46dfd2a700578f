/**
 * Fact-checks: the agent lists its unverified facts and records a check's
 * outcome. Resolving goes through `resolveFact` (db/queries/facts.ts), the same code path as
 * the CLI's `fact-resolve`; setting a fact-check task done (verified) or failed (rejected)
 * resolves its pending fact too.
 */
import { and, desc, eq } from 'drizzle-orm';
import type { ArgsOf } from '../../core/catalogue.js';
import { unverifiedFacts } from '../../db/schema/index.js';
import { resolveFact } from '../../db/queries/facts.js';
import { oneLine } from '../../core/sanitize.js';
import { listResult, notFound, type FamilyTypes, type Handler, type HandlerMap, type Tx } from './shared.js';

export const factHandlers: HandlerMap<FamilyTypes<'facts'>> = {
  async 'facts.list'({ tx, agentId }, a) {
    const status = a.status ?? 'pending';
    const rows = await tx
      .select()
      .from(unverifiedFacts)
      .where(
        and(eq(unverifiedFacts.agentId, agentId), status === 'all' ? undefined : eq(unverifiedFacts.status, status)),
      )
      .orderBy(desc(unverifiedFacts.id))
      .limit(a.limit ?? 20);
    return listResult(
      status === 'all' ? 'facts' : `${status} facts`,
      rows.map(
        (f) =>
          `#${f.id} [${f.status}] confidence ${f.confidence}${f.taskId ? ` task #${f.taskId}` : ''} ${oneLine(f.fact, 200)}${f.resolution ? ` -- ${oneLine(f.resolution, 120)}` : ''}`,
      ),
    );
  },
  async 'facts.resolve'({ tx, agentId }, a) {
    const r = await resolveFact(tx, { agentId, factId: a.fact_id, status: a.status, resolution: a.evidence });
    if (!r.ok) notFound('fact', a.fact_id);
    return { message: `fact #${a.fact_id} ${a.status}${r.taskId ? `; fact-check task #${r.taskId} closed` : ''}` };
  },
};

/** A task status that settles the pending facts the task checks: done = verified, failed = rejected. */
const outcomeOf = { done: 'verified', failed: 'rejected' } as const;

/** Resolve the pending facts whose fact-check task is `taskId` (after it was set `status`). */
async function resolveFactsOfTask(tx: Tx, agentId: string, taskId: number, status: string): Promise<number[]> {
  const outcome = (outcomeOf as Record<string, 'verified' | 'rejected' | undefined>)[status];
  if (!outcome) return [];
  const facts = await tx
    .select({ id: unverifiedFacts.id })
    .from(unverifiedFacts)
    .where(
      and(
        eq(unverifiedFacts.agentId, agentId),
        eq(unverifiedFacts.taskId, taskId),
        eq(unverifiedFacts.status, 'pending'),
      ),
    );
  for (const f of facts)
    await resolveFact(tx, {
      agentId,
      factId: f.id,
      status: outcome,
      resolution: `fact-check task #${taskId} set ${status}`,
    });
  return facts.map((f) => f.id);
}

/** `tasks.status` that also settles the facts a fact-check task checks (one transaction). */
export function withFactResolution(inner: Handler<'tasks.status'>): Handler<'tasks.status'> {
  return async (ctx, a: ArgsOf<'tasks.status'>) => {
    const r = await inner(ctx, a);
    const resolved = await resolveFactsOfTask(ctx.tx, ctx.agentId, a.id, a.status);
    return resolved.length
      ? {
          ...r,
          message: `${r.message}; fact ${resolved.map((id) => `#${id}`).join(', ')} ${outcomeOf[a.status as keyof typeof outcomeOf]}`,
        }
      : r;
  };
}
