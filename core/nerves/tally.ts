/**
 * What a nerve run has done so far: decisions per mode and per decider, bad and unreadable
 * ones, LF spent, promotions and demotions. Plain data, carried across continue-as-new.
 */
import { z } from 'zod';
import type { DecidedBy, NerveEvent, NerveMode } from './modes.js';
import type { Outcome } from './nerve.js';

const count = z.number().int().min(0);

export const nerveTallySchema = z.strictObject({
  decisions: count,
  byMode: z.strictObject({ deliberate: count, hybrid: count, reflex: count }),
  byDecider: z.strictObject({ llm: count, rule: count, table: count }),
  bad: count,
  /** Replies that named no valid action. */
  invalid: count,
  lf: z.number().min(0),
  promotions: count,
  demotions: count,
  /** The latest promotion or demotion, in words. */
  lastEvent: z.string().max(300).nullable(),
});
export type NerveTally = z.infer<typeof nerveTallySchema>;

export const emptyTally = (): NerveTally => ({
  decisions: 0,
  byMode: { deliberate: 0, hybrid: 0, reflex: 0 },
  byDecider: { llm: 0, rule: 0, table: 0 },
  bad: 0,
  invalid: 0,
  lf: 0,
  promotions: 0,
  demotions: 0,
  lastEvent: null,
});

/** `promote EVALUATE/near_fast → evade (20 choices, 100%)`. */
export function describeEvent(e: NerveEvent): string {
  return `${e.kind} ${e.state}/${e.bucket} → ${e.action} (${e.support} choices, ${Math.round(e.agreement * 100)}%)`;
}

export interface DecisionSummary {
  mode: NerveMode;
  decidedBy: DecidedBy;
  outcome: Outcome;
  action: string | null;
  lf: number;
  events: readonly NerveEvent[];
}

/** The tally with promotions and demotions counted (a reflex arc learns them when it flushes, after its decisions). */
export function addEvents(t: NerveTally, events: readonly NerveEvent[]): NerveTally {
  const last = events.at(-1);
  return {
    ...t,
    promotions: t.promotions + events.filter((e) => e.kind === 'promote').length,
    demotions: t.demotions + events.filter((e) => e.kind === 'demote').length,
    lastEvent: last ? describeEvent(last) : t.lastEvent,
  };
}

/** The tally after one more decision. */
export function addDecision(t: NerveTally, d: DecisionSummary): NerveTally {
  return addEvents(
    {
      ...t,
      decisions: t.decisions + 1,
      byMode: { ...t.byMode, [d.mode]: t.byMode[d.mode] + 1 },
      byDecider: { ...t.byDecider, [d.decidedBy]: t.byDecider[d.decidedBy] + 1 },
      bad: t.bad + (d.outcome === 'bad' ? 1 : 0),
      invalid: t.invalid + (d.action === null ? 1 : 0),
      // The ledger's scale (4 decimals), so that sums do not drift.
      lf: Math.round((t.lf + d.lf) * 10_000) / 10_000,
    },
    d.events,
  );
}
