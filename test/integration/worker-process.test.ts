/**
 * `npm run worker -- --queue sandbox --queue speech-cpu` as its own process, attached to a
 * running stack: it polls only the queues it was given — sandbox itself, speech-cpu through the
 * Python speech engine it starts as a child — and SIGINT stops both cleanly. Without the engine
 * installed, asking for a speech queue is an error that says how to install it.
 */
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pidAlive } from '../../runtime/pid.js';
import { findSpeechEngine } from '../../runtime/speech-worker.js';
import { startStack, type Stack } from '../../runtime/stack.js';
import { freePort, repoToolsDir, tempDir, testEnv } from '../helpers/env.js';
import { start, tsxBin } from '../helpers/spawn.js';

const data = tempDir('worker');
let stack: Stack;
let client: Client;

beforeAll(async () => {
  stack = await startStack({
    env: testEnv({ MINDLOOP_DATA_DIR: data.path, TEMPORAL_PORT: await freePort(), PGLITE_PORT: await freePort() }),
    ui: false,
  });
  client = new Client({ connection: await Connection.connect(stack.temporal.connection) });
});
afterAll(async () => {
  await client?.connection.close();
  await stack?.stop();
  data.remove();
});

async function pollers(queue: string, type: 'ACTIVITY' | 'WORKFLOW'): Promise<number> {
  const r = await client.workflowService.describeTaskQueue({
    namespace: 'default',
    taskQueue: { name: queue },
    taskQueueType: type === 'ACTIVITY' ? 2 : 1,
  });
  return r.pollers?.length ?? 0;
}

const engine = findSpeechEngine(repoToolsDir);

describe('a worker process for chosen queues', () => {
  const spawnWorker = (env: Record<string, string> = {}) =>
    start(tsxBin, ['workers/main.ts', '--queue', 'sandbox', '--queue', 'speech-cpu'], {
      TEMPORAL_ADDRESS: stack.temporal.address,
      DATABASE_URL: stack.database.url,
      MINDLOOP_DATA_DIR: data.path,
      LOG_LEVEL: 'WARN',
      ...env,
    });

  it.skipIf(!engine)(
    'polls sandbox and speech-cpu (the speech engine, not mindloop) and stops both on SIGINT',
    async () => {
      const child = spawnWorker();
      try {
        const deadline = Date.now() + 180_000;
        while (Date.now() < deadline && !child.output().stdout.includes('worker polling')) {
          if (child.exitCode !== null) throw new Error(`worker exited: ${child.output().stderr}`);
          await new Promise((r) => setTimeout(r, 200));
        }
        expect(child.output().stdout).toMatch(
          /worker polling sandbox, speech-cpu \(speech engine, pid \d+, log .*speech-worker-cpu\.log\)/,
        );
        const enginePid = Number(/speech engine, pid (\d+)/.exec(child.output().stdout)![1]);
        let sandbox = 0;
        let speech = 0;
        while (Date.now() < deadline && (sandbox === 0 || speech === 0)) {
          [sandbox, speech] = await Promise.all([pollers('sandbox', 'ACTIVITY'), pollers('speech-cpu', 'ACTIVITY')]);
          await new Promise((r) => setTimeout(r, 300));
        }
        expect(sandbox).toBeGreaterThan(0);
        expect(speech).toBeGreaterThan(0);
        expect(await pollers('speech-gpu', 'ACTIVITY')).toBe(0);
        expect(await pollers('mindloop', 'WORKFLOW')).toBe(0);

        const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
        child.kill('SIGINT');
        expect(await exited).toBe(0);
        expect(pidAlive(enginePid)).toBe(false);
      } finally {
        if (child.exitCode === null) child.kill('SIGKILL');
      }
    },
    240_000,
  );

  it('without the speech engine, a speech queue is refused with how to install it', async () => {
    // A tools dir with no venv in it: no engine.
    const child = spawnWorker({ MINDLOOP_TOOLS_DIR: join(data.path, 'no-tools') });
    const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
    expect(code).toBe(1);
    expect(child.output().stderr).toMatch(
      /speech \(speech-cpu\): the speech engine is not installed: run `npm run setup`/,
    );
  }, 120_000);
});
