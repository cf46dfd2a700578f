/**
 * `mindloop agents spawn|limits|tree`: give an agent a descendant (the spawn workflow, its
 * progress and outcome), set its limits on descendants, and show its lineage.
 */
import { InvalidArgumentError, type Command } from 'commander';
import type { Client } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { workflowIds } from '../core/ids.js';
import {
  childNameSchema,
  spawnBudgetSchema,
  spawnTypes,
  type SpawnResult,
  type SpawnType,
} from '../core/society/spawn.js';
import type { Lineage, LineageEntry, LineageNode } from '../db/queries/spawns.js';
import { startSpawn } from '../runtime/workflow-starts.js';
import type { SpawnState, spawnWorkflow } from '../workflows/spawn.js';
import { agentIdArg, numberArg, oneOfArg, schemaArg } from './args.js';
import { requireAgent, withClient, withDb } from './client.js';

const out = (s: string) => process.stdout.write(`${s}\n`);

function budgetArg(raw: string): number {
  const r = spawnBudgetSchema.safeParse(Number(raw));
  if (raw.trim() === '' || !r.success)
    throw new InvalidArgumentError(`--budget must be a positive number of LF, got "${raw}"`);
  return r.data;
}

function collectGoal(raw: string, previous: string[] = []): string[] {
  const goal = raw.trim();
  if (goal.length === 0 || goal.length > 500)
    throw new InvalidArgumentError(`a goal is 1..500 characters, got ${goal.length}`);
  if (previous.length >= 10) throw new InvalidArgumentError('at most 10 goals');
  return [...previous, goal];
}

/** Start the spawn (or find the one under way under that name), print its phases as they come, and its outcome. */
async function runSpawn(
  client: Client,
  o: { parentId: string; type: SpawnType; name: string; goals: string[]; budget?: number },
  print: (line: string) => void = out,
  pollMs = 250,
): Promise<SpawnResult> {
  let handle;
  try {
    handle = await startSpawn(client, {
      parentId: o.parentId,
      type: o.type,
      name: o.name,
      goals: o.goals,
      ...(o.budget !== undefined ? { budget: o.budget } : {}),
    });
    print(`spawn ${handle.workflowId}: ${o.type} ${o.name} of ${o.parentId}`);
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    handle = client.workflow.getHandle<typeof spawnWorkflow>(workflowIds.spawn(o.parentId, o.name));
    print(`spawn ${handle.workflowId} is already under way: following it`);
  }
  const result = handle.result();
  let done = false;
  void result.finally(() => (done = true)).catch(() => undefined);
  let last = '';
  while (!done) {
    try {
      const s = await handle.query<SpawnState>('spawnState');
      const line = `  ${s.phase}${s.degraded ? ` (waiting for ${s.degraded.step}: ${s.degraded.lastError})` : ''}`;
      if (line !== last && s.phase !== 'done') print(line);
      last = line;
    } catch {
      // Not answered yet (no worker has picked it up): the result still comes.
    }
    await Promise.race([result.catch(() => undefined), new Promise((r) => setTimeout(r, pollMs))]);
  }
  return result;
}

function formatSpawnResult(r: SpawnResult): string {
  if (r.status === 'running') {
    const budget = r.budget === null || r.budget === undefined ? 'unlimited budget' : `${r.budget} LF`;
    return `${r.childId} is born: ${r.type}, generation ${r.generation}, ${r.rows ?? 0} rows inherited in ${r.spawnMs ?? '?'} ms, ${budget}; its loop runs as ${workflowIds.agent(r.childId)}`;
  }
  return `${r.childId} was ${r.status === 'refused' ? 'refused' : 'rolled back'}: ${r.reason ?? 'no reason given'}`;
}

function describe(e: LineageEntry): string {
  const spawn =
    e.spawn && e.spawn.status !== 'running'
      ? `, spawn ${e.spawn.status}${e.spawn.reason ? `: ${e.spawn.reason}` : ''}`
      : '';
  return `${e.id} (${e.kind ?? '?'}, generation ${e.generation ?? '?'}, ${e.status ?? 'never born'}${spawn})`;
}

/** The lineage as a tree: ancestors down to the agent (marked `*`), then everything it spawned. */
function formatLineage(l: Lineage): string {
  const lines: string[] = [];
  l.ancestors.forEach((a, i) => lines.push(`${'   '.repeat(i)}${i ? '└─ ' : ''}${describe(a)}`));
  const depth = l.ancestors.length;
  const pad = '   '.repeat(Math.max(0, depth - 1));
  lines.push(`${pad}${depth ? '└─ ' : ''}* ${describe(l.self)}`);
  const walk = (nodes: LineageNode[], prefix: string) => {
    nodes.forEach((n, i) => {
      const last = i === nodes.length - 1;
      lines.push(`${prefix}${last ? '└─ ' : '├─ '}${describe(n)}`);
      walk(n.children, `${prefix}${last ? '   ' : '│  '}`);
    });
  };
  walk(l.descendants, `${pad}${depth ? '   ' : ''}  `);
  if (!l.descendants.length) lines.push(`${pad}${depth ? '   ' : ''}  (no descendants)`);
  return lines.join('\n');
}

/** `mindloop agents …`. */
export function registerDescendantCommands(program: Command): void {
  const cmd = program.command('agents').description('descendants: spawn a child of an agent, its limits, its lineage');

  cmd
    .command('spawn')
    .description(
      'give an agent a descendant with its own loop: clone (all its tables, its learnings included), trained (diary, concept graph, known peers) or newborn (nothing); every kind inherits its ethics policies',
    )
    .argument('<parent>', 'the parent agent id', agentIdArg)
    .requiredOption('--type <type>', `${spawnTypes.join(' | ')}`, oneOfArg('--type', spawnTypes))
    .requiredOption('--name <name>', "the child's name, which becomes its id", schemaArg('--name', childNameSchema))
    .option('--goal <text>', 'a first goal of the child (repeatable, at most 10)', collectGoal)
    .option(
      '--budget <LF>',
      "lifeforce carved from the parent's budget (default: unlimited from an unlimited parent, else a quarter of what it has)",
      budgetArg,
    )
    .option('--json', 'print the outcome as JSON')
    .action(
      async (
        parentId: string,
        o: { type: SpawnType; name: string; goal?: string[]; budget?: number; json?: boolean },
      ) => {
        const r = await withClient((client) =>
          runSpawn(
            client,
            {
              parentId,
              type: o.type,
              name: o.name,
              goals: o.goal ?? [],
              ...(o.budget !== undefined ? { budget: o.budget } : {}),
            },
            o.json ? () => undefined : out,
          ),
        );
        out(o.json ? JSON.stringify(r, null, 2) : formatSpawnResult(r));
        if (r.status !== 'running') process.exitCode = 1;
      },
    );

  cmd
    .command('limits')
    .description(
      "an agent's limits on descendants (config max_descendants, max_per_generation: a person's to set, not the agent's) and what it has against them",
    )
    .argument('<agent>', 'agent id', agentIdArg)
    .option(
      '--max-descendants <n>',
      'descendants alive at once, all generations',
      numberArg('--max-descendants', 0, 10_000),
    )
    .option('--max-per-generation <n>', 'descendants of one generation', numberArg('--max-per-generation', 0, 10_000))
    .action(async (agentId: string, o: { maxDescendants?: number; maxPerGeneration?: number }) => {
      const r = await withDb(async (db) => {
        await requireAgent(db, agentId);
        const q = await import('../db/queries/spawns.js');
        await q.setSpawnLimits(db, agentId, {
          ...(o.maxDescendants !== undefined ? { maxDescendants: o.maxDescendants } : {}),
          ...(o.maxPerGeneration !== undefined ? { maxPerGeneration: o.maxPerGeneration } : {}),
        });
        return q.spawnLimitsOf(db, agentId);
      });
      const gens = Object.entries(r.byGeneration).map(([g, n]) => `generation ${g}: ${n}`);
      out(
        `${agentId}: ${r.descendants} of at most ${r.limits.maxDescendants} descendants; at most ${r.limits.maxPerGeneration} per generation${gens.length ? ` (${gens.join(', ')})` : ''}`,
      );
    });

  cmd
    .command('tree')
    .description("an agent's lineage: its ancestors and every descendant, with kind, generation and status")
    .argument('<agent>', 'agent id', agentIdArg)
    .option('--json', 'print JSON')
    .action(async (agentId: string, o: { json?: boolean }) => {
      const l = await withDb(async (db) => (await import('../db/queries/spawns.js')).lineage(db, agentId));
      if (!l) throw new Error(`no agent '${agentId}'`);
      out(o.json ? JSON.stringify(l, null, 2) : formatLineage(l));
    });
}
