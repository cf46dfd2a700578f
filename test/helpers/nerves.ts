/** Scripted models for nerve tests: they read the nerve's prompt back (core/nerves/nerve.ts nervePrompt). */
import type { ScriptedReplyFn } from '../../activities/llm/index.js';
import { collisionBucket, collisionPolicy } from '../../core/nerves/collision.js';
import type { Observation } from '../../core/nerves/nerve.js';

/** The state and the reading a collision prompt names. */
export function promptCase(text: string): { state: string; o: Observation; bucket: string } {
  const state = /Current state: ([A-Z_]+)/.exec(text)?.[1];
  const m = /obstacle: (yes|no); distance ([\d.]+) m; closing speed (-?[\d.]+) m\/s; bearing (-?\d+) deg/.exec(text);
  if (!state || !m) throw new Error(`not a nerve prompt: ${text}`);
  const o = {
    t: 0,
    obstacle: m[1] === 'yes',
    distanceM: Number(m[2]),
    closingSpeedMps: Number(m[3]),
    bearingDeg: Number(m[4]),
  };
  return { state, o, bucket: collisionBucket(o) };
}

/** A model that answers the ground truth, except where `wrong` answers first (a case → its action). */
export function collisionModel(
  wrong: (state: string, bucket: string) => string | undefined = () => undefined,
): ScriptedReplyFn {
  return ({ messages }) => {
    const { state, bucket } = promptCase(messages.at(-1)!.content);
    return wrong(state, bucket) ?? collisionPolicy(state, bucket);
  };
}
