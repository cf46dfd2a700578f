/**
 * soak: whether long-lived agents stay healthy. Agents tick as fast as they can on an instant
 * scripted model (the reflexes on, as a user's agent has them; a diary entry every eighth tick),
 * through many continue-as-new runs, for `minutes`. Their worker is a process of its own, the
 * product's `workers/main.ts --queue mindloop` as `npm run worker` runs it, with a probe
 * loaded beside it (bench/soak-probe.mjs: its RSS, and the V8 heaps of its main thread and its
 * workflow threads after a full GC, every sample); the real Postgres (a scratch database), the Temporal dev server and a NATS
 * server of the run's own (the worker's heartbeats and agent events; off where no nats-server
 * is installed, and the notes say so).
 *
 * Reported: ticks; RSS and heap drift after warm-up (the first fifth of the run): the mean of the
 * last tenth of the samples after it ÷ the mean of the first tenth − 1; rows written per tick
 * (Postgres's insert counters over the scratch database); the largest history of any run; and
 * errors: failed or timed-out workflow tasks and activities, retried activity attempts and failed
 * local activities in every run's history, failed ticks and model calls recorded in the
 * database, and error lines of the worker. Targets: both drifts < 5 %, no error.
 */
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Client, Connection, type WorkflowExecutionInfo, type WorkflowHandle } from '@temporalio/client';
import { sql } from 'drizzle-orm';
import { renderCommandBlock } from '../core/reply-parser.js';
import { agents, llmRegistry } from '../db/schema/index.js';
import { findNatsServer, startLocalNats, type LocalNats } from '../runtime/nats-server.js';
import type { Stack } from '../runtime/stack.js';
import type { agentLoopWorkflow } from '../workflows/agent-loop/index.js';
import { benchStack, freePort, scratchDatabase } from './lib.js';
import { workerProcess } from './tick.js';

/** The soak's sizes; `smoke`: under a minute, runs short enough that each agent continues as new many times. */
export const soakSizes = {
  full: { minutes: 30, agents: 10, ticksPerRun: 500, sampleMs: 10_000, progressMs: 60_000 },
  smoke: { minutes: 0.3, agents: 3, ticksPerRun: 25, sampleMs: 1_500, progressMs: 6_000 },
};
export type SoakSizes = typeof soakSizes.full;

const maxDrift = 0.05;
const warmupShare = 0.2;
const agentPrefix = 'soak-';

/** The model's replies, cycled: seven thoughts, then one that keeps a diary entry. */
function replies(): string[] {
  const topics = ['river', 'orbit', 'quartz', 'meadow', 'cipher', 'ember', 'lantern'];
  const thoughts = topics.map((t, i) => `Thought ${i + 1}: the ${t} leads to ${topics[(i + 3) % topics.length]}.`);
  const diary = renderCommandBlock([
    { cmdId: 'd1', type: 'diary.add', args: { title: 'soak', content: 'What the soak keeps.' } },
  ]);
  return [...thoughts, `I keep a note of it.\n${diary}`];
}

async function seed(stack: Stack, ids: string[]): Promise<void> {
  await stack.db.db.insert(agents).values(ids.map((id) => ({ id, name: id })));
  await stack.db.db.insert(llmRegistry).values(
    ids.map((agentId) => ({
      agentId,
      name: 'instant',
      provider: 'scripted' as const,
      model: 'instant',
      role: 'agent' as const,
      priority: 1,
      params: { replies: replies() },
    })),
  );
}

async function ticksSoFar(stack: Stack): Promise<number> {
  const r = await stack.db.db.execute<{ n: string }>(
    sql`select coalesce(sum(last_tick), 0) as n from ${agents} where id like ${`${agentPrefix}%`}`,
  );
  return Number(r.rows[0]?.n ?? 0);
}

/** Rows inserted, updated and deleted in the scratch database so far, and rows live (Postgres's own counters). */
async function tupleCounts(
  stack: Stack,
): Promise<{ inserted: number; updated: number; deleted: number; live: number }> {
  const r = await stack.db.db.execute<Record<'inserted' | 'updated' | 'deleted' | 'live', string>>(
    sql`select coalesce(sum(n_tup_ins), 0) as inserted, coalesce(sum(n_tup_upd), 0) as updated, coalesce(sum(n_tup_del), 0) as deleted, coalesce(sum(n_live_tup), 0) as live from pg_stat_user_tables`,
  );
  const row = r.rows[0]!;
  return {
    inserted: Number(row.inserted),
    updated: Number(row.updated),
    deleted: Number(row.deleted),
    live: Number(row.live),
  };
}

/** Failed ticks and model calls the database holds for the soak's agents, by kind. */
async function dbErrors(stack: Stack): Promise<Record<string, number>> {
  const like = `${agentPrefix}%`;
  const logged = await stack.db.db.execute<{ kind: string; n: string }>(sql`
    select kind || ':' || status as kind, count(*) as n from process_log
    where agent_id like ${like} and (status = 'error' or kind in ('tick_failure', 'core_outage', 'infrastructure', 'loop_failed'))
    group by 1`);
  const calls = await stack.db.db.execute<{ n: string }>(
    sql`select count(*) as n from llm_calls where agent_id like ${like} and not ok`,
  );
  const out: Record<string, number> = Object.fromEntries(
    logged.rows.map((r) => [`process_log ${r.kind}`, Number(r.n)]),
  );
  const failedCalls = Number(calls.rows[0]?.n ?? 0);
  if (failedCalls) out['llm_calls not ok'] = failedCalls;
  return out;
}

/** What the runs' histories showed: runs scanned, the largest, and failures by kind. */
interface HistoryTally {
  scanned: Set<string>;
  runs: number;
  continued: number;
  maxEvents: number;
  maxBytes: number;
  failures: Record<string, number>;
}

const add = (into: Record<string, number>, key: string, n = 1) => (into[key] = (into[key] ?? 0) + n);
const sumOf = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);

/** Read the history of every closed run not read yet: its length and what failed in it. */
async function scanClosedRuns(client: Client, tally: HistoryTally): Promise<void> {
  const closed: WorkflowExecutionInfo[] = [];
  for await (const w of client.workflow.list({
    query: `WorkflowType = 'agentLoopWorkflow' AND ExecutionStatus != 'Running'`,
  })) {
    if (!tally.scanned.has(`${w.workflowId}/${w.runId}`)) closed.push(w);
  }
  for (const w of closed) {
    tally.scanned.add(`${w.workflowId}/${w.runId}`);
    tally.runs++;
    const status = w.status.name;
    if (status === 'CONTINUED_AS_NEW') tally.continued++;
    else if (status !== 'COMPLETED') add(tally.failures, `run ${status.toLowerCase()}`);
    const events = (await client.workflow.getHandle(w.workflowId, w.runId).fetchHistory()).events ?? [];
    tally.maxEvents = Math.max(tally.maxEvents, events.length);
    tally.maxBytes = Math.max(tally.maxBytes, w.historySize ?? 0);
    for (const e of events) {
      if (e.workflowTaskFailedEventAttributes) add(tally.failures, 'workflow task failed');
      if (e.workflowTaskTimedOutEventAttributes) add(tally.failures, 'workflow task timed out');
      if (e.activityTaskFailedEventAttributes) add(tally.failures, 'activity failed');
      if (e.activityTaskTimedOutEventAttributes) add(tally.failures, 'activity timed out');
      if ((e.activityTaskStartedEventAttributes?.attempt ?? 1) > 1) add(tally.failures, 'activity attempt retried');
      if (e.markerRecordedEventAttributes?.failure) add(tally.failures, 'local activity failed');
    }
  }
}

/** The worker's memory samples (from the probe's lines) and its stderr, sorted into SDK warnings and errors. */
interface WorkerWatch {
  /** RSS, and the V8 heaps of all its threads (the main one and the workflows'), after a full GC each. */
  samples: Array<{ at: number; rssMb: number; heapMb: number; threads: number }>;
  warnLines: number;
  errorLines: string[];
  exited: Promise<number | null>;
}

function watchWorker(worker: ChildProcess): WorkerWatch {
  const watch: WorkerWatch = {
    samples: [],
    warnLines: 0,
    errorLines: [],
    exited: new Promise((resolve) => worker.once('exit', (code) => resolve(code))),
  };
  const lines = (stream: NodeJS.ReadableStream, onLine: (line: string) => void) => {
    let buf = '';
    stream.on('data', (d: Buffer) => {
      buf += d.toString();
      const parts = buf.split('\n');
      buf = parts.pop()!;
      for (const l of parts) if (l.trim()) onLine(l);
    });
  };
  // Each thread's last heap; a main-thread line (it carries the RSS) makes a sample of the sum.
  const heaps = new Map<number, number>();
  lines(worker.stdout!, (l) => {
    if (!l.startsWith('SOAK_MEM ')) return;
    const m = JSON.parse(l.slice('SOAK_MEM '.length)) as { thread: number; at: number; heapUsed: number; rss?: number };
    heaps.set(m.thread, m.heapUsed);
    if (m.rss === undefined) return;
    watch.samples.push({
      at: m.at,
      rssMb: m.rss / 2 ** 20,
      heapMb: [...heaps.values()].reduce((a, b) => a + b, 0) / 2 ** 20,
      threads: heaps.size,
    });
  });
  lines(worker.stderr!, (l) => {
    process.stderr.write(`  worker: ${l}\n`);
    // The SDK's lines are `time LEVEL …` (workers/run.ts); Node's own warnings are `(node:pid) …Warning: …`.
    if (/^\S+ WARN /.test(l) || /^\(node:\d+\) \S*Warning/.test(l)) watch.warnLines++;
    else watch.errorLines.push(l);
  });
  return watch;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Last tenth ÷ first tenth − 1 of `xs` (at least one sample each). */
function drift(xs: number[]): { first: number; last: number; ratio: number } {
  const k = Math.max(1, Math.floor(xs.length / 10));
  const first = mean(xs.slice(0, k));
  const last = mean(xs.slice(-k));
  return { first, last, ratio: last / first - 1 };
}

interface Progress {
  minute: number;
  ticks: number;
  ticksPerS: number;
  rssMb: number;
  heapMb: number;
  largestHistory: number;
  errors: number;
}

const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

function printTable(rows: Progress[]): void {
  const head = ['min', 'ticks', 'ticks/s', 'RSS MB', 'heap MB', 'largest history', 'errors'];
  const cells = rows.map((r) => [
    fmt(r.minute, 1),
    String(r.ticks),
    fmt(r.ticksPerS, 1),
    fmt(r.rssMb),
    fmt(r.heapMb, 1),
    String(r.largestHistory),
    String(r.errors),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => `  ${c.map((x, i) => x.padStart(widths[i]!)).join('  ')}`;
  process.stdout.write(`\nsoak over time\n${[line(head), ...cells.map(line)].join('\n')}\n`);
}

/** The history length of each agent's current run (DescribeWorkflowExecution: exact while it runs). */
async function largestOpenHistory(client: Client, ids: string[]): Promise<number> {
  const lengths = await Promise.all(
    ids.map((id) =>
      client.workflow
        .getHandle(`agent/${id}`)
        .describe()
        .then(
          (d) => d.historyLength,
          () => 0,
        ),
    ),
  );
  return Math.max(0, ...lengths);
}

export async function measureSoak(
  z: SoakSizes,
): Promise<{ metrics: Record<string, number>; notes: Record<string, string> }> {
  const scratch = await scratchDatabase('mindloop_bench_soak');
  const { env, stack, stop } = await benchStack({ databaseUrl: scratch.url });
  let nats: LocalNats | undefined;
  let worker: ChildProcess | undefined;
  const client = new Client({
    connection: await Connection.connect(stack.temporal.connection),
    namespace: stack.temporal.namespace,
  });
  try {
    const natsBinary = findNatsServer();
    nats = natsBinary
      ? await startLocalNats({ binary: natsBinary, dataDir: env.MINDLOOP_DATA_DIR, port: await freePort() })
      : undefined;
    const ids = Array.from({ length: z.agents }, (_, i) => `${agentPrefix}${i}`);
    await seed(stack, ids);
    worker = await workerProcess(stack, {
      nodeFlags: ['--expose-gc', '--import', pathToFileURL(join(import.meta.dirname, 'soak-probe.mjs')).href],
      env: {
        SOAK_SAMPLE_MS: String(z.sampleMs),
        NATS_URL: nats?.url ?? 'off',
        MINDLOOP_DATA_DIR: env.MINDLOOP_DATA_DIR,
      },
      stderr: 'pipe',
    });
    const watch = watchWorker(worker);
    const before = await tupleCounts(stack);
    const handles = await Promise.all(
      ids.map((agentId) =>
        client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
          taskQueue: 'mindloop',
          workflowId: `agent/${agentId}`,
          args: [{ agentId, ticksPerRun: z.ticksPerRun, settings: { delayMs: 0 } }],
        }),
      ),
    );
    const t0 = Date.now();
    const run: SoakRun = {
      z,
      stack,
      client,
      ids,
      watch,
      tally: { scanned: new Set(), runs: 0, continued: 0, maxEvents: 0, maxBytes: 0, failures: {} },
    };
    process.stdout.write(
      `  soak: ${z.agents} agents, ${z.minutes} min, continue-as-new every ${z.ticksPerRun} ticks; worker pid ${worker.pid}, bus ${nats ? nats.url : 'off'}\n`,
    );
    const progress = await watchProgress(run, t0);
    const runMs = Date.now() - t0;
    await stopAgents(handles);
    const ticks = await ticksSoFar(stack);
    // Backends report their counters when idle for a second.
    await new Promise((r) => setTimeout(r, 2000));
    const after = await tupleCounts(stack);
    await scanClosedRuns(client, run.tally);
    const open = await largestOpenHistory(client, ids);
    const db = await dbErrors(stack);
    const warm = watch.samples.filter((s) => s.at >= t0 + warmupShare * runMs && s.at <= t0 + runMs);
    if (warm.length < 2)
      throw new Error(
        `only ${warm.length} memory samples after warm-up: the run is too short for its sample interval (${z.sampleMs} ms)`,
      );
    printTable(progress);
    return soakReport(run, { runMs, ticks, before, after, open, db, warm, progress, bus: nats !== undefined });
  } finally {
    await client.connection.close();
    if (worker && worker.exitCode === null) {
      const exited = new Promise((r) => worker!.once('exit', r));
      worker.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
      if (worker.exitCode === null) worker.kill('SIGKILL');
    }
    await nats?.stop();
    await stop();
    await scratch.drop();
  }
}

/** A soak under way: its sizes, the stack, the agents, the worker's watch and what their closed runs showed. */
interface SoakRun {
  z: SoakSizes;
  stack: Stack;
  client: Client;
  ids: string[];
  watch: WorkerWatch;
  tally: HistoryTally;
}

/** Every `progressMs` until the soak's minutes are up: a row of progress, printed; throws as soon as the worker process exits. */
async function watchProgress({ z, stack, client, ids, watch, tally }: SoakRun, t0: number): Promise<Progress[]> {
  let workerGone: number | null | undefined;
  void watch.exited.then((code) => (workerGone = code));
  const endAt = t0 + z.minutes * 60_000;
  const progress: Progress[] = [];
  let last = { at: t0, ticks: 0 };
  while (Date.now() < endAt) {
    await new Promise((r) => setTimeout(r, Math.min(z.progressMs, endAt - Date.now())));
    if (workerGone !== undefined)
      throw new Error(
        `the worker process exited (${workerGone}) after ${((Date.now() - t0) / 60_000).toFixed(1)} min: ${watch.errorLines.slice(-5).join(' | ')}`,
      );
    await scanClosedRuns(client, tally);
    const ticks = await ticksSoFar(stack);
    const sample = watch.samples.at(-1);
    const open = await largestOpenHistory(client, ids);
    const row: Progress = {
      minute: (Date.now() - t0) / 60_000,
      ticks,
      ticksPerS: ((ticks - last.ticks) * 1000) / (Date.now() - last.at),
      rssMb: sample?.rssMb ?? Number.NaN,
      heapMb: sample?.heapMb ?? Number.NaN,
      largestHistory: Math.max(tally.maxEvents, open),
      errors: sumOf(tally.failures) + sumOf(await dbErrors(stack)) + watch.errorLines.length,
    };
    progress.push(row);
    last = { at: Date.now(), ticks };
    process.stdout.write(
      `  soak ${fmt(row.minute, 1)}/${z.minutes} min: ${ticks} ticks (${fmt(row.ticksPerS, 1)}/s), ${tally.continued} runs continued as new, RSS ${fmt(row.rssMb)} MB, heap ${fmt(row.heapMb, 1)} MB, largest history ${row.largestHistory} events, errors ${row.errors}\n`,
    );
  }
  return progress;
}

/** Stopped as an operator stops them (the stop signal): each ends its tick and completes (waited for up to a minute). */
async function stopAgents(handles: Array<WorkflowHandle<typeof agentLoopWorkflow>>): Promise<void> {
  await Promise.all(handles.map((h) => h.signal('stop')));
  await Promise.all(handles.map((h) => Promise.race([h.result(), new Promise((r) => setTimeout(r, 60_000))])));
}

/** What the soak measured once its agents stopped. */
interface SoakEnd {
  runMs: number;
  ticks: number;
  before: Awaited<ReturnType<typeof tupleCounts>>;
  after: Awaited<ReturnType<typeof tupleCounts>>;
  /** The longest history of a run still open. */
  open: number;
  db: Record<string, number>;
  /** The memory samples after warm-up. */
  warm: WorkerWatch['samples'];
  progress: Progress[];
  /** Whether a nats-server of the run's own carried the bus. */
  bus: boolean;
}

/** The soak's metrics and the notes that say what each means, with its targets met or missed. */
function soakReport(
  { z, tally, watch }: SoakRun,
  { runMs, ticks, before, after, open, db, warm, progress, bus }: SoakEnd,
): { metrics: Record<string, number>; notes: Record<string, string> } {
  const rss = drift(warm.map((s) => s.rssMb));
  const heap = drift(warm.map((s) => s.heapMb));
  const errors = sumOf(tally.failures) + sumOf(db) + watch.errorLines.length;
  const met = (ok: boolean) => (ok ? 'met' : 'MISSED');
  const list = (r: Record<string, number>) =>
    Object.keys(r).length
      ? Object.entries(r)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ')
      : 'none';
  return {
    metrics: {
      minutes: runMs / 60_000,
      ticks,
      ticks_per_s: ticks / (runMs / 1000),
      agents: z.agents,
      runs: tally.runs,
      continued_as_new: tally.continued,
      rss_drift_ratio: rss.ratio,
      heap_drift_ratio: heap.ratio,
      rss_mb_after_warmup: rss.first,
      rss_mb_end: rss.last,
      rss_mb_max: Math.max(...watch.samples.map((s) => s.rssMb)),
      heap_mb_after_warmup: heap.first,
      heap_mb_end: heap.last,
      heap_threads: Math.max(...watch.samples.map((s) => s.threads)),
      rows_per_tick: (after.inserted - before.inserted) / ticks,
      rows_updated_per_tick: (after.updated - before.updated) / ticks,
      rows_deleted_per_tick: (after.deleted - before.deleted) / ticks,
      rows_kept_per_tick: (after.live - before.live) / ticks,
      max_history_events: Math.max(tally.maxEvents, open),
      max_history_kb: tally.maxBytes / 1024,
      errors,
      errors_history: sumOf(tally.failures),
      errors_db: sumOf(db),
      errors_worker: watch.errorLines.length,
      worker_warn_lines: watch.warnLines,
      memory_samples: warm.length,
    },
    notes: {
      run: `${z.agents} agents (reflexes on, no pause between ticks, continue-as-new every ${z.ticksPerRun} ticks) on an instant scripted model whose 8 replies cycle (every eighth keeps a diary entry), ${fmt(runMs / 60_000, 1)} min; ticks_per_s is the whole stack's on this machine (the real Postgres in a scratch database, the Temporal dev server, the bench process and the worker share its CPUs)`,
      worker: `a separate \`workers/main.ts --queue mindloop --no-schedules\` process (the product's worker, its defaults), bus ${bus ? 'a nats-server of this run' : 'off: no nats-server installed'}; memory every ${z.sampleMs / 1000} s by bench/soak-probe.mjs loaded into it: the RSS, and the heap: the V8 heaps in use of all its threads (the main one: activities, the database pool, the SDK's bridge; the workflows' threads: heap_threads − 1), each after a full GC`,
      drift: `after warm-up (the first ${warmupShare * 100} % of the run, ${warm.length} samples after it): mean of the last tenth of the samples ÷ mean of the first tenth − 1`,
      rows: 'rows_per_tick: rows inserted in the scratch database (pg_stat_user_tables n_tup_ins, every table) per tick; *_updated_*, *_deleted_*: the same for updates and deletes; rows_kept_per_tick: the growth of live rows per tick',
      history:
        'max_history_events: the longest history of any run (closed runs read whole; the current ones described); max_history_kb: the largest history size a closed run reported',
      errors: `errors = history (${list(tally.failures)}) + database (${list(db)}) + worker error lines (${watch.errorLines.length}${watch.errorLines.length ? `: ${watch.errorLines.slice(0, 3).join(' | ')}` : ''}); worker_warn_lines: its WARN lines, not counted`,
      over_time: progress
        .map(
          (r) =>
            `${fmt(r.minute, 1)} min: ${r.ticks} ticks, RSS ${fmt(r.rssMb)} MB, heap ${fmt(r.heapMb, 1)} MB, largest history ${r.largestHistory}, errors ${r.errors}`,
        )
        .join('; '),
      targets: `rss_drift_ratio < ${maxDrift}: ${met(rss.ratio < maxDrift)}; heap_drift_ratio < ${maxDrift}: ${met(heap.ratio < maxDrift)}; errors 0: ${met(errors === 0)}`,
    },
  };
}
