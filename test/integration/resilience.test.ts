/**
 * The agent loop under failure, on the real Temporal dev server and the real Postgres:
 * - crash: the worker process is SIGKILLed mid-tick 10 times; after each restart the loop
 *   resumes, no note is lost and no command is applied twice (rows counted);
 * - Core Outage: the agent's only LLM is an OpenAI-compatible endpoint that goes down; the
 *   agent keeps taking notes and logging, and resumes by itself when the endpoint is back.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import {
  agents,
  commandLog,
  diaryEntries,
  llmCalls,
  llmRecentResponses,
  llmRegistry,
  notes,
  processLog,
} from '../../db/schema/index.js';
import type { Stack } from '../../runtime/stack.js';
import type { AgentStatus } from '../../workflows/agent-loop/index.js';
import { startFakeOpenAiServer, type FakeOpenAiServer } from '../helpers/fake-openai-server.js';
import { repoToolsDir } from '../helpers/env.js';
import { startLoop, untilStatus, withWorker } from '../helpers/harness.js';
import { sleep, startKillableStack, waitFor, type KillableStack } from '../helpers/worker-process.js';

let ks: KillableStack;
let stack: Stack;
let client: Client;

beforeAll(async () => {
  ks = await startKillableStack('resilience');
  ({ stack, client } = ks);
}, 180_000);
afterAll(async () => {
  await ks?.stop();
});

const spawnWorker = () => ks.spawnWorker();

const status = (h: WorkflowHandle) => h.query<AgentStatus>('status');

describe('the agent loop survives its worker being killed', () => {
  it('resumes after 10 SIGKILLs mid-tick: no note lost, no command applied twice', async () => {
    // Five different replies in turn, each with one diary.add: a tick applied twice would show
    // as one diary entry too many.
    const replies = ['North', 'East', 'South', 'West', 'Up'].map(
      (w) =>
        `Thinking about the ${w.toLowerCase()}.\n${renderCommandBlock([{ cmdId: 'd1', type: 'diary.add', args: { title: `Facing ${w}`, content: `I looked ${w.toLowerCase()}.` } }])}`,
    );
    await stack.db.db.insert(agents).values({ id: 'crashy', name: 'Crashy' });
    // 400 ms of "thinking" per tick, so that a kill lands inside the think activity.
    await stack.db.db.insert(llmRegistry).values({
      agentId: 'crashy',
      name: 'slow-script',
      provider: 'scripted',
      model: 'scripted-crashy',
      role: 'agent',
      priority: 1,
      params: { replies, delayMs: 400 },
    });

    const h = await startLoop(client, 'mindloop', { agentId: 'crashy', settings: { delayMs: 100 } });
    const sentNotes: number[] = [];
    const killedIn: string[] = [];
    for (let round = 0; round < 10; round++) {
      const worker = spawnWorker();
      try {
        const before = (await untilStatus(h, () => true, 'a query answer', 60_000)).tick;
        await untilStatus(h, (s) => s.tick > before, `a tick after ${before}`, 60_000);
        const { noteId } = await h.executeUpdate<{ noteId: number }, [unknown]>('addNote', {
          args: [{ text: `note ${round}`, priority: 5 }],
        });
        sentNotes.push(noteId);
        // Mid-tick: inside the think activity (the model takes 400 ms), at a varying point.
        await untilStatus(h, (s) => s.phase === 'thinking', 'the thinking phase', 30_000);
        await sleep(round * 35);
        killedIn.push((await status(h)).phase);
      } finally {
        worker.kill('SIGKILL');
        await new Promise((r) =>
          worker.exitCode !== null || worker.signalCode !== null ? r(null) : worker.once('exit', r),
        );
      }
    }
    console.log(`killed in phases: ${killedIn.join(', ')}`);
    expect(killedIn.filter((p) => p === 'thinking' || p === 'executing').length).toBeGreaterThanOrEqual(7);

    // The last restart: let it tick on until every note has been read, then stop it.
    const worker = spawnWorker();
    try {
      await waitFor('all notes read', 120_000, async () => {
        const unread = await stack.db.db
          .select()
          .from(notes)
          .where(and(eq(notes.agentId, 'crashy'), eq(notes.direction, 'in')));
        return unread.length === 10 && unread.every((n) => n.readAt) ? true : undefined;
      });
      await h.signal('stop');
      const result = await h.result();
      expect(result.reason).toBe('stopped');

      const db = stack.db.db;
      const ticks = result.ticks;
      const responses = await db
        .select({ tick: llmRecentResponses.tick })
        .from(llmRecentResponses)
        .where(eq(llmRecentResponses.agentId, 'crashy'))
        .orderBy(asc(llmRecentResponses.tick));
      expect(responses.map((r) => r.tick)).toEqual(Array.from({ length: ticks }, (_, i) => i + 1));

      const applied = await db
        .select()
        .from(commandLog)
        .where(and(eq(commandLog.agentId, 'crashy'), eq(commandLog.status, 'applied')));
      expect(applied).toHaveLength(ticks);
      expect(new Set(applied.map((c) => c.tick)).size).toBe(ticks);
      expect(await db.select().from(diaryEntries).where(eq(diaryEntries.agentId, 'crashy'))).toHaveLength(ticks);

      // One paid think per tick: a retried think found the first attempt's reply. The reflexes'
      // mini-prompts (emotion, novelty) are paid at most once per tick and purpose as well.
      const paid = await db
        .select()
        .from(llmCalls)
        .where(and(eq(llmCalls.agentId, 'crashy'), eq(llmCalls.ok, true)));
      const thinks = paid.filter((c) => c.purpose === 'think');
      expect(new Set(thinks.map((c) => c.tick)).size).toBe(ticks);
      expect(thinks).toHaveLength(ticks);
      expect(new Set(paid.map((c) => `${c.tick}:${c.purpose}`)).size).toBe(paid.length);

      const inbox = await db
        .select()
        .from(notes)
        .where(and(eq(notes.agentId, 'crashy'), eq(notes.direction, 'in')))
        .orderBy(asc(notes.id));
      expect(inbox.map((n) => n.id)).toEqual(sentNotes);
      expect(inbox.map((n) => n.text)).toEqual(Array.from({ length: 10 }, (_, i) => `note ${i}`));
    } finally {
      worker.kill('SIGKILL');
    }
  }, 600_000);
});

describe('Core Outage against a real endpoint', () => {
  let llm: FakeOpenAiServer;
  afterAll(async () => {
    await llm?.close();
  });

  it('keeps taking notes while the endpoint is down and resumes by itself when it is back', async () => {
    llm = await startFakeOpenAiServer({ fixtures: ['openai-think'] });
    await stack.db.db.insert(agents).values({ id: 'outage', name: 'Outage' });
    await stack.db.db.insert(llmRegistry).values({
      agentId: 'outage',
      name: 'fake-openai',
      provider: 'openai',
      model: 'gpt-fake',
      role: 'agent',
      priority: 1,
      baseUrl: llm.baseUrl,
      params: { timeoutMs: 2000 },
    });
    const spec = {
      taskQueue: 'outage-it',
      workflowBundle: { codePath: ks.bundlePath },
      activities: createActivities({ db: stack.db.db, llm: { env: {}, toolsDir: repoToolsDir } }),
    };
    await withWorker(stack.temporal.connection, spec, async (taskQueue) => {
      const h = await startLoop(client, taskQueue, { agentId: 'outage', settings: { delayMs: 200 } });
      await untilStatus(h, (s) => s.tick >= 1, 'first tick', 30_000);

      await llm.down('refused');
      const inOutage = await untilStatus(h, (s) => s.operatingMode === 'core_outage', 'core outage', 30_000);
      expect(inOutage.phase).toBe('outage');
      const tickAtOutage = inOutage.tick;
      const { noteId } = await h.executeUpdate<{ noteId: number }, [unknown]>('addNote', {
        args: [{ text: 'are you still there?' }],
      });
      expect(noteId).toBeGreaterThan(0);
      await sleep(3000);
      expect((await status(h)).tick).toBe(tickAtOutage);

      await llm.up();
      const recovered = await untilStatus(
        h,
        (s) => s.operatingMode === 'normal' && s.tick > tickAtOutage,
        'recovery',
        60_000,
      );
      expect(recovered.counters.outages).toBe(1);
      expect(recovered.llm).toBe('openai:gpt-fake');
      await waitFor('the note read', 30_000, async () => {
        const [n] = await stack.db.db.select().from(notes).where(eq(notes.id, noteId));
        return n?.readAt ? true : undefined;
      });
      await h.signal('stop');
      await h.result();
    });

    const log = await stack.db.db
      .select()
      .from(processLog)
      .where(and(eq(processLog.agentId, 'outage'), eq(processLog.processId, 'core-outage')))
      .orderBy(asc(processLog.id));
    expect(log.map((l) => l.status)).toEqual(['offline', 'close']);
    expect(log[1]!.message).toMatch(/recovered: openai:gpt-fake/);
    const failed = await stack.db.db
      .select()
      .from(llmCalls)
      .where(and(eq(llmCalls.agentId, 'outage'), eq(llmCalls.ok, false)));
    expect(failed.length).toBeGreaterThan(0);
  }, 180_000);
});
