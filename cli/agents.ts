/** `mindloop start|stop|pause|resume`: talk to one agent's loop workflow; `mindloop agents` (cli/descendants.ts): spawn and lineage. */
import { InvalidArgumentError, type Command } from 'commander';
import { agentIdSchema, workflowIds } from '../core/ids.js';
import { onAgentLoop } from '../runtime/operator.js';
import { startAgentLoop } from '../runtime/workflow-starts.js';
import { numberArg } from './args.js';
import { withClient } from './client.js';
import { registerDescendantCommands } from './descendants.js';

function agentId(raw: string): string {
  const r = agentIdSchema.safeParse(raw);
  if (!r.success) throw new Error(`bad agent id "${raw}": ${r.error.issues[0]?.message}`);
  return r.data;
}

const int = numberArg;

export function registerAgentCommands(program: Command): void {
  program
    .command('start')
    .description("start (or find) an agent's loop workflow, agent/<id>")
    .argument('<agent>', 'agent id')
    .option('--name <name>', 'display name')
    .option('--delay-ms <ms>', 'pause between ticks', int('--delay-ms', 0, 3_600_000))
    .option('--max-ticks <n>', 'complete after n ticks', int('--max-ticks', 1, 1_000_000))
    .option(
      '--lifeforce <LF>',
      "a new agent's budget (default unlimited; later: mindloop lifeforce set)",
      int('--lifeforce', 0, 1_000_000_000),
    )
    .option('--regen <LF>', 'LF regenerated per hour, up to the budget', int('--regen', 0, 1_000_000_000))
    .option(
      '--on-exhausted <policy>',
      'pause (wait for regeneration or a grant) or escalate (ask a human for a grant)',
      (v: string) => {
        if (v !== 'pause' && v !== 'escalate') throw new InvalidArgumentError('expected pause or escalate');
        return v;
      },
    )
    .action(
      async (
        raw: string,
        opts: {
          name?: string;
          delayMs?: number;
          maxTicks?: number;
          lifeforce?: number;
          regen?: number;
          onExhausted?: 'pause' | 'escalate';
        },
      ) => {
        const id = agentId(raw);
        const lifeforce =
          opts.lifeforce === undefined && opts.regen === undefined && opts.onExhausted === undefined
            ? undefined
            : {
                ...(opts.lifeforce !== undefined ? { capacity: opts.lifeforce } : {}),
                ...(opts.regen !== undefined ? { regenPerHour: opts.regen } : {}),
                ...(opts.onExhausted ? { onExhausted: opts.onExhausted } : {}),
              };
        await withClient(async (client) => {
          const handle = await startAgentLoop(client, {
            agentId: id,
            name: opts.name,
            delayMs: opts.delayMs,
            maxTicks: opts.maxTicks,
            ...(lifeforce ? { lifeforce } : {}),
          });
          process.stdout.write(
            `agent ${id} running as workflow ${handle.workflowId} (run ${handle.firstExecutionRunId})\n`,
          );
        });
      },
    );

  for (const [name, signal, text] of [
    ['stop', 'stop', 'finish the current tick, then stop the loop'],
    ['pause', 'pause', 'pause the loop after the current tick'],
    ['resume', 'resume', 'resume a paused loop'],
  ] as const) {
    program
      .command(name)
      .description(text)
      .argument('<agent>', 'agent id')
      .action(async (raw: string) => {
        const id = agentId(raw);
        await withClient(async (client) => {
          // No such workflow, or one that has ended: either way there is no loop to tell.
          await onAgentLoop(id, 'nothing was sent', () =>
            client.workflow.getHandle(workflowIds.agent(id)).signal(signal),
          );
          process.stdout.write(`${name}: sent to ${workflowIds.agent(id)}\n`);
        });
      });
  }

  registerDescendantCommands(program);
  program.commands
    .find((c) => c.name() === 'agents')!
    .command('export')
    .description(
      "write an agent's file (what `mindloop apply -f` reads): its identity, prompts, goals, ethics, models, lifeforce, pace, config and peers as they are now",
    )
    .argument('<agent>', 'agent id')
    .option('-o, --output <file>', 'write to this file (JSON when it ends in .json); default: YAML on stdout')
    .action(async (raw: string, opts: { output?: string }) => {
      // Loaded here: `mindloop start` and the rest of this module need no database code.
      const { exportAgentFile } = await import('./apply.js');
      await exportAgentFile(agentId(raw), opts.output);
    });
}
