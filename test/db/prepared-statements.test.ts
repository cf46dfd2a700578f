/**
 * The tick's statements are named, so the server parses and plans each once per connection. On
 * the embedded PGlite every connection shares one session, where two clients preparing the same
 * name would collide ("prepared statement … already exists"): each client tags its names, and
 * drops them when it closes.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type DbHandle } from '../../db/client.js';
import { shapedStatement, statements } from '../../db/prepared.js';
import { agents, agentConfig } from '../../db/schema/index.js';
import { runMigrations } from '../../db/migrate.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../runtime/embedded-postgres.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';

const probe = statements('test_probe', (db, name) => ({
  agent: db
    .select({ id: agents.id })
    .from(agents)
    .where(sql`${agents.id} = ${sql.placeholder('id')}`)
    .prepare(name('agent')),
}));

/** An upsert of a config value, with (`n`) or without (`p`) the agent's name changed in the same statement. */
let renders = 0;
const shaped = shapedStatement<'p' | 'n'>('test_shaped', (db, shape) => {
  renders++;
  const agentId = sql.placeholder('agentId') as unknown as string;
  const upsert = db
    .insert(agentConfig)
    .values({ agentId, key: 'k', value: sql.placeholder('value') as unknown as object })
    .onConflictDoUpdate({ target: [agentConfig.agentId, agentConfig.key], set: { value: sql`excluded.value` } });
  const rename = db
    .update(agents)
    .set({ name: sql.placeholder('name') as unknown as string, lastSeenAt: sql.placeholder('at') as unknown as Date })
    .where(sql`${agents.id} = ${agentId}`);
  return shape === 'n'
    ? sql`with up as (${upsert.getSQL()}), renamed as (${rename.getSQL()}) select 1 as done`
    : sql`with up as (${upsert.getSQL()}) select 1 as done`;
});

/** The names the pool's one connection has prepared. */
async function prepared(h: DbHandle): Promise<string[]> {
  const r = await h.pool.query<{ name: string }>('select name from pg_prepared_statements');
  return r.rows.map((x) => x.name);
}

describe('on a real Postgres', () => {
  let pg: MigratedDatabase;
  beforeAll(async () => {
    pg = await migratedDatabase('mindloop_prepared', 1);
    await pg.db.insert(agents).values({ id: 'a1', name: 'a1' });
  });
  afterAll(() => pg.dispose());

  it('prepares a statement once per connection, by its name, and runs it again', async () => {
    expect(await probe(pg.db).agent.execute({ id: 'a1' })).toEqual([{ id: 'a1' }]);
    expect(await probe(pg.db).agent.execute({ id: 'nobody' })).toEqual([]);
    expect(await prepared(pg)).toEqual(['ml_test_probe_agent']);
  });

  it('renders each shape of a shaped statement once, names it after its shape, encodes values by their columns', async () => {
    const at = new Date('2026-11-29T01:02:03.000Z');
    for (const value of [{ a: [1, 'x'] }, { b: null }])
      expect((await shaped(pg.db, 'p', { agentId: 'a1', value })).rows).toEqual([{ done: 1 }]);
    expect(await pg.db.select({ value: agentConfig.value }).from(agentConfig)).toEqual([{ value: { b: null } }]);
    await shaped(pg.db, 'n', { agentId: 'a1', value: 'text', name: 'renamed', at });
    expect(await pg.db.select({ value: agentConfig.value }).from(agentConfig)).toEqual([{ value: 'text' }]);
    expect(await pg.db.select({ name: agents.name, at: agents.lastSeenAt }).from(agents)).toEqual([
      { name: 'renamed', at },
    ]);
    await shaped(pg.db, 'n', { agentId: 'a1', value: 2, name: 'again', at });
    expect(renders).toBe(2);
    expect((await prepared(pg)).filter((n) => n.startsWith('ml_test_shaped')).sort()).toEqual([
      'ml_test_shaped_n',
      'ml_test_shaped_p',
    ]);
  });
});

describe('on the embedded PGlite', () => {
  let embedded: EmbeddedPostgres;
  const handles: DbHandle[] = [];
  beforeAll(async () => {
    embedded = await startEmbeddedPostgres({ dataDir: 'memory://', port: 0, maxConnections: 8 });
    handles.push(createDb(embedded.url, { max: 1 }), createDb(embedded.url, { max: 1 }));
    await runMigrations(handles[0]!.pool);
    await handles[0]!.db.insert(agents).values({ id: 'a1', name: 'a1' });
  }, 60_000);
  afterAll(async () => {
    for (const h of handles) await h.close();
    await embedded.stop();
  });

  it('names them per client: two clients of its one session each prepare and reuse their own', async () => {
    for (const h of handles) expect(await probe(h.db).agent.execute({ id: 'a1' })).toEqual([{ id: 'a1' }]);
    for (const h of handles) expect(await probe(h.db).agent.execute({ id: 'nobody' })).toEqual([]);
    const names = await prepared(handles[1]!);
    expect(names).toHaveLength(2);
    for (const n of names) expect(n).toMatch(/^ml_test_probe_agent_[0-9a-f]{6}[0-9a-z]+$/);
    expect(new Set(names).size).toBe(2);
  });

  it("drops a client's statements when it closes, and a new client prepares its own", async () => {
    const before = await prepared(handles[1]!);
    await handles[0]!.close();
    const after = await prepared(handles[1]!);
    expect(after).toHaveLength(1);
    expect(before).toContain(after[0]);
    const next = createDb(embedded.url, { max: 1 });
    handles[0] = next;
    expect(await probe(next.db).agent.execute({ id: 'a1' })).toEqual([{ id: 'a1' }]);
    const now = await prepared(next);
    expect(now).toHaveLength(2);
    expect(now.filter((n) => !before.includes(n))).toHaveLength(1);
  });
});

it('refuses a scope defined twice (two texts under one name)', () => {
  expect(() => statements('test_probe', () => ({}))).toThrow(/scope test_probe is taken/);
  expect(() => shapedStatement('test_shaped', () => sql``)).toThrow(/scope test_shaped is taken/);
});
