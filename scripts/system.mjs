#!/usr/bin/env node
// The system part of set-up: what `npm start` and `npm test` need from the machine besides node
// packages. `start`: a Docker engine and what the sandbox image is built from (busybox-static,
// gcc with a static libc); `test`: that, a Compose implementation, alsa-utils (its recordings of a
// human voice feed the speech tests), Chromium (the notebook's page test), the Postgres the suite uses (TEST_DATABASE_URL, default
// 127.0.0.1:5432) and the NATS with JetStream the bus tests use
// (TEST_NATS_URL, default 127.0.0.1:4222); all: Python 3 with venv for .tools/ and espeak-ng
// (the speech engine's voice where no neural one is packaged), and SVOX Pico (its German voice),
// pinned Debian files from outside the main component (scripts/tools.json).
// As root with apt-get it installs the missing Debian packages, starts dockerd, a stopped
// local Postgres cluster and nats-server; otherwise it says in one line what it cannot do, why,
// and what to run.
// Every check is cheap, so a run on a ready machine only checks.
//   node scripts/system.mjs <start|test|setup> --dry-run [--json]   # the plan, nothing done
//   node scripts/system.mjs <start|test|setup> --apply              # only this part of set-up
// Plain Node with no dependencies, because it runs before node_modules exists.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  accessSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { connect } from 'node:net';
import { delimiter, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { jemallocPath } from './allocator.mjs';

const root = resolve(fileURLToPath(import.meta.url), '..', '..');
const say = (msg) => process.stderr.write(`[setup] ${msg}\n`);
// The default local engine sockets: only an engine there is one a local dockerd provides.
const localDockerHosts = ['unix:///var/run/docker.sock', 'unix:///run/docker.sock'];
const dockerdLog = '/var/log/dockerd.log';
// Where Debian's own nats-server service keeps its JetStream store and log.
const natsStore = '/var/lib/nats-server';
const natsLog = '/var/log/nats-server.log';
const humanSpeechSample = '/usr/share/sounds/alsa/Front_Center.wav';

/** The executable `name` on PATH, or null. */
function which(name, env) {
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      /* not here */
    }
  }
  return null;
}

function sh(cmd, args, env, timeout = 10_000) {
  const r = spawnSync(cmd, args, { cwd: root, env, encoding: 'utf8', timeout });
  return { ok: !r.error && r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}`.trim() };
}

/** The Docker engine's version when one answers (at DOCKER_HOST, or the local socket), else null. */
function engineVersion(env) {
  if (!which('docker', env)) return null;
  const r = sh('docker', ['info', '--format', '{{.ServerVersion}}'], env);
  return r.ok && r.out ? r.out.split('\n').pop() : null;
}

/** Whether something accepts TCP connections on host:port (1 s). */
function answers(host, port) {
  return new Promise((done) => {
    const s = connect({ host, port, timeout: 1000 });
    const end = (ok) => {
      s.destroy();
      done(ok);
    };
    s.once('connect', () => end(true));
    s.once('timeout', () => end(false));
    s.once('error', () => end(false));
  });
}

/** Debian's clusters (pg_lsclusters): version, name, port, online. */
function postgresClusters(env) {
  if (!which('pg_lsclusters', env)) return [];
  const r = sh('pg_lsclusters', ['-h'], env);
  if (!r.ok) return [];
  return r.out
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f.length >= 4)
    .map(([version, name, port, status]) => ({
      version,
      name,
      port: Number(port),
      online: status.startsWith('online'),
    }));
}

function pythonHasVenv(env, toolsDir) {
  if (existsSync(join(toolsDir, 'venv', 'bin', 'python'))) return true;
  const python = env.PYTHON || 'python3';
  // Debian splits ensurepip (which `python3 -m venv` needs) into python3-venv.
  return sh(python, ['-c', 'import venv, ensurepip'], env).ok;
}

function staticBusybox(env) {
  const bb = which('busybox', env);
  if (!bb) return false;
  const r = spawnSync('ldd', [bb], { env, encoding: 'utf8' });
  return r.status !== 0 || /not a dynamic executable|statically linked/.test(`${r.stdout}${r.stderr}`);
}

function gccStatic(env) {
  if (!which('gcc', env)) return false;
  const r = sh('gcc', ['-print-file-name=libc.a'], env);
  return r.ok && r.out.startsWith('/') && existsSync(r.out);
}

function natsServerInstalled(env) {
  return !!which('nats-server', env) || existsSync('/usr/sbin/nats-server');
}

function composeInstalled(env) {
  return (
    !!which('docker-compose', env) ||
    (!!which('docker', env) && sh('docker', ['compose', 'version', '--short'], env).ok)
  );
}

/** The pinned Debian files for this machine's architecture (scripts/tools.json), and the command they provide. */
function pinnedDebs(env) {
  const spec = JSON.parse(readFileSync(join(root, 'scripts', 'tools.json'), 'utf8')).debian;
  const arch = which('dpkg', env) ? sh('dpkg', ['--print-architecture'], env).out : '';
  const files = (spec?.[arch] ?? []).map((f) => ({ ...f, url: `${spec.mirror}/${f.file}` }));
  return { command: spec?.command ?? null, files };
}

/** `libttspico0` from `pool/…/libttspico0_1.0…_amd64.deb`. */
function debName(deb) {
  return deb.file.split('/').pop().split('_')[0];
}

/**
 * Fetch the pinned files, check each against its SHA-256 and install them with apt-get (which
 * takes their dependencies from the machine's own sources). A mirror that does not answer is
 * not fatal: what they give has a fallback (espeak-ng speaks German too, less clearly).
 */
async function installDebs(debs, aptEnv) {
  const dir = mkdtempSync(join(tmpdir(), 'mindloop-debs-'));
  try {
    const paths = [];
    for (const deb of debs) {
      const res = await fetch(deb.url, { signal: AbortSignal.timeout(120_000) });
      if (!res.ok) throw new Error(`${deb.url}: HTTP ${res.status}`);
      const body = Buffer.from(await res.arrayBuffer());
      const sum = createHash('sha256').update(body).digest('hex');
      if (sum !== deb.sha256) throw new Error(`${deb.url}: SHA-256 ${sum}, expected ${deb.sha256}`);
      const path = join(dir, deb.file.split('/').pop());
      writeFileSync(path, body);
      paths.push(path);
    }
    run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...paths], aptEnv);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * What `command` needs from this machine and what is missing: Debian packages to install,
 * dockerd and a Postgres cluster to start, and, when this process cannot do that itself (not
 * root, no apt-get, an engine or database elsewhere), the one line that says so.
 */
export async function systemPlan(command, env = process.env) {
  const toolsDir = resolve(root, env.MINDLOOP_TOOLS_DIR || '.tools');
  const plan = {
    command,
    present: [],
    packages: [],
    debs: [],
    startDockerd: false,
    startPostgres: null,
    startNats: null,
    cannot: null,
  };
  const elsewhere = []; // what no local install fixes, with its own fix
  let dockerElsewhere = false;
  const need = (pkgs) => {
    for (const p of pkgs) if (!plan.packages.includes(p)) plan.packages.push(p);
  };

  if (pythonHasVenv(env, toolsDir)) plan.present.push('python3 venv');
  else need(which(env.PYTHON || 'python3', env) ? ['python3-venv'] : ['python3', 'python3-venv']);
  // The speech engine's voice for every language without a neural one (German among them).
  if (which('espeak-ng', env)) plan.present.push('espeak-ng');
  else need(['espeak-ng']);
  // The worker's allocator (scripts/allocator.mjs): it runs without it, so it is only installed
  // where this can install it, never asked of a user.
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0 && env.MINDLOOP_SETUP_AS_USER !== '1';
  const apt = !!which('apt-get', env);
  if (jemallocPath()) plan.present.push('jemalloc');
  else if (isRoot && apt) need(['libjemalloc2']);
  const pinned = pinnedDebs(env);
  if (pinned.command && which(pinned.command, env)) plan.present.push(pinned.command);
  else if (pinned.files.length > 0) plan.debs = pinned.files;

  const wantsDocker = command === 'start' || (command === 'test' && env.MINDLOOP_TEST_NO_DOCKER !== '1');
  if (wantsDocker) {
    const version = engineVersion(env);
    if (version) plan.present.push(`Docker engine ${version}`);
    else if (env.DOCKER_HOST && !localDockerHosts.includes(env.DOCKER_HOST)) {
      dockerElsewhere = true;
      elsewhere.push(
        `no Docker engine answers at DOCKER_HOST=${env.DOCKER_HOST} (start that engine, or unset DOCKER_HOST for a local one)`,
      );
    } else {
      if (!which('dockerd', env) || !which('docker', env)) need(['docker.io']);
      plan.startDockerd = true;
    }
    if (staticBusybox(env)) plan.present.push('busybox-static');
    else need(['busybox-static']);
    if (gccStatic(env)) plan.present.push('gcc + static libc');
    else need(['gcc', 'libc6-dev']);
  }

  if (command === 'test') {
    if (composeInstalled(env)) plan.present.push('Compose');
    else need(['docker-compose']);
    // Recordings of a human voice (alsa-utils' channel announcements) for the speech tests.
    if (existsSync(humanSpeechSample)) plan.present.push('alsa-utils speech samples');
    else need(['alsa-utils']);
    // The browser the notebook's page test drives (playwright-core, no browser download).
    if (existsSync('/usr/bin/chromium')) plan.present.push('chromium');
    else need(['chromium']);
    const url = new URL(env.TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres');
    const host = url.hostname;
    const port = Number(url.port || 5432);
    if (await answers(host, port)) plan.present.push(`Postgres ${host}:${port}`);
    else {
      const cluster = ['127.0.0.1', 'localhost'].includes(host)
        ? postgresClusters(env).find((c) => c.port === port && !c.online)
        : undefined;
      if (cluster) {
        plan.startPostgres = { version: cluster.version, name: cluster.name, port };
      } else {
        elsewhere.push(
          `no Postgres answers at ${host}:${port} and no stopped local cluster serves that port ` +
            '(install and start one with trust auth for user postgres on 127.0.0.1, or set TEST_DATABASE_URL)',
        );
      }
    }
    const nats = new URL(env.TEST_NATS_URL || 'nats://127.0.0.1:4222');
    const natsPort = Number(nats.port || 4222);
    // The binary in any case: the tests also run an embedded server of their own.
    if (!natsServerInstalled(env)) need(['nats-server']);
    if (await answers(nats.hostname, natsPort)) plan.present.push(`NATS ${nats.hostname}:${natsPort}`);
    else if (['127.0.0.1', 'localhost'].includes(nats.hostname)) plan.startNats = { port: natsPort };
    else
      elsewhere.push(
        `no NATS answers at ${nats.hostname}:${natsPort} (start one with JetStream, nats-server -js, or set TEST_NATS_URL)`,
      );
  }
  // npm start runs a nats-server of its own when no bus is named and none answers locally.
  if (command === 'start' && !env.NATS_URL && !(await answers('127.0.0.1', 4222)) && !natsServerInstalled(env))
    need(['nats-server']);

  const installWhy = !isRoot ? 'not root' : !apt ? 'no apt-get' : null;
  const blocked = []; // [what, why, fix]
  if (plan.packages.length > 0 && installWhy) {
    blocked.push([
      `install ${plan.packages.join(' ')}`,
      installWhy,
      apt
        ? `sudo apt-get install -y ${plan.packages.join(' ')}`
        : `install ${plan.packages.join(' ')} with your package manager`,
    ]);
  }
  if (plan.debs.length > 0 && installWhy) {
    blocked.push([
      `install ${plan.debs.map(debName).join(' ')}`,
      installWhy,
      apt
        ? `sudo node scripts/system.mjs ${command} --apply`
        : `install ${plan.debs.map(debName).join(' ')} with your package manager`,
    ]);
  }
  // dockerd comes with docker.io: it cannot start before that is installed.
  const dockerdWhy = !isRoot ? 'not root' : installWhy && plan.packages.includes('docker.io') ? installWhy : null;
  if (plan.startDockerd && dockerdWhy)
    blocked.push(['start dockerd', dockerdWhy, `sudo sh -c 'dockerd > ${dockerdLog} 2>&1 &'`]);
  // nats-server comes with its package: it cannot start before that is installed.
  const natsWhy = !isRoot ? 'not root' : installWhy && plan.packages.includes('nats-server') ? installWhy : null;
  if (plan.startNats && natsWhy)
    blocked.push([
      'start nats-server',
      natsWhy,
      `sudo sh -c 'nats-server -js -a 127.0.0.1 -p ${plan.startNats.port} -sd ${natsStore} > ${natsLog} 2>&1 &'`,
    ]);
  if (plan.startPostgres && !isRoot) {
    const { version, name } = plan.startPostgres;
    blocked.push([
      `start Postgres cluster ${version}/${name}`,
      'not root',
      `sudo pg_ctlcluster ${version} ${name} start`,
    ]);
  }
  const parts = [];
  if (blocked.length > 0) {
    const whys = [...new Set(blocked.map(([, why]) => why))].join(', ');
    parts.push(
      `cannot ${blocked.map(([what]) => what).join(', ')} by itself (${whys}): run \`${blocked.map(([, , fix]) => fix).join(' && ')}\``,
    );
  }
  parts.push(...elsewhere);
  if (parts.length > 0) {
    const dockerPackages = ['docker.io', 'busybox-static', 'gcc', 'libc6-dev'];
    const dockerCannot =
      dockerElsewhere ||
      (plan.startDockerd && !!dockerdWhy) ||
      (!!installWhy && plan.packages.some((p) => dockerPackages.includes(p)));
    const skip = command === 'test' && dockerCannot ? ' (MINDLOOP_TEST_NO_DOCKER=1 skips the sandbox tests)' : '';
    plan.cannot = `${parts.join('; ')}; then \`npm ${command === 'setup' ? 'run setup' : command}\` again${skip}`;
  }
  if (installWhy) {
    plan.packages = [];
    plan.debs = [];
  }
  if (dockerdWhy) plan.startDockerd = false;
  if (!isRoot) plan.startPostgres = null;
  if (natsWhy) plan.startNats = null;
  return plan;
}

function run(cmd, args, env) {
  const r = spawnSync(cmd, args, { cwd: root, env, stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.error || r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`})`);
}

function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Carry out `plan`: the one-line "cannot" first, then apt-get, Postgres, and dockerd started in
 * the background (it keeps running after this process). Returns a function that waits for the
 * engine it started (call it before the engine is needed, so dockerd starts while npm installs).
 */
export async function applySystemPlan(plan, env = process.env) {
  if (plan.cannot) say(plan.cannot);
  if (plan.packages.length > 0) {
    say(`installing system packages: ${plan.packages.join(' ')} (apt-get)…`);
    const aptEnv = { ...env, DEBIAN_FRONTEND: 'noninteractive' };
    run('apt-get', ['update', '-qq'], aptEnv);
    run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...plan.packages], aptEnv);
  }
  if (plan.debs.length > 0) {
    const names = plan.debs.map(debName).join(' ');
    say(`installing ${names} (pinned Debian files from outside main)…`);
    try {
      await installDebs(plan.debs, { ...env, DEBIAN_FRONTEND: 'noninteractive' });
    } catch (err) {
      say(`could not install ${names}: ${err.message}; the speech engine speaks German with espeak-ng instead`);
    }
  }
  if (plan.startPostgres) {
    const { version, name, port } = plan.startPostgres;
    say(`starting Postgres cluster ${version}/${name} (port ${port})…`);
    run('pg_ctlcluster', ['--skip-systemctl-redirect', version, name, 'start'], env);
    for (let i = 0; i < 30 && !(await answers('127.0.0.1', port)); i++) sleep(1000);
    if (!(await answers('127.0.0.1', port)))
      throw new Error(`Postgres ${version}/${name} did not come up on :${port} (see /var/log/postgresql/)`);
  }
  if (plan.startNats && !(await answers('127.0.0.1', plan.startNats.port))) {
    const { port } = plan.startNats;
    const server = which('nats-server', env) ?? '/usr/sbin/nats-server';
    say(`starting nats-server (JetStream) on 127.0.0.1:${port} in the background (log: ${natsLog})…`);
    mkdirSync(natsStore, { recursive: true });
    const log = openSync(natsLog, 'a');
    // Detached, like dockerd: the server outlives this command.
    spawn(server, ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', natsStore], {
      env,
      detached: true,
      stdio: ['ignore', log, log],
    }).unref();
    for (let i = 0; i < 20 && !(await answers('127.0.0.1', port)); i++) sleep(500);
    if (!(await answers('127.0.0.1', port)))
      say(`nats-server did not answer within 10 s (see ${natsLog}); the bus tests will fail saying so`);
  }
  // A package's install scripts may have started the engine already.
  if (plan.startDockerd && !engineVersion(env)) {
    const dockerd = which('dockerd', env);
    if (!dockerd) throw new Error('dockerd not found after installing docker.io');
    say(`starting dockerd in the background (log: ${dockerdLog})…`);
    const log = openSync(dockerdLog, 'a');
    // Detached in its own session: the engine outlives this command, like a system service.
    spawn(dockerd, [], { env, detached: true, stdio: ['ignore', log, log] }).unref();
    return () => {
      for (let i = 0; i < 60; i++) {
        const version = engineVersion(env);
        if (version) return say(`Docker engine ${version} is up`);
        sleep(1000);
      }
      say(`dockerd did not answer within 60 s (see ${dockerdLog}); the sandbox will say why it cannot run`);
    };
  }
  if (
    plan.present.length > 0 &&
    !plan.cannot &&
    plan.packages.length === 0 &&
    plan.debs.length === 0 &&
    !plan.startPostgres &&
    !plan.startNats
  )
    say(`system: ${plan.present.join(', ')}`);
  return () => undefined;
}

/** The plan as lines a person reads (the dry run). */
export function describePlan(plan) {
  const lines = [`system (${plan.command}): present: ${plan.present.join(', ') || 'nothing checked'}`];
  if (plan.packages.length > 0) lines.push(`would install: ${plan.packages.join(' ')}`);
  if (plan.debs.length > 0) lines.push(`would fetch and install: ${plan.debs.map((d) => d.url).join(' ')}`);
  if (plan.startPostgres)
    lines.push(`would start Postgres cluster ${plan.startPostgres.version}/${plan.startPostgres.name}`);
  if (plan.startDockerd) lines.push('would start dockerd');
  if (plan.startNats) lines.push(`would start nats-server -js on 127.0.0.1:${plan.startNats.port}`);
  if (plan.cannot) lines.push(plan.cannot);
  if (
    plan.packages.length === 0 &&
    plan.debs.length === 0 &&
    !plan.startDockerd &&
    !plan.startPostgres &&
    !plan.startNats &&
    !plan.cannot
  )
    lines.push('nothing to do');
  return lines;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const command = args.find((a) => !a.startsWith('--')) ?? 'test';
  const mode = args.includes('--dry-run') ? 'dry-run' : args.includes('--apply') ? 'apply' : null;
  if (!['start', 'test', 'setup'].includes(command) || !mode) {
    process.stderr.write(
      'usage: node scripts/system.mjs <start|test|setup> --dry-run [--json] | --apply   (npm start / npm test apply it)\n',
    );
    process.exit(2);
  }
  const plan = await systemPlan(command);
  if (mode === 'apply') {
    try {
      (await applySystemPlan(plan))();
    } catch (err) {
      say(`set-up failed: ${err.message}`);
      process.exit(1);
    }
  } else if (args.includes('--json')) process.stdout.write(`${JSON.stringify(plan)}\n`);
  else for (const line of describePlan(plan)) say(line);
}
