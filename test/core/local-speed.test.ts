import { describe, expect, it } from 'vitest';
import {
  assumedLocalSpeed,
  estimateTokens,
  localTimeoutCeilingMs,
  localTimeoutFloorMs,
  localTimeoutMs,
  pickAuxSequence,
  sequenceFor,
  updateSpeed,
} from '../../core/local-speed.js';

describe('sequenceFor', () => {
  it('gives think its own sequence and every mini-prompt the other', () => {
    expect(sequenceFor('think')).toBe('think');
    for (const p of ['emotion', 'novelty', 'validate', 'probe', undefined]) expect(sequenceFor(p)).toBe('aux');
  });
});

describe('pickAuxSequence', () => {
  it('takes the aux sequence with the fewest calls, the first on a tie', () => {
    expect(pickAuxSequence([0, 0])).toBe(0);
    expect(pickAuxSequence([1, 0])).toBe(1);
    expect(pickAuxSequence([2, 1, 1])).toBe(1);
  });
});

describe('updateSpeed', () => {
  it('takes the first measurement as it is, then averages', () => {
    const first = updateSpeed(undefined, {
      evaluatedPromptTokens: 1100,
      promptEvalMs: 10_000,
      genTokens: 100,
      genMs: 2_000,
    });
    expect(first).toEqual({ promptEvalPerS: 110, genPerS: 50 });
    const second = updateSpeed(first, { evaluatedPromptTokens: 190, promptEvalMs: 1_000, genTokens: 40, genMs: 1_000 });
    expect(second.promptEvalPerS).toBeCloseTo(110 * 0.7 + 190 * 0.3);
    expect(second.genPerS).toBeCloseTo(50 * 0.7 + 40 * 0.3);
  });

  it('ignores a call too short to measure (a prompt all in the KV cache)', () => {
    const speed = { promptEvalPerS: 120, genPerS: 45 };
    expect(updateSpeed(speed, { evaluatedPromptTokens: 2, promptEvalMs: 5, genTokens: 3, genMs: 10 })).toEqual(speed);
    expect(updateSpeed(undefined, { evaluatedPromptTokens: 0, promptEvalMs: 0, genTokens: 0, genMs: 0 })).toEqual(
      assumedLocalSpeed,
    );
  });
});

describe('localTimeoutMs', () => {
  it('follows the measured speed: twice the expected time plus 15 s', () => {
    // 2 800 tokens at 50/s = 56 s, 256 tokens at 16/s = 16 s: 2 × 72 s + 15 s.
    expect(localTimeoutMs({ promptTokens: 2800, maxTokens: 256, speed: { promptEvalPerS: 50, genPerS: 16 } })).toBe(
      159_000,
    );
  });

  it('gives a slower (busier) model more time, never less than the floor nor more than the ceiling', () => {
    const fast = localTimeoutMs({ promptTokens: 300, maxTokens: 48, speed: { promptEvalPerS: 190, genPerS: 57 } });
    expect(fast).toBe(localTimeoutFloorMs);
    const busy = localTimeoutMs({ promptTokens: 2800, maxTokens: 256, speed: { promptEvalPerS: 20, genPerS: 8 } });
    expect(busy).toBeGreaterThan(
      localTimeoutMs({ promptTokens: 2800, maxTokens: 256, speed: { promptEvalPerS: 110, genPerS: 40 } }),
    );
    expect(localTimeoutMs({ promptTokens: 100_000, maxTokens: 4096, speed: { promptEvalPerS: 5, genPerS: 1 } })).toBe(
      localTimeoutCeilingMs,
    );
  });

  it('assumes a slow machine before the first measurement', () => {
    expect(localTimeoutMs({ promptTokens: 2800, maxTokens: 256 })).toBe(
      localTimeoutMs({ promptTokens: 2800, maxTokens: 256, speed: assumedLocalSpeed }),
    );
    expect(estimateTokens(9000)).toBe(3000);
  });
});
