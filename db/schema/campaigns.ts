/**
 * Campaigns: a goal executed in ordered phases, each with objectives, tasks and a
 * validated checkpoint. Ids are business keys (the workflow is `campaign/<id>`).
 */
import { check, index, integer, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { agentId } from './agents.js';
import { goals } from './goals.js';
import { bigintRef, jsonbOf, oneOf, rowId, timestamps, tstz } from './_columns.js';

export const campaignStatuses = [
  'pending',
  'running',
  'paused',
  'compensating',
  'completed',
  'failed',
  'cancelled',
] as const;
export const phaseStatuses = [
  'pending',
  'running',
  'checkpoint',
  'completed',
  'failed',
  'skipped',
  'compensated',
] as const;

/** Limits a campaign may spend; unset fields are unlimited. */
export interface CampaignBudget {
  lifeforce?: number;
  costUsd?: number;
  wallMs?: number;
}

export const campaigns = pgTable(
  'campaigns',
  {
    id: text('id').primaryKey(),
    agentId: agentId(),
    goal: text('goal').notNull(),
    goalId: bigintRef('goal_id').references(() => goals.id, { onDelete: 'set null' }),
    /** Learnings it promotes carry this shard and `source_campaign = id`. */
    shardType: text('shard_type'),
    status: text('status', { enum: campaignStatuses }).notNull().default('pending'),
    /** Ordinal of the phase in progress (0 before the first starts). */
    currentPhase: integer('current_phase').notNull().default(0),
    budget: jsonbOf<CampaignBudget>('budget', {}),
    workflowId: text('workflow_id'),
    error: text('error'),
    startedAt: tstz('started_at'),
    finishedAt: tstz('finished_at'),
    ...timestamps,
  },
  (t) => [
    index('campaigns_agent_id_status_idx').on(t.agentId, t.status),
    check('campaigns_status_check', oneOf(t.status, campaignStatuses)),
  ],
);

export const campaignPhases = pgTable(
  'campaign_phases',
  {
    id: rowId(),
    agentId: agentId(),
    campaignId: text('campaign_id')
      .notNull()
      .references(() => campaigns.id, { onDelete: 'cascade' }),
    ordinal: integer('ordinal').notNull(),
    name: text('name').notNull(),
    objectives: jsonbOf<string[]>('objectives', []),
    /** Task descriptors (activity or child workflow) the phase runs. */
    tasks: jsonbOf<Record<string, unknown>[]>('tasks', []),
    /** The checkpoint the validator checks, and its result once run. */
    checkpoint: jsonbOf<Record<string, unknown>>('checkpoint', {}),
    status: text('status', { enum: phaseStatuses }).notNull().default('pending'),
    result: jsonb('result').$type<Record<string, unknown>>(),
    error: text('error'),
    startedAt: tstz('started_at'),
    finishedAt: tstz('finished_at'),
    ...timestamps,
  },
  (t) => [
    uniqueIndex('campaign_phases_campaign_id_ordinal_uq').on(t.campaignId, t.ordinal),
    index('campaign_phases_agent_id_idx').on(t.agentId, t.status),
    check('campaign_phases_status_check', oneOf(t.status, phaseStatuses)),
  ],
);

export type Campaign = typeof campaigns.$inferSelect;
export type NewCampaign = typeof campaigns.$inferInsert;
export type CampaignPhase = typeof campaignPhases.$inferSelect;
export type NewCampaignPhase = typeof campaignPhases.$inferInsert;
