/**
 * Which bus a process takes (runtime/nats-server.ts): NATS_URL, `off`, the NATS answering
 * locally, or (npm start only) a nats-server binary started as a child with JetStream, its store
 * under the data dir, stopped with the rest, and reaped when a killed start left it behind.
 * Against the real binary on this machine (`npm test` installs nats-server).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, describe, expect, it } from 'vitest';
import { connectBus } from '../../runtime/bus.js';
import { chooseBus, findNatsServer, portAnswers, startLocalNats } from '../../runtime/nats-server.js';
import { pidAlive } from '../../runtime/pid.js';
import { freePort } from '../helpers/env.js';
import { testNatsUrl } from '../helpers/nats.js';

const dirs: string[] = [];
const dataDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'mindloop-nats-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

// Never a skip: `npm test` installs nats-server, and a missing one must show.
const binary = findNatsServer();
const needBinary = (): string => {
  if (!binary)
    throw new Error('no nats-server binary on this machine: `npm test` installs it (apt-get install -y nats-server)');
  return binary;
};

describe('choosing the bus', () => {
  it('NATS_URL wins; `off` turns the bus off', async () => {
    expect(await chooseBus({ natsUrl: 'nats://10.0.0.9:4222', embedded: true, dataDir: dataDir() })).toEqual({
      url: 'nats://10.0.0.9:4222',
      how: 'env',
    });
    expect(await chooseBus({ natsUrl: 'off', embedded: true, dataDir: dataDir() })).toEqual({
      off: 'off (NATS_URL=off)',
    });
  });

  it('unset: the NATS already answering on the local port', async () => {
    const port = Number(new URL(testNatsUrl).port);
    expect(await chooseBus({ embedded: false, dataDir: dataDir(), port })).toEqual({
      url: `nats://127.0.0.1:${port}`,
      how: 'local',
    });
  });

  it('unset and nothing answers: a worker goes without; npm start without a binary says how to get one', async () => {
    const port = await freePort();
    expect(await chooseBus({ embedded: false, dataDir: dataDir(), port })).toEqual({
      off: `off: nothing answers at nats://127.0.0.1:${port} (set NATS_URL, or apt-get install -y nats-server (npm start then runs it), or set NATS_URL)`,
    });
    expect(await chooseBus({ embedded: true, dataDir: dataDir(), port, binary: null })).toEqual({
      off: `off: nothing answers at nats://127.0.0.1:${port} and no nats-server is installed (apt-get install -y nats-server (npm start then runs it), or set NATS_URL)`,
    });
  });

  it('a binary that does not start: off, naming its log', async () => {
    const port = await freePort();
    const choice = await chooseBus({ embedded: true, dataDir: dataDir(), port, binary: '/bin/false' });
    expect(choice).toEqual({
      off: expect.stringMatching(
        new RegExp(`^off: nats-server did not start on 127\\.0\\.0\\.1:${port} \\(see .*nats-server\\.log\\)$`),
      ),
    });
  });
});

describe('the embedded nats-server', () => {
  it('npm start with nothing answering starts one with JetStream under the data dir, and stops it', async () => {
    const port = await freePort();
    const dir = dataDir();
    const choice = await chooseBus({ embedded: true, dataDir: dir, port, binary: needBinary() });
    if (!('server' in choice) || !choice.server)
      throw new Error(`expected a started server, got ${JSON.stringify(choice)}`);
    expect(choice).toMatchObject({ url: `nats://127.0.0.1:${port}`, how: 'started' });
    try {
      const bus = await connectBus({ url: choice.url, root: 'embedded_test', log: () => undefined });
      const jsm = await jetstreamManager(bus.nc);
      expect((await jsm.getAccountInfo()).limits).toBeDefined();
      await bus.close();
      expect(choice.server.storeDir).toBe(join(dir, 'nats', 'store'));
      expect(existsSync(join(dir, 'nats', 'nats-server.pid'))).toBe(true);
    } finally {
      await choice.server.stop();
    }
    expect(pidAlive(choice.server.pid)).toBe(false);
    expect(await portAnswers('127.0.0.1', port)).toBe(false);
    expect(existsSync(join(dir, 'nats', 'nats-server.pid'))).toBe(false);
  });

  it('a server a killed start left behind is stopped before a new one starts; a stranger on the pid is not touched', async () => {
    const dir = dataDir();
    const first = await startLocalNats({ binary: needBinary(), dataDir: dir, port: await freePort() });
    // The start was SIGKILLed: its child lives on, and its pid file stays.
    const pidFile = join(dir, 'nats', 'nats-server.pid');
    expect(Number(readFileSync(pidFile, 'utf8'))).toBe(first.pid);
    const second = await startLocalNats({ binary: needBinary(), dataDir: dir, port: await freePort() });
    try {
      expect(pidAlive(first.pid)).toBe(false);
      expect(await portAnswers('127.0.0.1', Number(new URL(second.url).port))).toBe(true);
    } finally {
      await second.stop();
    }
    // A pid file naming a process that is not our server (the pid was reused): left alone.
    const stranger = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      writeFileSync(pidFile, String(stranger.pid));
      const third = await startLocalNats({ binary: needBinary(), dataDir: dir, port: await freePort() });
      await third.stop();
      expect(pidAlive(stranger.pid!)).toBe(true);
    } finally {
      stranger.kill('SIGKILL');
    }
  });
});
