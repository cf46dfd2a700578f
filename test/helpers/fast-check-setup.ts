/**
 * One fast-check configuration for every property test (a vitest setup file): 1000 runs
 * (FC_RUNS overrides) from a fresh seed. A failure prints its seed and path; replay it exactly
 * with `FC_SEED=<seed> npx vitest run <file>`. A test that passes its own `numRuns` keeps it.
 */
import fc from 'fast-check';

const seed = process.env.FC_SEED === undefined ? undefined : Number(process.env.FC_SEED);
fc.configureGlobal({ numRuns: Number(process.env.FC_RUNS ?? 1000), ...(seed === undefined ? {} : { seed }) });
