/**
 * The fork's copy: created (`forkSpawn`), patched (`forkApplyPatch`) and destroyed
 * (`forkCleanup`). Each is idempotent on the fork id: a retry finds the first attempt's rows.
 * The parent agent's rows are only read.
 */
import { eq } from 'drizzle-orm';
import { agentIdSchema } from '../../core/ids.js';
import {
  forkAgentIdOf,
  forkBudgetDefaults,
  forkEvaluationSchema,
  forkIdSchema,
  forkLifeforce,
  forkPatchSchema,
  type ForkBudgetLimits,
  type ForkEvaluation,
  type ForkPatch,
} from '../../core/fork.js';
import { createForkCopy } from '../../db/queries/fork-copy.js';
import {
  agentCostUsd,
  applyPatchToAgent,
  forkUsageOf,
  markForkPatched,
  removeForkCopy,
} from '../../db/queries/forks.js';
import { agents, forks } from '../../db/schema/index.js';
import { ErrorType, nonRetryable, parseInput } from '../errors.js';
import { loadForkWithCopy, patchHashOf, type ForkEnv } from './shared.js';

export interface ForkSpawnInput {
  forkId: string;
  workflowId: string;
  agentId: string;
  patch: ForkPatch;
  evaluation: ForkEvaluation;
  budget: ForkBudgetLimits;
  auditsForkId?: string;
  /** Workflow start time (ms since epoch): spawn time is measured from it. */
  startedAtMs: number;
}
export interface ForkSpawnResult {
  forkId: string;
  forkAgentId: string;
  patchHash: string;
  rows: number;
  spawnMs: number;
  /** The LF the fork's budget asks of the parent's: `budget.lifeforce`, else `budget.costUsd` at this worker's price of a dollar. */
  lifeforce: number;
}

/**
 * Create the fork record and its isolated copy: an `agents` row `fk.<forkId>` (kind `fork`)
 * holding a copy of every row the parent owns, and a scoped copy of the tool registry
 * (`fork_tool_registry`), in one transaction. Idempotent: a retry after the copy committed
 * returns the first attempt's result.
 */
export async function forkSpawn({ db, prices }: ForkEnv, raw: ForkSpawnInput): Promise<ForkSpawnResult> {
  const forkId = parseInput('forkSpawn: forkId', forkIdSchema, raw.forkId);
  const lifeforce = forkLifeforce(
    { costUsd: raw.budget?.costUsd ?? forkBudgetDefaults.costUsd, lifeforce: raw.budget?.lifeforce },
    prices.lfPerUsd,
  );
  const agentId = parseInput('forkSpawn: agentId', agentIdSchema, raw.agentId);
  const patch = parseInput('forkSpawn: patch', forkPatchSchema, raw.patch);
  const evaluation = parseInput('forkSpawn: evaluation', forkEvaluationSchema, raw.evaluation);
  const patchHash = patchHashOf(patch);
  const forkAgentId = forkAgentIdOf(forkId);
  return db.transaction(async (tx) => {
    const [parent] = await tx.select().from(agents).where(eq(agents.id, agentId));
    if (!parent) throw nonRetryable(ErrorType.NotFound, `agent ${agentId} does not exist (fork ${forkId})`);
    await tx
      .insert(forks)
      .values({
        id: forkId,
        agentId,
        patch: patch as never,
        patchHash,
        evaluation,
        budget: raw.budget,
        status: 'spawning',
        workflowId: raw.workflowId,
        auditsForkId: raw.auditsForkId,
        startedAt: new Date(raw.startedAtMs),
      })
      .onConflictDoNothing({ target: forks.id });
    // Serialises a racing retry behind this attempt.
    const [row] = await tx.select().from(forks).where(eq(forks.id, forkId)).for('update');
    if (!row) throw nonRetryable(ErrorType.Unexpected, `fork ${forkId} vanished`);
    if (row.agentId !== agentId || row.patchHash !== patchHash) {
      throw nonRetryable(
        ErrorType.InvalidInput,
        `fork ${forkId} already exists for agent ${row.agentId} with patch ${row.patchHash.slice(0, 12)}…`,
      );
    }
    if (row.readyAt) {
      return {
        forkId,
        forkAgentId,
        patchHash,
        rows: Number(forkUsageOf(row).rows ?? 0),
        spawnMs: Number(forkUsageOf(row).spawnMs ?? 0),
        lifeforce,
      };
    }
    if (row.cleanedAt) throw nonRetryable(ErrorType.InvalidInput, `fork ${forkId} was already cleaned up`);
    const copy = await createForkCopy(tx, { parent, forkId, forkAgentId });
    const baselineCostUsd = await agentCostUsd(tx, forkAgentId);
    const readyAt = new Date();
    const spawnMs = Math.max(0, readyAt.getTime() - raw.startedAtMs);
    await tx
      .update(forks)
      .set({
        forkAgentId,
        status: 'running',
        readyAt,
        usage: {
          rows: copy.rows,
          spawnMs,
          baselineCostUsd,
          copied: copy.copied,
          toolsCopied: copy.toolsCopied,
        } as never,
      })
      .where(eq(forks.id, forkId));
    return { forkId, forkAgentId, patchHash, rows: copy.rows, spawnMs, lifeforce };
  });
}

/** Apply the patch to the fork's copy (never the parent). Idempotent (upserts; a prompt version is added once). */
export async function forkApplyPatch(env: ForkEnv, input: { forkId: string }): Promise<{ applied: string }> {
  const { fork, forkAgentId } = await loadForkWithCopy(env, input.forkId);
  const patch = parseInput('forkApplyPatch', forkPatchSchema, fork.patch);
  return env.db.transaction(async (tx) => {
    const [row] = await tx
      .select({ status: forks.status, usage: forks.usage })
      .from(forks)
      .where(eq(forks.id, input.forkId))
      .for('update');
    if (row && forkUsageOf(row).patchApplied) return { applied: String(forkUsageOf(row).patchApplied) };
    const applied = await applyPatchToAgent(tx, forkAgentId, patch, `fork ${input.forkId}`);
    await markForkPatched(tx, input.forkId, applied);
    return { applied };
  });
}

/**
 * Destroy everything of the fork but its record, verdict and artifacts: the copy's agent
 * row and (by cascade) all its rows. Idempotent; also run on cancellation and failure.
 */
export async function forkCleanup(
  { db }: ForkEnv,
  input: { forkId: string; status?: 'cancelled' | 'failed' },
): Promise<{ removedAgent: boolean }> {
  return db.transaction((tx) => removeForkCopy(tx, input.forkId, forkAgentIdOf(input.forkId), input.status));
}
