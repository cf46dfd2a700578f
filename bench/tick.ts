/**
 * tick: the agent loop's own cost with an instant scripted model, on the embedded stack.
 * - overhead per tick for 1 agent (delay 0): wall time between consecutive recorded ticks;
 * - aggregate ticks/s with 50 agents looping at once;
 * - worker RSS with 500 agent workflows open and idle;
 * each also as a ratio to the no-op activity round trip measured in the same run.
 */
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { and, asc, eq, sql } from 'drizzle-orm';
import { createActivities } from '../activities/index.js';
import { agents, llmRecentResponses, llmRegistry } from '../db/schema/index.js';
import type { Stack } from '../runtime/stack.js';
import { bundleWorkflows } from '../workers/queues.js';
import type { AgentStatus, agentLoopWorkflow } from '../workflows/agent-loop.js';
import { summarize } from './lib.js';

async function seed(stack: Stack, ids: string[]): Promise<void> {
  await stack.db.db.insert(agents).values(ids.map((id) => ({ id, name: id }))).onConflictDoNothing();
  await stack.db.db
    .insert(llmRegistry)
    .values(ids.map((id) => ({ agentId: id, name: 'instant', provider: 'scripted' as const, model: 'instant', role: 'agent' as const, priority: 1, params: { replies: ['A quick thought.'] } })))
    .onConflictDoNothing();
}

export async function measureTicks(stack: Stack, toolsDir: string): Promise<Record<string, number>> {
  const connection = await NativeConnection.connect(stack.temporal.connection);
  const worker = await Worker.create({
    connection,
    namespace: stack.temporal.namespace,
    taskQueue: 'bench-tick',
    workflowBundle: await bundleWorkflows(),
    activities: createActivities({ db: stack.db.db, llm: { env: {}, toolsDir } }),
    maxCachedWorkflows: 1000,
  });
  const client = new Client({ connection: await Connection.connect(stack.temporal.connection), namespace: stack.temporal.namespace });
  const start = (id: string, args: Parameters<typeof agentLoopWorkflow>[0]) =>
    client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', { taskQueue: 'bench-tick', workflowId: `agent/${id}`, args: [args] });
  try {
    return await worker.runUntil(async () => {
      // 1 agent, 200 ticks back to back.
      await seed(stack, ['solo']);
      await (await start('solo', { agentId: 'solo', maxTicks: 200, settings: { delayMs: 0 } })).result();
      const rows = await stack.db.db
        .select({ tick: llmRecentResponses.tick, at: llmRecentResponses.createdAt })
        .from(llmRecentResponses)
        .where(eq(llmRecentResponses.agentId, 'solo'))
        .orderBy(asc(llmRecentResponses.tick));
      const gaps = rows.slice(21).map((r, i) => r.at.getTime() - rows[i + 20]!.at.getTime()); // skip warm-up
      const solo = summarize(gaps);

      // 50 agents at once, 20 ticks each.
      const many = Array.from({ length: 50 }, (_, i) => `many${i}`);
      await seed(stack, many);
      const t0 = performance.now();
      await Promise.all((await Promise.all(many.map((id) => start(id, { agentId: id, maxTicks: 20, settings: { delayMs: 0 } })))).map((h) => h.result()));
      const seconds = (performance.now() - t0) / 1000;
      const [{ n } = { n: 0 }] = await stack.db.db
        .select({ n: sql<number>`count(*)::int` })
        .from(llmRecentResponses)
        .where(and(sql`${llmRecentResponses.agentId} like 'many%'`));

      // 500 agents idle after their first tick.
      const idle = Array.from({ length: 500 }, (_, i) => `idle${i}`);
      await seed(stack, idle);
      const handles = await Promise.all(idle.map((id) => start(id, { agentId: id, settings: { idle: { on: true, wakeOn: ['note'], timeoutMs: 3_600_000 } } })));
      for (const h of handles) {
        while ((await h.query<AgentStatus>('status')).tick < 1) await new Promise((r) => setTimeout(r, 100));
      }
      global.gc?.();
      const rssMb = process.memoryUsage().rss / 1024 / 1024;
      await Promise.all(handles.map((h) => h.terminate('benchmark done')));
      return {
        overhead_p50_ms: solo.p50,
        overhead_p99_ms: solo.p99,
        ticks_per_s_50_agents: n / seconds,
        rss_mb_500_idle_agents: rssMb,
      };
    });
  } finally {
    await client.connection.close();
    await connection.close();
  }
}
