/**
 * A tick that fails for a reason of its own ends in the open, never in a retry loop or a
 * failed workflow; a loop that does end says so; a loop started again goes on from its last
 * tick. Real dev server, real Postgres, the scripted model.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import { and, asc, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { formatExecution } from '../../cli/status.js';
import { agentLoopStatus } from '../../runtime/operator.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { agents, diaryEntries, llmRecentResponses, llmRegistry, processLog } from '../../db/schema/index.js';
import { unhealthyAgentLoops } from '../../runtime/agent-loops.js';
import type { AgentStatus, agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import { repoToolsDir } from '../helpers/env.js';
import { startLoop, withWorker, type WorkerSpec } from '../helpers/harness.js';
import { thinkScript } from '../helpers/scripted.js';
import { startKillableStack, waitFor, type KillableStack } from '../helpers/worker-process.js';

let ks: KillableStack;
let client: Client;

let n = 0;
const script = thinkScript(() => {
  n++;
  return `Step ${n}.\n${renderCommandBlock([{ cmdId: 'd1', type: 'diary.add', args: { title: `Step ${n}`, content: 'a step' } }])}`;
});

beforeAll(async () => {
  ks = await startKillableStack('loop-failures');
  client = ks.client;
  for (const id of ['poisoned', 'ended']) {
    await ks.stack.db.db.insert(agents).values({ id, name: id });
    await ks.stack.db.db.insert(llmRegistry).values({
      agentId: id,
      name: 'script',
      provider: 'scripted',
      model: `scripted-${id}`,
      role: 'agent',
      priority: 1,
    });
  }
}, 240_000);
afterAll(async () => {
  await ks?.stop();
});

/** A worker on `mindloop` with the real activities and the scripted model. */
const scripted = (): WorkerSpec => ({
  taskQueue: 'mindloop',
  workflowBundle: { codePath: ks.bundlePath },
  activities: createActivities({ db: ks.stack.db.db, llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: script } }),
});

const status = (h: WorkflowHandle) => h.query<AgentStatus>('status');
const until = <T>(what: string, probe: () => Promise<T | undefined>) => waitFor(what, 90_000, probe, 200);

function start(agentId: string, delayMs = 100): Promise<WorkflowHandle<typeof agentLoopWorkflow>> {
  return startLoop(client, 'mindloop', { agentId, settings: { delayMs }, reflexes: false });
}

describe('a tick that fails for a reason of its own', () => {
  it('is recorded and the loop goes on; failing every tick, it becomes a Core Outage that ends by itself', async () => {
    const db = ks.stack.db.db;
    await withWorker(ks.stack.temporal.connection, scripted(), async () => {
      const h = await start('poisoned');
      const before = await until('a first tick', async () =>
        (await status(h)).tick >= 2 ? (await status(h)).tick : undefined,
      );
      // The context read fails for the request itself (a missing table): not an outage, no retry.
      await db.execute(sql`alter table ethics_policies rename to ethics_policies_away`);
      try {
        const failing = await until('three failed ticks in a row and a Core Outage', async () => {
          const s = await status(h);
          return s.counters.tickFailures >= 3 && s.operatingMode === 'core_outage' ? s : undefined;
        });
        expect(failing.lastTickFailure).toMatchObject({
          step: 'think',
          error: expect.stringMatching(/ethics_policies/),
        });
        expect(failing.tick).toBeGreaterThan(before);
        expect(failing.degraded).toBeNull();
        expect((await h.describe()).status.name).toBe('RUNNING');
      } finally {
        await db.execute(sql`alter table ethics_policies_away rename to ethics_policies`);
      }
      // The table is back: the next think succeeds, the outage closes, the loop ticks and writes again.
      const healed = await until('the loop back to normal', async () => {
        const s = await status(h);
        return s.operatingMode === 'normal' && s.last !== null && s.tick > s.lastTickFailure!.tick ? s : undefined;
      });
      expect(healed.counters.tickFailures).toBeGreaterThanOrEqual(3);
      await h.signal('stop');
      expect(await h.result()).toMatchObject({ reason: 'stopped' });
    });
    const failures = await db
      .select()
      .from(processLog)
      .where(and(eq(processLog.agentId, 'poisoned'), eq(processLog.kind, 'tick_failure')));
    expect(failures.length).toBeGreaterThanOrEqual(3);
    expect(failures.every((f) => f.status === 'error' && /^think: .*ethics_policies/.test(f.message ?? ''))).toBe(true);
    const outage = await db
      .select()
      .from(processLog)
      .where(and(eq(processLog.agentId, 'poisoned'), eq(processLog.kind, 'core_outage')));
    expect(outage.map((o) => o.status)).toEqual(expect.arrayContaining(['offline', 'close']));
    expect((await db.select().from(agents).where(eq(agents.id, 'poisoned')))[0]!.status).toBe('stopped');
  }, 300_000);
});

describe('a loop that ends is visible, and a new start goes on from its last tick', () => {
  it('status says TERMINATED with the reason; doctor marks the row failed; start again continues the ticks', async () => {
    const db = ks.stack.db.db;
    await withWorker(ks.stack.temporal.connection, scripted(), async () => {
      // Terminated while it paces, between two ticks: a tick cut off between its reply and its
      // commands would leave a reply without its diary entry, which the count below excludes.
      const h = await start('ended', 1500);
      const reached = await until('three ticks, then pacing', async () => {
        const s = await status(h);
        return s.tick >= 3 && s.phase === 'pacing' ? s.tick : undefined;
      });
      await h.terminate('pulled by the operator');

      const r = await agentLoopStatus(client, 'ended');
      expect(r.execution).toMatchObject({
        status: 'TERMINATED',
        reason: expect.stringMatching(/^terminated by .+: pulled by the operator$/),
      });
      // The last status still answers (by replay), beside how the run ended.
      expect(r.status?.tick).toBeGreaterThanOrEqual(reached);
      expect(formatExecution(r)).toMatch(
        /^workflow agent\/ended is TERMINATED \(since .*\): terminated by .+: pulled by the operator\n {2}start it again with `mindloop start ended`/,
      );

      // The row still claims to run: doctor's check finds it and records why.
      expect((await db.select().from(agents).where(eq(agents.id, 'ended')))[0]!.status).toBe('running');
      const bad = await unhealthyAgentLoops(client, db, { fix: true });
      expect(bad).toEqual([expect.objectContaining({ agentId: 'ended', workflowStatus: 'TERMINATED' })]);
      expect((await db.select().from(agents).where(eq(agents.id, 'ended')))[0]!.status).toBe('failed');
      const logged = await db
        .select()
        .from(processLog)
        .where(and(eq(processLog.agentId, 'ended'), eq(processLog.kind, 'loop_not_running')));
      expect(logged).toHaveLength(1);
      expect(await unhealthyAgentLoops(client, db, { fix: true })).toEqual([]);

      const lastTick = Number(
        (await db.execute<{ t: string }>(sql`select max(tick) as t from llm_recent_responses where agent_id = 'ended'`))
          .rows[0]!.t,
      );
      const again = await start('ended');
      const first = await until('a tick of the new run', async () => {
        const s = await status(again);
        return s.last ? s.tick : undefined;
      });
      expect(first).toBeGreaterThan(lastTick);
      await until('two ticks of the new run', async () =>
        (await status(again)).tick >= lastTick + 2 ? true : undefined,
      );
      await again.signal('stop');
      await again.result();
    });
    // One reply per tick, numbered on: nothing was walked through again from tick 1.
    const ticks = (
      await db
        .select({ tick: llmRecentResponses.tick })
        .from(llmRecentResponses)
        .where(eq(llmRecentResponses.agentId, 'ended'))
        .orderBy(asc(llmRecentResponses.tick))
    ).map((r) => r.tick);
    expect(ticks).toEqual(Array.from({ length: ticks.length }, (_, i) => i + 1));
    expect(await db.select().from(diaryEntries).where(eq(diaryEntries.agentId, 'ended'))).toHaveLength(ticks.length);
  }, 300_000);
});
