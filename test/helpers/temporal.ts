/** Temporal test environments wired to the pinned binaries in `.tools/`: the time-skipping server, the dev server. */
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll } from 'vitest';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, NativeConnection, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { startDevServer, type DevServer } from '../../runtime/temporal-dev-server.js';
import { bundleWorkflows, workflowsPath } from '../../workers/queues.js';
import { allSearchAttributes } from '../../workflows/lib/search-attributes.js';
import { freePort, tempDir, toolPath } from './env.js';

// temporal.api.enums.v1.IndexedValueType numbers.
const indexedValueType: Record<string, number> = {
  TEXT: 1,
  KEYWORD: 2,
  INT: 3,
  DOUBLE: 4,
  BOOL: 5,
  DATETIME: 6,
  KEYWORD_LIST: 7,
};

/** The time-skipping test server, with the app's search attributes registered. */
export async function createTimeSkippingEnv(): Promise<TestWorkflowEnvironment> {
  const env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: toolPath('temporal-test-server') } },
  });
  await env.connection.operatorService.addSearchAttributes({
    namespace: env.namespace ?? 'default',
    searchAttributes: Object.fromEntries(allSearchAttributes.map((k) => [k.name, indexedValueType[k.type] ?? 0])),
  });
  return env;
}

const silent = { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} };

/**
 * A test file's time-skipping server and a workflow bundle (the product's unless `workflows`, a
 * path relative to this folder, names another): made before its tests, the server torn down after
 * them. Read `suite.env` / `suite.bundle` inside the tests.
 */
export function timeSkippingSuite(workflows = productWorkflowsPath): {
  readonly env: TestWorkflowEnvironment;
  readonly bundle: WorkflowBundleWithSourceMap;
} {
  const suite = {} as { env: TestWorkflowEnvironment; bundle: WorkflowBundleWithSourceMap };
  beforeAll(async () => {
    [suite.env, suite.bundle] = await Promise.all([createTimeSkippingEnv(), bundle(workflows)]);
  });
  afterAll(async () => {
    await suite.env?.teardown();
  });
  return suite;
}

/**
 * Bundle a workflows module once per test file (webpack takes a few seconds). The product's
 * workflows are bundled as its workers bundle them, their preloaded modules shared and frozen.
 */
export function bundle(relativeToTestHelpers: string): Promise<WorkflowBundleWithSourceMap> {
  const path = fileURLToPath(new URL(relativeToTestHelpers, import.meta.url));
  if (path === workflowsPath) return bundleWorkflows();
  return bundleWorkflowCode({ workflowsPath: path, logger: silent });
}

export const fixtureWorkflowsPath = '../fixtures/workflows/index.ts';
export const productWorkflowsPath = '../../workflows/index.ts';

/** The Temporal dev server (the real server) with a client, a worker connection and a bundle. */
export interface DevTemporal {
  server: DevServer;
  client: Client;
  connection: NativeConnection;
  bundle: WorkflowBundleWithSourceMap;
  /** Close the connections, stop the server, remove its data. */
  stop(): Promise<void>;
}

/** Start a dev server on a free port with its data in a temp dir, and bundle `workflows` (default: the product's). */
export async function startDevTemporal(label: string, workflows = productWorkflowsPath): Promise<DevTemporal> {
  const data = tempDir(label);
  let server: DevServer | undefined;
  try {
    server = await startDevServer({
      binary: toolPath('temporal'),
      dataDir: data.path,
      port: await freePort(),
      uiPort: 0,
      namespace: 'default',
      ui: false,
    });
    const address = server.address;
    const [client, connection, bundled] = await Promise.all([
      Connection.connect({ address }).then((c) => new Client({ connection: c })),
      NativeConnection.connect({ address }),
      bundle(workflows),
    ]);
    const running = server;
    return {
      server: running,
      client,
      connection,
      bundle: bundled,
      async stop() {
        await connection.close();
        await client.connection.close();
        await running.stop();
        data.remove();
      },
    };
  } catch (err) {
    await server?.stop();
    data.remove();
    throw err;
  }
}

/** What a test on the embedded stack holds open, stopped in order: workers, connections, the stack, its database, its data dir. */
export async function stopStackTest(o: {
  workers?: ReadonlyArray<{ shutdown(): void } | undefined>;
  runs?: ReadonlyArray<Promise<unknown> | undefined>;
  connections?: ReadonlyArray<{ close(): Promise<void> } | undefined>;
  stack?: { stop(): Promise<void> };
  dropDb?: () => Promise<void>;
  data?: { remove(): void };
}): Promise<void> {
  for (const w of o.workers ?? []) w?.shutdown();
  for (const r of o.runs ?? []) await r?.catch(() => undefined);
  for (const c of o.connections ?? []) await c?.close();
  await o.stack?.stop();
  await o.dropDb?.();
  o.data?.remove();
}
