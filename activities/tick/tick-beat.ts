/**
 * A tick's beat: what a finished `think` tells an observer (the bus heartbeat, when the worker
 * has a bus). Not an activity of its own, so a tick pays no extra server round trip for it.
 */
import type { ThinkInput, ThinkResult } from './think.js';

export interface TickBeat {
  agentId: string;
  tick: number;
  mode: ThinkInput['mode'];
  taskId?: number;
  /** `provider:model`. */
  model: string;
  replayed: boolean;
  lifeforce?: { charged: number; available: number | null };
}

/** Called once per successful think; must return at once and never throw (it is wrapped anyway). */
export type TickObserver = (beat: TickBeat) => void;

/** `think` that tells `observe` about each tick it finished. An observer's failure never reaches the tick. */
export function observeTicks<A extends { think: (input: ThinkInput) => Promise<ThinkResult> }>(acts: A, observe: TickObserver, log: (line: string) => void = () => undefined): A {
  return {
    ...acts,
    think: async (input: ThinkInput) => {
      const result = await acts.think(input);
      try {
        observe({
          agentId: input.agentId,
          tick: input.tick,
          mode: input.mode,
          ...(input.taskId !== undefined ? { taskId: input.taskId } : {}),
          model: `${result.provider}:${result.model}`,
          replayed: result.replayed,
          ...(result.lifeforce ? { lifeforce: { charged: result.lifeforce.charged, available: result.lifeforce.available } } : {}),
        });
      } catch (err) {
        // Why swallowed: the beat is a side channel; the tick's work is done and recorded.
        log(`tick beat of ${input.agentId} tick ${input.tick} not sent: ${(err as Error).message}`);
      }
      return result;
    },
  };
}
