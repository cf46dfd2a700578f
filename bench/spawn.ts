/**
 * `npm run bench -- spawn`: spawn time of each kind of descendant for a parent with 10 000 rows
 * — from the client's `workflow.start` call to the workflow's result: admitted, the child's rows
 * copied in one transaction, its budget carved, its own loop started, the parent's note written —
 * over 20 spawns a kind, p50/p99. Between runs the child is stopped and removed, with what its
 * spawn added to the parent, so each spawn starts from the same parent. Target: clone p50 ≤ 2 s
 * (the fork copy's).
 */
import { and, eq, like } from 'drizzle-orm';
import { createActivities } from '../activities/index.js';
import { workflowIds } from '../core/ids.js';
import { spawnTypes, type SpawnResult, type SpawnType } from '../core/society/spawn.js';
import { agentPeers, agents, diaryEntries, llmMemory, notes, spawns } from '../db/schema/index.js';
import type { Stack } from '../runtime/stack.js';
import { startSpawn } from '../runtime/workflow-starts.js';
import { countRows, seedForkableAgent } from '../test/helpers/fork-fixture.js';
import { summarize, withBenchWorker } from './lib.js';

/** The benchmark's sizes; `smoke` the smallest that still spawns each kind, runs and removes it. */
export const spawnSizes = { full: { rows: 10_000, runs: 20, warmups: 2 }, smoke: { rows: 300, runs: 1, warmups: 1 } };

export async function measureSpawns(
  stack: Stack,
  opts: { dataDir: string; rows?: number; runs?: number; warmups?: number },
) {
  const target = opts.rows ?? spawnSizes.full.rows;
  const runs = opts.runs ?? spawnSizes.full.runs;
  const warmups = opts.warmups ?? spawnSizes.full.warmups;
  const db = stack.db.db;
  const parentId = 'bench-spawn-parent';
  // The rest as the parent's diary and notebook, half each: a trained child inherits the diary.
  for (let i = await seedForkableAgent(db, parentId, { responses: 60 }); i < target; i += 1000) {
    const k = Math.min(1000, target - i);
    const half = Math.ceil(k / 2);
    await db.insert(diaryEntries).values(
      Array.from({ length: half }, (_, j) => ({
        agentId: parentId,
        title: `entry ${i + j}`,
        content: `diary text ${i + j} `.repeat(8),
      })),
    );
    if (k > half)
      await db
        .insert(llmMemory)
        .values(Array.from({ length: k - half }, (_, j) => ({ agentId: parentId, content: `remember ${i + j}` })));
  }
  const rows = await countRows(db, parentId);

  const total: Record<SpawnType, number[]> = { clone: [], trained: [], newborn: [] };
  const ready: Record<SpawnType, number[]> = { clone: [], trained: [], newborn: [] };
  const copied: Record<SpawnType, number> = { clone: 0, trained: 0, newborn: 0 };
  const activities = createActivities({ db, dataDir: opts.dataDir, llm: { env: {}, toolsDir: '' } });
  await withBenchWorker(stack, { taskQueue: 'mindloop', activities }, async (client) => {
    for (let i = -warmups; i < runs; i++) {
      // Interleaved kinds: each sees the same machine state.
      for (const type of spawnTypes) {
        const name = `bench-${type}-${i < 0 ? `warm${-i}` : i}`;
        const t0 = Date.now();
        const handle = await startSpawn(client, { parentId, type, name });
        const r: SpawnResult = await handle.result();
        const t1 = Date.now();
        if (r.status !== 'running') throw new Error(`spawn ${name} ended ${r.status}: ${r.reason}`);
        await client.workflow.getHandle(workflowIds.agent(name)).terminate('benchmark over');
        await db.delete(agents).where(eq(agents.id, name));
        await db.delete(spawns).where(eq(spawns.childAgentId, name));
        await db.delete(agentPeers).where(and(eq(agentPeers.agentId, parentId), eq(agentPeers.peerAgentId, name)));
        await db.delete(notes).where(and(eq(notes.agentId, parentId), like(notes.sender, 'spawn:%')));
        if (i < 0) continue;
        total[type].push(t1 - t0);
        ready[type].push(r.spawnMs ?? Number.NaN);
        copied[type] = r.rows ?? 0;
      }
    }
  });
  if ((await countRows(db, parentId)) !== rows) throw new Error('the parent changed during the benchmark');
  const metrics: Record<string, number> = { rows, runs };
  for (const type of spawnTypes) {
    const t = summarize(total[type]);
    const r = summarize(ready[type]);
    metrics[`${type}_p50_ms`] = t.p50;
    metrics[`${type}_p99_ms`] = t.p99;
    metrics[`${type}_copy_p50_ms`] = r.p50;
    metrics[`${type}_rows`] = copied[type];
  }
  return {
    metrics,
    notes: {
      spawn:
        'client workflow.start call → the spawn workflow’s result: admitted, the child’s rows committed in one transaction, its budget, its own loop started, the parent’s note (`<kind>_p50_ms`, `<kind>_p99_ms`)',
      copy: 'workflow start (server) → the child’s rows committed (`<kind>_copy_p50_ms`)',
      rows: 'rows the parent owns (60 replies and the fork fixture, the rest diary and notebook half each); `<kind>_rows`: what each kind inherits',
      stack: 'embedded: Temporal CLI dev server + PGlite; one worker in this process',
      target: `clone p50 <= 2000 ms: ${metrics.clone_p50_ms! <= 2000 ? 'met' : 'missed'}`,
    },
  };
}
