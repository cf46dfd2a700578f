/**
 * A destructive MCP call held for a human runs once, when the human approves it in the notebook.
 * A scripted agent's tick asks `files.write_file` of the real server-filesystem (from
 * node_modules, rooted in a temporary directory): the call is held, the file is not written and
 * an escalation waits in the notebook's inbox. The human approves it there, by the route the
 * inbox's approve button posts to; the escalation workflow then calls the tool through the
 * `mcpCall` activity under the approved command's key: the file holds the content, mcp_calls has
 * one row (ok), the approved command's command_log row carries the result's text and the agent's
 * answer note the call's headline. A second approval is refused, the escalation's history replays
 * against the current code, and the activity asked again under the same key returns its record
 * without writing the file a second time.
 */
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { NativeConnection, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { and, eq, like } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ScriptedReplyFn } from '../../activities/llm/providers/scripted.js';
import { createMcpActivities, createMcpPool } from '../../activities/mcp/index.js';
import { probeMcpServer, type McpPool } from '../../activities/mcp/pool.js';
import { replayHistory } from '../../cli/replay.js';
import { workflowIds } from '../../core/ids.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { insertMcpServer } from '../../db/queries/mcp.js';
import {
  agentConfig,
  agents,
  commandLog,
  escalations,
  llmRegistry,
  mcpCalls,
  notes,
  processLog,
} from '../../db/schema/index.js';
import { TickFeed, startNotebook, type NotebookServer } from '../../runtime/notebook/index.js';
import { startStack, type Stack } from '../../runtime/stack.js';
import { bundleWorkflows } from '../../workers/queues.js';
import type { EscalationStatus, escalationWorkflow } from '../../workflows/escalation.js';
import { freePort, migratedDatabase, repoToolsDir, tempDir, testEnv, type MigratedDatabase } from '../helpers/env.js';
import { startLoop, startWorkers, untilQuery, type RunningWorkers } from '../helpers/harness.js';
import { thinkScript } from '../helpers/scripted.js';
import { repoRoot } from '../helpers/spawn.js';
import { stopStackTest } from '../helpers/temporal.js';
import { escalationStatusQuery } from '../../workflows/escalation.js';

const filesystemBin = join(repoRoot, 'node_modules', '@modelcontextprotocol', 'server-filesystem', 'dist', 'index.js');
const agentId = 'scribe';
const content = 'written once, after a human said yes\n';

let database: MigratedDatabase;
let tmp: { path: string; remove(): void };
let files: string;
let target: string;
let stack: Stack;
let client: Client;
let connection: NativeConnection;
let workers: RunningWorkers | undefined;
let pool: McpPool;
let notebook: NotebookServer;
let bundle: WorkflowBundleWithSourceMap;

/** The first think asks to write the file; the later ones only read what came back. */
const think = thinkScript((_messages, i) =>
  i > 0
    ? `Tick ${i + 1}: waiting for the human.`
    : `I write the plan down.\n${renderCommandBlock([
        {
          cmdId: 'w1',
          type: 'tools.mcp',
          args: { server: 'files', tool: 'write_file', args: { path: target, content } },
        },
      ])}`,
);
/** The oversight approves but asks for a human: the held call waits for one either way. */
const reply: ScriptedReplyFn = (call) =>
  call.purpose?.startsWith('oversight:')
    ? JSON.stringify({
        verdict: 'approve',
        solution: 'write the file',
        teaching_moment: 'a write waits for a human',
        recommended_tools: [],
        needs_human: true,
      })
    : think(call);

const url = (path: string) => `${notebook.url.replace('localhost', '127.0.0.1')}${path}`;
/** What the notebook's approve button posts: the answer, by whom, with the comment. */
const approveInNotebook = (id: string) =>
  fetch(url(`api/escalations/${encodeURIComponent(id)}/approve`), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ by: 'ops', comment: 'yes, write it' }),
  });

beforeAll(async () => {
  database = await migratedDatabase('mcp_approval');
  tmp = tempDir('mcp-approval-');
  files = join(tmp.path, 'files');
  mkdirSync(files);
  target = join(files, 'plan.txt');
  const db = database.db;
  await db.insert(agents).values({ id: agentId, name: 'Scribe' });
  await db.insert(llmRegistry).values([
    { agentId, name: 'script', provider: 'scripted', model: 'scripted-scribe', role: 'agent', priority: 1 },
    { agentId, name: 'overseer', provider: 'scripted', model: 'scripted-oversight', role: 'oversight', priority: 1 },
  ]);
  // No validator: the human switch lets the command reach its handler, which holds the write.
  await db.insert(agentConfig).values({ agentId, key: 'auto_pass_destructive', value: true });
  const spec = { name: 'files', transport: 'stdio' as const, command: process.execPath, args: [filesystemBin, files] };
  const tools = await probeMcpServer(spec, { env: { PATH: process.env.PATH } });
  await insertMcpServer(db, { agentId, source: 'person', ...spec }, tools);

  stack = await startStack({
    env: testEnv({
      MINDLOOP_DATA_DIR: join(tmp.path, 'data'),
      TEMPORAL_PORT: await freePort(),
      DATABASE_URL: database.url,
    }),
    ui: false,
  });
  pool = createMcpPool(db, { env: { PATH: process.env.PATH } });
  [bundle, connection] = await Promise.all([bundleWorkflows(), NativeConnection.connect(stack.temporal.connection)]);
  client = new Client({ connection: await Connection.connect(stack.temporal.connection) });
  workers = await startWorkers(connection, [
    {
      taskQueue: 'mindloop',
      workflowBundle: bundle,
      activities: createActivities({
        db,
        dataDir: join(tmp.path, 'data'),
        llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: reply },
        mcp: pool,
      }),
    },
  ]);
  notebook = await startNotebook({
    db,
    client,
    feed: new TickFeed(),
    feedSource: 'in-process',
    port: 0,
    log: () => undefined,
  });
}, 180_000);

afterAll(async () => {
  await notebook?.close();
  await stopStackTest({ runs: [workers?.stop()], connections: [connection, client?.connection], stack });
  await pool?.close();
  await database?.dispose();
  tmp?.remove();
}, 60_000);

describe('a destructive MCP call held for a human', () => {
  it('runs once when the human approves it in the notebook: the file, one mcp_calls row, the result on its command', async () => {
    const db = database.db;
    const loop = await startLoop(client, 'mindloop', { agentId, maxTicks: 2, settings: { delayMs: 0 } });
    expect(await loop.result()).toMatchObject({ agentId, ticks: 2 });

    // Held: the escalation waits for a human, the file is not written, no call was made.
    const [held] = await db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.agentId, agentId), eq(commandLog.cmdId, 'w1')));
    expect(held!.result).toMatchObject({ message: expect.stringMatching(/destructive: held for a human/) });
    const [row] = await db.select().from(escalations).where(eq(escalations.agentId, agentId));
    const escalationId = row!.id;
    const esc = client.workflow.getHandle<typeof escalationWorkflow>(workflowIds.escalation(escalationId));
    await untilQuery(esc, escalationStatusQuery, (s) => s.phase === 'awaiting_human', 'the call awaiting a human');
    expect(existsSync(target)).toBe(false);
    expect(await db.select().from(mcpCalls).where(eq(mcpCalls.agentId, agentId))).toEqual([]);

    // The notebook's inbox lists it; the human approves it there.
    const inbox = (await (await fetch(url('api/inbox'))).json()) as { escalations: Array<{ id: string }> };
    expect(inbox.escalations.map((e) => e.id)).toContain(escalationId);
    const approved = await approveInNotebook(escalationId);
    expect(approved.status).toBe(200);
    expect(((await approved.json()) as EscalationStatus).human).toEqual({ verdict: 'approve', by: 'ops' });
    const result = await esc.result();
    expect(result).toMatchObject({ outcome: 'approved', decidedBy: 'human', proposalOutcome: 'executed' });

    // Written, once: the file, one ok row under the approved command's key, the text on its row.
    expect(readFileSync(target, 'utf8')).toBe(content);
    const calls = await db.select().from(mcpCalls).where(eq(mcpCalls.agentId, agentId));
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ status: 'ok', server: 'files', tool: 'write_file', args: { path: target } });
    expect(calls[0]!.key).toContain(`approved.${escalationId}`);
    const [cmd] = await db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.agentId, agentId), like(commandLog.cmdId, 'approved.%')));
    expect(cmd).toMatchObject({ status: 'applied', type: 'tools.mcp' });
    expect(cmd!.result).toMatchObject({
      message: expect.stringMatching(/^mcp files\.write_file: ok/),
      text: expect.stringMatching(/^mcp files\.write_file: ok in \d+ ms\n.*Successfully wrote to/s),
    });
    const [proc] = await db
      .select()
      .from(processLog)
      .where(and(eq(processLog.agentId, agentId), eq(processLog.kind, 'mcp')));
    expect(proc).toMatchObject({ status: 'close' });
    // The agent's answer carries the call's headline.
    const answers = await db.select().from(notes).where(eq(notes.agentId, agentId));
    expect(answers.map((n) => n.text).join('\n')).toMatch(
      /Your proposed action: executed — .*\nmcp files\.write_file: ok in \d+ ms/,
    );
    const writtenAt = statSync(target).mtimeMs;

    // Approving again is refused; nothing runs.
    const again = await approveInNotebook(escalationId);
    expect([404, 409]).toContain(again.status);

    // The history replays against the current code (the call is in it, not made again).
    const history = await esc.fetchHistory();
    const exported = { workflowId: esc.workflowId, ...(JSON.parse(historyToJSON(history)) as object) };
    expect(JSON.stringify(exported)).toContain('"mcpCall"');
    const replayed = await replayHistory('escalation', exported, bundle);
    expect(replayed.error).toBeUndefined();
    expect(replayed.ok).toBe(true);

    // The activity retried under the same key returns its record: the server is not asked again.
    const retry = await createMcpActivities({ db, pool }).mcpCall({
      agentId,
      key: calls[0]!.key,
      server: 'files',
      tool: 'write_file',
      args: { path: target, content: 'a second write' },
    });
    expect(retry).toMatchObject({ status: 'ok', recorded: true });
    expect(readFileSync(target, 'utf8')).toBe(content);
    expect(statSync(target).mtimeMs).toBe(writtenAt);
    expect(await db.select().from(mcpCalls).where(eq(mcpCalls.agentId, agentId))).toHaveLength(1);
  }, 240_000);
});
