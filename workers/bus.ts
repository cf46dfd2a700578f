/**
 * The bus in a worker process: the agents' heartbeats and events, the durable consumer that turns
 * agent commands into workflow updates and signals, and the echo agent. Which bus: NATS_URL, else
 * the one answering on 127.0.0.1:4222, else (npm start) a nats-server started as a child
 * (runtime/nats-server.ts). No bus is one line in the log: the workers run without it (the bus is
 * optional, like Docker).
 */
import { Client, Connection } from '@temporalio/client';
import type { AgentEventSink } from '../activities/agent-events.js';
import type { Env } from '../env.js';
import { connectBus, type Bus } from '../runtime/bus.js';
import { resolveDeployment, type Deployment } from '../runtime/deployment.js';
import { chooseBus, type LocalNats } from '../runtime/nats-server.js';
import { agentEventSink } from '../runtime/bus-agents.js';
import { startCommandConsumer, temporalCommandTarget, type CommandConsumer } from '../runtime/bus-commands.js';
import { startEchoAgent } from '../runtime/echo-agent.js';
import type { Stack } from '../runtime/stack.js';

interface WorkerBus {
  bus: Bus;
  /** For `createActivities`: heartbeats and agent events (reply, verdict, escalation, learning), fire-and-forget. */
  events: AgentEventSink;
  /** One line for the start-up summary: where the bus is, and what runs on it. */
  summary: string;
  /** Stop taking commands, stop the echo agent, close the bus and its Temporal client (once; again is a no-op). */
  stop(): Promise<void>;
}

interface WorkerBusOptions {
  /** May start an embedded nats-server when no bus answers (npm start); default false. */
  embedded?: boolean;
  /** The local port looked at (tests); default 4222. */
  localPort?: number;
}

/**
 * Start the worker's bus services; `off` says why there are none (NATS_URL=off, nothing
 * answering, no nats-server to start), and how to get a bus.
 */
export async function startWorkerBus(
  env: Env,
  temporal: Stack['temporal'],
  log: (line: string) => void,
  o: WorkerBusOptions = {},
): Promise<WorkerBus | { off: string }> {
  const choice = await chooseBus({
    natsUrl: env.NATS_URL,
    embedded: o.embedded ?? false,
    dataDir: env.MINDLOOP_DATA_DIR,
    ...(o.localPort ? { port: o.localPort } : {}),
  });
  if ('off' in choice) return choice;
  const server: LocalNats | undefined = choice.server;
  const where =
    choice.how === 'env'
      ? `${choice.url} (NATS_URL)`
      : choice.how === 'local'
        ? `${choice.url} (found running)`
        : `${choice.url} (nats-server started here, store ${server?.storeDir})`;
  let connection: Connection | undefined;
  const client = async () =>
    new Client({
      connection: (connection ??= await Connection.connect(temporal.connection)),
      namespace: temporal.namespace,
    });
  let bus: Bus;
  // Set by connectBus before it returns (it asks for the deployment once NATS answers).
  let deployment!: Deployment;
  try {
    // The deployment (from Temporal) is asked once NATS answers: no bus is said as no bus.
    bus = await connectBus({
      url: choice.url,
      root: env.MINDLOOP_BUS_ROOT,
      deployment: async () => (deployment = await resolveDeployment(env, client)).id,
      name: `mindloop-worker-${process.pid}`,
      reconnectForever: true,
      log,
    });
  } catch (err) {
    await Promise.allSettled([server?.stop(), (connection as Connection | undefined)?.close()]);
    return { off: `off: ${(err as Error).message}` };
  }
  let consumer: CommandConsumer | undefined;
  try {
    consumer = await startCommandConsumer(bus, temporalCommandTarget(await client()), { log, peers: deployment.peers });
  } catch (err) {
    log(`bus: agent commands are not taken (${(err as Error).message}); the server needs JetStream (nats-server -js)`);
  }
  const echo = startEchoAgent(bus);
  let stopped: Promise<void> | undefined;
  return {
    bus,
    events: agentEventSink(bus, log),
    summary: `${where}, deployment ${deployment.id} (${deployment.from === 'temporal' ? `Temporal namespace ${temporal.namespace}` : 'MINDLOOP_DEPLOYMENT'}${deployment.peers.length ? `; takes commands from ${deployment.peers.join(', ')} too` : ''}), subjects ${bus.root}.*: heartbeats and agent events, echo agent${consumer ? ', agent commands' : '; agent commands OFF (no JetStream)'}`,
    stop() {
      // Once, however often it is called.
      stopped ??= (async () => {
        await consumer?.stop();
        echo.unsubscribe();
        await bus.close();
        await connection?.close();
        await server?.stop();
      })();
      return stopped;
    },
  };
}
