/**
 * `npm start`, `npm run worker` and the image run their worker process from its esbuild build
 * through scripts/worker.mjs: remade when a source changed since, so an edit never runs stale
 * code, and the process reads its own flags as from the sources.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..');

function launch(...args: string[]) {
  return launchWith({}, ...args);
}

function launchWith(env: Record<string, string>, ...args: string[]) {
  return spawnSync(process.execPath, ['scripts/worker.mjs', ...args], {
    cwd: root,
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, ...env },
  });
}

const currentBuild = () =>
  (JSON.parse(readFileSync(join(root, '.build', 'worker', 'current.json'), 'utf8')) as { dir: string }).dir;

describe('scripts/worker.mjs', () => {
  it('runs workers/main.ts from its build, with the flags that follow the entry name', () => {
    const help = launch('worker', '--help');
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/^usage: npm run worker -- \[--queue /);
    expect(help.stderr).not.toMatch(/running from the sources/);
    const wrong = launch('worker', '--queue', 'nope');
    expect(wrong.status).toBe(2);
    expect(wrong.stderr).toMatch(/unknown queue in --queue nope/);
  });

  it('builds again when a source changed since the last build', () => {
    expect(launch('worker', '--help').status).toBe(0);
    const before = currentBuild();
    const source = join(root, 'workers', 'main.ts');
    const now = new Date();
    utimesSync(source, now, now);
    const again = launch('worker', '--help');
    expect(again.status, again.stderr).toBe(0);
    expect(again.stderr).toBe('[setup] building the worker (esbuild → .build/worker)…\n');
    expect(currentBuild()).not.toBe(before);
    // Fresh now: the next start uses that build as it is.
    const after = currentBuild();
    const fresh = launch('worker', '--help');
    expect(fresh.status).toBe(0);
    expect(fresh.stderr).toBe('');
    expect(currentBuild()).toBe(after);
  });

  it('refuses an entry it does not know, saying which it runs', () => {
    const r = launch('nope');
    expect(r.status).toBe(2);
    expect(r.stderr).toBe('usage: node scripts/worker.mjs <worker|dev> [flags]\n');
  });

  it('says in one line that no database answers, without its password', () => {
    const r = launchWith(
      { DATABASE_URL: 'postgres://app:s3cret@127.0.0.1:1/mindloop' },
      'worker',
      '--queue',
      'mindloop',
    );
    expect(r.status).toBe(1);
    expect(r.stderr.replace(/^\[setup\] building the worker .*\n/, '')).toBe(
      'worker: cannot start: no Postgres answers at postgres://app:***@127.0.0.1:1/mindloop (ECONNREFUSED): start it, or correct DATABASE_URL\n',
    );
  });
});
