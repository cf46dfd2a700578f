/**
 * One fast-check configuration for every property test (a vitest setup file, run once per test
 * file): at least 1000 runs (FC_RUNS overrides) from a seed that is always chosen here — FC_SEED,
 * or the clock — and logged, so any run can be replayed exactly with
 * `FC_SEED=<seed> npx vitest run <file>`. A test that passes its own `numRuns` keeps it.
 */
import fc from 'fast-check';

const fromEnv =
  process.env.FC_SEED === undefined || process.env.FC_SEED.trim() === '' ? undefined : Number(process.env.FC_SEED);
if (fromEnv !== undefined && !Number.isInteger(fromEnv))
  throw new Error(`FC_SEED must be an integer, got "${process.env.FC_SEED}"`);
/** The seed every property of this file runs from (a 32-bit integer, as fast-check takes it). */
export const fcSeed = fromEnv ?? Date.now() % 2 ** 31;
export const fcRuns = Number(process.env.FC_RUNS ?? 1000);
fc.configureGlobal({ numRuns: fcRuns, seed: fcSeed });
console.log(`fast-check: seed ${fcSeed}, ${fcRuns} runs (replay with FC_SEED=${fcSeed})`);
