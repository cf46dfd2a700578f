// The one workflowsPath of the `mindloop` task queue: every workflow type is exported here.
export { provisionAgentWorkflow } from './provision-agent.js';
