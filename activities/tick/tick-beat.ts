/**
 * A finished `think` tells the agent's event sink of it: the tick's beat (the bus heartbeat,
 * when the worker has a bus) and, for the main loop, what the agent said. Not an activity of its
 * own, so a tick pays no extra server round trip for it.
 */
import type { AgentEventSink, TickBeat } from '../agent-events.js';
import type { ThinkInput, ThinkResult } from './think.js';

/**
 * `think` that tells `events` about each tick it finished: a beat for every loop, a reply for
 * the main loop's ticks only (a task loop counts its own ticks, which a reply could not tell
 * apart from the main loop's). A failed think tells nothing. `events` should be guarded
 * (`guardEvents`); an unguarded one that throws is caught here too, so it never fails the tick.
 */
export function observeThink<A extends { think: (input: ThinkInput) => Promise<ThinkResult> }>(
  acts: A,
  events: AgentEventSink,
  log: (line: string) => void = () => undefined,
): A {
  return {
    ...acts,
    think: async (input: ThinkInput) => {
      const result = await acts.think(input);
      const model = `${result.provider}:${result.model}`;
      const beat: TickBeat = {
        agentId: input.agentId,
        tick: input.tick,
        mode: input.mode,
        ...(input.taskId !== undefined ? { taskId: input.taskId } : {}),
        model,
        replayed: result.replayed,
        ...(result.lifeforce
          ? { lifeforce: { charged: result.lifeforce.charged, available: result.lifeforce.available } }
          : {}),
      };
      try {
        events.tick(beat);
        if (input.mode === 'main')
          events.event(input.agentId, 'reply', {
            tick: input.tick,
            summary: result.summary,
            model,
            // The commands the reply held, those the catalogue refused included.
            commands: result.commands.length + (result.invalid?.length ?? 0),
            confidence: result.confidence,
          });
      } catch (err) {
        // Why swallowed: the beat is a side channel; the tick's work is done and recorded.
        log(`tick beat of ${input.agentId} tick ${input.tick} not sent: ${(err as Error).message}`);
      }
      return result;
    },
  };
}
