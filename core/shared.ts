/**
 * Values built once per process and shared, for what every workflow would otherwise build for
 * itself. A worker's workflows share one V8 context but each gets its own module cache, so a
 * module's schemas are built again, and held, by every open workflow (about 1 MB an agent
 * loop). This module is preloaded (workflows/lib/preload.ts): it is evaluated once, before any
 * workflow, and its map is shared by all of them.
 *
 * What is built here must hold no workflow's state and never change once built: zod schemas
 * qualify (zod only memoizes inside them, the same for every caller). They are not frozen: the
 * SDK freezes what a preloaded module exports, and zod binds a schema's methods on first use,
 * which a frozen schema refuses; the map is out of the freeze's reach.
 *
 * Outside a worker (activities, tests, the CLI) it is a plain memo.
 */
const built = new Map<string, unknown>();

/** The value of `key`, built by `build` on the first call in this process. One key, one builder. */
export function sharedValue<T>(key: string, build: () => T): T {
  if (built.has(key)) return built.get(key) as T;
  const value = build();
  built.set(key, value);
  return value;
}
