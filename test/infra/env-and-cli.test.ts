/** env.ts validation, the worker's flags and the `mindloop` CLI skeleton, as a user meets them. */
import { describe, expect, it } from 'vitest';
import { formatEnvErrors, parseEnv } from '../../env.js';
import { freePort, freshPostgresDatabase } from '../helpers/env.js';
import { repoRoot, run, tsxBin } from '../helpers/spawn.js';

const cli = `${repoRoot}/bin/mindloop.mjs`;

describe('env.ts', () => {
  it('accepts an empty environment with the embedded defaults', () => {
    const r = parseEnv({});
    expect(r.success).toBe(true);
    expect(r.data).toMatchObject({ TEMPORAL_PORT: 7233, TEMPORAL_UI_PORT: 8233, MINDLOOP_QUEUES: ['mindloop', 'sandbox', 'speech-gpu'] });
    expect(r.data?.TEMPORAL_ADDRESS).toBeUndefined();
    expect(r.data?.DATABASE_URL).toBeUndefined();
  });

  it.each([
    [{ PGLITE_PORT: 'abc' }, 'PGLITE_PORT'],
    [{ TEMPORAL_PORT: '70000' }, 'TEMPORAL_PORT'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ TEMPORAL_ADDRESS: 'no-port' }, 'TEMPORAL_ADDRESS'],
    [{ MINDLOOP_QUEUES: 'mindloop,gpu' }, 'MINDLOOP_QUEUES'],
    [{ TEMPORAL_TLS_CERT: '/c.pem' }, 'TEMPORAL_TLS_CERT'],
    [{ LOG_LEVEL: 'LOUD' }, 'LOG_LEVEL'],
  ])('rejects %o naming %s', (vars, field) => {
    const r = parseEnv(vars);
    expect(r.success).toBe(false);
    expect(formatEnvErrors(r.error!)).toMatch(new RegExp(`^  ${field}(\\.\\d+)?: `, "m"));
  });

  it('treats an empty value as unset', () => {
    expect(parseEnv({ DATABASE_URL: '' }).data?.DATABASE_URL).toBeUndefined();
  });
});

describe('entry points fail clearly on bad input', () => {
  it('a bad env value prints the field and exits non-zero', async () => {
    const r = await run(tsxBin, ['workers/main.ts'], { PGLITE_PORT: 'not-a-port' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('invalid environment');
    expect(r.stderr).toMatch(/PGLITE_PORT: /);
  });

  it('the worker refuses an unknown queue and an unknown flag', async () => {
    const bad = await run(tsxBin, ['workers/main.ts', '--queue', 'gpu']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('unknown queue');
    const flag = await run(tsxBin, ['workers/main.ts', '--queues', 'sandbox']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/Unknown option '--queues'/);
    expect(flag.stderr).toContain('usage: npm run worker');
  });
});

describe('mindloop CLI', () => {
  it('--help lists doctor', async () => {
    const r = await run(process.execPath, [cli, '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/doctor .*check Temporal, Postgres, Docker/);
  });

  it('an unknown flag or command is a clear error with exit 2', async () => {
    const r = await run(process.execPath, [cli, '--bogus']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown option '--bogus'");
    const c = await run(process.execPath, [cli, 'frobnicate']);
    expect(c.code).toBe(2);
    expect(c.stderr).toContain("unknown command 'frobnicate'");
  });

  it('doctor reports each dependency with a fix, and fails when Temporal is unreachable', async () => {
    const db = await freshPostgresDatabase('mindloop_doctor');
    try {
      const deadPort = await freePort();
      const r = await run(process.execPath, [cli, 'doctor', '--json'], {
        TEMPORAL_ADDRESS: `127.0.0.1:${deadPort}`,
        DATABASE_URL: db.url,
        DOCKER_HOST: `tcp://127.0.0.1:${await freePort()}`,
      });
      expect(r.code).toBe(1);
      const checks = JSON.parse(r.stdout) as Array<{ name: string; status: string; detail: string; fix?: string }>;
      const by = Object.fromEntries(checks.map((c) => [c.name, c]));
      expect(by.temporal).toMatchObject({ status: 'fail' });
      expect(by.temporal!.detail).toContain(String(deadPort));
      expect(by.temporal!.fix).toMatch(/TEMPORAL_ADDRESS/);
      // A fresh database answers but has no migrations yet.
      expect(by.postgres).toMatchObject({ status: 'warn' });
      expect(by.postgres!.detail).toMatch(/0\/\d+ migrations/);
      expect(by.docker).toMatchObject({ status: 'warn' });
      expect(by.docker!.fix).toContain('docker.io');
      expect(by['local-model']?.status).toMatch(/ok|warn/);
    } finally {
      await db.drop();
    }
  });
});
