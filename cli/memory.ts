/**
 * `mindloop memory restore <agent> <kind> <id>`: a person brings back a row the memory manager
 * (or a delete command) archived — the same restore as the agent's `memory.restore`, logged in
 * the agent's process log. Kinds: diary, note (the notebook), reply, concept, link (with its
 * archived concepts), abstract.
 *
 * `mindloop memory search <agent> <query…> [--kinds diary,note] [--archived] [--limit N]`: the
 * agent's `memory.search`, by words and by meaning (the agent's embedder, else the offline one in
 * MINDLOOP_TOOLS_DIR), printed as the agent would see it. A person's search is no use of the rows.
 */
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { agentIdArg, numberArg, oneOfArg } from './args.js';
import { requireAgent, withDb } from './client.js';
import { registerReembedCommand } from './memory-reembed.js';

const names = ['diary', 'note', 'reply', 'concept', 'link', 'abstract'] as const;
const searchable = ['diary', 'note', 'reply', 'concept', 'abstract'] as const;
type Searchable = (typeof searchable)[number];

function kindList(raw: string): Searchable[] {
  const kinds = raw.split(',').map((k) => k.trim());
  const bad = kinds.filter((k) => !(searchable as readonly string[]).includes(k));
  if (bad.length || kinds.length === 0)
    throw new InvalidArgumentError(`kinds must be among ${searchable.join(', ')}, got "${raw}"`);
  return [...new Set(kinds)] as Searchable[];
}

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
  memory
    .command('search')
    .description("search an agent's memory by words and by meaning, as its memory.search does")
    .argument('<agent>', 'agent id', agentIdArg)
    .argument('<query...>', 'what to look for')
    .option('--kinds <list>', `comma-separated, among ${searchable.join(', ')} (default: all)`, kindList)
    .option('--archived', 'archived rows too')
    .option('--limit <n>', 'at most this many (1..50)', numberArg('--limit', 1, 50), 10)
    .action(
      async (agentId: string, query: string[], o: { kinds?: Searchable[]; archived?: boolean; limit: number }) => {
        const [{ searchMemory }, { createAgentEmbedders }, { loadEnvOrExit }] = await Promise.all([
          import('../activities/commands/memory.js'),
          import('../activities/embeddings/agent-embedder.js'),
          import('../env.js'),
        ]);
        const env = loadEnvOrExit();
        const embedders = createAgentEmbedders({ env: process.env, toolsDir: env.MINDLOOP_TOOLS_DIR });
        const r = await withDb(async (db) => {
          await requireAgent(db, agentId);
          return db.transaction((tx) =>
            searchMemory(
              { tx, agentId, mode: 'task', embedders },
              {
                query: query.join(' ').slice(0, 200),
                kinds: o.kinds ?? searchable,
                limit: o.limit,
                archived: o.archived ?? false,
              },
            ),
          );
        });
        process.stdout.write(`${r.message}\n${r.text ?? ''}\n`);
      },
    );
  registerReembedCommand(memory);
}
