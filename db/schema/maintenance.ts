/**
 * The run ledger of the scheduled maintenance jobs: one row per (job, period, scope) that was
 * done. A job's database work and its ledger row commit in one transaction, so a repeat for a
 * period (a UI trigger, a backfill, a catch-up, an overlapping run) finds the row and changes
 * nothing, and a crash between the two cannot leave the work done without the row.
 */
import { check, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { maintenanceJobNames } from '../../core/maintenance-period.js';
import { oneOf, rowId, tstz } from './_columns.js';

/** The scope of a job that runs for everything (not one agent or one shard). */
export const wholeScope = '*';

export const maintenanceRuns = pgTable(
  'maintenance_runs',
  {
    id: rowId(),
    job: text('job').notNull(),
    /** The period's key (core/maintenance-period.ts): `2026-11-24`, `2026-11-24T13`. */
    periodKey: text('period_key').notNull(),
    /** `*`, or the agent (per-agent jobs) or shard (a one-shard decay) the run was for. */
    scope: text('scope').notNull().default(wholeScope),
    /** The workflow run that did it. */
    workflowId: text('workflow_id'),
    startedAt: tstz('started_at').notNull().defaultNow(),
    /** Set in the same transaction as the insert: a committed row always has it. */
    finishedAt: tstz('finished_at'),
    result: jsonb('result').$type<Record<string, unknown>>(),
  },
  (t) => [
    uniqueIndex('maintenance_runs_job_period_scope_uq').on(t.job, t.periodKey, t.scope),
    check('maintenance_runs_job_check', oneOf(t.job, maintenanceJobNames)),
  ],
);
export type MaintenanceRun = typeof maintenanceRuns.$inferSelect;
