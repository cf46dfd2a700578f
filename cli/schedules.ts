/** `mindloop schedules apply|list|trigger`: the maintenance Temporal Schedules (workers/schedules.ts). */
import { InvalidArgumentError, type Command } from 'commander';
import { maintenanceJobNames, type MaintenanceJob } from '../core/maintenance-period.js';
import { listMaintenanceRuns } from '../db/queries/maintenance-runs.js';
import { applySchedules, awaitScheduledRun, describeSchedules, maintenanceSchedules } from '../workers/schedules.js';
import { withClient, withDb } from './client.js';

const scheduleId = (raw: string): string => {
  const known = maintenanceSchedules.map((s) => s.id);
  const id = raw.includes('/') ? raw : `maintenance/${raw}`;
  if (!known.includes(id)) throw new InvalidArgumentError(`unknown schedule "${raw}" (known: ${known.join(', ')})`);
  return id;
};

export function registerScheduleCommands(program: Command): void {
  const schedules = program
    .command('schedules')
    .description('the maintenance schedules: learning decay, abstracts digest, memory pruning, process-log cleanup');
  schedules.showHelpAfterError(true);

  schedules
    .command('apply')
    .description('create the schedules, or update them to this version (a paused schedule stays paused)')
    .option('--task-queue <queue>', 'task queue of the maintenance workflows', 'mindloop')
    .action(async (o: { taskQueue: string }) => {
      const r = await withClient((client) => applySchedules(client, { taskQueue: o.taskQueue }));
      for (const s of r) process.stdout.write(`${s.action.padEnd(7)} ${s.id}\n`);
    });

  schedules
    .command('list')
    .description('each schedule: workflow, paused, next runs')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const rows = await withClient((client) => describeSchedules(client));
      if (o.json) return void process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
      if (rows.length === 0)
        return void process.stdout.write('no maintenance schedules yet: run `mindloop schedules apply`\n');
      for (const r of rows) {
        process.stdout.write(
          `${r.id}  ${r.workflowType}  ${r.paused ? 'PAUSED' : 'active'}  next ${r.nextActionTimes[0] ?? '-'}  (${r.note ?? ''})\n`,
        );
      }
    });

  schedules
    .command('trigger')
    .description("run a schedule now (as the UI's Trigger button)")
    .argument(
      '<schedule>',
      'learning-decay | abstracts-digest | memory-pruning | process-log-cleanup | embeddings-backfill',
      scheduleId,
    )
    .option('--wait', 'wait for the run and print what it did (a repeat for a period already done changes nothing)')
    .action(async (id: string, o: { wait?: boolean }) => {
      if (!o.wait) {
        await withClient((client) => client.schedule.getHandle(id).trigger());
        return void process.stdout.write(`triggered ${id}\n`);
      }
      const run = await withClient((client) =>
        awaitScheduledRun<{ note?: string }>(client, id, () => client.schedule.getHandle(id).trigger(), 5 * 60_000),
      );
      process.stdout.write(`triggered ${id}\n${run.workflowId}: ${run.result.note ?? JSON.stringify(run.result)}\n`);
    });

  schedules
    .command('runs')
    .description('the run ledger: which job ran for which period (and agent or shard), when, by which run')
    .option('--job <job>', maintenanceJobNames.join(' | '), (raw: string) => {
      if (!(maintenanceJobNames as string[]).includes(raw))
        throw new InvalidArgumentError(`unknown job "${raw}" (known: ${maintenanceJobNames.join(', ')})`);
      return raw as MaintenanceJob;
    })
    .option(
      '--limit <n>',
      'newest N',
      (raw: string) => {
        const n = Number(raw);
        if (!Number.isInteger(n) || n < 1 || n > 1000) throw new InvalidArgumentError('--limit: an integer 1..1000');
        return n;
      },
      50,
    )
    .option('--json', 'print JSON')
    .action(async (o: { job?: MaintenanceJob; limit: number; json?: boolean }) => {
      const rows = await withDb((db) => listMaintenanceRuns(db, { job: o.job, limit: o.limit }));
      if (o.json) return void process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
      if (rows.length === 0) return void process.stdout.write('no maintenance runs recorded yet\n');
      for (const r of rows) {
        process.stdout.write(
          `${r.job}  ${r.periodKey}  ${r.scope}  done ${r.finishedAt?.toISOString() ?? '-'}  by ${r.workflowId ?? '-'}  ${JSON.stringify(r.result)}\n`,
        );
      }
    });
}
