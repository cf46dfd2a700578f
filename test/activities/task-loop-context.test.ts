/**
 * Each loop's context shows its own recent replies. A task loop counts its own ticks and records
 * its replies in the process log (`task/<id>`, kind `task_loop`); the main loop records its own
 * in llm_recent_responses. A task loop's context shows the replies of its own earlier ticks, not
 * the main loop's nor another task loop's; the main loop's shows the main loop's only. The
 * snapshots of the two loops at the same tick number are held apart. Against a real Postgres.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ThinkInput } from '../../activities/tick/context.js';
import type { ChatMessage } from '../../activities/llm/types.js';
import { createTickSnapshots } from '../../activities/tick/snapshot.js';
import { agents, llmRecentResponses, llmRegistry, processLog, tasks } from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { thinkInput, thinkScript } from '../helpers/scripted.js';

let handle: MigratedDatabase;

beforeAll(async () => {
  handle = await migratedDatabase('taskctx');
});
afterAll(async () => {
  await handle?.dispose();
});

/** An agent with a scripted `agent` row and two open tasks; returns the tasks' ids. */
async function newAgent(id: string): Promise<[number, number]> {
  await handle.db.insert(agents).values({ id, name: id });
  await handle.db
    .insert(llmRegistry)
    .values({ agentId: id, name: 'mind', provider: 'scripted', model: 'script', role: 'agent', priority: 1 });
  const rows = await handle.db
    .insert(tasks)
    .values([
      { agentId: id, title: 'first task' },
      { agentId: id, title: 'second task' },
    ])
    .returning({ id: tasks.id });
  return [rows[0]!.id, rows[1]!.id];
}

/** A task loop's recorded reply, as think records it. */
const taskReply = (agentId: string, taskId: number, tick: number, content: string) => ({
  agentId,
  processId: `task/${taskId}`,
  kind: 'task_loop',
  name: `task ${taskId} tick ${tick}`,
  status: 'ok' as const,
  message: content,
  payload: { tick, content, model: 'scripted:script' },
  tick,
});

/** A task loop's think input, as the task loop sends it. */
function taskThinkInput(agentId: string, taskId: number, tick: number): ThinkInput {
  return {
    ...thinkInput(agentId, tick),
    workflowId: `agent/${agentId}/task/${taskId}`,
    mode: 'task',
    taskId,
  };
}

/** The text of a think's prompt. */
const promptText = (messages: ChatMessage[]) => messages.map((m) => m.content).join('\n');

/** The replies context 3 shows ("your recent thoughts"), one `tick N: …` line each, oldest first. */
function recentThoughts(prompt: string): string[] {
  const section = prompt.split('## Context 3')[1]?.split('## Context 4')[0] ?? '';
  return section
    .split('\n')
    .filter((l) => l.startsWith('- tick '))
    .map((l) => l.slice(2));
}

describe("a loop's context shows its own recent replies", () => {
  it("a task loop's snapshot holds its own earlier replies; the main loop's holds the main loop's", async () => {
    const agentId = 'taskctx-snap';
    const [task, other] = await newAgent(agentId);
    await handle.db
      .insert(llmRecentResponses)
      .values([1, 2, 3, 4, 5].map((tick) => ({ agentId, tick, content: `main thought ${tick}` })));
    await handle.db.insert(processLog).values([
      taskReply(agentId, task, 1, 'task thought 1'),
      taskReply(agentId, task, 2, 'task thought 2'),
      taskReply(agentId, task, 3, 'task thought 3'),
      taskReply(agentId, other, 1, 'other task thought 1'),
      {
        agentId,
        processId: `task/${task}`,
        kind: 'task_loop_status',
        status: 'close' as const,
        message: 'x',
        tick: 2,
      },
    ]);
    const snapshots = createTickSnapshots({ db: handle.db, llm: { registry: async () => [] } });

    const own = await snapshots.snapshotOf({ agentId, taskId: task }, 3, { contextLimit: 5 });
    expect(own.previous.map((p) => [p.tick, p.content])).toEqual([
      [2, 'task thought 2'],
      [1, 'task thought 1'],
    ]);
    expect(own.previous.every((p) => !p.archived)).toBe(true);

    const main = await snapshots.snapshotOf({ agentId }, 3, { contextLimit: 5 });
    expect(main.previous.map((p) => p.content)).toEqual(['main thought 2', 'main thought 1']);
    // Kept apart: each loop's snapshot of its tick 3 is still its own.
    expect(snapshots.held({ agentId, taskId: task }, 3)?.snapshot?.previous.map((p) => p.content)).toEqual([
      'task thought 2',
      'task thought 1',
    ]);
    expect(snapshots.held({ agentId }, 3)?.snapshot).toBe(main);

    const second = await snapshots.snapshotOf({ agentId, taskId: other }, 2, { contextLimit: 5 });
    expect(second.previous.map((p) => p.content)).toEqual(['other task thought 1']);

    // The context's limit holds for a task loop too.
    const one = await snapshots.snapshotOf({ agentId, taskId: task }, 4, { contextLimit: 1, fresh: true });
    expect(one.previous.map((p) => p.content)).toEqual(['task thought 3']);
  });

  it("a task loop's second think shows its first reply, not the main loop's; the main loop's shows its own", async () => {
    const agentId = 'taskctx-think';
    const [task] = await newAgent(agentId);
    const prompts: string[] = [];
    const acts = createActivities({
      db: handle.db,
      llm: {
        env: {},
        toolsDir: '',
        scriptedReply: thinkScript((messages) => {
          const text = promptText(messages);
          prompts.push(text);
          const who = text.includes('You are an auxiliary loop working only on task #') ? 'TASKLOOP' : 'MAINLOOP';
          return `${who} reply number ${prompts.length}.`;
        }),
      },
    });

    await acts.think(thinkInput(agentId, 1));
    await acts.think(thinkInput(agentId, 2));
    await acts.think(taskThinkInput(agentId, task, 1));
    await acts.think(taskThinkInput(agentId, task, 2));
    await acts.think(thinkInput(agentId, 3));

    const [, , taskFirst, taskSecond, mainThird] = prompts.map(recentThoughts);
    expect(taskFirst).toEqual([]);
    expect(taskSecond).toEqual(['tick 1: TASKLOOP reply number 3.']);
    expect(mainThird).toEqual(['tick 1: MAINLOOP reply number 1.', 'tick 2: MAINLOOP reply number 2.']);
  });
});
