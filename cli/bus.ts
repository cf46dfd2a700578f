/**
 * `mindloop bus …`: the message bus by hand. `info` says which deployment this is and where its
 * traffic lives, `ping` does the echo round trip, `echo-agent` runs the echo agent, `send` puts a
 * durable command to an agent on the bus, `watch` prints what flows (and what is refused),
 * `setup` creates the command stream. The bus is NATS_URL, or nats://127.0.0.1:4222; every
 * subject lives under `<MINDLOOP_BUS_ROOT>.<deployment>` (runtime/deployment.ts).
 */
import type { Client } from '@temporalio/client';
import type { Command } from 'commander';
import { agentCommands, commandStreamName, deploymentIdSchema, type AgentCommand } from '../core/bus/subjects.js';
import { loadEnvOrExit } from '../env.js';
import { connectBus, defaultNatsUrl, type Bus } from '../runtime/bus.js';
import { commandConsumerName, ensureCommandStream, sendCommand } from '../runtime/bus-commands.js';
import { resolveDeployment, type Deployment } from '../runtime/deployment.js';
import { whyNotRunning } from '../runtime/operator.js';
import { startEchoAgent } from '../runtime/echo-agent.js';
import { agentIdArg, numberArg, oneOfArg, schemaArg } from './args.js';

/** This deployment's bus, and the Temporal it was told by (null when MINDLOOP_DEPLOYMENT named it and none was needed). */
interface DeploymentBus {
  bus: Bus;
  deployment: Deployment;
  /** This deployment's Temporal, connected on first use. */
  temporal(): Promise<Client>;
  close(): Promise<void>;
}

async function openBus(): Promise<DeploymentBus> {
  const env = loadEnvOrExit();
  let client: Promise<Client> | undefined;
  const temporal = () => (client ??= import('./client.js').then((m) => m.temporalClient()));
  const closeTemporal = async () => void (await client?.then((c) => c.connection.close()).catch(() => undefined));
  try {
    const deployment = await resolveDeployment(env, temporal);
    const bus = await connectBus({
      url: env.NATS_URL ?? defaultNatsUrl,
      root: env.MINDLOOP_BUS_ROOT,
      deployment: deployment.id,
      name: 'mindloop-cli',
      log: (l) => process.stderr.write(`${l}\n`),
    });
    return {
      bus,
      deployment,
      temporal,
      close: async () => void (await Promise.allSettled([bus.close(), closeTemporal()])),
    };
  } catch (err) {
    await closeTemporal();
    throw err;
  }
}

async function withBus<T>(fn: (b: DeploymentBus) => Promise<T>): Promise<T> {
  const b = await openBus();
  try {
    return await fn(b);
  } finally {
    await b.close();
  }
}

/** Run until Ctrl-C, then close. */
async function untilStopped(close: () => Promise<void>, what: string): Promise<void> {
  process.stderr.write(`${what}; Ctrl-C stops\n`);
  await new Promise<void>((resolve) => {
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => resolve());
  });
  await close();
}

export function registerBusCommands(program: Command): void {
  const bus = program
    .command('bus')
    .description('the message bus (NATS): echo round trip, commands to agents, watching what flows');
  bus.showHelpAfterError(true);

  bus
    .command('ping')
    .description(
      'echo round trip: send an EchoRequest, print the EchoResponse (needs an echo agent: a worker with NATS_URL, or `mindloop bus echo-agent`)',
    )
    .argument('[text...]', 'what to send', ['hello'])
    .option('--timeout <ms>', 'how long to wait for the answer', numberArg('--timeout', 100, 600_000), 5000)
    .action(async (words: string[], o: { timeout: number }) => {
      const answer = await withBus(({ bus: b }) =>
        b.request(
          b.subjects.devRequest('echo'),
          'EchoRequest',
          { ping: words.join(' ') },
          { expect: 'EchoResponse', timeoutMs: o.timeout },
        ),
      );
      process.stdout.write(`${JSON.stringify({ header: answer.header, payload: answer.payload }, null, 2)}\n`);
    });

  bus
    .command('echo-agent')
    .description('run the echo agent (dev.request.echo → dev.response.echo and the reply inbox) until Ctrl-C')
    .action(async () => {
      const { bus: b, close } = await openBus();
      startEchoAgent(b);
      await untilStopped(close, `echo agent answering on ${b.subjects.devRequest('echo')}`);
    });

  bus
    .command('send')
    .description(
      'send a durable command to an agent over the bus (the worker turns it into the workflow update or signal)',
    )
    .argument('<agent>', 'agent id', agentIdArg)
    .argument('<command>', agentCommands.join(' | '), oneOfArg('command', agentCommands))
    .argument('[text...]', 'the note (for note), or a reason (pause, resume)')
    .option('-p, --priority <n>', 'note priority 0..10', numberArg('--priority', 0, 10))
    .option('--id <message-id>', 'the message id (default a new UUID); sending the same id again changes nothing')
    .option(
      '--deployment <id>',
      "another deployment's agent (it takes the command only if its MINDLOOP_BUS_PEERS names this deployment)",
      schemaArg('deployment', deploymentIdSchema),
    )
    .action(
      async (
        agent: string,
        command: AgentCommand,
        words: string[],
        o: { priority?: number; id?: string; deployment?: string },
      ) => {
        const text = words.join(' ');
        const r = await withBus(async (d) => {
          const foreign = o.deployment !== undefined && o.deployment !== d.deployment.id;
          const b = foreign ? d.bus.toDeployment(o.deployment!) : d.bus;
          // This deployment's agents are checked in its Temporal before anything is stored; another
          // deployment's Temporal is not ours to ask, and its consumer decides.
          const opts = {
            ...(o.id ? { messageId: o.id } : {}),
            ...(foreign ? {} : { check: async (id: string) => whyNotRunning(await d.temporal(), id) }),
          };
          if (!foreign) await ensureCommandStream(b);
          const sent =
            command === 'note'
              ? await sendCommand(
                  b,
                  agent,
                  'note',
                  { text, ...(o.priority !== undefined ? { priority: o.priority } : {}) },
                  opts,
                )
              : await sendCommand(b, agent, command, text ? { reason: text } : {}, opts);
          return { ...sent, foreign, deployment: b.deployment };
        });
        const stored = r.duplicate ? ' (already sent before: not stored again)' : `, stored (#${r.seq})`;
        const where = r.foreign
          ? ` in deployment ${r.deployment}'s stream; that deployment delivers it only if its MINDLOOP_BUS_PEERS names this one and its agent ${agent} runs`
          : '';
        process.stdout.write(`${command} for ${agent}: message ${r.messageId}${stored}${where}\n`);
      },
    );

  bus
    .command('info')
    .description(
      'which deployment this is on the bus, where its subjects and command stream are, and whose commands it takes',
    )
    .action(async () => {
      const { deployment: d, bus: b } = await withBus(async (x) => x);
      const lines = [
        `deployment  ${d.id} (${d.from === 'temporal' ? 'from the Temporal namespace' : 'MINDLOOP_DEPLOYMENT'})`,
        `subjects    ${b.root}.>`,
        `commands    stream ${commandStreamName(b.root)}, durable consumer ${commandConsumerName}`,
        `peers       ${d.peers.length ? d.peers.join(', ') : 'none: commands from other deployments are refused (MINDLOOP_BUS_PEERS)'}`,
      ];
      process.stdout.write(`${lines.join('\n')}\n`);
    });

  bus
    .command('watch')
    .description('print every valid message under the root (or SUBJECT), and every refused one with its reason')
    .argument(
      '[subject]',
      'a subject or wildcard, e.g. mindloop.<deployment>.low.agent.* (`mindloop bus info` prints the prefix)',
    )
    .action(async (subject: string | undefined) => {
      const { bus: b, close } = await openBus();
      const on = subject ?? `${b.root}.>`;
      b.subscribe(
        on,
        (m) => void process.stdout.write(`${m.subject} ${JSON.stringify({ header: m.header, payload: m.payload })}\n`),
      );
      await untilStopped(close, `watching ${on}`);
    });

  bus
    .command('setup')
    .description('create the command stream and its durable consumer (a worker with NATS_URL does it too)')
    .action(async () => {
      const r = await withBus(({ bus: b }) => ensureCommandStream(b));
      process.stdout.write(`stream ${r.stream}, durable consumer ${r.consumer}: ready\n`);
    });
}
