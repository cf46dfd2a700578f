/**
 * Preference feedback from outcomes and the configurable threshold, on the real Postgres:
 * - a command that fails and an edit that is rejected (bad args, refused in a task loop, not let
 *   through by the validators) count as `command:<type>:<reason>` rejections in
 *   preference_counts; at the threshold they become an `avoid_error` learning; a retried
 *   applyCommands and a clarification hold never count;
 * - the threshold is the agent's `learning_threshold` config (default 3), an explicit threshold
 *   (`mindloop feedback --threshold`) wins, and a bad stored value falls back to 3.
 */
import { and, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCommandActivities } from '../../activities/commands.js';
import { agentThreshold, explainLearning, recordFeedback, saveLearning } from '../../activities/learning-store.js';
import { validateConfigValue } from '../../core/catalogue.js';
import type { ParsedCommand } from '../../core/loop-types.js';
import { createDb, type DbHandle } from '../../db/client.js';
import { runMigrations } from '../../db/migrate.js';
import { agentConfig, agents, learnings, preferenceCounts } from '../../db/schema/index.js';
import { freshPostgresDatabase } from '../helpers/env.js';

let h: DbHandle;
let drop: () => Promise<void>;
let acts: ReturnType<typeof createCommandActivities>;

beforeAll(async () => {
  const fresh = await freshPostgresDatabase('mindloop_outcome_feedback');
  drop = fresh.drop;
  h = createDb(fresh.url, { max: 4 });
  await runMigrations(h.pool);
  await h.db.insert(agents).values([
    { id: 'otto', name: 'Otto' },
    { id: 'tess', name: 'Tess' },
    { id: 'vic', name: 'Vic' },
  ]);
  acts = createCommandActivities({ db: h.db });
});
afterAll(async () => {
  await h?.close();
  await drop?.();
});

const counts = async (agentId: string) =>
  Object.fromEntries(
    (await h.db.select().from(preferenceCounts).where(and(eq(preferenceCounts.agentId, agentId), eq(preferenceCounts.kind, 'reject')))).map((r) => [r.pattern, r.count]),
  );
const apply = (agentId: string, tick: number, commands: ParsedCommand[], extra: Partial<Parameters<typeof acts.applyCommands>[0]> = {}) =>
  acts.applyCommands({ agentId, tick, workflowId: `agent/${agentId}`, mode: 'main', commands, ...extra });

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
    const [refused] = await apply('vic', 3, [{ cmdId: 'w1', type: 'diary.add', args: { title: 'a', content: 'b' } }], { mode: 'task', taskId: 1 });
    expect(refused!.status).toBe('rejected');
    // A learned avoid_pattern holds the command for clarification: a question, not a rejection.
    await saveLearning(h.db, { shardType: 'agent:vic', agentId: 'vic', predicate: 'avoid_pattern', args: { action: 'diary.add', pattern: 'secret' } });
    const [held] = await apply('vic', 4, [{ cmdId: 's1', type: 'diary.add', args: { title: 'secret', content: 'x' } }]);
    expect(held!.message).toMatch(/^needs clarification/);

    const c = await counts('vic');
    expect(Object.keys(c).sort()).toEqual([
      expect.stringMatching(/^command:diary\.add:not validated: diary\.add needs rating ≥ \+n, this tick's rating is -n$/),
      expect.stringMatching(/^command:diary\.add:read-only auxiliary loop/),
      expect.stringMatching(/^command:diary\.read:/),
    ]);
    expect(Object.values(c)).toEqual([1, 1, 1]);
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
    expect(second.learning).toMatchObject({ predicate: 'tool_preference', args: { tool: 'web_search', stance: 'avoid', reason: 'too slow' }, rule: 'tool-reject' });
    expect((await explainLearning(h.db, second.learning!.id))!.derivation).toMatchObject({ count: 2, threshold: 2 });

    // An explicit threshold (the CLI's --threshold) wins over the config.
    const g = { agentId: 'tess', kind: 'accept' as const, action: 'style.concise' };
    expect((await recordFeedback(h.db, { ...g, threshold: 3 })).learning).toBeUndefined();
    expect((await recordFeedback(h.db, { ...g, threshold: 3 })).learning).toBeUndefined();
    expect((await recordFeedback(h.db, { ...g, threshold: 3 })).learning).toMatchObject({ predicate: 'style_preference' });

    // A value that is not a valid threshold (written around the validation) is ignored.
    await h.db.update(agentConfig).set({ value: 'lots' }).where(and(eq(agentConfig.agentId, 'tess'), eq(agentConfig.key, 'learning_threshold')));
    expect(await agentThreshold(h.db, 'tess')).toBe(3);
    const n = await h.db.execute<{ n: number }>(sql`select count(*)::int as n from learnings where agent_id = 'tess'`);
    expect(n.rows[0]!.n).toBe(2);
  });
});
