/**
 * `spawn`: the command checks what it can in its own transaction (the name is free, no
 * ancestor's limit is reached) and asks; the agent loop starts the spawn workflow
 * `agent/<id>/spawn/<name>`, which admits the child again (the word that counts), copies,
 * funds and starts it, and tells the agent how it went in a note.
 */
import { workflowIds } from '../../core/ids.js';
import { admitSpawn } from '../../db/queries/spawns.js';
import { CommandError, type HandlerMap } from './shared.js';

export const spawnHandlers: HandlerMap<'spawn'> = {
  async spawn({ tx, agentId, logCmdId }, a) {
    const admitted = await admitSpawn(tx, { parentId: agentId, childId: a.name });
    if (!admitted.ok) throw new CommandError(`spawn refused: ${admitted.reason}`);
    const budget = a.budget === undefined ? 'a budget from yours' : `${a.budget} LF from your budget`;
    return {
      message: `spawning ${a.type} ${a.name} (generation ${admitted.generation}, ${budget}) as ${workflowIds.spawn(agentId, a.name)}; the outcome comes as a note`,
      effects: [
        {
          kind: 'spawn',
          type: a.type,
          name: a.name,
          ...(a.goals?.length ? { goals: a.goals } : {}),
          ...(a.budget !== undefined ? { budget: a.budget } : {}),
          cmdId: logCmdId,
        },
      ],
    };
  },
};
