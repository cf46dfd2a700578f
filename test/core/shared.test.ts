/**
 * core/shared.ts: what every workflow would build for itself (its schemas) is built once per
 * worker. The map must live in a preloaded module (else each workflow has its own), and a key
 * must name one builder (else two call sites would share the first one's value).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { budgetSettingsSchema } from '../../core/lifeforce-settings.js';
import { sharedValue } from '../../core/shared.js';
import { isolationStateSchema } from '../../core/society/isolation.js';
import { addNoteInput, agentLoopInput, setConfigInput } from '../../workflows/agent-loop/index.js';
import { carryOverSchema, initialState } from '../../workflows/lib/loop-state.js';
import { reflexStateSchema } from '../../workflows/lib/reflexes.js';
import { sharedValues } from '../../workflows/lib/preload.js';
import { repoRoot } from '../helpers/spawn.js';

/** Every object and array reachable from `v`. */
function containers(v: unknown, into = new Set<object>()): Set<object> {
  if (v && typeof v === 'object' && !into.has(v)) {
    into.add(v);
    for (const x of Object.values(v)) containers(x, into);
  }
  return into;
}

describe('sharedValue', () => {
  it('builds once per key and hands every caller the same value', () => {
    let builds = 0;
    const build = () => ({ n: ++builds });
    const first = sharedValue('test/shared/once', build);
    expect(sharedValue('test/shared/once', build)).toBe(first);
    expect(builds).toBe(1);
    expect(sharedValue('test/shared/other', build)).toEqual({ n: 2 });
  });

  it('is the preloaded module the workers share, not a copy per workflow', () => {
    expect(sharedValues).toBe(sharedValue);
  });

  // Workflows share these schemas, and workflow code changes its state in place: two parses must
  // never hand out the same object or array (zod copies a default only one level deep).
  it.each([
    ['reflex state', () => reflexStateSchema.parse(undefined)],
    ['isolation state', () => isolationStateSchema.parse(undefined)],
    ['carry-over', () => carryOverSchema.parse(JSON.parse(JSON.stringify(initialState())))],
    [
      'agent loop input',
      () =>
        agentLoopInput.parse({ agentId: 'ada', settings: { idle: { on: true, wakeOn: ['note'], timeoutMs: 5000 } } }),
    ],
    ['note', () => addNoteInput.parse({ text: 'hello' })],
    ['config', () => setConfigInput.parse({ idle: { on: true } })],
    ['budget settings', () => budgetSettingsSchema.parse({ capacity: 10 })],
  ])('the shared %s schema hands out new objects on every parse', (_, parse) => {
    const [a, b] = [containers(parse()), containers(parse())];
    expect(a.size).toBeGreaterThan(0);
    expect([...a].filter((o) => b.has(o))).toEqual([]);
  });

  it('each key is used at one place in the code', () => {
    const places = new Map<string, string[]>();
    for (const dir of ['core', 'workflows', 'activities', 'db', 'runtime']) {
      for (const e of readdirSync(join(repoRoot, dir), { withFileTypes: true, recursive: true })) {
        if (!e.isFile() || !e.name.endsWith('.ts')) continue;
        const file = join(e.parentPath, e.name);
        for (const m of readFileSync(file, 'utf8').matchAll(/sharedValue\('([^']+)'/g))
          places.set(m[1]!, [...(places.get(m[1]!) ?? []), relative(repoRoot, file)]);
      }
    }
    expect(places.size).toBeGreaterThanOrEqual(7);
    expect([...places].filter(([, at]) => at.length > 1)).toEqual([]);
  });
});
