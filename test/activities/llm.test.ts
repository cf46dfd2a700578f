/**
 * The LLM layer against a real Postgres: the OpenAI-compatible client talking to a local
 * server that replays recorded responses, failover down the registry, accounting per
 * attempt, idempotent replay, the scripted test double, and the Temporal activity wrapper.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { and, asc, eq } from 'drizzle-orm';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { heartbeatInterceptor } from '../../activities/heartbeat.js';
import { agents, llmCalls, llmRegistry, type NewLlmRegistryEntry } from '../../db/schema/index.js';
import {
  createLlmActivities,
  createLlmRouter,
  defaultLocalModelName,
  ensureDefaultRegistry,
  LlmUnavailable,
  LlmUnavailableError,
  ScriptedChatModel,
  scriptedTokens,
  type ChatMessage,
  type ChatResult,
  type LlmRouterDeps,
} from '../../activities/llm/index.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { loadLlmFixture, startFakeOpenAiServer, type FakeOpenAiServer } from '../helpers/fake-openai-server.js';

let handle: MigratedDatabase;
const servers: FakeOpenAiServer[] = [];

beforeAll(async () => {
  handle = await migratedDatabase('llm');
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

afterAll(async () => {
  await handle?.dispose();
});

const messages: ChatMessage[] = [
  { role: 'system', content: 'You are agent t. Reply with thoughts and a command block.' },
  { role: 'user', content: 'Tick 1. No new notes.' },
];

let agentSeq = 0;
/** A fresh agent per test, so registries and llm_calls never mix between tests. */
async function newAgent(): Promise<string> {
  const id = `llm-t${++agentSeq}`;
  await handle.db.insert(agents).values({ id, name: id });
  return id;
}

async function addRow(
  row: Partial<NewLlmRegistryEntry> & Pick<NewLlmRegistryEntry, 'agentId' | 'provider'>,
): Promise<number> {
  const [r] = await handle.db
    .insert(llmRegistry)
    .values({ name: `${row.provider}-${Math.random().toString(36).slice(2, 8)}`, model: 'm', ...row })
    .returning({ id: llmRegistry.id });
  return r!.id;
}

async function fakeServer(fixtures?: string[]): Promise<FakeOpenAiServer> {
  const s = await startFakeOpenAiServer({ fixtures });
  servers.push(s);
  return s;
}

function router(extra: Partial<LlmRouterDeps> = {}) {
  return createLlmRouter({
    db: handle.db,
    env: { FAKE_OPENAI_KEY: 'sk-test-123' },
    toolsDir: repoToolsDir,
    timeoutMs: 5_000,
    ...extra,
  });
}

function callsOf(agentId: string) {
  return handle.db.select().from(llmCalls).where(eq(llmCalls.agentId, agentId)).orderBy(asc(llmCalls.id));
}

describe('OpenAI-compatible provider against the replaying server', () => {
  it('returns the reply and the usage, and accounts tokens, cost and latency in llm_calls', async () => {
    const agentId = await newAgent();
    const server = await fakeServer(['openai-think']);
    const registryId = await addRow({
      agentId,
      provider: 'openai',
      model: 'gpt-4o-mini',
      baseUrl: server.baseUrl,
      apiKeyEnv: 'FAKE_OPENAI_KEY',
      costPer1kInput: 0.00015,
      costPer1kOutput: 0.0006,
      params: { temperature: 0.7 },
    });
    const fixture = loadLlmFixture('openai-think');

    const res = await router().chat({
      agentId,
      role: 'agent',
      messages,
      params: { maxTokens: 256 },
      tick: 1,
      purpose: 'think',
    });

    expect(res.text).toBe(fixture.choices[0]!.message.content);
    expect(res).toMatchObject({ registryId, provider: 'openai', model: 'gpt-4o-mini', replayed: false, attempts: [] });
    expect(res.usage).toEqual({ promptTokens: 412, completionTokens: 96 });
    expect(res.costUsd).toBeCloseTo((412 / 1000) * 0.00015 + (96 / 1000) * 0.0006, 6);

    // What went over the wire: the key from the env var the row names, the row's and the call's params.
    const [sent] = server.chatRequests();
    expect(sent!.authorization).toBe('Bearer sk-test-123');
    expect(sent!.body).toMatchObject({ model: 'gpt-4o-mini', temperature: 0.7, max_tokens: 256 });
    expect(sent!.body.messages).toEqual([
      { role: 'system', content: messages[0]!.content },
      { role: 'user', content: messages[1]!.content },
    ]);

    const [row] = await callsOf(agentId);
    expect(row).toMatchObject({
      id: res.callId,
      registryId,
      role: 'agent',
      purpose: 'think',
      tick: 1,
      provider: 'openai',
      model: 'gpt-4o-mini',
      promptTokens: 412,
      completionTokens: 96,
      ok: true,
      error: null,
      reply: res.text,
    });
    expect(row!.costUsd).toBeCloseTo(res.costUsd, 6);
    expect(row!.latencyMs).toBeGreaterThanOrEqual(0);
    expect(row!.latencyMs).toBe(res.latencyMs);
  });

  it('asks for JSON with response_format when a schema is given (Ollama-style local server, no key)', async () => {
    const agentId = await newAgent();
    const server = await fakeServer(['openai-emotion-json']);
    await addRow({
      agentId,
      provider: 'openai',
      role: 'emotion',
      model: 'qwen2.5:1.5b-instruct',
      baseUrl: server.baseUrl,
    });
    const schema = {
      type: 'object',
      properties: {
        emotions: {
          type: 'array',
          items: { type: 'object', properties: { name: { type: 'string' }, strength: { type: 'integer' } } },
        },
      },
      required: ['emotions'],
    };

    const res = await router().chat({
      agentId,
      role: 'emotion',
      messages,
      params: { jsonSchema: schema, stop: ['###'] },
    });

    const parsed = JSON.parse(res.text) as { emotions: Array<{ name: string; strength: number }> };
    expect(parsed.emotions[0]).toMatchObject({ name: 'curiosity', strength: 4 });
    const [sent] = server.chatRequests();
    expect(sent!.authorization).toBe('Bearer not-needed');
    expect(sent!.body).toMatchObject({
      model: 'qwen2.5:1.5b-instruct',
      stop: ['###'],
      response_format: { type: 'json_schema', json_schema: { name: 'reply', schema } },
    });
  });

  it('a row naming an unset key variable fails as an attempt without calling the server', async () => {
    const agentId = await newAgent();
    const server = await fakeServer();
    await addRow({
      agentId,
      provider: 'openai',
      model: 'gpt-4o-mini',
      baseUrl: server.baseUrl,
      apiKeyEnv: 'MISSING_KEY',
    });

    const err = await router()
      .chat({ agentId, role: 'agent', messages })
      .catch((e: unknown) => e);

    expect(err).toBeInstanceOf(LlmUnavailableError);
    expect((err as Error).message).toContain('MISSING_KEY');
    expect(server.requests).toHaveLength(0);
  });
});

describe('Anthropic provider against the replaying server', () => {
  it('sends one system prompt (with the JSON schema stated) and reads the reply and usage', async () => {
    const agentId = await newAgent();
    const server = await fakeServer(['anthropic-think']);
    await addRow({
      agentId,
      provider: 'anthropic',
      model: 'claude-3-5-haiku-20241022',
      baseUrl: server.origin,
      apiKeyEnv: 'FAKE_ANTHROPIC_KEY',
      role: 'oversight',
    });
    const schema = { type: 'object', properties: { answer: { type: 'string' } } };

    const res = await router({ env: { FAKE_ANTHROPIC_KEY: 'sk-ant-test' } }).chat({
      agentId,
      role: 'oversight',
      messages: [{ role: 'system', content: 'You are the oversight model.' }, ...messages],
      params: { maxTokens: 300, jsonSchema: schema },
    });

    expect(res.text).toBe(loadLlmFixture<{ content: Array<{ text: string }> }>('anthropic-think').content[0]!.text);
    expect(res).toMatchObject({ provider: 'anthropic', usage: { promptTokens: 402, completionTokens: 58 } });
    const [sent] = server.chatRequests();
    expect(sent!.path).toBe('/v1/messages');
    expect(sent!.headers['x-api-key']).toBe('sk-ant-test');
    expect(sent!.body).toMatchObject({
      model: 'claude-3-5-haiku-20241022',
      max_tokens: 300,
      messages: [{ role: 'user', content: messages[1]!.content }],
    });
    const system = JSON.stringify(sent!.body.system);
    expect(system).toContain('You are the oversight model.');
    expect(system).toContain(messages[0]!.content);
    expect(system).toContain('JSON schema');
  });
});

describe('failover down the registry', () => {
  async function twoEndpoints() {
    const agentId = await newAgent();
    const primary = await fakeServer(['openai-think']);
    const secondary = await fakeServer(['ollama-think']);
    const primaryId = await addRow({
      agentId,
      provider: 'openai',
      model: 'gpt-4o-mini',
      baseUrl: primary.baseUrl,
      apiKeyEnv: 'FAKE_OPENAI_KEY',
      priority: 1,
    });
    const secondaryId = await addRow({
      agentId,
      provider: 'openai',
      model: 'qwen2.5:1.5b-instruct',
      baseUrl: secondary.baseUrl,
      priority: 2,
    });
    return { agentId, primary, secondary, primaryId, secondaryId };
  }

  it('priority 1 answering 503 → priority 2 answers; both attempts are accounted', async () => {
    const { agentId, primary, secondary, primaryId, secondaryId } = await twoEndpoints();
    await primary.down('unavailable');

    const res = await router().chat({ agentId, role: 'agent', messages, tick: 3 });

    expect(res.registryId).toBe(secondaryId);
    expect(res.text).toBe(loadLlmFixture('ollama-think').choices[0]!.message.content);
    expect(res.attempts).toHaveLength(1);
    expect(res.attempts[0]).toMatchObject({ registryId: primaryId, model: 'gpt-4o-mini' });
    expect(res.attempts[0]!.error).toMatch(/503/);
    expect(primary.chatRequests()).toHaveLength(1); // no SDK-level retries: failover is ours
    expect(secondary.chatRequests()).toHaveLength(1);

    const rows = await callsOf(agentId);
    expect(rows.map((r) => [r.registryId, r.ok])).toEqual([
      [primaryId, false],
      [secondaryId, true],
    ]);
    expect(rows[0]!.error).toMatch(/503/);
    expect(rows[1]).toMatchObject({ promptTokens: 388, completionTokens: 41, tick: 3 });

    const [health] = await handle.db.select().from(llmRegistry).where(eq(llmRegistry.id, primaryId));
    expect(health).toMatchObject({ consecutiveFailures: 1 });
    expect(health!.lastError).toMatch(/503/);
  });

  it('fails over on connection refused and on a hanging endpoint (per-call timeout)', async () => {
    const { agentId, primary, secondaryId } = await twoEndpoints();
    await primary.down('refused');
    const r1 = await router().chat({ agentId, role: 'agent', messages });
    expect(r1.registryId).toBe(secondaryId);
    expect(r1.attempts[0]!.error).toMatch(/ECONNREFUSED/);

    await primary.up();
    await primary.down('hang');
    const started = Date.now();
    const r2 = await router({ timeoutMs: 400 }).chat({ agentId, role: 'agent', messages });
    expect(r2.registryId).toBe(secondaryId);
    expect(r2.attempts[0]!.error).toBe('timed out after 400 ms');
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it("a model's own timeout (the local model's, from its measured speed) replaces the router's", async () => {
    const { agentId, primaryId, secondaryId } = await twoEndpoints();
    const asked: number[] = [];
    const factories = {
      openai: (row: { id: number }) => ({
        id: `fake:${row.id}`,
        timeoutMs: () => (row.id === primaryId ? 300 : 60_000),
        invoke: (_m: unknown, _p: unknown, signal?: AbortSignal) => {
          asked.push(row.id);
          // The primary works slower than its own estimate allows; the secondary answers.
          if (row.id !== primaryId)
            return Promise.resolve({ text: 'ok', usage: { promptTokens: 1, completionTokens: 1 } });
          return new Promise<never>((_, reject) =>
            signal?.addEventListener('abort', () => reject(signal.reason as Error), { once: true }),
          );
        },
      }),
    };
    const r = await router({ timeoutMs: 5_000, factories }).chat({ agentId, role: 'agent', messages });
    expect(asked).toEqual([primaryId, secondaryId]);
    expect(r.registryId).toBe(secondaryId);
    expect(r.attempts[0]!.error).toBe('timed out after 300 ms');
  });

  it('all endpoints down → LlmUnavailable naming each candidate and its error', async () => {
    const { agentId, primary, secondary, primaryId, secondaryId } = await twoEndpoints();
    await primary.down('unavailable');
    await secondary.down('refused');

    const err = await router()
      .chat({ agentId, role: 'agent', messages })
      .catch((e: unknown) => e);

    expect(err).toBeInstanceOf(LlmUnavailableError);
    const e = err as LlmUnavailableError;
    expect(e.type).toBe(LlmUnavailable);
    expect(e.attempts.map((a) => a.registryId)).toEqual([primaryId, secondaryId]);
    expect(e.message).toContain(`#${primaryId} gpt-4o-mini: `);
    expect(e.message).toContain(`#${secondaryId} qwen2.5:1.5b-instruct: `);
    expect(e.message).toMatch(/503/);
    expect((await callsOf(agentId)).map((r) => r.ok)).toEqual([false, false]);
  });

  it('an endpoint that was down answers again once it is back up', async () => {
    const agentId = await newAgent();
    const server = await fakeServer(['openai-think']);
    await addRow({ agentId, provider: 'openai', model: 'gpt-4o-mini', baseUrl: server.baseUrl });
    const r = router();

    await server.down('refused');
    await expect(r.chat({ agentId, role: 'agent', messages })).rejects.toBeInstanceOf(LlmUnavailableError);
    await server.up();
    const res = await r.chat({ agentId, role: 'agent', messages });

    expect(res.text).toContain('<<<COMMANDS');
    const [health] = await handle.db.select().from(llmRegistry).where(eq(llmRegistry.agentId, agentId));
    expect(health).toMatchObject({ consecutiveFailures: 0 });
    expect(health!.lastOkAt).toBeInstanceOf(Date);
  });
});

describe('idempotency', () => {
  it('a repeated idempotency key returns the stored answer without calling the server again', async () => {
    const agentId = await newAgent();
    const primary = await fakeServer(['openai-think']);
    const secondary = await fakeServer(['ollama-think']);
    const primaryId = await addRow({
      agentId,
      provider: 'openai',
      model: 'gpt-4o-mini',
      baseUrl: primary.baseUrl,
      priority: 1,
    });
    await addRow({
      agentId,
      provider: 'openai',
      model: 'qwen2.5:1.5b-instruct',
      baseUrl: secondary.baseUrl,
      priority: 2,
    });
    await primary.down('unavailable');
    const key = `agent/${agentId}/tick/7/think`;

    const first = await router().chat({ agentId, role: 'agent', messages, tick: 7, idempotencyKey: key });
    // A fresh router (a retried activity on another worker) finds it in Postgres.
    const again = await router().chat({ agentId, role: 'agent', messages, tick: 7, idempotencyKey: key });

    expect(again).toMatchObject({
      text: first.text,
      registryId: first.registryId,
      callId: first.callId,
      usage: first.usage,
      replayed: true,
    });
    expect(again.attempts).toEqual([{ registryId: primaryId, model: 'gpt-4o-mini', error: first.attempts[0]!.error }]);
    expect(primary.chatRequests()).toHaveLength(1);
    expect(secondary.chatRequests()).toHaveLength(1);
    expect(await callsOf(agentId)).toHaveLength(2);

    // Another key is another call.
    await router().chat({ agentId, role: 'agent', messages, tick: 8, idempotencyKey: `agent/${agentId}/tick/8/think` });
    expect(secondary.chatRequests()).toHaveLength(2);
  });

  it('two racing attempts with one key (a retry while the first still runs) both return the first recorded answer', async () => {
    const agentId = await newAgent();
    await addRow({ agentId, provider: 'scripted' });
    // A barrier in the model: both attempts are inside the call before either answers, so
    // both looked the key up before any answer was recorded (the race, made certain).
    let arrived = 0;
    let release!: () => void;
    const bothIn = new Promise<void>((resolve) => (release = resolve));
    const r = router({
      scriptedReply: async ({ callIndex }) => {
        if (++arrived === 2) release();
        await bothIn;
        return ['one', 'two'][callIndex]!;
      },
    });
    const key = `agent/${agentId}/tick/4/think`;

    const [a, b] = await Promise.all([
      r.chat({ agentId, role: 'agent', messages, idempotencyKey: key }),
      r.chat({ agentId, role: 'agent', messages, idempotencyKey: key }),
    ]);

    expect(a.text).toBe(b.text);
    expect(a.callId).toBe(b.callId);
    // Both model calls are paid for: the loser's tokens are kept, detached from the key.
    const rows = await callsOf(agentId);
    expect(rows.filter((x) => x.ok)).toHaveLength(2);
    expect(rows.filter((x) => x.requestKey === key)).toHaveLength(1);
    expect(rows.find((x) => x.requestKey === null)!.metadata).toMatchObject({ duplicateOf: key });
  });

  it('a key whose earlier attempts all failed calls the models again', async () => {
    const agentId = await newAgent();
    await addRow({ agentId, provider: 'scripted', params: { error: 'scripted outage' } });
    const key = `agent/${agentId}/tick/1/think`;
    await expect(router().chat({ agentId, role: 'agent', messages, idempotencyKey: key })).rejects.toBeInstanceOf(
      LlmUnavailableError,
    );

    await handle.db
      .update(llmRegistry)
      .set({ params: { replies: ['back'] } })
      .where(eq(llmRegistry.agentId, agentId));
    const res = await router().chat({ agentId, role: 'agent', messages, idempotencyKey: key });
    expect(res).toMatchObject({ text: 'back', replayed: false });
  });
});

describe('scripted model (the deterministic test double)', () => {
  it('cycles the row’s replies and counts tokens as ceil(chars/4), the same on every run', async () => {
    const agentId = await newAgent();
    await addRow({
      agentId,
      provider: 'scripted',
      model: 'script',
      params: { replies: ['alpha', 'a longer second reply'] },
    });

    const run = async () => {
      const r = router();
      const out = [];
      for (let i = 0; i < 3; i++) out.push(await r.chat({ agentId, role: 'agent', messages }));
      return out.map((o) => [o.text, o.usage.promptTokens, o.usage.completionTokens]);
    };
    const first = await run();
    const prompt = messages.map((m) => m.content).join('\n');
    expect(first).toEqual([
      ['alpha', scriptedTokens(prompt), 2],
      ['a longer second reply', scriptedTokens(prompt), 6],
      ['alpha', scriptedTokens(prompt), 2],
    ]);
    expect(await run()).toEqual(first);
  });

  it('takes its replies from a function injected through the deps', async () => {
    const agentId = await newAgent();
    await addRow({ agentId, provider: 'scripted' });
    const r = router({ scriptedReply: ({ messages: m, callIndex }) => `echo ${callIndex}: ${m.at(-1)!.content}` });
    expect((await r.chat({ agentId, role: 'agent', messages })).text).toBe('echo 0: Tick 1. No new notes.');
    expect((await r.chat({ agentId, role: 'agent', messages })).text).toBe('echo 1: Tick 1. No new notes.');
  });

  it('is usable on its own', async () => {
    const m = new ScriptedChatModel({ replies: ['x'] });
    await expect(m.invoke(messages, {})).resolves.toEqual({
      text: 'x',
      usage: { promptTokens: scriptedTokens(messages.map((x) => x.content).join('\n')), completionTokens: 1 },
    });
  });
});

describe('candidates', () => {
  it('skips excluded and disabled rows, other roles and other agents; orders by priority then id', async () => {
    const agentId = await newAgent();
    const other = await newAgent();
    await addRow({
      agentId,
      provider: 'scripted',
      priority: 1,
      excluded: true,
      excludedReason: 'lost trust',
      params: { replies: ['from excluded'] },
    });
    await addRow({
      agentId,
      provider: 'scripted',
      priority: 2,
      enabled: false,
      params: { replies: ['from disabled'] },
    });
    await addRow({
      agentId,
      provider: 'scripted',
      priority: 3,
      role: 'oversight',
      params: { replies: ['from oversight'] },
    });
    await addRow({ agentId: other, provider: 'scripted', priority: 0, params: { replies: ['from other agent'] } });
    const b = await addRow({ agentId, provider: 'scripted', priority: 5, params: { replies: ['from b'] } });
    const a = await addRow({ agentId, provider: 'scripted', priority: 4, params: { replies: ['from a'] } });
    const c = await addRow({ agentId, provider: 'scripted', priority: 5, params: { replies: ['from c'] } });
    const r = router();

    expect((await r.candidates(agentId, 'agent')).map((x) => x.id)).toEqual([a, b, c]);
    const res = await r.chat({ agentId, role: 'agent', messages });
    expect(res).toMatchObject({ text: 'from a', registryId: a, attempts: [] });
    expect((await r.chat({ agentId, role: 'oversight', messages })).text).toBe('from oversight');
    // Pinning one row (e.g. one validator) calls it alone.
    expect((await r.chat({ agentId, role: 'validator', messages, registryId: c })).text).toBe('from c');
  });

  it('no usable row at all → LlmUnavailable saying so', async () => {
    const agentId = await newAgent();
    await addRow({ agentId, provider: 'scripted', enabled: false });
    const err = await router()
      .chat({ agentId, role: 'agent', messages })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LlmUnavailableError);
    expect((err as Error).message).toMatch(/no enabled, non-excluded row/);
  });

  it('ensureDefaultRegistry gives an agent without rows the local model, once', async () => {
    const agentId = await newAgent();
    expect(await ensureDefaultRegistry(handle.db, agentId)).toEqual({ created: true });
    expect(await ensureDefaultRegistry(handle.db, agentId)).toEqual({ created: false });
    const rows = await handle.db.select().from(llmRegistry).where(eq(llmRegistry.agentId, agentId));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      provider: 'local',
      model: defaultLocalModelName,
      role: 'agent',
      priority: 100,
      enabled: true,
    });

    // Concurrent callers (two workers starting the demo) still leave one row.
    const racer = await newAgent();
    await Promise.all([
      ensureDefaultRegistry(handle.db, racer),
      ensureDefaultRegistry(handle.db, racer),
      ensureDefaultRegistry(handle.db, racer),
    ]);
    expect(await handle.db.select().from(llmRegistry).where(eq(llmRegistry.agentId, racer))).toHaveLength(1);
  });
});

describe('llmChat activity', () => {
  const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };
  // As the worker runs them: with the heartbeat interceptor (every 20 ms here).
  const mockEnv = (info?: ConstructorParameters<typeof MockActivityEnvironment>[0]) =>
    new MockActivityEnvironment(info, { logger: quiet, interceptors: [heartbeatInterceptor(20)] });
  function activities(extra: Partial<Parameters<typeof createLlmActivities>[0]> = {}) {
    return createLlmActivities({ db: handle.db, env: {}, toolsDir: repoToolsDir, timeoutMs: 5_000, ...extra });
  }

  it('maps LlmUnavailable to a non-retryable ApplicationFailure of that type', async () => {
    const agentId = await newAgent();
    const server = await fakeServer();
    const id = await addRow({ agentId, provider: 'openai', model: 'gpt-4o-mini', baseUrl: server.baseUrl });
    await server.down('unavailable');

    const err = await mockEnv()
      .run(activities().llmChat, { agentId, role: 'agent' as const, messages })
      .catch((e: unknown) => e);

    expect(err).toBeInstanceOf(ApplicationFailure);
    const f = err as ApplicationFailure;
    expect(f.type).toBe('LlmUnavailable');
    expect(f.nonRetryable).toBe(true);
    expect(f.message).toContain(`#${id} gpt-4o-mini`);
    expect(f.details?.[0]).toMatchObject({
      agentId,
      role: 'agent',
      attempts: [{ registryId: id, model: 'gpt-4o-mini' }],
    });
  });

  it('answers inside an activity context, recording the workflow id, and heartbeats while it waits', async () => {
    const agentId = await newAgent();
    await addRow({ agentId, provider: 'scripted', params: { replies: ['slow answer'], delayMs: 300 } });
    const env = mockEnv({ workflowExecution: { workflowId: `agent/${agentId}`, runId: 'r1' } });
    let beats = 0;
    env.on('heartbeat', () => beats++);

    const res = (await env.run(activities().llmChat, {
      agentId,
      role: 'agent' as const,
      messages,
      tick: 2,
    })) as ChatResult;

    expect(res.text).toBe('slow answer');
    expect(beats).toBeGreaterThanOrEqual(3);
    const [row] = await callsOf(agentId);
    expect(row).toMatchObject({ workflowId: `agent/${agentId}`, tick: 2, ok: true });
  });

  it('honours cancellation: the call stops, is recorded as cancelled, and does not fail over', async () => {
    const agentId = await newAgent();
    await addRow({ agentId, provider: 'scripted', priority: 1, params: { replies: ['never'], delayMs: 30_000 } });
    await addRow({ agentId, provider: 'scripted', priority: 2, params: { replies: ['fallback'] } });
    const env = mockEnv();
    const started = Date.now();
    setTimeout(() => env.cancel(), 100);

    const err = await env
      .run(activities().llmChat, { agentId, role: 'agent' as const, messages })
      .catch((e: unknown) => e);

    expect(err).toBeInstanceOf(CancelledFailure);
    expect(Date.now() - started).toBeLessThan(5_000);
    const rows = await callsOf(agentId);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.error).toMatch(/^cancelled/);
  });

  it('rejects a malformed input as non-retryable InvalidInput, naming the field', async () => {
    const err = await activities()
      .llmChat({ agentId: 'x', role: 'boss' as 'agent', messages: [] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: 'InvalidInput', nonRetryable: true });
    expect((err as Error).message).toMatch(/role/);
    expect((err as Error).message).toMatch(/messages/);
  });

  it('works outside an activity context (no heartbeats, no cancellation signal)', async () => {
    const agentId = await newAgent();
    await addRow({ agentId, provider: 'scripted', params: { replies: ['plain'] } });
    const res = await activities().llmChat({
      agentId,
      role: 'agent',
      messages,
      idempotencyKey: `agent/${agentId}/tick/1/think`,
    });
    expect(res.text).toBe('plain');
    const rows = await handle.db
      .select()
      .from(llmCalls)
      .where(and(eq(llmCalls.agentId, agentId), eq(llmCalls.ok, true)));
    expect(rows[0]).toMatchObject({ requestKey: `agent/${agentId}/tick/1/think`, workflowId: null });
  });
});
