/**
 * Composition of the activity families polled on the `mindloop` task queue. Sandbox and
 * speech activities live on their own queues (activities/sandbox.ts, activities/speech.ts).
 */
import { createAgentActivities, type AgentDeps } from './agents.js';

export type MindloopActivityDeps = AgentDeps;

/** All `mindloop`-queue activities, built from their dependencies (no module state). */
export function createActivities(deps: MindloopActivityDeps) {
  return {
    ...createAgentActivities(deps),
  };
}
