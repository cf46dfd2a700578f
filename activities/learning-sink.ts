/**
 * How campaigns and tool generation hand learnings to the learning store: one
 * function, injected by the composition root, so these activities do not depend on the
 * store's internals and tests can observe what was promoted.
 */

/** A learning promoted by a campaign (`phase_success`, `avoid_error`) or by Ouroboros (`generated_tool`). */
export interface PromotedLearning {
  agentId: string;
  shardType: string;
  predicate: 'phase_success' | 'avoid_error' | 'generated_tool';
  args: Record<string, unknown>;
  /** The campaign id, or `tool/<agentId>/<name>` for a generated tool. */
  source: string;
}

/** Save (or reinforce) a learning; throws when the store refuses it (guard, rate limit). */
export type LearningSink = (learning: PromotedLearning) => Promise<{ id: number; reinforced?: boolean }>;
