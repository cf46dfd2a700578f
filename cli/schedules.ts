/** `mindloop schedules apply|list|trigger`: the maintenance Temporal Schedules (workers/schedules.ts). */
import { InvalidArgumentError, type Command } from 'commander';
import { applySchedules, describeSchedules, maintenanceSchedules } from '../workers/schedules.js';
import { withClient } from './client.js';

const scheduleId = (raw: string): string => {
  const known = maintenanceSchedules.map((s) => s.id);
  const id = raw.includes('/') ? raw : `maintenance/${raw}`;
  if (!known.includes(id)) throw new InvalidArgumentError(`unknown schedule "${raw}" (known: ${known.join(', ')})`);
  return id;
};

export function registerScheduleCommands(program: Command): void {
  const schedules = program.command('schedules').description('the maintenance schedules: learning decay, abstracts digest, memory pruning, process-log cleanup');
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
      if (rows.length === 0) return void process.stdout.write('no maintenance schedules yet: run `mindloop schedules apply`\n');
      for (const r of rows) {
        process.stdout.write(`${r.id}  ${r.workflowType}  ${r.paused ? 'PAUSED' : 'active'}  next ${r.nextActionTimes[0] ?? '-'}  (${r.note ?? ''})\n`);
      }
    });

  schedules
    .command('trigger')
    .description('run a schedule now (as the UI\'s Trigger button)')
    .argument('<schedule>', 'learning-decay | abstracts-digest | memory-pruning | process-log-cleanup', scheduleId)
    .action(async (id: string) => {
      await withClient((client) => client.schedule.getHandle(id).trigger());
      process.stdout.write(`triggered ${id}\n`);
    });
}
