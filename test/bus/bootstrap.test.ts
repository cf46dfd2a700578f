/**
 * `npm test`'s set-up checks the NATS the bus tests use (scripts/system.mjs, dry run: nothing is
 * installed or started here): present when it answers; otherwise, for a local address, it plans
 * to start nats-server with JetStream (and to install it where it is missing), or says in one
 * line what to run when it may not; a remote address that does not answer is named with its fix.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/env.js';
import { testNatsUrl } from '../helpers/nats.js';
import { repoRoot, run } from '../helpers/spawn.js';

const script = join(repoRoot, 'scripts', 'system.mjs');

async function plan(
  env: Record<string, string>,
): Promise<{ present: string[]; packages: string[]; startNats: { port: number } | null; cannot: string | null }> {
  const r = await run(process.execPath, [script, 'test', '--dry-run', '--json'], env);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as never;
}

describe('npm test set-up: the NATS of the bus tests', () => {
  it('a NATS that answers is present, nothing to start', async () => {
    const p = await plan({ TEST_NATS_URL: testNatsUrl });
    const { hostname, port } = new URL(testNatsUrl);
    expect(p.present).toContain(`NATS ${hostname}:${port || 4222}`);
    expect(p.startNats).toBeNull();
  });

  it('no NATS on a local port: start nats-server -js (root), or the one line to run (not root)', async () => {
    const port = await freePort();
    const root = await plan({ TEST_NATS_URL: `nats://127.0.0.1:${port}` });
    expect(root.startNats).toEqual({ port });
    // nats-server is installed on this machine: nothing to install.
    expect(root.packages).not.toContain('nats-server');
    const user = await plan({ TEST_NATS_URL: `nats://127.0.0.1:${port}`, MINDLOOP_SETUP_AS_USER: '1' });
    expect(user.startNats).toBeNull();
    expect(user.cannot).toBe(
      `cannot start nats-server by itself (not root): run \`sudo sh -c 'nats-server -js -a 127.0.0.1 -p ${port} -sd /var/lib/nats-server > /var/log/nats-server.log 2>&1 &'\`; then \`npm test\` again`,
    );
    const human = await run(process.execPath, [script, 'test', '--dry-run'], {
      TEST_NATS_URL: `nats://127.0.0.1:${port}`,
    });
    expect(human.stderr).toContain(`[setup] would start nats-server -js on 127.0.0.1:${port}`);
  });

  it('a remote NATS that does not answer is named with its fix', async () => {
    const p = await plan({ TEST_NATS_URL: 'nats://192.0.2.1:4222' });
    expect(p.startNats).toBeNull();
    expect(p.cannot).toBe(
      'no NATS answers at 192.0.2.1:4222 (start one with JetStream, nats-server -js, or set TEST_NATS_URL); then `npm test` again',
    );
  });
});
