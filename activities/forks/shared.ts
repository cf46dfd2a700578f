/**
 * What the fork activities share: their dependencies, input checks, the fork's record and its
 * artifact files under `<dataDir>/forks/<forkId>/`.
 */
import { createHash } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { canonicalJson, type ForkPatch } from '../../core/fork.js';
import type { PriceTable } from '../../core/lifeforce.js';
import type { Db } from '../../db/client.js';
import { forkById } from '../../db/queries/forks.js';
import type { Fork, ForkArtifact } from '../../db/schema/index.js';
import { ErrorType, nonRetryable } from '../errors.js';
import type { LlmRouter } from '../llm/index.js';

export interface ForkDeps {
  db: Db;
  /** For the evaluation's optional judge calls (billed to the fork's agent id). */
  llm?: LlmRouter;
  /** Artifacts go under `<dataDir>/forks/<forkId>/` (MINDLOOP_DATA_DIR, default `.data`). */
  dataDir?: string;
  /** Lifeforce prices: the fork's budget in USD at `lfPerUsd`, an evaluation's fixed cost; default core/lifeforce.ts's. */
  prices?: PriceTable;
}

/** The dependencies with their defaults filled in, as every fork activity gets them. */
export type ForkEnv = ForkDeps & { dataDir: string; prices: PriceTable };

export const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');
/** `patch_hash`: sha256 of the canonical (sorted-keys) JSON of the validated patch. */
export const patchHashOf = (patch: ForkPatch) => sha256Hex(canonicalJson(patch));

/** The fork's record; NotFound when there is none. */
export async function loadFork(env: ForkEnv, forkId: string): Promise<Fork> {
  const row = await forkById(env.db, forkId);
  if (!row) throw nonRetryable(ErrorType.NotFound, `fork ${forkId} does not exist`);
  return row;
}

/** The fork's record and its copy's agent id; NotFound when the copy is gone. */
export async function loadForkWithCopy(env: ForkEnv, forkId: string): Promise<{ fork: Fork; forkAgentId: string }> {
  const fork = await loadFork(env, forkId);
  if (!fork.forkAgentId) throw nonRetryable(ErrorType.NotFound, `fork ${forkId} has no copy (cleaned up?)`);
  return { fork, forkAgentId: fork.forkAgentId };
}

/** The fork's model-cost budget and the cost its copy inherited from the parent. */
export function costLimits(fork: Fork): { costBudget: number; baselineCost: number } {
  return {
    costBudget: Number((fork.budget as { costUsd?: number }).costUsd ?? 5),
    baselineCost: Number((fork.usage as { baselineCostUsd?: number }).baselineCostUsd ?? 0),
  };
}

/** Write `body` as JSON to `<dataDir>/forks/<forkId>/<name>` and return its listing entry. */
export async function writeArtifact(env: ForkEnv, forkId: string, name: string, body: unknown): Promise<ForkArtifact> {
  const dir = resolve(env.dataDir, 'forks', forkId);
  await mkdir(dir, { recursive: true });
  const text = `${JSON.stringify(body, null, 2)}\n`;
  const path = join(dir, name);
  await writeFile(path, text);
  return { name, uri: `file://${path}`, sha256: sha256Hex(text), bytes: Buffer.byteLength(text) };
}

/** A rating the model wrote first in its reply, clamped to −3…+3; undefined when it wrote none. */
export function ratingOf(text: string, pattern: RegExp): number | undefined {
  const m = pattern.exec(text);
  return m ? Math.max(-3, Math.min(3, Number(m[0]))) : undefined;
}
