/**
 * The generated migrations against a real Postgres and against PGlite served over its
 * socket (the embedded default), both through the one `createDb` pg path; plus the
 * drizzle-zod insert schemas.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { eq, getTableName, sql } from 'drizzle-orm';
import { createDb, type DbHandle } from '../../db/client.js';
import { runMigrations } from '../../db/migrate.js';
import { migratedPglite, type MigratedDatabase } from '../helpers/env.js';
import {
  agentOwnedTables,
  agents,
  commandLog,
  insertAgentSchema,
  insertCommandLogSchema,
  learnings,
  tableNames,
} from '../../db/schema/index.js';

const baseUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** Every table the runtime needs, the lifeforce ledger included. Kept literal: the schema must match it. */
const specTables = [
  'agents',
  'agent_config',
  'system_prompts',
  'ethics_policies',
  'agent_peers',
  'agent_reputation',
  'llm_registry',
  'llm_calls',
  'llm_recent_responses',
  'llm_memory',
  'diary_entries',
  'concepts',
  'links',
  'abstracts',
  'notes',
  'unverified_facts',
  'goals',
  'goal_links',
  'tasks',
  'process_log',
  'command_log',
  'anti_stagnation_metrics',
  'stagnation_strategies',
  'thinking_methods',
  'learnings',
  'preference_counts',
  'tool_registry',
  'discovered_tools',
  'generated_tools_audit',
  'decision_log',
  'escalations',
  'partnership_messages',
  'campaigns',
  'campaign_phases',
  'forks',
  'verdicts',
  'lifeforce_ledger',
  'spawns',
  'peer_ratings',
];

/** The Postgres SQLSTATE of an error, looking through Drizzle's `DrizzleQueryError` wrapper. */
function sqlState(err: unknown): string | undefined {
  for (let e: unknown = err; e && typeof e === 'object'; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

async function expectSqlState(promise: Promise<unknown>, code: string): Promise<void> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  expect(caught, `expected SQLSTATE ${code}`).toBeDefined();
  expect(sqlState(caught)).toBe(code);
}

async function publicTables(pool: pg.Pool): Promise<Set<string>> {
  const { rows } = await pool.query<{ table_name: string }>(
    `select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`,
  );
  return new Set(rows.map((r) => r.table_name));
}

async function appliedMigrations(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ n: string }>('select count(*) as n from drizzle.__migrations');
  return Number(rows[0]?.n);
}

/** The same checks for any backend; `handle` is migrated once by the caller. */
function schemaChecks(backend: string, handle: () => DbHandle): void {
  it(`${backend}: every table the runtime needs exists`, async () => {
    const tables = await publicTables(handle().pool);
    expect(specTables.filter((t) => !tables.has(t))).toEqual([]);
    expect(tableNames.filter((t) => !tables.has(t))).toEqual([]);
    expect(tables.size).toBe(tableNames.length);
  });

  it(`${backend}: agent-owned tables carry a NOT NULL agent_id, cascading, and an index led by it`, async () => {
    const { pool } = handle();
    const names = agentOwnedTables.map((t) => getTableName(t));
    const { rows: cols } = await pool.query<{ table_name: string; is_nullable: string }>(
      `select table_name, is_nullable from information_schema.columns
        where table_schema = 'public' and column_name = 'agent_id' and table_name = any($1)`,
      [names],
    );
    const nullable = new Map(cols.map((c) => [c.table_name, c.is_nullable]));
    for (const name of names) expect(nullable.get(name), `${name}.agent_id`).toBe('NO');

    const { rows: fks } = await pool.query<{ table_name: string }>(
      `select c.conrelid::regclass::text as table_name
         from pg_constraint c
         join pg_attribute a on a.attrelid = c.conrelid and a.attnum = c.conkey[1]
        where c.contype = 'f' and c.confrelid = 'public.agents'::regclass
          and a.attname = 'agent_id' and c.confdeltype = 'c'`,
    );
    const cascading = new Set(fks.map((r) => r.table_name));
    expect(names.filter((n) => !cascading.has(n))).toEqual([]);

    const { rows: idx } = await pool.query<{ table_name: string }>(
      `select distinct i.indrelid::regclass::text as table_name
         from pg_index i
         join pg_attribute a on a.attrelid = i.indrelid and a.attnum = i.indkey[0]
        where a.attname = 'agent_id'`,
    );
    const indexed = new Set(idx.map((r) => r.table_name));
    expect(names.filter((n) => !indexed.has(n))).toEqual([]);
  });

  it(`${backend}: running the migrations again is a no-op`, async () => {
    const { pool } = handle();
    const before = await appliedMigrations(pool);
    expect(before).toBeGreaterThan(0);
    await runMigrations(pool);
    expect(await appliedMigrations(pool)).toBe(before);
    expect((await publicTables(pool)).size).toBe(tableNames.length);
  });

  it(`${backend}: command_log rejects a second (agent_id, tick, cmd_id)`, async () => {
    const { db } = handle();
    await db.insert(agents).values({ id: 'demo', name: 'Demo' }).onConflictDoNothing();
    const row = insertCommandLogSchema.parse({
      agentId: 'demo',
      tick: 7,
      cmdId: 'c1',
      type: 'diary.add',
      args: { title: 't' },
      status: 'applied',
    });
    await db.insert(commandLog).values(row);
    await expectSqlState(db.insert(commandLog).values({ ...row, status: 'error' }), '23505');
    // The idempotent way to apply: the retry finds the first attempt's row.
    const retried = await db.insert(commandLog).values(row).onConflictDoNothing().returning();
    expect(retried).toEqual([]);
    // Same cmd_id on another tick is a different command.
    await db.insert(commandLog).values({ ...row, tick: 8 });
  });

  it(`${backend}: learnings are unique per shard by (fact_predicate, fact_args), whatever the key order`, async () => {
    const { db } = handle();
    await db.insert(learnings).values({
      shardType: 'coding',
      factPredicate: 'avoid_pattern',
      factArgs: { pattern: 'eval', reason: 'unsafe' },
    });
    await expectSqlState(
      db.insert(learnings).values({
        shardType: 'coding',
        factPredicate: 'avoid_pattern',
        factArgs: { reason: 'unsafe', pattern: 'eval' },
      }),
      '23505',
    );
    await db.insert(learnings).values({
      shardType: 'coding',
      factPredicate: 'avoid_pattern',
      factArgs: { pattern: 'exec', reason: 'unsafe' },
    });
    // Uniqueness is per shard: another shard may hold the same fact.
    await db.insert(learnings).values({
      shardType: 'writing',
      factPredicate: 'avoid_pattern',
      factArgs: { pattern: 'eval', reason: 'unsafe' },
    });
  });

  it(`${backend}: enum CHECKs hold in the database and deleting an agent cascades`, async () => {
    const { db, pool } = handle();
    await expectSqlState(pool.query(`insert into agents (id, name, kind) values ('bad-kind', 'x', 'alien')`), '23514');
    await expectSqlState(pool.query(`insert into agents (id, name) values ('a/b', 'slash')`), '23514');
    await db.delete(agents).where(eq(agents.id, 'demo'));
    const left = await db.select({ n: sql<number>`count(*)::int` }).from(commandLog);
    expect(left[0]?.n).toBe(0);
  });
}

describe('schema on Postgres', () => {
  const dbName = `mindloop_schema_${process.pid}_${Date.now()}`;
  let admin: pg.Client | undefined;
  let handle: DbHandle | undefined;

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: baseUrl });
    await admin.connect();
    await admin.query(`create database "${dbName}"`);
    const url = new URL(baseUrl);
    url.pathname = `/${dbName}`;
    handle = createDb(url.toString(), { max: 4 });
    await runMigrations(handle.pool);
  });

  afterAll(async () => {
    await handle?.close();
    await admin?.query(`drop database if exists "${dbName}"`);
    await admin?.end();
  });

  schemaChecks('postgres', () => handle!);
});

describe('schema on the embedded PGlite (its thread, its socket)', () => {
  let handle: MigratedDatabase | undefined;

  beforeAll(async () => {
    handle = await migratedPglite(4);
  });

  afterAll(async () => {
    await handle?.dispose();
  });

  schemaChecks('pglite', () => handle!);
});

describe('zod insert schemas', () => {
  it('accepts a valid agent', () => {
    const parsed = insertAgentSchema.parse({
      id: 'demo',
      name: 'Demo',
      kind: 'root',
      identity: { persona: 'curious' },
    });
    expect(parsed).toMatchObject({ id: 'demo', name: 'Demo', kind: 'root' });
  });

  it('rejects a missing name, naming the field', () => {
    const result = insertAgentSchema.safeParse({ id: 'demo' });
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((i) => i.path.join('.'))).toContain('name');
  });

  it('rejects an unknown enum value, naming the field', () => {
    const result = insertAgentSchema.safeParse({ id: 'demo', name: 'Demo', kind: 'alien', operatingMode: 'normal' });
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((i) => i.path.join('.'))).toEqual(['kind']);
  });

  it('rejects an id that cannot be a workflow id segment', () => {
    const result = insertAgentSchema.safeParse({ id: 'agent/demo', name: 'Demo' });
    expect(result.success).toBe(false);
    expect(result.error?.issues.map((i) => i.path.join('.'))).toEqual(['id']);
  });
});
