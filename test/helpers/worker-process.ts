/**
 * Crash tests: the real Temporal dev server and a fresh Postgres database, with the worker as
 * its own process (`npm run worker -- --queue mindloop`) so a test can SIGKILL it mid-work.
 */
import { Client, Connection } from '@temporalio/client';
import { startStack, type Stack } from '../../runtime/stack.js';
import { workflowThreadFlags } from '../../scripts/workflow-threads.mjs';
import { writeWorkflowBundle } from '../../workers/build-bundle.js';
import { freePort, freshPostgresDatabase, repoToolsDir, tempDir, testEnv } from './env.js';
import { start as spawnProcess } from './spawn.js';

// The polling helpers, where the crash tests have always found them.
export { sleep, waitFor } from './wait.js';

export interface KillableStack {
  stack: Stack;
  client: Client;
  dbUrl: string;
  /** The prebuilt workflow bundle (for in-process workers too). */
  bundlePath: string;
  /**
   * A worker process polling `mindloop`, with a worker process's node flags. Node itself with the
   * tsx loader, not the tsx CLI: the CLI runs node as a child, which a SIGKILL of the CLI leaves
   * alive. No bus unless `env` names one (NATS_URL, MINDLOOP_BUS_ROOT): a crash test's worker
   * must not join the machine's.
   */
  spawnWorker(env?: Record<string, string>): ReturnType<typeof spawnProcess>;
  stop(): Promise<void>;
}

export async function startKillableStack(name: string): Promise<KillableStack> {
  const data = tempDir(name);
  const fresh = await freshPostgresDatabase(`mindloop_${name.replace(/-/g, '_')}`);
  const stack = await startStack({
    env: testEnv({ MINDLOOP_DATA_DIR: data.path, TEMPORAL_PORT: await freePort(), DATABASE_URL: fresh.url }),
    ui: false,
  });
  const client = new Client({ connection: await Connection.connect(stack.temporal.connection) });
  // Built once: each restarted worker loads it instead of running webpack again.
  const bundlePath = (await writeWorkflowBundle(`${data.path}/workflow-bundle.js`)).path;
  return {
    stack,
    client,
    dbUrl: fresh.url,
    bundlePath,
    spawnWorker: (env = {}) =>
      spawnProcess(
        process.execPath,
        [...workflowThreadFlags, '--import', 'tsx', 'workers/main.ts', '--queue', 'mindloop', '--no-schedules'],
        {
          TEMPORAL_ADDRESS: stack.temporal.address,
          DATABASE_URL: fresh.url,
          MINDLOOP_WORKFLOW_BUNDLE: bundlePath,
          MINDLOOP_TOOLS_DIR: repoToolsDir,
          LOG_LEVEL: 'ERROR',
          NATS_URL: 'off',
          ...env,
        },
      ),
    async stop() {
      await client.connection.close();
      await stack.stop();
      await fresh.drop();
      data.remove();
    },
  };
}
