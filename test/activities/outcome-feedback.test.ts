/**
 * Preference feedback from outcomes and the configurable threshold, on the real Postgres:
 * - a command that fails and an edit that is rejected (bad args, refused in a task loop, not let
 *   through by the validators) count as `command:<type>:<reason>` rejections in
 *   preference_counts; at the threshold they become an `avoid_error` learning; a retried
 *   applyCommands and a clarification hold never count;
 * - the threshold is the agent's `learning_threshold` config (default 3), an explicit threshold
 *   (`mindloop feedback --threshold`) wins, and a bad stored value falls back to 3.
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger, type LogEntry } from '@temporalio/worker';
import { and, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCommandActivities, type ApplyCommandsInput } from '../../activities/tick/apply-commands.js';
import { agentThreshold, explainLearning, recordFeedback, saveLearning } from '../../db/queries/learnings.js';
import { identicalPlaceholder } from '../../core/novelty.js';
import { validateConfigValue } from '../../core/catalogue.js';
import type { CommandOutcome, ParsedCommand } from '../../core/loop-types.js';
import {
  agentConfig,
  agents,
  learnings,
  llmRecentResponses,
  notes,
  preferenceCounts,
  processLog,
} from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';

let h: MigratedDatabase;
let acts: ReturnType<typeof createCommandActivities>;

beforeAll(async () => {
  h = await migratedDatabase('mindloop_outcome_feedback', 4);
  await h.db.insert(agents).values([
    { id: 'otto', name: 'Otto' },
    { id: 'tess', name: 'Tess' },
    { id: 'vic', name: 'Vic' },
    { id: 'wren', name: 'Wren' },
    { id: 'yara', name: 'Yara' },
  ]);
  acts = createCommandActivities({ db: h.db });
});
afterAll(async () => {
  await h?.dispose();
});

const counts = async (agentId: string) =>
  Object.fromEntries(
    (
      await h.db
        .select()
        .from(preferenceCounts)
        .where(and(eq(preferenceCounts.agentId, agentId), eq(preferenceCounts.kind, 'reject')))
    ).map((r) => [r.pattern, r.count]),
  );
const apply = (
  agentId: string,
  tick: number,
  commands: ParsedCommand[],
  extra: Partial<Parameters<typeof acts.applyCommands>[0]> = {},
) => acts.applyCommands({ agentId, tick, workflowId: `agent/${agentId}`, mode: 'main', commands, ...extra });

describe('outcome feedback', () => {
  it('a rejected edit counts as command:<type>:<reason>, once per command, and becomes avoid_error at 3', async () => {
    // diary.add without its content: refused by the arg schema (an edit rejected).
    const bad = (n: number): ParsedCommand => ({ cmdId: `bad${n}`, type: 'diary.add', args: { title: `t${n}` } });
    const [o1] = await apply('otto', 1, [bad(1)]);
    expect(o1).toMatchObject({ status: 'rejected', duplicate: false });
    let c = await counts('otto');
    expect(Object.keys(c)).toHaveLength(1);
    const key = Object.keys(c)[0]!;
    expect(key).toMatch(/^command:diary\.add:invalid args for diary\.add: /);
    expect(c[key]).toBe(1);

    // A retried activity (same tick, same cmd id) finds the first outcome and does not count again.
    const [again] = await apply('otto', 1, [bad(1)]);
    expect(again).toMatchObject({ status: 'rejected', duplicate: true });
    expect((await counts('otto'))[key]).toBe(1);

    await apply('otto', 2, [bad(2)]);
    expect(await h.db.select().from(learnings).where(eq(learnings.agentId, 'otto'))).toEqual([]);
    await apply('otto', 3, [bad(3)]);
    expect((await counts('otto'))[key]).toBe(3);
    const [learned] = await h.db.select().from(learnings).where(eq(learnings.agentId, 'otto'));
    expect(learned).toMatchObject({ shardType: 'agent:otto', factPredicate: 'avoid_error' });
    expect(learned!.factArgs).toMatchObject({ task_type: 'command:diary.add' });
    expect(String((learned!.factArgs as { error: string }).error)).toContain('invalid args for diary.add');
    const why = await explainLearning(h.db, learned!.id);
    expect(why!.derivation).toMatchObject({ rule: 'outcome-error', kind: 'reject', count: 3, threshold: 3 });
  });

  it('commands the validators did not let through and task-loop refusals count; a failing command counts; held and unknown commands do not', async () => {
    const before = await counts('vic');
    expect(before).toEqual({});
    const outcomes = await apply(
      'vic',
      1,
      [
        { cmdId: 'u1', type: 'diary.add', args: { title: 'a', content: 'b' } },
        { cmdId: 'x1', type: 'no.such_thing', args: {} },
      ],
      { allowedCmdIds: [], rating: -1 },
    );
    expect(outcomes.map((o) => o.status)).toEqual(['unvalidated', 'unknown']);
    // A failing command (reading a diary entry that does not exist).
    const [failed] = await apply('vic', 2, [{ cmdId: 'r1', type: 'diary.read', args: { id: 999999 } }]);
    expect(failed!.status).toBe('error');
    // A task loop may not write a diary entry.
    const [refused] = await apply('vic', 3, [{ cmdId: 'w1', type: 'diary.add', args: { title: 'a', content: 'b' } }], {
      mode: 'task',
      taskId: 1,
    });
    expect(refused!.status).toBe('rejected');
    // A learned avoid_pattern holds the command for clarification: a question, not a rejection.
    await saveLearning(h.db, {
      shardType: 'agent:vic',
      agentId: 'vic',
      predicate: 'avoid_pattern',
      args: { action: 'diary.add', pattern: 'secret' },
    });
    const [held] = await apply('vic', 4, [{ cmdId: 's1', type: 'diary.add', args: { title: 'secret', content: 'x' } }]);
    expect(held!.message).toMatch(/^needs clarification/);

    const c = await counts('vic');
    expect(Object.keys(c).sort()).toEqual([
      expect.stringMatching(
        /^command:diary\.add:not validated: diary\.add needs rating ≥ \+n, this tick's rating is -n$/,
      ),
      expect.stringMatching(/^command:diary\.add:read-only auxiliary loop/),
      expect.stringMatching(/^command:diary\.read:/),
    ]);
    expect(Object.values(c)).toEqual([1, 1, 1]);
  });
});

describe('a failure to count outcome feedback', () => {
  it('is logged through the activity logger with its reason, and the tick goes on', async () => {
    const read = (n: number): ParsedCommand => ({ cmdId: `r${n}`, type: 'diary.read', args: { id: 999999 } });
    const [first] = await apply('wren', 1, [read(1)]);
    expect(first!.status).toBe('error');
    // Make the next count fail for real: the counter is at the integer maximum.
    const [row] = await h.db.select().from(preferenceCounts).where(eq(preferenceCounts.agentId, 'wren'));
    await h.db.update(preferenceCounts).set({ count: 2_147_483_647 }).where(eq(preferenceCounts.id, row!.id));

    const entries: LogEntry[] = [];
    const env = new MockActivityEnvironment({}, { logger: new DefaultLogger('WARN', (e) => entries.push(e)) });
    const outcomes = await env.run<[ApplyCommandsInput], CommandOutcome[], typeof acts.applyCommands>(
      acts.applyCommands,
      {
        agentId: 'wren',
        tick: 2,
        workflowId: 'agent/wren',
        mode: 'main',
        commands: [read(2), { cmdId: 'ok2', type: 'diary.add', args: { title: 'still', content: 'going' } }],
      },
    );
    expect(outcomes.map((o) => o.status)).toEqual(['error', 'applied']);
    const warned = entries.filter((e) => e.message.startsWith('outcome feedback not counted'));
    expect(warned).toHaveLength(1);
    expect(warned[0]!.level).toBe('WARN');
    expect(warned[0]!.message).toMatch(/^outcome feedback not counted for diary\.read \(r2\): .*integer out of range/s);
    expect(warned[0]!.meta).toMatchObject({
      agentId: 'wren',
      tick: 2,
      cmdId: 'r2',
      type: 'diary.read',
      reason: expect.stringMatching(/integer out of range/),
    });
  });
});

describe('a reply that uses a learned avoid_pattern (action reply or *)', () => {
  it("holds a task loop's commands when its stored reply uses the pattern, and asks the user", async () => {
    await saveLearning(h.db, {
      shardType: 'agent:yara',
      agentId: 'yara',
      predicate: 'avoid_pattern',
      args: { action: '*', pattern: 'just trust me' },
    });
    const note = (n: number): ParsedCommand => ({ cmdId: `n${n}`, type: 'tasks.list', args: {} });
    // The task loop's thought as the think activity stores it (process log payload).
    const store = (tick: number, body: string) =>
      h.db.insert(processLog).values({
        agentId: 'yara',
        processId: 'task/7',
        kind: 'task_loop',
        name: `task 7 tick ${tick}`,
        status: 'ok',
        payload: { tick, content: body },
        tick,
      });
    await store(
      1,
      'Working on it.\n<<<COMMANDS\n[{"cmd_id":"n1","type":"tasks.list","args":{},"description":"just trust me"}]\nCOMMANDS>>>',
    );
    await store(2, 'Just  trust me, it is fine.');
    // Tick 1: only the command block has the pattern, and the command itself does not (the block is not prose).
    // Tick 2: the prose uses it; the harmless note is held.
    const [o1] = await apply('yara', 1, [note(1)], { mode: 'task', taskId: 7 });
    const [o2] = await apply('yara', 2, [note(2)], { mode: 'task', taskId: 7 });
    expect(o1).toMatchObject({ status: 'applied' });
    expect(o2).toMatchObject({ status: 'rejected' });
    expect(o2!.message).toMatch(
      /^needs clarification: the reply behind tasks\.list uses what you learned to avoid: "just trust me"/,
    );
    const asks = await h.db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'yara'), eq(notes.direction, 'out')));
    expect(asks.map((a) => a.text).filter((t) => t.startsWith('Before I run'))).toEqual([
      expect.stringContaining('Before I run tasks.list (n2): my reply uses what I learned to avoid'),
    ]);
    // The main loop's reply (llm_recent_responses), also when stored as an identical-reply placeholder.
    await h.db.insert(llmRecentResponses).values([
      { agentId: 'yara', tick: 10, content: 'Just trust me on this one.' },
      { agentId: 'yara', tick: 11, content: identicalPlaceholder(10) },
      { agentId: 'yara', tick: 12, content: 'Here are the numbers.' },
    ]);
    const main = await apply('yara', 11, [note(11)]);
    expect(main[0]).toMatchObject({
      status: 'rejected',
      message: expect.stringMatching(/^needs clarification: the reply behind tasks\.list/),
    });
    expect((await apply('yara', 12, [note(12)]))[0]).toMatchObject({ status: 'applied' });
    // A human-approved command is not held again; nor counted as outcome feedback.
    const [approved] = await apply(
      'yara',
      11,
      [{ cmdId: 'approved.e1', type: 'diary.add', args: { title: 'a', content: 'b' } }],
      { approvedBy: 'e1' },
    );
    expect(approved!.status).toBe('applied');
    expect(await counts('yara')).toEqual({});
  });
});

describe('the threshold is configurable', () => {
  it("the agent's learning_threshold config decides; an explicit threshold wins; a bad stored value falls back to 3", async () => {
    expect(validateConfigValue('learning_threshold', 2)).toEqual({ ok: true, value: 2 });
    expect(validateConfigValue('learning_threshold', 0).ok).toBe(false);
    expect(await agentThreshold(h.db, 'tess')).toBe(3);

    await h.db.insert(agentConfig).values({ agentId: 'tess', key: 'learning_threshold', value: 2 });
    expect(await agentThreshold(h.db, 'tess')).toBe(2);
    const f = { agentId: 'tess', kind: 'reject' as const, action: 'tool.web_search', reason: 'too slow' };
    expect(await recordFeedback(h.db, f)).toEqual({ pattern: 'tool.web_search:too slow', count: 1, threshold: 2 });
    const second = await recordFeedback(h.db, f);
    expect(second.learning).toMatchObject({
      predicate: 'tool_preference',
      args: { tool: 'web_search', stance: 'avoid', reason: 'too slow' },
      rule: 'tool-reject',
    });
    expect((await explainLearning(h.db, second.learning!.id))!.derivation).toMatchObject({ count: 2, threshold: 2 });

    // An explicit threshold (the CLI's --threshold) wins over the config.
    const g = { agentId: 'tess', kind: 'accept' as const, action: 'style.concise' };
    expect((await recordFeedback(h.db, { ...g, threshold: 3 })).learning).toBeUndefined();
    expect((await recordFeedback(h.db, { ...g, threshold: 3 })).learning).toBeUndefined();
    expect((await recordFeedback(h.db, { ...g, threshold: 3 })).learning).toMatchObject({
      predicate: 'style_preference',
    });

    // A value that is not a valid threshold (written around the validation) is ignored.
    await h.db
      .update(agentConfig)
      .set({ value: 'lots' })
      .where(and(eq(agentConfig.agentId, 'tess'), eq(agentConfig.key, 'learning_threshold')));
    expect(await agentThreshold(h.db, 'tess')).toBe(3);
    const n = await h.db.execute<{ n: number }>(sql`select count(*)::int as n from learnings where agent_id = 'tess'`);
    expect(n.rows[0]!.n).toBe(2);
  });
});
