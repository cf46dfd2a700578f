/**
 * The maintenance jobs with their real activities on the real Postgres.
 *
 * - Time-skipping: 30 simulated days of daily decay. The time-skipping test server has no
 *   Schedules ("Failed to create schedule"), so a test driver workflow sleeps a day and runs the
 *   real `learningDecayWorkflow` as a child, 30 times; the decay curve 1.0 … 0.9, 0.81, 0.729 …
 *   and deletion once below 0.1 is checked day by day.
 * - Dev server (`temporal server start-dev`, which has Schedules): `applySchedules` creates the
 *   four schedules, a second apply updates them and keeps a schedule paused in between paused;
 *   triggering the decay schedule runs `learningDecayWorkflow` against Postgres.
 * - The hourly abstracts digest visits each running agent and digests its recent responses by
 *   its configured strategy, with the diary and graph entries it chose (ids in the sources); a
 *   second run in the same hour is a repeat, the next hour's finds nothing new.
 *   (Once per period through the real Schedules: test/integration/schedules-idempotent.test.ts.)
 * - Memory pruning (by lru_limit, pinned entries kept) and process-log cleanup run as workflows.
 * - Bad input from the UI fails at once naming the field; the other jobs do their work.
 */
import { WorkflowFailedError } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLearningActivities } from '../../activities/learnings.js';
import { abstracts, agentConfig, agents, concepts, diaryEntries, llmRecentResponses } from '../../db/schema/index.js';
import { applySchedules, awaitScheduledRun, describeSchedules, maintenanceSchedules } from '../../workers/schedules.js';
import { migratedDatabase, type MigratedDatabase, toolPath } from '../helpers/env.js';
import { withWorker } from '../helpers/harness.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

let h: MigratedDatabase;
// The time-skipping server and the decay-clock driver's bundle, which the dev-server tests run too.
const suite = timeSkippingSuite('../fixtures/workflows/decay-clock.ts');

beforeAll(async () => {
  h = await migratedDatabase('mindloop_maintenance', 4);
  await h.db.insert(agents).values([
    { id: 'runner', name: 'Runner', status: 'running' },
    { id: 'sleeper', name: 'Sleeper', status: 'stopped' },
  ]);
});
afterAll(async () => {
  await h?.dispose();
});

function activities() {
  return {
    ...createLearningActivities({ db: h.db }),
    async stampLearnings({ shardType, at }: { shardType: string; at: string }) {
      // Learned an hour before the first daily run.
      const r = await h.db.execute(
        sql`update learnings set learned_at = ${at}::timestamptz - interval '1 hour' where shard_type = ${shardType}`,
      );
      return r.rowCount ?? 0;
    },
    async readConfidences({ shardType }: { shardType: string }) {
      const r = await h.db.execute<{ p: string; c: number }>(
        sql`select fact_args->>'phase_type' as p, confidence as c from learnings where shard_type = ${shardType}`,
      );
      return Object.fromEntries(r.rows.map((x) => [x.p, Number(x.c)]));
    },
  };
}

describe('learning decay over 30 simulated days (time-skipping)', () => {
  /** Run `fn` while a worker with the maintenance activities polls `taskQueue` on the time-skipping server. */
  const withMaintenanceWorker = <T>(taskQueue: string, fn: () => Promise<T>): Promise<T> =>
    withWorker(suite.env, { taskQueue, workflowBundle: suite.bundle, activities: activities() }, fn);

  it('follows the decay curve: 1.0 for 7 days, then 0.9, 0.81, 0.729 …, deleted once below 0.1', async () => {
    await h.db.execute(sql`insert into learnings (shard_type, fact_predicate, fact_args, confidence)
      values ('clock', 'phase_success', '{"phase_type":"full"}', 1.0), ('clock', 'phase_success', '{"phase_type":"half"}', 0.5)`);
    const t0 = Date.now();
    const days = (await withMaintenanceWorker('decay-clock', () =>
      suite.env.client.workflow.execute('decayClockWorkflow', {
        taskQueue: 'decay-clock',
        workflowId: 'decay-clock',
        args: [{ shardType: 'clock', days: 30 }],
      }),
    )) as Array<{ day: number; decayed: number; deleted: number; confidences: Record<string, number> }>;
    const wallMs = Date.now() - t0;

    const expected = (start: number, day: number): number | undefined => {
      const c = day < 7 ? start : start * 0.9 ** (day - 6);
      return c < 0.1 ? undefined : c;
    };
    const curve = days.map((d) => d.confidences.full ?? null);
    console.log(
      `decay curve (30 simulated days in ${wallMs} ms): ${curve.map((c) => (c === null ? '—' : c.toFixed(3))).join(' ')}`,
    );
    for (const d of days) {
      for (const [name, start] of [
        ['full', 1],
        ['half', 0.5],
      ] as const) {
        const want = expected(start, d.day);
        if (want === undefined) expect(d.confidences[name], `${name} day ${d.day}`).toBeUndefined();
        else expect(d.confidences[name], `${name} day ${d.day}`).toBeCloseTo(want, 5);
      }
    }
    expect(curve.slice(0, 6)).toEqual([1, 1, 1, 1, 1, 1]);
    expect(curve[6]).toBeCloseTo(0.9, 6);
    expect(curve[7]).toBeCloseTo(0.81, 6);
    expect(curve[8]).toBeCloseTo(0.729, 6);
    // 0.9^21 ≈ 0.109 on day 27; 0.9^22 ≈ 0.098 < 0.1 is deleted on day 28.
    expect(curve[26]).toBeCloseTo(0.9 ** 21, 5);
    expect(curve[27]).toBeNull();
    // Each run logs how many decayed and were deleted.
    expect(days.map((d) => d.deleted).reduce((a, b) => a + b, 0)).toBe(2);
    expect(days.find((d) => d.day === 28)).toMatchObject({ decayed: 1, deleted: 1 });
    expect(days.find((d) => d.day === 5)).toMatchObject({ decayed: 0, deleted: 0 });
    expect(wallMs).toBeLessThan(60_000);
  });

  it('the abstracts digest: per running agent, by its configured strategy, with the diary and graph entries it chose', async () => {
    await h.db.insert(agents).values({ id: 'digester', name: 'Digester', status: 'running' });
    await h.db.insert(agentConfig).values({ agentId: 'digester', key: 'abstracts_strategy', value: 'keyword_cluster' });
    await h.db.insert(llmRecentResponses).values(
      [1, 2, 3, 4, 5, 6].map((tick) => ({
        agentId: 'digester',
        tick,
        content: `Compost needs worms and air. Turn the heap on day ${tick}.`,
        tags: ['soil'],
      })),
    );
    const diary = await h.db
      .insert(diaryEntries)
      .values([
        {
          agentId: 'digester',
          tick: 2,
          title: 'Compost plan',
          content: 'turn weekly',
          pinned: true,
          tags: ['compost'],
        },
        { agentId: 'digester', tick: 4, title: 'Worm count', content: '40 worms', priority: 2 },
        { agentId: 'digester', tick: 40, title: 'Outside the span', content: 'later' },
      ])
      .returning({ id: diaryEntries.id });
    const graph = await h.db
      .insert(concepts)
      .values([
        { agentId: 'digester', name: 'soil' },
        { agentId: 'digester', name: 'rain', tags: ['weather'] },
      ])
      .returning({ id: concepts.id });
    // A second run in the same hour is a repeat; a run the next hour finds nothing new: one
    // abstract per span. The hour is the nominal time in the ids (as a schedule names its runs),
    // not the time-skipping server's clock, which may leap between runs.
    const digest = (workflowId: string, args: unknown) =>
      suite.env.client.workflow.execute('abstractsDigestWorkflow', { taskQueue: 'digest', workflowId, args: [args] });
    const [r, sameHour, nextHour] = await withMaintenanceWorker('digest', async () => [
      await digest('digest-2030-05-01T10:05:00Z', {}),
      await digest('digest-again-2030-05-01T10:59:59Z', { agentIds: ['digester'] }),
      await digest('digest-2030-05-01T11:05:00Z', { agentIds: ['digester'] }),
    ]);
    const period = {
      period: '2030-05-01T10',
      repeat: false,
      doneAt: expect.any(String),
      note: 'abstracts-digest for 2030-05-01T10: done',
    };
    expect(r).toEqual({
      agents: 2,
      period: '2030-05-01T10',
      repeat: false,
      note: 'abstracts-digest for 2030-05-01T10: 2 agents done, 0 already done before, 0 failed',
      results: [
        {
          agentId: 'digester',
          ok: true,
          result: {
            abstractId: expect.any(Number),
            created: true,
            strategy: 'keyword_cluster',
            responses: 6,
            ...period,
          },
        },
        {
          agentId: 'runner',
          ok: true,
          result: { abstractId: null, created: false, strategy: 'recency', responses: 0, ...period },
        },
      ],
    });
    const [a] = await h.db.select().from(abstracts).where(eq(abstracts.agentId, 'digester'));
    expect(a).toMatchObject({ strategy: 'keyword_cluster', tickFrom: 1, tickTo: 6, auto: true, trigger: 'interval' });
    expect(a!.title.length).toBeGreaterThan(0);
    expect(a!.sources.responses).toHaveLength(6);
    // Pinned first, then by priority; the entry outside the ticks is not chosen. The concept
    // named like a tag is; the unrelated one is not.
    expect(a!.sources.diary).toEqual([diary[0]!.id, diary[1]!.id]);
    expect(a!.sources.concepts).toEqual([graph[0]!.id]);
    expect(a!.summary).toContain(`Diary: "Compost plan" (#${diary[0]!.id}), "Worm count" (#${diary[1]!.id}).`);
    expect(a!.summary).toContain(`Concepts: soil (#${graph[0]!.id}).`);
    expect(a!.tags).toEqual(expect.arrayContaining(['soil', 'compost']));
    expect(sameHour).toMatchObject({
      agents: 1,
      period: '2030-05-01T10',
      repeat: true,
      note: 'abstracts-digest for 2030-05-01T10 already done for all 1 agents: nothing changed',
      results: [
        { agentId: 'digester', ok: true, result: { abstractId: a!.id, created: false, responses: 0, repeat: true } },
      ],
    });
    expect(nextHour).toMatchObject({
      agents: 1,
      period: '2030-05-01T11',
      repeat: false,
      results: [
        { agentId: 'digester', ok: true, result: { abstractId: null, created: false, responses: 0, repeat: false } },
      ],
    });
    expect(await h.db.select().from(abstracts).where(eq(abstracts.agentId, 'digester'))).toHaveLength(1);
    await h.db.update(agents).set({ status: 'stopped' }).where(eq(agents.id, 'digester'));
  });

  it('memory pruning and process-log cleanup run as workflows on their clock', async () => {
    await h.db.insert(agents).values({ id: 'pruned', name: 'Pruned', status: 'stopped' });
    await h.db.insert(agentConfig).values({ agentId: 'pruned', key: 'lru_limit', value: 10 });
    await h.db
      .insert(llmRecentResponses)
      .values(Array.from({ length: 12 }, (_, i) => ({ agentId: 'pruned', tick: i + 1, content: `reply ${i}` })));
    await h.db
      .insert(diaryEntries)
      .values(
        Array.from({ length: 13 }, (_, i) => ({ agentId: 'pruned', title: `e${i}`, content: 'x', pinned: i === 0 })),
      );
    await h.db.execute(sql`insert into process_log (agent_id, process_id, kind, status, closed_at, created_at)
      values ('pruned', 'ancient', 'x', 'close', now() - interval '40 days', now() - interval '40 days'),
             ('pruned', 'still-open', 'x', 'ok', null, now() - interval '40 days')`);
    const [pruned, cleaned, bad] = await withMaintenanceWorker('prune', async () => [
      await suite.env.client.workflow.execute('memoryPruningWorkflow', {
        taskQueue: 'prune',
        workflowId: 'prune-1',
        args: [{ agentIds: ['pruned'] }],
      }),
      await suite.env.client.workflow.execute('processLogCleanupWorkflow', {
        taskQueue: 'prune',
        workflowId: 'cleanup-1',
        args: [{ olderThanDays: 30 }],
      }),
      await suite.env.client.workflow
        .execute('memoryPruningWorkflow', {
          taskQueue: 'prune',
          workflowId: 'prune-bad',
          args: [{ agentIds: 'pruned' }],
        })
        .catch((e: unknown) => e),
    ]);
    // The pinned diary entry is never archived: 13 entries, 12 unpinned, 10 kept → 2 archived.
    expect(pruned).toMatchObject({
      agents: 1,
      repeat: false,
      results: [
        { agentId: 'pruned', ok: true, result: { archivedResponses: 2, archivedDiary: 2, limit: 10, repeat: false } },
      ],
    });
    expect((cleaned as { deleted: number }).deleted).toBeGreaterThanOrEqual(1);
    const left = await h.db.execute<{ p: string }>(
      sql`select process_id as p from process_log where agent_id = 'pruned' and kind = 'x'`,
    );
    expect(left.rows.map((r) => r.p)).toEqual(['still-open']);
    expect(bad).toBeInstanceOf(WorkflowFailedError);
    expect(((bad as WorkflowFailedError).cause as Error).message).toMatch(
      /memoryPruningWorkflow: invalid input — .*agentIds/,
    );
  });

  it('bad input from the UI fails at once, naming the field', async () => {
    const err = await withMaintenanceWorker('decay-bad', () =>
      suite.env.client.workflow.execute('learningDecayWorkflow', {
        taskQueue: 'decay-bad',
        workflowId: 'decay-bad',
        args: [{ factor: 3, colour: 'red' }],
      }),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause as Error;
    expect(cause.message).toMatch(/learningDecayWorkflow: invalid input — .*factor/);
    expect(cause.message).toMatch(/colour|Unrecognized key/);
  });
});

describe('Temporal Schedules (dev server)', () => {
  let env: TestWorkflowEnvironment;
  beforeAll(async () => {
    env = await TestWorkflowEnvironment.createLocal({
      server: { executable: { type: 'existing-path', path: toolPath('temporal') } },
    });
  });
  afterAll(async () => {
    await env?.teardown();
  });

  it('apply is idempotent, keeps a paused schedule paused, and a triggered decay runs against Postgres', async () => {
    const first = await applySchedules(env.client, { taskQueue: 'maint' });
    expect(first).toEqual(maintenanceSchedules.map((s) => ({ id: s.id, action: 'created' })));
    await env.client.schedule.getHandle('maintenance/memory-pruning').pause('paused from the UI');
    const second = await applySchedules(env.client, { taskQueue: 'maint' });
    expect(second.map((s) => s.action)).toEqual(maintenanceSchedules.map(() => 'updated'));
    const rows = await describeSchedules(env.client);
    expect(rows.map((r) => [r.id, r.workflowType, r.paused])).toEqual([
      ['maintenance/learning-decay', 'learningDecayWorkflow', false],
      ['maintenance/abstracts-digest', 'abstractsDigestWorkflow', false],
      ['maintenance/memory-pruning', 'memoryPruningWorkflow', true],
      ['maintenance/process-log-cleanup', 'processLogCleanupWorkflow', false],
      ['maintenance/embeddings-backfill', 'embeddingsBackfillWorkflow', false],
    ]);
    const decay = rows.find((r) => r.id === 'maintenance/learning-decay')!;
    const next = new Date(decay.nextActionTimes[0]!).getTime() - Date.now();
    expect(next).toBeGreaterThan(0);
    expect(next).toBeLessThanOrEqual(86_400_000);

    await h.db.execute(sql`insert into learnings (shard_type, fact_predicate, fact_args, confidence, learned_at)
      values ('sched', 'phase_success', '{"phase_type":"old"}', 1.0, now() - interval '8 days'),
             ('sched', 'phase_success', '{"phase_type":"gone"}', 0.105, now() - interval '8 days')`);
    const { result } = await withWorker(
      env,
      { taskQueue: 'maint', workflowBundle: suite.bundle, activities: activities() },
      () =>
        awaitScheduledRun<{ decayed: number; deleted: number }>(env.client, 'maintenance/learning-decay', () =>
          env.client.schedule.getHandle('maintenance/learning-decay').trigger(),
        ),
    );
    expect(result.decayed).toBeGreaterThanOrEqual(2);
    expect(result.deleted).toBeGreaterThanOrEqual(1);
    const left = await h.db.execute<{ p: string; c: number }>(
      sql`select fact_args->>'phase_type' as p, confidence as c from learnings where shard_type = 'sched'`,
    );
    expect(left.rows.map((r) => [r.p, Number(r.c)])).toEqual([['old', expect.closeTo(0.9, 6)]]);
  });
});

describe('the other jobs', () => {
  it('memory pruning archives beyond lru_limit (logged), cleanup deletes old closed process-log rows, active agents are the running ones', async () => {
    const acts = createLearningActivities({ db: h.db });
    expect(await acts.listActiveAgents()).toEqual(['runner']);
    await h.db.execute(
      sql`insert into agent_config (agent_id, key, value) values ('runner', 'lru_limit', '10'::jsonb)`,
    );
    await h.db.execute(sql`insert into llm_recent_responses (agent_id, tick, content)
      select 'runner', g, 'reply ' || g from generate_series(1, 15) g`);
    const r = await acts.pruneMemory({ agentId: 'runner' });
    expect(r).toMatchObject({ archivedResponses: 5, limit: 10 });
    const { rows } = await h.db.execute<{ message: string }>(
      sql`select message from process_log where agent_id = 'runner' and kind = 'schedule'`,
    );
    expect(rows[0]!.message).toContain('archived 5 responses');
    await h.db.execute(sql`insert into process_log (agent_id, process_id, kind, status, closed_at, created_at)
      values ('runner', 'old', 'x', 'close', now() - interval '40 days', now() - interval '40 days'),
             ('runner', 'open', 'x', 'ok', null, now() - interval '40 days')`);
    expect(await acts.cleanupProcessLog({ olderThanDays: 30 })).toEqual({ deleted: 1 });
    await expect(acts.cleanupProcessLog({ olderThanDays: -1 })).rejects.toMatchObject({ type: 'InvalidInput' });
  });
});
