/**
 * One run of an agent's loop: what it carries over (`state`), what only this run knows (the
 * phase, an outage, the last verdict), what the status query shows of both, and the two things
 * every step uses: riding out an outage of what it calls, and recording a tick's own failure.
 */
import { log, setCurrentDetails, workflowInfo } from '@temporalio/workflow';
import { clipText, sanitizeText } from '../../core/sanitize.js';
import { initialState, type CarryOver, type LoopSettingsPatch } from '../lib/loop-state.js';
import { failureMessage, rideOut, type Degraded } from '../lib/infra.js';
import { agentLoopCurrentDetails } from '../lib/ui-text.js';
import type { AgentStatus, LifeforceStatus, ParsedAgentLoopInput } from './messages.js';
import { records } from './proxies.js';

/** Model text and driver messages may hold characters Postgres refuses; log rows must not. */
export function sanitizeAndClip(text: string): string {
  return clipText(sanitizeText(text), 2000);
}

export class Loop {
  readonly agentId: string;
  readonly state: CarryOver;
  readonly selfId = workflowInfo().workflowId;
  stopRequested = false;
  lastVerdict: AgentStatus['lastVerdict'] = null;
  outage: AgentStatus['outage'] = null;
  degraded: Degraded | null = null;
  lastTickFailure: AgentStatus['lastTickFailure'] = null;
  /** Ticks in a row that failed for a reason of their own: past a few, treated like a failing LLM. */
  failedInARow = 0;
  lastFailedTick = 0;
  /** How long the model took on the last think that asked it (null: unknown, or that think failed). */
  lastModelMs: number | null = null;
  /** Local thinks since the last think through the activity, and their time in all. */
  localThinks = 0;
  localHeldMs = 0;
  /** How long the last reflexes through the activity took (workflow clock; null: none yet, or a local run failed), and local runs since. */
  lastReflexMs: number | null = null;
  localReflexes = 0;
  /** loopStarted is done (this run), so the agent's row exists: notes can be stored against it. */
  started = false;
  llmInUse: string | null;
  lifeforce: LifeforceStatus | null = null;
  /** Exhaustion episodes, to name their escalations. */
  exhaustions = 0;
  /** When this run last asked a human for lifeforce: at most one such escalation a day. */
  lastLifeforceEscalation = Number.NEGATIVE_INFINITY;
  private currentPhase: AgentStatus['phase'] = 'starting';

  constructor(readonly input: ParsedAgentLoopInput) {
    this.agentId = input.agentId;
    this.state = input.carryOver ?? initialState(input.settings);
    this.llmInUse = this.state.last?.model ?? null;
  }

  /** The phase; setting it also updates the current details the Temporal UI shows (no command). */
  get phase(): AgentStatus['phase'] {
    return this.currentPhase;
  }
  set phase(p: AgentStatus['phase']) {
    this.currentPhase = p;
    setCurrentDetails(
      agentLoopCurrentDetails({
        tick: this.state.tick,
        phase: p,
        llm: this.llmInUse,
        mode: this.state.operatingMode,
        degradedStep: this.degraded?.step,
        queuedNotes: this.state.pendingNotes.length,
        lifeforce: this.lifeforce?.available,
      }),
    );
  }

  status(): AgentStatus {
    const { state } = this;
    return {
      agentId: this.agentId,
      tick: state.tick,
      phase: this.phase,
      operatingMode: state.operatingMode,
      paused: state.paused,
      pauseTicks: state.pauseTicks,
      settings: state.settings,
      reflex: state.reflex,
      counters: state.counters,
      last: state.last,
      lastVerdict: this.lastVerdict,
      reflexes: state.reflexState,
      llm: this.llmInUse,
      taskLoops: state.taskLoops,
      outage: this.outage,
      degraded: this.degraded,
      queuedNotes: state.pendingNotes.length,
      lastTickFailure: this.lastTickFailure,
      lifeforce: this.lifeforce,
      isolation: state.isolation,
    };
  }

  /** Put loop settings in force (the `setConfig` update, an agent file): the fields given, idle's merged. */
  applySettings(patch: LoopSettingsPatch): CarryOver['settings'] {
    const { settings } = this.state;
    const { idle, ...rest } = patch;
    Object.assign(settings, Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)));
    if (idle)
      settings.idle = {
        ...settings.idle,
        ...Object.fromEntries(Object.entries(idle).filter(([, v]) => v !== undefined)),
      };
    return settings;
  }

  /** A child's task priority: its agent's, from the lifeforce left (none before the ledger is read). */
  childPriority(): { priority?: { priorityKey: number } } {
    return this.lifeforce ? { priority: { priorityKey: this.lifeforce.priorityKey } } : {};
  }

  /** Call an activity, riding out an outage of what it needs (phase `degraded` meanwhile). */
  rideOut<T>(step: string, fn: () => Promise<T>): Promise<T> {
    let before: AgentStatus['phase'] | null = null;
    return rideOut(step, fn, {
      onDegraded: (d) => {
        if (before === null) {
          before = this.phase;
          this.state.counters.degraded++;
        }
        this.degraded = d;
        this.phase = 'degraded';
      },
      onRecovered: async (d, ms) => {
        this.degraded = null;
        this.phase = before ?? this.phase;
        const message = `recovered: ${d.step} waited ${Math.round(ms / 1000)} s over ${d.attempts} attempt(s) for an unavailable dependency (last error: ${d.lastError})`;
        try {
          await records.logProcess({
            agentId: this.agentId,
            processId: 'degraded',
            kind: 'infrastructure',
            status: 'close',
            message: sanitizeAndClip(message),
            tick: this.state.tick,
          });
        } catch (err) {
          log.warn('recovery not logged', { error: failureMessage(err) });
        }
      },
    });
  }

  /** A tick failed for a reason of its own (not an outage): record it; the loop goes on. */
  async tickFailed(tick: number, step: string, err: unknown): Promise<void> {
    const { agentId, state } = this;
    const error = sanitizeAndClip(failureMessage(err));
    state.tick = Math.max(state.tick, tick);
    state.counters.tickFailures++;
    this.failedInARow++;
    this.lastFailedTick = tick;
    this.lastTickFailure = { tick, step, error };
    log.warn('tick failed', { agentId, tick, step, error });
    try {
      await this.rideOut('logProcess', () =>
        records.logProcess({
          agentId,
          processId: `tick-${tick}`,
          kind: 'tick_failure',
          status: 'error',
          message: `${step}: ${error}`,
          tick,
        }),
      );
    } catch (logErr) {
      log.warn('tick failure not logged', { error: failureMessage(logErr) });
    }
  }

  /** The loop is about to fail: record it in the agent row and the process log (best effort). */
  async recordLoopFailure(err: unknown): Promise<void> {
    const error = sanitizeAndClip(err instanceof Error ? err.message : String(err));
    try {
      await records.loopStopped({ agentId: this.agentId, tick: this.state.tick, status: 'failed', reason: error });
    } catch (e) {
      log.warn('loop failure not recorded', { error: failureMessage(e) });
    }
  }
}
