/**
 * Composition of the activity families polled on the `mindloop` task queue. Sandbox and
 * speech activities live on their own queues (activities/sandbox.ts, activities/speech.ts).
 */
import type { Db } from '../db/client.js';
import { createAgentActivities } from './agents.js';
import { createCommandActivities, type CommandDeps } from './commands.js';
import { createLlmActivities, createLlmRouter, type LlmRouter, type LlmRouterDeps } from './llm/index.js';
import { createTickActivities } from './tick.js';

export interface MindloopActivityDeps {
  db: Db;
  /** An LLM router, or what to build one from (env for API keys, tools dir for the local model). */
  llm: LlmRouter | Omit<LlmRouterDeps, 'db'>;
  commandHooks?: CommandDeps['hooks'];
}

/** All `mindloop`-queue activities, built from their dependencies (no module state). */
export function createActivities(deps: MindloopActivityDeps) {
  const router = 'chat' in deps.llm ? deps.llm : createLlmRouter({ db: deps.db, ...deps.llm });
  return {
    ...createAgentActivities(deps),
    ...createLlmActivities({ db: deps.db, env: {}, toolsDir: '', router }),
    ...createTickActivities({ db: deps.db, llm: router }),
    ...createCommandActivities({ db: deps.db, hooks: deps.commandHooks }),
  };
}
