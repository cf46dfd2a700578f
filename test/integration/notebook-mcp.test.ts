/**
 * An agent's MCP servers in the notebook, over HTTP and in a real browser (Debian's Chromium
 * driven by playwright-core), against the real Postgres:
 * - `GET /api/agents/<id>/mcp` answers each server with its health (up, down with the last error
 *   on one line, not started), restarts, tools with their annotations, and recent calls newest
 *   first (at most 20 a server, the text on one line and clipped), with the calls of unknown
 *   outcome of the last 24 h counted; calls of a server no longer granted come under its name,
 *   marked removed; an unknown agent is 404, a bad id 400;
 * - the agent page's "mcp" tab shows the same, the unknown outcomes marked;
 * - tool descriptions, titles, errors and call texts holding HTML are shown as text and never run.
 * No Temporal: the servers are read from Postgres only.
 */
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agents, mcpCalls, mcpServers, mcpTools } from '../../db/schema/index.js';
import type { NotebookServer } from '../../runtime/notebook/index.js';
import type { NotebookMcpServer } from '../../runtime/notebook/mcp.js';
import { browseNotebook, notebookArtifacts as artifacts, type BrowsedNotebook } from '../helpers/notebook.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';

const hostile = '<img src=x onerror=alert(1)>';
const hostileScript = '<script>window.__ran = 1</script>';
/** A call text over the page's 300 characters, on several lines, holding HTML. */
const longText = `line one ${hostile}\n\n  line two ${'x'.repeat(400)}`;

let h: MigratedDatabase;
let notebook: NotebookServer;
let page: Page;
let dialogs: string[];
let nb: BrowsedNotebook;

const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000);

async function seed(): Promise<void> {
  await h.db.insert(agents).values([
    { id: 'ada', name: 'Ada' },
    { id: 'bob', name: 'Bob' },
  ]);
  const stdio = { agentId: 'ada', transport: 'stdio' as const, command: 'node', source: 'person' as const };
  const [memory] = await h.db
    .insert(mcpServers)
    .values({ ...stdio, name: 'memory', health: 'up', healthAt: minutesAgo(3), restarts: 1, listedAt: minutesAgo(60) })
    .returning();
  await h.db.insert(mcpServers).values([
    {
      agentId: 'ada',
      name: 'web',
      transport: 'http',
      url: 'http://127.0.0.1:1/mcp',
      source: 'file',
      health: 'down',
      healthAt: minutesAgo(1),
      lastError: `server web at http://127.0.0.1:1/mcp did not finish MCP's handshake:\n  ${hostileScript}`,
      restarts: 4,
    },
    { ...stdio, name: 'later' },
  ]);
  await h.db.insert(mcpTools).values([
    {
      agentId: 'ada',
      serverId: memory!.id,
      name: 'read_graph',
      description: `Reads the graph. ${hostile}`,
      inputSchema: { type: 'object' },
      annotations: { readOnlyHint: true, idempotentHint: true, title: hostileScript },
    },
    {
      agentId: 'ada',
      serverId: memory!.id,
      name: 'delete_entities',
      description: 'Deletes entities.',
      inputSchema: { type: 'object' },
      annotations: { destructiveHint: true, openWorldHint: false },
    },
  ]);
  const call = (
    key: string,
    server: string,
    status: 'started' | 'ok' | 'error' | 'unknown',
    at: Date,
    text?: string,
  ) => ({
    agentId: 'ada',
    key,
    server,
    tool: status === 'error' ? 'delete_entities' : 'read_graph',
    status,
    text: text ?? null,
    isError: status === 'error',
    createdAt: at,
    finishedAt: status === 'started' ? null : at,
  });
  await h.db.insert(mcpCalls).values([
    // Twenty-two old calls: only the newest twenty of the server are listed.
    ...Array.from({ length: 22 }, (_, i) => call(`old-${i}`, 'memory', 'ok', minutesAgo(2000 + i), `old ${i}`)),
    // Unknown two days ago: listed, no longer counted.
    call('u-old', 'memory', 'unknown', minutesAgo(1900)),
    call('ok-1', 'memory', 'ok', minutesAgo(30), longText),
    call('err-1', 'memory', 'error', minutesAgo(20), 'no such entity'),
    call('u-1', 'memory', 'unknown', minutesAgo(10)),
    call('u-2', 'memory', 'unknown', minutesAgo(5)),
    call('run-1', 'memory', 'started', minutesAgo(1)),
    call('gone-1', 'files', 'unknown', minutesAgo(45), `left behind ${hostile}`),
  ]);
}

beforeAll(async () => {
  h = await migratedDatabase('mindloop_notebook_mcp', 2);
  await seed();
  nb = await browseNotebook({ db: h.db });
  ({ notebook, page, dialogs } = nb);
}, 120_000);

afterAll(async () => {
  await nb?.close();
  await h?.dispose();
});

const get = (path: string) => fetch(new URL(path, notebook.url));

describe("the notebook's MCP servers of an agent", () => {
  it('answers each server with its health, tools, annotations and recent calls, the unknown outcomes counted', async () => {
    const res = await get('/api/agents/ada/mcp');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const { servers } = (await res.json()) as { servers: NotebookMcpServer[] };
    expect(servers.map((s) => [s.name, s.removed])).toEqual([
      ['later', false],
      ['memory', false],
      ['web', false],
      ['files', true],
    ]);
    const [later, memory, web, files] = servers;

    expect(later).toMatchObject({ health: null, healthAt: null, restarts: 0, tools: [], calls: [], unknownCalls: 0 });
    expect(web).toMatchObject({
      transport: 'http',
      source: 'file',
      health: 'down',
      restarts: 4,
      lastError: `server web at http://127.0.0.1:1/mcp did not finish MCP's handshake: ${hostileScript}`,
    });

    expect(memory).toMatchObject({ transport: 'stdio', health: 'up', restarts: 1, unknownCalls: 2 });
    expect(memory!.tools).toEqual([
      {
        name: 'delete_entities',
        title: null,
        description: 'Deletes entities.',
        annotations: { destructiveHint: true, openWorldHint: false },
      },
      {
        name: 'read_graph',
        title: hostileScript,
        description: `Reads the graph. ${hostile}`,
        annotations: { readOnlyHint: true, idempotentHint: true, title: hostileScript },
      },
    ]);
    const calls = memory!.calls;
    expect(calls).toHaveLength(20);
    expect(calls.slice(0, 6).map((c) => [c.status, c.tool])).toEqual([
      ['started', 'read_graph'],
      ['unknown', 'read_graph'],
      ['unknown', 'read_graph'],
      ['error', 'delete_entities'],
      ['ok', 'read_graph'],
      ['unknown', 'read_graph'],
    ]);
    expect(calls[0]).toMatchObject({ finishedAt: null, text: null });
    expect(calls[3]).toMatchObject({ isError: true, text: 'no such entity' });
    const clipped = calls[4]!.text!;
    expect(clipped).toHaveLength(300);
    expect(clipped).toMatch(new RegExp(`^line one ${hostile.replace(/[()]/g, '\\$&')} line two x+…$`));
    // The oldest two of the twenty-two old calls are left out.
    expect(calls.slice(6).map((c) => c.text)).toEqual(Array.from({ length: 14 }, (_, i) => `old ${i}`));

    expect(files).toMatchObject({ transport: null, tools: [], unknownCalls: 1 });
    expect(files!.calls.map((c) => [c.status, c.text])).toEqual([['unknown', `left behind ${hostile}`]]);
  });

  it('an agent without servers answers none; an unknown agent is 404 naming it, a bad id 400', async () => {
    expect(await (await get('/api/agents/bob/mcp')).json()).toMatchObject({ agentId: 'bob', servers: [] });
    const ghost = await get('/api/agents/ghost/mcp');
    expect(ghost.status).toBe(404);
    expect(await ghost.json()).toMatchObject({ error: 'no agent ghost' });
    const bad = await get('/api/agents/..%2Fada/mcp');
    expect(bad.status).toBe(400);
  });

  it("shows the servers in the agent page's mcp tab, marking the unknown outcomes, every server's text as text", async () => {
    await page.goto(`${notebook.url}#/agent/ada`);
    await page.click('button[data-tab="mcp"]');
    const memory = page.locator('article.mcp-server[data-server="memory"]');
    await memory.waitFor();
    expect(
      await page.locator('article.mcp-server').evaluateAll((els) => els.map((e) => e.getAttribute('data-server'))),
    ).toEqual(['later', 'memory', 'web', 'files']);

    expect(await memory.locator('p.health').textContent()).toMatch(/^up, restarted 1×, last seen .+$/);
    const web = page.locator('article.mcp-server[data-server="web"]');
    expect(await web.getAttribute('class')).toBe('mcp-server down');
    expect(await web.locator('p.health').textContent()).toMatch(
      new RegExp(
        `^down, restarted 4×, last seen .+: server web at .* handshake: ${hostileScript.replace(/[.()]/g, '\\$&')}$`,
      ),
    );
    expect(await page.locator('article[data-server="later"] p.health').textContent()).toBe(
      'not started (no worker has used it since it was added)',
    );
    expect(await page.locator('article[data-server="files"] p.health').textContent()).toBe(
      'removed: no longer granted',
    );

    const read = memory.locator('tr[data-tool="read_graph"]');
    expect(await read.locator('td.description').textContent()).toBe(`Reads the graph. ${hostile}`);
    expect(await read.locator('td.name .muted').textContent()).toBe(hostileScript);
    const chips = (row: typeof read) =>
      row
        .locator('.annotation')
        .evaluateAll((els) => els.map((e) => `${e.getAttribute('data-hint')}=${e.getAttribute('data-value')}`));
    expect(await chips(read)).toEqual(['read-only=true', 'destructive=unset', 'idempotent=true', 'open-world=unset']);
    const del = memory.locator('tr[data-tool="delete_entities"]');
    expect(await chips(del)).toEqual(['read-only=unset', 'destructive=true', 'idempotent=unset', 'open-world=false']);
    expect(await del.locator('.annotation[data-hint="destructive"]').getAttribute('class')).toBe(
      'chip annotation warn',
    );

    expect(await memory.locator('.mcp-unknown').textContent()).toMatch(
      /^2 call\(s\) of unknown outcome in the last 24 h: /,
    );
    expect(await memory.locator('tr.mcp-call').count()).toBe(20);
    const unknown = memory.locator('tr.mcp-call.unknown');
    expect(await unknown.count()).toBe(3);
    expect(await unknown.locator('td.status').allTextContents()).toEqual(Array(3).fill('OUTCOME UNKNOWN'));
    expect(await memory.locator('tr.mcp-call[data-status="ok"] td.text').first().textContent()).toMatch(
      /^line one <img src=x onerror=alert\(1\)> line two x+…$/,
    );
    expect(await page.locator('article[data-server="files"] tr.mcp-call.unknown td.text').textContent()).toBe(
      `left behind ${hostile}`,
    );
    expect(await page.locator('article[data-server="later"] .mcp-unknown').count()).toBe(0);
    await page.screenshot({ path: join(artifacts, 'agent-mcp.png'), fullPage: true });

    // Nothing the servers wrote became markup or ran.
    expect(await page.locator('main img, main script').count()).toBe(0);
    expect(await page.evaluate('typeof window.__ran')).toBe('undefined');
    expect(dialogs).toEqual([]);
  });
});
