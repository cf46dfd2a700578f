import { configDefaults, defineConfig } from 'vitest/config';
import { unitTestFiles } from './test/helpers/lanes.js';

/**
 * Files that run after all the others, alone on the machine: the successor-fork file races
 * cancellations against activities on the time-skipping server, whose handling of such races
 * depends on timing (a workflow that cancels an activity completing in the same task is refused
 * and never moves again), so it runs where the rest of the suite's load cannot shift them; the
 * speech engine's file runs Whisper on every CPU for minutes, which would starve the others'
 * timeouts, and its heartbeat and cancellation checks need the CPU it measures with.
 */
const alone = ['test/workflows/successor-fork.test.ts', 'test/speech/engine.test.ts'];
// Each in its own group: groups run one after another, so neither shares the machine.

/**
 * The fast lane (`npm test -- --unit`): the files that need no server, no child process and no
 * heavy build, decided by what each imports (test/helpers/lanes.ts). The whole suite runs them too.
 */
const unit = unitTestFiles(import.meta.dirname).filter((f) => !alone.includes(f));

export default defineConfig({
  test: {
    // Integration tests start real servers (Temporal, PGlite, Docker); give them room.
    testTimeout: 120_000,
    hookTimeout: 180_000,
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default'],
    setupFiles: ['test/helpers/fast-check-setup.ts'],
    projects: [
      { extends: true, test: { name: 'unit', include: unit } },
      {
        extends: true,
        test: {
          name: 'suite',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...alone, ...unit],
        },
      },
      ...alone.map((file, i) => ({
        extends: true as const,
        test: { name: `alone-${i + 1}`, include: [file], sequence: { groupOrder: i + 1 } },
      })),
    ],
  },
});
