/**
 * An agent file through the agent loop (time-skipping Temporal, the real activities on Postgres,
 * a scripted model from the model catalogue):
 * - the document itself as the workflow's input, as the Temporal UI's start form sends it, is
 *   checked and written before the first tick (name, goals, the model, the pace in force);
 * - a bad document as the input fails the start at once, naming the field, and writes nothing;
 * - the `applyAgentFile` update: a dry run answers the diff and writes nothing; a change is
 *   written, recorded with who, and its pace put in force in the running loop; the same file
 *   again changes nothing; a file for another agent is refused before it enters the history.
 */
import { WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyAgentFileTo } from '../../activities/agent-file.js';
import { createActivities } from '../../activities/index.js';
import { workflowIds } from '../../core/ids.js';
import { agentFiles, agents, goals, llmRegistry, models } from '../../db/schema/index.js';
import { applyAgentFileUpdate, statusQuery, type agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { startLoop, untilStatus, withWorker, type WorkerSpec } from '../helpers/harness.js';
import { thinkScript } from '../helpers/scripted.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

const suite = timeSkippingSuite();
let handle: MigratedDatabase;

beforeAll(async () => {
  handle = await migratedDatabase('mindloop_agent_file_loop');
  // A model of the catalogue that answers from a script: what `mindloop models add` stores.
  await handle.db
    .insert(models)
    .values({ name: 'scripted-test', provider: 'scripted', model: 'scripted', role: 'agent' });
}, 120_000);
afterAll(async () => {
  await handle?.dispose();
});

const worker = (taskQueue: string): WorkerSpec => ({
  taskQueue,
  workflowBundle: suite.bundle,
  activities: createActivities({
    db: handle.db,
    llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: thinkScript((_m, i) => `Thought ${i + 1}: steady.`) },
  }),
});

/** A document as a person writes it (and as the Temporal UI's start form takes it, in JSON). */
const documentOf = (id: string, over: Record<string, unknown> = {}) => ({
  id,
  name: 'Scout',
  systemPrompt: { short: 'You are Scout. Look around, write down what you see.' },
  goals: [{ title: 'Map the garden', priority: 2 }],
  models: { agent: 'scripted-test' },
  pace: { delayMs: 5000 },
  ...over,
});

/** Start the loop the way the Temporal UI does: the workflow type by name, the document as its one argument. */
function startWithDocument(taskQueue: string, document: unknown) {
  const id = (document as { id: string }).id;
  return suite.env.client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
    taskQueue,
    workflowId: workflowIds.agent(id),
    args: [document as never],
  });
}

describe('an agent file as the input of agentLoopWorkflow', () => {
  it('is applied before the first tick: the agent, its goals and model, its pace in force, the apply recorded', async () => {
    await withWorker(suite.env, worker('file-start'), async (q) => {
      const h = await startWithDocument(q, documentOf('scout'));
      const status = await untilStatus(h, (s) => s.tick >= 1, 'the first tick');
      expect(status.settings.delayMs).toBe(5000);
      expect(status.llm).toBe('scripted:scripted');
      const [agent] = await handle.db.select().from(agents).where(eq(agents.id, 'scout'));
      expect(agent!.name).toBe('Scout');
      expect((await handle.db.select().from(goals).where(eq(goals.agentId, 'scout'))).map((g) => g.title)).toEqual([
        'Map the garden',
      ]);
      expect(
        (await handle.db.select().from(llmRegistry).where(eq(llmRegistry.agentId, 'scout'))).map((r) => [
          r.role,
          r.modelName,
        ]),
      ).toEqual([['agent', 'scripted-test']]);
      const applies = await handle.db.select().from(agentFiles).where(eq(agentFiles.agentId, 'scout'));
      expect(applies.map((a) => a.appliedBy)).toEqual(['temporal-ui']);
      await h.terminate('test over');
    });
  });

  it('a bad document fails the start at once, naming the field, and writes nothing', async () => {
    await withWorker(suite.env, worker('file-bad'), async (q) => {
      const h = await startWithDocument(q, documentOf('baddie', { goals: [{ titel: 'typo' }] }));
      const err = await h.result().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WorkflowFailedError);
      const message = String((err as WorkflowFailedError).cause?.message);
      expect(message).toMatch(/^agentLoopWorkflow: invalid input — /);
      expect(message).toContain('goals[0]');
      expect(message).toContain('title');
      expect(await handle.db.select().from(agents).where(eq(agents.id, 'baddie'))).toEqual([]);
      expect(await handle.db.select().from(agentFiles).where(eq(agentFiles.agentId, 'baddie'))).toEqual([]);
    });
  });
});

describe('an agent written from its file, then started (the way `mindloop apply` creates one)', () => {
  it("starts with the file's pace and idle mode in force, read from what the file wrote", async () => {
    await applyAgentFileTo(handle.db, {
      agentId: 'sleeper',
      document: documentOf('sleeper', { pace: { delayMs: 7000 }, idle: { on: true, wakeOn: ['note'] } }),
      appliedBy: 'tester',
    });
    await withWorker(suite.env, worker('file-written'), async (q) => {
      const h = await startLoop(suite.env.client, q, { agentId: 'sleeper' });
      const status = await untilStatus(h, (s) => s.tick >= 1 && s.phase === 'idle', 'idle after the first tick');
      expect(status.settings.delayMs).toBe(7000);
      expect(status.settings.idle).toMatchObject({ on: true, wakeOn: ['note'] });
      await h.terminate('test over');
    });
  });
});

describe('the applyAgentFile update', () => {
  it('dry run, change, no-op, and a file for another agent refused', async () => {
    await withWorker(suite.env, worker('file-update'), async (q) => {
      const h = await startWithDocument(q, documentOf('rover'));
      await untilStatus(h, (s) => s.tick >= 1, 'the first tick');
      const changed = documentOf('rover', {
        pace: { delayMs: 60_000 },
        goals: [
          { title: 'Map the garden', priority: 2 },
          { title: 'Count the trees', priority: 3 },
        ],
      });

      const dry = await h.executeUpdate(applyAgentFileUpdate, {
        args: [{ document: changed, appliedBy: 'tester', dryRun: true }],
      });
      expect(dry).toMatchObject({ changed: true, applied: false, fileId: null });
      expect(dry.text).toContain('Count the trees');
      expect((await h.query(statusQuery)).settings.delayMs).toBe(5000);
      expect(await handle.db.select().from(goals).where(eq(goals.agentId, 'rover'))).toHaveLength(1);

      const applied = await h.executeUpdate(applyAgentFileUpdate, {
        args: [{ document: changed, appliedBy: 'tester' }],
      });
      expect(applied).toMatchObject({ changed: true, applied: true });
      expect((await h.query(statusQuery)).settings.delayMs).toBe(60_000);
      expect(
        (await handle.db.select().from(goals).where(eq(goals.agentId, 'rover'))).map((g) => g.title).sort(),
      ).toEqual(['Count the trees', 'Map the garden']);
      const applies = await handle.db.select().from(agentFiles).where(eq(agentFiles.agentId, 'rover'));
      expect(applies.map((a) => a.appliedBy)).toEqual(['temporal-ui', 'tester']);

      const again = await h.executeUpdate(applyAgentFileUpdate, { args: [{ document: changed, appliedBy: 'tester' }] });
      expect(again).toMatchObject({ changed: false, applied: false });
      expect(await handle.db.select().from(agentFiles).where(eq(agentFiles.agentId, 'rover'))).toHaveLength(2);

      const foreign = await h
        .executeUpdate(applyAgentFileUpdate, { args: [{ document: documentOf('scout') }] })
        .catch((e: unknown) => e);
      expect(foreign).toBeInstanceOf(WorkflowUpdateFailedError);
      expect(String((foreign as WorkflowUpdateFailedError).cause?.message)).toContain(
        "the file is for agent 'scout', this is 'rover'",
      );
      await h.terminate('test over');
    });
  });
});
