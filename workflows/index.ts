// The one workflowsPath of the `mindloop` task queue: every workflow type is exported here.
export { provisionAgentWorkflow } from './provision-agent.js';
export { agentLoopWorkflow } from './agent-loop.js';
export { taskLoopWorkflow } from './task-loop.js';
