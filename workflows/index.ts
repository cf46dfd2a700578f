// The one workflowsPath of the `mindloop` task queue: every workflow type is exported here.
export { provisionAgentWorkflow } from './provision-agent.js';
export { agentLoopWorkflow } from './agent-loop.js';
export { taskLoopWorkflow } from './task-loop.js';
export { campaignWorkflow } from './campaign.js';
export { toolGenerationWorkflow } from './tool-generation.js';
export { successorForkWorkflow } from './successor-fork.js';
export { escalationWorkflow } from './escalation.js';
export { learningDecayWorkflow, abstractsDigestWorkflow, memoryPruningWorkflow, processLogCleanupWorkflow } from './maintenance.js';
