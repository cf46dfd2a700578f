/**
 * The local model's speed and what follows from it: which of its context sequences a call
 * uses, and how long a call may take. Pure: the provider measures, this module decides.
 */

/**
 * A local model's context has one sequence for the tick's `think` and others for everything
 * else (the reflexes' mini-prompts, validators, probes). node-llama-cpp reuses a sequence's KV
 * cache for the longest token prefix it shares with what the sequence evaluated last, so a
 * mini-prompt on think's sequence would evict the think prompt's stable prefix.
 */
type LocalSequence = 'think' | 'aux';

export function sequenceFor(purpose: string | undefined): LocalSequence {
  return purpose === 'think' ? 'think' : 'aux';
}

/**
 * Sequences for the mini-prompts: the emotion and novelty prompts of a tick run at once, and
 * llama.cpp decodes the tokens of concurrent sequences in one batch, which on the CPU costs
 * little more than one (generation is bound by memory, not arithmetic).
 */
export const localAuxSequences = 2;

/** The aux sequence a call takes: the one with the fewest calls running or waiting (the first on a tie). */
export function pickAuxSequence(pending: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < pending.length; i++) if (pending[i]! < pending[best]!) best = i;
  return best;
}

/** Tokens per second of prompt evaluation and of generation. */
export interface LocalSpeed {
  promptEvalPerS: number;
  genPerS: number;
}

/**
 * What a model is assumed to do before it has been measured: below what SmolLM2-135M Q4 does on
 * one busy CPU core (≈110 prompt tokens/s, ≈40 generated tokens/s), so a first call is not cut off.
 */
export const assumedLocalSpeed: LocalSpeed = { promptEvalPerS: 40, genPerS: 15 };

/** One call's measurement: tokens evaluated (the prompt tail not in the KV cache) and generated, and how long each took. */
export interface LocalCallStats {
  evaluatedPromptTokens: number;
  promptEvalMs: number;
  genTokens: number;
  genMs: number;
}

/** Below these a measurement is mostly overhead and says little about the rate. */
const minTokensToMeasure = 8;
const minMsToMeasure = 20;
/** Weight of the newest measurement in the running average. */
const weight = 0.3;

/** The running speed after one call (an exponential average; a call too short to measure leaves a rate as it was). */
export function updateSpeed(speed: LocalSpeed | undefined, call: LocalCallStats): LocalSpeed {
  const blend = (old: number | undefined, tokens: number, ms: number, assumed: number) => {
    if (tokens < minTokensToMeasure || ms < minMsToMeasure) return old ?? assumed;
    const rate = (tokens / ms) * 1000;
    return old === undefined ? rate : old * (1 - weight) + rate * weight;
  };
  return {
    promptEvalPerS: blend(
      speed?.promptEvalPerS,
      call.evaluatedPromptTokens,
      call.promptEvalMs,
      assumedLocalSpeed.promptEvalPerS,
    ),
    genPerS: blend(speed?.genPerS, call.genTokens, call.genMs, assumedLocalSpeed.genPerS),
  };
}

/**
 * Rough token count of a prompt from its length: ~3 characters a token is on the high side for
 * English under SmolLM2's tokenizer (measured ~3.6), so the estimate errs long.
 */
export function estimateTokens(chars: number): number {
  return Math.ceil(chars / 3);
}

/** Never less than this: a fast model still gets the time an API endpoint gets. */
export const localTimeoutFloorMs = 60_000;
/** Nor more: a model that has not answered in 9 minutes is out (the LLM activity's start-to-close is 10). */
export const localTimeoutCeilingMs = 540_000;

/**
 * How long one local call may take: its whole prompt evaluated (no cache assumed) and its full
 * output cap generated at half the measured speed, plus 15 s, between the floor and the ceiling.
 * A slow-but-working model (a busy machine) is given the time its speed needs; a model that
 * does not answer in that time is out.
 */
export function localTimeoutMs(o: { promptTokens: number; maxTokens: number; speed?: LocalSpeed }): number {
  const speed = o.speed ?? assumedLocalSpeed;
  const expectedMs = (o.promptTokens / speed.promptEvalPerS + o.maxTokens / speed.genPerS) * 1000;
  return Math.round(Math.min(localTimeoutCeilingMs, Math.max(localTimeoutFloorMs, 2 * expectedMs + 15_000)));
}
