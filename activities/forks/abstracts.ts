/**
 * `makeAbstract`: one automatic abstract for an agent (the abstracts strategies on real rows),
 * the hourly digest's step. It lives with the forks because a fork's evaluation compares the
 * same strategies.
 */
import { abstractsStrategySchema, type AbstractsStrategy } from '../../core/abstracts.js';
import { agentIdSchema } from '../../core/ids.js';
import { makeAutoAbstract, type AbstractTrigger, type AutoAbstractResult } from '../../db/queries/abstracts.js';
import { abstractTriggers } from '../../db/schema/index.js';
import { ErrorType, nonRetryable, parseInput } from '../errors.js';
import type { ForkEnv } from './shared.js';

export interface MakeAbstractInput {
  agentId: string;
  strategy?: AbstractsStrategy;
  trigger: AbstractTrigger;
  triggerKey?: string;
  window?: number;
}

/**
 * Make one abstract for an agent by strategy (default: its `abstracts_strategy` config)
 * from its responses newer than its last automatic abstract: the hourly digest's step.
 * Idempotent per (agent, strategy, tick span), or per `triggerKey` when given.
 */
export async function makeAbstract({ db }: ForkEnv, input: MakeAbstractInput): Promise<AutoAbstractResult> {
  const agentId = parseInput('makeAbstract: agentId', agentIdSchema, input.agentId);
  const strategy =
    input.strategy === undefined
      ? undefined
      : parseInput('makeAbstract: strategy', abstractsStrategySchema, input.strategy);
  if (!abstractTriggers.includes(input.trigger))
    throw nonRetryable(ErrorType.InvalidInput, `makeAbstract: trigger must be one of ${abstractTriggers.join(', ')}`);
  return makeAutoAbstract(db, {
    agentId,
    trigger: input.trigger,
    ...(input.triggerKey !== undefined ? { triggerKey: input.triggerKey } : {}),
    ...(strategy ? { strategy } : {}),
    ...(input.window !== undefined ? { window: input.window } : {}),
  });
}
