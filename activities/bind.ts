/**
 * A family's activities from module-level functions that take the family's dependencies
 * first: the factory binds them once, so each activity stays a plain, testable function.
 */

/** `F` without its first parameter (the dependencies). */
type BoundActivity<D, F> = F extends (deps: D, ...args: infer A) => infer R ? (...args: A) => R : never;

/** Each function of `fns` with `deps` bound as its first argument, under the same name. */
export function bindActivities<D, T extends Record<string, (deps: D, ...args: never[]) => unknown>>(
  deps: D,
  fns: T,
): { [K in keyof T]: BoundActivity<D, T[K]> } {
  const bound: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(fns)) bound[name] = (...args: never[]) => fn(deps, ...args);
  return bound as { [K in keyof T]: BoundActivity<D, T[K]> };
}
