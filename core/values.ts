/** Small pure checks and clamps over plain values, shared by workflows, activities and core. */

/** `x` held to 0…1; anything not finite (NaN, ±Infinity) counts as 0. */
export function clamp01(x: number): number {
  return Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : 0;
}

/** A JSON-like object: not null, not an array. */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** What lies at the dot path `a.b.0.c` in a JSON value; `found` false when a step is missing. */
export function readPath(value: unknown, path: string): { found: boolean; value?: unknown } {
  let cur: unknown = value;
  for (const part of path.split('.')) {
    if (cur === null || typeof cur !== 'object' || !Object.hasOwn(cur, part)) return { found: false };
    cur = (cur as Record<string, unknown>)[part];
  }
  return { found: true, value: cur };
}
