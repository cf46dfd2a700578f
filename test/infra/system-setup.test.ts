/**
 * The system part of `npm start` / `npm test` (scripts/system.mjs), run in its dry-run mode so
 * nothing is installed or started: on this machine (engine, packages and Postgres present) the
 * plan is empty; with a PATH on which dockerd is missing and the docker client finds no engine
 * (a fresh machine with only the client) it plans to install docker.io and start dockerd; as a
 * user without root, or without apt-get, it says in one line what it cannot do and what to run.
 * `--apply` carries a plan out; it runs here against stand-ins for apt-get and dockerd (a real
 * install would change this shared machine), which it must call as a real run would.
 */
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/env.js';
import { repoRoot, run } from '../helpers/spawn.js';

const script = join(repoRoot, 'scripts', 'system.mjs');
const dir = tempDir('system-setup');
afterAll(() => dir.remove());

interface Plan {
  command: string;
  present: string[];
  packages: string[];
  debs: { file: string; sha256: string; url: string }[];
  startDockerd: boolean;
  startPostgres: unknown;
  cannot: string | null;
}

const noEngine =
  '#!/bin/sh\necho "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2\nexit 1\n';

/** A PATH of links to every command on this PATH but `hide`, with `scripts` (name → sh) in place of the real ones. */
function pathWithout(name: string, hide: string[], scripts: Record<string, string>): string {
  const bin = join(dir.path, name);
  mkdirSync(bin);
  for (const [cmd, body] of Object.entries(scripts)) {
    writeFileSync(join(bin, cmd), body);
    chmodSync(join(bin, cmd), 0o755);
  }
  for (const d of (process.env.PATH ?? '').split(delimiter)) {
    if (!d || !existsSync(d)) continue;
    for (const entry of readdirSync(d)) {
      if (hide.includes(entry) || existsSync(join(bin, entry))) continue;
      symlinkSync(join(d, entry), join(bin, entry));
    }
  }
  return bin;
}

async function plan(command: string, env: Record<string, string> = {}): Promise<Plan> {
  const r = await run(process.execPath, [script, command, '--dry-run', '--json'], env);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Plan;
}

// A fresh machine: the docker client is there, no dockerd, no engine answers.
const noDockerd = pathWithout('no-dockerd', ['dockerd'], { docker: noEngine });
const noDockerdNoApt = pathWithout('no-dockerd-no-apt', ['dockerd', 'apt-get'], { docker: noEngine });
// Debian's cluster list with a stopped cluster on port 1 (where nothing answers).
const stoppedCluster = pathWithout('stopped-cluster', [], {
  pg_lsclusters:
    '#!/bin/sh\necho "15 main 1 down postgres /var/lib/postgresql/15/main /var/log/postgresql/postgresql-15-main.log"\n',
});

describe('scripts/system.mjs --dry-run', () => {
  it('on this machine (engine up, packages present, Postgres on :5432) plans nothing', async () => {
    const test = await plan('test');
    expect(test).toMatchObject({
      command: 'test',
      packages: [],
      startDockerd: false,
      startPostgres: null,
      cannot: null,
    });
    expect(test.present).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^Docker engine \d/),
        'busybox-static',
        'gcc + static libc',
        'Compose',
        'alsa-utils speech samples',
        'chromium',
        'Postgres 127.0.0.1:5432',
      ]),
    );
    const start = await plan('start');
    expect(start).toMatchObject({ packages: [], startDockerd: false, startPostgres: null, cannot: null });
    // npm start uses the embedded PGlite: it neither checks nor needs the Postgres on :5432.
    expect(start.present.some((p) => p.startsWith('Postgres'))).toBe(false);
    const human = await run(process.execPath, [script, 'test', '--dry-run']);
    expect(human.stderr.trim().split('\n').at(-1)).toBe('[setup] nothing to do');
  });

  it('with no dockerd and no engine answering, plans to install docker.io and start dockerd (start and test)', async () => {
    for (const command of ['start', 'test']) {
      const p = await plan(command, { PATH: noDockerd });
      expect(p.packages).toEqual(['docker.io']);
      expect(p.startDockerd).toBe(true);
      expect(p.cannot).toBeNull();
      expect(p.present.some((x) => x.startsWith('Docker engine'))).toBe(false);
    }
    // `npm run setup` only prepares node deps and .tools/: no engine is asked for.
    expect(await plan('setup', { PATH: noDockerd })).toMatchObject({ packages: [], startDockerd: false, cannot: null });
  });

  it('without root it says in one line what it cannot do, why and what to run, and plans nothing itself', async () => {
    const r = await run(process.execPath, [script, 'test', '--dry-run'], {
      PATH: noDockerd,
      MINDLOOP_SETUP_AS_USER: '1',
    });
    expect(r.code).toBe(0);
    const cannot = r.stderr.split('\n').filter((l) => l.includes('cannot'));
    expect(cannot).toEqual([
      "[setup] cannot install docker.io, start dockerd by itself (not root): run `sudo apt-get install -y docker.io && sudo sh -c 'dockerd > /var/log/dockerd.log 2>&1 &'`; " +
        'then `npm test` again (MINDLOOP_TEST_NO_DOCKER=1 skips the sandbox tests)',
    ]);
    const p = await plan('test', { PATH: noDockerd, MINDLOOP_SETUP_AS_USER: '1' });
    expect(p).toMatchObject({ packages: [], startDockerd: false });
    expect(p.cannot).toBe(cannot[0]!.replace('[setup] ', ''));
  });

  it('as root without apt-get it names the packages to install by other means', async () => {
    const p = await plan('start', { PATH: noDockerdNoApt });
    expect(p).toMatchObject({ packages: [], startDockerd: false });
    expect(p.cannot).toBe(
      'cannot install docker.io, start dockerd by itself (no apt-get): run `install docker.io with your package manager && ' +
        "sudo sh -c 'dockerd > /var/log/dockerd.log 2>&1 &'`; then `npm start` again",
    );
  });

  it('without pico2wave, plans the pinned SVOX Pico files from the Debian mirror (root) or names the command to run (not root)', async () => {
    const noPico = pathWithout('no-pico', ['pico2wave'], {});
    const tools = JSON.parse(readFileSync(join(repoRoot, 'scripts', 'tools.json'), 'utf8')) as {
      debian: { mirror: string; amd64: { file: string; sha256: string }[] };
    };
    for (const command of ['start', 'test', 'setup']) {
      const p = await plan(command, { PATH: noPico });
      expect(p.present).not.toContain('pico2wave');
      expect(p.debs).toEqual(tools.debian.amd64.map((d) => ({ ...d, url: `${tools.debian.mirror}/${d.file}` })));
      expect(p.debs.map((d) => d.file.split('/').pop()!.split('_')[0])).toEqual([
        'libttspico-data',
        'libttspico0',
        'libttspico-utils',
      ]);
      for (const d of p.debs) expect(d.sha256).toMatch(/^[0-9a-f]{64}$/);
    }
    const user = await plan('setup', { PATH: noPico, MINDLOOP_SETUP_AS_USER: '1' });
    expect(user.debs).toEqual([]);
    expect(user.cannot).toBe(
      'cannot install libttspico-data libttspico0 libttspico-utils by itself (not root): run `sudo node scripts/system.mjs setup --apply`; then `npm run setup` again',
    );
    // With it on PATH there is nothing to fetch.
    expect(await plan('setup')).toMatchObject({ debs: [] });
  });

  it('a stopped local cluster on the test Postgres port is started (root) or named with its command (not root)', async () => {
    const deadLocal = { PATH: stoppedCluster, TEST_DATABASE_URL: 'postgres://postgres@127.0.0.1:1/postgres' };
    expect(await plan('test', deadLocal)).toMatchObject({
      startPostgres: { version: '15', name: 'main', port: 1 },
      packages: [],
      cannot: null,
    });
    // npm start does not use it.
    expect(await plan('start', deadLocal)).toMatchObject({ startPostgres: null, cannot: null });
    const user = await plan('test', { ...deadLocal, MINDLOOP_SETUP_AS_USER: '1' });
    expect(user.startPostgres).toBeNull();
    expect(user.cannot).toBe(
      'cannot start Postgres cluster 15/main by itself (not root): run `sudo pg_ctlcluster 15 main start`; then `npm test` again',
    );
  });

  it('a test Postgres that does not answer and that no local cluster serves is named with its fix', async () => {
    const p = await plan('test', { TEST_DATABASE_URL: 'postgres://postgres@127.0.0.1:1/postgres' });
    expect(p.startPostgres).toBeNull();
    expect(p.cannot).toMatch(
      /^no Postgres answers at 127\.0\.0\.1:1 and no stopped local cluster serves that port \(.*TEST_DATABASE_URL\); then `npm test` again$/,
    );
  });

  it('--apply installs with apt-get, starts dockerd in the background and waits for its engine', async () => {
    const calls = join(dir.path, 'calls.log');
    const up = join(dir.path, 'engine-up');
    const fake = join(dir.path, 'fake-dockerd');
    // dockerd "comes with" docker.io: the stand-in apt-get puts it on PATH when it installs.
    writeFileSync(fake, `#!/bin/sh\necho "dockerd $$" >> ${calls}\nsleep 1\ntouch ${up}\nexec sleep 60\n`);
    chmodSync(fake, 0o755);
    const bin = pathWithout('apply', ['dockerd', 'apt-get'], {
      docker: `#!/bin/sh\n[ "$1" = info ] && [ -e ${up} ] && { echo 99.0-fake; exit 0; }\n${noEngine.replace('#!/bin/sh\n', '')}`,
      'apt-get': `#!/bin/sh\necho "apt-get $* DEBIAN_FRONTEND=$DEBIAN_FRONTEND" >> ${calls}\n[ "$1" = install ] && ln -s ${fake} "$(dirname "$0")/dockerd"\nexit 0\n`,
    });
    const r = await run(process.execPath, [script, 'start', '--apply'], { PATH: bin }, 30_000);
    const log = readFileSync(calls, 'utf8').trim().split('\n');
    const daemon = log.find((l) => l.startsWith('dockerd '));
    try {
      expect(r.code, r.stderr).toBe(0);
      expect(log.slice(0, 2)).toEqual([
        'apt-get update -qq DEBIAN_FRONTEND=noninteractive',
        'apt-get install -y -qq --no-install-recommends docker.io DEBIAN_FRONTEND=noninteractive',
      ]);
      expect(daemon).toBeDefined();
      expect(r.stderr).toContain('[setup] installing system packages: docker.io (apt-get)…');
      expect(r.stderr).toContain('[setup] starting dockerd in the background (log: /var/log/dockerd.log)…');
      expect(r.stderr.trim().split('\n').at(-1)).toBe('[setup] Docker engine 99.0-fake is up');
      // The daemon outlives the command that started it.
      expect(() => process.kill(Number(daemon!.split(' ')[1]), 0)).not.toThrow();
      // Run again: the engine answers, so it only checks.
      const again = await run(process.execPath, [script, 'start', '--apply'], { PATH: bin }, 30_000);
      expect(again.stderr.trim()).toBe(
        '[setup] system: python3 venv, espeak-ng, jemalloc, pico2wave, Docker engine 99.0-fake, busybox-static, gcc + static libc',
      );
      expect(readFileSync(calls, 'utf8').trim().split('\n')).toHaveLength(log.length);
    } finally {
      if (daemon) process.kill(Number(daemon.split(' ')[1]), 'SIGKILL');
    }
  }, 60_000);
});
