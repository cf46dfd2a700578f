/**
 * The bus in a worker process, when NATS_URL is set: a heartbeat per finished tick, the durable
 * consumer that turns agent commands into workflow updates and signals, and the echo agent. A
 * bus that does not answer is one line in the log: the workers run without it (the bus is
 * optional, like Docker).
 */
import { Client, Connection } from '@temporalio/client';
import type { TickObserver } from '../activities/tick/tick-beat.js';
import type { Env } from '../env.js';
import { connectBus, type Bus } from '../runtime/bus.js';
import { heartbeatObserver } from '../runtime/bus-agents.js';
import { startCommandConsumer, temporalCommandTarget, type CommandConsumer } from '../runtime/bus-commands.js';
import { startEchoAgent } from '../runtime/echo-agent.js';
import type { Stack } from '../runtime/stack.js';

export interface WorkerBus {
  bus: Bus;
  /** For `createActivities`: the tick heartbeat, fire-and-forget. */
  onTick: TickObserver;
  /** One line for the start-up summary. */
  summary: string;
  /** Stop taking commands, stop the echo agent, close the bus and its Temporal client. */
  stop(): Promise<void>;
}

/** Start the worker's bus services; undefined when NATS_URL is unset or nothing answers there (logged). */
export async function startWorkerBus(env: Env, temporal: Stack['temporal'], log: (line: string) => void): Promise<WorkerBus | undefined> {
  if (!env.NATS_URL) return undefined;
  let bus: Bus;
  try {
    bus = await connectBus({ url: env.NATS_URL, root: env.MINDLOOP_BUS_ROOT, name: `mindloop-worker-${process.pid}`, reconnectForever: true, log });
  } catch (err) {
    log(`bus: ${(err as Error).message}`);
    return undefined;
  }
  const connection = await Connection.connect(temporal.connection);
  const client = new Client({ connection, namespace: temporal.namespace });
  let consumer: CommandConsumer | undefined;
  try {
    consumer = await startCommandConsumer(bus, temporalCommandTarget(client), { log });
  } catch (err) {
    log(`bus: agent commands are not taken (${(err as Error).message}); the server needs JetStream (nats-server -js)`);
  }
  const echo = startEchoAgent(bus);
  return {
    bus,
    onTick: heartbeatObserver(bus, log),
    summary: `${env.NATS_URL} (root ${bus.root}): heartbeats, echo agent${consumer ? ', agent commands' : '; agent commands OFF (no JetStream)'}`,
    async stop() {
      await consumer?.stop();
      echo.unsubscribe();
      await bus.close();
      await connection.close();
    },
  };
}
