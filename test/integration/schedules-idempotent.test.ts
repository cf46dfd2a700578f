/**
 * Each maintenance job runs at most once per period, through the real Temporal Schedules of a
 * dev server and the real activities on Postgres: for learning decay (daily), the abstracts
 * digest (hourly, per running agent), memory pruning (6-hourly, per running agent) and
 * process-log cleanup (daily):
 *
 * - a trigger runs the job for the current period; a second trigger (the UI's button, or
 *   `mindloop schedules trigger`) in the same period changes no row and its result says it
 *   was a repeat — even though, between the two, rows arrived that the job would act on;
 * - a backfill of the previous period (not done yet) runs, for that period's nominal time;
 *   the same backfill again is a repeat that changes nothing.
 *
 * Also, on the database alone: two runs for one period at the same time apply once, and a
 * job that fails after its work leaves neither its work nor its ledger row.
 */
import { ScheduleOverlapPolicy } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { and, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLearningActivities } from '../../activities/learnings.js';
import { maintenanceJobs, periodOf, type MaintenanceJob } from '../../core/maintenance-period.js';
import { runOncePerPeriod, type Tx } from '../../db/queries/maintenance-runs.js';
import { agentConfig, agents, learnings, llmRecentResponses, maintenanceRuns } from '../../db/schema/index.js';
import { applySchedules, awaitScheduledRun, maintenanceSchedules } from '../../workers/schedules.js';
import { migratedDatabase, type MigratedDatabase, toolPath } from '../helpers/env.js';
import { startWorkers, type RunningWorkers } from '../helpers/harness.js';
import { repoRoot, run } from '../helpers/spawn.js';
import { bundle } from '../helpers/temporal.js';

const taskQueue = 'maint-once';
let h: MigratedDatabase;
let env: TestWorkflowEnvironment;
let worker: RunningWorkers;

beforeAll(async () => {
  h = await migratedDatabase('mindloop_sched_once', 6);
  env = await TestWorkflowEnvironment.createLocal({
    server: { executable: { type: 'existing-path', path: toolPath('temporal') } },
  });
  await applySchedules(env.client, { taskQueue });
  // Paused: only this test's triggers and backfills start runs (both work on a paused schedule).
  for (const s of maintenanceSchedules) await env.client.schedule.getHandle(s.id).pause('test drives it');
  worker = await startWorkers(env, [
    {
      taskQueue,
      workflowBundle: await bundle('../../workflows/maintenance.ts'),
      activities: createLearningActivities({ db: h.db }),
    },
  ]);
}, 120_000);
afterAll(async () => {
  await worker?.stop();
  await env?.teardown();
  await h?.dispose();
});

const scheduleOf = (job: MaintenanceJob) =>
  maintenanceSchedules.find((s) => s.workflowType === maintenanceJobs[job].workflowType)!;
const everyMs = (job: MaintenanceJob) => maintenanceJobs[job].periodMs;
const offsetMs = (job: MaintenanceJob) => {
  const [n, unit] = (scheduleOf(job).offset ?? '0 minutes').split(' ');
  return Number(n) * (unit!.startsWith('hour') ? 3_600_000 : 60_000);
};

/** Wait out the last seconds of a period, so that two triggers of the test fall in one. */
async function awayFromPeriodEnd(job: MaintenanceJob): Promise<void> {
  const left = Date.parse(periodOf(job, new Date()).end) - Date.now();
  if (left < 30_000) await new Promise((r) => setTimeout(r, left + 1_000));
}

/** A scheduled run's id holds its nominal time to the second: keep two triggers a second apart. */
async function nextSecond(): Promise<void> {
  await new Promise((r) => setTimeout(r, 1_100 - (Date.now() % 1_000)));
}

const trigger = (job: MaintenanceJob) =>
  awaitScheduledRun<Record<string, unknown>>(env.client, scheduleOf(job).id, () =>
    env.client.schedule.getHandle(scheduleOf(job).id).trigger(),
  );

/** The previous period's nominal time (the schedule's interval and offset), and a backfill of just it. */
function previousNominal(job: MaintenanceJob): Date {
  const start = Date.parse(periodOf(job, new Date()).start);
  return new Date(start - everyMs(job) + offsetMs(job));
}
const backfill = (job: MaintenanceJob, at: Date) =>
  awaitScheduledRun<Record<string, unknown>>(env.client, scheduleOf(job).id, () =>
    env.client.schedule.getHandle(scheduleOf(job).id).backfill({
      start: new Date(at.getTime() - 30_000),
      end: new Date(at.getTime() + 30_000),
      overlap: ScheduleOverlapPolicy.ALLOW_ALL,
    }),
  );

const ledger = async (job: MaintenanceJob) =>
  (await h.db.select().from(maintenanceRuns).where(eq(maintenanceRuns.job, job)).orderBy(maintenanceRuns.id)).map(
    (r) => ({ period: r.periodKey, scope: r.scope, by: r.workflowId }),
  );

const ml = (...args: string[]) =>
  run(process.execPath, [`${repoRoot}/bin/mindloop.mjs`, ...args], {
    TEMPORAL_ADDRESS: env.address,
    TEMPORAL_NAMESPACE: 'default',
    DATABASE_URL: h.url,
  });
const rows = async (q: ReturnType<typeof sql>) => (await h.db.execute(q)).rows;

describe('each maintenance job runs once per period (real Schedules, dev server)', () => {
  it('learning decay: a second trigger (CLI) the same day decays nothing; backfills run once for their own day', async () => {
    await h.db.insert(learnings).values([
      {
        shardType: 'once',
        factPredicate: 'phase_success',
        factArgs: { phase_type: 'old' },
        confidence: 1,
        learnedAt: new Date(Date.now() - 10 * 86_400_000),
      },
      { shardType: 'once', factPredicate: 'phase_success', factArgs: { phase_type: 'fresh' }, confidence: 1 },
    ]);
    const snapshot = () =>
      rows(
        sql`select fact_args->>'phase_type' as p, confidence, last_decayed_for from learnings where shard_type = 'once' order by id`,
      );
    await awayFromPeriodEnd('learning-decay');
    const today = periodOf('learning-decay', new Date()).key;

    const first = await trigger('learning-decay');
    expect(first.result).toMatchObject({ decayed: 1, deleted: 0, period: today, repeat: false });
    const after = await snapshot();
    expect(after.map((r) => [r.p, Number(r.confidence)])).toEqual([
      ['old', expect.closeTo(0.9, 6)],
      ['fresh', 1],
    ]);

    // The CLI's trigger, as an operator would: the same day, so nothing changes, and it says so.
    await nextSecond();
    let cliOut = '';
    const second = await awaitScheduledRun<Record<string, unknown>>(
      env.client,
      scheduleOf('learning-decay').id,
      async () => {
        const r = await ml('schedules', 'trigger', 'learning-decay', '--wait');
        expect(r.code, r.stderr).toBe(0);
        cliOut = r.stdout;
      },
    );
    expect(second.workflowId).not.toBe(first.workflowId);
    expect(second.result).toMatchObject({
      decayed: 0,
      deleted: 0,
      period: today,
      repeat: true,
      doneAt: first.result.doneAt,
    });
    const repeated = `learning-decay for ${today} already done at ${first.result.doneAt as string}: nothing changed`;
    expect(second.result.note).toBe(repeated);
    expect(cliOut).toContain(`${second.workflowId}: ${repeated}`);
    expect(await snapshot()).toEqual(after);

    // Yesterday was never done: a backfill runs it, as of yesterday. A learning decayed today
    // is not decayed again for an earlier day; one never decayed is.
    await h.db.insert(learnings).values({
      shardType: 'once',
      factPredicate: 'phase_success',
      factArgs: { phase_type: 'late' },
      confidence: 1,
      learnedAt: new Date(Date.now() - 30 * 86_400_000),
    });
    const yesterday = previousNominal('learning-decay');
    const filled = await backfill('learning-decay', yesterday);
    expect(filled.workflowId).toBe(`${scheduleOf('learning-decay').id}-${yesterday.toISOString().slice(0, 19)}Z`);
    expect(filled.result).toMatchObject({
      decayed: 1,
      period: periodOf('learning-decay', yesterday).key,
      repeat: false,
      at: yesterday.toISOString(),
    });
    const afterFill = await snapshot();
    expect(afterFill.map((r) => [r.p, Number(r.confidence)])).toEqual([
      ['old', expect.closeTo(0.9, 6)],
      ['fresh', 1],
      ['late', expect.closeTo(0.9, 6)],
    ]);

    // The same backfill again (or a catch-up of that day): a repeat.
    const refill = await backfill('learning-decay', yesterday);
    expect(refill.result).toMatchObject({ decayed: 0, deleted: 0, repeat: true });
    expect(await snapshot()).toEqual(afterFill);
    expect(await ledger('learning-decay')).toEqual([
      { period: today, scope: '*', by: first.workflowId },
      { period: periodOf('learning-decay', yesterday).key, scope: '*', by: filled.workflowId },
    ]);
    const listed = await ml('schedules', 'runs', '--job', 'learning-decay', '--json');
    expect(listed.code, listed.stderr).toBe(0);
    expect(
      (JSON.parse(listed.stdout) as Array<{ periodKey: string; result: unknown }>).map((r) => [r.periodKey, r.result]),
    ).toEqual([
      [periodOf('learning-decay', yesterday).key, { decayed: 1, deleted: 0 }],
      [today, { decayed: 1, deleted: 0 }],
    ]);
  }, 120_000);

  it('abstracts digest: responses arriving within the hour wait for the next hour; the previous hour backfilled runs once', async () => {
    await h.db.insert(agents).values([{ id: 'digest-a', name: 'A', status: 'running' }]);
    await h.db.insert(agentConfig).values({ agentId: 'digest-a', key: 'abstracts_strategy', value: 'recency' });
    const say = (from: number, n: number) =>
      h.db.insert(llmRecentResponses).values(
        Array.from({ length: n }, (_, i) => ({
          agentId: 'digest-a',
          tick: from + i,
          content: `thought ${from + i} about rivers`,
        })),
      );
    await say(1, 4);
    const snapshot = () =>
      rows(
        sql`select id, tick_from, tick_to, strategy, trigger from abstracts where agent_id = 'digest-a' order by id`,
      );
    await awayFromPeriodEnd('abstracts-digest');
    const hour = periodOf('abstracts-digest', new Date()).key;

    const first = await trigger('abstracts-digest');
    expect(first.result).toMatchObject({
      agents: 1,
      period: hour,
      repeat: false,
      results: [{ agentId: 'digest-a', ok: true, result: { created: true, responses: 4, repeat: false } }],
    });
    const after = await snapshot();
    expect(after).toHaveLength(1);

    await say(5, 3);
    await nextSecond();
    const second = await trigger('abstracts-digest');
    expect(second.result).toMatchObject({
      agents: 1,
      period: hour,
      repeat: true,
      results: [{ agentId: 'digest-a', ok: true, result: { created: false, responses: 0, repeat: true } }],
    });
    expect((second.result.results as Array<{ result: { note: string } }>)[0]!.result.note).toMatch(
      new RegExp(`^abstracts-digest for ${hour} already done at .+: nothing changed$`),
    );
    expect(await snapshot()).toEqual(after);

    const previous = previousNominal('abstracts-digest');
    const filled = await backfill('abstracts-digest', previous);
    expect(filled.result).toMatchObject({
      period: periodOf('abstracts-digest', previous).key,
      repeat: false,
      results: [{ agentId: 'digest-a', ok: true, result: { created: true, responses: 3 } }],
    });
    const afterFill = await snapshot();
    expect(afterFill.map((r) => [Number(r.tick_from), Number(r.tick_to)])).toEqual([
      [1, 4],
      [5, 7],
    ]);
    await nextSecond();
    const refill = await backfill('abstracts-digest', previous);
    expect(refill.result).toMatchObject({ repeat: true });
    expect(await snapshot()).toEqual(afterFill);
    expect((await ledger('abstracts-digest')).map((r) => [r.period, r.scope])).toEqual([
      [hour, 'digest-a'],
      [periodOf('abstracts-digest', previous).key, 'digest-a'],
    ]);
  }, 120_000);

  it('memory pruning: a second run in the 6 hours archives and logs nothing; the previous 6 hours backfilled runs once', async () => {
    await h.db.insert(agents).values({ id: 'prune-a', name: 'P', status: 'running' });
    await h.db.update(agents).set({ status: 'stopped' }).where(eq(agents.id, 'digest-a'));
    await h.db.insert(agentConfig).values({ agentId: 'prune-a', key: 'lru_limit', value: 10 });
    const say = (from: number, n: number) =>
      h.db
        .insert(llmRecentResponses)
        .values(Array.from({ length: n }, (_, i) => ({ agentId: 'prune-a', tick: from + i, content: `r${from + i}` })));
    await say(1, 13);
    const snapshot = async () => ({
      archived: await rows(
        sql`select id, archived_at from llm_recent_responses where agent_id = 'prune-a' order by id`,
      ),
      log: await rows(sql`select id, process_id, message from process_log where agent_id = 'prune-a' order by id`),
    });
    await awayFromPeriodEnd('memory-pruning');
    const now = periodOf('memory-pruning', new Date()).key;

    const first = await trigger('memory-pruning');
    expect(first.result).toMatchObject({
      agents: 1,
      period: now,
      repeat: false,
      results: [{ agentId: 'prune-a', ok: true, result: { archivedResponses: 3, limit: 10, repeat: false } }],
    });
    await say(14, 4);
    const after = await snapshot();
    // Every decision is one line under the period's process id: three archives, the rest kept.
    expect(new Set(after.log.map((l) => l.process_id))).toEqual(new Set([`schedule/prune/${now}`]));
    expect(after.log.filter((l) => String(l.message).startsWith('archive ')).map((l) => l.message)).toHaveLength(3);

    await nextSecond();
    const second = await trigger('memory-pruning');
    expect(second.result).toMatchObject({
      period: now,
      repeat: true,
      results: [{ agentId: 'prune-a', ok: true, result: { archivedResponses: 0, archivedDiary: 0, repeat: true } }],
    });
    expect(await snapshot()).toEqual(after);

    const previous = previousNominal('memory-pruning');
    const filled = await backfill('memory-pruning', previous);
    expect(filled.result).toMatchObject({
      period: periodOf('memory-pruning', previous).key,
      repeat: false,
      results: [{ result: { archivedResponses: 4 } }],
    });
    const afterFill = await snapshot();
    // The backfilled period logged its own decisions, after the first run's.
    expect([...new Set(afterFill.log.map((r) => r.process_id))]).toEqual([
      `schedule/prune/${now}`,
      `schedule/prune/${periodOf('memory-pruning', previous).key}`,
    ]);
    expect(afterFill.log.slice(0, after.log.length)).toEqual(after.log);
    await nextSecond();
    const refill = await backfill('memory-pruning', previous);
    expect(refill.result).toMatchObject({ repeat: true });
    expect(await snapshot()).toEqual(afterFill);
  }, 120_000);

  it('process-log cleanup: an entry turning old within the day waits for the next day; yesterday backfilled runs once', async () => {
    const closedAgo = (processId: string, days: number) =>
      h.db.execute(sql`insert into process_log (agent_id, process_id, kind, status, closed_at, created_at)
        values ('prune-a', ${processId}, 'x', 'close', now() - make_interval(days => ${days}), now() - make_interval(days => ${days}))`);
    await closedAgo('ancient', 45);
    const snapshot = () => rows(sql`select id, process_id from process_log where kind = 'x' order by id`);
    await awayFromPeriodEnd('process-log-cleanup');
    const today = periodOf('process-log-cleanup', new Date()).key;

    const first = await trigger('process-log-cleanup');
    expect(first.result).toMatchObject({ deleted: 1, period: today, repeat: false });
    await closedAgo('old', 40);
    const after = await snapshot();
    expect(after.map((r) => r.process_id)).toEqual(['old']);

    await nextSecond();
    const second = await trigger('process-log-cleanup');
    expect(second.result).toMatchObject({ deleted: 0, period: today, repeat: true });
    expect(await snapshot()).toEqual(after);

    // Yesterday's run deletes what was over 30 days old yesterday: the entry closed 40 days ago.
    const yesterday = previousNominal('process-log-cleanup');
    const filled = await backfill('process-log-cleanup', yesterday);
    expect(filled.result).toMatchObject({
      deleted: 1,
      period: periodOf('process-log-cleanup', yesterday).key,
      repeat: false,
    });
    await closedAgo('older', 50);
    const afterFill = await snapshot();
    await nextSecond();
    const refill = await backfill('process-log-cleanup', yesterday);
    expect(refill.result).toMatchObject({ deleted: 0, repeat: true });
    expect(await snapshot()).toEqual(afterFill);
    expect(afterFill.map((r) => r.process_id)).toEqual(['older']);
  }, 120_000);
});

describe('the run ledger on Postgres', () => {
  it('two runs of one period at the same time: the learning decays once, one run says it was a repeat', async () => {
    const acts = createLearningActivities({ db: h.db });
    await h.db.insert(learnings).values({
      shardType: 'race',
      factPredicate: 'phase_success',
      factArgs: { phase_type: 'r' },
      confidence: 1,
      learnedAt: new Date(Date.now() - 10 * 86_400_000),
    });
    const input = { shardType: 'race', period: '2030-01-02', now: '2030-01-02T03:00:00Z' };
    const both = await Promise.all([
      acts.decayLearningsJob({ ...input, workflowId: 'one' }),
      acts.decayLearningsJob({ ...input, workflowId: 'two' }),
    ]);
    expect(both.map((r) => r.repeat).sort()).toEqual([false, true]);
    expect(both.map((r) => r.decayed).sort()).toEqual([0, 1]);
    const [l] = await h.db.select().from(learnings).where(eq(learnings.shardType, 'race'));
    expect(l!.confidence).toBeCloseTo(0.9, 6);
    // Scoped to the shard: a decay of all shards that day is a different run, but still
    // does not decay this learning a second time for the same day.
    const all = await acts.decayLearningsJob({ period: '2030-01-02', now: '2030-01-02T03:00:00Z' });
    expect(all.repeat).toBe(false);
    const [again] = await h.db.select().from(learnings).where(eq(learnings.shardType, 'race'));
    expect(again!.confidence).toBeCloseTo(0.9, 6);
    await expect(acts.decayLearningsJob({ period: '2030-01-02T03' })).rejects.toMatchObject({ type: 'InvalidInput' });
  });

  it('a job that fails after its work leaves neither the work nor the ledger row; the retry applies once', async () => {
    await h.db
      .insert(learnings)
      .values({ shardType: 'crash', factPredicate: 'phase_success', factArgs: { phase_type: 'c' }, confidence: 1 });
    const key = { job: 'learning-decay', periodKey: '2030-02-01', scope: 'crash' } as const;
    const bump = (tx: Tx) =>
      tx.execute(sql`update learnings set confidence = confidence * 0.5 where shard_type = 'crash'`);
    await expect(
      runOncePerPeriod(h.db, key, async (tx) => {
        await bump(tx);
        throw new Error('worker died');
      }),
    ).rejects.toThrow('worker died');
    const crashed = await h.db.select().from(learnings).where(eq(learnings.shardType, 'crash'));
    expect(crashed[0]!.confidence).toBe(1);
    expect(
      await h.db
        .select()
        .from(maintenanceRuns)
        .where(and(eq(maintenanceRuns.periodKey, '2030-02-01'), eq(maintenanceRuns.scope, 'crash'))),
    ).toEqual([]);
    const retried = await runOncePerPeriod(h.db, key, async (tx) => ({ rows: (await bump(tx)).rowCount }));
    expect(retried).toMatchObject({ repeat: false, result: { rows: 1 } });
    const repeated = await runOncePerPeriod(h.db, key, async (tx) => ({ rows: (await bump(tx)).rowCount }));
    expect(repeated).toMatchObject({ repeat: true, result: { rows: 1 }, doneAt: retried.doneAt });
    const [done] = await h.db.select().from(learnings).where(eq(learnings.shardType, 'crash'));
    expect(done!.confidence).toBe(0.5);
  });
});
