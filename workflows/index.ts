/**
 * The one workflowsPath of the `mindloop` task queue: every workflow type is exported here.
 *
 * Lazily. The worker's reusable V8 context gives each workflow its own module cache, and each
 * workflow evaluates this file; with plain re-exports every open agent loop would also build and
 * hold the campaign, fork, escalation and tool-generation modules and their schemas (~0.5 MB a
 * workflow). Each export below loads its module on its first call, so a workflow evaluates
 * only the modules of its own type.
 */
import type * as AgentLoop from './agent-loop/index.js';
import type * as Campaign from './campaign.js';
import type * as Escalation from './escalation.js';
import type * as Maintenance from './maintenance.js';
import type * as Nerve from './nerve.js';
import type * as ProvisionAgent from './provision-agent.js';
import type * as Spawn from './spawn.js';
import type * as Speech from './speech.js';
import type * as SuccessorFork from './successor-fork.js';
import type * as TaskLoop from './task-loop.js';
import type * as ToolGeneration from './tool-generation.js';

/** The workflow function `type`, loading its module on its first call (webpack's `require`, in the bundle). */
function lazy<F extends (...args: never[]) => unknown>(type: string, load: () => F): F {
  const workflow = (...args: Parameters<F>) => load()(...args);
  // Its name is its workflow type, as for the function it stands for (startChild(fn) reads it).
  return Object.defineProperty(workflow, 'name', { value: type }) as unknown as F;
}

export const provisionAgentWorkflow = lazy(
  'provisionAgentWorkflow',
  () => (require('./provision-agent.js') as typeof ProvisionAgent).provisionAgentWorkflow,
);
export const agentLoopWorkflow = lazy(
  'agentLoopWorkflow',
  () => (require('./agent-loop/index.js') as typeof AgentLoop).agentLoopWorkflow,
);
export const taskLoopWorkflow = lazy(
  'taskLoopWorkflow',
  () => (require('./task-loop.js') as typeof TaskLoop).taskLoopWorkflow,
);
export const campaignWorkflow = lazy(
  'campaignWorkflow',
  () => (require('./campaign.js') as typeof Campaign).campaignWorkflow,
);
export const toolGenerationWorkflow = lazy(
  'toolGenerationWorkflow',
  () => (require('./tool-generation.js') as typeof ToolGeneration).toolGenerationWorkflow,
);
export const successorForkWorkflow = lazy(
  'successorForkWorkflow',
  () => (require('./successor-fork.js') as typeof SuccessorFork).successorForkWorkflow,
);
export const nerveWorkflow = lazy('nerveWorkflow', () => (require('./nerve.js') as typeof Nerve).nerveWorkflow);
export const spawnWorkflow = lazy('spawnWorkflow', () => (require('./spawn.js') as typeof Spawn).spawnWorkflow);
export const speechWorkflow = lazy('speechWorkflow', () => (require('./speech.js') as typeof Speech).speechWorkflow);
export const escalationWorkflow = lazy(
  'escalationWorkflow',
  () => (require('./escalation.js') as typeof Escalation).escalationWorkflow,
);
export const learningDecayWorkflow = lazy(
  'learningDecayWorkflow',
  () => (require('./maintenance.js') as typeof Maintenance).learningDecayWorkflow,
);
export const abstractsDigestWorkflow = lazy(
  'abstractsDigestWorkflow',
  () => (require('./maintenance.js') as typeof Maintenance).abstractsDigestWorkflow,
);
export const memoryPruningWorkflow = lazy(
  'memoryPruningWorkflow',
  () => (require('./maintenance.js') as typeof Maintenance).memoryPruningWorkflow,
);
export const embeddingsBackfillWorkflow = lazy(
  'embeddingsBackfillWorkflow',
  () => (require('./maintenance.js') as typeof Maintenance).embeddingsBackfillWorkflow,
);
export const processLogCleanupWorkflow = lazy(
  'processLogCleanupWorkflow',
  () => (require('./maintenance.js') as typeof Maintenance).processLogCleanupWorkflow,
);
