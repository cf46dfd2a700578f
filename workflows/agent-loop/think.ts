/**
 * The think: the tick's one call to the agent's model, through the activity or, after a fast
 * answer, as a local activity; and what the loop does when it fails.
 */
import { patched } from '@temporalio/workflow';
import { isLlmUnavailable } from '../lib/infra.js';
import { lifeforceShortfallOf } from '../lib/lifeforce.js';
import type { Loop } from './loop.js';
import { coreOutage, exhausted } from './outages.js';
import { localModels, modelsAt, type Activities } from './proxies.js';

export type Thought = Awaited<ReturnType<Activities['think']>>;

/**
 * A model that answers within this thinks in a local activity on the next tick: one workflow
 * task a tick instead of two and an activity task. A slower one (a hosted LLM, the offline
 * model) keeps the activity, so that notes and signals are never held back behind its call.
 */
export const localThinkMaxModelMs = 250;
/**
 * An unpaced loop thinks locally at most this many ticks in a row, then once through the
 * activity: local thinks chain inside one workflow task, and a note, a stop or a query reaches
 * the workflow only when that task completes.
 */
export const localThinksInARow = 8;
/** Nor longer than this in all (the thinks' own time, as they report it): under load a tick takes longer. */
export const localHoldMaxMs = 1_000;
/** A reply that fails its tick this many times in a row is treated like a failing LLM (Core Outage). */
const poisonTicksBeforeOutage = 3;

/** The tick's think; null when no LLM answered (the outage is waited out) or the reply failed the tick. */
export async function think(loop: Loop, tick: number): Promise<Thought | null> {
  const { agentId, state } = loop;
  try {
    return await loop.rideOut('think', () =>
      thinkOnce(loop, {
        agentId,
        tick,
        workflowId: loop.selfId,
        now: new Date().toISOString(),
        mode: 'main',
        loop: {
          contextMode: state.settings.contextMode,
          contextFilter: state.settings.contextFilter,
          recentK: state.settings.recentK,
          notesMode: state.settings.notesMode,
          notesFilter: state.settings.notesFilter,
        },
        params: { ...state.reflex, maxTokens: state.settings.maxTokens },
        ...(state.reflexState.focus ? { focus: state.reflexState.focus } : {}),
      }),
    );
  } catch (err) {
    if (isLlmUnavailable(err)) {
      await coreOutage(loop, err);
      return null; // the same tick again, now that an LLM answers
    }
    const shortfall = lifeforceShortfallOf(err);
    if (shortfall) {
      await exhausted(loop, shortfall, tick);
      return null; // the same tick again, now that the budget covers it
    }
    // The reply (or the write of it) failed for a reason of its own: record it and move on
    // to the next tick — a retry of this one would replay the same recorded reply.
    await loop.tickFailed(tick, 'think', err);
    if (loop.failedInARow >= poisonTicksBeforeOutage) await coreOutage(loop, err);
    return null;
  }
}

/** One think call: local after a fast answer (see `localThinkMaxModelMs`), else the activity. */
async function thinkOnce(loop: Loop, input: Parameters<Activities['think']>[0]): Promise<Thought> {
  const local = thinkLocally(loop);
  try {
    const thought = await (local ? localModels : modelsAt(loop.lifeforce?.priorityKey)).think(input);
    loop.lastModelMs = thought.modelMs ?? null;
    loop.localThinks = local ? loop.localThinks + 1 : 0;
    loop.localHeldMs = local ? loop.localHeldMs + (thought.thinkMs ?? 0) : 0;
    return thought;
  } catch (err) {
    // The next attempt, the outage's probe included, goes through the activity.
    loop.lastModelMs = null;
    loop.localThinks = 0;
    loop.localHeldMs = 0;
    throw err;
  }
}

function thinkLocally(loop: Loop): boolean {
  const { settings } = loop.state;
  if (loop.lastModelMs === null || loop.lastModelMs > localThinkMaxModelMs) return false;
  const paced = settings.idle.on || settings.delayMs > 0;
  if (!paced && (loop.localThinks >= localThinksInARow || loop.localHeldMs >= localHoldMaxMs)) return false;
  // local-think-v1: histories from before it asked the activity at every tick.
  return patched('local-think-v1');
}
