/**
 * What every peer's loop shares: the instant fake model, the step's side effect (a row in
 * `peer_effects`, keyed by (peer, loop, step) with no unique constraint, so a repeat shows as a
 * second row), the per-step marks, and the protocol with bench/peers.ts (stdout lines).
 */
import pg from 'pg';

export const dbUrl = process.env.PEER_DB_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const peer = process.argv[2] ?? '';
export const mode = (process.argv[3] ?? 'perf') as 'perf' | 'crash' | 'resume';
/** Crash and resume: the loop's id and its length. */
export const loopId = process.argv[4] ?? 'crash-0';
export const crashSteps = Number(process.argv[5] ?? 200);

export const pool = new pg.Pool({ connectionString: dbUrl, max: 10 });

/** The same instant "model" for every framework: a reply with no wait. */
export async function fakeModel(loop: string, step: number): Promise<string> {
  return `Thought ${step} of ${loop}: ${['river', 'orbit', 'quartz', 'meadow', 'cipher', 'ember'][step % 6]}.`;
}

const marks = new Map<string, number[]>();

/** One step's work: the model, then its side effect; in crash and resume mode the step is reported on stdout. */
export async function doStep(loop: string, step: number): Promise<string> {
  const reply = await fakeModel(loop, step);
  await pool.query('INSERT INTO peer_effects (peer, loop, step, reply) VALUES ($1, $2, $3, $4)', [peer, loop, step, reply]);
  const m = marks.get(loop) ?? [];
  m.push(performance.now());
  marks.set(loop, m);
  if (mode !== 'perf') process.stdout.write(`step ${step}\n`);
  return reply;
}

/** How the bench runs one peer: perf (one long loop, then 50 at once) and crash/resume of one loop. */
export interface PeerLoop {
  start(): Promise<void>;
  /** Run one loop to its end (a fresh one; `resume` false) or resume a crashed one. */
  run(loop: string, steps: number, resume: boolean): Promise<void>;
  stop(): Promise<void>;
}

/** The harness's smoke run (PEER_SMOKE=1): the shortest loops that still give every figure. */
const smoke = process.env.PEER_SMOKE === '1';
export const soloSteps = smoke ? 12 : 200;
export const warmup = smoke ? 4 : 20;
export const manyLoops = smoke ? 5 : 50;
export const manySteps = smoke ? 4 : 20;

export async function main(impl: PeerLoop): Promise<void> {
  await impl.start();
  if (mode === 'perf') {
    await impl.run(`solo-${process.pid}`, soloSteps, false);
    const m = marks.get(`solo-${process.pid}`)!;
    const gaps = m.slice(warmup + 1).map((t, i) => t - m[i + warmup]!);
    const ids = Array.from({ length: manyLoops }, (_, i) => `many-${process.pid}-${i}`);
    const t0 = performance.now();
    await Promise.all(ids.map((id) => impl.run(id, manySteps, false)));
    const seconds = (performance.now() - t0) / 1000;
    const steps = ids.reduce((n, id) => n + (marks.get(id)?.length ?? 0), 0);
    process.stdout.write(`${JSON.stringify({ gaps, steps, seconds, rssMb: process.memoryUsage().rss / 2 ** 20 })}\n`);
  } else {
    await impl.run(loopId, crashSteps, mode === 'resume');
    process.stdout.write('done\n');
  }
  await impl.stop();
  await pool.end();
  process.exit(0);
}
