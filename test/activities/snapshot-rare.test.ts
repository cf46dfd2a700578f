/**
 * What rarely changes in a tick's snapshot (settings, ethics policies, usable LLM rows,
 * learnings) is kept per agent and read again only when a write changed those rows, whoever
 * wrote them and however: a Drizzle update, a write that keeps `updated_at` (an LLM row's health),
 * raw SQL, a delete, a learning taught by another agent into this one's shard. Nothing written:
 * none of the four is read, and the snapshot holds the same. On the real Postgres and on the
 * embedded PGlite.
 */
import { eq, sql } from 'drizzle-orm';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTickSnapshots, type TickSnapshots } from '../../activities/tick/snapshot.js';
import { createDb, type DbHandle } from '../../db/client.js';
import { runMigrations } from '../../db/migrate.js';
import { recordRowHealth, usableRegistry } from '../../db/queries/llm.js';
import { saveLearning } from '../../db/queries/learnings.js';
import { agentConfig, agents, ethicsPolicies, llmRegistry } from '../../db/schema/index.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../runtime/embedded-postgres.js';
import { migratedDatabase } from '../helpers/env.js';

/** Statements sent while `recording`: their text. */
const sent: string[] = [];
let recording = false;
const originalQuery = pg.Client.prototype.query;
beforeAll(() => {
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const first = args[0];
    if (recording) sent.push(typeof first === 'string' ? first : String((first as { text?: string })?.text ?? ''));
    return (originalQuery as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof originalQuery;
});
afterAll(() => {
  pg.Client.prototype.query = originalQuery;
});

/** The rare reads among what was sent (the agent's row read names their tables for the fingerprint only). */
const rareReads = () =>
  sent.filter(
    (s) =>
      !/from "agents"/.test(s) &&
      /^\s*select .* from "(agent_config|ethics_policies|llm_registry|learnings)"/is.test(s),
  );

function suite(name: string, open: () => Promise<{ h: DbHandle; close(): Promise<void> }>) {
  describe(name, () => {
    let h: DbHandle;
    let close: () => Promise<void>;
    let snapshots: TickSnapshots;
    let tick = 0;
    const agentId = 'rare-a';
    beforeAll(async () => {
      ({ h, close } = await open());
      snapshots = createTickSnapshots({ db: h.db, llm: { registry: (id) => usableRegistry(h.db, id) } });
      await h.db.insert(agents).values([
        { id: agentId, name: agentId },
        { id: 'rare-b', name: 'rare-b' },
      ]);
      await h.db.insert(llmRegistry).values({
        agentId,
        name: 'mind',
        provider: 'scripted',
        model: 'script',
        role: 'agent',
        priority: 1,
      });
      await h.db.insert(agentConfig).values({ agentId, key: 'novelty_threshold', value: 0.2 });
      await h.db.insert(ethicsPolicies).values([
        { agentId, title: 'be kind', rule: 'do no harm' },
        { agentId, title: 'be brief', rule: 'say little' },
      ]);
    }, 60_000);
    afterAll(async () => close?.());

    /** The next tick's snapshot (as think reads it), and how many rare reads it took. */
    async function next() {
      sent.length = 0;
      recording = true;
      const s = await snapshots.snapshotOf({ agentId }, ++tick, { fresh: true });
      recording = false;
      return { s, reads: rareReads().length };
    }

    it('reads the four once, then not again while nothing changes', async () => {
      const first = await next();
      expect(first.reads).toBe(4);
      expect(first.s.config).toEqual({ novelty_threshold: 0.2 });
      const again = await next();
      expect(again.reads).toBe(0);
      expect(again.s.config).toEqual(first.s.config);
      expect(again.s.ethics.map((e) => e.title)).toEqual(first.s.ethics.map((e) => e.title));
      expect(again.s.registry.map((r) => r.id)).toEqual(first.s.registry.map((r) => r.id));
    });

    it('sees a setting updated through Drizzle', async () => {
      await h.db.update(agentConfig).set({ value: 0.3 }).where(eq(agentConfig.agentId, agentId));
      const r = await next();
      expect(r.reads).toBe(4);
      expect(r.s.config).toEqual({ novelty_threshold: 0.3 });
      expect((await next()).reads).toBe(0);
    });

    it('sees an LLM row’s health written with its updated_at kept', async () => {
      const [row] = await usableRegistry(h.db, agentId);
      await recordRowHealth(h.db, row!, 'endpoint down');
      const r = await next();
      expect(r.s.registry[0]!.consecutiveFailures).toBe(row!.consecutiveFailures + 1);
    });

    it('sees raw SQL and a delete', async () => {
      await h.db.execute(sql`update ethics_policies set rule = 'do no harm, ever' where title = 'be kind'`);
      expect((await next()).s.ethics.find((e) => e.title === 'be kind')?.rule).toBe('do no harm, ever');
      await h.db.delete(ethicsPolicies).where(eq(ethicsPolicies.title, 'be brief'));
      expect((await next()).s.ethics.map((e) => e.title)).toEqual(['be kind']);
    });

    it('sees a learning another agent taught into its shard', async () => {
      expect((await next()).s.learnings).toEqual([]);
      await saveLearning(h.db, {
        shardType: `agent:${agentId}`,
        agentId: 'rare-b',
        predicate: 'avoid_pattern',
        args: { action: 'diary.add', pattern: 'secret' },
      });
      const r = await next();
      expect(r.s.learnings.map((l) => l.predicate)).toEqual(['avoid_pattern']);
      expect((await next()).reads).toBe(0);
    });

    it('hands each tick its own copies', async () => {
      const a = await next();
      (a.s.config as Record<string, unknown>).novelty_threshold = 'changed by a reader';
      a.s.ethics.length = 0;
      const b = await next();
      expect(b.reads).toBe(0);
      expect(b.s.config).toEqual({ novelty_threshold: 0.3 });
      expect(b.s.ethics).toHaveLength(1);
    });
  });
}

suite('on the real Postgres', async () => {
  const h = await migratedDatabase('snaprare');
  return { h, close: () => h.dispose() };
});

suite('on the embedded PGlite', async () => {
  let embedded: EmbeddedPostgres | undefined = await startEmbeddedPostgres({
    dataDir: 'memory://',
    port: 0,
    maxConnections: 8,
  });
  const h = createDb(embedded.url, { max: 1 });
  await runMigrations(h.pool);
  return {
    h,
    async close() {
      await h.close();
      await embedded?.stop();
      embedded = undefined;
    },
  };
});
