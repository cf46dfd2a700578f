/**
 * `mindloop memory restore <agent> <kind> <id>`: a person brings back a row the memory manager
 * (or a delete command) archived — the same restore as the agent's `memory.restore`, logged in
 * the agent's process log. Kinds: diary, note (the notebook), reply, concept, link (with its
 * archived concepts), abstract; the table names (`diary_entries`, …) are taken too.
 */
import type { Command } from 'commander';
import { agentIdArg, numberArg, oneOfArg } from './args.js';
import { withDb } from './client.js';

const names = ['diary', 'note', 'reply', 'concept', 'link', 'abstract'] as const;

export function registerMemoryCommands(program: Command): void {
  const memory = program.command('memory').description("an agent's memory: bring back what it forgot");
  memory
    .command('restore')
    .description('restore an archived row (forgotten by the memory manager, or deleted by the agent)')
    .argument('<agent>', 'agent id', agentIdArg)
    .argument('<kind>', names.join('|'), oneOfArg('kind', names))
    .argument('<id>', 'row id', numberArg('<id>', 1, Number.MAX_SAFE_INTEGER))
    .action(async (agentId: string, kind: (typeof names)[number], id: number) => {
      const { kindTables, restoreArchived } = await import('../db/queries/archive.js');
      const r = await withDb((db) => restoreArchived(db, { agentId, table: kindTables[kind], id }));
      process.stdout.write(
        r.restored
          ? `restored ${kind} #${id}${r.also?.length ? ` with ${r.also.join(', ')}` : ''}\n`
          : `${kind} #${id} of ${agentId}: ${r.why ?? 'not restored'}\n`,
      );
      if (!r.restored) process.exitCode = 1;
    });
}
