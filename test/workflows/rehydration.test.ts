/**
 * Rehydration: behaviour change after three rejections. The real agent loop on the
 * time-skipping server with the real activities, the real Postgres and a scripted model that
 * keeps writing a diary entry with a password in it:
 * - before: the command is applied;
 * - the user rejects `diary.add` for "password" three times (`mindloop feedback` does the same);
 * - the next run (after continue-as-new) has the learning in context 2, and the same command is held for clarification — not executed — with a note to
 *   the user asking; a command without the pattern still runs;
 * - a failing command counts as outcome feedback (`command:<type>` rejections);
 * - a learned avoid_pattern of action `reply` flags the reply itself: the next reply that uses
 *   the pattern has its (harmless) commands held for clarification, with a note asking.
 */
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { recordFeedback } from '../../db/queries/learnings.js';
import type { ChatMessage } from '../../activities/llm/types.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { agents, commandLog, diaryEntries, llmRegistry, notes, preferenceCounts } from '../../db/schema/index.js';
import type { agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import { migratedDatabase, type MigratedDatabase, repoToolsDir } from '../helpers/env.js';
import { startWorkers, type RunningWorkers } from '../helpers/harness.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

const suite = timeSkippingSuite();
let h: MigratedDatabase;
let workers: RunningWorkers | undefined;
const prompts: ChatMessage[][] = [];
let calls = 0;
const taskQueue = 'rehydration';
/** Rhea's scripted row: every think says "as an AI" in its prose and writes a harmless diary entry. */
let rheaRegistryId = -1;
let rheaCalls = 0;

/** Every think writes the same two diary entries: one with the password, one harmless. */
function script({ messages, registryId }: { messages: ChatMessage[]; registryId?: number }): string {
  if (registryId === rheaRegistryId) {
    const n = messages.some((m) => m.content.includes('who you are')) ? ++rheaCalls : rheaCalls;
    return `As an AI, I keep a tidy diary.\nConfidence: 0.9\n${renderCommandBlock([{ cmdId: `tidy${n}`, type: 'diary.add', args: { title: `Tidy ${n}`, content: 'Desk cleared.' } }])}`;
  }
  // The think call carries context 0 ("who you are"); other calls (evaluation) do not count.
  const thinking = messages.some((m) => m.content.includes('who you are'));
  if (thinking) prompts.push(messages);
  const n = thinking ? ++calls : calls;
  return `I keep notes.\nConfidence: 0.9\n${renderCommandBlock([
    { cmdId: `secret${n}`, type: 'diary.add', args: { title: `Login ${n}`, content: 'The PASSWORD is hunter2' } },
    { cmdId: `plain${n}`, type: 'diary.add', args: { title: `Weather ${n}`, content: 'Sunny today.' } },
    { cmdId: `broken${n}`, type: 'diary.read', args: { id: 999999 } },
  ])}`;
}

beforeAll(async () => {
  h = await migratedDatabase('mindloop_rehydration', 6);
  await h.db.insert(agents).values({ id: 'lina', name: 'Lina' });
  await h.db.insert(llmRegistry).values({
    agentId: 'lina',
    name: 'script',
    provider: 'scripted',
    model: 'scripted-lina',
    role: 'agent',
    priority: 1,
  });
  await h.db.insert(agents).values({ id: 'rhea', name: 'Rhea' });
  const [rhea] = await h.db
    .insert(llmRegistry)
    .values({
      agentId: 'rhea',
      name: 'script',
      provider: 'scripted',
      model: 'scripted-rhea',
      role: 'agent',
      priority: 1,
    })
    .returning({ id: llmRegistry.id });
  rheaRegistryId = rhea!.id;
  workers = await startWorkers(suite.env, [
    {
      taskQueue,
      workflowBundle: suite.bundle,
      activities: createActivities({
        db: h.db,
        llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: (i) => script(i) },
      }),
    },
  ]);
}, 180_000);
afterAll(async () => {
  await workers?.stop();
  await h?.dispose();
});

/** One loop: tick 1, then a 1-hour pacing pause (no time skipping until the test awaits the result), continue-as-new, tick 2. */
async function startLoop(agentId = 'lina') {
  return suite.env.client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
    taskQueue,
    workflowId: `agent/${agentId}`,
    args: [{ agentId, maxTicks: 2, ticksPerRun: 1, settings: { delayMs: 3_600_000 } }],
  });
}

const diaryTitles = async (agentId = 'lina') =>
  (await h.db.select({ t: diaryEntries.title }).from(diaryEntries).where(eq(diaryEntries.agentId, agentId)))
    .map((r) => r.t)
    .sort();

describe('rehydration: behaviour change after three rejections', () => {
  it('a learned avoid_pattern holds the matching command for clarification instead of running it', async () => {
    // Before: both entries are written.
    const loop = await startLoop();
    await expect.poll(() => diaryTitles('lina'), { timeout: 30_000, interval: 200 }).toEqual(['Login 1', 'Weather 1']);
    const firstPrompt = prompts[0]!.map((m) => m.content).join('\n');
    expect(firstPrompt).not.toContain('What you have learned');

    // The user rejects it three times (what `mindloop feedback lina reject diary.add --reason password` records).
    const fb = { agentId: 'lina', kind: 'reject' as const, action: 'diary.add', reason: 'password' };
    expect((await recordFeedback(h.db, fb)).learning).toBeUndefined();
    expect((await recordFeedback(h.db, fb)).learning).toBeUndefined();
    const third = await recordFeedback(h.db, fb);
    expect(third.learning).toMatchObject({
      predicate: 'avoid_pattern',
      args: { action: 'diary.add', pattern: 'password' },
    });

    // After: the run after continue-as-new rehydrates the learning into context 2 and its checks.
    const before = prompts.length;
    expect(await loop.result()).toMatchObject({ ticks: 2 });
    expect((await loop.describe()).runId).not.toBe(loop.firstExecutionRunId);
    const prompt = prompts[before]!.map((m) => m.content).join('\n');
    expect(prompt).toContain('What you have learned:');
    expect(prompt).toContain(`#${third.learning!.id} avoid "password" in diary.add commands`);

    expect(await diaryTitles('lina')).toEqual(['Login 1', 'Weather 1', 'Weather 2']);
    const [held] = await h.db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.agentId, 'lina'), eq(commandLog.cmdId, 'secret2')));
    expect(held).toMatchObject({ status: 'rejected' });
    expect(held!.reason).toMatch(
      /^needs clarification: diary\.add matches what you learned to avoid: "password" \(learning #\d+, confidence 1\.00\)/,
    );
    const asks = await h.db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'lina'), eq(notes.direction, 'out')));
    expect(asks).toHaveLength(1);
    expect(asks[0]).toMatchObject({ recipient: 'user', tags: ['clarification', 'learning'] });
    expect(asks[0]!.text).toContain('Before I run diary.add (secret2)');

    // Outcome feedback: the failing diary.read counted once per run as a command rejection.
    const outcome = await h.db
      .select()
      .from(preferenceCounts)
      .where(and(eq(preferenceCounts.agentId, 'lina'), eq(preferenceCounts.kind, 'reject')));
    const failures = outcome.find((p) => p.pattern.startsWith('command:diary.read:'));
    expect(failures).toMatchObject({ count: 2, shard: 'agent:lina' });
    expect(before).toBe(1);
  }, 120_000);

  it('a learned avoid_pattern of action reply holds the commands of a reply that uses it', async () => {
    const loop = await startLoop('rhea');
    await expect.poll(() => diaryTitles('rhea'), { timeout: 30_000, interval: 200 }).toEqual(['Tidy 1']);

    // `mindloop feedback rhea reject reply --reason "as an AI"`, three times.
    const fb = { agentId: 'rhea', kind: 'reject' as const, action: 'reply', reason: 'as an AI' };
    await recordFeedback(h.db, fb);
    await recordFeedback(h.db, fb);
    const third = await recordFeedback(h.db, fb);
    expect(third.learning).toMatchObject({
      predicate: 'avoid_pattern',
      args: { action: 'reply', pattern: 'as an ai' },
    });

    expect(await loop.result()).toMatchObject({ ticks: 2 });
    // The command is harmless; the reply's prose is what was learned against.
    expect(await diaryTitles('rhea')).toEqual(['Tidy 1']);
    const [held] = await h.db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.agentId, 'rhea'), eq(commandLog.cmdId, 'tidy2')));
    expect(held).toMatchObject({ status: 'rejected' });
    expect(held!.reason).toMatch(
      /^needs clarification: the reply behind diary\.add uses what you learned to avoid: "as an ai" \(learning #\d+/,
    );
    const asks = await h.db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'rhea'), eq(notes.direction, 'out')));
    expect(asks).toHaveLength(1);
    expect(asks[0]).toMatchObject({ recipient: 'user', tags: ['clarification', 'learning'] });
    expect(asks[0]!.text).toContain('Before I run diary.add (tidy2): my reply uses what I learned to avoid');
  }, 120_000);
});
