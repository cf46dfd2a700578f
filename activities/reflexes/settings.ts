import { defaultAnxiety } from '../../core/emotions.js';
import { defaultMemoryPolicy } from '../../core/memory-manager.js';

/** The settings the reflexes read from `agent_config`, with their defaults. */
export function reflexSettings(cfg: Record<string, unknown>) {
  return {
    known:
      Array.isArray(cfg.emotions) && cfg.emotions.every((e) => typeof e === 'string')
        ? (cfg.emotions as string[])
        : ['curiosity', 'joy', 'calm', 'anxiety', 'frustration', 'boredom', 'confidence'],
    noveltyThreshold:
      typeof cfg.novelty_threshold === 'number' ? cfg.novelty_threshold : defaultMemoryPolicy.noveltyThreshold,
    anxietyThreshold: typeof cfg.anxiety_threshold === 'number' ? cfg.anxiety_threshold : defaultAnxiety.threshold,
    anxietyTicks: typeof cfg.anxiety_ticks === 'number' ? cfg.anxiety_ticks : defaultAnxiety.ticks,
    autoPassDestructive: cfg.auto_pass_destructive === true,
  };
}

/**
 * Output caps of the mini-prompts: each answers a line or a small JSON object (emotion lines,
 * the novelty JSON, `+2 -- comment`). A small model left at a larger cap rambles to it, and on
 * the CPU every generated token costs ~20 ms.
 */
export const miniPromptMaxTokens: Record<string, number> = { emotion: 32, novelty: 96, validate: 40 };
