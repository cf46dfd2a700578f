/**
 * A minimal input of assembleContext (what one tick shows its model): an agent with nothing yet,
 * every part empty; a test overrides the parts it looks at.
 */
import type { ContextInput } from '../../core/context.js';

export function contextInput(over: Partial<ContextInput> = {}): ContextInput {
  return {
    agent: { id: 'ada', name: 'Ada' },
    tick: 3,
    now: '2026-11-27T18:00:00.000Z',
    systemPrompt: 'You think.',
    ethics: [],
    catalogue: '(catalogue)',
    tools: [],
    learnings: [],
    responses: [],
    goals: [],
    pinnedTasks: [],
    abstracts: [],
    openProcesses: [],
    commandResults: [],
    notes: [],
    notesMode: 'auto',
    config: {},
    memory: [],
    contextMode: 'standard',
    recentK: 5,
    ...over,
  };
}
