/**
 * The reflex pipeline the tick calls between Think and Execute (SPEC §2 steps 5–7). Each
 * step may call activities (emotion and novelty mini-prompts, validators) and narrows what the
 * tick keeps and does. Until the reflexes land, the pipeline is `auto_pass`: no validators,
 * every parsed command may run.
 */
import type { ParsedCommand } from '../../core/loop-types.js';

export interface ReflexInput {
  agentId: string;
  tick: number;
  responseId: number | null;
  commands: ParsedCommand[];
}

export interface ReflexVerdict {
  validationMode: 'auto_pass' | 'self_validation' | 'normal';
  /** Weighted rating −3…+3; null under auto_pass. */
  rating: number | null;
  /** Command ids allowed to run; undefined = all. */
  allowedCmdIds?: string[];
  /** Short lines for the status query and the log. */
  notes: string[];
}

export type ReflexStep = (input: ReflexInput, verdict: ReflexVerdict) => Promise<ReflexVerdict>;

/** Run the steps in order, each refining the verdict of the previous one. */
export async function runReflexes(steps: readonly ReflexStep[], input: ReflexInput): Promise<ReflexVerdict> {
  let verdict: ReflexVerdict = { validationMode: 'auto_pass', rating: null, notes: [] };
  for (const step of steps) verdict = await step(input, verdict);
  return verdict;
}

/** The pipeline of this release: no reflexes, commands auto-pass. */
export const defaultReflexSteps: readonly ReflexStep[] = [];
