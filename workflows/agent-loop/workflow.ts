/**
 * One durable thinking loop per agent (id `agent/<agentId>`): one tick after another, forever.
 * A tick thinks (one model call), runs the reflexes over the reply (emotions, novelty,
 * validation), applies the commands the reflexes allowed and follows what they ask of the loop,
 * then paces. Every step's input and result pass in the open; the steps run in a fixed order,
 * since the commands a run issues, and their order, are what its recorded history replays against.
 */
import {
  ContinueAsNew,
  allHandlersFinished,
  condition,
  isCancellation,
  log,
  patched,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { CommandOutcome } from '../../core/loop-types.js';
import { priorityKeyFor } from '../../core/priority.js';
import { inReplyOrder } from '../../core/reply-parser.js';
import { emergencyConsensusTag } from '../../core/society/isolation.js';
import { parseWorkflowInput } from '../lib/input.js';
import { defaultReflex } from '../lib/loop-state.js';
import { autoPassVerdict, runTickReflexes, type ReflexVerdict } from '../lib/reflexes.js';
import { agentIdSearchAttribute, kindSearchAttribute, lifeforceSearchAttribute } from '../lib/search-attributes.js';
import { timerText } from '../lib/ui-text.js';
import { followOutcomes, followReflexEffects } from './effects.js';
import { begin, continueAsNewWithState } from './lifecycle.js';
import { registerHandlers } from './handlers.js';
import { Loop } from './loop.js';
import { agentLoopInput, loopInputOf, type AgentLoopInput, type AgentLoopResult } from './messages.js';
import { flushNotes } from './notes.js';
import { endOutage } from './outages.js';
import { followPeers } from './peers.js';
import {
  localRecords,
  localReflexSteps,
  records,
  reflexSteps as reflexActivities,
  type Activities,
} from './proxies.js';
import { localHoldMaxMs, localThinksInARow, think, type Thought } from './think.js';

/**
 * Started with its input, or with an agent file's document in its place (the Temporal UI's start
 * form takes either: `loopInputOf`); typed as the former, which is what code starts it with.
 */
export async function agentLoopWorkflow(rawInput: AgentLoopInput): Promise<AgentLoopResult> {
  const loop = new Loop(parseWorkflowInput('agentLoopWorkflow', agentLoopInput, loopInputOf(rawInput)));
  upsertSearchAttributes([
    { key: agentIdSearchAttribute, value: loop.agentId },
    { key: kindSearchAttribute, value: 'agent-loop' },
    { key: lifeforceSearchAttribute, value: 'ok' },
  ]);
  registerHandlers(loop);
  loop.phase = 'starting';
  await begin(loop);
  try {
    await run(loop);
  } catch (err) {
    // Only a bug gets here (outages are ridden out, a tick's own failures recorded): say so
    // in the agent's row and process log before the workflow fails, so status and doctor show it.
    if (!(err instanceof ContinueAsNew) && !isCancellation(err)) await loop.recordLoopFailure(err);
    throw err;
  }
  return finish(loop);
}

/** Tick until stopped or the tick cap; continue as new when the run has grown long enough. */
async function run(loop: Loop): Promise<void> {
  const { state, input } = loop;
  const startTick = state.tick;
  const perRun = input.ticksPerRun ?? ticksPerRunByDefault();
  const capped = () => input.maxTicks !== undefined && state.tick >= input.maxTicks;
  while (!loop.stopRequested && !capped()) {
    if (state.tick - startTick >= perRun || workflowInfo().continueAsNewSuggested)
      return await continueAsNewWithState(loop);
    if (await waitWhilePaused(loop)) continue;
    if (!(await tick(loop))) continue;
    if (capped()) break;
    await pace(loop);
    state.pendingWake = false;
  }
}

/**
 * The ticks of a run when the input names none. A worker that takes an agent over (its own
 * restart, another worker's death, an agent out of its cache) replays the agent's run so far
 * before the next tick, a few milliseconds a tick on a cold worker: 100 ticks keep that under
 * half a second. Runs from before short-runs-v1 went to 500.
 */
function ticksPerRunByDefault(): number {
  return patched('short-runs-v1') ? 100 : 500;
}

/** Stopped or at the cap: let the handlers finish, store queued notes, record the stop. */
async function finish(loop: Loop): Promise<AgentLoopResult> {
  const { state } = loop;
  loop.phase = 'stopping';
  await condition(allHandlersFinished);
  if (state.pendingNotes.length > 0) await flushNotes(loop);
  await loop.rideOut('loopStopped', () => records.loopStopped({ agentId: loop.agentId, tick: state.tick }));
  return { agentId: loop.agentId, ticks: state.tick, reason: loop.stopRequested ? 'stopped' : 'max_ticks' };
}

/** One tick: think, reflexes, commands. False when it did not get past think (an outage, a failed reply). */
async function tick(loop: Loop): Promise<boolean> {
  const { state } = loop;
  if (state.pendingNotes.length > 0) await flushNotes(loop);
  const tick = state.tick + 1;
  loop.phase = 'thinking';
  const thought = await think(loop, tick);
  if (!thought) return false;
  await endOutage(loop, `${thought.provider}:${thought.model}`);
  await followPeers(loop, thought.peers, tick);
  recordThought(loop, thought, tick);

  loop.phase = 'reflexes';
  const verdict = await reflexes(loop, thought, tick);
  loop.lastVerdict = { validationMode: verdict.validationMode, rating: verdict.rating, notes: verdict.notes };

  if (thought.commands.length || thought.invalid?.length || thought.rejected.length) {
    loop.phase = 'executing';
    const outcomes = await applyCommands(loop, thought, verdict, tick);
    if (outcomes) await followOutcomes(loop, outcomes, tick);
  }
  if (loop.lastFailedTick !== tick) loop.failedInARow = 0;
  return true;
}

/** The tick counts from here: its counters, the model in use, the lifeforce it was charged. */
function recordThought(loop: Loop, thought: Thought, tick: number): void {
  const { state } = loop;
  state.tick = tick;
  state.counters.ticks++;
  state.counters.parseErrors += thought.parseErrors.length ? 1 : 0;
  loop.llmInUse = `${thought.provider}:${thought.model}`;
  if (loop.lifeforce && thought.lifeforce) {
    const { available, charged } = thought.lifeforce;
    const { capacity, explicitPriority } = loop.lifeforce;
    loop.lifeforce = {
      ...loop.lifeforce,
      available,
      lastCharge: charged,
      priorityKey: priorityKeyFor({ available, capacity, ...(explicitPriority ? { explicit: explicitPriority } : {}) }),
    };
  }
  state.last = {
    summary: thought.summary,
    model: loop.llmInUse,
    at: new Date().toISOString(),
    responseId: thought.responseId,
  };
}

/** The tick's reflexes: emotions, novelty/anti-stagnation and validation. */
async function reflexes(loop: Loop, thought: Thought, tick: number): Promise<ReflexVerdict> {
  const { agentId, state, input } = loop;
  // reflexes-v1: emotions, novelty/anti-stagnation and validation (one activity). Histories
  // recorded before it replay through the auto_pass verdict.
  if (!(input.reflexes && thought.responseId !== null && patched('reflexes-v1'))) {
    // A resolved promise, as the empty step list returned before: the same microtask turns, so
    // the commands of this activation keep their order against a handler running beside it.
    return Promise.resolve(autoPassVerdict());
  }
  const r = await runTickReflexes(
    (i) => reflexSteps(loop, i),
    {
      agentId,
      tick,
      workflowId: loop.selfId,
      responseId: thought.responseId,
      // Args too: ethics rules read them (the validated ones, when think validated them). The
      // commands think found invalid too, in the reply's order: the verdict lists every command.
      // An activity's input is not part of what replay compares, so this needs no patch marker.
      commands: inReplyOrder(thought.commands, thought.invalid).map((e) => {
        const c = e.command ?? e.invalid;
        return { cmdId: c.cmdId, type: c.type, args: c.args };
      }),
      params: state.reflex,
      defaults: defaultReflex,
      stagnation: state.reflexState,
      contextMode: state.settings.contextMode,
    },
    state.reflexState,
  );
  state.reflexState = r.state;
  if (r.result) {
    state.reflex = r.result.params;
    await followReflexEffects(loop, r.result.effects, tick);
  }
  return r.verdict;
}

/**
 * The reflexes run in the tick's workflow task (a local activity: no activity task, no second
 * workflow task) when the tick's think did (its model answered fast) and their last run through
 * the activity took at most `localReflexMaxMs` on the workflow clock (its queueing included: under
 * load that alone is a few hundred ms, while a slow validator model takes seconds); at most
 * `localThinksInARow` times in a row, then once through the activity again, which measures them
 * anew (validators may be slower models than the agent's own). A local run that fails is run
 * again through the activity: the verdict is never lost to a local attempt.
 */
export const localReflexMaxMs = localHoldMaxMs;

async function reflexSteps(
  loop: Loop,
  input: Parameters<Activities['tickReflexes']>[0],
): ReturnType<Activities['tickReflexes']> {
  if (reflexLocally(loop)) {
    try {
      const result = await localReflexSteps.tickReflexes(input);
      loop.localReflexes++;
      return result;
    } catch (err) {
      if (isCancellation(err)) throw err;
      log.warn('local reflexes failed; through the activity', { agentId: loop.agentId, error: String(err) });
    }
  }
  loop.localReflexes = 0;
  loop.lastReflexMs = null;
  const began = Date.now();
  const result = await loop.rideOut('reflexes', () => reflexActivities.tickReflexes(input));
  loop.lastReflexMs = Date.now() - began;
  return result;
}

function reflexLocally(loop: Loop): boolean {
  if (loop.localThinks === 0) return false; // this tick's think went through the activity
  if (loop.lastReflexMs === null || loop.lastReflexMs > localReflexMaxMs) return false;
  if (loop.localReflexes >= localThinksInARow) return false;
  // local-reflexes-v1: histories from before it ran the reflexes through the activity at every tick.
  return patched('local-reflexes-v1');
}

/**
 * Apply the tick's commands (what the reflexes allowed); null when the tick failed there. In the
 * tick's workflow task (a local activity) when the tick's think ran there: a tick of a fast model
 * is then one workflow task from the think to its commands, and a worker that dies while it runs
 * hands the whole tick over after the workflow task timeout. A local run that fails is run again
 * through the activity (it is idempotent per command): the outcome is never lost to a local attempt.
 */
async function applyCommands(
  loop: Loop,
  thought: Thought,
  verdict: ReflexVerdict,
  tick: number,
): Promise<CommandOutcome[] | null> {
  const input: Parameters<Activities['applyCommands']>[0] = {
    agentId: loop.agentId,
    tick,
    workflowId: loop.selfId,
    mode: 'main',
    commands: thought.commands,
    ...(thought.validated ? { validated: true, invalid: thought.invalid ?? [] } : {}),
    rejected: thought.rejected,
    allowedCmdIds: verdict.allowedCmdIds,
    ...(verdict.held ? { heldReasons: verdict.held } : {}),
    rating: verdict.rating,
    // Decided with no peer to consult: marked for later review. (An activity's input is
    // not part of what replay compares.)
    ...(loop.state.operatingMode === 'isolated' ? { tags: [emergencyConsensusTag] } : {}),
  };
  // local-commands-v1: histories from before it applied them through the activity at every tick.
  if (loop.localThinks > 0 && patched('local-commands-v1')) {
    try {
      return await localRecords.applyCommands(input);
    } catch (err) {
      if (isCancellation(err)) throw err;
      log.warn('local commands failed; through the activity', { agentId: loop.agentId, error: String(err) });
    }
  }
  try {
    return await loop.rideOut('applyCommands', () => records.applyCommands(input));
  } catch (err) {
    await loop.tickFailed(tick, 'applyCommands', err);
    return null;
  }
}

/** Pace: a fixed delay, or idle until a wake condition. */
async function pace(loop: Loop): Promise<void> {
  const { state } = loop;
  if (state.settings.idle.on) {
    loop.phase = 'idle';
    const { wakeOn, timeoutMs } = state.settings.idle;
    const wake = () =>
      loop.stopRequested ||
      state.paused ||
      ((wakeOn.includes('note') || wakeOn.includes('process')) && state.pendingWake);
    if (!wakeOn.includes('timeout')) await condition(wake);
    else if (!(await condition(wake, timeoutMs, { summary: timerText.idle(timeoutMs, wakeOn) })))
      log.info('idle timeout', { agentId: loop.agentId, tick: state.tick });
  } else if (!state.pendingWake && state.settings.delayMs > 0) {
    loop.phase = 'pacing';
    await condition(() => loop.stopRequested || state.paused, state.settings.delayMs, {
      summary: timerText.pacing(state.settings.delayMs),
    });
  }
}

/** Paused, or sitting out `cycle pause N`: true when this turn of the loop thinks nothing. */
async function waitWhilePaused(loop: Loop): Promise<boolean> {
  const { state } = loop;
  if (state.paused) {
    loop.phase = 'paused';
    await condition(() => !state.paused || loop.stopRequested);
    return true;
  }
  if (state.pauseTicks > 0) {
    // `cycle pause N`: sit out N ticks of delay without thinking.
    state.pauseTicks--;
    loop.phase = 'pacing';
    await condition(() => loop.stopRequested || state.paused, state.settings.delayMs, {
      summary: timerText.cyclePause(state.settings.delayMs, state.pauseTicks),
    });
    return true;
  }
  return false;
}
