/**
 * The ports `npm start` takes, checked all at once before anything starts: a start on a machine
 * where another Mindloop (another checkout, or this one with another data dir) or some other
 * program holds them is refused in one line that says, for each taken port, what holds it and
 * which variable moves it, with free ports to use instead. What holds a port is read from
 * /proc (the listening socket's inode, the process with that socket open): a Mindloop is known
 * by the file it runs (`workers/dev.ts` of a checkout whose package.json says `mindloop`), its
 * Temporal dev server by its `--db-filename` and the pid file beside it.
 *
 * The bus is not checked: a NATS already answering on its port is one to join, not a conflict
 * (runtime/nats-server.ts).
 */
import { readdirSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import type { Env } from '../env.js';
import { pidAlive } from './pid.js';

/** A start the program expected might not go (a port taken, a data dir in use): one line, no stack trace. */
export class StartRefused extends Error {
  override name = 'StartRefused';
}

interface StartPort {
  port: number;
  host: string;
  /** The variable that moves it. */
  variable: 'PGLITE_PORT' | 'TEMPORAL_PORT' | 'TEMPORAL_UI_PORT' | 'MINDLOOP_NOTEBOOK_PORT';
  what: string;
}

/** The ports a start with `env` listens on (the embedded services the env does not replace). */
function startPorts(env: Env, o: { ui?: boolean } = {}): StartPort[] {
  const local = '127.0.0.1';
  const ports: StartPort[] = [];
  if (!env.DATABASE_URL)
    ports.push({ port: env.PGLITE_PORT, host: local, variable: 'PGLITE_PORT', what: 'embedded Postgres' });
  if (!env.TEMPORAL_ADDRESS) {
    ports.push({ port: env.TEMPORAL_PORT, host: local, variable: 'TEMPORAL_PORT', what: 'Temporal dev server' });
    if (o.ui ?? true)
      ports.push({ port: env.TEMPORAL_UI_PORT, host: local, variable: 'TEMPORAL_UI_PORT', what: 'Temporal UI' });
  }
  if (env.MINDLOOP_NOTEBOOK_PORT !== 'off')
    ports.push({
      port: env.MINDLOOP_NOTEBOOK_PORT,
      host: env.MINDLOOP_NOTEBOOK_HOST,
      variable: 'MINDLOOP_NOTEBOOK_PORT',
      what: 'notebook',
    });
  return ports;
}

/** Whether `host:port` can be listened on now: null, or the error code (EADDRINUSE when something holds it). */
export function bindError(host: string, port: number): Promise<string | null> {
  return new Promise((done) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => done(null)));
  });
}

/** What holds a port, as far as this user may see. */
type Holder =
  | { kind: 'mindloop'; dir: string; pid: number; via?: { what: string; pid: number } }
  | { kind: 'temporal'; dataDir: string; pid: number; ownPidFile: boolean }
  | { kind: 'other'; name?: string; pid?: number }
  /** Not held, but refused to us (EACCES: a privileged port, EADDRNOTAVAIL: an address not of this machine). */
  | { kind: 'refused'; code: string };

const read = (path: string): string | undefined => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};
const argvOf = (pid: number): string[] => (read(`/proc/${pid}/cmdline`) ?? '').split('\0').filter(Boolean);
const parentOf = (pid: number): number | undefined => {
  const stat = read(`/proc/${pid}/stat`);
  const ppid = stat ? Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) : NaN;
  return Number.isInteger(ppid) && ppid > 0 ? ppid : undefined;
};
const cwdOf = (pid: number): string | undefined => {
  try {
    return readlinkSync(`/proc/${pid}/cwd`);
  } catch {
    return undefined;
  }
};

/** The process that listens on `port` (TCP, any address), if /proc tells it. */
function portHolderPid(port: number): number | undefined {
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of (read(table) ?? '').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local_address is HEX_IP:HEX_PORT; state 0A is LISTEN; the inode is the tenth field.
      if (f[3] === '0A' && parseInt(f[1]?.split(':')[1] ?? '', 16) === port && f[9] && f[9] !== '0')
        inodes.add(`socket:[${f[9]}]`);
    }
  }
  if (inodes.size === 0) return undefined;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${entry}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (inodes.has(readlinkSync(`/proc/${entry}/fd/${fd}`))) return Number(entry);
      } catch {
        /* closed meanwhile */
      }
    }
  }
  return undefined;
}

/** The Mindloop checkout a process runs a file of (its package.json says `mindloop`), if any. */
function mindloopDir(pid: number): string | undefined {
  const cwd = cwdOf(pid);
  for (const arg of argvOf(pid).slice(1)) {
    if (arg.startsWith('-') || !cwd) continue;
    let file: string;
    try {
      file = realpathSync(resolve(cwd, arg.replace(/^file:\/\//, '')));
    } catch {
      continue;
    }
    if (file.includes('/node_modules/')) continue;
    for (let dir = dirname(file); dir !== dirname(dir); dir = dirname(dir)) {
      const pkg = read(join(dir, 'package.json'));
      if (pkg === undefined) continue;
      try {
        if ((JSON.parse(pkg) as { name?: unknown }).name === 'mindloop') return dir;
      } catch {
        /* not JSON */
      }
      break;
    }
  }
  return undefined;
}

/** Who `pid` is: a Mindloop (itself or through its Temporal dev server), a Temporal left running, or something else. */
function describeHolder(pid: number | undefined): Holder {
  if (pid === undefined) return { kind: 'other' };
  const argv = argvOf(pid);
  const dbFile = argv.includes('start-dev') ? argv[argv.indexOf('--db-filename') + 1] : undefined;
  if (dbFile && argv.includes('--db-filename')) {
    const dataDir = dirname(dbFile);
    const parent = parentOf(pid);
    const owner = parent === undefined ? undefined : mindloopDir(parent);
    if (owner && parent !== undefined)
      return { kind: 'mindloop', dir: owner, pid: parent, via: { what: 'its Temporal dev server', pid } };
    return { kind: 'temporal', dataDir, pid, ownPidFile: read(join(dataDir, 'temporal.pid'))?.trim() === String(pid) };
  }
  const dir = mindloopDir(pid);
  if (dir) return { kind: 'mindloop', dir, pid };
  const name = read(`/proc/${pid}/comm`)?.trim();
  return { kind: 'other', pid, ...(name ? { name } : {}) };
}

interface TakenPort extends StartPort {
  holder: Holder;
}

function holderText(h: Holder, root: string): string {
  switch (h.kind) {
    case 'mindloop':
      return `${h.dir === root ? 'the Mindloop of this directory' : `the Mindloop in ${h.dir}`} (${h.via ? `${h.via.what}, pid ${h.via.pid}` : `pid ${h.pid}`})`;
    case 'temporal':
      return `a Temporal dev server left running by a Mindloop (data ${h.dataDir}, pid ${h.pid})`;
    case 'other':
      return h.pid === undefined
        ? 'something else (not visible to this user)'
        : `something else (${h.name ?? 'a process'}, pid ${h.pid})`;
    case 'refused':
      return `nothing: listening there is refused (${h.code})`;
  }
}

interface Refusal {
  taken: TakenPort[];
  /** Variables set to the same port. */
  clashes: string[][];
  /** A free port for each variable to move. */
  free: Map<string, number>;
  dataDirInUse?: { dir: string; pid: number };
  /** This checkout: its own Mindloop is named so. */
  root: string;
}

/** The refusal: every taken port with its holder and variable, and what to set instead, in one line. */
function refusalLine(p: Refusal): string {
  const parts = p.taken.map(
    (t, i) =>
      `port ${t.port} (${t.variable}, ${t.what}) ${i === 0 ? 'is taken ' : ''}by ${holderText(t.holder, p.root)}`,
  );
  for (const vars of p.clashes) parts.push(`${vars.join(' and ')} name the same port`);
  if (p.dataDirInUse) parts.push(`the data dir ${p.dataDirInUse.dir} is in use by process ${p.dataDirInUse.pid}`);
  const sets = [
    ...(p.free.size ? [`${[...p.free].map(([v, port]) => `${v}=${port}`).join(' ')} (free now)`] : []),
    ...(p.dataDirInUse ? ['MINDLOOP_DATA_DIR=<another dir>'] : []),
  ];
  const fix = sets.length
    ? ` Set ${sets.join(' and ')}, or stop what holds ${p.taken.length + (p.dataDirInUse ? 1 : 0) > 1 ? 'them' : 'it'}.`
    : '';
  return `mindloop: cannot start: ${parts.join('; ')}.${fix}`;
}

/** A port above `from` that can be listened on now and is none of `avoid`. */
async function freeAbove(host: string, from: number, avoid: Set<number>): Promise<number | undefined> {
  for (let port = from + 1; port <= Math.min(from + 200, 65535); port++) {
    if (avoid.has(port)) continue;
    if ((await bindError(host, port)) === null) return port;
  }
  return undefined;
}

/**
 * Check every port `npm start` needs, and its data dir's lock, before it starts anything.
 * Returns the refusal line, or null when it may start. A Temporal dev server that a killed start
 * of this data dir left behind is not in the way: the start stops it (runtime/pid.ts reapOrphan).
 */
export async function checkStartPorts(env: Env, o: { ui?: boolean; root: string }): Promise<string | null> {
  const dataDir = resolve(env.MINDLOOP_DATA_DIR);
  const ports = startPorts(env, o);
  const taken: TakenPort[] = [];
  for (const p of ports) {
    const err = await bindError(p.host, p.port);
    if (err === null) continue;
    const holder: Holder =
      err === 'EADDRINUSE' ? describeHolder(portHolderPid(p.port)) : { kind: 'refused', code: err };
    if (holder.kind === 'temporal' && holder.ownPidFile && holder.dataDir === dataDir) continue;
    taken.push({ ...p, holder });
  }
  let dataDirInUse: { dir: string; pid: number } | undefined;
  if (!env.DATABASE_URL) {
    const owner = Number(read(join(dataDir, 'pglite', 'mindloop.lock'))?.trim());
    if (owner && owner !== process.pid && pidAlive(owner)) dataDirInUse = { dir: dataDir, pid: owner };
  }
  const clashes = [...new Set(ports.map((p) => p.port))]
    .map((port) => ports.filter((p) => p.port === port).map((p) => p.variable))
    .filter((vars) => vars.length > 1);
  if (taken.length === 0 && clashes.length === 0 && !dataDirInUse) return null;
  const avoid = new Set(ports.map((p) => p.port));
  const free = new Map<string, number>();
  const moved = [
    ...taken,
    ...clashes.flatMap((vars) => vars.slice(1).map((v) => ports.find((p) => p.variable === v)!)),
  ];
  for (const t of moved) {
    if (free.has(t.variable)) continue;
    const port = await freeAbove(t.host, t.port, avoid);
    if (port === undefined) continue;
    avoid.add(port);
    free.set(t.variable, port);
  }
  return refusalLine({ taken, clashes, free, ...(dataDirInUse ? { dataDirInUse } : {}), root: o.root });
}
