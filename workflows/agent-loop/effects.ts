/**
 * What applied commands ask of the loop, one handler per kind of effect. Two sorts:
 *
 * - `now`: a change of the loop's own state (its settings, a pause, a strategy to measure),
 *   applied at once in the order the effects came;
 * - `follow`: work the loop starts after the tick's commands committed (a child workflow, a
 *   sandbox run, a signal to a peer). These run kind by kind in the order of this table — the
 *   order recorded histories replay against. Each kind's patch marker is retired
 *   (`deprecatePatch`): histories from before a kind existed never carry its effects, so they
 *   never reach the code the marker guarded.
 *
 * The table's type lists every kind: a new effect does not compile until it has its handler.
 */
import { ActivityFailure, deprecatePatch, log } from '@temporalio/workflow';
import type { CommandOutcome, LoopEffect } from '../../core/loop-types.js';
import { applyConfigValues, countOutcomes, type CarryOver } from '../lib/loop-state.js';
import { failureMessage } from '../lib/infra.js';
import {
  startEscalation,
  startNerve,
  startSpawn,
  startSpeech,
  startTaskLoop,
  startToolGeneration,
  stopTaskLoop,
  type EffectOf,
} from './children.js';
import type { Loop } from './loop.js';
import { wakeAgents } from './peers.js';
import { mcpTools, modelsAt, records, sandbox } from './proxies.js';

type Kind = LoopEffect['kind'];
interface Now<K extends Kind> {
  now(state: CarryOver, e: EffectOf<K>): void;
}
interface Follow<K extends Kind> {
  /** The (retired) patch marker that introduced this kind; still written while histories that carry it may run. */
  patch?: string;
  /** `all`: also the effects of commands that were not applied (a held command's escalation). */
  of?: 'all';
  follow(loop: Loop, effects: Array<EffectOf<K>>, tick: number): Promise<void>;
}
type Handler<K extends Kind> = Now<K> | Follow<K>;

export const effectHandlers: { [K in Kind]: Handler<K> } = {
  setResponses: { now: (s, e) => void (s.settings.recentK = Math.max(1, Math.min(50, e.n))) },
  setContextMode: {
    now(s, e) {
      s.settings.contextMode = e.mode;
      s.settings.contextFilter = e.filter;
    },
  },
  setNotesMode: {
    now(s, e) {
      s.settings.notesMode = e.mode;
      s.settings.notesFilter = e.filter;
    },
  },
  pause: { now: (s, e) => void (s.pauseTicks = Math.max(0, e.ticks)) },
  idle: {
    now(s, e) {
      s.settings.idle = {
        on: e.on,
        wakeOn: e.wakeOn ?? s.settings.idle.wakeOn,
        timeoutMs: e.timeoutMs ?? s.settings.idle.timeoutMs,
      };
    },
  },
  // config.set wrote agent_config; the keys that drive the loop itself take effect now.
  configChanged: { now: (s, e) => applyConfigValues(s.settings, e.values ?? {}) },
  measureStrategy: {
    now(s, e) {
      // A strategy the agent applied itself is measured like an automatic one; one measurement
      // at a time (the command refuses while another is pending, so this only guards a race).
      if (s.reflexState.pending === null && e.noveltyBefore !== null) {
        s.reflexState.pending = {
          strategyId: e.strategyId,
          metricId: e.metricId,
          tick: e.tick,
          noveltyBefore: e.noveltyBefore,
        };
        s.reflexState.lastStrategyTick = e.tick;
      }
      if (e.focus) s.reflexState.focus = e.focus;
    },
  },
  startTaskLoop: { follow: async (loop, es) => each(es, (e) => startTaskLoop(loop, e.taskId, e.title, e.maxTicks)) },
  stopTaskLoop: { follow: async (loop, es) => each(es, (e) => stopTaskLoop(loop, e.taskId)) },
  shell: { patch: 'shell-v1', follow: async (loop, es, tick) => each(es, (e) => runShell(loop, e, tick)) },
  // tools.generate (Ouroboros): one child per capability; its result comes back as a note + wake.
  generateTool: {
    patch: 'toolgen-v1',
    follow: async (loop, es, tick) => each(es, (e) => startToolGeneration(loop, e, tick)),
  },
  // `escalate`, and held danger-zone commands (their rejected outcomes carry the effect).
  escalate: { patch: 'escalate-v1', of: 'all', follow: async (loop, es) => each(es, (e) => startEscalation(loop, e)) },
  startNerve: { patch: 'nerve-v1', follow: async (loop, es) => each(es, (e) => startNerve(loop, e)) },
  speak: { patch: 'speech-v1', follow: async (loop, es, tick) => each(es, (e) => startSpeech(loop, e, tick)) },
  spawn: { patch: 'spawn-v1', follow: async (loop, es, tick) => each(es, (e) => startSpawn(loop, e, tick)) },
  // `llm_task.ask` asks a model once, after its command committed.
  askLlm: { patch: 'llm-task-ask-v1', follow: async (loop, es, tick) => each(es, (e) => askLlm(loop, e, tick)) },
  // Its marker (peers-v1) is taken only when another agent is to be woken (wakeAgents).
  wakeAgent: { follow: async (loop, es) => wakeAgents(loop, es) },
  // `tools.mcp`: last, so that histories recorded before it replay the kinds above unchanged.
  mcpCall: { follow: async (loop, es, tick) => each(es, (e) => callMcpTool(loop, e, tick)) },
};

async function each<T>(items: readonly T[], fn: (item: T) => Promise<void>): Promise<void> {
  for (const item of items) await fn(item);
}

function isNow<K extends Kind>(h: Handler<K>): h is Now<K> {
  return 'now' in h;
}

/** The `now` effects, in the order they came (pure: what the loop changes of its own state). */
export function applyStateEffects(state: CarryOver, effects: readonly LoopEffect[]): void {
  for (const e of effects) {
    const h = effectHandlers[e.kind] as Handler<Kind>;
    if (isNow(h)) h.now(state, e);
  }
}

/** The `follow` effects, kind by kind in the table's order. */
async function followEffects(
  loop: Loop,
  applied: readonly LoopEffect[],
  all: readonly LoopEffect[],
  tick: number,
  only?: ReadonlySet<Kind>,
): Promise<void> {
  for (const [kind, h] of Object.entries(effectHandlers) as Array<[Kind, Handler<Kind>]>) {
    if (isNow(h) || (only && !only.has(kind))) continue;
    const effects = (h.of === 'all' ? all : applied).filter((e) => e.kind === kind);
    if (effects.length === 0) continue;
    if (h.patch !== undefined) deprecatePatch(h.patch);
    await h.follow(loop, effects, tick);
  }
}

/** What the tick's applied commands asked of the loop: state first, then the work they start. */
export async function followOutcomes(loop: Loop, outcomes: CommandOutcome[], tick: number): Promise<void> {
  countOutcomes(loop.state.counters, outcomes);
  const applied = outcomes.filter((o) => o.status === 'applied').flatMap((o) => o.effects);
  applyStateEffects(loop.state, applied);
  await followEffects(
    loop,
    applied,
    outcomes.flatMap((o) => o.effects),
    tick,
  );
}

/** What the reflexes asked of the loop: their state changes, and waking the peers they wrote to. */
export async function followReflexEffects(loop: Loop, effects: readonly LoopEffect[], tick: number): Promise<void> {
  applyStateEffects(loop.state, effects);
  await followEffects(loop, effects, effects, tick, new Set<Kind>(['wakeAgent']));
}

/** Run one `shell` command in the sandbox and record its output for the next tick's context. */
async function runShell(loop: Loop, e: EffectOf<'shell'>, tick: number): Promise<void> {
  let result = null;
  let error: string | undefined;
  try {
    // Same activity, same order as for a plain `shell`: only its input differs (replay-safe).
    result = await sandbox.sandboxRun({
      key: e.key,
      command: e.argv ?? ['sh', '-c', e.command],
      ...(e.files ? { files: e.files } : {}),
      budget: { wallMs: e.timeoutMs ?? 30_000 },
    });
  } catch (err) {
    // Infrastructure (no engine, no image, no sandbox worker): the agent reads why; the loop goes on.
    error = err instanceof ActivityFailure && err.cause ? err.cause.message : String(err);
  }
  await loop.rideOut('recordShellResult', () =>
    records.recordShellResult({
      agentId: loop.agentId,
      tick,
      cmdId: e.cmdId,
      processId: e.processId,
      command: e.command,
      result,
      ...(error ? { error } : {}),
    }),
  );
}

/**
 * `llm_task.ask`: one question to one model, its answer stored as a note before the next tick
 * (which therefore reads it). An outage of the database is ridden out; the activity itself
 * turns a model that does not answer into a note saying so.
 */
async function askLlm(loop: Loop, e: EffectOf<'askLlm'>, tick: number): Promise<void> {
  try {
    const r = await loop.rideOut('askLlmOnce', () =>
      modelsAt(loop.lifeforce?.priorityKey).askLlmOnce({
        agentId: loop.agentId,
        tick,
        workflowId: loop.selfId,
        cmdId: e.cmdId,
        key: e.key,
        question: e.question,
        role: e.role,
        ...(e.registryId !== undefined ? { registryId: e.registryId } : {}),
        ...(e.model ? { model: e.model } : {}),
      }),
    );
    loop.state.pendingWake = true;
    log.info('llm_task.ask answered', { cmdId: e.cmdId, noteId: r.noteId, answered: r.answered });
  } catch (err) {
    log.warn('llm_task.ask not answered', { cmdId: e.cmdId, error: failureMessage(err) });
  }
}

/**
 * `tools.mcp`: the tool called once; the activity writes the result on the command's row before
 * it completes, so the next think reads it. A server that misbehaves is already text there; what
 * is left (the database away) is ridden out, and a call that still fails is logged, never fatal.
 */
async function callMcpTool(loop: Loop, e: EffectOf<'mcpCall'>, tick: number): Promise<void> {
  try {
    await loop.rideOut('mcpCall', () =>
      mcpTools.mcpCall({
        agentId: loop.agentId,
        key: e.key,
        server: e.server,
        tool: e.tool,
        args: e.args,
        tick,
        cmdId: e.cmdId,
        processId: e.processId,
        ...(e.price ? { price: e.price } : {}),
      }),
    );
  } catch (err) {
    log.warn('tools.mcp not recorded', { cmdId: e.cmdId, error: failureMessage(err) });
  }
}
