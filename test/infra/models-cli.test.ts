/**
 * `mindloop models add|list|test|remove` run as processes against the real Postgres and fake
 * OpenAI-compatible servers (real HTTP): one that can do JSON and tool calls and reports a
 * context length, one that can do neither. Adding tests the model with real calls and stores
 * what it found; every refusal (the key's variable unset, a server nobody answers on, a model the
 * server lacks, a bad flag) says what is wrong and stores nothing. `list`'s figures come from the
 * llm_calls rows the router writes for agents given the model with `assignModel`; `remove` is
 * refused while an agent uses the model, naming the agents.
 */
import { asc, eq, inArray } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLlmRouter, LlmUnavailableError } from '../../activities/llm/index.js';
import { defaultPrices } from '../../core/lifeforce.js';
import { agents, llmCalls, llmRegistry, models } from '../../db/schema/index.js';
import { assignModel, getModel, ModelCatalogueError, unassignModel } from '../../runtime/models.js';
import { freePort, migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { capabilityAnswer, startFakeOpenAiServer, type FakeOpenAiServer } from '../helpers/fake-openai-server.js';
import { repoRoot, run } from '../helpers/spawn.js';

const cli = `${repoRoot}/bin/mindloop.mjs`;
const key = 'sk-test-not-a-real-key-123';
let h: MigratedDatabase;
let able: FakeOpenAiServer;
let plain: FakeOpenAiServer;
let deadUrl: string;

beforeAll(async () => {
  h = await migratedDatabase('mindloop_models_cli', 2);
  able = await startFakeOpenAiServer({
    models: [{ id: 'good-model', context_length: 16384 }],
    answer: capabilityAnswer({ json: true, tools: true }),
  });
  plain = await startFakeOpenAiServer({
    models: [{ id: 'plain-model' }],
    answer: capabilityAnswer({ json: false, tools: false }),
  });
  deadUrl = `http://127.0.0.1:${await freePort()}/v1`;
  await h.db.insert(agents).values([
    { id: 'ada', name: 'Ada' },
    { id: 'bo', name: 'Bo' },
  ]);
}, 60_000);
afterAll(async () => {
  await able?.close();
  await plain?.close();
  await h?.dispose();
});

const ml = (...args: string[]) =>
  run(process.execPath, [cli, 'models', ...args], { DATABASE_URL: h.url, MODELS_TEST_KEY: key });
const row = (name: string) => getModel(h.db, name);
const names = async () =>
  (await h.db.select({ name: models.name }).from(models).orderBy(asc(models.name))).map((r) => r.name);

describe('mindloop models add', () => {
  it('tests the model with real calls and stores it with what the test found; the key is read by its variable name and never stored', async () => {
    const r = await ml(
      'add',
      'fast',
      '--provider',
      'openai',
      '--model',
      'good-model',
      '--base-url',
      able.baseUrl,
      '--key-env',
      'MODELS_TEST_KEY',
      '--price-in',
      '0.15',
      '--price-out',
      '0.6',
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^added model fast: openai good-model at http:\/\/127\.0\.0\.1:\d+\/v1, role agent — ok in \d+ ms; JSON replies yes; tool calls yes; context 16384 tokens\n$/,
    );
    const m = await row('fast');
    expect(m).toMatchObject({
      provider: 'openai',
      model: 'good-model',
      baseUrl: able.baseUrl,
      apiKeyEnv: 'MODELS_TEST_KEY',
      role: 'agent',
      priceInPer1m: 0.15,
      priceOutPer1m: 0.6,
      contextWindow: 16384,
    });
    expect(m!.test).toMatchObject({ ok: true, toolCalls: true, jsonReply: true, contextLength: 16384 });
    expect(m!.test!.latencyMs).toBeGreaterThanOrEqual(0);
    expect(m!.testedAt).toBeInstanceOf(Date);
    expect(JSON.stringify(m)).not.toContain(key);
    // What the server saw: its model asked for, then a plain call, a JSON one and one with the tool bound, each with the key.
    expect(able.requests.map((q) => `${q.method} ${q.path}`)).toEqual([
      'GET /v1/models/good-model',
      'POST /v1/chat/completions',
      'POST /v1/chat/completions',
      'POST /v1/chat/completions',
    ]);
    expect(new Set(able.requests.map((q) => q.authorization))).toEqual(new Set([`Bearer ${key}`]));
    const [, asPlain, asJson, withTool] = able.requests;
    expect(asPlain!.body.response_format).toBeUndefined();
    expect(asJson!.body.response_format).toMatchObject({ type: 'json_schema' });
    expect((withTool!.body.tools as Array<{ function: { name: string } }>).map((t) => t.function.name)).toEqual([
      'ping',
    ]);
  });

  it('says so when a model can do neither JSON nor tool calls and its server reports no context length', async () => {
    const r = await ml(
      'add',
      'plain',
      '--provider',
      'openai',
      '--model',
      'plain-model',
      '--base-url',
      plain.baseUrl,
      '--role',
      'mini',
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/role emotion — ok in \d+ ms; JSON replies no; tool calls no; context not reported/);
    expect((await row('plain'))!.test).toMatchObject({
      ok: true,
      toolCalls: false,
      jsonReply: false,
      contextLength: null,
    });
    expect((await row('plain'))!.contextWindow).toBeNull();
  });

  it('an Anthropic model: asked for at /v1/models/<id> with its key, its context length read from max_input_tokens', async () => {
    const anthropic = await startFakeOpenAiServer({
      fixtures: ['anthropic-think', 'anthropic-think-tool-use'],
      models: [{ id: 'claude-fake', max_input_tokens: 200000 }],
    });
    try {
      const r = await ml(
        'add',
        'claude',
        '--provider',
        'anthropic',
        '--model',
        'claude-fake',
        '--base-url',
        anthropic.origin,
        '--key-env',
        'MODELS_TEST_KEY',
      );
      expect(r.code, r.stderr).toBe(0);
      // Prose where JSON was asked for; the second fixture calls a tool, but not the one bound.
      expect(r.stdout).toMatch(
        /^added model claude: anthropic claude-fake at http:\/\/127\.0\.0\.1:\d+, role agent — ok in \d+ ms; JSON replies no; tool calls no; context 200000 tokens\n$/,
      );
      expect(anthropic.requests.map((q) => `${q.method} ${q.path}`)).toEqual([
        'GET /v1/models/claude-fake',
        'POST /v1/messages',
        'POST /v1/messages',
        'POST /v1/messages',
      ]);
      expect(new Set(anthropic.requests.map((q) => q.headers['x-api-key']))).toEqual(new Set([key]));
      const lacks = await ml(
        'add',
        'claude2',
        '--provider',
        'anthropic',
        '--model',
        'claude-none',
        '--base-url',
        anthropic.origin,
        '--key-env',
        'MODELS_TEST_KEY',
      );
      expect(lacks.code).toBe(1);
      expect(lacks.stderr).toContain(
        `model 'claude2' not added: ${anthropic.origin} does not serve model 'claude-none'`,
      );
    } finally {
      await anthropic.close();
    }
    await h.db.delete(models).where(eq(models.name, 'claude'));
  });

  it('refuses, naming what is missing, and stores nothing: the key variable unset, no server, a model the server lacks, a name taken', async () => {
    const before = able.requests.length;
    const unset = await ml(
      'add',
      'nokey',
      '--provider',
      'openai',
      '--model',
      'good-model',
      '--base-url',
      able.baseUrl,
      '--key-env',
      'MODELS_UNSET_KEY',
    );
    expect(unset.code).toBe(1);
    expect(unset.stderr).toContain('mindloop: environment variable MODELS_UNSET_KEY is not set in this process');
    // Checked before any call.
    expect(able.requests.length).toBe(before);
    const anthropic = await ml('add', 'claude', '--provider', 'anthropic', '--model', 'claude-haiku');
    expect(anthropic.code).toBe(1);
    expect(anthropic.stderr).toContain(
      'an anthropic model at its default address needs a key: name the environment variable that holds it (--key-env)',
    );
    const openAiItself = await ml('add', 'gpt', '--provider', 'openai', '--model', 'gpt-4o-mini');
    expect(openAiItself.code).toBe(1);
    expect(openAiItself.stderr).toContain('needs a key');

    const dead = await ml('add', 'dead', '--provider', 'openai', '--model', 'good-model', '--base-url', deadUrl);
    expect(dead.code).toBe(1);
    expect(dead.stderr).toContain(`mindloop: model 'dead' not added: cannot reach ${deadUrl}: ECONNREFUSED`);

    const lacks = await ml('add', 'lacks', '--provider', 'openai', '--model', 'gpt-9', '--base-url', able.baseUrl);
    expect(lacks.code).toBe(1);
    expect(lacks.stderr).toContain(
      `mindloop: model 'lacks' not added: ${able.baseUrl} does not serve model 'gpt-9' (it serves: good-model)`,
    );

    const taken = await ml('add', 'fast', '--provider', 'openai', '--model', 'good-model', '--base-url', plain.baseUrl);
    expect(taken.code).toBe(1);
    expect(taken.stderr).toContain("the catalogue already has a model 'fast'");
    expect((await row('fast'))!.baseUrl).toBe(able.baseUrl);
    expect(await names()).toEqual(['fast', 'plain']);
  }, 60_000);

  it('a bad flag is a usage error (exit 2) naming the flag, and stores nothing', async () => {
    const cases: Array<[string[], string]> = [
      [['add', 'Fast!', '--provider', 'openai', '--model', 'm'], 'bad model name "Fast!": a slug'],
      [
        ['add', 'x', '--provider', 'gemini', '--model', 'm'],
        '--provider must be one of openai, anthropic, got "gemini"',
      ],
      [['add', 'x', '--provider', 'openai'], "required option '--model <id>' not specified"],
      [
        ['add', 'x', '--provider', 'openai', '--model', 'm', '--role', 'boss'],
        '--role must be one of agent, oversight, validator, emotion, novelty, task, embedder, mini, got "boss"',
      ],
      [
        ['add', 'x', '--provider', 'openai', '--model', 'm', '--price-in', '-1'],
        '--price-in must be a number in 0..100000, got "-1"',
      ],
      [
        ['add', 'x', '--provider', 'openai', '--model', 'm', '--base-url', 'localhost:11434'],
        'bad --base-url "localhost:11434": an http(s) URL',
      ],
      [
        ['add', 'x', '--provider', 'openai', '--model', 'm', '--key-env', 'sk-live-abc'],
        'bad --key-env "sk-live-abc": the NAME of an environment variable',
      ],
      [['add', 'x', '--provider', 'openai', '--model', 'm', '--frobnicate'], "unknown option '--frobnicate'"],
      [['frob'], "unknown command 'frob'"],
      [['test'], "missing required argument 'name'"],
    ];
    for (const [args, message] of cases) {
      const r = await ml(...args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toContain(message);
    }
    expect(await names()).toEqual(['fast', 'plain']);
  }, 90_000);
});

describe('mindloop models test', () => {
  it('--no-test stores without a call; `test` then calls it, stores a failure when the server is away and the answer when it is back', async () => {
    const before = able.requests.length;
    const added = await ml(
      'add',
      'later',
      '--provider',
      'openai',
      '--model',
      'good-model',
      '--base-url',
      able.baseUrl,
      '--no-test',
    );
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toContain('added model later: openai good-model at');
    expect(added.stdout).toContain('not tested');
    expect(able.requests.length).toBe(before);
    expect(await row('later')).toMatchObject({ test: null, testedAt: null, contextWindow: null });

    await able.down('refused');
    try {
      const failed = await ml('test', 'later');
      expect(failed.code).toBe(1);
      expect(failed.stdout).toContain(
        `model later (openai good-model at ${able.baseUrl}): FAILED: cannot reach ${able.baseUrl}: ECONNREFUSED`,
      );
      expect((await row('later'))!.test).toMatchObject({
        ok: false,
        error: `cannot reach ${able.baseUrl}: ECONNREFUSED`,
      });
    } finally {
      await able.up();
    }
    const ok = await ml('test', 'later', '--json');
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ ok: true, toolCalls: true, jsonReply: true, contextLength: 16384 });
    // The server's context length fills an empty context window.
    expect(await row('later')).toMatchObject({ contextWindow: 16384, test: { ok: true } });

    const ghost = await ml('test', 'ghost');
    expect(ghost.code).toBe(1);
    expect(ghost.stderr).toContain("mindloop: no model 'ghost' in the catalogue");
  }, 60_000);
});

describe('assignModel', () => {
  it("writes the agent's registry row from the catalogue entry, idempotently, prices per 1k; mini gives both mini-prompt roles", async () => {
    const [first] = await assignModel(h.db, { agentId: 'ada', role: 'agent', modelName: 'fast', priority: 5 });
    expect(first).toMatchObject({
      agentId: 'ada',
      name: 'fast',
      modelName: 'fast',
      provider: 'openai',
      model: 'good-model',
      baseUrl: able.baseUrl,
      apiKeyEnv: 'MODELS_TEST_KEY',
      role: 'agent',
      priority: 5,
      trust: 1,
      validator: false,
      costPer1kInput: 0.00015,
      costPer1kOutput: 0.0006,
      contextWindow: 16384,
    });
    const [again] = await assignModel(h.db, { agentId: 'ada', role: 'agent', modelName: 'fast', priority: 5 });
    expect(again!.id).toBe(first!.id);
    const [validator] = await assignModel(h.db, { agentId: 'ada', role: 'validator', modelName: 'fast', trust: 0.8 });
    expect(validator).toMatchObject({ name: 'fast:validator', role: 'validator', validator: true, trust: 0.8 });
    const mini = await assignModel(h.db, { agentId: 'bo', role: 'mini', modelName: 'fast' });
    expect(mini.map((r) => [r.name, r.role])).toEqual([
      ['fast:emotion', 'emotion'],
      ['fast:novelty', 'novelty'],
    ]);
    // The entry's own role when none is named: plain was added as mini, stored as emotion.
    expect((await assignModel(h.db, { agentId: 'bo', modelName: 'plain' })).map((r) => [r.name, r.role])).toEqual([
      ['plain', 'emotion'],
    ]);
    expect(
      await h.db.select({ id: llmRegistry.id }).from(llmRegistry).where(eq(llmRegistry.agentId, 'ada')),
    ).toHaveLength(2);

    // A row the agent had before, by the same name, is not taken over.
    await h.db.insert(llmRegistry).values({ agentId: 'bo', name: 'later', provider: 'scripted', model: 'hand-made' });
    await expect(assignModel(h.db, { agentId: 'bo', modelName: 'later' })).rejects.toThrow(
      "agent bo already has an llm_registry row named 'later' that was not assigned from model 'later'",
    );
    await expect(assignModel(h.db, { agentId: 'bo', modelName: 'ghost' })).rejects.toBeInstanceOf(ModelCatalogueError);
    expect(await getModel(h.db, 'ghost')).toBeNull();
  });
});

describe('mindloop models list and remove', () => {
  it("shows each model's calls, failures, median latency, tokens and spend from the agents' llm_calls", async () => {
    // Real calls by the router through the rows assignModel wrote (the key found by its variable name).
    const router = createLlmRouter({
      db: h.db,
      env: { MODELS_TEST_KEY: key },
      toolsDir: repoToolsDir,
      lifeforce: { enabled: false, prices: defaultPrices },
    });
    const ask = (agentId: string, role: 'agent' | 'emotion') =>
      router.chat({ agentId, role, messages: [{ role: 'user', content: 'hello' }], purpose: 'test' });
    for (let i = 0; i < 3; i++) await ask('ada', 'agent');
    await ask('bo', 'emotion');
    await able.down('unavailable');
    try {
      await expect(ask('ada', 'agent')).rejects.toBeInstanceOf(LlmUnavailableError);
    } finally {
      await able.up();
    }
    // A call through a row that is not from the catalogue counts for no model.
    await h.db.insert(llmCalls).values({
      agentId: 'bo',
      registryId: (await h.db.select().from(llmRegistry).where(eq(llmRegistry.name, 'later')))[0]!.id,
      role: 'agent',
      model: 'hand-made',
      ok: true,
      latencyMs: 5,
      promptTokens: 1000,
      idempotencyKey: 'hand-made-1',
    });

    const fastRows = await h.db
      .select({ id: llmRegistry.id })
      .from(llmRegistry)
      .where(eq(llmRegistry.modelName, 'fast'));
    const calls = await h.db
      .select()
      .from(llmCalls)
      .where(
        inArray(
          llmCalls.registryId,
          fastRows.map((r) => r.id),
        ),
      );
    expect(calls).toHaveLength(5);
    const latencies = calls.map((c) => c.latencyMs!).sort((a, b) => a - b);
    const tokens = calls.reduce((n, c) => n + c.promptTokens + c.completionTokens, 0);
    const spend = calls.reduce((n, c) => n + c.costUsd, 0);
    expect(tokens).toBe(80); // 4 answers of 10 + 10 tokens (the fake's usage); the failure has none
    expect(spend).toBeGreaterThan(0);

    const listed = await ml('list', '--json');
    expect(listed.code, listed.stderr).toBe(0);
    const byName = new Map((JSON.parse(listed.stdout) as Array<Record<string, unknown>>).map((m) => [m.name, m]));
    expect([...byName.keys()]).toEqual(['fast', 'later', 'plain']);
    expect(byName.get('fast')).toMatchObject({
      agents: ['ada', 'bo'],
      calls: 5,
      failures: 1,
      p50LatencyMs: latencies[2],
      promptTokens: 40,
      completionTokens: 40,
    });
    expect(byName.get('fast')!.spendUsd).toBeCloseTo(spend, 6);
    expect(byName.get('later')).toMatchObject({
      agents: [],
      calls: 0,
      failures: 0,
      p50LatencyMs: null,
      promptTokens: 0,
      spendUsd: 0,
    });
    expect(byName.get('plain')).toMatchObject({ agents: ['bo'], calls: 0 });

    const text = await ml('list');
    expect(text.code, text.stderr).toBe(0);
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(
      /^name\s+provider\s+model\s+role\s+\$\/1M in\/out\s+context\s+test\s+calls\s+failed\s+p50\s+tokens\s+spend\s+agents$/,
    );
    expect(lines.find((l) => l.startsWith('fast '))).toMatch(
      new RegExp(
        `^fast\\s+openai\\s+good-model\\s+agent\\s+0\\.15/0\\.6\\s+16384\\s+ok \\d+ ms\\s+5\\s+1\\s+${latencies[2]} ms\\s+80\\s+\\$\\S+\\s+ada,bo$`,
      ),
    );
    expect(lines.find((l) => l.startsWith('later '))).toMatch(
      /^later\s+openai\s+good-model\s+agent\s+0\/0\s+16384\s+ok \d+ ms\s+0\s+0\s+-\s+0\s+\$0\.00\s+-$/,
    );
  }, 60_000);

  it('refuses to remove a model agents use, naming them; removes it once they no longer do', async () => {
    const refused = await ml('remove', 'fast');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      "mindloop: model 'fast' is used by agents ada, bo: name another model in their files (models:) and apply them first",
    );
    expect(await row('fast')).not.toBeNull();
    // The database refuses it too (ON DELETE RESTRICT), whoever asks.
    await expect(h.db.delete(models).where(eq(models.name, 'fast'))).rejects.toThrow();

    expect(await unassignModel(h.db, { agentId: 'ada', modelName: 'fast' })).toBe(2);
    const stillBo = await ml('remove', 'fast');
    expect(stillBo.stderr).toContain(
      "model 'fast' is used by agent bo: name another model in its file (models:) and apply it first",
    );
    expect(await unassignModel(h.db, { agentId: 'bo', modelName: 'fast' })).toBe(2);

    const removed = await ml('remove', 'fast');
    expect(removed.code, removed.stderr).toBe(0);
    expect(removed.stdout).toBe('removed model fast\n');
    expect(await names()).toEqual(['later', 'plain']);
    const ghost = await ml('remove', 'fast');
    expect(ghost.code).toBe(1);
    expect(ghost.stderr).toContain("no model 'fast' in the catalogue");
  }, 60_000);

  it('an empty catalogue says how to add one', async () => {
    await unassignModel(h.db, { agentId: 'bo', modelName: 'plain' });
    for (const name of ['later', 'plain']) expect((await ml('remove', name)).code).toBe(0);
    const r = await ml('list');
    expect(r.stdout).toBe(
      'no models in the catalogue (`mindloop models add <name> --provider … --model …` adds one)\n',
    );
  }, 60_000);
});
