/**
 * spawnWorkflow (id `agent/<parent>/spawn/<name>`): a descendant is born. The spawn is admitted
 * (the parent exists, the name is free, no ancestor's limit is reached, the parent can give the
 * budget), the child's rows are copied from its parent for its type in one transaction, its
 * lifeforce is carved from the parent's, its own agent loop `agent/<name>` is started, and the
 * parent gets a note. A refusal ends the workflow as `refused` (it completes, it does not fail);
 * a failure after the admission, or a cancellation, undoes the unborn child (`rolled_back`). An
 * outage of the database is waited out; a worker killed mid-copy leaves nothing behind, and the
 * copy starts over on another.
 */
import {
  CancellationScope,
  ParentClosePolicy,
  defineQuery,
  defineSignal,
  getExternalWorkflowHandle,
  isCancellation,
  log,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { createSpawnActivities } from '../activities/society/spawn.js';
import { workflowIds } from '../core/ids.js';
import {
  spawnNote,
  spawnWorkflowInput,
  type SpawnInput,
  type SpawnParams,
  type SpawnPhase,
  type SpawnResult,
} from '../core/society/spawn.js';
import { copyActivity, dbActivity, fewAttempts, workflowFailover } from './lib/activity-options.js';
import { failureMessage, rideOut, type Degraded } from './lib/infra.js';
import { parseWorkflowInput } from './lib/input.js';
import { agentIdSearchAttribute, kindSearchAttribute } from './lib/search-attributes.js';
import { agentLoopText, handlerText } from './lib/ui-text.js';
import type { agentLoopWorkflow } from './agent-loop/index.js';

type Activities = ReturnType<typeof createSpawnActivities>;
// A few attempts each, then the workflow rides the outage out itself (its state shows it).
const db = proxyActivities<Activities>(fewAttempts(dbActivity));
const copier = proxyActivities<Activities>(fewAttempts(copyActivity));

export interface SpawnState {
  phase: SpawnPhase;
  /** The outcome, once known. */
  result: SpawnResult | null;
  /** A dependency (the database) is away: the step waiting for it. */
  degraded: Degraded | null;
}

/** Where the spawn is: phase, outcome, a dependency it waits for. */
export const spawnStateQuery = defineQuery<SpawnState>('spawnState');
/** The `wake` signal of agentLoopWorkflow (by name: this module must not import the loop). */
const wakeSignal = defineSignal<[{ reason: 'note' }]>('wake');

/** Give birth to a descendant of an agent; returns how it ended (running, refused or rolled back). */
export async function spawnWorkflow(raw: SpawnInput): Promise<SpawnResult> {
  const input = parseWorkflowInput('spawnWorkflow', spawnWorkflowInput, raw);
  upsertSearchAttributes([
    { key: agentIdSearchAttribute, value: input.parentId },
    { key: kindSearchAttribute, value: 'spawn' },
  ]);
  return new Spawning(input).run();
}

class Spawning {
  readonly state: SpawnState = { phase: 'admitting', result: null, degraded: null };
  readonly info = workflowInfo();
  readonly ids: { parentId: string; childId: string };
  readonly base: Pick<SpawnResult, 'parentId' | 'childId' | 'type'>;
  /** Set once the child's loop is started: from then on the spawn is not undone. */
  private running: SpawnResult | null = null;
  /** Set once admitted: from then on its record is this workflow's to end. */
  private admitted = false;

  constructor(readonly input: SpawnParams) {
    this.ids = { parentId: input.parentId, childId: input.name };
    this.base = { ...this.ids, type: input.type };
    setHandler(spawnStateQuery, () => this.state, { description: handlerText.spawn.spawnState });
  }

  private phase(p: SpawnPhase): void {
    this.state.phase = p;
    setCurrentDetails(this.state.result ? `${p} · ${this.state.result.status}` : p);
  }

  /** Call an activity, waiting out an outage of the database (shown in the state meanwhile). */
  private step<T>(name: string, fn: () => Promise<T>): Promise<T> {
    return rideOut(name, fn, {
      onDegraded: (d) => {
        this.state.degraded = d;
      },
      onRecovered: () => {
        this.state.degraded = null;
      },
    });
  }

  async run(): Promise<SpawnResult> {
    let result: SpawnResult;
    try {
      result = await this.birth();
    } catch (err) {
      if (isCancellation(err)) {
        // A child whose loop runs is born: the spawn ends as it would have.
        if (this.running) return CancellationScope.nonCancellable(() => this.end(this.running!));
        // Otherwise the unborn child is undone, whatever else is cancelled meanwhile.
        await CancellationScope.nonCancellable(() =>
          this.end({ ...this.base, status: 'rolled_back', reason: 'the spawn was cancelled' }),
        );
        throw err;
      }
      log.warn('spawn failed: rolling back', { ...this.ids, error: failureMessage(err) });
      result = { ...this.base, status: 'rolled_back', reason: failureMessage(err) };
    }
    return this.end(result);
  }

  private async birth(): Promise<SpawnResult> {
    const { input, ids, base } = this;
    this.phase('admitting');
    const begun = await this.step('spawnBegin', () =>
      db.spawnBegin({
        ...ids,
        type: input.type,
        goals: input.goals,
        ...(input.budget !== undefined ? { budget: input.budget } : {}),
        workflowId: this.info.workflowId,
      }),
    );
    if (begun.status === 'refused')
      return {
        ...base,
        status: 'refused',
        reason: begun.reason,
        ...(begun.generation !== undefined ? { generation: begun.generation } : {}),
      };
    this.admitted = true;
    this.phase('copying');
    const copy = await this.step('spawnCopy', () =>
      copier.spawnCopy({ ...ids, startedAtMs: this.info.startTime.getTime() }),
    );
    const born = { ...base, generation: begun.generation, copied: copy.copied, rows: copy.rows, spawnMs: copy.spawnMs };
    this.phase('funding');
    const funded = await this.step('spawnFund', () => db.spawnFund(ids));
    if (!funded.ok) return { ...born, status: 'refused', reason: funded.reason };
    this.phase('starting');
    // Not cancellable: once the start is asked for, the child runs, and the spawn must know it.
    await CancellationScope.nonCancellable(() => this.startLoop());
    this.running = { ...born, status: 'running', budget: funded.budget };
    return this.running;
  }

  /** The child's own loop `agent/<name>`: it outlives this workflow. */
  private async startLoop(): Promise<void> {
    const { childId } = this.ids;
    try {
      await startChild<typeof agentLoopWorkflow>('agentLoopWorkflow', {
        workflowId: workflowIds.agent(childId),
        args: [{ agentId: childId, name: childId }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        ...workflowFailover,
        ...agentLoopText({ agentId: childId, name: childId }),
      });
    } catch (err) {
      // Started by an earlier run of this spawn (resumed after a restart): it runs.
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }

  /** Record the outcome (undoing an unborn child), tell the parent, wake its loop. */
  private async end(result: SpawnResult): Promise<SpawnResult> {
    this.state.result = result;
    if (result.status !== 'running') this.phase('rolling_back');
    const finished = await this.step('spawnFinish', () =>
      db.spawnFinish({
        ...this.ids,
        workflowId: this.info.workflowId,
        admitted: this.admitted,
        outcome: result.status,
        ...(result.reason ? { reason: result.reason } : {}),
        note: spawnNote(result),
        noteKey: `${this.info.workflowId}/${this.info.runId}:outcome`,
      }),
    );
    // A child whose loop was already started is never undone: it runs.
    const final: SpawnResult =
      finished.status === 'running' && result.status !== 'running' ? { ...result, status: 'running' } : result;
    this.state.result = final;
    try {
      await getExternalWorkflowHandle(workflowIds.agent(this.ids.parentId)).signal(wakeSignal, { reason: 'note' });
    } catch (err) {
      log.info('parent loop not running; the note waits for it', {
        parentId: this.ids.parentId,
        error: failureMessage(err),
      });
    }
    this.phase('done');
    return final;
  }
}
