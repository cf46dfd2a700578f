/**
 * Temporal task priority from an agent's lifeforce: under a backlog on one task queue, the
 * matching service hands out tasks with a lower `priorityKey` first (1 first, 5 last; unset is 3).
 * Pure: the caller reads the balance; this only maps it to a key.
 */
import type { Priority } from '@temporalio/common';

const highestPriorityKey = 1;
const lowestPriorityKey = 5;
/** An agent without a budget limit: ahead of the server's default (3), behind a full budget. */
export const unlimitedPriorityKey = 2;

export interface PriorityInput {
  /** LF left; null when the budget is unlimited. */
  available: number | null;
  /** The budget's size in LF; null when unlimited. */
  capacity: number | null;
  /** Set by hand (1..5): wins over the lifeforce. */
  explicit?: number;
}

/**
 * Bands of the fraction available / capacity:
 *   ≥ 0.75 → 1 · ≥ 0.5 → 2 · ≥ 0.25 → 3 · > 0 → 4 · ≤ 0 (spent) → 5.
 * A fraction above 1 (more than the capacity left) is band 1.
 */
const bands: ReadonlyArray<readonly [minFraction: number, key: number]> = [
  [0.75, 1],
  [0.5, 2],
  [0.25, 3],
  [Number.MIN_VALUE, 4],
];

/** NaN and negative amounts count as 0. */
function amount(value: number): number {
  return Number.isNaN(value) || value < 0 ? 0 : value;
}

function clampKey(key: number): number {
  return Math.min(lowestPriorityKey, Math.max(highestPriorityKey, Math.round(key)));
}

/**
 * The priority key (an integer 1..5) of an agent's work. An explicit key wins (rounded and
 * clamped into 1..5; NaN is ignored); an unlimited budget (either side null, or an infinite
 * capacity) is 2; otherwise the fraction's band, where a capacity of 0 counts as full while LF is left.
 * Never throws.
 */
export function priorityKeyFor(input: PriorityInput): number {
  if (input.explicit !== undefined && !Number.isNaN(input.explicit)) return clampKey(input.explicit);
  if (input.available === null || input.capacity === null) return unlimitedPriorityKey;
  const capacity = amount(input.capacity);
  if (capacity === Number.POSITIVE_INFINITY) return unlimitedPriorityKey;
  const available = amount(input.available);
  const fraction = capacity > 0 ? available / capacity : available > 0 ? 1 : 0;
  return bands.find(([min]) => fraction >= min)?.[1] ?? lowestPriorityKey;
}

/** The SDK's `Priority` with its key always set. */
export type KeyedPriority = Priority & { priorityKey: number };

/** The same key as the SDK's `Priority` (plain data: it goes into activity and child workflow options). */
export function priorityFor(input: PriorityInput): KeyedPriority {
  return { priorityKey: priorityKeyFor(input) };
}
