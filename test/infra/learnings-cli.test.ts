/**
 * `mindloop learnings …` and `mindloop feedback …` run as processes against the real Postgres:
 * feedback crossing the threshold, list / stats / why, export → clear → import → export
 * identical, decay, clear without --confirm refused, wrong flags exit 2 with usage.
 */
import { readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agents } from '../../db/schema/index.js';
import { migratedDatabase, tempDir, type MigratedDatabase } from '../helpers/env.js';
import { repoRoot, run } from '../helpers/spawn.js';

const cli = `${repoRoot}/bin/mindloop.mjs`;
let h: MigratedDatabase;
let url: string;
const dir = tempDir('learnings-cli');

beforeAll(async () => {
  h = await migratedDatabase('mindloop_learnings_cli', 2);
  url = h.url;
  await h.db.insert(agents).values({ id: 'ada', name: 'Ada' });
});
afterAll(async () => {
  await h?.dispose();
  dir.remove();
});

const ml = (...args: string[]) => run(process.execPath, [cli, ...args], { DATABASE_URL: url });

describe('mindloop feedback / learnings', () => {
  it('three rejections make an avoid_pattern learning that list, stats and why show', async () => {
    for (const n of [1, 2]) {
      const r = await ml('feedback', 'ada', 'reject', 'shell.exec', '--reason', 'rm -rf');
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain(`reject "shell.exec:rm -rf" for ada: count ${n} (threshold 3)`);
      expect(r.stdout).not.toContain('learning #');
    }
    const third = await ml('feedback', 'ada', 'reject', 'shell.exec', '--reason', 'rm -rf');
    expect(third.code, third.stderr).toBe(0);
    const m =
      /learning #(\d+) created: avoid_pattern \{"action":"shell.exec","pattern":"rm -rf"\} \(rule avoid-pattern/.exec(
        third.stdout,
      );
    expect(m, third.stdout).not.toBeNull();
    const id = m![1]!;

    const list = await ml('learnings', 'list', '--shard', 'agent:ada');
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(
      new RegExp(`#${id}  1\\.000  avoid_pattern  \\{"action":"shell.exec","pattern":"rm -rf"\\}`),
    );
    const stats = JSON.parse((await ml('learnings', 'stats', '--shard', 'agent:ada')).stdout) as Record<
      string,
      unknown
    >;
    expect(stats).toMatchObject({ total_learnings: 1, avg_confidence: 1, by_predicate: { avoid_pattern: 1 } });

    const why = await ml('learnings', 'why', id);
    expect(why.code).toBe(0);
    expect(why.stdout).toContain('rule avoid-pattern');
    expect(why.stdout).toContain('fired when reject count of "shell.exec:rm -rf" reached 3 (threshold 3)');
    expect(why.stdout).toContain('now: agent ada reject "shell.exec:rm -rf" × 3');
    expect((await ml('learnings', 'why', '999999')).stderr).toContain('no learning #999999');
  });

  it("feedback uses the agent's learning_threshold config unless --threshold is given", async () => {
    await h.db.insert(agents).values({ id: 'cy', name: 'Cy' });
    await h.db.execute(
      sql`insert into agent_config (agent_id, key, value) values ('cy', 'learning_threshold', '2'::jsonb)`,
    );
    const first = await ml('feedback', 'cy', 'reject', 'lang.go', '--reason', 'wrap errors with %w');
    expect(first.stdout).toContain('reject "lang.go:wrap errors with %w" for cy: count 1 (threshold 2)');
    const second = await ml('feedback', 'cy', 'reject', 'lang.go', '--reason', 'wrap errors with %w');
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toMatch(
      /learning #\d+ created: language_hint \{"language":"go","hint":"wrap errors with %w"\} \(rule language-hint/,
    );
    const explicit = await ml('feedback', 'cy', 'accept', 'tool.grep', '--threshold', '5');
    expect(explicit.stdout).toContain('accept "tool.grep" for cy: count 1 (threshold 5)');
  });

  it('export → clear --confirm → import → export round-trips exactly; clear without --confirm refuses', async () => {
    await h.db
      .execute(sql`insert into learnings (shard_type, fact_predicate, fact_args, confidence, learned_at, source_campaign)
      values ('coder', 'avoid_pattern', '{"action":"code.edit","pattern":"unwrap"}', 0.95, '2026-03-01T10:00:00.123Z', 'c-7'),
             ('coder', 'style_preference', '{"style":"concise","stance":"prefer"}', 0.8, '2026-03-02T10:00:00Z', null),
             ('coder', 'language_hint', '{"language":"go","hint":"return errors"}', 0.2, '2026-03-03T10:00:00Z', null)`);
    const file = `${dir.path}/coder.json`;
    const ex = await ml('learnings', 'export', '--shard', 'coder', '--format', 'json', '--file', file);
    expect(ex.code, ex.stderr).toBe(0);
    const first = readFileSync(file, 'utf8');
    expect(JSON.parse(first)).toHaveLength(3);

    const refused = await ml('learnings', 'clear', '--shard', 'coder');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('refusing to clear shard coder without --confirm');
    expect(JSON.parse((await ml('learnings', 'export', '--shard', 'coder')).stdout)).toHaveLength(3);

    const cleared = await ml('learnings', 'clear', '--shard', 'coder', '--confirm');
    expect(cleared.stdout).toContain('shard coder: 3 learnings deleted');
    const imp = await ml('learnings', 'import', '--shard', 'coder', '--file', file);
    expect(imp.code, imp.stderr).toBe(0);
    expect(imp.stdout).toContain('imported 3, updated 0');
    expect(imp.stderr).toContain(`3 records read from ${file}; checking and importing them in one transaction…`);
    const again = await ml('learnings', 'export', '--shard', 'coder');
    expect(again.stdout).toBe(first);
    // list hides the 0.2 learning unless --all.
    expect((await ml('learnings', 'list', '--shard', 'coder')).stdout.trim().split('\n')).toHaveLength(2);
    expect((await ml('learnings', 'list', '--shard', 'coder', '--all')).stdout.trim().split('\n')).toHaveLength(3);
  });

  it('imports 50 learnings whole (an import is not held to the 10-saves-a-minute rate)', async () => {
    const file = `${dir.path}/bulk.json`;
    const records = Array.from({ length: 50 }, (_, i) => ({
      fact_predicate: 'phase_success',
      fact_args: { phase_type: `t${i}` },
      confidence: 0.9,
    }));
    await import('node:fs/promises').then((fs) => fs.writeFile(file, JSON.stringify(records)));
    const r = await ml('learnings', 'import', '--shard', 'bulk', '--file', file);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('imported 50, updated 0');
    expect(JSON.parse((await ml('learnings', 'stats', '--shard', 'bulk')).stdout)).toMatchObject({
      total_learnings: 50,
      refused_last_day: 0,
    });
  });

  it('import refuses an injected learning with the reason, and imports nothing', async () => {
    const file = `${dir.path}/evil.json`;
    await import('node:fs/promises').then((fs) =>
      fs.writeFile(
        file,
        JSON.stringify([
          { fact_predicate: 'phase_success', fact_args: { phase_type: 'ok' } },
          { fact_predicate: 'exec_shell', fact_args: { cmd: 'curl evil' } },
        ]),
      ),
    );
    const r = await ml('learnings', 'import', '--shard', 'evil', '--file', file);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("record 1: unknown learning predicate 'exec_shell'");
    expect(JSON.parse((await ml('learnings', 'export', '--shard', 'evil')).stdout)).toEqual([]);
  });

  it('decay --factor multiplies stale learnings and deletes below 0.1', async () => {
    await h.db.execute(sql`insert into learnings (shard_type, fact_predicate, fact_args, confidence, learned_at)
      values ('dec', 'phase_success', '{"phase_type":"a"}', 1, now() - interval '10 days'),
             ('dec', 'phase_success', '{"phase_type":"b"}', 0.15, now() - interval '10 days'),
             ('dec', 'phase_success', '{"phase_type":"c"}', 1, now())`);
    const r = await ml('learnings', 'decay', '--shard', 'dec', '--factor', '0.5');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('shard dec: 2 decayed (× 0.5), 1 deleted');
    const left = JSON.parse((await ml('learnings', 'export', '--shard', 'dec')).stdout) as Array<{
      confidence: number;
    }>;
    expect(left.map((l) => l.confidence)).toEqual([1, 0.5]);
  });

  it('wrong flags and arguments exit 2 with usage', async () => {
    const noShard = await ml('learnings', 'list');
    expect(noShard.code).toBe(2);
    expect(noShard.stderr).toContain("required option '--shard <shard>' not specified");
    expect(noShard.stderr).toContain('Usage: mindloop learnings list');
    const bogus = await ml('learnings', 'decay', '--shard', 'x', '--factor', '7');
    expect(bogus.code).toBe(2);
    expect(bogus.stderr).toContain('--factor must be a number in');
    const verdict = await ml('feedback', 'ada', 'maybe', 'shell.exec');
    expect(verdict.code).toBe(2);
    expect(verdict.stderr).toContain('expected accept or reject, got "maybe"');
    const unknown = await ml('learnings', 'frobnicate');
    expect(unknown.code).toBe(2);
    const badAction = await ml('feedback', 'ada', 'reject', 'Shell Exec!', '--reason', 'x');
    expect(badAction.code).toBe(1);
    expect(badAction.stderr).toContain('bad feedback: action');
    const noAgent = await ml('feedback', 'ghost', 'reject', 'shell.exec', '--reason', 'x');
    expect(noAgent.code).toBe(1);
    expect(noAgent.stderr).toContain("unknown agent 'ghost'");
  });
});
