/**
 * The agent loop: `agentLoopWorkflow` and what callers send it. Read workflow.ts first: the loop
 * and its tick, top-down; the other files are the steps it names.
 */
export { agentLoopWorkflow } from './workflow.js';
export * from './messages.js';
export { localHoldMaxMs, localThinkMaxModelMs, localThinksInARow } from './think.js';
export { localReflexMaxMs } from './workflow.js';
