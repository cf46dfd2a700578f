/**
 * The embedded Temporal service: the Temporal CLI dev server as a child process, persisting
 * to a SQLite file (WAL) under the data dir, with the Web UI. Used by `npm start` and tests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createServer } from 'node:net';
import { Connection } from '@temporalio/client';
import { reapOrphan } from './pid.js';
import { StartRefused } from './start-ports.js';
import { allSearchAttributes, cliSearchAttributeType } from '../workflows/lib/search-attributes.js';

interface DevServerOptions {
  /** Path of the `temporal` CLI binary. */
  binary: string;
  dataDir: string;
  port: number;
  uiPort: number;
  namespace: string;
  /** false → --headless (tests). */
  ui?: boolean;
  startTimeoutMs?: number;
}

export interface DevServer {
  address: string;
  uiUrl?: string;
  dbFile: string;
  logFile: string;
  pid: number;
  stop(): Promise<void>;
}

/** Resolves once the frontend answers a gRPC call. */
export async function waitForTemporal(address: string, timeoutMs: number, child?: ChildProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    if (child && child.exitCode !== null) throw new Error(`temporal dev server exited with ${child.exitCode}`);
    try {
      const conn = await Connection.connect({ address, connectTimeout: 1000 });
      try {
        await conn.workflowService.getSystemInfo({});
        return;
      } finally {
        await conn.close();
      }
    } catch (err) {
      lastError = err;
      await sleep(200);
    }
  }
  throw new Error(`Temporal at ${address} did not answer within ${timeoutMs} ms: ${String(lastError)}`);
}

/** Fails with the fix when something already listens on the port (it could be another Temporal). */
async function assertPortFree(port: number, what: string, envName: string): Promise<void> {
  await new Promise<void>((ok, fail) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) =>
      fail(
        err.code === 'EADDRINUSE'
          ? new StartRefused(
              `${what}: port ${port} is taken (another \`npm start\`?). Stop it, set ${envName}, or set TEMPORAL_ADDRESS to use that server`,
            )
          : err,
      ),
    );
    probe.listen(port, '127.0.0.1', () => probe.close(() => ok()));
  });
}

/** Dynamic config of the embedded dev server (one shard, one process: latency over throughput caps). */
const devServerDynamicConfig = [
  'history.transferProcessorMaxPollRPS=10000',
  'history.timerProcessorMaxPollRPS=10000',
  'history.visibilityProcessorMaxPollRPS=10000',
  // A timer is never due before now + this shift (a margin for clock skew between history
  // hosts; the default 1 s made every sub-second pace or retry wait a whole second: a 300 ms
  // pace took 1 003 ms, 10 ms takes 310 ms). One process has no skew to allow for.
  'history.timerProcessorMaxTimeShift="10ms"',
  // Eager activities: a workflow task that schedules an activity for its own task queue gets the
  // activity task back in the completion's response, with no trip through matching (the tick's
  // think activity).
  'system.enableActivityEagerExecution=true',
  // Task priority (core/priority.ts) orders a backlog only within a partition: the priority matcher, one partition a queue.
  'matching.useNewMatcher=true',
  'matching.numTaskqueueReadPartitions=1',
  'matching.numTaskqueueWritePartitions=1',
];

/** Start the dev server and wait until it answers. */
export async function startDevServer(opts: DevServerOptions): Promise<DevServer> {
  const dataDir = resolve(opts.dataDir);
  mkdirSync(dataDir, { recursive: true });
  const dbFile = join(dataDir, 'temporal.sqlite');
  const logFile = join(dataDir, 'temporal.log');
  const pidFile = join(dataDir, 'temporal.pid');
  await reapOrphan(pidFile, dbFile);
  await assertPortFree(opts.port, 'temporal dev server', 'TEMPORAL_PORT');
  if (opts.ui !== false) await assertPortFree(opts.uiPort, 'temporal web UI', 'TEMPORAL_UI_PORT');
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(opts.port),
    '--db-filename',
    dbFile,
    // WAL: the dev server survives a kill without a corrupt store, and readers don't block it.
    '--sqlite-pragma',
    'journal_mode=wal',
    '--sqlite-pragma',
    'synchronous=1',
    '--namespace',
    opts.namespace,
    '--log-level',
    'warn',
    // The history service reads its task queues at most 20 times a second per shard by default,
    // and the dev server has one shard: every activity and workflow task then waits up to 50 ms
    // to be dispatched (measured: activity round trip p50 50 ms → 7 ms with these lifted).
    ...devServerDynamicConfig.flatMap((kv) => ['--dynamic-config-value', kv]),
    ...allSearchAttributes.flatMap((sa) => ['--search-attribute', `${sa.name}=${cliSearchAttributeType(sa.type)}`]),
  ];
  if (opts.ui === false) args.push('--headless');
  else args.push('--ui-port', String(opts.uiPort));

  const log = createWriteStream(logFile, { flags: 'a' });
  const address = `127.0.0.1:${opts.port}`;
  const launch = () => {
    // detached: our own process group, so a terminal Ctrl-C reaches us first and we stop it in order.
    const c = spawn(opts.binary, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    if (c.pid) writeFileSync(pidFile, String(c.pid));
    c.stdout?.pipe(log, { end: false });
    c.stderr?.pipe(log, { end: false });
    return c;
  };
  let child = launch();
  // The server picks its HTTP, metrics and internal ports at random: one taken by another
  // process between its pick and its bind ends it at once. That is tried again, twice.
  for (let attempt = 1; ; attempt++) {
    try {
      await waitForTemporal(address, opts.startTimeoutMs ?? 60_000, child);
      break;
    } catch (err) {
      const exitedByItself = child.exitCode !== null;
      child.kill('SIGKILL');
      if (!exitedByItself || attempt >= 3) {
        log.end();
        throw new Error(`${(err as Error).message} (see ${logFile})`);
      }
      log.write(`\n[mindloop] the dev server exited during start (${(err as Error).message}); starting it again\n`);
      await assertPortFree(opts.port, 'temporal dev server', 'TEMPORAL_PORT');
      child = launch();
    }
  }

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= new Promise<void>((done) => {
      if (child.exitCode !== null || child.signalCode !== null) return done();
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      child.once('exit', () => {
        clearTimeout(killer);
        rmSync(pidFile, { force: true });
        log.end();
        done();
      });
      child.kill('SIGTERM');
    }));

  return {
    address,
    uiUrl: opts.ui === false ? undefined : `http://localhost:${opts.uiPort}`,
    dbFile,
    logFile,
    pid: child.pid ?? -1,
    stop,
  };
}
