/**
 * `npm run bench -- learnings`: the learning store on a real Postgres (a fresh database on
 * BENCH_DATABASE_URL / TEST_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres):
 * saves/s and reinforcements/s for 1000 learnings (every guard query runs), loads/s of that
 * shard, and the decay job's duration over 100 000 learnings.
 */
import { sql } from 'drizzle-orm';
import { decayLearnings, loadLearnings, saveLearning } from '../db/queries/learnings.js';
import { createDb } from '../db/client.js';
import { runMigrations } from '../db/migrate.js';
import { benchAdminUrl, scratchDatabase, summarize } from './lib.js';

/** Learnings saved, loads of the shard, rows the decay runs over; `smoke`: a few of each (the keys keep the full run's names). */
export const learningsSizes = {
  full: { saves: 1000, loads: 200, decayRows: 100_000 },
  smoke: { saves: 20, loads: 5, decayRows: 1000 },
};

export async function measureLearnings(
  sizes = learningsSizes.full,
): Promise<{ metrics: Record<string, number>; notes: Record<string, string> }> {
  const scratch = await scratchDatabase('mindloop_bench_learnings');
  const h = createDb(scratch.url, { max: 4 });
  try {
    await runMigrations(h.pool);
    const db = h.db;
    // Limits high but finite: the rate-limit count and the shard-cap count run on every save.
    const limits = { maxSavesPerMinute: 1e9, maxPerShard: 1e9 };
    const n = sizes.saves;
    const predicates = ['avoid_pattern', 'style_preference', 'language_hint', 'phase_success'] as const;
    const argsOf = (i: number) => {
      switch (predicates[i % 4]) {
        case 'avoid_pattern':
          return { action: 'shell.exec', pattern: `pattern ${i}` };
        case 'style_preference':
          return { style: `style ${i}`, stance: 'prefer' };
        case 'language_hint':
          return { language: 'go', hint: `hint ${i}` };
        default:
          return { phase_type: `phase ${i}` };
      }
    };
    // Warm-up (connections, plans).
    const warmups = Math.min(50, n);
    for (let i = 0; i < warmups; i++)
      await saveLearning(
        db,
        { shardType: 'warmup', predicate: predicates[i % 4]!, args: argsOf(i), source: 'bench' },
        limits,
      );

    const saveMs: number[] = [];
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const s = performance.now();
      await saveLearning(
        db,
        { shardType: 'bench', predicate: predicates[i % 4]!, args: argsOf(i), source: 'bench' },
        limits,
      );
      saveMs.push(performance.now() - s);
    }
    const saveTotal = performance.now() - t0;

    const t1 = performance.now();
    for (let i = 0; i < n; i++)
      await saveLearning(
        db,
        { shardType: 'bench', predicate: predicates[i % 4]!, args: argsOf(i), source: 'bench' },
        limits,
      );
    const reinforceTotal = performance.now() - t1;

    const loads = sizes.loads;
    const loadMs: number[] = [];
    let rows = 0;
    for (let i = 0; i < loads; i++) {
      const s = performance.now();
      rows = (await loadLearnings(db, { shardType: 'bench', limit: 1000 })).length;
      loadMs.push(performance.now() - s);
    }
    const loadSum = loadMs.reduce((a, b) => a + b, 0);
    // Rehydration's load: one agent's top 20.
    await db.execute(sql`insert into agents (id, name) values ('bench-agent', 'Bench')`);
    await db.execute(sql`update learnings set agent_id = 'bench-agent' where shard_type = 'bench' and id % 10 = 0`);
    const rehydrateMs: number[] = [];
    for (let i = 0; i < loads; i++) {
      const s = performance.now();
      await loadLearnings(db, { agentId: 'bench-agent', limit: 20 });
      rehydrateMs.push(performance.now() - s);
    }

    // Decay over 100 000 learnings (`decayRows`): half stale (8–30 days old), a tenth of those about to fall below 0.1.
    await db.execute(sql`insert into learnings (shard_type, fact_predicate, fact_args, confidence, learned_at)
      select 'decay-' || (g % 10), 'phase_success', jsonb_build_object('phase_type', 'p' || g),
             case when g % 20 = 0 then 0.105 else 0.9 end,
             case when g % 2 = 0 then now() - make_interval(days => 8 + g % 22) else now() - make_interval(hours => g % 100) end
      from generate_series(1, ${sizes.decayRows}::int) g`);
    await db.execute(sql`analyze learnings`);
    const total = Number(
      (await db.execute<{ n: string }>(sql`select count(*) as n from learnings where shard_type like 'decay-%'`))
        .rows[0]!.n,
    );
    const d0 = performance.now();
    const decay = await decayLearnings(db);
    const decayMs = performance.now() - d0;
    const d1 = performance.now();
    const decay2 = await decayLearnings(db);
    const decay2Ms = performance.now() - d1;

    const save = summarize(saveMs);
    const load = summarize(loadMs);
    const rehydrate = summarize(rehydrateMs);
    return {
      metrics: {
        saves_per_s: n / (saveTotal / 1000),
        save_p50_ms: save.p50,
        save_p99_ms: save.p99,
        reinforcements_per_s: n / (reinforceTotal / 1000),
        loads_per_s: loads / (loadSum / 1000),
        load_p50_ms: load.p50,
        load_rows: rows,
        rehydration_loads_per_s: loads / (rehydrateMs.reduce((a, b) => a + b, 0) / 1000),
        rehydration_load_p50_ms: rehydrate.p50,
        decay_100k_ms: decayMs,
        decay_100k_decayed: decay.decayed,
        decay_100k_deleted: decay.deleted,
        decay_100k_second_run_ms: decay2Ms,
        decay_100k_second_run_decayed: decay2.decayed,
        decay_rows_total: total,
      },
      notes: {
        database: `real Postgres (${new URL(benchAdminUrl).host}), fresh database, migrations applied`,
        saves: `${n} distinct learnings, one at a time through saveLearning (allow-list + zod, advisory lock, rate-limit and cap counts, upsert, event row); limits set high so none refuses`,
        loads: `loadLearnings of the ${n}-learning shard (confidence > 0.3, by confidence then recency), ${loads} times; rehydration: one agent's top 20`,
        decay: `decayLearnings over all shards: one UPDATE (× 0.9 where learned_at older than 7 days) + one DELETE (< 0.1) in a transaction, ${total} decay rows + the ${n + warmups} saved ones`,
      },
    };
  } finally {
    await h.close();
    await scratch.drop();
  }
}
