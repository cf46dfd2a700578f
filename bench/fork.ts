/**
 * `npm run bench -- fork`: spawn time of a successor fork for an agent with 10 000 rows —
 * from the client's `workflow.start` call to the fork's copy being committed (`forks.ready_at`,
 * the same machine's clock) — over 20 forks, p50/p99. Each fork runs to its end (a config
 * patch: evaluation, verdict, cleanup), so the copies are destroyed between runs and the
 * parent's state stays as it was. Targets: p50 ≤ 2 s, p99 ≤ 5 s (required: < 30 s).
 *
 * Each fork must copy exactly the rows the parent holds, table by table, in the tables a fork
 * copies (`copyableTables`, the copy's own list). The parent's lifeforce budgets and ledger are
 * among them and grow with every fork (the parent funds each one: a carve, settled and closed),
 * so the parent is counted again before each fork rather than once.
 */
import { eq, sql } from 'drizzle-orm';
import { createActivities } from '../activities/index.js';
import type { Db } from '../db/client.js';
import { copyableTables } from '../db/queries/fork-copy.js';
import { diaryEntries, forks } from '../db/schema/index.js';
import type { Stack } from '../runtime/stack.js';
import { seedForkableAgent, snapshotAgent } from '../test/helpers/fork-fixture.js';
import { summarize, withBenchWorker } from './lib.js';

/** The benchmark's sizes; `smoke` the smallest that still copies, patches, evaluates and cleans up. */
export const forkSizes = { full: { rows: 10_000, runs: 20, warmups: 2 }, smoke: { rows: 300, runs: 2, warmups: 1 } };

/** The agent's rows in each table a fork copies (the copy's own list), by table. */
async function copyableRows(db: Db, agentId: string): Promise<Record<string, number>> {
  const union = sql.join(
    copyableTables.map(
      (t) => sql`select ${t}::text as t, count(*)::int as n from ${sql.identifier(t)} where agent_id = ${agentId}`,
    ),
    sql` union all `,
  );
  const r = await db.execute<{ t: string; n: number }>(union);
  return Object.fromEntries(r.rows.map((x) => [x.t, Number(x.n)]));
}

/** Tables whose count in `copied` is not `expected`'s, as `table copied/expected`. */
function differences(expected: Record<string, number>, copied: Record<string, number>): string[] {
  return copyableTables
    .filter((t) => (copied[t] ?? 0) !== (expected[t] ?? 0))
    .map((t) => `${t} ${copied[t] ?? 0}/${expected[t] ?? 0}`);
}

const sumRows = (byTable: Record<string, number>) => Object.values(byTable).reduce((a, b) => a + b, 0);

export async function measureForks(
  stack: Stack,
  opts: { dataDir: string; rows?: number; runs?: number; warmups?: number },
) {
  const target = opts.rows ?? forkSizes.full.rows;
  const runs = opts.runs ?? forkSizes.full.runs;
  const warmups = opts.warmups ?? forkSizes.full.warmups;
  const db = stack.db.db;
  const agentId = 'bench-fork-parent';
  const seeded = await seedForkableAgent(db, agentId, { responses: 60 });
  for (let i = seeded; i < target; i += 1000) {
    await db.insert(diaryEntries).values(
      Array.from({ length: Math.min(1000, target - i) }, (_, j) => ({
        agentId,
        title: `entry ${i + j}`,
        content: `diary text ${i + j} `.repeat(8),
      })),
    );
  }
  const rows = sumRows(await copyableRows(db, agentId));
  const parentBefore = await snapshotAgent(db, agentId);
  const copiedRows: number[] = [];

  const spawn: number[] = [];
  const serverSpawn: number[] = [];
  const total: number[] = [];
  const cleanup: number[] = [];
  // The whole `mindloop` family, as a production worker has it. The fork under test is a config
  // patch evaluated by abstracts replay without the judge: no model is called, so the router
  // needs no keys and no local model.
  const activities = createActivities({ db, dataDir: opts.dataDir, llm: { env: {}, toolsDir: '' } });
  await withBenchWorker(stack, { taskQueue: 'mindloop', activities }, async (client) => {
    for (let i = -warmups; i < runs; i++) {
      const forkId = `bench-${i < 0 ? `warm${-i}` : i}-${Date.now().toString(36)}`;
      const expected = await copyableRows(db, agentId);
      const t0 = Date.now();
      const handle = await client.workflow.start('successorForkWorkflow', {
        taskQueue: 'mindloop',
        workflowId: `fork/${forkId}`,
        args: [
          {
            agentId,
            forkId,
            patch: { kind: 'config', values: { delay_ms: 5 } },
            evaluation: { kind: 'abstracts_replay', lastN: 60, window: 10 },
          },
        ],
      });
      await handle.result();
      const t1 = Date.now();
      const [f] = await db.select().from(forks).where(eq(forks.id, forkId));
      if (!f?.readyAt || !f.startedAt || !f.cleanedAt || !f.finishedAt)
        throw new Error(`fork ${forkId} has no ready/clean timestamps`);
      const usage = f.usage as { rows?: number; copied?: Record<string, number> };
      const wrong = differences(expected, usage.copied ?? {});
      if (wrong.length || usage.rows !== sumRows(expected)) {
        throw new Error(
          `fork ${forkId} copied ${String(usage.rows)} rows, the parent had ${sumRows(expected)} in the tables a fork copies${wrong.length ? ` (copied/parent: ${wrong.join(', ')})` : ''}`,
        );
      }
      if (i < 0) continue;
      copiedRows.push(sumRows(expected));
      spawn.push(f.readyAt.getTime() - t0);
      serverSpawn.push(f.readyAt.getTime() - f.startedAt.getTime());
      total.push(t1 - t0);
      cleanup.push(f.cleanedAt.getTime() - f.finishedAt.getTime());
    }
  });
  if ((await snapshotAgent(db, agentId)) !== parentBefore)
    throw new Error("the parent's state changed during the benchmark");
  const s = summarize(spawn);
  const ss = summarize(serverSpawn);
  const t = summarize(total);
  const c = summarize(cleanup);
  return {
    metrics: {
      spawn_p50_ms: s.p50,
      spawn_p99_ms: s.p99,
      rows,
      rows_copied_max: Math.max(...copiedRows),
      runs,
      spawn_from_workflow_start_p50_ms: ss.p50,
      spawn_from_workflow_start_p99_ms: ss.p99,
      fork_total_p50_ms: t.p50,
      fork_total_p99_ms: t.p99,
      cleanup_p50_ms: c.p50,
    },
    notes: {
      spawn: `client workflow.start call → forks.ready_at (copy of all ${rows} rows committed in one transaction)`,
      rows: `rows: the parent's rows in the tables a fork copies, before the first fork; each fork copied exactly what the parent held then, table by table; rows_copied_max: the last forks' copies, which also carry the lifeforce budgets and ledger rows of the forks the parent funded before them`,
      parent:
        "the parent's state (every table but its fork records and its lifeforce budgets and ledger) compared row for row before and after: unchanged",
      spawn_from_workflow_start: 'workflow start time (server) → forks.ready_at',
      fork_total:
        'start → result of a whole fork: copy, config patch, abstracts replay of 60 replies, verdict, cleanup',
      cleanup: 'verdict recorded → copy destroyed (delete of the fork agent, cascading)',
      stack: 'embedded: Temporal CLI dev server + PGlite; one worker in this process',
      targets: `spawn p50 <= 2000 ms: ${s.p50 <= 2000 ? 'met' : 'missed'}; p99 <= 5000 ms: ${s.p99 <= 5000 ? 'met' : 'missed'} (required: < 30 s)`,
    },
  };
}
