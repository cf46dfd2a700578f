/**
 * The pure verdict of the context-replay evaluation (config and prompt patches): parent's
 * recorded replies vs the patched pipeline's replies over the same contexts.
 */
import { describe, expect, it } from 'vitest';
import {
  decideContextReplayVerdict,
  forkEvaluationSchema,
  replyNovelty,
  successorForkInputSchema,
} from '../../core/fork.js';

const side = (novelty: number, tokens: number, rating?: number) => ({ novelty, tokens, rating });

describe('context replay verdict', () => {
  it('approves +5 novelty points or more at no extra token cost and no worse rating', () => {
    const d = decideContextReplayVerdict({ parent: side(40, 100, 1), candidate: side(60, 105, 1.2), samples: 10 });
    expect(d.verdict).toBe('APPROVE');
    expect(d.confidence).toBe(0.95); // 0.5 + 0.45 × (10/10) × min(1, 20/20)
    expect(d.summary).toContain('Δnovelty +20.0');
    expect(d.summary).toContain('Δrating +0.20');
    expect(d.summary).toContain('token ratio 1.05');
    expect(d.caveats.some((c) => c.startsWith('rating n/a'))).toBe(false);
  });

  it('rejects a novelty drop of 10 points, a rating drop of 1, or tokens ×1.5', () => {
    const nov = decideContextReplayVerdict({ parent: side(50, 100), candidate: side(40, 100), samples: 5 });
    expect(nov.verdict).toBe('REJECT');
    expect(nov.summary).toContain('novelty fell by 10.0 points');
    expect(nov.confidence).toBe(0.7); // 0.5 + 0.4 × 5/10
    const rating = decideContextReplayVerdict({ parent: side(50, 100, 2), candidate: side(60, 100, 1), samples: 5 });
    expect(rating.verdict).toBe('REJECT');
    expect(rating.summary).toContain('rating fell by 1.00');
    const tokens = decideContextReplayVerdict({ parent: side(50, 100), candidate: side(70, 150), samples: 5 });
    expect(tokens.verdict).toBe('REJECT');
    expect(tokens.summary).toContain('token cost grew ×1.50');
  });

  it('needs revision with too few contexts, a small gain, or a gain that costs tokens', () => {
    expect(decideContextReplayVerdict({ parent: side(40, 100), candidate: side(90, 100), samples: 2 }).verdict).toBe(
      'NEEDS_REVISION',
    );
    const small = decideContextReplayVerdict({ parent: side(40, 100), candidate: side(44, 100), samples: 5 });
    expect(small.verdict).toBe('NEEDS_REVISION');
    expect(small.summary).toContain('no clear gain');
    expect(decideContextReplayVerdict({ parent: side(40, 100), candidate: side(60, 120), samples: 5 }).verdict).toBe(
      'NEEDS_REVISION',
    );
    // rating 0.5 worse blocks an APPROVE without being a REJECT
    expect(
      decideContextReplayVerdict({ parent: side(40, 100, 1), candidate: side(60, 100, 0.5), samples: 5 }).verdict,
    ).toBe('NEEDS_REVISION');
  });

  it('marks the rating n/a with a caveat when the agent has no validator', () => {
    const d = decideContextReplayVerdict({ parent: side(40, 100), candidate: side(60, 100), samples: 5 });
    expect(d.verdict).toBe('APPROVE');
    expect(d.summary).toContain('rating n/a');
    expect(d.caveats).toContain('rating n/a: the agent has no validator model, so the replies were not rated');
  });

  it('reply novelty is 100 − 100 × the highest lexical similarity to the replies before it', () => {
    expect(replyNovelty('anything at all', [])).toBe(100);
    expect(replyNovelty('the same sentence about soil', ['the same sentence about soil'])).toBe(0);
    const n = replyNovelty('bees pollinate the orchard in spring', ['water the tomatoes at dawn']);
    expect(n).toBeGreaterThan(50);
  });

  it('context_replay: lastN defaults to 5 and is at most 50; it does not evaluate strategy or tool patches', () => {
    expect(forkEvaluationSchema.parse({ kind: 'context_replay' })).toEqual({ kind: 'context_replay', lastN: 5 });
    expect(forkEvaluationSchema.safeParse({ kind: 'context_replay', lastN: 51 }).success).toBe(false);
    expect(forkEvaluationSchema.safeParse({ kind: 'context_replay', lastN: 0 }).success).toBe(false);
    expect(
      successorForkInputSchema.safeParse({
        agentId: 'a1',
        patch: { kind: 'prompt', content: 'Be varied.' },
        evaluation: { kind: 'context_replay' },
      }).success,
    ).toBe(true);
  });
});
