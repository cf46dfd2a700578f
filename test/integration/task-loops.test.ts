/**
 * Auxiliary (task) loops under failure, on real Temporal (the dev server, with the worker in its
 * own process where it is killed), real Postgres and the scripted model:
 * - timeout → the loop restarts (continue-as-new) and ticks again;
 * - an error of the request → the task is frozen for review with the reason, the loop stopped;
 * - the worker killed mid-tick → a crash: the loop stops and the main loop is told with a note;
 * - the parent restarted with task loops in flight → every interrupted loop resumes and ticks;
 * - an LLM outage is waited out (not an error); the tick cap comes from task_loop_max_ticks.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { NativeConnection } from '@temporalio/worker';
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ChatMessage } from '../../activities/llm/index.js';
import { workflowIds } from '../../core/ids.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { agentConfig, agents, llmCalls, llmRegistry, notes, processLog, tasks } from '../../db/schema/index.js';
import type { TaskLoopInput, TaskLoopStatus, taskLoopWorkflow } from '../../workflows/task-loop.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { startLoop, untilStatus, withWorker, type WorkerSpec } from '../helpers/harness.js';
import { thinkScript } from '../helpers/scripted.js';
import { sleep, startKillableStack, waitFor, type KillableStack } from '../helpers/worker-process.js';

let ks: KillableStack;
let client: Client;
let connection: NativeConnection;

beforeAll(async () => {
  ks = await startKillableStack('task-loops');
  client = ks.client;
  connection = await NativeConnection.connect(ks.stack.temporal.connection);
}, 180_000);
afterAll(async () => {
  await connection?.close();
  await ks?.stop();
});

const db = () => ks.stack.db.db;
const isTaskPrompt = (messages: ChatMessage[]) =>
  messages.some((m) => m.content.includes('You are an auxiliary loop working only on task #'));

/** An agent with one scripted `agent` row (params as the row stores them) and one open task. */
async function seed(agentId: string, params: Record<string, unknown> = {}): Promise<number> {
  await db().insert(agents).values({ id: agentId, name: agentId });
  await db()
    .insert(llmRegistry)
    .values({
      agentId,
      name: 'script',
      provider: 'scripted',
      model: `scripted-${agentId}`,
      role: 'agent',
      priority: 1,
      params,
    });
  const [task] = await db()
    .insert(tasks)
    .values({ agentId, title: `research for ${agentId}` })
    .returning();
  return task!.id;
}

/** An in-process worker (on a queue of its own) with the real activities and a scripted reply function. */
const scripted = (script: (messages: ChatMessage[], i: number) => string | Promise<string>): WorkerSpec => ({
  workflowBundle: { codePath: ks.bundlePath },
  activities: createActivities({
    db: db(),
    llm: {
      env: {},
      toolsDir: repoToolsDir,
      scriptedReply: thinkScript(script as (m: ChatMessage[], i: number) => string),
    },
  }),
});

function startTaskLoop(
  c: Client,
  taskQueue: string,
  agentId: string,
  taskId: number,
  extra: Partial<TaskLoopInput> = {},
) {
  return c.workflow.start<typeof taskLoopWorkflow>('taskLoopWorkflow', {
    taskQueue,
    workflowId: workflowIds.task(agentId, taskId),
    args: [{ agentId, taskId, title: 'research', parentWorkflowId: workflowIds.agent(agentId), delayMs: 50, ...extra }],
  });
}

const taskRow = async (id: number) => (await db().select().from(tasks).where(eq(tasks.id, id)))[0]!;
const taskTicks = async (agentId: string, taskId: number) =>
  (
    await db()
      .select({ tick: processLog.tick })
      .from(processLog)
      .where(
        and(
          eq(processLog.agentId, agentId),
          eq(processLog.processId, `task/${taskId}`),
          eq(processLog.kind, 'task_loop'),
        ),
      )
      .orderBy(asc(processLog.id))
  ).map((r) => r.tick);
const notesTo = (agentId: string) =>
  db()
    .select()
    .from(notes)
    .where(and(eq(notes.agentId, agentId), eq(notes.direction, 'in'), eq(notes.source, 'system')))
    .orderBy(asc(notes.id));

describe('the tick cap', () => {
  it('stops after task_loop_max_ticks ticks with a clear status, and shows the default cap when none is set', async () => {
    const capped = await seed('capped');
    await db().insert(agentConfig).values({ agentId: 'capped', key: 'task_loop_max_ticks', value: 3 });
    const uncapped = await seed('uncapped');
    await withWorker(
      connection,
      scripted(() => 'Still researching.'),
      async (q) => {
        const h = await startTaskLoop(client, q, 'capped', capped);
        expect(await h.result()).toEqual({
          taskId: capped,
          ticks: 3,
          replStatus: 'stopped',
          reason: 'tick cap reached: 3 of 3 ticks',
        });

        // Neither the command nor the config: the catalogue's default (50).
        const u = await startTaskLoop(client, q, 'uncapped', uncapped, { delayMs: 60_000 });
        const s = await waitFor('a tick', 30_000, async () => {
          const st = await u.query<TaskLoopStatus>('status');
          return st.tick >= 1 ? st : undefined;
        });
        expect(s.maxTicks).toBe(50);
        await u.signal('stopTask');
        expect(await u.result()).toMatchObject({ replStatus: 'stopped', reason: 'stop requested' });
      },
    );
    expect(await taskTicks('capped', capped)).toEqual([1, 2, 3]);
    const row = await taskRow(capped);
    expect(row.replStatus).toBe('stopped');
    expect(row.frozen).toBe(false);
    // The main loop learns that the loop gave up before the task was done.
    const [note] = await notesTo('capped');
    expect(note?.tags).toEqual(['task-loop', 'tick-cap']);
    expect(note?.text).toMatch(/stopped before the task was done: tick cap reached: 3 of 3 ticks/);
    const log = await db()
      .select()
      .from(processLog)
      .where(and(eq(processLog.agentId, 'capped'), eq(processLog.kind, 'task_loop_status')));
    expect(log.map((l) => [l.status, l.message])).toEqual([['close', 'tick cap reached: 3 of 3 ticks']]);
    // Its tick rows are closed: no open process is left in the agent's context.
    const open = await db()
      .select()
      .from(processLog)
      .where(and(eq(processLog.agentId, 'capped'), eq(processLog.processId, `task/${capped}`)));
    expect(open.every((r) => r.closedAt !== null)).toBe(true);
  }, 120_000);
});

describe('error → the task is frozen for review', () => {
  let other: MigratedDatabase;
  afterAll(async () => {
    await other?.dispose();
  });

  it('a request error (a table the database does not have) freezes the task with the reason and stops the loop', async () => {
    // Its own database, where the think's context read names a table that is not there (schema
    // drift): a request error, non-retryable, that no retry can cure.
    other = await migratedDatabase('mindloop_task_error');
    await other.db.insert(agents).values({ id: 'errant', name: 'errant' });
    await other.db.insert(llmRegistry).values({
      agentId: 'errant',
      name: 'script',
      provider: 'scripted',
      model: 'scripted-errant',
      role: 'agent',
      priority: 1,
    });
    const [task] = await other.db.insert(tasks).values({ agentId: 'errant', title: 'research' }).returning();
    await other.pool.query('alter table ethics_policies rename to ethics_policies_gone');
    const result = await withWorker(
      connection,
      {
        workflowBundle: { codePath: ks.bundlePath },
        activities: createActivities({ db: other.db, llm: { env: {}, toolsDir: repoToolsDir } }),
      },
      (q) => startTaskLoop(client, q, 'errant', task!.id).then((h) => h.result()),
    );
    expect(result).toEqual({
      taskId: task!.id,
      ticks: 0,
      replStatus: 'error',
      reason: expect.stringMatching(/ethics_policies" does not exist/),
    });

    const [row] = await other.db.select().from(tasks).where(eq(tasks.id, task!.id));
    expect(row!.replStatus).toBe('error');
    expect(row!.frozen).toBe(true);
    expect(row!.lastError).toMatch(/ethics_policies" does not exist/);
    const [note] = await other.db.select().from(notes).where(eq(notes.agentId, 'errant'));
    expect(note?.tags).toEqual(['task-loop', 'error']);
    expect(note?.text).toMatch(
      new RegExp(`Task loop for task #${task!.id} failed and the task is frozen for review: .*ethics_policies`),
    );
    // The model was never asked: the request failed before, once, and was not repeated.
    expect(await other.db.select().from(llmCalls)).toHaveLength(0);
  }, 120_000);
});

describe('an outage is waited out', () => {
  it('no LLM answering leaves the task running and unfrozen; the loop ticks once one answers', async () => {
    const taskId = await seed('patient', { error: 'endpoint down' });
    await withWorker(
      connection,
      scripted(() => 'Back at work.'),
      async (q) => {
        const h = await startTaskLoop(client, q, 'patient', taskId, { maxTicks: 2 });
        const waiting = await waitFor('the outage wait', 30_000, async () => {
          const s = await h.query<TaskLoopStatus>('status');
          return s.waiting && s.waiting.attempts >= 2 ? s : undefined;
        });
        expect(waiting.replStatus).toBe('running');
        expect(waiting.tick).toBe(0);
        expect(waiting.waiting?.lastError).toMatch(/endpoint down/);
        expect((await taskRow(taskId)).frozen).toBe(false);
        await db()
          .update(llmRegistry)
          .set({ params: {}, updatedAt: new Date() })
          .where(eq(llmRegistry.agentId, 'patient'));
        expect(await h.result()).toMatchObject({ ticks: 2, replStatus: 'stopped' });
      },
    );
    expect(await taskTicks('patient', taskId)).toEqual([1, 2]);
    expect((await taskRow(taskId)).lastError).toBeNull();
  }, 120_000);
});

describe('timeout → restart', () => {
  it('a think that runs past its timeout restarts the loop (a new run), which ticks again', async () => {
    const taskId = await seed('slow');
    let calls = 0;
    const h = await withWorker(
      connection,
      scripted(async () => {
        // The first think answers after 6 s (heartbeating all along: the worker is alive), past
        // the loop's 3 s; the restarted loop's answer at once.
        if (calls++ === 0) await sleep(6_000);
        return 'Done waiting.';
      }),
      async (q) => {
        const handle = await startTaskLoop(client, q, 'slow', taskId, { maxTicks: 2, thinkTimeoutMs: 3_000 });
        expect(await handle.result()).toEqual({
          taskId,
          ticks: 2,
          replStatus: 'stopped',
          reason: 'tick cap reached: 2 of 2 ticks',
        });
        return handle;
      },
    );
    // A new run (continue-as-new) after the timeout, carrying the restart count.
    const desc = await h.describe();
    expect(desc.runId).not.toBe(h.firstExecutionRunId);
    const row = await taskRow(taskId);
    expect(row.replRestarts).toBe(1);
    expect(row.replStatus).toBe('stopped');
    expect(row.frozen).toBe(false);
    const log = await db()
      .select()
      .from(processLog)
      .where(and(eq(processLog.agentId, 'slow'), eq(processLog.kind, 'task_loop_status')))
      .orderBy(asc(processLog.id));
    expect(log.map((l) => l.status)).toEqual(['timeout', 'close']);
    expect(log[0]!.message).toMatch(/restart after a timeout \(activity StartToClose timeout\)/i);
    expect(await taskTicks('slow', taskId)).toEqual([1, 2]);
  }, 120_000);
});

describe('crash → stop and notify the main loop', () => {
  it('a worker SIGKILLed mid-tick: after a new worker comes up the loop is stopped and the parent reads a note about it', async () => {
    const taskId = await seed('crashy', { replies: ['Working on the task.'], delayMs: 3000 });
    let worker = ks.spawnWorker();
    try {
      // The parent idles between ticks until a note or a process wakes it.
      const parent = await startLoop(client, 'mindloop', {
        agentId: 'crashy',
        reflexes: false,
        settings: { idle: { on: true, wakeOn: ['note', 'process'], timeoutMs: 600_000 } },
      });
      await untilStatus(parent, (s) => s.tick >= 1 && s.phase === 'idle', 'the parent idle after tick 1', 60_000);
      const h = await startTaskLoop(client, 'mindloop', 'crashy', taskId);
      await waitFor("the task loop's think in flight", 60_000, async () => {
        const d = await h.describe();
        return d.raw.pendingActivities?.some(
          (a) =>
            a.activityType?.name === 'think' &&
            a.state === temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
        )
          ? true
          : undefined;
      });
      worker.kill('SIGKILL');
      await new Promise((r) =>
        worker.exitCode !== null || worker.signalCode !== null ? r(null) : worker.once('exit', r),
      );
      await sleep(500);
      worker = ks.spawnWorker();

      const result = await h.result();
      expect(result.replStatus).toBe('stopped');
      expect(result.reason).toMatch(/^crashed: the worker running tick 1 was lost/);
      const row = await taskRow(taskId);
      expect(row.replStatus).toBe('stopped');
      expect(row.frozen).toBe(false);
      const [note] = await notesTo('crashy');
      expect(note?.tags).toEqual(['task-loop', 'crash']);
      expect(note?.text).toMatch(new RegExp(`Task loop for task #${taskId} crashed and stopped`));
      // The wake signal got the idle parent thinking again, and its next context showed the note.
      await waitFor('the parent to read the note', 60_000, async () => {
        const [n] = await db().select().from(notes).where(eq(notes.id, note!.id));
        return n?.readAt ? true : undefined;
      });
      // The note is marked read while tick 2 builds its context; the status counts the tick once it ends.
      await untilStatus(parent, (s) => s.tick >= 2, "the parent's tick 2 to end", 60_000);
      await parent.signal('stop');
      await parent.result();
    } finally {
      worker.kill('SIGKILL');
    }
  }, 240_000);
});

describe('interrupted loops resume when the parent starts', () => {
  it('the parent terminated and started anew: a loop still running is attached, an interrupted one runs again and ticks on', async () => {
    await db().insert(agents).values({ id: 'resumer', name: 'resumer' });
    await db().insert(llmRegistry).values({
      agentId: 'resumer',
      name: 'script',
      provider: 'scripted',
      model: 'scripted-resumer',
      role: 'agent',
      priority: 1,
    });
    let mainThinks = 0;
    const script = (messages: ChatMessage[]) => {
      if (isTaskPrompt(messages)) return 'Reading up on the task.';
      return mainThinks++ === 0
        ? `I will have a helper research this.\n${renderCommandBlock([{ cmdId: 't1', type: 'llm_task.start', args: { title: 'research the almanac' } }])}`
        : 'Waiting for the research.';
    };
    const startParent = (q: string) =>
      startLoop(client, q, { agentId: 'resumer', reflexes: false, settings: { delayMs: 500 } });
    await withWorker(connection, scripted(script), async (q) => {
      let parent = await startParent(q);
      const [task] = await waitFor('the task loop started', 30_000, async () => {
        const rows = await db()
          .select()
          .from(tasks)
          .where(and(eq(tasks.agentId, 'resumer'), eq(tasks.replStatus, 'running')));
        return rows.length ? rows : undefined;
      });
      const taskId = task!.id;
      const child: WorkflowHandle<typeof taskLoopWorkflow> = client.workflow.getHandle(
        workflowIds.task('resumer', taskId),
      );
      const ticked = (n: number) =>
        waitFor(`task tick ${n}`, 30_000, async () =>
          (await taskTicks('resumer', taskId)).length >= n ? true : undefined,
        );
      await ticked(2);
      const firstRun = (await child.describe()).runId;

      // 1. Only the parent is terminated: its task loop keeps running, and the new parent attaches to it.
      await parent.terminate('test: parent restart');
      parent = await startParent(q);
      await untilStatus(parent, (s) => Boolean(s.taskLoops[String(taskId)]), 'the new parent to know its task loop');
      const d1 = await child.describe();
      expect(d1.status.name).toBe('RUNNING');
      expect(d1.runId).toBe(firstRun);

      // 2. Both are terminated (the loop is interrupted: its task still says running): the next start resumes it.
      await parent.terminate('test: parent restart');
      await child.terminate('test: interrupted');
      expect((await taskRow(taskId)).replStatus).toBe('running');
      const before = (await taskTicks('resumer', taskId)).length;
      parent = await startParent(q);
      await waitFor('the task loop running again', 30_000, async () => {
        const d = await child.describe();
        return d.status.name === 'RUNNING' && d.runId !== firstRun ? true : undefined;
      });
      await ticked(before + 2);
      await parent.signal('stop');
      await parent.result();
      await child.signal('stopTask');
      expect(await child.result()).toMatchObject({ replStatus: 'stopped', reason: 'stop requested' });

      // The resumed loop went on from its last tick: no tick thought twice, every one a new think.
      const ticks = await taskTicks('resumer', taskId);
      expect(ticks).toEqual(Array.from({ length: ticks.length }, (_, i) => i + 1));
      const thinks = await db()
        .select()
        .from(llmCalls)
        .where(and(eq(llmCalls.agentId, 'resumer'), eq(llmCalls.purpose, 'think'), eq(llmCalls.ok, true)));
      const taskThinks = thinks.filter((c) => c.requestKey?.startsWith(workflowIds.task('resumer', taskId)));
      expect(taskThinks.length).toBe(ticks.length);
    });
  }, 240_000);
});
