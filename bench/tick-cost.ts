/**
 * Where one tick's cost goes, against Temporal's floor in the same run: `agents` agents each run
 * `ticks` ticks paced 1 ms apart (so every tick is what a paced agent's tick is: one workflow
 * task holding the local think, then a timer), with an instant scripted model; then as many bare
 * workflows (bench/workflows.ts `pacedLocalWorkflow`: a no-op local activity, then a 1 ms
 * timer) take as many steps on the same stack. For each: the CPU each process spent per tick
 * (this process, which runs the worker, by thread; the Temporal dev server; the database's
 * backends of this stack, on a real Postgres), the workflow tasks, activities, local activities
 * and history events per tick (from the histories), and the SQL statements per tick by kind
 * (every statement a `pg` client of this process sends is counted, so the embedded PGlite's
 * too). The agents' figures less the floor's are the tick's own cost.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import type { WorkflowHandle } from '@temporalio/client';
import proto from '@temporalio/proto';
import { createActivities } from '../activities/index.js';
import { agents, llmRegistry } from '../db/schema/index.js';
import type { Stack } from '../runtime/stack.js';
import type { agentLoopWorkflow } from '../workflows/agent-loop/index.js';
import { withBenchWorker } from './lib.js';
import { withBaselineWorker } from './temporal-baseline.js';
import { workflowFailover } from '../workflows/lib/activity-options.js';

/** Every statement this process's `pg` clients send, while `recording` is set: its text's first line, counted. */
const sent = new Map<string, number>();
let recording = false;
let hooked = false;
function hookStatements(): void {
  if (hooked) return;
  hooked = true;
  const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  (pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown }).query = function (
    this: pg.Client,
    ...args: unknown[]
  ) {
    if (recording) {
      const c = args[0];
      const text = typeof c === 'string' ? c : c && typeof c === 'object' && 'text' in c ? String(c.text) : '';
      const name = c && typeof c === 'object' && 'name' in c && c.name ? String(c.name) : '';
      const key = name || text.replace(/\s+/g, ' ').slice(0, 90);
      sent.set(key, (sent.get(key) ?? 0) + 1);
    }
    return query.apply(this, args);
  };
}

/** user + system CPU of a process (all its threads), or one thread of it, in ms, from /proc (Linux). */
function cpuMsOf(path: string): number {
  try {
    const stat = readFileSync(path, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // utime, stime in clock ticks (USER_HZ 100)
  } catch {
    return 0; // gone meanwhile
  }
}

/** This process's threads' CPU, summed by thread name (the main thread is `main`). */
function threadsCpu(): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    let name: string;
    try {
      name = readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();
    } catch {
      continue; // ended meanwhile
    }
    if (Number(tid) === process.pid) name = 'main';
    else if (/^V8 /.test(name)) name = 'v8 (gc, compiler)';
    else if (/^tokio|^temporal|^core/.test(name)) name = 'temporal core (rust)';
    else if (name === 'node') name = 'node threads (workflows, PGlite)';
    out.set(name, (out.get(name) ?? 0) + cpuMsOf(`/proc/self/task/${tid}/stat`));
  }
  out.set('total', cpuMsOf('/proc/self/stat'));
  return out;
}

/** The stack's database backends (a real Postgres: the pool's connections; none on the embedded PGlite). */
async function backendPids(stack: Stack): Promise<number[]> {
  if (stack.database.embedded) return [];
  const r = await stack.db.db.execute<{ pid: number }>(
    sql`select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`,
  );
  return r.rows.map((x) => Number(x.pid));
}

interface Sample {
  threads: Map<string, number>;
  temporal: number;
  db: Map<number, number>;
}
async function sample(stack: Stack): Promise<Sample> {
  const pids = await backendPids(stack);
  return {
    threads: threadsCpu(),
    temporal: stack.temporal.embedded ? cpuMsOf(`/proc/${stack.temporal.embedded.pid}/stat`) : Number.NaN,
    db: new Map(pids.map((p) => [p, cpuMsOf(`/proc/${p}/stat`)])),
  };
}

/** Per-tick figures of one side (the agents or the floor). */
export interface TickCost {
  steps: number;
  seconds: number;
  workerCpuMs: number;
  workerThreadsCpuMs: Record<string, number>;
  temporalCpuMs: number;
  dbCpuMs: number;
  workflowTasks: number;
  activities: number;
  localActivities: number;
  historyEvents: number;
  /** The history's encoded size a step, in bytes, and the part of it in local activity markers. */
  historyBytes: number;
  markerBytes: number;
  statements: number;
  statementsByKind: Record<string, number>;
  topStatements: Array<[string, number]>;
}

async function measure(stack: Stack, steps: number, run: () => Promise<WorkflowHandle[]>): Promise<TickCost> {
  hookStatements();
  sent.clear();
  const before = await sample(stack);
  recording = true;
  const t0 = performance.now();
  const handles = await run();
  const seconds = (performance.now() - t0) / 1000;
  recording = false;
  const after = await sample(stack);
  let workflowTasks = 0;
  let activities = 0;
  let localActivities = 0;
  let historyEvents = 0;
  let historyBytes = 0;
  let markerBytes = 0;
  for (const h of handles) {
    const history = await h.fetchHistory();
    const events = history.events ?? [];
    historyEvents += events.length;
    historyBytes += proto.temporal.api.history.v1.History.encode(history).finish().length;
    for (const e of events) {
      if (e.markerRecordedEventAttributes)
        markerBytes += proto.temporal.api.history.v1.HistoryEvent.encode(e).finish().length;
      if (e.workflowTaskCompletedEventAttributes) workflowTasks++;
      else if (e.activityTaskScheduledEventAttributes) activities++;
      else if (e.markerRecordedEventAttributes?.markerName === 'core_local_activity') localActivities++;
    }
  }
  const threads: Record<string, number> = {};
  for (const [name, ms] of after.threads)
    if (name !== 'total') threads[name] = (ms - (before.threads.get(name) ?? 0)) / steps;
  const workerCpuMs = (after.threads.get('total')! - before.threads.get('total')!) / steps;
  const dbCpu = [...after.db].reduce((s, [pid, ms]) => s + ms - (before.db.get(pid) ?? 0), 0);
  const byKind: Record<string, number> = {};
  let statements = 0;
  for (const [key, n] of sent) {
    const kind = /^ml_/.test(key)
      ? 'prepared'
      : (/^\s*\(?\s*(select|insert|update|delete|with|begin|commit|rollback)/i.exec(key)?.[1]?.toLowerCase() ??
        'other');
    byKind[kind] = (byKind[kind] ?? 0) + n / steps;
    statements += n;
  }
  return {
    steps,
    seconds,
    workerCpuMs,
    workerThreadsCpuMs: threads,
    temporalCpuMs: (after.temporal - before.temporal) / steps,
    dbCpuMs: stack.database.embedded ? Number.NaN : dbCpu / steps,
    workflowTasks: workflowTasks / steps,
    activities: activities / steps,
    localActivities: localActivities / steps,
    historyEvents: historyEvents / steps,
    historyBytes: historyBytes / steps,
    markerBytes: markerBytes / steps,
    statements: statements / steps,
    statementsByKind: byKind,
    topStatements: [...sent].sort((a, b) => b[1] - a[1]).map(([k, n]) => [k, n / steps] as [string, number]),
  };
}

/** Agents whose model answers at once (a scripted `instant` model), each once. */
export async function seedInstantAgents(stack: Stack, ids: string[]): Promise<void> {
  await stack.db.db
    .insert(agents)
    .values(ids.map((id) => ({ id, name: id })))
    .onConflictDoNothing();
  await stack.db.db
    .insert(llmRegistry)
    .values(
      ids.map((id) => ({
        agentId: id,
        name: 'instant',
        provider: 'scripted' as const,
        model: 'instant',
        role: 'agent' as const,
        priority: 1,
        params: { replies: ['A quick thought.'] },
      })),
    )
    .onConflictDoNothing();
}

export const tickCostSizes = { full: { agents: 10, ticks: 30 }, smoke: { agents: 2, ticks: 5 } };

/**
 * The agents' per-tick cost and the floor's per-step cost on `stack`, measured one after the other
 * (each side's warm-up run first: its agents' first ticks, which read and build what later ticks
 * reuse, are not counted).
 */
export async function measureTickCost(
  stack: Stack,
  toolsDir: string,
  o: { agents: number; ticks: number; reflexes?: boolean; label?: string } = tickCostSizes.full,
): Promise<{ agents: TickCost; floor: TickCost }> {
  const label = o.label ?? 'cost';
  const activities = createActivities({ db: stack.db.db, llm: { env: {}, toolsDir } });
  const agentsCost = await withBenchWorker(
    stack,
    { taskQueue: `bench-${label}`, activities, maxCachedWorkflows: 1000 },
    async (client) => {
      const go = async (prefix: string, ticks: number) => {
        const ids = Array.from({ length: o.agents }, (_, i) => `${label}-${prefix}${i}`);
        await seedInstantAgents(stack, ids);
        const handles = await Promise.all(
          ids.map((id) =>
            client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
              ...workflowFailover,
              taskQueue: `bench-${label}`,
              workflowId: `agent/${id}`,
              args: [{ agentId: id, maxTicks: ticks, reflexes: o.reflexes ?? false, settings: { delayMs: 1 } }],
            }),
          ),
        );
        await Promise.all(handles.map((h) => h.result()));
        return handles;
      };
      await go('warm', 3);
      return measure(stack, o.agents * o.ticks, () => go('', o.ticks));
    },
  );
  const floor = await withBaselineWorker(
    stack,
    async (client, taskQueue) => {
      const go = async (prefix: string, steps: number) => {
        const handles = await Promise.all(
          Array.from({ length: o.agents }, (_, i) =>
            client.workflow.start('pacedLocalWorkflow', {
              taskQueue,
              workflowId: `${label}-floor-${prefix}${i}-${Date.now()}`,
              args: [steps, 1],
            }),
          ),
        );
        await Promise.all(handles.map((h) => h.result()));
        return handles;
      };
      await go('warm', 3);
      return measure(stack, o.agents * o.ticks, () => go('', o.ticks));
    },
    { maxCachedWorkflows: 1000 },
  );
  return { agents: agentsCost, floor };
}

/** The figures as bench keys: `<prefix>…` for the agents, `<prefix>floor_…` for the floor, and their ratios. */
export function tickCostMetrics(c: { agents: TickCost; floor: TickCost }, suffix = ''): Record<string, number> {
  const { agents: a, floor: f } = c;
  const k = (name: string) => `${name}${suffix}`;
  const m: Record<string, number> = {
    [k('worker_cpu_ms_per_tick')]: a.workerCpuMs,
    [k('temporal_cpu_ms_per_tick')]: a.temporalCpuMs,
    [k('workflow_tasks_per_tick')]: a.workflowTasks,
    [k('activities_per_tick')]: a.activities,
    [k('local_activities_per_tick')]: a.localActivities,
    [k('history_events_per_tick')]: a.historyEvents,
    [k('history_bytes_per_tick')]: a.historyBytes,
    [k('sql_statements_per_tick')]: a.statements,
    [k('floor_worker_cpu_ms_per_step')]: f.workerCpuMs,
    [k('floor_temporal_cpu_ms_per_step')]: f.temporalCpuMs,
    [k('floor_workflow_tasks_per_step')]: f.workflowTasks,
    [k('floor_history_events_per_step')]: f.historyEvents,
    [k('floor_history_bytes_per_step')]: f.historyBytes,
    [k('worker_cpu_ratio_to_floor')]: a.workerCpuMs / f.workerCpuMs,
    [k('temporal_cpu_ratio_to_floor')]: a.temporalCpuMs / f.temporalCpuMs,
  };
  if (!Number.isNaN(a.dbCpuMs)) {
    m[k('postgres_cpu_ms_per_tick')] = a.dbCpuMs;
    m[k('cpu_ms_per_tick')] = a.workerCpuMs + a.temporalCpuMs + a.dbCpuMs;
    m[k('floor_cpu_ms_per_step')] = f.workerCpuMs + f.temporalCpuMs;
    m[k('cpu_ratio_to_floor')] = m[k('cpu_ms_per_tick')]! / m[k('floor_cpu_ms_per_step')]!;
    // Where the stack shares its cores, the 1 Hz count is bound by CPU: agents at 1 Hz ÷ the
    // floor's workflows at 1 Hz can reach about the floor's step CPU ÷ the tick's. Were the worker
    // and Temporal to spend on a tick no more than on the floor's step, the database's CPU alone
    // would still bound it.
    m[k('hz_ratio_bound_cpu')] = 1 / m[k('cpu_ratio_to_floor')]!;
    m[k('hz_ratio_bound_database_alone')] =
      m[k('floor_cpu_ms_per_step')]! / (m[k('floor_cpu_ms_per_step')]! + a.dbCpuMs);
  }
  return m;
}

/** A printable breakdown of one measurement. */
export function tickCostTable(c: { agents: TickCost; floor: TickCost }, title: string): string {
  const { agents: a, floor: f } = c;
  const n = (v: number) => (Number.isNaN(v) ? '—' : v.toFixed(2));
  const lines = [
    `${title}: per tick (agents, ${a.steps} ticks) vs per step of the floor (bare workflows, ${f.steps} steps)`,
    `  ${'what'.padEnd(38)} ${'tick'.padStart(8)} ${'floor'.padStart(8)}`,
  ];
  const row = (what: string, x: number, y: number) =>
    lines.push(`  ${what.padEnd(38)} ${n(x).padStart(8)} ${n(y).padStart(8)}`);
  row('worker process CPU ms', a.workerCpuMs, f.workerCpuMs);
  for (const name of new Set([...Object.keys(a.workerThreadsCpuMs), ...Object.keys(f.workerThreadsCpuMs)]))
    row(`  thread ${name}`, a.workerThreadsCpuMs[name] ?? 0, f.workerThreadsCpuMs[name] ?? 0);
  row('Temporal server CPU ms', a.temporalCpuMs, f.temporalCpuMs);
  row('Postgres backends CPU ms', a.dbCpuMs, f.dbCpuMs);
  row('workflow tasks', a.workflowTasks, f.workflowTasks);
  row('activities', a.activities, f.activities);
  row('local activities', a.localActivities, f.localActivities);
  row('history events', a.historyEvents, f.historyEvents);
  row('history bytes', a.historyBytes, f.historyBytes);
  row('  in local activity markers', a.markerBytes, f.markerBytes);
  row('SQL statements', a.statements, f.statements);
  for (const [kind, v] of Object.entries(a.statementsByKind)) row(`  ${kind}`, v, 0);
  lines.push('  statements per tick, most sent first:');
  for (const [key, v] of a.topStatements.slice(0, 30)) lines.push(`    ${v.toFixed(2).padStart(6)}  ${key}`);
  lines.push(`  wall: ${(a.steps / a.seconds).toFixed(1)} ticks/s, floor ${(f.steps / f.seconds).toFixed(1)} steps/s`);
  return lines.join('\n');
}
