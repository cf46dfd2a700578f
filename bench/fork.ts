/**
 * `npm run bench -- fork`: spawn time of a successor fork for an agent with 10 000 rows —
 * from the client's `workflow.start` call to the fork's copy being committed (`forks.ready_at`,
 * the same machine's clock) — over 20 forks, p50/p99. Each fork runs to its end (a config
 * patch: evaluation, verdict, cleanup), so the copies are destroyed between runs and the
 * parent keeps exactly its rows. Targets: p50 ≤ 2 s, p99 ≤ 5 s (required: < 30 s).
 */
import { eq } from 'drizzle-orm';
import { createActivities } from '../activities/index.js';
import { diaryEntries, forks } from '../db/schema/index.js';
import type { Stack } from '../runtime/stack.js';
import { countRows, seedForkableAgent } from '../test/helpers/fork-fixture.js';
import { summarize, withBenchWorker } from './lib.js';

export async function measureForks(stack: Stack, opts: { dataDir: string; rows?: number; runs?: number }) {
  const target = opts.rows ?? 10_000;
  const runs = opts.runs ?? 20;
  const db = stack.db.db;
  const agentId = 'bench-fork-parent';
  let rows = await seedForkableAgent(db, agentId, { responses: 60 });
  for (let i = rows; i < target; i += 1000) {
    await db.insert(diaryEntries).values(Array.from({ length: Math.min(1000, target - i) }, (_, j) => ({ agentId, title: `entry ${i + j}`, content: `diary text ${i + j} `.repeat(8) })));
  }
  rows = await countRows(db, agentId);

  const spawn: number[] = [];
  const serverSpawn: number[] = [];
  const total: number[] = [];
  const cleanup: number[] = [];
  // The whole `mindloop` family, as a production worker has it. The fork under test is a config
  // patch evaluated by abstracts replay without the judge: no model is called, so the router
  // needs no keys and no local model.
  const activities = createActivities({ db, dataDir: opts.dataDir, llm: { env: {}, toolsDir: '' } });
  await withBenchWorker(stack, { taskQueue: 'mindloop', activities }, async (client) => {
    for (let i = -2; i < runs; i++) {
      const forkId = `bench-${i < 0 ? `warm${-i}` : i}-${Date.now().toString(36)}`;
      const t0 = Date.now();
      const handle = await client.workflow.start('successorForkWorkflow', {
        taskQueue: 'mindloop',
        workflowId: `fork/${forkId}`,
        args: [{ agentId, forkId, patch: { kind: 'config', values: { delay_ms: 5 } }, evaluation: { kind: 'abstracts_replay', lastN: 60, window: 10 } }],
      });
      await handle.result();
      const t1 = Date.now();
      const [f] = await db.select().from(forks).where(eq(forks.id, forkId));
      if (!f?.readyAt || !f.startedAt || !f.cleanedAt || !f.finishedAt) throw new Error(`fork ${forkId} has no ready/clean timestamps`);
      if (Number((f.usage as { rows?: number }).rows) !== rows) throw new Error(`fork ${forkId} copied ${String((f.usage as { rows?: number }).rows)} rows, parent has ${rows}`);
      if (i < 0) continue;
      spawn.push(f.readyAt.getTime() - t0);
      serverSpawn.push(f.readyAt.getTime() - f.startedAt.getTime());
      total.push(t1 - t0);
      cleanup.push(f.cleanedAt.getTime() - f.finishedAt.getTime());
    }
  });
  if ((await countRows(db, agentId)) !== rows) throw new Error('the parent changed during the benchmark');
  const s = summarize(spawn);
  const ss = summarize(serverSpawn);
  const t = summarize(total);
  const c = summarize(cleanup);
  return {
    metrics: {
      spawn_p50_ms: s.p50,
      spawn_p99_ms: s.p99,
      rows,
      runs,
      spawn_from_workflow_start_p50_ms: ss.p50,
      spawn_from_workflow_start_p99_ms: ss.p99,
      fork_total_p50_ms: t.p50,
      fork_total_p99_ms: t.p99,
      cleanup_p50_ms: c.p50,
    },
    notes: {
      spawn: 'client workflow.start call → forks.ready_at (copy of all 10 000 rows committed in one transaction)',
      spawn_from_workflow_start: 'workflow start time (server) → forks.ready_at',
      fork_total: 'start → result of a whole fork: copy, config patch, abstracts replay of 60 replies, verdict, cleanup',
      cleanup: 'verdict recorded → copy destroyed (delete of the fork agent, cascading)',
      stack: 'embedded: Temporal CLI dev server + PGlite; one worker in this process',
      targets: 'spawn p50 <= 2000 ms, p99 <= 5000 ms (required: < 30 s)',
    },
  };
}
