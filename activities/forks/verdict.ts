/**
 * The fork's end: what it spent (`forkUsage`), its artifact files (`forkWriteArtifact`), the
 * verdict (`forkRecordVerdict`) and the human gate (`forkGate`), which alone writes to the
 * parent, after a human approved.
 */
import { eq } from 'drizzle-orm';
import { forkPatchSchema, type VerdictDecision } from '../../core/fork.js';
import { applyPatchToAgent, applyToolPatchToRegistry, forkSpentUsd, recordForkVerdict } from '../../db/queries/forks.js';
import { forks, verdicts, type ForkArtifact } from '../../db/schema/index.js';
import { ErrorType, nonRetryable } from '../errors.js';
import { checked, loadFork, writeArtifact, type ForkEnv } from './shared.js';

/** Model cost the fork has spent so far (its llm_calls minus the copied parent's). */
export async function forkUsage(env: ForkEnv, input: { forkId: string }): Promise<{ costUsd: number }> {
  const fork = await loadFork(env, input.forkId);
  if (!fork.forkAgentId) return { costUsd: Number((fork.usage as { costUsd?: number }).costUsd ?? 0) };
  return { costUsd: await forkSpentUsd(env.db, fork.forkAgentId, Number((fork.usage as { baselineCostUsd?: number }).baselineCostUsd ?? 0)) };
}

/** Store an artifact file under `.data/forks/<id>/` and return its listing entry. */
export async function forkWriteArtifact(env: ForkEnv, input: { forkId: string; name: string; body: unknown }): Promise<ForkArtifact> {
  if (!/^[A-Za-z0-9_.-]{1,100}$/.test(input.name) || input.name.startsWith('.')) throw nonRetryable(ErrorType.InvalidInput, `bad artifact name ${input.name}`);
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
  const verdictFile = await writeArtifact(env, input.forkId, 'verdict.json', { forkId: input.forkId, patchHash: fork.patchHash, ...input.decision });
  const artifacts = [...input.artifacts.filter((a) => a.name !== 'verdict.json'), verdictFile];
  const verdictId = await env.db.transaction((tx) => recordForkVerdict(tx, fork, { decision: input.decision, artifacts, status: input.status, usage: input.usage }));
  return { verdictId, patchHash: fork.patchHash };
}

/**
 * The human gate's outcome. `approved` writes the patch to the PARENT (config, prompt,
 * strategy; a tool patch becomes the registry tool's next version) and marks the verdict
 * applied, once: a retry or a second approval finds `applied_at` set.
 */
export async function forkGate({ db }: ForkEnv, input: { forkId: string; decision: 'approved' | 'rejected' | 'expired'; by: string }): Promise<{ gate: string; applied: string | null }> {
  return db.transaction(async (tx) => {
    const [fork] = await tx.select().from(forks).where(eq(forks.id, input.forkId)).for('update');
    if (!fork) throw nonRetryable(ErrorType.NotFound, `fork ${input.forkId} does not exist`);
    const [v] = await tx.select().from(verdicts).where(eq(verdicts.forkId, input.forkId));
    if (fork.gate && fork.gate !== 'pending') return { gate: fork.gate, applied: v?.appliedAt ? (v.appliedBy ?? 'applied') : null };
    let applied: string | null = null;
    if (input.decision === 'approved') {
      if (v?.verdict !== 'APPROVE') throw nonRetryable(ErrorType.Forbidden, `fork ${input.forkId}: only an APPROVE verdict can be applied (got ${v?.verdict ?? 'none'})`);
      const patch = checked('forkGate', forkPatchSchema, fork.patch);
      if (patch.kind === 'tool') {
        const done = await applyToolPatchToRegistry(tx, patch);
        if (done === undefined) throw nonRetryable(ErrorType.NotFound, `tool ${patch.tool} is not in the registry`);
        applied = done;
      } else {
        applied = await applyPatchToAgent(tx, fork.agentId, patch, `fork ${input.forkId} (approved by ${input.by})`);
      }
      await tx.update(verdicts).set({ appliedAt: new Date(), appliedBy: input.by }).where(eq(verdicts.forkId, input.forkId));
    }
    await tx.update(forks).set({ gate: input.decision, gateBy: input.by, gateAt: new Date() }).where(eq(forks.id, input.forkId));
    return { gate: input.decision, applied };
  });
}
