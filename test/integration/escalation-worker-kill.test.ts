/**
 * An escalation survives its worker being killed while it waits for a human: the real
 * Temporal dev server, the real Postgres, the worker as a child process (`workers/main.ts
 * --queue mindloop`) SIGKILLed in `awaiting_human`, a new one started; the human's approval
 * then settles it. The oversight (a scripted `oversight` row) is asked exactly once.
 */
import type { Client } from '@temporalio/client';
import { and, eq, like } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createToolActivities } from '../../activities/tools.js';
import { createDb, type DbHandle } from '../../db/client.js';
import { agents, decisionLog, escalations, llmCalls, llmRegistry, notes } from '../../db/schema/index.js';
import { approveUpdate, escalationStatusQuery, type escalationWorkflow } from '../../workflows/escalation.js';
import { untilQuery } from '../helpers/harness.js';
import { startKillableStack, type KillableStack } from '../helpers/worker-process.js';

let ks: KillableStack;
let client: Client;
let handle: DbHandle;

beforeAll(async () => {
  ks = await startKillableStack('esc-kill');
  ({ client } = ks);
  handle = createDb(ks.dbUrl);
}, 180_000);
afterAll(async () => {
  await handle?.close();
  await ks?.stop();
});

const spawnWorker = () => ks.spawnWorker();

describe('an escalation waiting for a human survives a worker kill', () => {
  it('SIGKILL in awaiting_human, restart, then the approval settles it; oversight asked once', async () => {
    const db = handle.db;
    await db.insert(agents).values({ id: 'kiki', name: 'kiki' });
    const reply = JSON.stringify({
      verdict: 'approve',
      solution: 'restart the service',
      teaching_moment: 'check the logs first',
      recommended_tools: [],
      needs_human: false,
    });
    await db.insert(llmRegistry).values({
      agentId: 'kiki',
      name: 'overseer',
      provider: 'scripted',
      model: 'scripted-oversight',
      role: 'oversight',
      priority: 1,
      params: { replies: [reply] },
    });
    await createToolActivities({ db }).ensureBuiltinTools();

    let worker = spawnWorker();
    try {
      const h = await client.workflow.start<typeof escalationWorkflow>('escalationWorkflow', {
        taskQueue: 'mindloop',
        workflowId: 'escalation/kill-1',
        args: [
          {
            escalationId: 'kill-1',
            agentId: 'kiki',
            task: 'restart the production database',
            humanRequired: true,
            deadlineMs: 3_600_000,
          },
        ],
      });
      await untilQuery(h, escalationStatusQuery, (s) => s.phase === 'awaiting_human', 'awaiting_human', 90_000);

      const exited = new Promise((r) => worker.once('exit', r));
      worker.kill('SIGKILL');
      await exited;
      worker = spawnWorker();
      // The new worker rebuilds the state by replay: still waiting, the oversight's answer known.
      const s = await untilQuery(h, escalationStatusQuery, () => true, 'the state after restart', 90_000);
      expect(s).toMatchObject({
        phase: 'awaiting_human',
        humanRequired: true,
        oversight: { verdict: 'approve', route: 'general' },
        human: null,
        decision: null,
      });

      const after = await h.executeUpdate(approveUpdate, { args: [{ by: 'dafit', comment: 'ok, during the window' }] });
      expect(after.human).toEqual({ verdict: 'approve', by: 'dafit' });
      expect(await h.result()).toMatchObject({ outcome: 'approved', decidedBy: 'human' });

      const [esc] = await db.select().from(escalations).where(eq(escalations.id, 'kill-1'));
      expect(esc).toMatchObject({ status: 'resolved', decidedBy: 'human', solution: 'restart the service' });
      const [d] = await db.select().from(decisionLog).where(eq(decisionLog.escalationId, 'kill-1'));
      expect(d).toMatchObject({
        oversightAnswer: 'approve',
        humanAnswer: 'approve',
        humanComment: 'ok, during the window',
        outcome: 'executed',
      });
      const calls = await db
        .select()
        .from(llmCalls)
        .where(and(eq(llmCalls.agentId, 'kiki'), like(llmCalls.purpose, 'oversight:%')));
      expect(calls).toHaveLength(1);
      expect(await db.select().from(notes).where(eq(notes.agentId, 'kiki'))).toHaveLength(1);
    } finally {
      if (worker.exitCode === null) worker.kill('SIGKILL');
    }
  }, 300_000);
});
