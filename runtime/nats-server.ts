/**
 * Which bus a process uses, and the embedded NATS server `npm start` runs when no bus answers.
 * The order: NATS_URL when set (`off` turns the bus off); else a NATS already answering on
 * 127.0.0.1:4222 (these machines' system service, or another start's); else, for `npm start`
 * only, a `nats-server` binary on this machine started as a child with JetStream, its store
 * under the data dir, stopped with the rest. Without any of these the bus is off, and the
 * reason says how to get one.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, createWriteStream, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { delimiter, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { defaultNatsUrl } from './bus.js';
import { reapOrphan } from './pid.js';

export interface LocalNats {
  url: string;
  storeDir: string;
  logFile: string;
  pid: number;
  stop(): Promise<void>;
}

/** Where a bus comes from, said in the start-up summary. */
type BusChoice = { url: string; how: 'env' | 'local' | 'started'; server?: LocalNats } | { off: string };

const localHost = '127.0.0.1';
const installHint = 'apt-get install -y nats-server (npm start then runs it), or set NATS_URL';

/** Whether something accepts TCP on host:port within `timeoutMs`. */
export function portAnswers(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((done) => {
    const socket = createConnection({ host, port });
    const finish = (ok: boolean) => {
      socket.destroy();
      done(ok);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}

/** The `nats-server` binary: on PATH, or where Debian puts it. */
export function findNatsServer(path = process.env.PATH ?? ''): string | undefined {
  const candidates = [
    ...path
      .split(delimiter)
      .filter(Boolean)
      .map((d) => join(d, 'nats-server')),
    '/usr/sbin/nats-server',
    '/usr/bin/nats-server',
  ];
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      return c;
    } catch {
      /* not here */
    }
  }
  return undefined;
}

interface ChooseBusOptions {
  /** NATS_URL as env.ts parsed it. */
  natsUrl?: string;
  /** May start an embedded nats-server (npm start); a plain worker only looks. */
  embedded: boolean;
  dataDir: string;
  /** For tests; default the one on this machine. */
  binary?: string | null;
  /** The local port looked at (and taken by the embedded server); default 4222. */
  port?: number;
}

/** Pick the bus (see the module comment); starts the embedded server when that is the choice. */
export async function chooseBus(o: ChooseBusOptions): Promise<BusChoice> {
  if (o.natsUrl === 'off') return { off: 'off (NATS_URL=off)' };
  if (o.natsUrl) return { url: o.natsUrl, how: 'env' };
  const port = o.port ?? Number(new URL(defaultNatsUrl).port);
  const url = `nats://${localHost}:${port}`;
  if (await portAnswers(localHost, port)) return { url, how: 'local' };
  if (!o.embedded) return { off: `off: nothing answers at ${url} (set NATS_URL, or ${installHint})` };
  const binary = o.binary === undefined ? findNatsServer() : o.binary;
  if (!binary) return { off: `off: nothing answers at ${url} and no nats-server is installed (${installHint})` };
  try {
    const server = await startLocalNats({ binary, dataDir: o.dataDir, port });
    return { url: server.url, how: 'started', server };
  } catch (err) {
    return { off: `off: ${(err as Error).message}` };
  }
}

/** Run `nats-server -js` on 127.0.0.1:`port`, its JetStream store in `<dataDir>/nats`, until stop(). */
export async function startLocalNats(o: {
  binary: string;
  dataDir: string;
  port: number;
  startTimeoutMs?: number;
}): Promise<LocalNats> {
  const dir = resolve(o.dataDir, 'nats');
  mkdirSync(dir, { recursive: true });
  const storeDir = join(dir, 'store');
  const logFile = join(dir, 'nats-server.log');
  const pidFile = join(dir, 'nats-server.pid');
  await reapOrphan(pidFile, storeDir, 5000);
  const log = createWriteStream(logFile, { flags: 'a' });
  // detached: our own process group, so a terminal Ctrl-C reaches us first and we stop it in order.
  const child: ChildProcess = spawn(o.binary, ['-js', '-a', localHost, '-p', String(o.port), '-sd', storeDir], {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  if (child.pid) writeFileSync(pidFile, String(child.pid));
  child.stdout?.pipe(log, { end: false });
  child.stderr?.pipe(log, { end: false });
  const deadline = Date.now() + (o.startTimeoutMs ?? 10_000);
  while (!(await portAnswers(localHost, o.port, 200))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`nats-server did not start on ${localHost}:${o.port} (see ${logFile})`);
    }
    await sleep(100);
  }
  return {
    url: `nats://${localHost}:${o.port}`,
    storeDir,
    logFile,
    pid: child.pid ?? 0,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await Promise.race([exited, sleep(5000)]);
        if (child.exitCode === null) child.kill('SIGKILL');
      }
      rmSync(pidFile, { force: true });
      log.end();
    },
  };
}
