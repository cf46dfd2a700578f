/**
 * `mindloop forks list|show|approve|reject|demo`: successor forks and their
 * verdicts. `list`/`show` read Postgres; `approve`/`reject` answer the fork workflow's human
 * gate (an Update, so a refusal comes back as an error); `demo` evaluates the demo patch
 * (swap the abstracts strategy) end to end against the running stack and prints the verdict.
 */
import type { Command } from 'commander';
import { and, desc, eq } from 'drizzle-orm';
import { abstractsStrategySchema, defaultAbstractsStrategy, type AbstractsStrategy } from '../core/abstracts.js';
import { forkIdSchema } from '../core/fork.js';
import type { Db } from '../db/client.js';
import { agentConfig, agents, forks, llmRecentResponses, verdicts } from '../db/schema/index.js';
import { answerForkGate } from '../runtime/operator.js';
import { startSuccessorFork } from '../runtime/workflow-starts.js';
import type { ForkState, SuccessorForkResult } from '../workflows/successor-fork.js';
import { withClient } from './client.js';
import { agentIdArg, numberArg, schemaArg } from './args.js';
import { withDb } from './client.js';

const out = (s: string): void => {
  process.stdout.write(`${s}\n`);
};

const forkIdArg = schemaArg('fork id', forkIdSchema);

/** Forks, newest first, with their verdicts. */
async function listForks(db: Db, opts: { agentId?: string; limit: number }) {
  return db
    .select({
      id: forks.id,
      agentId: forks.agentId,
      status: forks.status,
      gate: forks.gate,
      patch: forks.patch,
      patchHash: forks.patchHash,
      createdAt: forks.createdAt,
      verdict: verdicts.verdict,
      confidence: verdicts.confidence,
    })
    .from(forks)
    .leftJoin(verdicts, eq(verdicts.forkId, forks.id))
    .where(opts.agentId ? eq(forks.agentId, opts.agentId) : undefined)
    .orderBy(desc(forks.createdAt))
    .limit(opts.limit);
}

/** One fork in full: record, verdict, artifacts. */
function formatFork(f: typeof forks.$inferSelect, v: typeof verdicts.$inferSelect | undefined): string {
  const lines = [
    `fork ${f.id} of agent ${f.agentId} — ${f.status}${f.gate ? `, gate ${f.gate}${f.gateBy ? ` by ${f.gateBy}` : ''}` : ''}`,
    `  patch        ${JSON.stringify(f.patch).slice(0, 300)}`,
    `  patch_hash   ${f.patchHash}`,
    `  evaluation   ${JSON.stringify(f.evaluation)}`,
    `  budget       ${JSON.stringify(f.budget)}`,
    `  usage        ${JSON.stringify(f.usage)}`,
    `  spawn        ${f.readyAt && f.startedAt ? `${f.readyAt.getTime() - f.startedAt.getTime()} ms (workflow start → copy ready)` : '-'}`,
    `  cleaned      ${f.cleanedAt ? f.cleanedAt.toISOString() : 'no'}`,
  ];
  if (f.error) lines.push(`  error        ${f.error}`);
  if (!v) {
    lines.push('  verdict      (none yet)');
    return lines.join('\n');
  }
  lines.push(
    `  verdict      ${v.verdict} (confidence ${v.confidence})${v.appliedAt ? `, applied ${v.appliedAt.toISOString()} by ${v.appliedBy}` : ', not applied'}`,
  );
  lines.push(`  summary      ${v.evaluationSummary}`);
  for (const c of v.caveats) lines.push(`  caveat       ${c}`);
  for (const a of v.artifacts)
    lines.push(
      `  artifact     ${a.name}  ${a.bytes ?? '?'} B  sha256 ${a.sha256?.slice(0, 16) ?? '?'}…  ${a.uri ?? ''}`,
    );
  return lines.join('\n');
}

async function showFork(db: Db, id: string): Promise<string> {
  const [f] = await db.select().from(forks).where(eq(forks.id, id));
  if (!f) throw new Error(`no fork ${id} (see \`mindloop forks list\`)`);
  const [v] = await db.select().from(verdicts).where(eq(verdicts.forkId, id));
  return formatFork(f, v);
}

/** Replies of a looping agent: a stock opening sentence, the idea later (what the demo compares). */
const demoTopics = [
  'soil moisture',
  'compost heat',
  'bee corridors',
  'rain barrels',
  'shade cloth',
  'seed saving',
  'worm bins',
  'frost dates',
  'drip lines',
  'mulch depth',
];
function demoReply(i: number) {
  const topic = demoTopics[i % demoTopics.length]!;
  const idea = `measure ${topic} weekly with a cheap sensor log`;
  return {
    content: `I keep thinking about the garden plan again today. Nothing urgent came in from the user. One concrete idea: ${idea}. It links to ${demoTopics[(i + 3) % demoTopics.length]} as well.`,
    tags: [topic.split(' ')[0]!, 'garden'],
    ideas: { new: [idea], refined: [], discarded: [] },
  };
}

/** The demo agent `fork-demo`: 30 replies, created once (a real agent's id can be given instead). */
export async function ensureDemoAgent(db: Db, agentId: string): Promise<void> {
  await db.transaction(async (tx) => {
    const created = await tx
      .insert(agents)
      .values({ id: agentId, name: 'Fork demo', lastTick: 30 })
      .onConflictDoNothing()
      .returning({ id: agents.id });
    if (!created.length) return;
    await tx.insert(agentConfig).values({ agentId, key: 'abstracts_strategy', value: defaultAbstractsStrategy });
    await tx
      .insert(llmRecentResponses)
      .values(Array.from({ length: 30 }, (_, i) => ({ agentId, tick: i + 1, ...demoReply(i), novelty: 0.5 })));
  });
}

async function currentStrategy(db: Db, agentId: string): Promise<AbstractsStrategy> {
  const [a] = await db.select({ id: agents.id }).from(agents).where(eq(agents.id, agentId));
  if (!a) throw new Error(`no agent ${agentId}`);
  const [r] = await db
    .select({ value: agentConfig.value })
    .from(agentConfig)
    .where(and(eq(agentConfig.agentId, agentId), eq(agentConfig.key, 'abstracts_strategy')));
  const parsed = abstractsStrategySchema.safeParse(r?.value);
  return parsed.success ? parsed.data : defaultAbstractsStrategy;
}

export function registerForkCommands(program: Command): void {
  const cmd = program.command('forks').description('successor forks: list, show, approve, reject, demo');

  cmd
    .command('list')
    .description('forks, newest first, with their verdicts and gate')
    .option('--agent <id>', 'only this agent’s forks', agentIdArg)
    .option('--limit <n>', 'at most n rows', numberArg('--limit', 1, 1000), 50)
    .option('--json', 'print JSON')
    .action(async (o: { agent?: string; limit: number; json?: boolean }) => {
      const rows = await withDb((db) => listForks(db, { agentId: o.agent, limit: o.limit }));
      if (o.json) return void out(JSON.stringify(rows, null, 2));
      if (!rows.length) return void out('no forks yet (try `mindloop forks demo`)');
      for (const r of rows) {
        out(
          [
            r.id.padEnd(24),
            r.agentId.padEnd(16),
            r.status.padEnd(15),
            (r.verdict ?? '-').padEnd(14),
            r.confidence === null ? '-    ' : r.confidence.toFixed(2).padEnd(5),
            (r.gate ?? '-').padEnd(9),
            String((r.patch as { kind?: string }).kind ?? '?').padEnd(9),
            r.patchHash.slice(0, 12),
          ].join(' '),
        );
      }
    });

  cmd
    .command('show')
    .description('one fork: patch, budget, usage, verdict, caveats, artifacts')
    .argument('<id>', 'fork id', forkIdArg)
    .action(async (id: string) => {
      out(await withDb((db) => showFork(db, id)));
    });

  for (const [name, update, verb] of [
    ['approve', 'approveFork', 'apply the APPROVE verdict’s patch to the parent agent'],
    ['reject', 'rejectFork', 'discard the patch'],
  ] as const) {
    cmd
      .command(name)
      .description(`human gate: ${verb}`)
      .argument('<id>', 'fork id', forkIdArg)
      .option('--by <name>', 'who decides (recorded)', process.env.USER ?? 'human')
      .action(async (id: string, o: { by: string }) => {
        const a = await withClient((client) => answerForkGate(client, id, update, o.by));
        out(`fork ${id}: gate ${a.gate}${a.applied ? `; applied ${a.applied}` : '; nothing applied'}`);
      });
  }

  cmd
    .command('demo')
    .description(
      'evaluate the demo patch (swap the abstracts strategy) end to end on the running stack and print the verdict',
    )
    .option('--agent <id>', 'fork this agent (default: the demo agent fork-demo, created with 30 replies)', agentIdArg)
    .option('--timeout-s <s>', 'give up waiting after this long', numberArg('--timeout-s', 5, 3600), 120)
    .action(async (o: { agent?: string; timeoutS: number }) => {
      const agentId = o.agent ?? 'fork-demo';
      const from = await withDb(async (db) => {
        if (!o.agent) await ensureDemoAgent(db, agentId);
        return currentStrategy(db, agentId);
      });
      const to: AbstractsStrategy = from === 'recency' ? 'keyword_cluster' : 'recency';
      const forkId = `demo-${Date.now().toString(36)}`;
      out(`forking ${agentId}: abstracts strategy ${from} → ${to} (fork/${forkId})`);
      const state = await withClient(async (client) => {
        const handle = await startSuccessorFork(
          client,
          {
            agentId,
            forkId,
            patch: { kind: 'strategy', strategy: to },
            evaluation: { kind: 'abstracts_replay', lastN: 60, window: 10 },
          },
          { from },
        );
        const started = Date.now();
        const deadline = started + o.timeoutS * 1000;
        let lastPhase: string | undefined;
        // Sequential polling, nothing left in flight: a pending long-poll (`result()`) or query
        // retrying after withClient closed the connection crashes the process ("Channel has
        // been shut down").
        for (;;) {
          const desc = await handle.describe();
          if (desc.status.name !== 'RUNNING') {
            const r: SuccessorForkResult = await handle.result().catch((err: unknown) => {
              throw new Error(
                `fork/${forkId} failed: ${(err as { cause?: Error }).cause?.message ?? (err as Error).message}`,
              );
            });
            return { forkId, phase: 'done', verdict: r.verdict } as ForkState;
          }
          const s = await client.connection
            .withDeadline(Date.now() + 2000, () => handle.query<ForkState>(forkStateQueryName))
            .catch(() => undefined);
          // Progress: each phase as the fork enters it, with the time since the start.
          if (s && s.phase !== lastPhase) {
            lastPhase = s.phase;
            process.stderr.write(
              `  ${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s  ${s.phase}${s.rows !== undefined ? ` (copy: ${s.rows} rows${s.spawnMs !== undefined ? ` in ${s.spawnMs} ms` : ''})` : ''}\n`,
            );
          }
          if (s && (s.phase === 'awaiting_approval' || s.phase === 'done')) return s;
          if (Date.now() > deadline)
            throw new Error(
              `fork/${forkId} did not reach a verdict in ${o.timeoutS} s (is the mindloop worker running? \`npm start\`)`,
            );
          await new Promise((r) => setTimeout(r, 250));
        }
      });
      out(await withDb((db) => showFork(db, forkId)));
      if (state.phase === 'awaiting_approval')
        out(
          `\nawaiting the human gate: \`npx mindloop forks approve ${forkId}\` or \`npx mindloop forks reject ${forkId}\``,
        );
    });
}

/** The query's name (a value import of the workflow module would pull workflow code into the CLI). */
const forkStateQueryName = 'forkState';
