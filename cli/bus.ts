/**
 * `mindloop bus …`: the message bus by hand. `ping` does the echo round trip, `echo-agent` runs
 * the echo agent, `send` puts a durable command to an agent on the bus, `watch` prints what
 * flows (and what is refused), `setup` creates the command stream. The bus is NATS_URL, or
 * nats://127.0.0.1:4222; the root is MINDLOOP_BUS_ROOT.
 */
import type { Command } from 'commander';
import { agentCommands, type AgentCommand } from '../core/bus/subjects.js';
import { loadEnvOrExit } from '../env.js';
import { connectBus, defaultNatsUrl, type Bus } from '../runtime/bus.js';
import { ensureCommandStream, sendCommand } from '../runtime/bus-commands.js';
import { startEchoAgent } from '../runtime/echo-agent.js';
import { agentIdArg, numberArg, oneOfArg } from './args.js';

async function openBus(): Promise<Bus> {
  const env = loadEnvOrExit();
  return connectBus({ url: env.NATS_URL ?? defaultNatsUrl, root: env.MINDLOOP_BUS_ROOT, name: 'mindloop-cli', log: (l) => process.stderr.write(`${l}\n`) });
}

async function withBus<T>(fn: (bus: Bus) => Promise<T>): Promise<T> {
  const bus = await openBus();
  try {
    return await fn(bus);
  } finally {
    await bus.close();
  }
}

/** Run until Ctrl-C, then close the bus. */
async function untilStopped(bus: Bus, what: string): Promise<void> {
  process.stderr.write(`${what}; Ctrl-C stops\n`);
  await new Promise<void>((resolve) => {
    for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => resolve());
  });
  await bus.close();
}

export function registerBusCommands(program: Command): void {
  const bus = program.command('bus').description('the message bus (NATS): echo round trip, commands to agents, watching what flows');
  bus.showHelpAfterError(true);

  bus
    .command('ping')
    .description('echo round trip: send an EchoRequest, print the EchoResponse (needs an echo agent: a worker with NATS_URL, or `mindloop bus echo-agent`)')
    .argument('[text...]', 'what to send', ['hello'])
    .option('--timeout <ms>', 'how long to wait for the answer', numberArg('--timeout', 100, 600_000), 5000)
    .action(async (words: string[], o: { timeout: number }) => {
      const answer = await withBus((b) => b.request(b.subjects.devRequest('echo'), 'EchoRequest', { ping: words.join(' ') }, { expect: 'EchoResponse', timeoutMs: o.timeout }));
      process.stdout.write(`${JSON.stringify({ header: answer.header, payload: answer.payload }, null, 2)}\n`);
    });

  bus
    .command('echo-agent')
    .description('run the echo agent (dev.request.echo → dev.response.echo and the reply inbox) until Ctrl-C')
    .action(async () => {
      const b = await openBus();
      startEchoAgent(b);
      await untilStopped(b, `echo agent answering on ${b.subjects.devRequest('echo')}`);
    });

  bus
    .command('send')
    .description('send a durable command to an agent over the bus (the worker turns it into the workflow update or signal)')
    .argument('<agent>', 'agent id', agentIdArg)
    .argument('<command>', agentCommands.join(' | '), oneOfArg('command', agentCommands))
    .argument('[text...]', 'the note (for note), or a reason (pause, resume)')
    .option('-p, --priority <n>', 'note priority 0..10', numberArg('--priority', 0, 10))
    .option('--id <message-id>', 'the message id (default a new UUID); sending the same id again changes nothing')
    .action(async (agent: string, command: AgentCommand, words: string[], o: { priority?: number; id?: string }) => {
      const text = words.join(' ');
      const r = await withBus(async (b) => {
        await ensureCommandStream(b);
        const opts = o.id ? { messageId: o.id } : {};
        if (command === 'note') return sendCommand(b, agent, 'note', { text, ...(o.priority !== undefined ? { priority: o.priority } : {}) }, opts);
        return sendCommand(b, agent, command, text ? { reason: text } : {}, opts);
      });
      process.stdout.write(`${command} for ${agent}: message ${r.messageId}${r.duplicate ? ' (already sent before: not stored again)' : `, stored (#${r.seq})`}\n`);
    });

  bus
    .command('watch')
    .description('print every valid message under the root (or SUBJECT), and every refused one with its reason')
    .argument('[subject]', 'a subject or wildcard, e.g. mindloop.low.agent.*')
    .action(async (subject: string | undefined) => {
      const b = await openBus();
      const on = subject ?? `${b.root}.>`;
      b.subscribe(on, (m) => void process.stdout.write(`${m.subject} ${JSON.stringify({ header: m.header, payload: m.payload })}\n`));
      await untilStopped(b, `watching ${on}`);
    });

  bus
    .command('setup')
    .description('create the command stream and its durable consumer (a worker with NATS_URL does it too)')
    .action(async () => {
      const r = await withBus((b) => ensureCommandStream(b));
      process.stdout.write(`stream ${r.stream}, durable consumer ${r.consumer}: ready\n`);
    });
}
