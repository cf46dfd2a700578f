/**
 * peers: the same N-step loop with the same instant fake model on other durable runtimes, beside
 * Mindloop's own tick, in one run and against one Postgres (BENCH_DATABASE_URL /
 * TEST_DATABASE_URL, default 127.0.0.1:5432; a scratch database per run, dropped after):
 * - LangGraph.js with its Postgres checkpointer, `durability: 'sync'` and its default `async`;
 * - DBOS Transact (`DBOS.runStep` in a workflow);
 * - a bare Temporal workflow (one activity per step) on the bench's Temporal dev server.
 * Each peer runs in a child process (bench/peers/, its own package, installed here when missing):
 * per-step p50/p99 of one loop, steps/s with 50 loops at once, the process's RSS. Then the crash
 * test: the child is SIGKILLed at a random step and the loop resumed with the peer's own API; the
 * steps whose side effect (a row in `peer_effects`, no unique key) ran twice or never are counted.
 * Mindloop takes the same crash test (bench/peers-mindloop.ts): its step is a tick of the agent
 * loop in a worker process of its own (bench/peers-mindloop-child.ts), its side effect the diary
 * row the tick's command writes, its model an endpoint in this process that counts every call.
 *
 * BENCH_PEERS_ONLY=crash runs the crash test alone, `crash:<name>,…` only those loops (dbos,
 * langgraph-sync, langgraph-async, temporal, mindloop); the results file then says it is partial.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { Stack } from '../runtime/stack.js';
import { writeWorkflowBundle } from '../workers/build-bundle.js';
import { benchStack, scratchDatabase, summarize } from './lib.js';
import {
  diaryRowsPerTick,
  repeatedCalls,
  seedCrashAgent,
  startScriptedEndpoint,
  type ScriptedEndpoint,
} from './peers-mindloop.js';
import { measureTicks, tickSizes } from './tick.js';
import { allocatorEnv } from '../scripts/allocator.mjs';
import { workflowThreadFlags } from '../scripts/workflow-threads.mjs';
import { compileWorkerEntries } from '../scripts/cli-build.mjs';

const peersDir = join(import.meta.dirname, 'peers');
const root = join(import.meta.dirname, '..');

/** A loop in a child process: argv[2] of the child, its script (from the repository root), the metric suffix. */
interface LoopProcess {
  name: string;
  script: string;
  key: string;
  /**
   * The script compiled as the product's worker is (scripts/cli-build.mjs), run instead of the
   * source through tsx, with the worker process's node flags (scripts/workflow-threads.mjs).
   */
  built?: string;
}

const peers = [
  { name: 'dbos', script: 'bench/peers/dbos.ts', key: 'dbos' },
  { name: 'langgraph-sync', script: 'bench/peers/langgraph.ts', key: 'langgraph_sync' },
  { name: 'langgraph-async', script: 'bench/peers/langgraph.ts', key: 'langgraph_async' },
  { name: 'temporal', script: 'bench/peers/temporal.ts', key: 'temporal' },
] as const satisfies readonly LoopProcess[];
type Peer = (typeof peers)[number];
const mindloop: LoopProcess = { name: 'mindloop', script: 'bench/peers-mindloop-child.ts', key: 'mindloop' };

/**
 * Kills per loop and the crash loops' length; `smoke`: one kill of a short loop per loop and
 * window, the peers' perf loops short (PEER_SMOKE, bench/peers/common.ts) and the tick's too.
 */
export const peersSizes = {
  full: { kills: 5, crashSteps: 200, smoke: false },
  smoke: { kills: 1, crashSteps: 30, smoke: true },
};
type PeersSizes = typeof peersSizes.full;
/** A peer's resumed loop finishes in seconds; Mindloop's resume waits out the killed attempt's timeout (2 s, failoverTimeout) and starts the product's worker. */
const resumeLimitMs = { peer: 60_000, mindloop: 180_000 };
/** A kill that never came (the step's line missed): the first process is ended anyway. */
const killLimitMs = 300_000;

/** What BENCH_PEERS_ONLY selects: everything (unset), or the crash test of some loops. */
function selection(): { perf: boolean; crash: Set<string> } {
  const all = [...peers.map((p) => p.name), mindloop.name];
  const only = process.env.BENCH_PEERS_ONLY?.trim();
  if (!only) return { perf: true, crash: new Set(all) };
  const m = /^crash(?::(.+))?$/.exec(only);
  const names = m?.[1]?.split(',').map((n) => n.trim()) ?? all;
  const unknown = names.filter((n) => !all.includes(n));
  if (!m || unknown.length)
    throw new Error(`BENCH_PEERS_ONLY=${only}: expected crash or crash:<name>,… with names from ${all.join(', ')}`);
  return { perf: false, crash: new Set(names) };
}

/** The step a kill lands at: the same draw for every loop, a tenth of the loop away from both ends. */
function randomKillStep(crashSteps: number): number {
  const margin = Math.floor(crashSteps / 10);
  return margin + Math.floor(Math.random() * (crashSteps - 2 * margin));
}

/** bench/peers/node_modules, from its lock file, unless there. */
function ensureInstalled(): void {
  if (existsSync(join(peersDir, 'node_modules', '.package-lock.json'))) return;
  process.stdout.write('  installing bench/peers (npm ci)…\n');
  const r = spawnSync(
    'npm',
    [existsSync(join(peersDir, 'package-lock.json')) ? 'ci' : 'install', '--no-audit', '--no-fund'],
    { cwd: peersDir, stdio: 'inherit' },
  );
  if (r.status !== 0) throw new Error(`npm install in ${peersDir} failed (${r.status})`);
}

interface Child {
  lines: string[];
  exited: Promise<number | null>;
  kill(): void;
}

/** A loop as its own node process; `onLine` sees each stdout line. */
function runChild(
  p: LoopProcess,
  args: string[],
  env: Record<string, string>,
  onLine: (line: string, c: Child) => void = () => {},
): Child {
  const script = p.built ? [...workflowThreadFlags, '--enable-source-maps', p.built] : ['--import', 'tsx', p.script];
  const proc = spawn(process.execPath, [...script, p.name, ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  proc.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
  const child: Child = {
    lines: [],
    exited: new Promise((resolve) => proc.once('exit', (code) => resolve(code))),
    kill: () => proc.kill('SIGKILL'),
  };
  let buf = '';
  proc.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop()!;
    for (const line of parts) {
      child.lines.push(line);
      onLine(line, child);
    }
  });
  void child.exited.then((code) => {
    if (code !== 0 && code !== null)
      process.stderr.write(`  ${p.name} ${args[0]} exited ${code}: ${err.trim().split('\n').slice(-5).join(' | ')}\n`);
  });
  return child;
}

async function perf(p: Peer, env: Record<string, string>): Promise<Record<string, number>> {
  const child = runChild(p, ['perf'], env);
  const code = await child.exited;
  const json = child.lines.find((l) => l.startsWith('{'));
  if (code !== 0 || !json) throw new Error(`${p.name} perf run failed (exit ${code})`);
  const r = JSON.parse(json) as { gaps: number[]; steps: number; seconds: number; rssMb: number };
  const s = summarize(r.gaps);
  return {
    [`${p.key}_step_p50_ms`]: s.p50,
    [`${p.key}_step_p99_ms`]: s.p99,
    [`${p.key}_steps_per_s_50`]: r.steps / r.seconds,
    [`${p.key}_rss_mb`]: r.rssMb,
  };
}

interface CrashRun {
  killedAt: number;
  /** The first process was killed (not ended by the kill limit nor finished on its own). */
  killed: boolean;
  duplicated: number;
  lost: number;
  extra: number;
  resumed: boolean;
  /** From the kill to the first step the new process reports (its start included). */
  backS: number;
  /** From the kill to the new process's `ready` line (its worker polling), where it prints one (Mindloop's). */
  readyS: number;
  /** From the kill to the resumed loop's end. */
  doneS: number;
}

interface CrashPlan {
  loop: string;
  /** The loop's length. */
  steps: number;
  killAt: number;
  /** The loop's first step (the peers count from 0, Mindloop's ticks from 1). */
  firstStep: number;
  /** Extra argv of the first process. */
  args?: string[];
  /** Kill when the first process reports `step <killAt>` (else `armKill` decides). */
  killOnStepLine: boolean;
  /** A trigger outside the process (Mindloop's held model call), given the kill. */
  armKill?: (kill: () => void) => void;
  resumeLimitMs: number;
  /** Side-effect rows per step of the loop. */
  effects(loop: string): Promise<Map<number, number>>;
}

/** One kill: start a loop, SIGKILL its process at a step, resume it in a new process, count each step's side effects. */
async function crashOnce(p: LoopProcess, env: Record<string, string>, plan: CrashPlan): Promise<CrashRun> {
  const crashSteps = plan.steps;
  let killed = false;
  let killedAt = 0;
  const kill = (c: Child) => {
    if (killed) return;
    killed = true;
    killedAt = performance.now();
    c.kill();
  };
  const first = runChild(p, ['crash', plan.loop, String(crashSteps), ...(plan.args ?? [])], env, (line, c) => {
    if (plan.killOnStepLine && line === `step ${plan.killAt}`) kill(c);
  });
  plan.armKill?.(() => kill(first));
  const limit = setTimeout(() => first.kill(), killLimitMs);
  await first.exited;
  clearTimeout(limit);
  let backAt = Number.NaN;
  let readyAt = Number.NaN;
  const second = runChild(p, ['resume', plan.loop, String(crashSteps)], env, (line) => {
    if (Number.isNaN(readyAt) && line === 'ready') readyAt = performance.now();
    if (Number.isNaN(backAt) && line.startsWith('step ')) backAt = performance.now();
  });
  const timer = setTimeout(() => second.kill(), plan.resumeLimitMs);
  await second.exited;
  clearTimeout(timer);
  const since = (t: number) => (killed ? (t - killedAt) / 1000 : Number.NaN);
  const backS = since(backAt);
  const doneS = since(performance.now());
  const counts = await plan.effects(plan.loop);
  let duplicated = 0;
  let lost = 0;
  let extra = 0;
  for (let s = plan.firstStep; s < plan.firstStep + crashSteps; s++) {
    const n = counts.get(s) ?? 0;
    if (n === 0) lost++;
    if (n > 1) duplicated++;
    extra += Math.max(0, n - 1);
  }
  return {
    duplicated,
    lost,
    extra,
    killedAt: plan.killAt,
    killed,
    resumed: second.lines.includes('done'),
    backS,
    readyS: since(readyAt),
    doneS,
  };
}

/** The crash figures of one loop's kills, under `<prefix>…_<key>`, its printed line and its note. */
function crashFigures(
  label: string,
  prefix: string,
  key: string,
  runs: CrashRun[],
  detail: (r: CrashRun, i: number) => string = () => '',
): { metrics: Record<string, number>; line: string; note: string } {
  const what = (r: CrashRun) => (r.killed ? '' : ' (not killed)') + (r.resumed ? '' : ' (resume did not finish)');
  return {
    metrics: {
      [`${prefix}duplicated_steps_${key}`]: runs.reduce((n, r) => n + r.duplicated, 0),
      [`${prefix}lost_steps_${key}`]: runs.reduce((n, r) => n + r.lost, 0),
      [`${prefix}rerun_steps_${key}`]: runs.reduce((n, r) => n + r.extra, 0),
      [`${prefix}kills_with_duplicate_${key}`]: runs.filter((r) => r.duplicated > 0).length,
      // Seconds from the kill to the first step of the new process, over the kills that came (NaN: none did).
      [`${prefix}back_p50_s_${key}`]: summarize(runs.map((r) => r.backS).filter(Number.isFinite)).p50,
      [`${prefix}done_p50_s_${key}`]: summarize(runs.map((r) => r.doneS).filter(Number.isFinite)).p50,
    },
    line: `  ${label}: crash ${runs.map((r, i) => `@${r.killedAt} dup ${r.duplicated} lost ${r.lost} extra ${r.extra}${detail(r, i) ? ` ${detail(r, i)}` : ''} ${Number.isFinite(r.readyS) ? `worker up ${r.readyS.toFixed(1)} s ` : ''}back ${r.backS.toFixed(1)} s done ${r.doneS.toFixed(1)} s${what(r)}`).join('; ')}\n`,
    note: runs
      .map(
        (r, i) =>
          `killed at step ${r.killedAt}: ${r.duplicated} duplicated, ${r.lost} lost, ${r.extra} extra runs${detail(r, i) ? `, ${detail(r, i)}` : ''}, stepping again ${r.backS.toFixed(1)} s after the kill, done after ${r.doneS.toFixed(1)} s${r.killed ? '' : ', the kill never came'}${r.resumed ? '' : ', the resume did not finish in time'}`,
      )
      .join('; '),
  };
}

/** Where Mindloop's crash loop is killed: after a tick's diary row committed (as the peers), or while its think call is at the model. */
type MindloopWindow = 'effect' | 'model';

/**
 * Mindloop's kills, in one window. Each loop is an agent of its own on the bench stack whose
 * model is the endpoint; dup/lost count its diary rows per tick, and the endpoint's record the
 * model calls asked again.
 */
async function mindloopCrashes(
  proc: LoopProcess,
  stack: Stack,
  env: Record<string, string>,
  endpoint: ScriptedEndpoint,
  window: MindloopWindow,
  { kills, crashSteps }: PeersSizes,
): Promise<{ runs: CrashRun[]; repeated: Array<ReturnType<typeof repeatedCalls>> }> {
  const runs: CrashRun[] = [];
  const repeated: Array<ReturnType<typeof repeatedCalls>> = [];
  for (let k = 0; k < kills; k++) {
    const loop = `crash-mindloop-${window}-${k}`;
    await seedCrashAgent(stack.db.db, loop, endpoint.baseUrl(loop));
    const killAt = randomKillStep(crashSteps);
    runs.push(
      await crashOnce(proc, env, {
        loop,
        steps: crashSteps,
        killAt,
        firstStep: 1,
        resumeLimitMs: resumeLimitMs.mindloop,
        effects: (l) => diaryRowsPerTick(stack.db.db, l),
        ...(window === 'effect'
          ? { args: [String(killAt)], killOnStepLine: true }
          : { killOnStepLine: false, armKill: (kill: () => void) => endpoint.holdThink(loop, killAt, kill) }),
      }),
    );
    repeated.push(repeatedCalls(endpoint.calls(loop)));
  }
  return { runs, repeated };
}

export async function measurePeers(
  z: PeersSizes = peersSizes.full,
): Promise<{ metrics: Record<string, number>; notes: Record<string, string> }> {
  const only = selection();
  const crashPeers = peers.filter((p) => only.crash.has(p.name));
  if (only.perf || crashPeers.length) ensureInstalled();
  const stamp = `${process.pid}_${Date.now()}`;
  const peersDb = await scratchDatabase('mindloop_peers');
  const mindloopDb = await scratchDatabase('mindloop_peers_ml');
  const bundle = join(tmpdir(), `mindloop-peers-bundle-${stamp}.js`);
  const mindloopBundle = join(tmpdir(), `mindloop-peers-ml-bundle-${stamp}.js`);
  // In the tree, where its packages resolve from node_modules.
  const mindloopChild = join(root, '.build', `peers-ml-child-${stamp}`);
  const { env, stack, stop } = await benchStack({ databaseUrl: mindloopDb.url });
  const db = new pg.Pool({ connectionString: peersDb.url, max: 2 });
  let endpoint: ScriptedEndpoint | undefined;
  const metrics: Record<string, number> = {};
  const notes: Record<string, string> = {};
  try {
    await db.query(
      'CREATE TABLE peer_effects (peer text NOT NULL, loop text NOT NULL, step int NOT NULL, reply text, at timestamptz NOT NULL DEFAULT now())',
    );
    const childEnv = {
      PEER_DB_URL: peersDb.url,
      TEMPORAL_ADDRESS: stack.temporal.address,
      TEMPORAL_NAMESPACE: stack.temporal.namespace,
      PEER_BUNDLE: bundle,
      ...(z.smoke ? { PEER_SMOKE: '1' } : {}),
    };

    if (only.perf) {
      process.stdout.write('  mindloop: tick (bench/tick.ts measureTicks) on the same Postgres…\n');
      const t = await measureTicks(
        stack,
        env.MINDLOOP_TOOLS_DIR,
        z.smoke ? tickSizes.smoke.ticks : tickSizes.full.ticks,
      );
      Object.assign(metrics, {
        mindloop_tick_p50_ms: t.overhead_p50_ms!,
        mindloop_tick_p99_ms: t.overhead_p99_ms!,
        mindloop_ticks_per_s_50: t.ticks_per_s_50_agents!,
      });
      for (const p of peers) {
        process.stdout.write(`  ${p.name}: perf…\n`);
        const m = await perf(p, childEnv);
        Object.assign(metrics, m, {
          [`mindloop_tick_ratio_vs_${p.key}`]: t.overhead_p50_ms! / m[`${p.key}_step_p50_ms`]!,
        });
      }
    }
    for (const p of crashPeers) {
      const runs: CrashRun[] = [];
      for (let k = 0; k < z.kills; k++) {
        runs.push(
          await crashOnce(p, childEnv, {
            loop: `crash-${p.name}-${k}`,
            steps: z.crashSteps,
            killAt: randomKillStep(z.crashSteps),
            firstStep: 0,
            killOnStepLine: true,
            resumeLimitMs: resumeLimitMs.peer,
            effects: async (loop) => {
              const { rows } = await db.query<{ step: number; n: number }>(
                'SELECT step, count(*)::int AS n FROM peer_effects WHERE peer = $1 AND loop = $2 GROUP BY step',
                [p.name, loop],
              );
              return new Map(rows.map((r) => [r.step, r.n]));
            },
          }),
        );
      }
      const f = crashFigures(p.name, 'crash_', p.key, runs);
      process.stdout.write(f.line);
      Object.assign(metrics, f.metrics);
      notes[`crash_${p.key}`] = f.note;
    }
    if (only.crash.has(mindloop.name)) {
      process.stdout.write(
        '  mindloop: crash (a worker process of the product, the model an endpoint in this process)…\n',
      );
      await writeWorkflowBundle(mindloopBundle);
      // The worker process runs from a build, as `npm run worker` does.
      await compileWorkerEntries({ child: join(root, mindloop.script) }, mindloopChild);
      const built = { ...mindloop, built: join(mindloopChild, 'child.js') };
      endpoint = await startScriptedEndpoint();
      const mindloopEnv = {
        DATABASE_URL: stack.database.url,
        DATABASE_POOL_MAX: '4',
        TEMPORAL_ADDRESS: stack.temporal.address,
        TEMPORAL_NAMESPACE: stack.temporal.namespace,
        MINDLOOP_WORKFLOW_BUNDLE: mindloopBundle,
        MINDLOOP_TOOLS_DIR: env.MINDLOOP_TOOLS_DIR,
        MINDLOOP_DATA_DIR: env.MINDLOOP_DATA_DIR,
        LOG_LEVEL: 'WARN',
        // As `npm run worker` runs it (scripts/allocator.mjs).
        ...allocatorEnv(),
      };
      for (const [window, prefix] of [
        ['effect', 'crash_'],
        ['model', 'crash_midcall_'],
      ] as const) {
        const { runs, repeated } = await mindloopCrashes(built, stack, mindloopEnv, endpoint, window, z);
        const calls = (i: number) => {
          const r = repeated[i]!;
          const purposes = Object.entries(r.byPurpose)
            .map(([k, n]) => `${k} ${n}`)
            .join(', ');
          return `${r.repeated} repeated LLM calls${purposes ? ` (${purposes})` : ''}${r.unattributed ? `, ${r.unattributed} unattributed` : ''}`;
        };
        const f = crashFigures(
          `mindloop${window === 'model' ? ' (killed mid-call)' : ''}`,
          prefix,
          mindloop.key,
          runs,
          (_, i) => calls(i),
        );
        process.stdout.write(f.line);
        Object.assign(metrics, f.metrics, {
          [`${prefix}repeated_llm_calls_${mindloop.key}`]: repeated.reduce((n, r) => n + r.repeated, 0),
        });
        notes[`${prefix}${mindloop.key}`] = f.note;
      }
    }
  } finally {
    await endpoint?.close();
    await db.end();
    await stop();
    rmSync(bundle, { force: true });
    rmSync(mindloopBundle, { force: true });
    rmSync(mindloopChild, { recursive: true, force: true });
    await peersDb.drop();
    await mindloopDb.drop();
  }
  Object.assign(notes, {
    ...(only.perf
      ? {}
      : {
          partial: `BENCH_PEERS_ONLY=${process.env.BENCH_PEERS_ONLY}: only the crash test of ${[...only.crash].join(', ')} ran`,
        }),
    loop: `each peer: one loop of ${z.smoke ? '12' : '200'} steps (p50/p99 of the gap between consecutive steps after ${z.smoke ? 4 : 20} warm-up steps), then ${z.smoke ? '5 loops of 4' : '50 loops of 20'} steps at once (steps/s); a step = the instant fake model + one INSERT (its side effect), made durable the peer's way`,
    mindloop:
      'mindloop_tick_*: bench/tick.ts measureTicks on the same Postgres (a tick = think → reflexes → commands; here the reflexes are off and the scripted reply has no commands, so a tick is its think, a local activity after a fast answer); mindloop_tick_ratio_vs_<peer> = Mindloop tick p50 / the peer step p50, same run',
    rss: "<peer>_rss_mb: the peer process after its 50 loops (Temporal: the worker process, not the server); Mindloop's worker with 500 and 2 000 idle agents is measured by `npm run bench -- tick` (rss_mb_500_idle_agents, rss_mb_2000_idle_agents in bench/results/tick.json)",
    crash: `${z.kills} kills per loop, each a loop of ${z.crashSteps} steps SIGKILLed at a random step (as soon as that step's side effect is reported), then resumed (DBOS: DBOS.launch() recovers it; LangGraph: invoke(null) on the same thread_id; Temporal and Mindloop: a new worker process). crash_duplicated_steps = steps with more than one side-effect row, crash_lost_steps = steps with none, crash_rerun_steps = extra rows, summed over the kills; back / done: seconds from the kill to the new process's first step (its start included) and to the loop's end`,
    mindloop_crash: `Mindloop: ${z.crashSteps} ticks of agentLoopWorkflow (reflexes off, the tick of mindloop_tick_*) in a worker process of the product (bench/peers-mindloop-child.ts); the model an OpenAI-compatible endpoint in the harness answering each think with one diary.add; the side effect is the tick's diary_entries row (no unique key). crash_*: killed right after tick N's diary row committed, before applyCommands' completion reached Temporal (the worker holds there, so every kill lands in that window); crash_midcall_*: killed while tick N's think request waited at the endpoint. crash_repeated_llm_calls = requests the endpoint received again for a tick and purpose it had already received (with the reflexes off a tick asks one: its think)`,
  });
  return { metrics, notes };
}
