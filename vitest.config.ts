import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Files that run after all the others, alone on the machine: the successor-fork file races
 * cancellations against activities on the time-skipping server, whose handling of such races
 * depends on timing (a workflow that cancels an activity completing in the same task is refused
 * and never moves again), so it runs where the rest of the suite's load cannot shift them.
 */
const alone = ['test/workflows/successor-fork.test.ts'];

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
      { extends: true, test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, ...alone] } },
      { extends: true, test: { name: 'alone', include: alone, sequence: { groupOrder: 1 } } },
    ],
  },
});
