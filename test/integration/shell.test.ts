/**
 * The agent's `shell` command end to end: the scripted agent asks for shell commands, the
 * mindloop worker turns them into `shell` loop effects, the agent loop runs each as
 * `sandboxRun` on the sandbox queue (a real DockerSandbox), and the output comes back in the
 * next tick's context and in process_log / command_log. Also: bad args are rejected, and a
 * sandbox that cannot run (image missing) is reported to the agent instead of failing the loop.
 */
import { Client, Connection } from '@temporalio/client';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type Docker from 'dockerode';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ChatMessage } from '../../activities/llm/index.js';
import { createSandboxActivities } from '../../activities/sandbox.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import {
  agentConfig,
  agents,
  commandLog,
  discoveredTools,
  llmRegistry,
  processLog,
  toolRegistry,
  toolStates,
} from '../../db/schema/index.js';
import { startStack, type Stack } from '../../runtime/stack.js';
import { DockerSandbox } from '../../sandbox/docker-sandbox.js';
import { bundleWorkflows } from '../../workers/queues.js';
import { dockerSkipped, requireDocker } from '../helpers/docker.js';
import { freePort, freshPostgresDatabase, repoToolsDir, tempDir, testEnv } from '../helpers/env.js';
import { startLoop, withWorker } from '../helpers/harness.js';
import { thinkScript } from '../helpers/scripted.js';

const data = tempDir('shell');
let stack: Stack;
let client: Client;
let bundle: WorkflowBundleWithSourceMap;
let docker: Docker;
let dropDb: () => Promise<void>;

/** Tick 1 asks for three shell commands (one with bad args); later ticks only think. */
function script(prompts: ChatMessage[][]) {
  return thinkScript((messages, callIndex) => {
    prompts.push(messages);
    if (callIndex > 0) return `Tick ${callIndex + 1}: reading what my commands did.`;
    return `Let me look around my sandbox.\n${renderCommandBlock([
      {
        cmdId: 's1',
        type: 'shell',
        args: { command: 'echo "hello from $(id -u) in $(pwd)"; node -e "console.log(6 * 7)"; ls /nonexistent' },
      },
      { cmdId: 's2', type: 'shell', args: { command: 'sleep 20', timeout_ms: 600 } },
      { cmdId: 's3', type: 'shell', args: { cmd: 'ls' } },
    ])}`;
  });
}

async function runAgent(
  agentId: string,
  sandbox: DockerSandbox,
  prompts: ChatMessage[][],
  reply = script,
): Promise<void> {
  await stack.db.db.insert(agents).values({ id: agentId, name: agentId }).onConflictDoNothing();
  await stack.db.db
    .insert(llmRegistry)
    .values({ agentId, name: 'script', provider: 'scripted', model: 'scripted-shell', role: 'agent', priority: 1 });
  // No validator: shell is destructive and would wait for a human unless the agent opts in.
  await stack.db.db
    .insert(agentConfig)
    .values({ agentId, key: 'auto_pass_destructive', value: true })
    .onConflictDoNothing();
  const loop = {
    taskQueue: `shell-it-${agentId}`,
    workflowBundle: bundle,
    activities: createActivities({
      db: stack.db.db,
      llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: reply(prompts) },
    }),
  };
  const sandboxQueue = { taskQueue: 'sandbox', activities: createSandboxActivities({ docker, sandbox }) };
  await withWorker(stack.temporal.connection, [loop, sandboxQueue], async (taskQueue) => {
    const h = await startLoop(client, taskQueue, { agentId, maxTicks: 2, settings: { delayMs: 0 } });
    expect(await h.result()).toEqual({ agentId, ticks: 2, reason: 'max_ticks' });
  });
}

describe.skipIf(dockerSkipped)('the agent shell command runs in the sandbox', () => {
  beforeAll(async () => {
    docker = await requireDocker();
    const fresh = await freshPostgresDatabase('mindloop_shell');
    dropDb = fresh.drop;
    stack = await startStack({
      env: testEnv({ MINDLOOP_DATA_DIR: data.path, TEMPORAL_PORT: await freePort(), DATABASE_URL: fresh.url }),
      ui: false,
    });
    bundle = await bundleWorkflows();
    client = new Client({ connection: await Connection.connect(stack.temporal.connection) });
  });
  afterAll(async () => {
    await client?.connection.close();
    await stack?.stop();
    await dropDb?.();
    data.remove();
  });

  it('runs the command in the container and shows its output in the next context', async () => {
    const prompts: ChatMessage[][] = [];
    await runAgent('sheller', new DockerSandbox(docker), prompts);
    const db = stack.db.db;

    const procs = await db
      .select()
      .from(processLog)
      .where(and(eq(processLog.agentId, 'sheller'), eq(processLog.kind, 'shell')));
    const byId = Object.fromEntries(procs.map((p) => [p.processId, p]));
    expect(Object.keys(byId).sort()).toEqual(['shell.t1.s1', 'shell.t1.s2']);
    // s1: ran as nobody in /work; node works; ls failed, so the exit code is ls's.
    expect(byId['shell.t1.s1']).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/^exit 1 in \d+ ms$/),
    });
    expect(byId['shell.t1.s1']!.payload).toMatchObject({
      stdout: 'hello from 65534 in /work\n42\n',
      exitCode: 1,
      imageId: expect.stringMatching(/^sha256:/),
    });
    expect(String(byId['shell.t1.s1']!.payload!.stderr)).toMatch(/nonexistent/);
    // s2: the wall clock (timeout_ms) killed it.
    expect(byId['shell.t1.s2']).toMatchObject({
      status: 'timeout',
      message: expect.stringMatching(/budget_exceeded: wall_time/),
    });

    const log = await db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.agentId, 'sheller'), eq(commandLog.tick, 1)));
    const s1 = log.find((c) => c.cmdId === 's1')!;
    expect(s1.status).toBe('applied');
    expect((s1.result as { text: string }).text).toContain('hello from 65534 in /work');
    // Bad args never reach the sandbox.
    const s3 = log.find((c) => c.cmdId === 's3')!;
    expect(s3.status).toBe('rejected');
    expect(s3.reason).toMatch(/args\.command|command/);

    // Tick 2's context shows the output of tick 1's shell commands.
    const second = prompts[1]!.map((m) => m.content).join('\n');
    expect(second).toContain('hello from 65534 in /work');
    expect(second).toContain('42');
    expect(second).toMatch(/s2 shell \[applied\]:[^\n]*\n?[^\n]*budget_exceeded: wall_time/);
  });

  it("a designed tool's action runs its implementation in the sandbox; a wrong implementation is caught against the spec", async () => {
    // A designed tool as registerDesignedTool leaves it: spec + implementation, discovered via design.
    const machine = {
      name: 'traffic_light',
      description: 'a traffic light',
      initial: 'RED',
      states: {
        RED: { description: 'stop', actions: { next: { to: 'GREEN', description: 'switch to green' } } },
        GREEN: { description: 'go', actions: { next: { to: 'RED', description: 'switch to red' } } },
      },
    };
    const implementation = (toGreen: string) =>
      `export function run(state, action, args) { console.error('called with', state, action, JSON.stringify(args), 'uid', process.getuid()); return state === 'RED' ? '${toGreen}' : 'RED'; }\n`;
    const register = async (name: string, impl: string) => {
      const [tool] = await stack.db.db
        .insert(toolRegistry)
        .values({
          name,
          kind: 'designed',
          status: 'active',
          createdBy: 'oversight',
          description: machine.description,
          implementation: impl,
          tests: '',
          spec: { states: ['RED', 'GREEN'], initial: 'RED', machine: { ...machine, name } },
        })
        .returning({ id: toolRegistry.id });
      return tool!.id;
    };
    const good = await register('traffic_light', implementation('GREEN'));
    const bad = await register('broken_light', implementation('RED'));
    await stack.db.db.insert(agents).values({ id: 'designer', name: 'designer' });
    await stack.db.db.insert(discoveredTools).values([
      { agentId: 'designer', toolId: good, via: 'design' },
      { agentId: 'designer', toolId: bad, via: 'design' },
    ]);
    const calls = (prompts: ChatMessage[][]) =>
      thinkScript((messages, callIndex) => {
        prompts.push(messages);
        if (callIndex > 0) return 'Reading what my tools did.';
        return `Switching the lights.\n${renderCommandBlock([
          {
            cmdId: 't1',
            type: 'tool.call',
            args: { tool: 'traffic_light', action: 'next', args: { why: 'cars waiting' } },
          },
          { cmdId: 't2', type: 'tool.call', args: { tool: 'broken_light', action: 'next' } },
        ])}`;
      });
    const prompts: ChatMessage[][] = [];
    await runAgent('designer', new DockerSandbox(docker), prompts, calls);

    const db = stack.db.db;
    const procs = Object.fromEntries(
      (
        await db
          .select()
          .from(processLog)
          .where(and(eq(processLog.agentId, 'designer'), eq(processLog.kind, 'tool')))
      ).map((p) => [p.processId, p]),
    );
    expect(Object.keys(procs).sort()).toEqual(['tool.t1.t1', 'tool.t1.t2']);
    // The implementation really ran, in the container (as nobody), with the state it was called in.
    expect(procs['tool.t1.t1']).toMatchObject({
      status: 'close',
      message: expect.stringMatching(/^exit 0 in \d+ ms$/),
    });
    expect(JSON.parse(String(procs['tool.t1.t1']!.payload!.stdout))).toEqual({
      from: 'RED',
      action: 'next',
      to: 'GREEN',
      output: 'GREEN',
    });
    expect(String(procs['tool.t1.t1']!.payload!.stderr)).toContain(
      'called with RED next {"why":"cars waiting"} uid 65534',
    );
    // An implementation that disagrees with its spec is reported, not trusted.
    expect(procs['tool.t1.t2']).toMatchObject({ status: 'error', message: expect.stringMatching(/^exit 3 /) });
    expect(String(procs['tool.t1.t2']!.payload!.stderr)).toMatch(/went to RED; the spec's transition is RED → GREEN/);
    // The machines moved as the specs say, and the agent reads the output in its next context.
    const states = await db.select().from(toolStates).where(eq(toolStates.agentId, 'designer'));
    expect(Object.fromEntries(states.map((s) => [s.tool, s.state]))).toEqual({
      traffic_light: 'GREEN',
      broken_light: 'GREEN',
    });
    const second = prompts[1]!.map((m) => m.content).join('\n');
    expect(second).toContain('"output":"GREEN"');
    expect(second).toMatch(/went to RED/);
  });

  it('a sandbox that cannot run is reported to the agent, and the loop goes on', async () => {
    const prompts: ChatMessage[][] = [];
    await runAgent('no-image', new DockerSandbox(docker, { image: 'mindloop-sandbox:not-built' }), prompts);
    const procs = await stack.db.db
      .select()
      .from(processLog)
      .where(and(eq(processLog.agentId, 'no-image'), eq(processLog.processId, 'shell.t1.s1')));
    expect(procs[0]).toMatchObject({
      status: 'offline',
      message: expect.stringMatching(/not run: .*npm run sandbox:image/),
    });
    expect(prompts[1]!.map((m) => m.content).join('\n')).toMatch(/not run: .*npm run sandbox:image/);
  });
});
