/**
 * Composition of the activity families polled on the `mindloop` task queue. Sandbox activities
 * live on their own queue (activities/sandbox.ts); the speech engine is the Python worker on the
 * speech queues, and its `mindloop`-queue half (routing, holds, notes) is activities/speech.ts.
 */
import type { Db } from '../db/client.js';
import { createAgentActivities } from './agents.js';
import { createAgentFileActivities } from './agent-file.js';
import { createCampaignActivities } from './campaigns.js';
import type { TaskType } from './campaign-tasks.js';
import type { LearningSink } from './learning-sink.js';
import { createToolGenerationActivities, type ToolGenerationDeps } from './tool-generation.js';
import { createForkActivities } from './forks/index.js';
import {
  createLlmActivities,
  createLlmRouter,
  type LedgerSwitch,
  type LlmRouter,
  type LlmRouterDeps,
} from './llm/index.js';
import { createLlmTaskActivities } from './llm-task.js';
import { createLifeforceActivities } from './lifeforce.js';
import { defaultPrices } from '../core/lifeforce.js';
import { createLoopEventActivities } from './tick/loop-events.js';
import { createTickSnapshots } from './tick/snapshot.js';
import { createTaskLoopActivities } from './tick/task-loops.js';
import { createThinkActivities } from './tick/think.js';
import { createTickReflexActivities } from './tick/reflexes.js';
import { createCommandActivities, type CommandDeps } from './tick/apply-commands.js';
import { observeThink } from './tick/tick-beat.js';
import { guardEvents, type AgentEventSink } from './agent-events.js';
import { createReflexActivities } from './reflexes/index.js';
import type { ReflexDeps } from './reflexes/types.js';
import { createLearningActivities, createLearningSink } from './learnings.js';
import { createEmbeddingActivities } from './embeddings/backfill.js';
import { createNerveActivities } from './nerves.js';
import { createShellActivities } from './shell.js';
import { createOversightActivities } from './oversight/index.js';
import { createToolActivities } from './tools.js';
import { createSpeechActivities, type SpeechActivityDeps } from './speech.js';
import { createSpawnActivities } from './society/spawn.js';
import type { DangerRule } from '../core/danger-zones.js';
import { classifyActivityErrors } from './errors.js';
import { createMcpActivities, createMcpPool } from './mcp/index.js';
import type { McpPool } from './mcp/pool.js';
import type { AgentEmbedders } from './embeddings/agent-embedder.js';

interface MindloopActivityDeps {
  db: Db;
  /** Reflex tuning (validator timeout, memory-manager period); defaults in activities/tick/reflexes.ts and activities/reflexes/. */
  reflexes?: Pick<ReflexDeps, 'validatorTimeoutMs' | 'memoryEvery'>;
  /** An LLM router, or what to build one from (env for API keys, tools dir for the local model). */
  llm: LlmRouter | Omit<LlmRouterDeps, 'db'>;
  commandHooks?: CommandDeps['hooks'];
  /** Where campaigns and generated tools promote learnings (the learning store's save). */
  learn?: LearningSink;
  /** Campaign task types (default: the built-ins of activities/campaign-tasks.ts). */
  campaignTaskTypes?: Record<string, TaskType>;
  /** MINDLOOP_MODE and MINDLOOP_ALLOW_TOOLGEN (env.ts); unset = production without override. */
  toolGeneration?: ToolGenerationDeps['policy'];
  /** MINDLOOP_DATA_DIR: fork artifacts go under `<dataDir>/forks/<id>/` (default `.data`). */
  dataDir?: string;
  /** The danger-zone rules in force (MINDLOOP_DANGER_RULES); default: core/danger-zones.ts defaults. */
  dangerRules?: readonly DangerRule[];
  /** The lifeforce ledger's switch and prices (default: on, core/lifeforce.ts prices). */
  lifeforce?: LedgerSwitch;
  /**
   * Told of the agents' ticks and events (the bus heartbeat, reply, verdict, escalation,
   * learning) after the work behind each is recorded; it must not block. What it throws is logged.
   */
  events?: AgentEventSink;
  /** The speech activities' Temporal client (default the worker's) and routing knobs. */
  speech?: Pick<SpeechActivityDeps, 'client' | 'routeCacheMs' | 'pollerFreshMs'>;
  /** The worker's MCP clients, which it closes when it stops (default: a pool of these activities' own). */
  mcp?: McpPool;
  /** The agents' embedders (memory by meaning); without them memory compares words only. */
  embedders?: AgentEmbedders;
}

/** All `mindloop`-queue activities, built from their dependencies (no module state). */
export function createActivities(deps: MindloopActivityDeps) {
  // Whether costly work goes through the lifeforce ledger, at what prices (one switch for all families).
  const ledger = deps.lifeforce ??
    ('chat' in deps.llm ? undefined : deps.llm.lifeforce) ?? { enabled: true, prices: defaultPrices };
  const router = 'chat' in deps.llm ? deps.llm : createLlmRouter({ db: deps.db, ...deps.llm, lifeforce: ledger });
  // Campaigns and generated tools promote into the learning store unless a test injects a sink.
  const events = deps.events ? guardEvents(deps.events) : undefined;
  const learn = deps.learn ?? createLearningSink({ db: deps.db, events });
  // One read of an agent per tick, shared by think, the reflexes and applyCommands.
  const snapshots = createTickSnapshots({ db: deps.db, llm: router });
  const tools = { db: deps.db, ...(deps.dangerRules ? { dangerRules: deps.dangerRules } : {}) };
  const embedders = deps.embedders ? { embedders: deps.embedders } : {};
  const thinking = createThinkActivities({ db: deps.db, llm: router, snapshots, ...embedders });
  return classifyActivityErrors({
    ...createAgentActivities(deps),
    ...createAgentFileActivities({ db: deps.db }),
    ...createLlmActivities({ db: deps.db, env: {}, toolsDir: '', router }),
    ...createLlmTaskActivities({ db: deps.db, llm: router }),
    ...(events ? observeThink(thinking, events) : thinking),
    ...createLoopEventActivities({ db: deps.db, events }),
    ...createTaskLoopActivities({ db: deps.db }),
    ...createTickReflexActivities({ db: deps.db, llm: router, snapshots, ...deps.reflexes, events, ...embedders }),
    ...createReflexActivities({ db: deps.db }),
    ...createShellActivities({ db: deps.db, prices: ledger.prices }),
    ...createCommandActivities({
      db: deps.db,
      hooks: deps.commandHooks,
      dangerRules: deps.dangerRules,
      snapshots,
      prices: ledger.prices,
      events,
      ...embedders,
    }),
    ...createLearningActivities({ db: deps.db, events, ...embedders }),
    ...createEmbeddingActivities({ db: deps.db, ...embedders }),
    ...createCampaignActivities({
      db: deps.db,
      llm: router,
      taskTypes: deps.campaignTaskTypes,
      learn,
      prices: ledger.prices,
    }),
    ...createForkActivities({ db: deps.db, llm: router, dataDir: deps.dataDir, prices: ledger.prices }),
    ...createToolGenerationActivities({ db: deps.db, llm: router, learn, policy: deps.toolGeneration }),
    ...createOversightActivities({ db: deps.db, llm: router, events }),
    ...createToolActivities(tools),
    ...createLifeforceActivities({ db: deps.db, prices: ledger.prices }),
    ...createNerveActivities({ db: deps.db, llm: router, prices: ledger.prices }),
    ...createSpeechActivities({
      db: deps.db,
      prices: ledger.prices,
      ledger: ledger.enabled,
      dataDir: deps.dataDir ?? '.data',
      ...deps.speech,
    }),
    ...createSpawnActivities({ db: deps.db, ledger: ledger.enabled }),
    ...createMcpActivities({
      db: deps.db,
      pool: deps.mcp ?? createMcpPool(deps.db),
      prices: ledger.prices,
      ledger: ledger.enabled,
    }),
  });
}
