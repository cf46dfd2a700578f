/**
 * The fork's end: what it spent (`forkUsage`), the evaluation's fixed lifeforce cost
 * (`forkChargeEvaluation`), its artifact files (`forkWriteArtifact`), the verdict
 * (`forkRecordVerdict`) and the human gate (`forkGate`), which alone writes to the parent,
 * after a human approved.
 */
import { eq } from 'drizzle-orm';
import { forkPatchSchema, type VerdictDecision } from '../../core/fork.js';
import { budgetIds } from '../../core/lifeforce.js';
import {
  applyPatchToAgent,
  applyToolPatchToRegistry,
  forkSpentUsd,
  recordForkVerdict,
} from '../../db/queries/forks.js';
import { budgetReport, reserve, settle } from '../../db/queries/lifeforce.js';
import { forks, verdicts, type ForkArtifact } from '../../db/schema/index.js';
import { classifiedFailure, ErrorType, nonRetryable, parseInput } from '../errors.js';
import { LifeforceExhaustedError } from '../llm/errors.js';
import { loadFork, writeArtifact, type ForkEnv } from './shared.js';

/**
 * What the fork has spent so far: model cost (its llm_calls minus the copied parent's) and, when
 * it has a budget `fork:<id>`, the LF settled on it.
 */
export async function forkUsage(
  env: ForkEnv,
  input: { forkId: string },
): Promise<{ costUsd: number; lifeforce?: number }> {
  const fork = await loadFork(env, input.forkId);
  const report = await budgetReport(env.db, budgetIds.fork(input.forkId), { entries: 0 });
  const lifeforce = report ? { lifeforce: report.budget.spent } : {};
  if (!fork.forkAgentId) return { costUsd: Number((fork.usage as { costUsd?: number }).costUsd ?? 0), ...lifeforce };
  return {
    costUsd: await forkSpentUsd(
      env.db,
      fork.forkAgentId,
      Number((fork.usage as { baselineCostUsd?: number }).baselineCostUsd ?? 0),
    ),
    ...lifeforce,
  };
}

/**
 * The evaluation's fixed cost (`lfPerForkEvaluation`), besides the LLM calls it makes: reserved
 * on the fork's budget and settled at once, under the key `fork-eval:<forkId>`, so a retry pays
 * nothing more. A budget that cannot cover it fails as `LifeforceExhausted` (nothing charged).
 */
export async function forkChargeEvaluation(
  env: ForkEnv,
  input: { forkId: string; budgetId: string },
): Promise<{ charged: number }> {
  const key = `fork-eval:${input.forkId}`;
  const held = await reserve(env.db, {
    key,
    budgetId: input.budgetId,
    amount: env.prices.lfPerForkEvaluation,
    operation: 'fork_evaluation',
    ttlMs: env.prices.reservationTtlMs,
    reason: `fork ${input.forkId}: evaluation`,
  });
  // Thrown classified: the fork family is also run unwrapped (tests), and this must stay non-retryable.
  if (!held.ok)
    throw classifiedFailure(new LifeforceExhaustedError(held.budgetId, held.reason, held.needed, held.available));
  const closed = await settle(env.db, key, held.amount, { forkId: input.forkId });
  return { charged: closed.charged };
}

/** Store an artifact file under `.data/forks/<id>/` and return its listing entry. */
export async function forkWriteArtifact(
  env: ForkEnv,
  input: { forkId: string; name: string; body: unknown },
): Promise<ForkArtifact> {
  if (!/^[A-Za-z0-9_.-]{1,100}$/.test(input.name) || input.name.startsWith('.'))
    throw nonRetryable(ErrorType.InvalidInput, `bad artifact name ${input.name}`);
  return writeArtifact(env, input.forkId, input.name, input.body);
}

/** Store the verdict (once per fork) and the fork's final status and usage. */
export async function forkRecordVerdict(
  env: ForkEnv,
  input: {
    forkId: string;
    decision: VerdictDecision;
    artifacts: ForkArtifact[];
    status: 'completed' | 'budget_exceeded' | 'failed';
    usage?: Record<string, unknown>;
  },
): Promise<{ verdictId: number; patchHash: string }> {
  const fork = await loadFork(env, input.forkId);
  const verdictFile = await writeArtifact(env, input.forkId, 'verdict.json', {
    forkId: input.forkId,
    patchHash: fork.patchHash,
    ...input.decision,
  });
  const artifacts = [...input.artifacts.filter((a) => a.name !== 'verdict.json'), verdictFile];
  const verdictId = await env.db.transaction((tx) =>
    recordForkVerdict(tx, fork, { decision: input.decision, artifacts, status: input.status, usage: input.usage }),
  );
  return { verdictId, patchHash: fork.patchHash };
}

/**
 * The human gate's outcome. `approved` writes the patch to the PARENT (config, prompt,
 * strategy; a tool patch becomes the registry tool's next version) and marks the verdict
 * applied, once: a retry or a second approval finds `applied_at` set.
 */
export async function forkGate(
  { db }: ForkEnv,
  input: { forkId: string; decision: 'approved' | 'rejected' | 'expired'; by: string },
): Promise<{ gate: string; applied: string | null }> {
  return db.transaction(async (tx) => {
    const [fork] = await tx.select().from(forks).where(eq(forks.id, input.forkId)).for('update');
    if (!fork) throw nonRetryable(ErrorType.NotFound, `fork ${input.forkId} does not exist`);
    const [v] = await tx.select().from(verdicts).where(eq(verdicts.forkId, input.forkId));
    if (fork.gate && fork.gate !== 'pending')
      return { gate: fork.gate, applied: v?.appliedAt ? (v.appliedBy ?? 'applied') : null };
    let applied: string | null = null;
    if (input.decision === 'approved') {
      if (v?.verdict !== 'APPROVE')
        throw nonRetryable(
          ErrorType.Forbidden,
          `fork ${input.forkId}: only an APPROVE verdict can be applied (got ${v?.verdict ?? 'none'})`,
        );
      const patch = parseInput('forkGate', forkPatchSchema, fork.patch);
      if (patch.kind === 'tool') {
        const done = await applyToolPatchToRegistry(tx, patch);
        if (done === undefined) throw nonRetryable(ErrorType.NotFound, `tool ${patch.tool} is not in the registry`);
        applied = done;
      } else {
        applied = await applyPatchToAgent(tx, fork.agentId, patch, `fork ${input.forkId} (approved by ${input.by})`);
      }
      await tx
        .update(verdicts)
        .set({ appliedAt: new Date(), appliedBy: input.by })
        .where(eq(verdicts.forkId, input.forkId));
    }
    await tx
      .update(forks)
      .set({ gate: input.decision, gateBy: input.by, gateAt: new Date() })
      .where(eq(forks.id, input.forkId));
    return { gate: input.decision, applied };
  });
}
