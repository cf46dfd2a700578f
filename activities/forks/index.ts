/**
 * Successor-fork activities and `makeAbstract`, on the `mindloop` queue. Every activity is
 * idempotent on the fork id: a retry finds the first attempt's rows. The parent agent's rows
 * are only read, except by `forkGate` after a human approved.
 *
 * - spawn.ts: the copy (forkSpawn, forkApplyPatch, forkCleanup)
 * - evaluate-abstracts.ts, evaluate-contexts.ts: the two evaluations
 * - verdict.ts: usage and the evaluation's fixed lifeforce cost, artifacts, the verdict and the human gate
 * - abstracts.ts: makeAbstract
 */
import { defaultPrices } from '../../core/lifeforce.js';
import { bindActivities } from '../bind.js';
import { makeAbstract } from './abstracts.js';
import { forkEvaluateAbstracts } from './evaluate-abstracts.js';
import { forkEvaluateContexts } from './evaluate-contexts.js';
import type { ForkDeps, ForkEnv } from './shared.js';
import { forkApplyPatch, forkCleanup, forkSpawn } from './spawn.js';
import { forkChargeEvaluation, forkGate, forkRecordVerdict, forkUsage, forkWriteArtifact } from './verdict.js';

export type { MakeAbstractInput } from './abstracts.js';
export type { AbstractsEvaluation } from './evaluate-abstracts.js';
export type { ContextReplayEvaluation } from './evaluate-contexts.js';
export { patchHashOf, sha256Hex, type ForkDeps } from './shared.js';
export type { ForkSpawnInput, ForkSpawnResult } from './spawn.js';

/** Fork activities for the `mindloop` queue, built from their dependencies. */
export function createForkActivities(deps: ForkDeps) {
  const env: ForkEnv = { ...deps, dataDir: deps.dataDir ?? '.data', prices: deps.prices ?? defaultPrices };
  return bindActivities(env, {
    forkSpawn,
    forkApplyPatch,
    forkChargeEvaluation,
    forkEvaluateAbstracts,
    forkEvaluateContexts,
    forkUsage,
    forkWriteArtifact,
    forkRecordVerdict,
    forkCleanup,
    forkGate,
    makeAbstract,
  });
}
