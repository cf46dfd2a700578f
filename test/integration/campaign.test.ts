/**
 * Campaigns end to end on the real Temporal dev server and the real Postgres, with the real
 * campaign activities and task types:
 * - the worker process is SIGKILLed mid-phase (inside a running task); a new worker picks the
 *   campaign up and finishes it, and no task's effect is applied twice (rows counted);
 * - a task that fails (no LLM answers) becomes an `avoid_error` learning, completed phases
 *   `phase_success` ones (rows of the real learning store), and the campaign's earlier work is
 *   compensated in the database.
 */
import type { Client } from '@temporalio/client';
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { agents, campaignPhases, campaigns, diaryEntries, learnings, notes } from '../../db/schema/index.js';
import type { Stack } from '../../runtime/stack.js';
import type { CampaignProgress, campaignWorkflow } from '../../workflows/campaign.js';
import { repoToolsDir } from '../helpers/env.js';
import { withWorker } from '../helpers/harness.js';
import { sleep, startKillableStack, waitFor, type KillableStack } from '../helpers/worker-process.js';

let ks: KillableStack;
let stack: Stack;
let client: Client;

beforeAll(async () => {
  ks = await startKillableStack('campaign');
  ({ stack, client } = ks);
  await stack.db.db.insert(agents).values([
    { id: 'camper', name: 'Camper' },
    { id: 'failer', name: 'Failer' },
  ]);
}, 180_000);
afterAll(async () => {
  await ks?.stop();
});

const spawnWorker = () => ks.spawnWorker();

describe('a campaign survives its worker being killed mid-phase', () => {
  it('finishes on a new worker, each task applied once', async () => {
    const h = await client.workflow.start<typeof campaignWorkflow>('campaignWorkflow', {
      taskQueue: 'mindloop',
      workflowId: 'campaign/kill-me',
      args: [
        {
          campaignId: 'kill-me',
          agentId: 'camper',
          title: 'survive a crash',
          phases: [
            {
              name: 'gather',
              type: 'research',
              objectives: ['write down what we know'],
              tasks: [
                { name: 'note', kind: 'activity', type: 'note', args: { text: 'campaign started' } },
                { name: 'slow', kind: 'activity', type: 'wait', args: { ms: 4000 } },
                {
                  name: 'diary',
                  kind: 'activity',
                  type: 'diary.add',
                  args: { title: 'Findings', content: 'Everything we gathered.' },
                },
              ],
              checkpoint: { criteria: { expect: [{ task: 'slow', path: 'waitedMs', exists: true }] } },
            },
            {
              name: 'report',
              type: 'report',
              tasks: [{ name: 'final', kind: 'activity', type: 'note', args: { text: 'campaign done' } }],
            },
          ],
        },
      ],
    });
    const first = spawnWorker();
    let killedAt: CampaignProgress;
    try {
      // Kill the worker while the `wait` task of phase 1 is running.
      killedAt = await waitFor('the slow task', 90_000, async () => {
        const p = await h.query<CampaignProgress>('progress');
        return p.task.name === 'slow' ? p : undefined;
      });
      await sleep(1000);
    } finally {
      first.kill('SIGKILL');
      await new Promise((r) =>
        first.exitCode !== null || first.signalCode !== null ? r(null) : first.once('exit', r),
      );
    }
    expect(killedAt).toMatchObject({
      status: 'running',
      phase: { index: 1, total: 2, name: 'gather' },
      task: { index: 2, total: 3 },
    });
    // While no worker runs, the campaign is still there, mid-phase.
    expect((await stack.db.db.select().from(campaigns).where(eq(campaigns.id, 'kill-me')))[0]).toMatchObject({
      status: 'running',
      currentPhase: 1,
    });

    const second = spawnWorker();
    try {
      const result = await h.result();
      expect(result.status).toBe('completed');
      expect(result.phases.map((p) => p.verdict.pass)).toEqual([true, true]);
    } finally {
      second.kill('SIGKILL');
    }
    const db = stack.db.db;
    expect((await db.select().from(campaigns).where(eq(campaigns.id, 'kill-me')))[0]).toMatchObject({
      status: 'completed',
      currentPhase: 2,
      error: null,
    });
    const phases = await db
      .select()
      .from(campaignPhases)
      .where(eq(campaignPhases.campaignId, 'kill-me'))
      .orderBy(asc(campaignPhases.ordinal));
    expect(phases.map((p) => [p.name, p.status])).toEqual([
      ['gather', 'completed'],
      ['report', 'completed'],
    ]);
    expect(phases[0]!.finishedAt).toBeInstanceOf(Date);
    // Exactly once each, despite the kill and the retried `wait` task.
    const campNotes = await db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'camper'), eq(notes.sender, 'campaign/kill-me')))
      .orderBy(asc(notes.id));
    expect(campNotes.map((n) => n.text)).toEqual(['campaign started', 'campaign done']);
    expect(await db.select().from(diaryEntries).where(eq(diaryEntries.agentId, 'camper'))).toHaveLength(1);
    // The worker process promoted into the learning store: one phase_success per phase type.
    const learned = await db
      .select()
      .from(learnings)
      .where(eq(learnings.sourceCampaign, 'kill-me'))
      .orderBy(asc(learnings.id));
    expect(learned.map((l) => [l.factPredicate, l.factArgs, l.shardType])).toEqual([
      ['phase_success', { phase_type: 'research' }, 'campaign'],
      ['phase_success', { phase_type: 'report' }, 'campaign'],
    ]);
  }, 300_000);
});

describe('failures become learnings; started work is compensated', () => {
  it('records avoid_error for the failed task, phase_success for the phase before, and undoes the earlier tasks', async () => {
    const spec = {
      taskQueue: 'campaign-it',
      workflowBundle: { codePath: ks.bundlePath },
      activities: createActivities({
        db: stack.db.db,
        // `failer` has no LLM rows at all: llm.ask fails for real in the router.
        llm: { env: {}, toolsDir: repoToolsDir },
        // No sink injected: learnings go to the real learning store (activities/learnings.ts).
      }),
    };
    const err = await withWorker(stack.temporal.connection, spec, (taskQueue) =>
      client.workflow
        .execute<typeof campaignWorkflow>('campaignWorkflow', {
          taskQueue,
          workflowId: 'campaign/doomed',
          args: [
            {
              campaignId: 'doomed',
              agentId: 'failer',
              title: 'ask a model that is not there',
              shardType: 'research',
              phases: [
                {
                  name: 'prepare',
                  type: 'prepare',
                  tasks: [
                    { name: 'note', kind: 'activity', type: 'note', args: { text: 'preparing' } },
                    {
                      name: 'diary',
                      kind: 'activity',
                      type: 'diary.add',
                      args: { title: 'Plan', content: 'Ask the model.' },
                    },
                  ],
                },
                {
                  name: 'ask',
                  type: 'inquiry',
                  tasks: [{ name: 'q', kind: 'activity', type: 'llm.ask', args: { prompt: 'What is 2 + 2?' } }],
                },
              ],
            },
          ],
        })
        .then(
          () => null,
          (e: unknown) => e as Error,
        ),
    );
    expect(err?.name).toBe('WorkflowFailedError');
    expect((err as Error & { cause?: Error }).cause?.message).toMatch(
      /campaign doomed failed: phase 'ask' checkpoint failed: 0 of 1 tasks succeeded/,
    );

    const db = stack.db.db;
    const learned = await db
      .select()
      .from(learnings)
      .where(eq(learnings.sourceCampaign, 'doomed'))
      .orderBy(asc(learnings.id));
    expect(learned.map((l) => [l.factPredicate, l.shardType, l.agentId, l.confidence])).toEqual([
      ['phase_success', 'research', 'failer', 1],
      ['avoid_error', 'research', 'failer', 1],
    ]);
    expect(learned[0]!.factArgs).toEqual({ phase_type: 'prepare' });
    expect(learned[1]!.factArgs).toEqual({ task_type: 'llm.ask', error: expect.stringMatching(/^llm\.ask: /) });

    expect((await db.select().from(campaigns).where(eq(campaigns.id, 'doomed')))[0]).toMatchObject({
      status: 'failed',
      error: expect.stringContaining("phase 'ask'"),
    });
    const phases = await db
      .select()
      .from(campaignPhases)
      .where(eq(campaignPhases.campaignId, 'doomed'))
      .orderBy(asc(campaignPhases.ordinal));
    expect(phases.map((p) => p.status)).toEqual(['compensated', 'compensated']);
    // Compensation: the note is hidden, the diary entry archived.
    const [note] = await db.select().from(notes).where(eq(notes.agentId, 'failer'));
    expect(note).toMatchObject({ text: 'preparing', hidden: true });
    const [entry] = await db.select().from(diaryEntries).where(eq(diaryEntries.agentId, 'failer'));
    expect(entry!.archivedAt).toBeInstanceOf(Date);
  }, 180_000);
});
