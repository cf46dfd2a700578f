/**
 * The speech engine's worker: the Python process (`speech/mindloop_speech`, run by the venv in
 * `.tools/`) that polls `speech-gpu` or `speech-cpu`, as a child process of ours, like the
 * Temporal dev server. Its output goes to a log file under the data dir, it counts as started once
 * it prints its ready line (`speech worker polling <queue> on <address> …`, after its models
 * loaded), and one left behind by a start that was killed is reaped at the next start.
 * Used by `npm start`, `npm run worker -- --queue speech…` and tests.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { reapOrphan } from './pid.js';

/** Where the engine's package lives in the repository (put on PYTHONPATH). */
export const speechSourceDir = fileURLToPath(new URL('../speech', import.meta.url));

/** What `MINDLOOP_QUEUES` may name for speech: `speech` lets the engine choose by its device. */
const speechQueueSettings = ['speech', 'speech-gpu', 'speech-cpu'] as const;
export type SpeechQueueSetting = (typeof speechQueueSettings)[number];

export function isSpeechQueueSetting(q: string): q is SpeechQueueSetting {
  return (speechQueueSettings as readonly string[]).includes(q);
}

/** How to get the engine when it is missing. */
export const speechInstallHint = 'run `npm run setup` (it installs the speech engine and its models into .tools/)';

/** The ready line's pattern: the queue it polls and the address. */
const readyLine = /speech worker polling (speech-gpu|speech-cpu) on (\S+)/;

/** The marker a pid file's process must carry in its command line to count as ours. */
const commandMarker = 'mindloop_speech.worker';

interface SpeechEngine {
  python: string;
  /** PYTHONPATH for the engine's package (the repository's `speech/`). */
  pythonPath: string;
}

/**
 * The engine, when it is installed: the venv's Python can import `mindloop_speech` from the
 * repository's `speech/`. Null when not (say `speechInstallHint`).
 */
export function findSpeechEngine(toolsDir: string, sourceDir = speechSourceDir): SpeechEngine | null {
  const python = join(resolve(toolsDir), 'venv', 'bin', 'python');
  if (!existsSync(python) || !existsSync(join(sourceDir, 'mindloop_speech', 'worker.py'))) return null;
  const probe = spawnSync(python, ['-c', 'import mindloop_speech.worker'], {
    env: { ...process.env, PYTHONPATH: sourceDir },
    stdio: 'ignore',
    timeout: 60_000,
  });
  return probe.status === 0 ? { python, pythonPath: sourceDir } : null;
}

interface SpeechWorkerOptions {
  engine: SpeechEngine;
  /** Temporal frontend, host:port. */
  address: string;
  namespace: string;
  /** `speech` (default): the engine polls `speech-gpu` with CUDA, else `speech-cpu`; or one queue, on that device. */
  queue?: SpeechQueueSetting;
  /** Log and pid files go here. */
  dataDir: string;
  /** Seconds to wait for the ready line (the models load first). Default 180 s. */
  startTimeoutMs?: number;
  /** Extra arguments for the engine (`--concurrency 1`, `--allow-dir …`). */
  args?: string[];
  /** Extra environment for the engine. */
  env?: Record<string, string>;
}

export interface SpeechWorker {
  /** The queue it polls, from its ready line. */
  queue: 'speech-gpu' | 'speech-cpu';
  readyLine: string;
  pid: number;
  logFile: string;
  /** Resolves with its exit code when the process ends (for whatever reason). */
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

/** The engine's arguments for a queue setting: one named queue also fixes the device. */
function speechWorkerArgs(o: Pick<SpeechWorkerOptions, 'address' | 'namespace' | 'queue' | 'args'>): string[] {
  const queue = o.queue ?? 'speech';
  const placement =
    queue === 'speech' ? ['--device', 'auto'] : ['--queue', queue, '--device', queue === 'speech-gpu' ? 'cuda' : 'cpu'];
  return [
    '-m',
    'mindloop_speech.worker',
    '--address',
    o.address,
    '--namespace',
    o.namespace,
    ...placement,
    ...(o.args ?? []),
  ];
}

/** Start the engine's worker and wait for its ready line; fails with the log's path when it exits or stays silent. */
export async function startSpeechWorker(opts: SpeechWorkerOptions): Promise<SpeechWorker> {
  const dataDir = resolve(opts.dataDir);
  mkdirSync(dataDir, { recursive: true });
  const name = `speech-worker${opts.queue && opts.queue !== 'speech' ? `-${opts.queue.slice('speech-'.length)}` : ''}`;
  const logFile = join(dataDir, `${name}.log`);
  const pidFile = join(dataDir, `${name}.pid`);
  await reapOrphan(pidFile, commandMarker);
  const log = createWriteStream(logFile, { flags: 'a' });
  const child = spawn(opts.engine.python, speechWorkerArgs(opts), {
    env: { ...process.env, PYTHONPATH: opts.engine.pythonPath, PYTHONUNBUFFERED: '1', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Our own process group: a terminal's Ctrl-C reaches us first, and we stop it in order.
    detached: true,
  });
  if (child.pid) writeFileSync(pidFile, String(child.pid));
  child.stdout.pipe(log, { end: false });
  child.stderr.pipe(log, { end: false });
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  void exited.then(() => {
    rmSync(pidFile, { force: true });
    log.end();
  });

  const timeoutMs = opts.startTimeoutMs ?? 180_000;
  let seen = '';
  const ready = await new Promise<RegExpExecArray | string>((done) => {
    const timer = setTimeout(() => done(`no ready line within ${Math.round(timeoutMs / 1000)} s`), timeoutMs);
    const onData = (d: Buffer) => {
      seen = (seen + d.toString()).slice(-4096);
      const m = readyLine.exec(seen);
      if (m) {
        clearTimeout(timer);
        child.stdout.off('data', onData);
        done(m);
      }
    };
    child.stdout.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      done(`it exited with ${code ?? 'a signal'} before it was ready`);
    });
  });
  if (typeof ready === 'string') {
    if (child.exitCode === null) child.kill('SIGKILL');
    throw new Error(`the speech worker did not start: ${ready} (see ${logFile})`);
  }

  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      // It lets running activities finish (up to 30 s), then exits.
      const killer = setTimeout(() => child.kill('SIGKILL'), 40_000);
      child.kill('SIGTERM');
      await exited;
      clearTimeout(killer);
    })());
  return { queue: ready[1] as SpeechWorker['queue'], readyLine: ready[0], pid: child.pid ?? -1, logFile, exited, stop };
}
