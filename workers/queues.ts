/**
 * One TypeScript Worker per task queue: `mindloop` (workflows, db and LLM activities, the speech
 * organ's routing and records) and `sandbox` (Docker activities). The speech queues are polled
 * by the Python speech engine, started as a child process (runtime/speech-worker.ts, workers/run.ts).
 */
import { fileURLToPath } from 'node:url';
import {
  Worker,
  bundleWorkflowCode,
  type NativeConnection,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import type { Db } from '../db/client.js';
import { createActivities } from '../activities/index.js';
import { createAgentEmbedders } from '../activities/embeddings/agent-embedder.js';
import type { McpPool } from '../activities/mcp/pool.js';
import type { LedgerSwitch } from '../activities/llm/index.js';
import { sweepLifeforceEvery } from '../activities/lifeforce.js';
import type { DangerRule } from '../core/danger-zones.js';
import type { AgentEventSink } from '../activities/agent-events.js';
import { createSandboxActivities, reapOrphansAtStart, sweepOrphans } from '../activities/sandbox.js';
import { createDocker } from '../sandbox/docker.js';
import { DockerSandbox } from '../sandbox/docker-sandbox.js';
import { failoverWorkerOptions } from './failover.js';

export const workflowsPath = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

interface QueueWorkerDeps {
  connection: NativeConnection;
  namespace: string;
  db: Db;
  dockerHost?: string;
  /** API keys by variable name (llm_registry.api_key_env) and where the local model lives. */
  llm: {
    env: Readonly<Record<string, string | undefined>>;
    toolsDir: string;
    timeoutMs?: number;
    localThreads?: number;
    maxReplyBytes?: number;
    lifeforce?: LedgerSwitch;
  };
  /** MINDLOOP_MODE / MINDLOOP_ALLOW_TOOLGEN for tool generation (default: production, no override). */
  toolGeneration?: { mode: 'development' | 'production'; allowOverride: boolean };
  /** The danger-zone rules in force (MINDLOOP_DANGER_RULES); default: core/danger-zones.ts defaults. */
  dangerRules?: readonly DangerRule[];
  /** A pre-built bundle (tests, benchmarks) saves the few seconds webpack takes. */
  workflowBundle?: WorkflowBundleWithSourceMap | { codePath: string };
  /** Told of the agents' ticks and events: the bus, when the worker has one (workers/bus.ts). */
  events?: AgentEventSink;
  /** MINDLOOP_DATA_DIR: fork artifacts and spoken audio go under it (default `.data`). */
  dataDir?: string;
  /** MINDLOOP_WORKFLOW_CACHE: workflows kept in memory between their tasks (the SDK's default when absent). */
  maxCachedWorkflows?: number;
  /** The worker's MCP clients (activities/mcp/pool.ts); its owner closes them when the worker stops. */
  mcp?: McpPool;
}

/** The queues TypeScript workers poll. */
export const tsQueues = ['mindloop', 'sandbox'] as const;
export type TsQueueName = (typeof tsQueues)[number];

/** Evaluated once per worker for all its workflows (see that module). */
const preloadedWorkflowModules = [fileURLToPath(new URL('../workflows/lib/preload.ts', import.meta.url))];

/** Bundle the workflow code once; several workers or restarts can share it. */
export function bundleWorkflows(): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({ workflowsPath, logger: quietBundlerLogger, preloadModules: preloadedWorkflowModules });
}

// webpack's progress lines drown the start-up summary; keep its warnings and errors only.
const quietBundlerLogger = {
  trace() {},
  debug() {},
  info() {},
  log() {},
  warn: (message: string) => process.stderr.write(`bundler: ${message}\n`),
  error: (message: string) => process.stderr.write(`bundler: ${message}\n`),
};

/** Create the Worker that polls `queue`. */
export async function createQueueWorker(queue: TsQueueName, deps: QueueWorkerDeps): Promise<Worker> {
  const base = { connection: deps.connection, namespace: deps.namespace, taskQueue: queue, ...failoverWorkerOptions };
  switch (queue) {
    case 'mindloop':
      sweepLifeforceEvery(deps.db);
      return Worker.create({
        ...base,
        ...(deps.maxCachedWorkflows ? { maxCachedWorkflows: deps.maxCachedWorkflows } : {}),
        workflowBundle: deps.workflowBundle ?? (await bundleWorkflows()),
        activities: createActivities({
          db: deps.db,
          llm: deps.llm,
          toolGeneration: deps.toolGeneration,
          dangerRules: deps.dangerRules,
          ...(deps.dataDir ? { dataDir: deps.dataDir } : {}),
          ...(deps.llm.lifeforce ? { lifeforce: deps.llm.lifeforce } : {}),
          ...(deps.events ? { events: deps.events } : {}),
          ...(deps.mcp ? { mcp: deps.mcp } : {}),
          // Memory by meaning: the agents' embedders, the offline one from the tools folder.
          embedders: createAgentEmbedders({ env: deps.llm.env, toolsDir: deps.llm.toolsDir }),
        }),
      });
    case 'sandbox': {
      const docker = createDocker(deps.dockerHost);
      const sandbox = new DockerSandbox(docker);
      // Leftovers past their deadline go first (no engine, on a laptop, only logs the fix), then
      // a sweep every minute catches those a dead worker left that no retry came back for.
      void reapOrphansAtStart(sandbox);
      sweepOrphans(sandbox);
      return Worker.create({ ...base, activities: createSandboxActivities({ docker, sandbox }) });
    }
  }
}
