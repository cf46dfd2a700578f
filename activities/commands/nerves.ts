/**
 * `nerve.start`: the command only asks; the agent loop starts the nerve's child workflow
 * (`agent/<id>/nerve/<name>`, one run of a nerve at a time), which carves its own budget.
 */
import type { FamilyTypes, HandlerMap } from './shared.js';

export const nerveHandlers: HandlerMap<FamilyTypes<'nerve'>> = {
  async 'nerve.start'(ctx, a) {
    return {
      message: `starting nerve ${a.name} (${a.steps} steps, mode ${a.mode}) as agent/${ctx.agentId}/nerve/${a.name}`,
      effects: [{ kind: 'startNerve', nerve: a.name, steps: a.steps, seed: a.seed, mode: a.mode, cmdId: ctx.logCmdId }],
    };
  },
};
