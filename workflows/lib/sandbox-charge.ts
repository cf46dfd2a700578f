/**
 * A workflow's own sandbox run, charged to a lifeforce budget the way a `shell` is: its worst
 * case is held before the run is scheduled, the wall seconds it took are settled after it, and a
 * run that never ran gives its hold back. The hold is keyed by the run's idempotency key, so a
 * retried hold or settle (or a replayed workflow task) charges once.
 */
import { isCancellation } from '@temporalio/workflow';
import type { createSandboxChargeActivities } from '../../activities/sandbox-charge.js';
import type { SandboxRunRequest, SandboxRunResult } from '../../sandbox/sandbox.js';
import { failureMessage } from './infra.js';

type Ledger = Pick<ReturnType<typeof createSandboxChargeActivities>, 'holdSandboxRun' | 'settleSandboxRun'>;

/** Who pays for a run: the budget charged, and what the ledger entry says it was for. */
interface SandboxPayer {
  agentId: string;
  budgetId: string;
  tick?: number;
  reason: string;
}

/** What the sandbox gives a request that names no wall budget or CPUs (sandbox/docker-sandbox.ts defaultBudget). */
const sandboxDefaults = { wallMs: 30_000, cpus: 1 };

/**
 * Hold, run, settle. A budget that cannot cover the run fails the hold with `LifeforceExhausted`
 * and nothing runs; a run that failed to start (no engine, no image, bad request) is released.
 */
export async function chargedSandboxRun(
  ledger: Ledger,
  run: (req: SandboxRunRequest) => Promise<SandboxRunResult>,
  req: SandboxRunRequest,
  payer: SandboxPayer,
): Promise<SandboxRunResult> {
  const cpus = req.budget?.cpus ?? sandboxDefaults.cpus;
  const wallMs = req.budget?.wallMs ?? sandboxDefaults.wallMs;
  await ledger.holdSandboxRun({
    runKey: req.key,
    agentId: payer.agentId,
    budgetId: payer.budgetId,
    wallMs,
    cpus,
    ...(payer.tick !== undefined ? { tick: payer.tick } : {}),
    reason: payer.reason,
    at: new Date().toISOString(),
  });
  let result: SandboxRunResult;
  try {
    result = await run(req);
  } catch (err) {
    // Cancelled, the run went on until its container was killed: its hold stays open, and the
    // budget's close charges it what it reserved (the sweep releases it where no close comes).
    if (!isCancellation(err)) await ledger.settleSandboxRun({ runKey: req.key, cpus, error: failureMessage(err, 500) });
    throw err;
  }
  await ledger.settleSandboxRun({
    runKey: req.key,
    cpus,
    ran: { durationMs: result.durationMs, status: result.status },
  });
  return result;
}
