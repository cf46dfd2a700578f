/**
 * The learning store on the real Postgres: reinforcement, loading order and threshold, the
 * guards (allow-list + typed args, 10 saves a minute, 1000 a shard — refusals logged), export
 * → clear → import → export round trip, set-based decay, and preference feedback crossing the
 * threshold into an explained learning.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  clearLearnings,
  decayLearnings,
  explainLearning,
  exportLearnings,
  importLearnings,
  learningStats,
  LearningRefusedError,
  loadLearnings,
  recordFeedback,
  saveLearning,
} from '../../db/queries/learnings.js';
import { createLearningActivities, createLearningSink } from '../../activities/learnings.js';
import { createLoopEventActivities } from '../../activities/tick/loop-events.js';
import { agents } from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';

let h: MigratedDatabase;
const open = { maxSavesPerMinute: Infinity };

beforeAll(async () => {
  h = await migratedDatabase('mindloop_learnings');
  await h.db.insert(agents).values([
    { id: 'ada', name: 'Ada' },
    { id: 'bob', name: 'Bob' },
  ]);
});
afterAll(async () => {
  await h?.dispose();
});

const events = async (shard: string, outcome: string) =>
  (
    await h.db.execute<{ n: number }>(
      sql`select count(*)::int as n from learning_events where shard_type = ${shard} and outcome = ${outcome}`,
    )
  ).rows[0]!.n;

describe('save and reinforce', () => {
  it('creates at 1.0, reinforces +0.1 up to 1.0 and refreshes learned_at; key order of args does not matter', async () => {
    const a = await saveLearning(
      h.db,
      { shardType: 'coder', predicate: 'avoid_pattern', args: { action: 'code.edit', pattern: 'unwrap' } },
      open,
    );
    expect(a).toMatchObject({ reinforced: false, confidence: 1 });
    await h.db.execute(
      sql`update learnings set confidence = 0.5, learned_at = now() - interval '3 days' where id = ${a.id}`,
    );
    const b = await saveLearning(
      h.db,
      { shardType: 'coder', predicate: 'avoid_pattern', args: { pattern: 'unwrap', action: 'code.edit' } },
      open,
    );
    expect(b).toMatchObject({ id: a.id, reinforced: true });
    expect(b.confidence).toBeCloseTo(0.6, 6);
    const [row] = (
      await h.db.execute<{ age: number; reinforcements: number }>(
        sql`select extract(epoch from now() - learned_at)::float8 as age, reinforcements from learnings where id = ${a.id}`,
      )
    ).rows;
    expect(row!.age).toBeLessThan(60);
    expect(row!.reinforcements).toBe(1);
    for (let i = 0; i < 6; i++)
      await saveLearning(
        h.db,
        { shardType: 'coder', predicate: 'avoid_pattern', args: { action: 'code.edit', pattern: 'unwrap' } },
        open,
      );
    const [top] = await loadLearnings(h.db, { shardType: 'coder' });
    expect(top!.confidence).toBe(1);
    // The same learning in another shard is another row (unique per shard).
    const other = await saveLearning(
      h.db,
      { shardType: 'tester', predicate: 'avoid_pattern', args: { action: 'code.edit', pattern: 'unwrap' } },
      open,
    );
    expect(other.id).not.toBe(a.id);
  });

  it('loads confidence > 0.3 only, by confidence then recency', async () => {
    const s = 'loadorder';
    const ids: Record<string, number> = {};
    for (const [style, conf, ageH] of [
      ['a', 0.9, 5],
      ['b', 0.9, 1],
      ['c', 0.31, 0],
      ['d', 0.3, 0],
      ['e', 0.2, 0],
    ] as const) {
      const r = await saveLearning(
        h.db,
        { shardType: s, predicate: 'style_preference', args: { style, stance: 'prefer' } },
        open,
      );
      ids[style] = r.id;
      await h.db.execute(
        sql`update learnings set confidence = ${conf}, learned_at = now() - make_interval(hours => ${ageH}) where id = ${r.id}`,
      );
    }
    const loaded = await loadLearnings(h.db, { shardType: s });
    expect(loaded.map((l) => l.id)).toEqual([ids.b, ids.a, ids.c]);
  });
});

describe('guards', () => {
  it('refuses an unknown predicate and bad args with a clear error, and logs the refusal', async () => {
    const bad = saveLearning(h.db, { shardType: 'guarded', predicate: 'grant_admin', args: { user: 'mallory' } }, open);
    await expect(bad).rejects.toThrow(/unknown learning predicate 'grant_admin' \(allowed: avoid_pattern/);
    await expect(
      saveLearning(
        h.db,
        { shardType: 'guarded', predicate: 'avoid_pattern', args: { action: 'x', pattern: 'y', extra: 1 } },
        open,
      ),
    ).rejects.toThrow(/bad args for 'avoid_pattern'.*extra|Unrecognized/i);
    await expect(
      saveLearning(
        h.db,
        { shardType: 'guarded', predicate: 'tool_preference', args: { tool: 'x', stance: 'love' } },
        open,
      ),
    ).rejects.toThrow(/bad args for 'tool_preference': stance/);
    expect(await events('guarded', 'refused')).toBe(3);
    const { rows } = await h.db.execute<{ reason: string }>(
      sql`select reason from learning_events where shard_type = 'guarded' and outcome = 'refused' order by id`,
    );
    expect(rows[0]!.reason).toMatch(/^guard: unknown learning predicate/);
    expect((await loadLearnings(h.db, { shardType: 'guarded' })).length).toBe(0);
  });

  it('allows 10 saves a minute per shard, refuses the 11th (logged), other shards unaffected', async () => {
    const results: Array<'ok' | string> = [];
    for (let i = 0; i < 12; i++) {
      try {
        await saveLearning(h.db, {
          shardType: 'rated',
          predicate: 'language_hint',
          args: { language: 'go', hint: `hint ${i}` },
        });
        results.push('ok');
      } catch (err) {
        expect(err).toBeInstanceOf(LearningRefusedError);
        results.push((err as LearningRefusedError).code);
      }
    }
    expect(results).toEqual([...Array(10).fill('ok'), 'rate_limit', 'rate_limit']);
    expect(await events('rated', 'refused')).toBe(2);
    expect(await events('rated', 'saved')).toBe(10);
    await expect(
      saveLearning(h.db, { shardType: 'rated2', predicate: 'language_hint', args: { language: 'go', hint: 'x' } }),
    ).resolves.toMatchObject({ reinforced: false });
    // A minute later (events aged by hand) the shard may save again.
    await h.db.execute(
      sql`update learning_events set created_at = created_at - interval '61 seconds' where shard_type = 'rated'`,
    );
    await expect(
      saveLearning(h.db, { shardType: 'rated', predicate: 'language_hint', args: { language: 'go', hint: 'later' } }),
    ).resolves.toMatchObject({ reinforced: false });
  });

  it('concurrent saves cannot pass the rate limit together', async () => {
    const tries = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        saveLearning(h.db, { shardType: 'racing', predicate: 'phase_success', args: { phase_type: `p${i}` } }),
      ),
    );
    expect(tries.filter((t) => t.status === 'fulfilled').length).toBe(10);
    expect(await events('racing', 'refused')).toBe(10);
  });

  it('caps a shard at 1000 learnings; reinforcing an existing one still works', async () => {
    await h.db.execute(sql`insert into learnings (shard_type, fact_predicate, fact_args)
      select 'capped', 'phase_success', jsonb_build_object('phase_type', 'p' || g) from generate_series(1, 1000) g`);
    await expect(
      saveLearning(h.db, { shardType: 'capped', predicate: 'phase_success', args: { phase_type: 'new' } }, open),
    ).rejects.toMatchObject({
      code: 'cap',
      message: expect.stringMatching(/holds 1000 learnings/),
    });
    await expect(
      saveLearning(h.db, { shardType: 'capped', predicate: 'phase_success', args: { phase_type: 'p7' } }, open),
    ).resolves.toMatchObject({ reinforced: true });
    expect(await events('capped', 'refused')).toBe(1);
  });

  it('the activity turns a refusal into a non-retryable Forbidden failure; the sink saves campaign learnings', async () => {
    const acts = createLearningActivities({ db: h.db });
    await expect(acts.saveLearning({ shardType: 'acts', predicate: 'nope', args: {} })).rejects.toMatchObject({
      type: 'Forbidden',
      nonRetryable: true,
    });
    const sink = createLearningSink({ db: h.db });
    const r = await sink({
      agentId: 'ada',
      shardType: 'campaign',
      predicate: 'avoid_error',
      args: { task_type: 'http', error: 'timeout after N ms' },
      source: 'c1',
    });
    expect(r).toMatchObject({ reinforced: false });
    expect(
      await sink({
        agentId: 'ada',
        shardType: 'campaign',
        predicate: 'avoid_error',
        args: { task_type: 'http', error: 'timeout after N ms' },
        source: 'c1',
      }),
    ).toMatchObject({ id: r.id, reinforced: true });
    // The agent's rehydration sees the campaign learning it took part in.
    const { learnings, section } = await acts.loadLearnings({ agentId: 'ada' });
    expect(learnings.map((l) => l.id)).toContain(r.id);
    expect(section).toContain('http failed with: timeout after N ms');
    await expect(acts.loadLearnings({})).rejects.toMatchObject({ type: 'InvalidInput' });
  });
});

describe('export / import / clear / stats', () => {
  it('round-trips JSON exactly through clear and import', async () => {
    const s = 'roundtrip';
    await saveLearning(
      h.db,
      { shardType: s, predicate: 'avoid_pattern', args: { action: '*', pattern: 'rm -rf' }, source: 'feedback' },
      open,
    );
    const t = await saveLearning(
      h.db,
      { shardType: s, predicate: 'tool_preference', args: { tool: 'web.search', stance: 'avoid', reason: 'slow' } },
      open,
    );
    await saveLearning(
      h.db,
      { shardType: s, predicate: 'language_hint', args: { language: 'go', hint: 'return errors' } },
      open,
    );
    await h.db.execute(
      sql`update learnings set confidence = 0.729, learned_at = '2026-01-02T03:04:05.678Z' where id = ${t.id}`,
    );
    const first = JSON.stringify(await exportLearnings(h.db, s));
    expect(await clearLearnings(h.db, s)).toEqual({ deleted: 3 });
    expect(await exportLearnings(h.db, s)).toEqual([]);
    expect(await importLearnings(h.db, s, JSON.parse(first))).toEqual({ imported: 3, updated: 0 });
    expect(JSON.stringify(await exportLearnings(h.db, s))).toBe(first);
    const stats = await learningStats(h.db, s);
    expect(stats).toMatchObject({
      total_learnings: 3,
      by_predicate: { avoid_pattern: 1, tool_preference: 1, language_hint: 1 },
    });
    expect(stats.avg_confidence).toBeCloseTo((1 + 0.729 + 1) / 3, 3);
  });

  it("imports 50 learnings whole, past the 10-a-minute save rate, without using up the shard's rate; the cap still holds", async () => {
    const s = 'bulk';
    const records = Array.from({ length: 50 }, (_, i) => ({
      fact_predicate: 'language_hint',
      fact_args: { language: 'go', hint: `hint ${i}` },
      confidence: 0.9,
    }));
    expect(await importLearnings(h.db, s, records)).toEqual({ imported: 50, updated: 0 });
    expect((await learningStats(h.db, s)).total_learnings).toBe(50);
    expect(await events(s, 'refused')).toBe(0);
    // The import did not eat into the minute: ten single saves still pass, the eleventh is refused.
    const results: string[] = [];
    for (let i = 0; i < 11; i++) {
      results.push(
        await saveLearning(h.db, { shardType: s, predicate: 'phase_success', args: { phase_type: `p${i}` } }).then(
          () => 'ok',
          (e: unknown) => (e instanceof LearningRefusedError ? e.code : String(e)),
        ),
      );
    }
    expect(results).toEqual([...Array(10).fill('ok'), 'rate_limit']);
    // Still guarded: the shard cap refuses an import that would overflow it, and keeps nothing of it.
    await expect(
      importLearnings(
        h.db,
        s,
        records.map((r) => ({ ...r, fact_args: { language: 'rust', hint: r.fact_args.hint } })),
        { maxPerShard: 80 },
      ),
    ).rejects.toThrow(/would hold 110 learnings \(maximum 80\); nothing imported/);
    expect((await learningStats(h.db, s)).total_learnings).toBe(60);
  });

  it('an import with one bad record imports nothing and names the record', async () => {
    const good = {
      shard_type: 'x',
      fact_predicate: 'phase_success',
      fact_args: { phase_type: 'build' },
      learned_at: new Date().toISOString(),
      source_campaign: null,
      confidence: 1,
      reinforcements: 0,
      derivation: null,
    };
    await expect(
      importLearnings(h.db, 'imp', [good, { ...good, fact_predicate: 'evil', fact_args: {} }]),
    ).rejects.toThrow(/record 1: unknown learning predicate 'evil'/);
    await expect(importLearnings(h.db, 'imp', [{ ...good, confidence: 2 }])).rejects.toThrow(/record 0: confidence/);
    await expect(importLearnings(h.db, 'imp', { not: 'an array' })).rejects.toThrow(/expected a JSON array/);
    expect(await exportLearnings(h.db, 'imp')).toEqual([]);
  });
});

describe('decay', () => {
  it('multiplies stale learnings by the factor and deletes those below 0.1, in two statements', async () => {
    const s = 'decaying';
    const fresh = await saveLearning(
      h.db,
      { shardType: s, predicate: 'phase_success', args: { phase_type: 'fresh' } },
      open,
    );
    const stale = await saveLearning(
      h.db,
      { shardType: s, predicate: 'phase_success', args: { phase_type: 'stale' } },
      open,
    );
    const dying = await saveLearning(
      h.db,
      { shardType: s, predicate: 'phase_success', args: { phase_type: 'dying' } },
      open,
    );
    await h.db.execute(
      sql`update learnings set learned_at = now() - interval '8 days' where id in (${stale.id}, ${dying.id})`,
    );
    await h.db.execute(sql`update learnings set confidence = 0.105 where id = ${dying.id}`);
    expect(await decayLearnings(h.db, { shardType: s })).toEqual({ decayed: 2, deleted: 1 });
    const left = await exportLearnings(h.db, s);
    expect(left.map((l) => [(l.fact_args as { phase_type: string }).phase_type, l.confidence])).toEqual([
      ['fresh', 1],
      ['stale', expect.closeTo(0.9, 6)],
    ]);
    expect(fresh.id).toBeGreaterThan(0);
    await expect(decayLearnings(h.db, { factor: 1.5 })).rejects.toThrow(/decay factor must be in \(0, 1\]/);
  });
});

describe('preference feedback', () => {
  it('three rejections of the same action:reason derive an avoid_pattern learning, explained by `why`', async () => {
    const f = { agentId: 'bob', kind: 'reject' as const, action: 'shell.exec', reason: '  RM -rf  ' };
    expect(await recordFeedback(h.db, f)).toEqual({ pattern: 'shell.exec:rm -rf', count: 1, threshold: 3 });
    expect(await recordFeedback(h.db, f)).toEqual({ pattern: 'shell.exec:rm -rf', count: 2, threshold: 3 });
    const third = await recordFeedback(h.db, f);
    expect(third.learning).toMatchObject({
      predicate: 'avoid_pattern',
      args: { action: 'shell.exec', pattern: 'rm -rf' },
      rule: 'avoid-pattern',
      reinforced: false,
    });
    const fourth = await recordFeedback(h.db, f);
    expect(fourth.learning).toMatchObject({ id: third.learning!.id, reinforced: true });
    const why = await explainLearning(h.db, third.learning!.id);
    expect(why!.derivation).toMatchObject({
      rule: 'avoid-pattern',
      kind: 'reject',
      pattern: 'shell.exec:rm -rf',
      count: 3,
      threshold: 3,
    });
    expect(why!.counts).toEqual([expect.objectContaining({ agentId: 'bob', count: 4, pattern: 'shell.exec:rm -rf' })]);
    expect(why!.learning.shardType).toBe('agent:bob');
    // Acceptances of a plain action count but derive nothing; of a style they do.
    for (let i = 0; i < 3; i++)
      expect(
        (await recordFeedback(h.db, { agentId: 'bob', kind: 'accept', action: 'diary.add' })).learning,
      ).toBeUndefined();
    let last;
    for (let i = 0; i < 3; i++)
      last = await recordFeedback(h.db, { agentId: 'bob', kind: 'accept', action: 'style.concise' });
    expect(last!.learning).toMatchObject({
      predicate: 'style_preference',
      args: { style: 'concise', stance: 'prefer' },
    });
    await expect(recordFeedback(h.db, { agentId: 'bob', kind: 'reject', action: 'Bad Action!' })).rejects.toThrow(
      /bad feedback: action/,
    );
  });
});

describe('feedback by note', () => {
  it('a user note tagged feedback counts once per note (a retried recordNote does not count again); a bad one is reported', async () => {
    const tick = createLoopEventActivities({ db: h.db });
    const note = (n: number, text: string, tags = ['feedback']) =>
      tick.recordNote({ agentId: 'ada', text, priority: 0, tags, source: 'user', idempotencyKey: `fb-${n}` });
    expect((await note(1, 'reject notes.send: lorem ipsum')).feedback).toEqual({
      pattern: 'notes.send:lorem ipsum',
      count: 1,
    });
    expect((await note(1, 'reject notes.send: lorem ipsum')).feedback).toBeUndefined();
    await note(2, 'reject notes.send because Lorem  Ipsum');
    const third = await note(3, 'Reject notes.send --reason lorem ipsum');
    expect(third.feedback).toMatchObject({ count: 3, learningId: expect.any(Number) });
    expect((await note(4, 'no idea what this is')).feedback).toEqual({
      error: expect.stringContaining('expected "accept <action>"'),
    });
    expect((await note(5, 'reject notes.send: lorem ipsum', [])).feedback).toBeUndefined();
  });
});
