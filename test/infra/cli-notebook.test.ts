/**
 * `mindloop status` and `mindloop note` as processes beside a running notebook (as `npm start`
 * serves it), on the real dev server and Postgres:
 * - the notebook answers for its own cluster (`source: notebook`), with what Temporal itself says;
 * - a notebook serving another cluster refuses the request unread (421) and the command asks
 *   Temporal itself; so does one that is off or not there;
 * - a note through the notebook is delivered once, and the same update id sent again (as after a
 *   notebook that stopped answering) is the same note;
 * - the status carries the agent's goal metrics from the database (a `goals` line; `goals` in JSON);
 * - refusals (no such loop) come back as the same one-line errors as without the notebook;
 * - an agent whose budget cannot cover its think says, through either path and in the notebook's
 *   list, the smallest grant that lets it go on, and that grant lets it think.
 */
import { request } from 'node:http';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { lfRound, lifeforceNeeds } from '../../core/lifeforce.js';
import { stateOf } from '../../db/queries/lifeforce.js';
import { agents, goals, lifeforceBudgets, llmRecentResponses, llmRegistry, notes } from '../../db/schema/index.js';
import type { AgentStatus } from '../../workflows/agent-loop/index.js';
import { TickFeed, startNotebook, type NotebookServer } from '../../runtime/notebook/index.js';
import { startStack, type Stack } from '../../runtime/stack.js';
import { startAgentLoop } from '../../runtime/workflow-starts.js';
import { temporalHeader } from '../../runtime/temporal-connection.js';
import { bundleWorkflows } from '../../workers/queues.js';
import { freePort, freshPostgresDatabase, repoToolsDir, tempDir, testEnv } from '../helpers/env.js';
import { startWorkers, type RunningWorkers } from '../helpers/harness.js';
import { repoRoot, run } from '../helpers/spawn.js';
import { stopStackTest } from '../helpers/temporal.js';

const cli = `${repoRoot}/bin/mindloop.mjs`;
const data = tempDir('cli-notebook');
let stack: Stack;
let dropDb: (() => Promise<void>) | undefined;
let client: Client;
let connection: NativeConnection;
let workers: RunningWorkers | undefined;
let ours: NotebookServer;
let theirs: NotebookServer;

beforeAll(async () => {
  const fresh = await freshPostgresDatabase('mindloop_cli_notebook');
  dropDb = fresh.drop;
  stack = await startStack({
    env: testEnv({ MINDLOOP_DATA_DIR: data.path, TEMPORAL_PORT: await freePort(), DATABASE_URL: fresh.url }),
    ui: false,
  });
  const db = stack.db.db;
  await db.insert(agents).values([
    { id: 'ada', name: 'Ada' },
    { id: 'bo', name: 'Bo' },
  ]);
  const start = new Date(Date.UTC(2026, 10, 20, 9));
  await db.insert(goals).values([
    { agentId: 'ada', title: 'tend the garden' },
    {
      agentId: 'ada',
      title: 'plant',
      status: 'completed',
      startedAt: start,
      completedAt: new Date(+start + 90 * 60_000),
    },
  ]);
  await db.insert(llmRegistry).values(
    ['ada', 'bo'].map((agentId) => ({
      agentId,
      name: 'script',
      provider: 'scripted' as const,
      model: 'instant',
      role: 'agent' as const,
      priority: 1,
      params: { replies: ['A quiet thought.'] },
    })),
  );
  const [bundle, temporalClient] = await Promise.all([
    bundleWorkflows(),
    Connection.connect(stack.temporal.connection),
  ]);
  client = new Client({ connection: temporalClient });
  connection = await NativeConnection.connect(stack.temporal.connection);
  workers = await startWorkers(connection, [
    {
      taskQueue: 'mindloop',
      workflowBundle: bundle,
      activities: createActivities({ db, dataDir: data.path, llm: { env: {}, toolsDir: repoToolsDir } }),
    },
  ]);
  const base = { db, client, feed: new TickFeed(), feedSource: 'in-process' as const, port: 0, log: () => undefined };
  ours = await startNotebook({ ...base, temporal: { address: stack.temporal.address, namespace: 'default' } });
  theirs = await startNotebook({ ...base, temporal: { address: 'elsewhere.example:7233', namespace: 'default' } });
  // A slow heartbeat: the agent answers queries, its ticks do not matter here.
  await startAgentLoop(client, { agentId: 'ada', name: 'Ada', delayMs: 60_000 });
  // 1 LF: less than any think reserves, so its first think is refused.
  await startAgentLoop(client, { agentId: 'bo', name: 'Bo', delayMs: 60_000, lifeforce: { capacity: 1 } });
}, 180_000);

afterAll(async () => {
  await Promise.all([ours?.close(), theirs?.close()]);
  await client?.workflow
    .getHandle('agent/ada')
    .terminate('test over')
    .catch(() => undefined);
  await client?.workflow
    .getHandle('agent/bo')
    .terminate('test over')
    .catch(() => undefined);
  await stopStackTest({
    runs: [workers?.stop()],
    connections: [connection, client?.connection],
    stack,
    dropDb,
    data,
  });
}, 60_000);

const ml = (notebook: NotebookServer | 'off', ...args: string[]) =>
  run(process.execPath, [cli, ...args], {
    TEMPORAL_ADDRESS: stack.temporal.address,
    DATABASE_URL: stack.database.url,
    NATS_URL: 'off',
    MINDLOOP_NOTEBOOK_PORT: notebook === 'off' ? 'off' : String(notebook.port),
  });

async function statusJson(
  notebook: NotebookServer | 'off',
  ...flags: string[]
): Promise<{
  source: string;
  workflowId: string;
  execution: { status: string; runId: string };
  status: { agentId: string } | null;
  goals: { total: number; completed: number; meanMsToAchieve: number | null } | null;
}> {
  const r = await ml(notebook, 'status', 'ada', '--json', ...flags);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as Awaited<ReturnType<typeof statusJson>>;
}

function post(
  port: number,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method: 'POST', headers: { 'content-type': 'application/json', ...headers } },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }),
        );
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

describe('mindloop status and note beside a running notebook', () => {
  it('status: the notebook of the same cluster answers, with what Temporal itself says', async () => {
    const viaNotebook = await statusJson(ours);
    const direct = await statusJson(ours, '--direct');
    expect(viaNotebook.source).toBe('notebook');
    expect(direct.source).toBe('temporal');
    expect(viaNotebook.workflowId).toBe('agent/ada');
    expect(viaNotebook.execution).toEqual(direct.execution);
    expect(viaNotebook.status?.agentId).toBe('ada');
    for (const r of [viaNotebook, direct])
      expect(r.goals).toMatchObject({ total: 2, completed: 1, meanMsToAchieve: 90 * 60_000 });
    const text = await ml(ours, 'status', 'ada');
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^agent ada — tick \d+/);
    expect(text.stdout).toContain(
      '\n  goals        1 active, 1 achieved of 1 closed (100 %), mean 1h30m to achieve; 0 paused, 0 failed; 0 tasks/goal, 0 open per open goal\n',
    );
  }, 60_000);

  it('status: a notebook of another cluster refuses unread (421) and the command asks Temporal; so without a notebook', async () => {
    const refused = await new Promise<number>((resolve, reject) =>
      request(
        {
          host: '127.0.0.1',
          port: theirs.port,
          path: '/api/agents/ada/loop',
          headers: { [temporalHeader]: `${stack.temporal.address}/default` },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      )
        .on('error', reject)
        .end(),
    );
    expect(refused).toBe(421);
    expect((await statusJson(theirs)).source).toBe('temporal');
    expect((await statusJson('off')).source).toBe('temporal');
    // Nothing listens on this port any more.
    const gone = await startNotebook({
      db: stack.db.db,
      client,
      feed: new TickFeed(),
      feedSource: 'in-process',
      port: 0,
      temporal: { address: stack.temporal.address, namespace: 'default' },
      log: () => undefined,
    });
    await gone.close();
    expect((await statusJson(gone)).execution.status).toBe('RUNNING');
  }, 60_000);

  it('status of an agent without a loop: the same one-line error through the notebook as from Temporal', async () => {
    const [viaNotebook, direct] = await Promise.all([
      ml(ours, 'status', 'nobody'),
      ml(ours, 'status', 'nobody', '--direct'),
    ]);
    for (const r of [viaNotebook, direct]) {
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('no loop for agent nobody: start it with `mindloop start nobody`');
    }
    // Pause, resume and stop say the same, and that nothing was sent.
    for (const r of await Promise.all(['pause', 'resume', 'stop'].map((cmd) => ml(ours, cmd, 'nobody')))) {
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('no loop for agent nobody: start it with `mindloop start nobody` (nothing was sent)');
    }
  }, 60_000);

  it('note: delivered once through the notebook; the same update id again is the same note; no loop is a clear error', async () => {
    const sent = await ml(ours, 'note', 'ada', 'through', 'the', 'notebook', '-p', '3');
    expect(sent.stderr).toBe('');
    expect(sent.stdout).toMatch(/^note #\d+ delivered to ada\n$/);
    const rows = await stack.db.db.select().from(notes).where(eq(notes.text, 'through the notebook'));
    expect(rows).toHaveLength(1);
    expect(rows[0]!.priority).toBe(3);
    expect(`note #${rows[0]!.id} delivered to ada\n`).toBe(sent.stdout);

    const header = { [temporalHeader]: `${stack.temporal.address}/default` };
    const first = await post(
      ours.port,
      '/api/agents/ada/notes',
      { text: 'once only', updateId: 'cli-note-test-1' },
      header,
    );
    const again = await post(
      ours.port,
      '/api/agents/ada/notes',
      { text: 'once only', updateId: 'cli-note-test-1' },
      header,
    );
    expect(first.status).toBe(201);
    expect(again).toEqual(first);
    expect(await stack.db.db.select().from(notes).where(eq(notes.text, 'once only'))).toHaveLength(1);
    const badId = await post(ours.port, '/api/agents/ada/notes', { text: 'x', updateId: 'no spaces allowed' }, header);
    expect(badId.status).toBe(400);
    expect(JSON.stringify(badId.body)).toContain('updateId');

    const theirsNote = await post(theirs.port, '/api/agents/ada/notes', { text: 'wrong cluster' }, header);
    expect(theirsNote.status).toBe(421);
    expect(await stack.db.db.select().from(notes).where(eq(notes.text, 'wrong cluster'))).toHaveLength(0);

    const none = await ml(ours, 'note', 'nobody', 'hello');
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no running loop for agent nobody');
    const direct = await ml('off', 'note', 'ada', 'straight', 'to', 'temporal');
    expect(direct.stdout).toMatch(/^note #\d+ delivered to ada\n$/);
  }, 90_000);

  it('an exhausted agent: status (either path) and the notebook name the smallest grant, and that grant lets it think', async () => {
    const bo = client.workflow.getHandle('agent/bo');
    await expect.poll(async () => (await bo.query<AgentStatus>('status')).phase, { timeout: 30_000 }).toBe('exhausted');
    const r = await ml(ours, 'status', 'bo', '--json');
    expect(r.code, r.stderr).toBe(0);
    const { status } = JSON.parse(r.stdout) as { status: AgentStatus };
    const x = status.lifeforce!.exhausted!;
    // What the ledger's arithmetic says of the budget as stored, for the think that was refused.
    const [row] = await stack.db.db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, 'agent:bo'));
    const needs = lifeforceNeeds(stateOf(row!), x.needed, Date.now());
    expect(needs.grant).toBeGreaterThan(0);
    expect(x.needs).toEqual(needs);
    const lf = (n: number) => `${lfRound(n)} LF`;
    const said = `needs ${lf(needs.grant)} (the smallest grant: mindloop lifeforce grant bo ${lfRound(needs.grant)}); a capacity under ${lf(needs.capacity!)} never holds it`;
    for (const text of await Promise.all([ml(ours, 'status', 'bo'), ml(ours, 'status', 'bo', '--direct')])) {
      expect(text.code, text.stderr).toBe(0);
      expect(text.stdout).toContain(`EXHAUSTED    since ${x.since}: ${x.needed} LF refused (balance); ${said}`);
    }
    const list = await new Promise<{
      agents: Array<{ id: string; lifeforce: { exhausted: boolean; needs: unknown } | null }>;
    }>((resolve, reject) =>
      request(
        {
          host: '127.0.0.1',
          port: ours.port,
          path: '/api/agents',
          headers: { [temporalHeader]: `${stack.temporal.address}/default` },
        },
        (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString()));
          res.on('end', () => resolve(JSON.parse(body) as never));
        },
      )
        .on('error', reject)
        .end(),
    );
    expect(list.agents.find((a) => a.id === 'bo')?.lifeforce).toMatchObject({ exhausted: true, needs });

    // Exactly that grant: the refused tick runs.
    const granted = await ml(ours, 'lifeforce', 'grant', 'bo', String(lfRound(needs.grant)));
    expect(granted.code, granted.stderr).toBe(0);
    expect(granted.stdout).toContain('woke agent/bo');
    await expect
      .poll(
        async () =>
          (
            await stack.db.db
              .select({ tick: llmRecentResponses.tick })
              .from(llmRecentResponses)
              .where(and(eq(llmRecentResponses.agentId, 'bo'), eq(llmRecentResponses.tick, 1)))
          ).length,
        { timeout: 30_000 },
      )
      .toBe(1);
  }, 90_000);
});
