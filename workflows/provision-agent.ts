import { proxyActivities, upsertSearchAttributes } from '@temporalio/workflow';
import { z } from 'zod';
import { agentIdSchema } from '../core/ids.js';
import type { createActivities } from '../activities/index.js';
import { dbActivity } from './lib/activity-options.js';
import { parseWorkflowInput } from './lib/input.js';
import { agentIdSearchAttribute, kindSearchAttribute } from './lib/search-attributes.js';

const { ensureAgent } = proxyActivities<ReturnType<typeof createActivities>>(dbActivity);

export const provisionAgentInput = z.object({
  agentId: agentIdSchema,
  name: z.string().trim().min(1).max(200),
});
export type ProvisionAgentInput = z.input<typeof provisionAgentInput>;

/** Creates an agent's identity row (workflow id `provision/<agentId>`); running it again is a no-op. */
export async function provisionAgentWorkflow(input: ProvisionAgentInput) {
  const { agentId, name } = parseWorkflowInput('provisionAgentWorkflow', provisionAgentInput, input);
  upsertSearchAttributes([
    { key: agentIdSearchAttribute, value: agentId },
    { key: kindSearchAttribute, value: 'provision' },
  ]);
  return ensureAgent({ agentId, name });
}
