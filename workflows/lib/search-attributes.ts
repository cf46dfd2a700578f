/**
 * Typed search attributes the workflows set, so the Temporal UI can filter by
 * agent and campaign. The embedded dev server registers them at start.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const agentIdSearchAttribute = defineSearchAttributeKey('MindloopAgentId', SearchAttributeType.KEYWORD);
export const campaignIdSearchAttribute = defineSearchAttributeKey('MindloopCampaignId', SearchAttributeType.KEYWORD);
export const kindSearchAttribute = defineSearchAttributeKey('MindloopKind', SearchAttributeType.KEYWORD);

/** An agent's lifeforce: `ok` or `exhausted` (the UI lists exhausted agents with `MindloopLifeforce="exhausted"`). */
export const lifeforceSearchAttribute = defineSearchAttributeKey('MindloopLifeforce', SearchAttributeType.KEYWORD);

export const allSearchAttributes = [
  agentIdSearchAttribute,
  campaignIdSearchAttribute,
  kindSearchAttribute,
  lifeforceSearchAttribute,
] as const;

/** The CLI's `--search-attribute NAME=Type` spelling. */
export function cliSearchAttributeType(type: string): string {
  return type === 'KEYWORD' ? 'Keyword' : type.charAt(0) + type.slice(1).toLowerCase();
}
