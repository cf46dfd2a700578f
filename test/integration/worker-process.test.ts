/**
 * `npm run worker -- --queue sandbox --queue speech-gpu` as its own process, attached to a
 * running stack: it polls only the queues it was given, and SIGINT stops it cleanly.
 */
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../../runtime/stack.js';
import { freePort, tempDir, testEnv } from '../helpers/env.js';
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

describe('a worker process for chosen queues', () => {
  it('polls sandbox and speech-gpu (not mindloop) and stops on SIGINT', async () => {
    const child = start(tsxBin, ['workers/main.ts', '--queue', 'sandbox', '--queue', 'speech-gpu'], {
      TEMPORAL_ADDRESS: stack.temporal.address,
      DATABASE_URL: stack.database.url,
      LOG_LEVEL: 'WARN',
    });
    try {
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline && !child.output().stdout.includes('worker polling')) {
        if (child.exitCode !== null) throw new Error(`worker exited: ${child.output().stderr}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(child.output().stdout).toContain('worker polling sandbox, speech-gpu');
      let sandbox = 0;
      let speech = 0;
      while (Date.now() < deadline && (sandbox === 0 || speech === 0)) {
        [sandbox, speech] = await Promise.all([pollers('sandbox', 'ACTIVITY'), pollers('speech-gpu', 'ACTIVITY')]);
        await new Promise((r) => setTimeout(r, 300));
      }
      expect(sandbox).toBeGreaterThan(0);
      expect(speech).toBeGreaterThan(0);
      expect(await pollers('mindloop', 'WORKFLOW')).toBe(0);

      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      child.kill('SIGINT');
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
