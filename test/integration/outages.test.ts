/**
 * Outages of what the workflows depend on, for real: a Postgres server of the test's own is
 * stopped under two ticking agents, a campaign mid-phase and an escalation waiting for a human —
 * for 30 s, then for 3 minutes — and the Temporal dev server is restarted under running agents.
 * Afterwards every workflow goes on from where it was (RUNNING or completed as it should), the
 * note sent during the outage is stored exactly once, and no command was applied twice.
 */
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { and, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import {
  agents,
  commandLog,
  decisionLog,
  diaryEntries,
  llmRegistry,
  notes,
  processLog,
} from '../../db/schema/index.js';
import { resolveTool } from '../../runtime/tools.js';
import { startStack, type Stack } from '../../runtime/stack.js';
import { startDevServer, type DevServer } from '../../runtime/temporal-dev-server.js';
import type { AddNoteResult, AgentStatus, agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import type { CampaignProgress, campaignWorkflow } from '../../workflows/campaign.js';
import type { EscalationStatus, escalationWorkflow } from '../../workflows/escalation.js';
import { freePort, repoToolsDir, tempDir, testEnv } from '../helpers/env.js';
import { withWorker, type WorkerSpec } from '../helpers/harness.js';
import { startPrivatePostgres, type PrivatePostgres } from '../helpers/postgres-server.js';
import { thinkScript } from '../helpers/scripted.js';
import { bundle, productWorkflowsPath } from '../helpers/temporal.js';
import { sleep, waitFor } from '../helpers/worker-process.js';

let pgs: PrivatePostgres;
let stack: Stack;
let data: ReturnType<typeof tempDir>;
let workflowBundle: WorkflowBundleWithSourceMap;
let temporalPort: number;
let restarted: DevServer | undefined;
let client: Client;

// Each think answers with one diary.add of a title never used before: a command applied twice
// would show as a diary entry without its own applied command_log row, or two with one title.
let thinkCount = 0;
const think = thinkScript(() => {
  const n = ++thinkCount;
  return `Thought number ${n}.\n${renderCommandBlock([{ cmdId: 'd1', type: 'diary.add', args: { title: `Entry ${n}`, content: `written at think ${n}` } }])}`;
});
const oversightAnswer = JSON.stringify({
  verdict: 'approve',
  solution: 'go ahead',
  teaching_moment: 'ask first',
  recommended_tools: [],
  needs_human: false,
});
const script: typeof think = (call) => (call.purpose?.startsWith('oversight') ? oversightAnswer : think(call));

beforeAll(async () => {
  pgs = await startPrivatePostgres('outages');
  data = tempDir('outages');
  temporalPort = await freePort();
  stack = await startStack({
    env: testEnv({ MINDLOOP_DATA_DIR: data.path, TEMPORAL_PORT: temporalPort, DATABASE_URL: pgs.url }),
    ui: false,
  });
  workflowBundle = await bundle(productWorkflowsPath);
  client = new Client({ connection: await Connection.connect(stack.temporal.connection) });
  // The scripted model answers the agents' think calls and the oversight (which approves; the
  // escalation still waits for the human it requires).
  for (const id of ['alpha', 'beta']) {
    await stack.db.db.insert(agents).values({ id, name: id });
    await stack.db.db.insert(llmRegistry).values({
      agentId: id,
      name: 'script',
      provider: 'scripted',
      model: `scripted-${id}`,
      role: 'agent',
      priority: 1,
    });
    await stack.db.db.insert(llmRegistry).values({
      agentId: id,
      name: 'overseer',
      provider: 'scripted',
      model: 'scripted-oversight',
      role: 'oversight',
      priority: 1,
    });
  }
}, 240_000);

afterAll(async () => {
  await client?.connection.close();
  await restarted?.stop();
  await stack?.stop();
  pgs?.remove();
  data?.remove();
});

/** A worker on `mindloop` with the real activities and the scripted model. */
const worker = (): WorkerSpec => ({
  taskQueue: 'mindloop',
  workflowBundle,
  activities: createActivities({ db: stack.db.db, llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: script } }),
});

const status = (h: WorkflowHandle) => h.query<AgentStatus>('status');

async function ticked(h: WorkflowHandle, beyond: number, timeoutMs: number): Promise<number> {
  let last: AgentStatus | undefined;
  try {
    return await waitFor(`${h.workflowId} past tick ${beyond}`, timeoutMs, async () => {
      const s = (last = await status(h));
      return s.tick > beyond && s.phase !== 'degraded' ? s.tick : undefined;
    });
  } catch (err) {
    const pending = (await h.describe()).raw.pendingActivities?.map((a) => ({
      type: a.activityType?.name,
      attempt: a.attempt,
      state: a.state,
      lastFailure: a.lastFailure?.message,
    }));
    throw new Error(
      `${(err as Error).message}; last status: ${JSON.stringify(last && { tick: last.tick, phase: last.phase, degraded: last.degraded, outage: last.outage, lastTickFailure: last.lastTickFailure })}; pending: ${JSON.stringify(pending)}`,
    );
  }
}

async function startAgents(client: Client): Promise<WorkflowHandle[]> {
  const handles: WorkflowHandle[] = [];
  for (const id of ['alpha', 'beta']) {
    handles.push(
      await client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
        taskQueue: 'mindloop',
        workflowId: `agent/${id}`,
        args: [{ agentId: id, settings: { delayMs: 300 }, reflexes: id === 'alpha' }],
        workflowIdConflictPolicy: 'USE_EXISTING',
      }),
    );
  }
  return handles;
}

/** Diary entries are exactly the applied diary.add commands: none missing, none twice. */
async function expectEachCommandOnce(agentId: string): Promise<number> {
  const db = stack.db.db;
  const entries = await db
    .select({ title: diaryEntries.title })
    .from(diaryEntries)
    .where(eq(diaryEntries.agentId, agentId));
  const applied = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(commandLog)
    .where(and(eq(commandLog.agentId, agentId), eq(commandLog.type, 'diary.add'), eq(commandLog.status, 'applied')));
  // The loop's own entries ("Entry n"); a campaign's entry is counted on its own.
  const titles = entries.map((e) => e.title).filter((t) => t.startsWith('Entry '));
  expect(new Set(titles).size).toBe(titles.length);
  expect(titles.length).toBe(applied[0]!.n);
  return titles.length;
}

async function rideOutDatabaseOutage(round: string, outageMs: number): Promise<void> {
  await withWorker(stack.temporal.connection, worker(), async () => {
    const [alpha, beta] = await startAgents(client);
    const before = { alpha: await ticked(alpha!, 0, 60_000), beta: await ticked(beta!, 0, 60_000) };

    // A campaign mid-phase: a task that takes a while, then one that writes to the database.
    const campaign = await client.workflow.start<typeof campaignWorkflow>('campaignWorkflow', {
      taskQueue: 'mindloop',
      workflowId: `campaign/outage-${round}`,
      args: [
        {
          campaignId: `outage-${round}`,
          agentId: 'alpha',
          title: `ride out outage ${round}`,
          phases: [
            {
              name: 'build',
              type: 'build',
              tasks: [
                { name: 'slow', kind: 'activity', type: 'wait', args: { ms: 2_000 } },
                {
                  name: 'entry',
                  kind: 'activity',
                  type: 'diary.add',
                  args: { title: `Campaign ${round}`, content: 'written by the campaign' },
                },
              ],
            },
            {
              name: 'report',
              type: 'report',
              tasks: [{ name: 'done', kind: 'activity', type: 'note', args: { text: `campaign ${round} done` } }],
            },
          ],
        },
      ],
    });
    // An escalation that needs a human.
    const escalation = await client.workflow.start<typeof escalationWorkflow>('escalationWorkflow', {
      taskQueue: 'mindloop',
      workflowId: `escalation/outage-${round}`,
      args: [
        { escalationId: `outage-${round}`, agentId: 'beta', task: 'May I reorganise the diary?', humanRequired: true },
      ],
    });
    await waitFor('the escalation to wait for a human', 60_000, async () =>
      (await escalation.query<EscalationStatus>('status')).phase === 'awaiting_human' ? true : undefined,
    ).catch(async (err: Error) => {
      const pending = (await escalation.describe()).raw.pendingActivities?.map((a) => ({
        type: a.activityType?.name,
        attempt: a.attempt,
        lastFailure: a.lastFailure?.message,
      }));
      throw new Error(
        `${err.message}; status ${JSON.stringify(await escalation.query<EscalationStatus>('status'))}; pending ${JSON.stringify(pending)}`,
      );
    });
    await waitFor('the campaign to be running its first task', 30_000, async () =>
      (await campaign.query<CampaignProgress>('progress')).task.index >= 1 ? true : undefined,
    );

    pgs.stop();
    const downAt = Date.now();
    // While the database is away: the loops show it, a note is queued, a human answers.
    const seen = await waitFor('alpha to show the degraded phase', 30_000, async () => {
      const s = await status(alpha!);
      return s.phase === 'degraded' && s.degraded ? s : undefined;
    });
    expect(seen.degraded!.lastError).toMatch(/ECONNREFUSED|connect|terminat/i);
    const noteText = `written during outage ${round}`;
    const queued = await alpha!.executeUpdate<AddNoteResult, [unknown]>('addNote', {
      args: [{ text: noteText, priority: 5 }],
    });
    expect(queued).toMatchObject({
      noteId: null,
      queued: true,
      message: expect.stringMatching(/database is unavailable: note queued/),
    });
    expect((await status(alpha!)).queuedNotes).toBe(1);
    const approval = escalation.executeUpdate('approve', {
      args: [{ by: 'operator', comment: `approved during outage ${round}` }],
    });
    approval.catch(() => undefined);
    const progress = await campaign.query<CampaignProgress>('progress');
    expect(progress.status).toBe('running');

    await sleep(Math.max(0, outageMs - (Date.now() - downAt)));
    pgs.start();

    // Back: every workflow goes on from where it was.
    await ticked(alpha!, before.alpha + 2, 120_000);
    await ticked(beta!, before.beta + 2, 120_000);
    const campaignResult = await campaign.result();
    expect(campaignResult).toMatchObject({ status: 'completed' });
    await approval;
    const decided = await escalation.result();
    expect(decided).toMatchObject({ outcome: 'approved', decidedBy: 'human' });
    for (const h of [alpha!, beta!]) expect((await h.describe()).status.name).toBe('RUNNING');

    const db = stack.db.db;
    // The queued note is stored, once, and the loop no longer holds it.
    const stored = await db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'alpha'), eq(notes.text, noteText)));
    expect(stored).toHaveLength(1);
    expect((await status(alpha!)).queuedNotes).toBe(0);
    // The recovery is in the process log.
    const recovered = await db
      .select()
      .from(processLog)
      .where(and(eq(processLog.agentId, 'alpha'), eq(processLog.kind, 'infrastructure')));
    expect(recovered.some((r) => /^recovered: .* waited \d+ s/.test(r.message ?? ''))).toBe(true);
    expect((await status(alpha!)).counters.degraded).toBeGreaterThanOrEqual(1);
    // Nothing applied twice: one campaign entry, one human decision, each diary.add once.
    expect(
      await db
        .select()
        .from(diaryEntries)
        .where(and(eq(diaryEntries.agentId, 'alpha'), eq(diaryEntries.title, `Campaign ${round}`))),
    ).toHaveLength(1);
    const decisions = await db
      .select()
      .from(decisionLog)
      .where(eq(decisionLog.escalationId, `outage-${round}`));
    expect(decisions.filter((d) => d.humanAnswer !== 'none')).toHaveLength(1);
    await expectEachCommandOnce('alpha');
    await expectEachCommandOnce('beta');
  });
}

describe('a database outage does not end a workflow', () => {
  it('rides out 30 s without Postgres: agents, a campaign and an escalation go on', async () => {
    await rideOutDatabaseOutage('30s', 30_000);
  }, 420_000);

  it('rides out 3 minutes without Postgres', async () => {
    await rideOutDatabaseOutage('3min', 180_000);
  }, 600_000);
});

describe('a Temporal dev server restart does not end a workflow', () => {
  it('the agents go on after the server is stopped and started again on the same store', async () => {
    await withWorker(stack.temporal.connection, worker(), async () => {
      const [alpha, beta] = await startAgents(client);
      const before = { alpha: await ticked(alpha!, 0, 60_000), beta: await ticked(beta!, 0, 60_000) };
      await stack.temporal.embedded!.stop();
      await sleep(5_000);
      const binary = resolveTool('temporal', { toolsDir: repoToolsDir, envOverrides: {} });
      restarted = await startDevServer({
        binary: binary!,
        dataDir: data.path,
        port: temporalPort,
        uiPort: 0,
        namespace: 'default',
        ui: false,
      });
      await ticked(alpha!, before.alpha + 2, 120_000);
      await ticked(beta!, before.beta + 2, 120_000);
      for (const h of [alpha!, beta!]) expect((await h.describe()).status.name).toBe('RUNNING');
    });
    await expectEachCommandOnce('alpha');
    await expectEachCommandOnce('beta');
  }, 300_000);
});
