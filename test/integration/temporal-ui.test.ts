/**
 * What the Temporal UI shows of Mindloop's workflows, on a real Temporal dev server with the
 * real activities, Postgres and the scripted model:
 * - an agent loop started the way `mindloop start` starts it carries a static summary and
 *   details, its timers are labelled ("pacing 300 ms"), its current details name the tick and
 *   phase, and `__temporal_workflow_metadata` lists its query, signals and updates, each described;
 * - the task loop and the escalation its reply starts have summaries of their own, the
 *   escalation's wait for a human is labelled and shown as its current details;
 * - a fork started the way `mindloop forks demo` starts it, and a sub-campaign a campaign starts,
 *   have theirs too.
 */
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { NativeConnection, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ChatMessage } from '../../activities/llm/index.js';
import type { ScriptedReplyFn } from '../../activities/llm/providers/scripted.js';
import { ensureDemoAgent } from '../../cli/forks.js';
import { workflowIds } from '../../core/ids.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { agents, llmRegistry, tasks } from '../../db/schema/index.js';
import { startStack, type Stack } from '../../runtime/stack.js';
import { startAgentLoop, startSuccessorFork } from '../../runtime/workflow-starts.js';
import { bundleWorkflows } from '../../workers/queues.js';
import type { campaignWorkflow } from '../../workflows/campaign.js';
import type { EscalationStatus } from '../../workflows/escalation.js';
import type { ForkState } from '../../workflows/successor-fork.js';
import { freePort, freshPostgresDatabase, repoToolsDir, tempDir, testEnv } from '../helpers/env.js';
import { untilStatus, withWorker, type WorkerSpec } from '../helpers/harness.js';
import { thinkScript } from '../helpers/scripted.js';
import { waitFor } from '../helpers/worker-process.js';

const data = tempDir('temporal-ui');
let stack: Stack;
let client: Client;
let connection: NativeConnection;
let bundle: WorkflowBundleWithSourceMap;
let dropDb: () => Promise<void>;

const isTaskPrompt = (messages: ChatMessage[]) =>
  messages.some((m) => m.content.includes('You are an auxiliary loop working only on task #'));
let mainThinks = 0;
/** The agent's first reply starts a task loop and an escalation; after that it thinks quietly. */
function script(messages: ChatMessage[]): string {
  if (isTaskPrompt(messages)) return 'Reading the almanac.';
  if (mainThinks++ === 0) {
    return `A helper should read up on this, and someone should check my parser.\n${renderCommandBlock([
      { cmdId: 't1', type: 'llm_task.start', args: { title: 'read the almanac' } },
      { cmdId: 'e1', type: 'escalate', args: { task: 'is my almanac parser right?', category: 'code' } },
    ])}`;
  }
  return 'A quiet tick.';
}
/** The oversight answers at once but asks for a human, so the escalation waits for one. */
const oversightAnswer = JSON.stringify({
  verdict: 'approve',
  solution: 'it looks right',
  teaching_moment: 'test the edge cases',
  recommended_tools: [],
  needs_human: true,
});
const think = thinkScript(script);
const reply: ScriptedReplyFn = (call) => (call.purpose?.startsWith('oversight:') ? oversightAnswer : think(call));

beforeAll(async () => {
  const fresh = await freshPostgresDatabase('mindloop_temporal_ui');
  dropDb = fresh.drop;
  stack = await startStack({
    env: testEnv({ MINDLOOP_DATA_DIR: data.path, TEMPORAL_PORT: await freePort(), DATABASE_URL: fresh.url }),
    ui: false,
  });
  await stack.db.db.insert(agents).values({ id: 'shown', name: 'Shown' });
  await stack.db.db.insert(llmRegistry).values([
    { agentId: 'shown', name: 'script', provider: 'scripted', model: 'scripted-shown', role: 'agent', priority: 1 },
    {
      agentId: 'shown',
      name: 'overseer',
      provider: 'scripted',
      model: 'scripted-oversight',
      role: 'oversight',
      priority: 1,
    },
  ]);
  bundle = await bundleWorkflows();
  client = new Client({ connection: await Connection.connect(stack.temporal.connection) });
  connection = await NativeConnection.connect(stack.temporal.connection);
}, 180_000);
afterAll(async () => {
  await connection?.close();
  await client?.connection.close();
  await stack?.stop();
  await dropDb?.();
  data.remove();
});

/** A worker on `mindloop` (the queue the start functions use) with the real activities. */
const worker = (): WorkerSpec => ({
  taskQueue: 'mindloop',
  workflowBundle: bundle,
  activities: createActivities({
    db: stack.db.db,
    dataDir: data.path,
    llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: reply },
  }),
});

/** The summaries of a workflow's TIMER_STARTED events, decoded. */
async function timerSummaries(handle: WorkflowHandle): Promise<string[]> {
  const { events } = await handle.fetchHistory();
  return (events ?? [])
    .filter((e) => e.eventType === temporal.api.enums.v1.EventType.EVENT_TYPE_TIMER_STARTED)
    .map((e) =>
      e.userMetadata?.summary ? defaultPayloadConverter.fromPayload<string>(e.userMetadata.summary) : '(none)',
    );
}

type Interaction = { name?: string | null; description?: string | null };
/** The built-in metadata query: the handlers the workflow registered, with their descriptions. */
async function metadata(handle: WorkflowHandle) {
  const m = await handle.query<temporal.api.sdk.v1.IWorkflowMetadata>('__temporal_workflow_metadata');
  const described = (list: Interaction[] | null | undefined) =>
    Object.fromEntries(
      (list ?? []).filter((d) => !d.name?.startsWith('__')).map((d) => [d.name ?? '', d.description ?? '']),
    );
  return {
    queries: described(m.definition?.queryDefinitions),
    signals: described(m.definition?.signalDefinitions),
    updates: described(m.definition?.updateDefinitions),
    currentDetails: m.currentDetails ?? '',
  };
}

const allDescribed = (handlers: Record<string, string>) => Object.entries(handlers).filter(([, d]) => d.trim() === '');

describe('the Temporal UI view of an agent and its children', () => {
  it('summary, details, timer labels, current details and handler descriptions; the task loop and escalation children have their own', async () => {
    await withWorker(connection, worker(), async () => {
      const h = await startAgentLoop(client, { agentId: 'shown', name: 'Shown agent', delayMs: 300, maxTicks: 3 });
      expect(h.workflowId).toBe('agent/shown');

      const d = await h.describe();
      expect(await d.staticSummary()).toBe('agent shown (Shown agent) — thinking loop');
      const details = await d.staticDetails();
      expect(details).toContain('`mindloop status shown`');
      expect(details).toContain('update `addNote`');
      expect(details).toContain('signals `pause`, `resume`, `stop`');
      expect(details).toContain('delay 300 ms between ticks');

      await untilStatus(h, (s) => s.tick >= 1, 'tick 1');
      const m = await metadata(h);
      expect(Object.keys(m.queries)).toEqual(['status']);
      expect(Object.keys(m.signals).sort()).toEqual(['pause', 'resume', 'stop', 'wake']);
      expect(Object.keys(m.updates).sort()).toEqual(['addNote', 'applyAgentFile', 'setConfig']);
      expect(allDescribed({ ...m.queries, ...m.signals, ...m.updates })).toEqual([]);
      expect(m.updates.addNote).toMatch(/mindloop note/);
      expect(m.currentDetails).toMatch(/^tick \d+ · \w+ · llm /);

      expect(await h.result()).toEqual({ agentId: 'shown', ticks: 3, reason: 'max_ticks' });
      const timers = await timerSummaries(h);
      expect(timers.length).toBeGreaterThanOrEqual(1);
      expect(new Set(timers)).toEqual(new Set(['pacing 300 ms']));

      // The task loop the first reply started.
      const [task] = await waitFor('the task row', 30_000, async () => {
        const rows = await stack.db.db
          .select()
          .from(tasks)
          .where(and(eq(tasks.agentId, 'shown'), eq(tasks.title, 'read the almanac')));
        return rows.length ? rows : undefined;
      });
      const child = client.workflow.getHandle(workflowIds.task('shown', task!.id));
      const cd = await child.describe();
      expect(await cd.staticSummary()).toBe(`task loop ${task!.id} of shown: read the almanac`);
      expect(await cd.staticDetails()).toContain('`agent/shown`');
      const cm = await metadata(child);
      expect(Object.keys(cm.queries)).toEqual(['status']);
      expect(Object.keys(cm.signals)).toEqual(['stopTask']);
      expect(allDescribed({ ...cm.queries, ...cm.signals })).toEqual([]);
      // Its second tick comes after its first pacing timer.
      await waitFor('task tick 2', 30_000, async () =>
        (await child.query<{ tick: number }>('status')).tick >= 2 ? true : undefined,
      );
      await child.signal('stopTask');
      await child.result();
      expect(await timerSummaries(child)).toContain('task pacing 1 s');

      // The escalation: the oversight asked for a human, so it waits for one.
      const esc = client.workflow.getHandle(workflowIds.escalation('shown.t1.e1'));
      await waitFor('the escalation waiting for a human', 30_000, async () =>
        (await esc.query<EscalationStatus>('status')).phase === 'awaiting_human' ? true : undefined,
      );
      const ed = await esc.describe();
      expect(await ed.staticSummary()).toBe('escalation shown.t1.e1 of shown: code');
      expect(await ed.staticDetails()).toContain('question: is my almanac parser right?');
      const em = await metadata(esc);
      expect(Object.keys(em.queries)).toEqual(['status']);
      expect(Object.keys(em.updates).sort()).toEqual(['approve', 'nudge', 'reject', 'veto']);
      expect(allDescribed({ ...em.queries, ...em.updates })).toEqual([]);
      expect(em.currentDetails).toMatch(/^awaiting a human answer until \d{4}-/);
      expect(await timerSummaries(esc)).toEqual(['human deadline (1 d from the start)']);
      await esc.executeUpdate('veto', { args: [{ by: 'test', reason: 'not now' }] });
      expect(await esc.result()).toMatchObject({ outcome: 'denied', decidedBy: 'human' });
    });
  }, 120_000);

  it('a fork started as `mindloop forks demo` starts it, and a sub-campaign, carry their own summaries', async () => {
    await ensureDemoAgent(stack.db.db, 'ui-forker');
    await withWorker(connection, worker(), async () => {
      const fork = await startSuccessorFork(
        client,
        {
          agentId: 'ui-forker',
          forkId: 'ui-demo',
          patch: { kind: 'strategy', strategy: 'keyword_cluster' },
          evaluation: { kind: 'abstracts_replay', lastN: 60, window: 10 },
        },
        { from: 'recency' },
      );
      const fd = await fork.describe();
      expect(await fd.staticSummary()).toBe('fork of ui-forker: abstracts strategy recency → keyword_cluster');
      expect(await fd.staticDetails()).toContain('`mindloop forks approve ui-demo`');
      const state = await waitFor('a verdict', 60_000, async () => {
        const s = await fork.query<ForkState>('forkState');
        return s.phase === 'awaiting_approval' || s.phase === 'done' ? s : undefined;
      });
      const fm = await metadata(fork);
      expect(Object.keys(fm.queries)).toEqual(['forkState']);
      expect(Object.keys(fm.updates).sort()).toEqual(['approveFork', 'rejectFork']);
      expect(allDescribed({ ...fm.queries, ...fm.updates })).toEqual([]);
      // The demo patch is an improvement: the fork waits at the human gate.
      expect(state).toMatchObject({ phase: 'awaiting_approval', verdict: 'APPROVE' });
      expect(fm.currentDetails).toMatch(/^verdict APPROVE: awaiting the human gate until \d{4}-/);
      expect(await timerSummaries(fork)).toEqual(['fork wall budget 1 h', 'human gate: the APPROVE lapses in 1 d']);
      await fork.executeUpdate('rejectFork', { args: [{ by: 'test' }] });
      expect(await fork.result()).toMatchObject({ gate: 'rejected', applied: null });

      // A campaign whose one task is a sub-campaign: the child reads as a campaign of its own.
      const parent = await client.workflow.start<typeof campaignWorkflow>('campaignWorkflow', {
        taskQueue: 'mindloop',
        workflowId: workflowIds.campaign('ui-main'),
        args: [
          {
            agentId: 'shown',
            title: 'Delegate the notes',
            phases: [
              {
                name: 'delegate',
                type: 'build',
                tasks: [
                  {
                    name: 'sub',
                    kind: 'workflow',
                    type: 'campaignWorkflow',
                    args: {
                      campaignId: 'ui-sub',
                      agentId: 'shown',
                      title: 'Jot a note',
                      phases: [
                        {
                          name: 'jot',
                          type: 'build',
                          tasks: [{ name: 'note', type: 'note', args: { text: 'from the sub-campaign' } }],
                        },
                      ],
                    },
                  },
                ],
              },
            ],
          },
        ],
      });
      expect(await parent.result()).toMatchObject({ status: 'completed' });
      const sub = await client.workflow.getHandle(workflowIds.campaign('ui-sub')).describe();
      expect(await sub.staticSummary()).toBe('campaign ui-sub of agent shown: 1 phase — Jot a note');
      expect(await sub.staticDetails()).toContain('task 1/1 (sub) of phase 1/1 (delegate) of campaign `ui-main`');
      const pm = await metadata(parent);
      expect(Object.keys(pm.queries)).toEqual(['progress']);
      expect(Object.keys(pm.signals).sort()).toEqual(['cancel', 'pause', 'resume']);
      expect(allDescribed({ ...pm.queries, ...pm.signals })).toEqual([]);
      expect(pm.currentDetails).toBe('completed · phase 1/1 delegate · task 1/1 sub');
    });
  }, 120_000);
});
