/**
 * Native tool calling for state-machine tools: the OpenAI-compatible and
 * Anthropic providers get the agent's discovered tools bound as tools whose descriptions show
 * the current state and valid actions; a reply's tool calls become `tool.call` commands beside
 * the text's commands; bad arguments become rejected commands; a replay by the idempotency key
 * (router or think) yields the same. The scripted double keeps the text path. Against a real
 * Postgres and the local server that replays recorded response bodies.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { and, asc, eq } from 'drizzle-orm';
import { agents, llmCalls, llmRecentResponses, llmRegistry, type NewLlmRegistryEntry } from '../../db/schema/index.js';
import {
  createLlmActivities,
  createLlmRouter,
  type ChatMessage,
  type LlmRouter,
  type ScriptedReplyFn,
} from '../../activities/llm/index.js';
import { createTickSnapshots } from '../../activities/tick/snapshot.js';
import { createThinkActivities, type ThinkInput } from '../../activities/tick/think.js';
import { createToolActivities, toolDefinitions } from '../../activities/tools.js';
import { appendToolCalls, parseReply, toolCallsToCommands } from '../../core/reply-parser.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { loadLlmFixture, startFakeOpenAiServer, type FakeOpenAiServer } from '../helpers/fake-openai-server.js';

let handle: MigratedDatabase;
const servers: FakeOpenAiServer[] = [];

beforeAll(async () => {
  handle = await migratedDatabase('llmtools');
  await createToolActivities({ db: handle.db }).ensureBuiltinTools();
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

afterAll(async () => {
  await handle?.dispose();
});

const env = { FAKE_OPENAI_KEY: 'sk-test-123', FAKE_ANTHROPIC_KEY: 'sk-ant-test' };
let scripted: ScriptedReplyFn = () => 'Nothing to do.';

function router(): LlmRouter {
  return createLlmRouter({
    db: handle.db,
    env,
    toolsDir: repoToolsDir,
    timeoutMs: 5_000,
    scriptedReply: (i) => scripted(i),
  });
}

let agentSeq = 0;
/** A fresh agent with the starter tools and the database tool, and one agent LLM row. */
async function newAgent(row: Partial<NewLlmRegistryEntry> & Pick<NewLlmRegistryEntry, 'provider'>): Promise<string> {
  const id = `tools-t${++agentSeq}`;
  await handle.db.insert(agents).values({ id, name: id });
  await createToolActivities({ db: handle.db }).grantStarterTools({
    agentId: id,
    tools: ['discover_tools', 'escalate', 'request_state_machine_design', 'database'],
  });
  await handle.db
    .insert(llmRegistry)
    .values({ agentId: id, name: `${row.provider}-mind`, model: 'gpt-4o-mini', role: 'agent', ...row });
  return id;
}

async function fakeServer(fixtures: string[]): Promise<FakeOpenAiServer> {
  const s = await startFakeOpenAiServer({ fixtures });
  servers.push(s);
  return s;
}

/** The think activities as activities/index.ts builds them (with a snapshot store). */
function thinkActivities(llm: LlmRouter) {
  return createThinkActivities({
    db: handle.db,
    llm,
    snapshots: createTickSnapshots({ db: handle.db, llm }),
  });
}

const thinkInput = (agentId: string, tick = 1): ThinkInput => ({
  agentId,
  tick,
  workflowId: `wf-${agentId}`,
  now: '2026-11-23T16:00:00.000Z',
  mode: 'main',
  loop: { contextMode: 'standard', recentK: 5, notesMode: 'auto' },
  params: { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0, maxTokens: 512 },
});

type SentTool = {
  type: string;
  function: { name: string; description: string; parameters: { properties: Record<string, unknown> } };
};

const messages: ChatMessage[] = [
  { role: 'system', content: 'You are agent t.' },
  { role: 'user', content: 'Tick 1.' },
];

describe('OpenAI-compatible think with native tools', () => {
  it('sends the discovered tools with state-describing descriptions and turns tool_calls into tool.call commands', async () => {
    const server = await fakeServer(['openai-think-tool-calls']);
    const agentId = await newAgent({ provider: 'openai', baseUrl: server.baseUrl, apiKeyEnv: 'FAKE_OPENAI_KEY' });
    const tick = thinkActivities(router());

    const res = await tick.think(thinkInput(agentId));

    const [sent] = server.chatRequests();
    const tools = sent!.body.tools as SentTool[];
    expect(tools.map((t) => t.function.name).sort()).toEqual([
      'database',
      'discover_tools',
      'escalate',
      'request_state_machine_design',
    ]);
    const db = tools.find((t) => t.function.name === 'database')!;
    expect(db.type).toBe('function');
    expect(db.function.description).toContain('Current state: IDLE');
    expect(db.function.description).toMatch(/Valid actions now:\n- connect\(\) → CONNECTED/);
    expect(db.function.parameters.properties).toHaveProperty('action');
    expect(db.function.parameters.properties).toHaveProperty('args');
    expect(db.function.parameters).not.toHaveProperty('$schema');
    // The prompt still describes them (the tool.call command works for every provider).
    expect(JSON.stringify(sent!.body.messages)).toContain('Tools you have discovered');

    expect(res.replayed).toBe(false);
    expect(res.commands).toEqual([
      { cmdId: 'c1', type: 'diary.add', args: { title: 'Tools', content: 'Looking for a statistics tool.' } },
      { cmdId: 'call_Db7kR2vQx9LmT4sNe1WcYh0A', type: 'tool.call', args: { tool: 'database', action: 'connect' } },
      {
        cmdId: 'call_Ds3pF8jKu5RzB6aVt2XnQo7M',
        type: 'tool.call',
        args: { tool: 'discover_tools', action: 'search', args: { query: 'statistics' } },
      },
    ]);
    expect(res.rejected).toEqual([]);
    expect(res.parseErrors).toEqual([]);
    expect(res.confidence).toBe(0.7);
    expect(res.summary).not.toContain('COMMANDS');

    // The tool calls are recorded with the answer in llm_calls, and in the stored reply text.
    const [call] = await handle.db.select().from(llmCalls).where(eq(llmCalls.agentId, agentId));
    expect(call!.metadata).toMatchObject({
      toolCalls: [
        { id: 'call_Db7kR2vQx9LmT4sNe1WcYh0A', name: 'database', args: { action: 'connect' } },
        { name: 'discover_tools' },
      ],
    });
    // The stored reply carries them as an ordinary command block: parseReply alone reads them, and the body is the prose.
    const [stored] = await handle.db.select().from(llmRecentResponses).where(eq(llmRecentResponses.agentId, agentId));
    expect(parseReply(stored!.content).commands).toEqual(res.commands);
    expect(parseReply(stored!.content).body).toBe(
      'I want to know which statistics tools exist, and to look at my goals through the database tool.\n\nConfidence: 0.7',
    );

    // A retried think: from the recorded reply (llm_recent_responses), no second model call.
    const again = await tick.think(thinkInput(agentId));
    expect(again).toMatchObject({ replayed: true, commands: res.commands, rejected: res.rejected });
    // The model that wrote it comes from its registry row; the reflection is the reflexes' to write.
    expect(again).toMatchObject({ provider: 'replay', model: expect.stringMatching(/^openai:./) });
    expect(stored!.reflection).toBeNull();
    // And when only llm_calls has it: the router replays the answer by its key, tool calls included.
    await handle.db.delete(llmRecentResponses).where(eq(llmRecentResponses.agentId, agentId));
    const third = await tick.think(thinkInput(agentId));
    expect(third.commands).toEqual(res.commands);
    expect(server.chatRequests()).toHaveLength(1);
  });

  it('a tool call with malformed arguments becomes a rejected command with the reason; the tick goes on', async () => {
    const server = await fakeServer(['openai-think-tool-calls-bad-args']);
    const agentId = await newAgent({ provider: 'openai', baseUrl: server.baseUrl, apiKeyEnv: 'FAKE_OPENAI_KEY' });
    const tick = thinkActivities(router());

    const res = await tick.think(thinkInput(agentId));

    expect(res.commands).toEqual([
      { cmdId: 'call_Lx4nC9eGa7UfJ2wRk6MbTq1D', type: 'tool.call', args: { tool: 'discover_tools', action: 'list' } },
    ]);
    expect(res.rejected).toEqual([
      {
        cmdId: 'call_Bq1zT6rWm8KcN3yHd5VsLp2E',
        type: 'tool.call',
        raw: '{"action": "query", "args": {"table": "goals", "limit": 5',
        reason: expect.stringMatching(
          /^tool call call_Bq1zT6rWm8KcN3yHd5VsLp2E \(database\): malformed arguments \(not valid JSON: [^\n]+\); expected \{"action"/,
        ),
      },
      {
        cmdId: 'call_Na8hV3sPz5XdE1oYc9QjWu6K',
        type: 'tool.call',
        raw: '{"args":{"task":"need statistics"}}',
        reason: expect.stringContaining('the arguments need "action"'),
      },
    ]);
    expect(res.summary).toBe('');

    const again = await tick.think(thinkInput(agentId));
    expect(again).toMatchObject({ replayed: true, commands: res.commands, rejected: res.rejected });
    await handle.db.delete(llmRecentResponses).where(eq(llmRecentResponses.agentId, agentId));
    const third = await tick.think(thinkInput(agentId));
    expect({ commands: third.commands, rejected: third.rejected }).toEqual({
      commands: res.commands,
      rejected: res.rejected,
    });
    expect(server.chatRequests()).toHaveLength(1);
  });
});

describe('router', () => {
  it('binds request tools, returns the tool calls, and replays them by the idempotency key', async () => {
    const server = await fakeServer(['openai-think-tool-calls']);
    const agentId = await newAgent({ provider: 'openai', baseUrl: server.baseUrl, apiKeyEnv: 'FAKE_OPENAI_KEY' });
    const tools = toolDefinitions(await createToolActivities({ db: handle.db }).toolDescriptions({ agentId }));
    const r = router();
    const req = { agentId, role: 'agent' as const, messages, tools, idempotencyKey: `${agentId}:1:think` };

    const first = await r.chat(req);
    expect(first.toolCalls).toEqual([
      { id: 'call_Db7kR2vQx9LmT4sNe1WcYh0A', name: 'database', args: { action: 'connect' } },
      {
        id: 'call_Ds3pF8jKu5RzB6aVt2XnQo7M',
        name: 'discover_tools',
        args: { action: 'search', args: { query: 'statistics' } },
      },
    ]);
    expect((server.chatRequests()[0]!.body.tools as SentTool[]).map((t) => t.function.description)).toEqual(
      tools.map((t) => t.description),
    );

    const replay = await r.chat(req);
    expect(replay).toMatchObject({
      replayed: true,
      callId: first.callId,
      text: first.text,
      toolCalls: first.toolCalls,
    });
    expect(server.chatRequests()).toHaveLength(1);

    // Through the activity (plain JSON input): the tools survive its input validation.
    await createLlmActivities({ router: r }).llmChat({
      agentId,
      role: 'agent',
      messages,
      tools,
      idempotencyKey: `${agentId}:2:think`,
    });
    expect((server.chatRequests()[1]!.body.tools as SentTool[]).map((t) => t.function.name)).toEqual(
      tools.map((t) => t.name),
    );

    // Without tools nothing is bound (the request has no `tools`).
    await r.chat({ agentId, role: 'agent', messages });
    expect(server.chatRequests()[2]!.body).not.toHaveProperty('tools');
  });
});

describe('Anthropic think with native tools', () => {
  it('sends the tools as Anthropic tools and turns tool_use blocks into tool.call commands', async () => {
    const server = await fakeServer(['anthropic-think-tool-use']);
    const agentId = await newAgent({
      provider: 'anthropic',
      model: 'claude-3-5-haiku-20241022',
      baseUrl: server.origin,
      apiKeyEnv: 'FAKE_ANTHROPIC_KEY',
    });
    const tick = thinkActivities(router());

    const res = await tick.think(thinkInput(agentId));

    const [sent] = server.chatRequests();
    expect(sent!.path).toBe('/v1/messages');
    const tools = sent!.body.tools as Array<{
      name: string;
      description: string;
      input_schema: { properties: Record<string, unknown> };
    }>;
    const db = tools.find((t) => t.name === 'database')!;
    expect(db.description).toContain('Current state: IDLE');
    expect(db.input_schema.properties).toHaveProperty('action');
    expect(res.commands).toEqual([
      { cmdId: 'toolu_01VfA8kQ2xNc7HmR4tYp9WzB', type: 'tool.call', args: { tool: 'database', action: 'connect' } },
    ]);
    expect(res.confidence).toBe(0.8);
  });
});

describe('the text path (scripted double; the local model likewise)', () => {
  it('binds nothing and parses the reply as before', async () => {
    const agentId = await newAgent({ provider: 'scripted', model: 'scripted' });
    const reply =
      'Checking.\n<<<COMMANDS\n[{"cmd_id": "c1", "type": "tool.call", "args": {"tool": "database", "action": "connect"}}]\nCOMMANDS>>>\nConfidence: 0.6';
    const seen: unknown[] = [];
    scripted = (i) => {
      seen.push(i);
      return reply;
    };
    const tick = thinkActivities(router());
    const res = await tick.think(thinkInput(agentId));
    const expected = parseReply(reply);
    expect(res.commands).toEqual(expected.commands);
    expect(res.commands).toEqual([{ cmdId: 'c1', type: 'tool.call', args: { tool: 'database', action: 'connect' } }]);
    expect(seen).toHaveLength(1);
    expect(Object.keys(seen[0] as object).sort()).toEqual(['callIndex', 'messages', 'params', 'purpose', 'registryId']);
    const [call] = await handle.db
      .select()
      .from(llmCalls)
      .where(and(eq(llmCalls.agentId, agentId), eq(llmCalls.ok, true)))
      .orderBy(asc(llmCalls.id));
    expect(call!.metadata).not.toHaveProperty('toolCalls');
    const [stored] = await handle.db.select().from(llmRecentResponses).where(eq(llmRecentResponses.agentId, agentId));
    expect(stored!.content).toBe(reply);
  });

  it('parseReply restores the rejections of a recorded tool-calls block, and of no other block', () => {
    const native = parseReply(
      '<<<COMMANDS\n{"source": "native_tool_calls", "commands": [], "rejected": [{"cmd_id": "c9", "type": "tool.call", "raw": "{", "reason": "x"}]}\nCOMMANDS>>> and then more text',
    );
    expect(native.rejected).toEqual([{ cmdId: 'c9', type: 'tool.call', raw: '{', reason: 'x' }]);
    expect(native.body).toBe('and then more text');
    expect(
      parseReply('x\n<<<COMMANDS\n{"commands": [], "rejected": [{"reason": "not from a tool call"}]}\nCOMMANDS>>>')
        .rejected,
    ).toEqual([]);
    const plain = loadLlmFixture('openai-think').choices[0]!.message.content!;
    expect(parseReply(plain).rejected).toEqual([]);
  });

  it('tool-call cmd_ids are sanitized and kept unique against the text commands', () => {
    const text = appendToolCalls('<<<COMMANDS\n[{"cmd_id": "call_1", "type": "diary.add", "args": {}}]\nCOMMANDS>>>', [
      { id: 'call_1', name: 'database', args: { action: 'connect' } },
      { id: 'weird id/<x>', name: 'database', args: { action: 'query', table: 'goals', args: { limit: 2 } } },
      { name: 'escalate', args: { action: 'list', args: 5 } },
      { id: 'x'.repeat(80), name: '', args: { action: 'list' } },
    ]);
    const parsed = parseReply(text);
    expect(parsed.commands.map((c) => c.cmdId)).toEqual(['call_1', 'call_1-2', 'weird_id_x']);
    expect(parsed.errors).toEqual([]);
    expect(appendToolCalls('plain', [])).toBe('plain');
    expect(parsed.commands[2]!.args).toEqual({ tool: 'database', action: 'query', args: { table: 'goals', limit: 2 } });
    expect(parsed.rejected.map((r) => [r.cmdId, r.reason])).toEqual([
      ['tool3', 'tool call 3 (escalate): "args" must be a JSON object, found a number'],
      ['x'.repeat(64), `tool call ${'x'.repeat(80)}: no tool name`],
    ]);
    expect(toolCallsToCommands([{ id: 'a', name: 't', args: { action: 'go' } }], { room: 0 }).rejected).toEqual([
      { raw: '', reason: '1 more command dropped: at most 50 commands in one reply' },
    ]);
  });
});
