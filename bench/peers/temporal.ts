/**
 * A bare Temporal workflow on the bench's dev server (TEMPORAL_ADDRESS): the loop is the workflow,
 * each step an activity. A crashed loop resumes when a new worker process polls the queue.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Runtime, DefaultLogger, Worker, bundleWorkflowCode } from '@temporalio/worker';
import { doStep, main } from './common.js';

const address = process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233';
const namespace = process.env.TEMPORAL_NAMESPACE ?? 'default';
const bundlePath = process.env.PEER_BUNDLE ?? '/tmp/mindloop-peers-bundle.js';
const taskQueue = 'peers-temporal';
Runtime.install({ logger: new DefaultLogger('WARN') });

let worker: Worker;
let running: Promise<void>;
let client: Client;
let nativeConnection: NativeConnection;

await main({
  async start() {
    if (!existsSync(bundlePath)) {
      const { code } = await bundleWorkflowCode({ workflowsPath: new URL('./temporal-workflow.ts', import.meta.url).pathname, logger: new DefaultLogger('WARN') });
      writeFileSync(bundlePath, code);
    }
    nativeConnection = await NativeConnection.connect({ address });
    worker = await Worker.create({
      connection: nativeConnection,
      namespace,
      taskQueue,
      workflowBundle: { codePath: bundlePath },
      activities: { step: doStep },
      // A killed worker's sticky queue is given up on quickly, so a new worker takes over.
      stickyQueueScheduleToStartTimeout: '1s',
    });
    running = worker.run();
    client = new Client({ connection: await Connection.connect({ address }), namespace });
  },
  async run(loop, steps, resume) {
    const handle = resume
      ? client.workflow.getHandle(loop)
      : await client.workflow.start('peerLoopWorkflow', { taskQueue, workflowId: loop, args: [loop, steps], workflowTaskTimeout: '2s' });
    await handle.result();
  },
  async stop() {
    worker.shutdown();
    await running;
    await client.connection.close();
    await nativeConnection.close();
  },
});
