/** Shared benchmark plumbing: percentiles, the results file (`{name, at, machine, metrics}`), a stack. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { parseEnv, type Env } from '../env.js';
import { bundleWorkflows } from '../workers/queues.js';
import { startStack, type Stack } from '../runtime/stack.js';
import { failoverWorkerOptions } from '../workers/failover.js';
import pg from 'pg';

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx]!;
}

export function summarize(samples: number[]): { p50: number; p99: number; mean: number; n: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), mean, n: samples.length };
}

const round = (v: number) => Math.round(v * 1000) / 1000;

/** Where results go: bench/results/, and a smoke run's under bench/results/smoke/ (both ignored by git). */
export const resultsDir = join(import.meta.dirname, 'results');
export const smokeResultsDir = join(resultsDir, 'smoke');

export interface ResultOptions {
  /** The folder of `<name>.json` (default `resultsDir`). */
  dir?: string;
  /** A `--smoke` run: the file says so; its figures are a check that the path runs, not measurements. */
  smoke?: boolean;
}

/** Print a table and write `<dir>/<name>.json`. */
export function writeResult(
  name: string,
  metrics: Record<string, number | string>,
  notes: Record<string, string> = {},
  opts: ResultOptions = {},
): string {
  const result = {
    name,
    at: new Date().toISOString(),
    machine: { cpus: cpus().length, node: process.version },
    ...(opts.smoke ? { smoke: true } : {}),
    // A few keys name things (local-tick's `model`): those are kept as they are.
    metrics: Object.fromEntries(Object.entries(metrics).map(([k, v]) => [k, typeof v === 'number' ? round(v) : v])),
    ...(Object.keys(notes).length ? { notes } : {}),
  };
  const dir = opts.dir ?? resultsDir;
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}.json`);
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  const width = Math.max(...Object.keys(metrics).map((k) => k.length));
  process.stdout.write(
    `\n${name}${opts.smoke ? ' (smoke)' : ''}\n${Object.entries(result.metrics)
      .map(([k, v]) => `  ${k.padEnd(width)}  ${v}`)
      .join('\n')}\n`,
  );
  for (const [k, v] of Object.entries(notes)) process.stdout.write(`  note ${k}: ${v}\n`);
  process.stdout.write(`wrote ${file}\n`);
  return file;
}

/** A TCP port of 127.0.0.1 nobody listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

/**
 * The embedded stack on a throw-away data dir and free ports, so a benchmark never touches
 * the user's `.data/` nor collides with a running `npm start`. `databaseUrl`: a Postgres of the
 * benchmark's own instead of the embedded PGlite.
 */
export async function benchStack(
  opts: { databaseUrl?: string } = {},
): Promise<{ env: Env; stack: Stack; stop(): Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'mindloop-bench-'));
  const parsed = parseEnv({
    ...process.env,
    MINDLOOP_DATA_DIR: dataDir,
    TEMPORAL_PORT: String(await freePort()),
    PGLITE_PORT: String(await freePort()),
    ...(opts.databaseUrl ? { DATABASE_URL: opts.databaseUrl } : {}),
  });
  if (!parsed.success) throw new Error(parsed.error.message);
  const env = parsed.data;
  const stack = await startStack({ env, ui: false, log: (l) => process.stdout.write(`  ${l}\n`) });
  return {
    env,
    stack,
    async stop() {
      await stack.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

let productBundle: Promise<WorkflowBundleWithSourceMap> | undefined;
/** The product's workflow bundle, built once per process (a benchmark starts several workers). */
export function benchBundle(): Promise<WorkflowBundleWithSourceMap> {
  productBundle ??= bundleWorkflows();
  return productBundle;
}

/**
 * Run `fn` while a worker polls `taskQueue` on the stack with the product's workflows and
 * `activities`; `fn` gets a client of the stack. Both connections close afterwards.
 */
export async function withBenchWorker<T>(
  stack: Stack,
  o: { taskQueue: string; activities: object; maxCachedWorkflows?: number },
  fn: (client: Client) => Promise<T>,
): Promise<T> {
  const connection = await NativeConnection.connect(stack.temporal.connection);
  const client = new Client({
    connection: await Connection.connect(stack.temporal.connection),
    namespace: stack.temporal.namespace,
  });
  try {
    const worker = await Worker.create({
      connection,
      namespace: stack.temporal.namespace,
      taskQueue: o.taskQueue,
      ...failoverWorkerOptions,
      workflowBundle: await benchBundle(),
      activities: o.activities,
      ...(o.maxCachedWorkflows ? { maxCachedWorkflows: o.maxCachedWorkflows } : {}),
    });
    return await worker.runUntil(() => fn(client));
  } finally {
    await client.connection.close();
    await connection.close();
  }
}

/** The Postgres a benchmark makes its scratch databases on: BENCH_DATABASE_URL / TEST_DATABASE_URL, default the local one. */
export const benchAdminUrl =
  process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** A database of the benchmark's own on that Postgres (`<prefix>_<pid>_<time>`), and how to drop it. */
export async function scratchDatabase(prefix: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${process.pid}_${Date.now()}`;
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: benchAdminUrl });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await admin(`create database ${name}`);
  const url = new URL(benchAdminUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`drop database if exists ${name} with (force)`) };
}
