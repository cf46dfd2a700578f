/**
 * The campaign's rows: the campaign and its phases, their statuses, results and errors. Plain
 * table functions (the campaign activities and the CLI share them); each write is idempotent.
 */
import { and, eq, sql } from 'drizzle-orm';
import type { Checkpoint } from '../../core/campaign.js';
import { campaignPhases, campaigns, type Campaign, type CampaignBudget, type CampaignPhase } from '../schema/index.js';
import type { Queryable } from './abstracts.js';

interface CampaignRowsInput {
  campaignId: string;
  agentId: string;
  title: string;
  shardType: string;
  workflowId: string;
  phases: Array<{
    name: string;
    type: string;
    objectives: string[];
    tasks: Array<Record<string, unknown>>;
    checkpoint: Checkpoint;
  }>;
  /** What the campaign may spend (its lifeforce budget is carved from it); unset: `{}`. */
  budget?: CampaignBudget;
}

/**
 * Upsert the campaign and its phase rows. A restarted campaign (same id, new run) keeps its
 * history and its status while in progress; a finished one starts over as running. Existing
 * phase rows are kept. Returns the campaign's status.
 */
export async function upsertCampaign(q: Queryable, input: CampaignRowsInput): Promise<Campaign['status']> {
  const [row] = await q
    .insert(campaigns)
    .values({
      id: input.campaignId,
      agentId: input.agentId,
      goal: input.title,
      shardType: input.shardType,
      status: 'running',
      workflowId: input.workflowId,
      startedAt: new Date(),
      budget: input.budget ?? {},
    })
    .onConflictDoUpdate({
      target: campaigns.id,
      set: {
        status: sql`case when ${campaigns.status} in ('running', 'paused', 'compensating') then ${campaigns.status} else 'running' end`,
        workflowId: input.workflowId,
        error: null,
        finishedAt: null,
        ...(input.budget ? { budget: input.budget } : {}),
      },
    })
    .returning({ status: campaigns.status });
  await q
    .insert(campaignPhases)
    .values(
      input.phases.map((p, i) => ({
        agentId: input.agentId,
        campaignId: input.campaignId,
        ordinal: i,
        name: p.name,
        objectives: p.objectives,
        tasks: p.tasks,
        checkpoint: { ...p.checkpoint, type: p.type },
      })),
    )
    .onConflictDoNothing();
  return row!.status;
}

/** Set the campaign's status (and the phase in progress, or the error); a final status stamps `finished_at`. */
export async function setCampaignStatus(
  q: Queryable,
  input: { campaignId: string; status: Campaign['status']; currentPhase?: number; error?: string | null },
): Promise<void> {
  const done = ['completed', 'failed', 'cancelled'].includes(input.status);
  await q
    .update(campaigns)
    .set({
      status: input.status,
      ...(input.currentPhase !== undefined ? { currentPhase: input.currentPhase } : {}),
      ...(input.error !== undefined ? { error: input.error } : {}),
      ...(done ? { finishedAt: new Date() } : {}),
    })
    .where(eq(campaigns.id, input.campaignId));
}

/** Set a phase's status, its result (task outcomes, checkpoint verdict) or its error; `running` and final statuses stamp their times. */
export async function setPhaseStatus(
  q: Queryable,
  input: {
    campaignId: string;
    ordinal: number;
    status: CampaignPhase['status'];
    result?: Record<string, unknown>;
    error?: string | null;
  },
): Promise<void> {
  const now = new Date();
  await q
    .update(campaignPhases)
    .set({
      status: input.status,
      ...(input.result !== undefined ? { result: input.result } : {}),
      ...(input.error !== undefined ? { error: input.error } : {}),
      ...(input.status === 'running' ? { startedAt: now } : {}),
      ...(['completed', 'failed', 'compensated', 'skipped'].includes(input.status) ? { finishedAt: now } : {}),
    })
    .where(and(eq(campaignPhases.campaignId, input.campaignId), eq(campaignPhases.ordinal, input.ordinal)));
}
