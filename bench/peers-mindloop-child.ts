/**
 * Mindloop's worker process in the peers bench's crash test: what bench/peers/<peer>.ts is for a
 * peer, but it runs the product's own code, so it lives here rather than in bench/peers/ (a
 * package of its own that does not see the product). It is built as workers/queues.ts builds the
 * `mindloop` worker — the workflows from the prebuilt bundle, createActivities' activities, the
 * stack attached as workers/main.ts attaches it (DATABASE_URL, TEMPORAL_ADDRESS) — on a task queue
 * of its own, with one addition: the product's `afterWrite` command hook writes `step <tick>`
 * once a tick's diary.add has committed, the line the harness kills on.
 *
 *   tsx bench/peers-mindloop-child.ts mindloop crash <agent> <ticks> [hold tick]
 *   tsx bench/peers-mindloop-child.ts mindloop resume <agent> <ticks>
 *
 * crash: start the agent's loop (`agent/<agent>`, at most <ticks> ticks, no pause between them,
 * reflexes off: the tick the bench's throughput figures measure) and wait for it. With a
 * hold tick, the hook of that tick reports its step and then never returns: the kill lands after
 * the command's transaction committed and before the activity's completion reaches Temporal,
 * every time. resume: only a new worker on the queue (Temporal resumes the loop by itself), and
 * wait for the loop's result. Each prints `done` when the loop completed.
 */
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createActivities } from '../activities/index.js';
import { sweepLifeforceEvery } from '../activities/lifeforce.js';
import { workflowIds } from '../core/ids.js';
import { loadEnvOrExit, secretSource } from '../env.js';
import { startStack } from '../runtime/stack.js';
import type { agentLoopWorkflow } from '../workflows/agent-loop/index.js';
import { agentLoopText } from '../workflows/lib/ui-text.js';
import { workflowFailover } from '../workflows/lib/activity-options.js';
import { failoverWorkerOptions } from '../workers/failover.js';
import { installRuntime } from '../workers/run.js';

/** The queue of the crash test's agents, apart from anything else on the bench's Temporal. */
const crashTaskQueue = 'peers-mindloop';

const [mode, agentId, ticksArg, holdArg] = process.argv.slice(3);
if (
  (mode !== 'crash' && mode !== 'resume') ||
  !agentId ||
  !/^\d+$/.test(ticksArg ?? '') ||
  (holdArg !== undefined && !/^\d+$/.test(holdArg))
) {
  process.stderr.write(
    'usage: tsx bench/peers-mindloop-child.ts mindloop <crash|resume> <agent> <ticks> [hold tick]\n',
  );
  process.exit(2);
}
const holdAt = holdArg === undefined ? undefined : Number(holdArg);

const env = loadEnvOrExit();
if (!env.MINDLOOP_WORKFLOW_BUNDLE) {
  process.stderr.write('MINDLOOP_WORKFLOW_BUNDLE: the harness builds the bundle once for every worker process\n');
  process.exit(2);
}
installRuntime(env.LOG_LEVEL);
const stack = await startStack({ env, embedded: false, log: () => {} });
const connection = await NativeConnection.connect(stack.temporal.connection);
sweepLifeforceEvery(stack.db.db);
const worker = await Worker.create({
  connection,
  namespace: stack.temporal.namespace,
  taskQueue: crashTaskQueue,
  ...failoverWorkerOptions,
  workflowBundle: { codePath: env.MINDLOOP_WORKFLOW_BUNDLE },
  activities: createActivities({
    db: stack.db.db,
    llm: {
      env: secretSource(),
      toolsDir: env.MINDLOOP_TOOLS_DIR,
      timeoutMs: env.MINDLOOP_LLM_TIMEOUT_MS,
      maxReplyBytes: env.MINDLOOP_LLM_MAX_REPLY_BYTES,
      lifeforce: { enabled: true, prices: env.MINDLOOP_LIFEFORCE_PRICES },
    },
    dataDir: env.MINDLOOP_DATA_DIR,
    commandHooks: {
      // The scripted endpoint names each tick's diary.add `tick<N>` (bench/peers-mindloop.ts).
      async afterWrite(cmd) {
        const tick = /^tick(\d+)$/.exec(cmd.cmdId)?.[1];
        if (tick === undefined) return;
        process.stdout.write(`step ${tick}\n`);
        if (Number(tick) === holdAt) await new Promise<never>(() => {});
      },
    },
  }),
});
const running = worker.run();
// The harness times the new worker's start from this line (bench/peers.ts).
process.stdout.write('ready\n');
const client = new Client({
  connection: await Connection.connect(stack.temporal.connection),
  namespace: stack.temporal.namespace,
});
const start = { agentId, maxTicks: Number(ticksArg), delayMs: 0 };
// As runtime/workflow-starts.ts startAgentLoop starts a loop, with the reflexes off.
const handle =
  mode === 'crash'
    ? await client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
        workflowId: workflowIds.agent(agentId),
        taskQueue: crashTaskQueue,
        args: [{ agentId, maxTicks: start.maxTicks, settings: { delayMs: start.delayMs }, reflexes: false }],
        workflowIdConflictPolicy: 'USE_EXISTING',
        ...workflowFailover,
        ...agentLoopText(start),
      })
    : client.workflow.getHandle<typeof agentLoopWorkflow>(workflowIds.agent(agentId));
const result = await handle.result();
process.stdout.write(`${JSON.stringify(result)}\ndone\n`);
worker.shutdown();
await running;
await client.connection.close();
await connection.close();
await stack.stop();
process.exit(0);
