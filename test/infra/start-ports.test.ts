/**
 * `npm start` where its ports are taken: every port is checked before anything starts, and the
 * refusal is one line naming each taken port, what holds it (a Mindloop of another checkout, its
 * Temporal dev server, something else by its process name) and the variable that moves it, with
 * free ports to set. The holders are real processes: a Mindloop-like checkout (a package.json
 * named mindloop, its `workers/dev.ts` run by tsx, a child with a dev server's command line and
 * pid file) and a plain Node server. The real `workers/dev.ts` (what `npm start` hands over to)
 * is started against them and exits 1 with that line, no stack trace, nothing created.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bindError, checkStartPorts } from '../../runtime/start-ports.js';
import { freePort, repoToolsDir, tempDir, testEnv } from '../helpers/env.js';
import { repoRoot, run, tsxBin } from '../helpers/spawn.js';

const root = realpathSync(repoRoot);
const other = tempDir('other-checkout');
const ours = tempDir('start-ports');
const started: ChildProcess[] = [];
const pids: number[] = [];

/** A listener on each port in `ports` (argv after the script), in a process whose command line names `args`. */
const listenCode = `const net = require('node:net'); const ports = JSON.parse(process.env.HOLD_PORTS);
Promise.all(ports.map((p) => new Promise((ok) => net.createServer().listen(p, '127.0.0.1', ok)))).then(() => console.log('ready'));`;

/** The other checkout's `npm start`: holds the Postgres and notebook ports, and runs a "Temporal dev server" child holding its port. */
const fakeWorker = `import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdirSync, writeFileSync } from 'node:fs';
const [pg, notebook, temporal] = JSON.parse(process.env.MINDLOOP_PORTS ?? '[]');
mkdirSync('.data', { recursive: true });
const dev = spawn(process.execPath, ['-e', process.env.LISTEN_CODE ?? '', 'server', 'start-dev', '--port', String(temporal), '--db-filename', process.cwd() + '/.data/temporal.sqlite'], { env: { ...process.env, HOLD_PORTS: JSON.stringify([temporal]) }, stdio: ['ignore', 'pipe', 'inherit'] });
writeFileSync('.data/temporal.pid', String(dev.pid));
process.on('SIGTERM', () => { dev.kill('SIGKILL'); process.exit(0); });
await new Promise((ok) => dev.stdout.once('data', ok));
for (const p of [pg, notebook]) await new Promise((ok) => createServer().listen(p, '127.0.0.1', ok));
console.log('ready', process.pid, dev.pid);
`;

function waitForLine(child: ChildProcess, prefix: string): Promise<string> {
  return new Promise((ok, fail) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith(prefix));
      if (line) ok(line);
    });
    child.once('exit', (code) => fail(new Error(`exited ${code} before "${prefix}": ${out}`)));
  });
}

const ports = { pg: 0, temporal: 0, ui: 0, notebook: 0 };
let worker = { pid: 0, temporalPid: 0 };
let plainPid = 0;

beforeAll(async () => {
  for (const k of Object.keys(ports) as Array<keyof typeof ports>) ports[k] = await freePort();
  writeFileSync(join(other.path, 'package.json'), JSON.stringify({ name: 'mindloop', private: true, type: 'module' }));
  mkdirSync(join(other.path, 'workers'));
  writeFileSync(join(other.path, 'workers', 'dev.ts'), fakeWorker);
  const w = spawn(tsxBin, ['workers/dev.ts'], {
    cwd: other.path,
    env: {
      PATH: process.env.PATH ?? '',
      MINDLOOP_PORTS: JSON.stringify([ports.pg, ports.notebook, ports.temporal]),
      LISTEN_CODE: listenCode,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  started.push(w);
  const [, pid, temporalPid] = (await waitForLine(w, 'ready')).split(' ').map(Number);
  worker = { pid: pid!, temporalPid: temporalPid! };
  pids.push(worker.pid, worker.temporalPid);
  const plain = spawn(process.execPath, ['-e', listenCode], {
    env: { HOLD_PORTS: JSON.stringify([ports.ui]) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  started.push(plain);
  await waitForLine(plain, 'ready');
  plainPid = plain.pid!;
}, 60_000);

afterAll(() => {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  for (const c of started) c.kill('SIGKILL');
  other.remove();
  ours.remove();
});

const startEnv = (dataDir: string) => ({
  PGLITE_PORT: ports.pg,
  TEMPORAL_PORT: ports.temporal,
  TEMPORAL_UI_PORT: ports.ui,
  MINDLOOP_NOTEBOOK_PORT: ports.notebook,
  MINDLOOP_DATA_DIR: dataDir,
});

/** Each taken port of the holders above, as the refusal says it. */
const expectedParts = () => {
  const dir = realpathSync(other.path);
  return [
    `port ${ports.pg} (PGLITE_PORT, embedded Postgres) is taken by the Mindloop in ${dir} (pid ${worker.pid})`,
    `port ${ports.temporal} (TEMPORAL_PORT, Temporal dev server) by the Mindloop in ${dir} (its Temporal dev server, pid ${worker.temporalPid})`,
    `port ${ports.ui} (TEMPORAL_UI_PORT, Temporal UI) by something else (node, pid ${plainPid})`,
    `port ${ports.notebook} (MINDLOOP_NOTEBOOK_PORT, notebook) by the Mindloop in ${dir} (pid ${worker.pid})`,
  ];
};

describe('npm start on taken ports', () => {
  it('names every taken port, what holds it and its variable, in one line, with free ports to set', async () => {
    const line = await checkStartPorts(testEnv(startEnv(join(ours.path, 'a'))), { root });
    expect(line).not.toBeNull();
    expect(line).not.toContain('\n');
    expect(line!.startsWith('mindloop: cannot start: ')).toBe(true);
    for (const part of expectedParts()) expect(line).toContain(part);
    const set =
      /Set PGLITE_PORT=(\d+) TEMPORAL_PORT=(\d+) TEMPORAL_UI_PORT=(\d+) MINDLOOP_NOTEBOOK_PORT=(\d+) \(free now\), or stop what holds them\.$/.exec(
        line!,
      );
    expect(set, line!).not.toBeNull();
    const suggested = set!.slice(1).map(Number);
    expect(new Set(suggested).size).toBe(4);
    for (const p of suggested) expect([p, await bindError('127.0.0.1', p)]).toEqual([p, null]);
  });

  it('the real start exits 1 with that line before it creates anything; no stack trace', async () => {
    const dataDir = join(ours.path, 'real');
    const env = Object.fromEntries(Object.entries(startEnv(dataDir)).map(([k, v]) => [k, String(v)]));
    const r = await run(
      tsxBin,
      ['workers/dev.ts'],
      { ...env, MINDLOOP_TOOLS_DIR: repoToolsDir, MINDLOOP_QUEUES: 'mindloop', NATS_URL: 'off' },
      60_000,
    );
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trim().split('\n');
    expect(lines, r.stderr).toHaveLength(1);
    for (const part of expectedParts()) expect(lines[0]).toContain(part);
    expect(r.stderr).not.toMatch(/^\s+at /m);
    expect(existsSync(dataDir)).toBe(false);
  });

  it('a dev server its own killed start left behind is not in the way (the start stops it); another data dir’s is named', async () => {
    const mine = join(ours.path, 'orphaned');
    mkdirSync(mine, { recursive: true });
    const port = await freePort();
    // Started through a shell that exits at once: the server's parent is gone, as after a SIGKILLed start.
    const sh = await run(
      'sh',
      [
        '-c',
        `"${process.execPath}" -e "$LISTEN_CODE" server start-dev --db-filename "${mine}/temporal.sqlite" >/dev/null & echo $!`,
      ],
      { LISTEN_CODE: listenCode, HOLD_PORTS: JSON.stringify([port]) },
    );
    const orphan = Number(sh.stdout.trim());
    pids.push(orphan);
    writeFileSync(join(mine, 'temporal.pid'), String(orphan));
    for (let i = 0; i < 100 && (await bindError('127.0.0.1', port)) === null; i++)
      await new Promise((r) => setTimeout(r, 50));
    const free = {
      PGLITE_PORT: await freePort(),
      TEMPORAL_UI_PORT: await freePort(),
      MINDLOOP_NOTEBOOK_PORT: 'off',
      TEMPORAL_PORT: port,
    };
    expect(await checkStartPorts(testEnv({ ...free, MINDLOOP_DATA_DIR: mine }), { root })).toBeNull();
    const elsewhere = await checkStartPorts(testEnv({ ...free, MINDLOOP_DATA_DIR: join(ours.path, 'b') }), { root });
    expect(elsewhere).toMatch(
      new RegExp(
        `^mindloop: cannot start: port ${port} \\(TEMPORAL_PORT, Temporal dev server\\) is taken by a Temporal dev server left running by a Mindloop \\(data ${mine}, pid ${orphan}\\)\\. Set TEMPORAL_PORT=\\d+ \\(free now\\), or stop what holds it\\.$`,
      ),
    );
  });

  it('a data dir another live start holds, and two variables on one port, are said too', async () => {
    const dataDir = join(ours.path, 'locked');
    mkdirSync(join(dataDir, 'pglite'), { recursive: true });
    writeFileSync(join(dataDir, 'pglite', 'mindloop.lock'), String(worker.pid));
    const port = await freePort();
    const line = await checkStartPorts(
      testEnv({
        PGLITE_PORT: port,
        TEMPORAL_PORT: port,
        TEMPORAL_UI_PORT: await freePort(),
        MINDLOOP_NOTEBOOK_PORT: 'off',
        MINDLOOP_DATA_DIR: dataDir,
      }),
      { root },
    );
    expect(line).toMatch(
      new RegExp(
        `^mindloop: cannot start: PGLITE_PORT and TEMPORAL_PORT name the same port; the data dir ${dataDir} is in use by process ${worker.pid}\\. Set TEMPORAL_PORT=\\d+ \\(free now\\) and MINDLOOP_DATA_DIR=<another dir>, or stop what holds it\\.$`,
      ),
    );
    expect(
      await checkStartPorts(
        testEnv({
          PGLITE_PORT: port,
          TEMPORAL_PORT: await freePort(),
          TEMPORAL_UI_PORT: await freePort(),
          MINDLOOP_NOTEBOOK_PORT: 'off',
          MINDLOOP_DATA_DIR: join(ours.path, 'c'),
        }),
        { root },
      ),
    ).toBeNull();
  });
});
