/**
 * LF amounts and what a budget needs to go on, as `mindloop lifeforce` and `mindloop status` say
 * them. Text only: the numbers come from core/lifeforce.ts (`lifeforceNeeds`, `thinkReservation`).
 */
import { budgetIds, type LifeforceNeeds } from '../core/lifeforce.js';

/** `12.5 LF`, kept to the ledger's 4 decimals. */
export function fmtLf(n: number | null, none = 'unlimited'): string {
  return n === null ? none : `${Math.round(n * 10_000) / 10_000} LF`;
}

/** A plain number for a command line (`3.2331`). */
const arg = (n: number): string => String(Math.round(n * 10_000) / 10_000);

/**
 * What lets an operation of `n.need` LF run on `budgetId` of `agentId`, one clause each (none
 * when nothing stands in its way): the smallest grant, the envelope limits, and a capacity below
 * the need, which regeneration can then never cover.
 */
export function needsClauses(agentId: string, budgetId: string, n: LifeforceNeeds): string[] {
  if (n.closed) return [`budget ${budgetId} is closed`];
  const set = `mindloop lifeforce set ${agentId}`;
  const clauses: string[] = [];
  if (n.grant > 0)
    clauses.push(
      `needs ${fmtLf(n.grant)} (the smallest grant: mindloop lifeforce grant ${agentId} ${arg(n.grant)}${budgetId === budgetIds.agent(agentId) ? '' : ` --budget ${budgetId}`})`,
    );
  if (n.daily !== null) clauses.push(`needs a daily limit of ${fmtLf(n.daily)} (${set} --daily ${arg(n.daily)})`);
  if (n.monthly !== null)
    clauses.push(`needs a monthly limit of ${fmtLf(n.monthly)} (${set} --monthly ${arg(n.monthly)})`);
  // Only the agent's own budget has a capacity the operator sets.
  if (n.capacity !== null && budgetId === budgetIds.agent(agentId))
    clauses.push(
      `a capacity under ${fmtLf(n.capacity)} never holds it, nor does regeneration fill it (${set} --capacity ${arg(n.capacity)})`,
    );
  return clauses;
}

/** Where a think's reservation was computed from, for the warning. */
interface ThinkSource {
  model: string | null;
  maxTokens: number;
  /** The tick whose prompt it assumed; null: no think yet, the prompt is the part every think carries. */
  promptTick: number | null;
}

/**
 * The warning `lifeforce set` and `lifeforce grant` print when the agent's budget cannot cover
 * its next think, or its capacity never could; null when it can.
 */
export function thinkWarning(agentId: string, reserves: number, source: ThinkSource, n: LifeforceNeeds): string | null {
  const clauses = needsClauses(agentId, budgetIds.agent(agentId), n);
  if (clauses.length === 0) return null;
  // The next prompt is the last one's size give or take what arrived since (a reply, notes): about.
  const [least, prompt] =
    source.promptTick === null
      ? ['at least ', 'no think yet: its system prompt and commands alone']
      : ['about ', `a prompt as long as tick ${source.promptTick}'s`];
  const can =
    n.grant === 0 && n.daily === null && n.monthly === null ? 'it can think now, but' : `${agentId} cannot think:`;
  return `warning: one think of ${agentId} reserves ${least}${fmtLf(reserves)} (${source.model}, ${source.maxTokens} output tokens, ${prompt}); ${can} ${clauses.join('; ')}`;
}
