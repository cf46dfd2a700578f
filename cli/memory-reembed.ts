/**
 * `mindloop memory reembed <agent> [--kind diary,note,…]`: rebuilds the agent's vectors (search
 * by meaning) with its current embedder, e.g. after the embedder changed, or changed size. A
 * stored vector of another size is reported with both sizes and replaced. Refuses when the agent
 * has no embedder (semantic_memory off, or none can be had). Prints its answer; progress goes to
 * stderr while it works.
 */
import { InvalidArgumentError, type Command } from 'commander';
import { agentIdArg } from './args.js';
import { withDb } from './client.js';

const kinds = ['diary', 'note', 'reply', 'concept', 'abstract'] as const;
type Kind = (typeof kinds)[number];

function kindList(raw: string): Kind[] {
  const list = raw.split(',').map((k) => k.trim());
  const bad = list.filter((k) => !(kinds as readonly string[]).includes(k));
  if (bad.length || list.length === 0)
    throw new InvalidArgumentError(`kinds must be among ${kinds.join(', ')}, got "${raw}"`);
  return [...new Set(list)] as Kind[];
}

/** Adds `reembed` to the `memory` command. */
export function registerReembedCommand(memory: Command): void {
  memory
    .command('reembed')
    .description("rebuild an agent's vectors (search by meaning) with its current embedder")
    .argument('<agent>', 'agent id', agentIdArg)
    .option('--kind <list>', `comma-separated, among ${kinds.join(', ')} (default: all)`, kindList)
    .action(async (agentId: string, o: { kind?: Kind[] }) => {
      const [{ createAgentEmbedders, reembed }, { loadEnvOrExit }] = await Promise.all([
        import('../activities/embeddings/index.js'),
        import('../env.js'),
      ]);
      const env = loadEnvOrExit();
      const embedders = createAgentEmbedders({ env: process.env, toolsDir: env.MINDLOOP_TOOLS_DIR });
      await withDb(async (db) => {
        const choice = await embedders.forAgent(db, agentId);
        if (!choice.ok) {
          process.stderr.write(`reembed ${agentId}: refused: no embedder (${choice.reason})\n`);
          process.exitCode = 1;
          return;
        }
        const t0 = performance.now();
        let shown = t0;
        const r = await reembed(db, agentId, choice.embedder, o.kind ?? kinds, (n) => {
          const now = performance.now();
          if (now - shown < 2_000) return;
          shown = now;
          process.stderr.write(`reembed ${agentId}: ${n} rows embedded…\n`);
        });
        for (const d of r.dropped)
          process.stdout.write(
            d.model === r.model
              ? `${d.count} stored vectors of ${d.dimensions} dimensions, the embedder gives ${r.dimensions}: replaced\n`
              : `${d.count} stored vectors of model ${d.model} (${d.dimensions} dimensions): replaced\n`,
          );
        const s = ((performance.now() - t0) / 1000).toFixed(1);
        process.stdout.write(
          `reembed ${agentId}: ${r.indexed} vectors with ${choice.name} (${r.model}, ${r.dimensions} dimensions) in ${s} s\n`,
        );
      });
    });
}
