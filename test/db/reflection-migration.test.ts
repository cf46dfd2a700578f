/**
 * Replies recorded before `reflection` held the summary of their ideas carry the model's name
 * there; the migration that follows the vector index replaces it with the summary the row's
 * `ideas` hold (or null), and leaves a real summary alone. Run on a real Postgres: migrated up to
 * the migration before, rows written as the old code wrote them, then migrated to the end.
 */
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reflectionOf } from '../../core/novelty.js';
import { migrationsFolder, runMigrations } from '../../db/migrate.js';
import { freshPostgresDatabase, tempDir } from '../helpers/env.js';

const tag = '0031_reflection_summaries';
let scratch: { url: string; drop(): Promise<void> };
let pool: pg.Pool;
const dir = tempDir('migrations-');

beforeAll(async () => {
  scratch = await freshPostgresDatabase('reflection_mig');
  pool = new pg.Pool({ connectionString: scratch.url, max: 2 });
  // The migrations as they were before this one.
  cpSync(migrationsFolder, dir.path, { recursive: true });
  const journalPath = join(dir.path, 'meta', '_journal.json');
  const journal = JSON.parse(readFileSync(journalPath, 'utf8')) as { entries: Array<{ tag: string }> };
  const at = journal.entries.findIndex((e) => e.tag === tag);
  expect(at).toBeGreaterThan(0);
  journal.entries = journal.entries.slice(0, at);
  writeFileSync(journalPath, JSON.stringify(journal));
  rmSync(join(dir.path, `${tag}.sql`));
  const client = await pool.connect();
  try {
    await migrate(drizzle(client), {
      migrationsFolder: dir.path,
      migrationsSchema: 'drizzle',
      migrationsTable: '__migrations',
    });
  } finally {
    client.release();
  }
}, 120_000);

afterAll(async () => {
  await pool?.end();
  await scratch?.drop();
  dir.remove();
});

describe('the reflection migration', () => {
  it('turns a model name into the ideas summary, null without ideas, and leaves summaries alone', async () => {
    await pool.query(`insert into agents (id, name) values ('ada', 'ada')`);
    const ideas = { new: ['cache the prompt', 'batch the writes'], refined: ['retry budget'], discarded: [] };
    const long = { new: ['x'.repeat(600), 'y'.repeat(600)], refined: [], discarded: [] };
    const rows: Array<[number, string | null, unknown]> = [
      [1, 'local:tiny-model', ideas],
      [2, 'openai:gpt-4o-mini', { new: [], refined: [], discarded: [] }],
      [3, 'new: a real summary · refined: kept', ideas],
      [4, 'anthropic:claude-3-haiku', long],
      [5, null, ideas],
      [6, 'scripted:script', { new: 'not a list' }],
    ];
    for (const [tick, reflection, i] of rows)
      await pool.query(
        `insert into llm_recent_responses (agent_id, tick, content, reflection, ideas) values ('ada', $1, $2, $3, $4)`,
        [tick, `reply ${tick}`, reflection, JSON.stringify(i)],
      );

    await runMigrations(pool);

    const after = await pool.query<{ tick: string; reflection: string | null }>(
      `select tick, reflection from llm_recent_responses where agent_id = 'ada' order by tick`,
    );
    const byTick = Object.fromEntries(after.rows.map((r) => [Number(r.tick), r.reflection]));
    // The summary is the one the reflexes write today.
    expect(byTick[1]).toBe(reflectionOf(ideas));
    expect(byTick[1]).toBe('new: cache the prompt; batch the writes · refined: retry budget');
    expect(byTick[2]).toBeNull();
    expect(byTick[3]).toBe('new: a real summary · refined: kept');
    expect(byTick[4]).toBe(reflectionOf(long));
    expect(byTick[4]!.length).toBe(1000);
    expect(byTick[5]).toBeNull();
    expect(byTick[6]).toBeNull();
  });
});
