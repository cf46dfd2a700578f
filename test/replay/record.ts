/**
 * Records histories of real runs as replay fixtures (test/replay/histories/*.json):
 *   npx tsx test/replay/record.ts
 * An embedded stack on a temp dir, the real activities and the scripted model: an agent loop
 * that hears a note, applies commands, starts a task loop and continues-as-new; a provisioning.
 * Re-record after an intended workflow change (and keep the old files while old runs live).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { spawnSync } from 'node:child_process';
import { NativeConnection, Worker } from '@temporalio/worker';
import { createActivities } from '../../activities/index.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { agents, llmRegistry } from '../../db/schema/index.js';
import { startStack } from '../../runtime/stack.js';
import { bundleWorkflows } from '../../workers/queues.js';
import type { AgentStatus, agentLoopWorkflow } from '../../workflows/agent-loop.js';
import { freePort, repoToolsDir, tempDir, testEnv, toolPath } from '../helpers/env.js';

const out = join(import.meta.dirname, 'histories');
const data = tempDir('record');
const stack = await startStack({
  env: testEnv({ MINDLOOP_DATA_DIR: data.path, TEMPORAL_PORT: await freePort(), PGLITE_PORT: await freePort() }),
  ui: false,
});
try {
  await stack.db.db.insert(agents).values({ id: 'recorder', name: 'Recorder' });
  await stack.db.db.insert(llmRegistry).values({ agentId: 'recorder', name: 'script', provider: 'scripted', model: 'scripted-recorder', role: 'agent', priority: 1 });
  const connection = await NativeConnection.connect(stack.temporal.connection);
  const worker = await Worker.create({
    connection,
    taskQueue: 'mindloop',
    workflowBundle: await bundleWorkflows(),
    activities: createActivities({
      db: stack.db.db,
      llm: {
        env: {},
        toolsDir: repoToolsDir,
        scriptedReply: ({ messages, callIndex }) => {
          const user = messages.find((m) => m.role === 'user')?.content ?? '';
          if (user.includes('auxiliary loop')) {
            return `Working on the task.\n${renderCommandBlock([
              { cmdId: 'p', type: 'notes.send', args: { text: 'proposal from the task loop' } },
              { cmdId: 's', type: 'tasks.status', args: { id: Number(/task #(\d+)/.exec(user)?.[1] ?? 1), status: 'done' } },
            ])}`;
          }
          if (callIndex === 0) {
            return `Begin.\n${renderCommandBlock([
              { cmdId: 'd', type: 'diary.add', args: { title: 'start', content: 'first entry' } },
              { cmdId: 'k', type: 'cycle.responses', args: { n: 3 } },
              { cmdId: 't', type: 'llm_task.start', args: { title: 'look around', description: 'one pass' } },
            ])}`;
          }
          return `Thought ${callIndex}.`;
        },
      },
    }),
  });
  const client = new Client({ connection: await Connection.connect(stack.temporal.connection) });
  await worker.runUntil(async () => {
    const h = await client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
      taskQueue: 'mindloop',
      workflowId: 'agent/recorder',
      args: [{ agentId: 'recorder', maxTicks: 6, ticksPerRun: 4, settings: { delayMs: 50 } }],
    });
    while ((await h.query<AgentStatus>('status')).tick < 1) await new Promise((r) => setTimeout(r, 100));
    await h.executeUpdate('addNote', { args: [{ text: 'a note for the recording' }] });
    await h.result();
    await client.workflow.getHandle('agent/recorder/task/1').result().catch(() => undefined);
    await client.workflow.execute('provisionAgentWorkflow', { taskQueue: 'mindloop', workflowId: 'provision/recorded', args: [{ agentId: 'recorded', name: 'Recorded' }] });
  });
  mkdirSync(out, { recursive: true });
  const runs = client.workflow.list({ query: 'WorkflowId STARTS_WITH "agent/recorder" OR WorkflowId = "provision/recorded"' });
  let n = 0;
  for await (const run of runs) {
    // The CLI's export is the proto3 JSON that the Temporal UI downloads and `historyFromJSON` reads.
    const shown = spawnSync(toolPath('temporal'), ['workflow', 'show', '--address', stack.temporal.address, '-w', run.workflowId, '-r', run.runId, '-o', 'json'], {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    });
    if (shown.status !== 0) throw new Error(`temporal workflow show failed: ${shown.stderr}`);
    const file = `${run.type}-${run.workflowId.replace(/[^a-z0-9]+/gi, '_')}-${run.runId.slice(0, 8)}.json`;
    writeFileSync(join(out, file), shown.stdout);
    process.stdout.write(`recorded ${file} (${(JSON.parse(shown.stdout) as { events: unknown[] }).events.length} events)\n`);
    n++;
  }
  process.stdout.write(`${n} histories in ${out}\n`);
  await client.connection.close();
  await connection.close();
} finally {
  await stack.stop();
  data.remove();
}
