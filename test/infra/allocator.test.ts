/**
 * A worker process runs on jemalloc where the system has it (scripts/allocator.mjs): the
 * environment `npm start`, `npm run worker` and the benchmarks' worker processes are given
 * preloads the library into the process, keeps what the user preloads, and steps aside on
 * MINDLOOP_ALLOCATOR=system.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { allocatorEnv, jemallocPath } from '../../scripts/allocator.mjs';

/** Whether a node process started with `env` has libjemalloc mapped. */
function runsOnJemalloc(env: Record<string, string | undefined>): boolean {
  const r = spawnSync(
    process.execPath,
    [
      '-e',
      "process.stdout.write(String(require('fs').readFileSync('/proc/self/maps', 'utf8').includes('libjemalloc')))",
    ],
    { env: { PATH: process.env.PATH, ...env }, encoding: 'utf8' },
  );
  expect(r.status, r.stderr).toBe(0);
  return r.stdout === 'true';
}

const lib = jemallocPath();

describe.runIf(process.platform === 'linux')('the worker allocator', () => {
  it('is installed by the set-up on this machine', () => {
    expect(lib).toMatch(/libjemalloc\.so\.2$/);
  });

  it('preloads jemalloc into the process it is given to, and only there', () => {
    const env = allocatorEnv({});
    expect(env).toEqual({ LD_PRELOAD: lib });
    expect(runsOnJemalloc(env)).toBe(true);
    expect(runsOnJemalloc({})).toBe(false);
  });

  it("keeps the user's own preloads after it, and adds itself once", () => {
    expect(allocatorEnv({ LD_PRELOAD: '/opt/x/libfoo.so' })).toEqual({ LD_PRELOAD: `${lib} /opt/x/libfoo.so` });
    expect(allocatorEnv({ LD_PRELOAD: `${lib}` })).toEqual({});
  });

  it('steps aside on MINDLOOP_ALLOCATOR=system', () => {
    expect(allocatorEnv({ MINDLOOP_ALLOCATOR: 'system' })).toEqual({});
  });
});
