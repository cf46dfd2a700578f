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
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { benchStack, summarize } from './lib.js';
import { measureTicks } from './tick.js';

const adminUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const peersDir = join(import.meta.dirname, 'peers');
const root = join(import.meta.dirname, '..');

/** argv[2] of the child → its script and the metric prefix. */
const peers = [
  { name: 'dbos', script: 'dbos.ts', key: 'dbos' },
  { name: 'langgraph-sync', script: 'langgraph.ts', key: 'langgraph_sync' },
  { name: 'langgraph-async', script: 'langgraph.ts', key: 'langgraph_async' },
  { name: 'temporal', script: 'temporal.ts', key: 'temporal' },
] as const;
type Peer = (typeof peers)[number];

const kills = 5;
const crashSteps = 200;

/** bench/peers/node_modules, from its lock file, unless there. */
function ensureInstalled(): void {
  if (existsSync(join(peersDir, 'node_modules', '.package-lock.json'))) return;
  process.stdout.write('  installing bench/peers (npm ci)…\n');
  const r = spawnSync('npm', [existsSync(join(peersDir, 'package-lock.json')) ? 'ci' : 'install', '--no-audit', '--no-fund'], { cwd: peersDir, stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`npm install in ${peersDir} failed (${r.status})`);
}

function withDb(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

interface Child {
  lines: string[];
  exited: Promise<number | null>;
  kill(): void;
}

/** A peer's loop as its own node process; `onLine` sees each stdout line. */
function runChild(p: Peer, args: string[], env: Record<string, string>, onLine: (line: string, c: Child) => void = () => {}): Child {
  const proc = spawn(process.execPath, ['--import', 'tsx', join('bench', 'peers', p.script), p.name, ...args], {
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
    if (code !== 0 && code !== null) process.stderr.write(`  ${p.name} ${args[0]} exited ${code}: ${err.trim().split('\n').slice(-5).join(' | ')}\n`);
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
  return { [`${p.key}_step_p50_ms`]: s.p50, [`${p.key}_step_p99_ms`]: s.p99, [`${p.key}_steps_per_s_50`]: r.steps / r.seconds, [`${p.key}_rss_mb`]: r.rssMb };
}

/** One kill: start a loop, SIGKILL its process at a random step, resume it, count each step's side effects. */
async function crashOnce(p: Peer, env: Record<string, string>, db: pg.Pool, k: number): Promise<{ duplicated: number; lost: number; extra: number; killedAt: number; resumed: boolean }> {
  const loop = `crash-${p.name}-${k}`;
  const killAt = 20 + Math.floor(Math.random() * (crashSteps - 40));
  const first = runChild(p, ['crash', loop, String(crashSteps)], env, (line, c) => {
    if (line === `step ${killAt}`) c.kill();
  });
  await first.exited;
  const second = runChild(p, ['resume', loop, String(crashSteps)], env);
  const timer = setTimeout(() => second.kill(), 60_000);
  await second.exited;
  clearTimeout(timer);
  const { rows } = await db.query<{ step: number; n: number }>('SELECT step, count(*)::int AS n FROM peer_effects WHERE peer = $1 AND loop = $2 GROUP BY step', [p.name, loop]);
  const counts = new Map(rows.map((r) => [r.step, r.n]));
  let duplicated = 0;
  let lost = 0;
  let extra = 0;
  for (let s = 0; s < crashSteps; s++) {
    const n = counts.get(s) ?? 0;
    if (n === 0) lost++;
    if (n > 1) duplicated++;
    extra += Math.max(0, n - 1);
  }
  return { duplicated, lost, extra, killedAt: killAt, resumed: second.lines.includes('done') };
}

export async function measurePeers(): Promise<{ metrics: Record<string, number>; notes: Record<string, string> }> {
  ensureInstalled();
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  const stamp = `${process.pid}_${Date.now()}`;
  const peersDb = `mindloop_peers_${stamp}`;
  const mindloopDb = `mindloop_peers_ml_${stamp}`;
  await admin.query(`CREATE DATABASE ${peersDb}`);
  await admin.query(`CREATE DATABASE ${mindloopDb}`);
  const bundle = join(tmpdir(), `mindloop-peers-bundle-${stamp}.js`);
  const { env, stack, stop } = await benchStack({ databaseUrl: withDb(adminUrl, mindloopDb) });
  const db = new pg.Pool({ connectionString: withDb(adminUrl, peersDb), max: 2 });
  const metrics: Record<string, number> = {};
  const notes: Record<string, string> = {};
  try {
    await db.query('CREATE TABLE peer_effects (peer text NOT NULL, loop text NOT NULL, step int NOT NULL, reply text, at timestamptz NOT NULL DEFAULT now())');
    const childEnv = { PEER_DB_URL: withDb(adminUrl, peersDb), TEMPORAL_ADDRESS: stack.temporal.address, TEMPORAL_NAMESPACE: stack.temporal.namespace, PEER_BUNDLE: bundle };

    process.stdout.write('  mindloop: tick (bench/tick.ts measureTicks) on the same Postgres…\n');
    const t = await measureTicks(stack, env.MINDLOOP_TOOLS_DIR);
    Object.assign(metrics, {
      mindloop_tick_p50_ms: t.overhead_p50_ms!,
      mindloop_tick_p99_ms: t.overhead_p99_ms!,
      mindloop_ticks_per_s_50: t.ticks_per_s_50_agents!,
      mindloop_rss_mb_500_idle_agents: t.rss_mb_500_idle_agents!,
    });
    for (const p of peers) {
      process.stdout.write(`  ${p.name}: perf…\n`);
      const m = await perf(p, childEnv);
      Object.assign(metrics, m, { [`mindloop_tick_ratio_vs_${p.key}`]: t.overhead_p50_ms! / m[`${p.key}_step_p50_ms`]! });
    }
    for (const p of peers) {
      const runs = [];
      for (let k = 0; k < kills; k++) runs.push(await crashOnce(p, childEnv, db, k));
      process.stdout.write(`  ${p.name}: crash ${runs.map((r) => `@${r.killedAt} dup ${r.duplicated} lost ${r.lost} extra ${r.extra}${r.resumed ? '' : ' (resume did not finish)'}`).join('; ')}\n`);
      metrics[`crash_duplicated_steps_${p.key}`] = runs.reduce((n, r) => n + r.duplicated, 0);
      metrics[`crash_lost_steps_${p.key}`] = runs.reduce((n, r) => n + r.lost, 0);
      metrics[`crash_rerun_steps_${p.key}`] = runs.reduce((n, r) => n + r.extra, 0);
      metrics[`crash_kills_with_duplicate_${p.key}`] = runs.filter((r) => r.duplicated > 0).length;
      notes[`crash_${p.key}`] = runs.map((r) => `killed at step ${r.killedAt}: ${r.duplicated} duplicated, ${r.lost} lost, ${r.extra} extra runs${r.resumed ? '' : ', resume did not finish in 60 s'}`).join('; ');
    }
  } finally {
    await db.end();
    await stop();
    rmSync(bundle, { force: true });
    await admin.query(`DROP DATABASE IF EXISTS ${peersDb} WITH (FORCE)`);
    await admin.query(`DROP DATABASE IF EXISTS ${mindloopDb} WITH (FORCE)`);
    await admin.end();
  }
  Object.assign(notes, {
    loop: `each peer: one loop of 200 steps (p50/p99 of the gap between consecutive steps after ${20} warm-up steps), then 50 loops of 20 steps at once (steps/s); a step = the instant fake model + one INSERT (its side effect), made durable the peer's way`,
    mindloop: 'mindloop_tick_*: bench/tick.ts measureTicks on the same Postgres (a tick = think → reflexes → applyCommands, three activities, reflexes off); mindloop_tick_ratio_vs_<peer> = Mindloop tick p50 / the peer step p50, same run',
    rss: '<peer>_rss_mb: the peer process after its 50 loops (Temporal: the worker process, not the server); mindloop_rss_mb_500_idle_agents: a worker process with 500 idle agents (bench/tick.ts)',
    crash: `${kills} kills per peer, each a loop of ${crashSteps} steps SIGKILLed at a random step, then resumed (DBOS: DBOS.launch() recovers it; LangGraph: invoke(null) on the same thread_id; Temporal: a new worker process). crash_duplicated_steps = steps with more than one side-effect row, crash_lost_steps = steps with none, crash_rerun_steps = extra rows, summed over the kills`,
    mindloop_crash: 'not measured here: Mindloop crash-resume is not part of this harness yet',
  });
  return { metrics, notes };
}
