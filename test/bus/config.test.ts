/**
 * The bus is optional, like Docker: NATS_URL and MINDLOOP_BUS_ROOT are checked by env.ts; a
 * worker with NATS_URL=off, or with no NATS answering, runs without the bus (and says why);
 * `connectBus` says why it cannot connect and points at `mindloop doctor`, whose bus check says
 * how to get one, and reports JetStream and the command stream when one answers.
 */
import { describe, expect, it } from 'vitest';
import { checkBus } from '../../cli/doctor.js';
import { parseEnv } from '../../env.js';
import { BusUnavailableError, connectBus } from '../../runtime/bus.js';
import { startWorkerBus } from '../../workers/bus.js';
import { freePort, testEnv } from '../helpers/env.js';
import { testNatsUrl } from '../helpers/nats.js';

describe('bus configuration', () => {
  it('env.ts takes NATS_URL (one server or a list) and a root, and refuses bad ones naming the field', () => {
    expect(parseEnv({}).data).toMatchObject({ MINDLOOP_BUS_ROOT: 'mindloop' });
    expect(parseEnv({}).data?.NATS_URL).toBeUndefined();
    expect(parseEnv({ NATS_URL: 'off' }).data?.NATS_URL).toBe('off');
    expect(
      parseEnv({ NATS_URL: 'nats://a:4222,nats://b:4222', MINDLOOP_BUS_ROOT: 'acme.mindloop' }).data,
    ).toMatchObject({ NATS_URL: 'nats://a:4222,nats://b:4222', MINDLOOP_BUS_ROOT: 'acme.mindloop' });
    const bad = parseEnv({ NATS_URL: 'http://x', MINDLOOP_BUS_ROOT: 'a.*' });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues.map((i) => i.path.join('.')).sort()).toEqual(['MINDLOOP_BUS_ROOT', 'NATS_URL']);
  });

  it('a NATS that does not answer: a clear error pointing at the doctor', async () => {
    const url = `nats://127.0.0.1:${await freePort()}`;
    const err = await connectBus({ url, timeoutMs: 1000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BusUnavailableError);
    expect((err as Error).message).toMatch(
      new RegExp(
        `^cannot reach the bus \\(NATS\\) at ${url}: .*ECONNREFUSED.*The bus is optional: everything else runs without it; \`npx mindloop doctor\` says how to start one$`,
      ),
    );
  });

  it('a worker without a bus: NATS_URL=off, nothing answering where NATS_URL points, or nothing on the local port', async () => {
    const temporal = { address: '127.0.0.1:1', namespace: 'default', connection: { address: '127.0.0.1:1' } };
    const lines: string[] = [];
    expect(await startWorkerBus(testEnv({ NATS_URL: 'off' }), temporal, (l) => lines.push(l))).toEqual({
      off: 'off (NATS_URL=off)',
    });
    const dead = `nats://127.0.0.1:${await freePort()}`;
    expect(await startWorkerBus(testEnv({ NATS_URL: dead }), temporal, (l) => lines.push(l))).toEqual({
      off: expect.stringMatching(new RegExp(`^off: cannot reach the bus \\(NATS\\) at ${dead}: `)),
    });
    const port = await freePort();
    // A plain worker only looks; it never starts a server of its own.
    expect(await startWorkerBus(testEnv({}), temporal, (l) => lines.push(l), { localPort: port })).toEqual({
      off: expect.stringContaining(`off: nothing answers at nats://127.0.0.1:${port} (set NATS_URL`),
    });
    expect(lines).toEqual([]);
  });

  it('doctor: how to get a bus when none answers; JetStream and the command stream when one does', async () => {
    const dead = `nats://127.0.0.1:${await freePort()}`;
    expect(await checkBus(testEnv({ NATS_URL: 'off' }))).toEqual({
      name: 'bus',
      status: 'ok',
      detail: 'off (NATS_URL=off): workers run without the bus',
    });
    const missing = await checkBus(testEnv({ NATS_URL: dead }));
    expect(missing).toMatchObject({
      name: 'bus',
      status: 'warn',
      detail: expect.stringContaining(`no NATS answers at ${dead} (NATS_URL); the bus is optional`),
      fix: expect.stringContaining('apt-get install -y nats-server && (nats-server -js'),
    });
    // No Temporal to say which deployment this is, and none named: the doctor says so.
    const unknown = await checkBus(
      testEnv({ NATS_URL: testNatsUrl, TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}` }),
    );
    expect(unknown).toMatchObject({
      name: 'bus',
      status: 'warn',
      detail: expect.stringContaining('; cannot tell which deployment this is: cannot reach Temporal'),
      fix: 'start Temporal (`npm start`), or set MINDLOOP_DEPLOYMENT',
    });
    const up = await checkBus(
      testEnv({
        NATS_URL: testNatsUrl,
        MINDLOOP_BUS_ROOT: `mindloop_test_${process.pid}_doctor`,
        MINDLOOP_DEPLOYMENT: 'staging-eu',
      }),
    );
    expect(up).toMatchObject({ name: 'bus', status: 'ok' });
    expect(up.detail).toMatch(
      new RegExp(
        `^NATS \\d+\\.\\d+\\.\\d+ with JetStream at ${testNatsUrl}, deployment staging-eu, subjects mindloop_test_${process.pid}_doctor\\.staging-eu\\.\\*; MINDLOOP_TEST_${process.pid}_DOCTOR_STAGING-EU_COMMANDS not created yet \\(the first worker on the bus creates it\\)`,
      ),
    );
  });
});
