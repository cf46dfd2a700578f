/**
 * `mindloop replay <workflow-id>` as a user runs it: the real CLI, as a process, against a live
 * Temporal dev server where an agent (scripted model, real Postgres) has ticked a few times and
 * is still running. The fetched history is replayed as it comes from the server; a workflow id
 * that does not exist is a clear error and a non-zero exit. The command prints its answer, and the
 * SDK's log only with --verbose.
 */
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { agents, llmRegistry } from '../../db/schema/index.js';
import { startStack, type Stack } from '../../runtime/stack.js';
import { bundleWorkflows } from '../../workers/queues.js';
import { freePort, freshPostgresDatabase, repoToolsDir, tempDir, testEnv } from '../helpers/env.js';
import { startLoop, untilStatus, withWorker } from '../helpers/harness.js';
import { thinkScript } from '../helpers/scripted.js';
import { repoRoot, run } from '../helpers/spawn.js';

const cli = `${repoRoot}/bin/mindloop.mjs`;
const data = tempDir('replay-cli');
let stack: Stack;
let client: Client;
let dropDb: () => Promise<void>;

beforeAll(async () => {
  const fresh = await freshPostgresDatabase('mindloop_replay_cli');
  dropDb = fresh.drop;
  stack = await startStack({
    env: testEnv({
      MINDLOOP_DATA_DIR: data.path,
      TEMPORAL_PORT: await freePort(),
      DATABASE_URL: fresh.url,
      LOG_LEVEL: 'WARN',
    }),
    ui: false,
  });
  await stack.db.db.insert(agents).values({ id: 'echo', name: 'Echo' });
  await stack.db.db.insert(llmRegistry).values({
    agentId: 'echo',
    name: 'script',
    provider: 'scripted',
    model: 'scripted-echo',
    role: 'agent',
    priority: 1,
  });
  client = new Client({ connection: await Connection.connect(stack.temporal.connection) });
}, 120_000);
afterAll(async () => {
  await client?.connection.close();
  await stack?.stop();
  await dropDb?.();
  data.remove();
});

const replay = (...args: string[]) =>
  run(
    process.execPath,
    [cli, 'replay', ...args],
    { TEMPORAL_ADDRESS: stack.temporal.address, TEMPORAL_NAMESPACE: 'default' },
    120_000,
  );

describe('mindloop replay <workflow-id>', () => {
  it('replays the history of a running agent fetched from the server', async () => {
    const spec = {
      taskQueue: 'replay-cli',
      workflowBundle: await bundleWorkflows(),
      activities: createActivities({
        db: stack.db.db,
        llm: {
          env: {},
          toolsDir: repoToolsDir,
          scriptedReply: thinkScript((_m, i) => `Tick ${i + 1}: thinking quietly.`),
        },
      }),
    };
    await withWorker(stack.temporal.connection, spec, async (taskQueue) => {
      const h = await startLoop(client, taskQueue, {
        agentId: 'echo',
        settings: { idle: { on: true, wakeOn: ['note', 'timeout'], timeoutMs: 1000 } },
      });
      await untilStatus(h, (s) => s.tick >= 3, 'the third tick', 60_000, 200);

      const r = await replay('agent/echo');
      expect(r.code, r.stderr).toBe(0);
      // The answer is the whole output: the replaying Worker's own log (its state changes) stays out.
      const m = /^replay ok: agent\/echo, (\d+) events, deterministic\n$/.exec(r.stdout);
      expect(m, r.stdout).not.toBeNull();
      expect(r.stderr).not.toMatch(/\[(?:INFO|DEBUG|TRACE)\]/);
      // Three ticks are far more than the start events: the whole fetched history was replayed.
      expect(Number(m![1])).toBeGreaterThan(20);
      await h.terminate('test over');
    });
  }, 180_000);

  it('--verbose brings the SDK log back beside the same answer', async () => {
    const file = 'test/replay/histories/agentLoopWorkflow-agent_loner-01a20f1d.json';
    const r = await replay('--verbose', file);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^replay ok: test\/replay\/histories\/agentLoopWorkflow-agent_loner-01a20f1d\.json, \d+ events, deterministic\n$/,
    );
    expect(r.stderr).toMatch(/\[INFO\] Worker state changed/);
  }, 120_000);

  it('a workflow id that does not exist is a clear error with a non-zero exit', async () => {
    const r = await replay('agent/nobody-here');
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe(
      'mindloop: no workflow agent/nobody-here in namespace default: check the id (`temporal workflow list`)',
    );
    expect(r.stdout).toBe('');
  }, 60_000);
});
