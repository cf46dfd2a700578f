/**
 * The agent loop end to end: Temporal dev server, real Postgres on :5432, the real activities,
 * and the scripted model (the deterministic test double) as the agent's LLM. Notes reach the
 * context, commands change the agent's memory, everything lands in Postgres.
 */
import { Client, Connection } from '@temporalio/client';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ChatMessage } from '../../activities/llm/index.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import {
  agents,
  commandLog,
  diaryEntries,
  goals,
  llmCalls,
  llmRecentResponses,
  llmRegistry,
  notes,
} from '../../db/schema/index.js';
import { startStack, type Stack } from '../../runtime/stack.js';
import { bundleWorkflows } from '../../workers/queues.js';
import type { AgentStatus } from '../../workflows/agent-loop/index.js';
import { freePort, freshPostgresDatabase, repoToolsDir, tempDir, testEnv } from '../helpers/env.js';
import { startLoop, untilStatus, withWorker } from '../helpers/harness.js';
import { thinkScript } from '../helpers/scripted.js';

const data = tempDir('loop');
let stack: Stack;
let client: Client;
let bundle: WorkflowBundleWithSourceMap;
let dropDb: () => Promise<void>;
const prompts: ChatMessage[][] = [];

/** What the scripted agent says at each tick (by call order). */
function script(messages: ChatMessage[], callIndex: number): string {
  prompts.push(messages);
  const user = messages.find((m) => m.role === 'user')?.content ?? '';
  if (callIndex === 0) {
    return `I am starting out. I should record this and set a goal.\nConfidence: 0.9\n${renderCommandBlock([
      { cmdId: 'd1', type: 'diary.add', args: { title: 'Day one', content: 'I woke up in a loop.', tags: ['origin'] } },
      { cmdId: 'g1', type: 'goals.add', args: { title: 'Understand my user', priority: 3 } },
      { cmdId: 'x1', type: 'teleport.now', args: {} },
    ])}`;
  }
  if (user.includes('please say hi back')) {
    return `My user wrote to me; I answer.\n${renderCommandBlock([{ cmdId: 'n1', type: 'notes.send', args: { text: 'Hi! I read your note.' } }])}`;
  }
  return `Tick ${callIndex + 1}: thinking quietly.`;
}

beforeAll(async () => {
  const fresh = await freshPostgresDatabase('mindloop_loop');
  dropDb = fresh.drop;
  stack = await startStack({
    env: testEnv({ MINDLOOP_DATA_DIR: data.path, TEMPORAL_PORT: await freePort(), DATABASE_URL: fresh.url }),
    ui: false,
  });
  await stack.db.db.insert(agents).values({ id: 'scribe', name: 'Scribe' });
  await stack.db.db.insert(llmRegistry).values({
    agentId: 'scribe',
    name: 'script',
    provider: 'scripted',
    model: 'scripted-scribe',
    role: 'agent',
    priority: 1,
  });
  bundle = await bundleWorkflows();
  client = new Client({ connection: await Connection.connect(stack.temporal.connection) });
});
afterAll(async () => {
  await client?.connection.close();
  await stack?.stop();
  await dropDb?.();
  data.remove();
});

describe('agent loop on real Temporal + Postgres with the scripted model', () => {
  it('thinks, applies commands, hears a note and answers it', async () => {
    const spec = {
      taskQueue: 'loop-it',
      workflowBundle: bundle,
      activities: createActivities({
        db: stack.db.db,
        llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: thinkScript(script) },
      }),
    };
    await withWorker(stack.temporal.connection, spec, async (taskQueue) => {
      const h = await startLoop(client, taskQueue, {
        agentId: 'scribe',
        maxTicks: 4,
        settings: { idle: { on: true, wakeOn: ['note', 'timeout'], timeoutMs: 2000 } },
      });
      await untilStatus(h, (s) => s.tick >= 1, 'the first tick', 30_000);
      const { noteId } = await h.executeUpdate<{ noteId: number }, [unknown]>('addNote', {
        args: [{ text: 'Hello scribe, please say hi back', priority: 5 }],
      });
      expect(noteId).toBeGreaterThan(0);
      expect(await h.result()).toEqual({ agentId: 'scribe', ticks: 4, reason: 'max_ticks' });
      const status = await h.query<AgentStatus>('status');
      expect(status.llm).toBe('scripted:scripted-scribe');
      expect(status.counters.commandsApplied).toBe(3);
      expect(status.counters.commandsRejected).toBe(1);
    });

    const db = stack.db.db;
    const responses = await db.select().from(llmRecentResponses).where(eq(llmRecentResponses.agentId, 'scribe'));
    expect(responses.map((r) => r.tick).sort()).toEqual([1, 2, 3, 4]);
    expect(responses.find((r) => r.tick === 1)?.confidence).toBeCloseTo(0.9);

    expect(
      (await db.select().from(diaryEntries).where(eq(diaryEntries.agentId, 'scribe'))).map((d) => d.title),
    ).toEqual(['Day one']);
    expect((await db.select().from(goals).where(eq(goals.agentId, 'scribe'))).map((g) => g.title)).toEqual([
      'Understand my user',
    ]);

    const log = await db.select().from(commandLog).where(eq(commandLog.agentId, 'scribe'));
    const unknown = log.find((c) => c.cmdId === 'x1');
    expect(unknown?.status).toBe('unknown');
    expect(unknown?.reason).toMatch(/teleport/);

    // The note reached the context of the next tick, was marked read, and was answered.
    const incoming = await db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'scribe'), eq(notes.direction, 'in')));
    expect(incoming).toHaveLength(1);
    expect(incoming[0]!.readAt).not.toBeNull();
    const heard = prompts.findIndex((p) => p.some((m) => m.content.includes('please say hi back')));
    expect(heard).toBeGreaterThan(0);
    expect(incoming[0]!.tickSeen).toBe(heard + 1);
    const outgoing = await db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'scribe'), eq(notes.direction, 'out')));
    expect(outgoing.map((n) => n.text)).toEqual(['Hi! I read your note.']);

    // Context 5 of tick 2 shows the results of tick 1's commands, including the unknown one.
    expect(prompts[1]!.find((m) => m.role === 'user')?.content).toMatch(/x1 teleport\.now \[unknown\]/);

    const calls = await db.select().from(llmCalls).where(eq(llmCalls.agentId, 'scribe'));
    // One think per tick; the reflexes ask the agent's own model for emotions every tick and
    // for a novelty comparison once there is a previous reply.
    const ok = calls.filter((c) => c.ok);
    expect(
      ok
        .filter((c) => c.purpose === 'think')
        .map((c) => c.tick)
        .sort(),
    ).toEqual([1, 2, 3, 4]);
    expect(ok.filter((c) => c.purpose === 'emotion')).toHaveLength(4);
    expect(
      ok
        .filter((c) => c.purpose === 'novelty')
        .map((c) => c.tick)
        .sort(),
    ).toEqual([2, 3, 4]);
    expect(calls.every((c) => c.promptTokens > 0)).toBe(true);
  });
});
