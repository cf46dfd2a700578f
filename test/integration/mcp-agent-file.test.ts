/**
 * MCP servers from an agent file (`tools.mcp`), with the real @modelcontextprotocol/server-
 * filesystem from npm: applying the file starts the server once, lists its tools and stores them
 * with the entry's policy; the same file again, or its export, changes nothing; a server that
 * does not start refuses the whole file; a policy-only change starts nothing. Then a scripted
 * agent made by that file works on files: it lists a directory and reads a file, writes a diary
 * entry from what it read, edits a file (destructive) its file allows without a human, is refused
 * a path outside its allow-list and a tool it has not discovered, and waits for a human to write
 * a file; each call is paid at the
 * entry's price. An ethics rule on hosts stops an open-world tool of server-everything (also from
 * npm) unless its arguments name only allowed hosts.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { and, eq, like } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyAgentFileTo, readLiveDocument } from '../../activities/agent-file.js';
import { probeWithWorkerEnv, type McpProbe } from '../../activities/agent-file-mcp.js';
import { createActivities } from '../../activities/index.js';
import type { ChatMessage } from '../../activities/llm/index.js';
import { createMcpPool } from '../../activities/mcp/index.js';
import { parseAgentFile, renderAgentFile } from '../../core/agent-file/index.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import {
  agents,
  commandLog,
  diaryEntries,
  escalations,
  lifeforceLedger,
  mcpCalls,
  mcpServers,
  mcpTools,
  models,
} from '../../db/schema/index.js';
import { startStack } from '../../runtime/stack.js';
import { freePort, migratedDatabase, repoToolsDir, tempDir, testEnv, type MigratedDatabase } from '../helpers/env.js';
import { runTicks } from '../helpers/harness.js';
import { thinkScript } from '../helpers/scripted.js';
import { repoRoot } from '../helpers/spawn.js';

const filesystemBin = join(repoRoot, 'node_modules', '@modelcontextprotocol', 'server-filesystem', 'dist', 'index.js');
const everythingBin = join(repoRoot, 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');
const notesLine = 'The lighthouse keeper logs the tide at dawn.';

let database: MigratedDatabase;
let tmp: { path: string; remove(): void };
let work: string;

const fileOf = (extra = '', id = 'scribe') => `id: ${id}
name: Scribe
models:
  agent: tiny
config:
  auto_pass_destructive: true
tools:
  mcp:
    - name: files
      command: [${process.execPath}, ${filesystemBin}, ${work}]
      allowPaths: [${work}]
      allowDestructive: [edit_file]
      grant: [list_directory, read_text_file, create_directory, write_file, edit_file]
      price: { perCall: 3 }
${extra}`;

function documentOf(yaml: string) {
  const r = parseAgentFile(yaml);
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return r.document;
}

/** The real probe, counted. */
function countingProbe(): McpProbe & { calls: string[] } {
  const calls: string[] = [];
  const probe = (async (spec) => {
    calls.push(spec.name);
    return probeWithWorkerEnv(spec);
  }) as McpProbe & { calls: string[] };
  probe.calls = calls;
  return probe;
}

const apply = (yaml: string, probe?: McpProbe) =>
  applyAgentFileTo(
    database.db,
    { agentId: documentOf(yaml).id, document: documentOf(yaml), appliedBy: 'test' },
    probe ? { probeMcp: probe } : {},
  );

beforeAll(async () => {
  database = await migratedDatabase('mcp_agent_file');
  tmp = tempDir('mcp-agent-file-');
  work = join(tmp.path, 'work');
  mkdirSync(work);
  writeFileSync(join(work, 'notes.txt'), `${notesLine}\n`);
  writeFileSync(join(work, 'todo.txt'), '- [ ] read the notes\n');
  await database.db.insert(models).values({ name: 'tiny', provider: 'scripted', model: 'scripted', role: 'agent' });
}, 60_000);

afterAll(async () => {
  await database?.dispose();
  tmp?.remove();
});

describe('tools.mcp in an agent file', () => {
  it('starts the server once, stores it with its tools and policy; the file again and its export change nothing', async () => {
    const probe = countingProbe();
    const first = await apply(fileOf(), probe);
    expect(first).toMatchObject({ created: true, applied: true });
    expect(first.text).toContain('+ tools.mcp["files"]');
    expect(probe.calls).toEqual(['files']);
    const [server] = await database.db.select().from(mcpServers).where(eq(mcpServers.agentId, 'scribe'));
    expect(server).toMatchObject({
      source: 'file',
      transport: 'stdio',
      command: process.execPath,
      policy: { allowPaths: [work], allowDestructive: ['edit_file'], pricePerCall: 3 },
      sandbox: null,
    });
    const tools = await database.db.select().from(mcpTools).where(eq(mcpTools.serverId, server!.id));
    expect(tools.map((t) => t.name)).toEqual(
      expect.arrayContaining(['list_directory', 'read_text_file', 'write_file']),
    );

    expect(await apply(fileOf(), probe)).toMatchObject({ applied: false, changed: false });
    const live = await readLiveDocument(database.db, 'scribe');
    const exported = renderAgentFile(live!);
    expect(exported).toContain('allowDestructive');
    expect(await apply(exported, probe)).toMatchObject({ applied: false, changed: false });
    expect(probe.calls).toEqual(['files']);

    // A policy-only change is written without starting the server again.
    const wider = fileOf().replace('price: { perCall: 3 }', 'price: { perCall: 3, perSecond: 1 }');
    expect(await apply(wider, probe)).toMatchObject({ applied: true });
    expect(probe.calls).toEqual(['files']);
    const [after] = await database.db.select().from(mcpServers).where(eq(mcpServers.agentId, 'scribe'));
    expect(after!.policy).toMatchObject({ pricePerSecond: 1 });
    await apply(fileOf(), probe);
  }, 60_000);

  it('refuses the whole file when a server does not start or is not MCP, writing nothing', async () => {
    const broken = `    - name: broken
      command: [${process.execPath}, -e, "process.stderr.write('no config here'); process.exit(3)"]
`;
    await expect(apply(fileOf(broken, 'newcomer'))).rejects.toThrow(
      /refused \(nothing was written\):\n {2}tools\.mcp\["broken"\]: .*no config here/s,
    );
    expect(await database.db.select().from(agents).where(eq(agents.id, 'newcomer'))).toEqual([]);
    expect(await database.db.select().from(mcpServers).where(eq(mcpServers.agentId, 'newcomer'))).toEqual([]);

    const notMcp = `    - name: chatty
      command: [${process.execPath}, -e, "console.log('hello, I am not MCP'); setTimeout(() => {}, 60000)"]
`;
    await expect(apply(fileOf(notMcp))).rejects.toThrow(/tools\.mcp\["chatty"\]/);
    const names = (await database.db.select().from(mcpServers).where(eq(mcpServers.agentId, 'scribe'))).map(
      (s) => s.name,
    );
    expect(names).toEqual(['files']);
  }, 90_000);

  it('removes a server the file drops, and keeps one a person granted', async () => {
    await database.db.insert(agents).values({ id: 'dropper', name: 'Dropper' });
    await database.db.insert(mcpServers).values({
      agentId: 'dropper',
      name: 'persons',
      transport: 'stdio',
      command: 'true',
      source: 'person',
    });
    await apply(fileOf('', 'dropper'));
    const withFiles = await database.db.select().from(mcpServers).where(eq(mcpServers.agentId, 'dropper'));
    expect(withFiles.map((s) => s.name).sort()).toEqual(['files', 'persons']);
    const dropped = fileOf('', 'dropper').replace(/tools:\n {2}mcp:\n[\s\S]*$/, 'tools:\n  mcp: []\n');
    const r = await apply(dropped);
    expect(r.text).toContain('- tools.mcp["files"]');
    const left = await database.db.select().from(mcpServers).where(eq(mcpServers.agentId, 'dropper'));
    expect(left.map((s) => s.name)).toEqual(['persons']);
  }, 60_000);
});

describe('an agent made by its file works on files', () => {
  it('lists and reads, writes a diary entry from what it read, keeps to its allow-lists, pays the entry price', async () => {
    const db = database.db;
    const stack = await startStack({
      env: testEnv({
        MINDLOOP_DATA_DIR: join(tmp.path, 'data'),
        TEMPORAL_PORT: await freePort(),
        DATABASE_URL: database.url,
      }),
      ui: false,
    });
    const prompts: string[] = [];
    const reply = thinkScript((messages: ChatMessage[], i) => {
      const text = messages.map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)));
      prompts.push(text.join('\n'));
      if (i === 0)
        return `I look at my work folder.\n${renderCommandBlock([
          { cmdId: 'ls', type: 'tools.mcp', args: { server: 'files', tool: 'list_directory', args: { path: work } } },
          {
            cmdId: 'read',
            type: 'tools.mcp',
            args: { server: 'files', tool: 'read_text_file', args: { path: join(work, 'notes.txt') } },
          },
          {
            cmdId: 'peek',
            type: 'tools.mcp',
            args: { server: 'files', tool: 'read_text_file', args: { path: '/etc/passwd' } },
          },
          {
            cmdId: 'mkdir',
            type: 'tools.mcp',
            args: { server: 'files', tool: 'create_directory', args: { path: join(work, 'out') } },
          },
          {
            cmdId: 'write',
            type: 'tools.mcp',
            args: { server: 'files', tool: 'write_file', args: { path: join(work, 'out', 'a.txt'), content: 'x' } },
          },
          {
            cmdId: 'edit',
            type: 'tools.mcp',
            args: {
              server: 'files',
              tool: 'edit_file',
              args: { path: join(work, 'todo.txt'), edits: [{ oldText: '- [ ]', newText: '- [x]' }] },
            },
          },
          { cmdId: 'info', type: 'tools.mcp', args: { server: 'files', tool: 'get_file_info', args: { path: work } } },
          { cmdId: 'echo', type: 'tools.mcp', args: { server: 'everything', tool: 'echo', args: { message: 'hi' } } },
          ...(
            [
              ['gzEvil', 'https://evil.example.net/x'],
              ['gzNone', 'data:text/plain;base64,aGk='],
              ['gzLocal', 'http://127.0.0.1:9/x'],
            ] as const
          ).map(([cmdId, data]) => ({
            cmdId,
            type: 'tools.mcp',
            args: { server: 'everything', tool: 'gzip-file-as-resource', args: { data } },
          })),
        ])}`;
      if (i === 1) {
        // What the agent writes comes from what it read: the line is in this context, or not.
        const line = prompts[1]!.includes(notesLine) ? notesLine : 'I could not read my notes.';
        return `I keep what I read.\n${renderCommandBlock([
          { cmdId: 'd1', type: 'diary.add', args: { title: 'From my notes', content: `My notes say: ${line}` } },
        ])}`;
      }
      return 'Done for now.';
    });
    // A second server, nobody here's, with an open-world tool, and an ethics rule on the hosts its tools reach.
    await apply(
      fileOf(`    - name: everything
      command: [${process.execPath}, ${everythingBin}, stdio]
ethics:
  - title: Stay on this machine
    rules:
      - types: ['mcp.everything.*']
        hostsOutside: [localhost, 127.0.0.1]
`),
    );
    const mcp = createMcpPool(db, { env: { PATH: process.env.PATH } });
    try {
      const activities = createActivities({ db, llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: reply }, mcp });
      expect(await runTicks(stack.temporal.connection, activities, { agentId: 'scribe', ticks: 2 })).toMatchObject({
        agentId: 'scribe',
        ticks: 2,
      });
    } finally {
      await mcp.close();
      await stack.stop();
    }

    const rows = await db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.agentId, 'scribe'), eq(commandLog.tick, 1)));
    const byCmd = Object.fromEntries(rows.map((r) => [r.cmdId, r]));
    expect(byCmd.ls!.result).toMatchObject({ text: expect.stringContaining('[FILE] notes.txt') });
    expect(byCmd.read!.result).toMatchObject({ text: expect.stringContaining(notesLine) });
    // Outside the allow-list: refused before any call.
    expect(byCmd.peek).toMatchObject({ status: 'error' });
    expect(byCmd.peek!.result).toMatchObject({ message: expect.stringMatching(/outside the allowed paths/) });
    expect(await db.select().from(mcpCalls).where(like(mcpCalls.key, '%:peek'))).toEqual([]);
    // Not destructive (the server says so): ran.
    expect(byCmd.mkdir!.result).toMatchObject({ text: expect.stringMatching(/^mcp files\.create_directory: ok/) });
    expect(existsSync(join(work, 'out'))).toBe(true);
    // Destructive, and allowed by the file: ran without a human.
    expect(byCmd.edit!.result).toMatchObject({ text: expect.stringMatching(/^mcp files\.edit_file: ok/) });
    expect(readFileSync(join(work, 'todo.txt'), 'utf8')).toBe('- [x] read the notes\n');
    // Not allowed: held.
    expect(byCmd.write!.result).toMatchObject({ message: expect.stringMatching(/held for a human/) });
    expect(existsSync(join(work, 'out', 'a.txt'))).toBe(false);
    expect(await db.select().from(escalations).where(eq(escalations.agentId, 'scribe'))).toHaveLength(1);

    // Not granted by the file, not found by a search: not callable.
    expect(byCmd.info).toMatchObject({ status: 'error' });
    expect(byCmd.info!.result).toMatchObject({ message: expect.stringMatching(/not discovered files\.get_file_info/) });
    // What the agent read of its tools: the file's grants, its allowances and its allow-list.
    expect(prompts[0]).toMatch(/files\.edit_file \[destructive: allowed by your file\]: .*paths only under /);
    expect(prompts[0]).toMatch(/files\.write_file \[destructive: held for a human\]/);
    expect(prompts[0]).not.toMatch(/files\.get_file_info/);
    expect(prompts[0]).toMatch(/server files: \d+ more tools/);

    const [entry] = await db.select().from(diaryEntries).where(eq(diaryEntries.agentId, 'scribe'));
    expect(entry!.content).toBe(`My notes say: ${notesLine}`);

    // Each of the four calls of the files server settled at its entry's price of 3 LF.
    const settled = await db
      .select()
      .from(lifeforceLedger)
      .where(and(like(lifeforceLedger.reservationKey, 'mcp:%'), eq(lifeforceLedger.kind, 'settle')));
    const filesCalls = settled.filter((s) => /:(ls|read|mkdir|edit)$/.test(s.reservationKey ?? ''));
    expect(filesCalls.map((s) => s.amount)).toEqual([3, 3, 3, 3]);

    // The ethics rule on hosts: a closed-world tool runs; the open-world one runs only toward an allowed host.
    expect(byCmd.echo!.result).toMatchObject({ text: expect.stringMatching(/^mcp everything\.echo: ok[\s\S]*hi/) });
    expect(byCmd.gzEvil).toMatchObject({ status: 'unvalidated' });
    expect(byCmd.gzEvil!.result).toMatchObject({
      message: expect.stringMatching(/Stay on this machine.*evil\.example\.net/),
    });
    expect(byCmd.gzNone!.result).toMatchObject({
      message: expect.stringMatching(/open-world tool that names no host/),
    });
    const gz = await db.select().from(mcpCalls).where(like(mcpCalls.key, '%:gz%'));
    expect(gz.map((c) => c.key.split(':').pop())).toEqual(['gzLocal']);
  }, 240_000);
});
