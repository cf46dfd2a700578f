/**
 * Prompt caching, end to end against a real Postgres and the fake provider server: a tick's
 * contexts 0–2 lead its prompt as one system message, byte-identical from one tick to the next;
 * the Anthropic provider marks that message as its cache breakpoint; each call's cached and
 * uncached prompt tokens are recorded in llm_calls as the provider reports them (null when it does
 * not say); and the ledger charges cached tokens at the row's cached price.
 */
import { asc, eq } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { createLlmRouter, type ChatMessage } from '../../activities/llm/index.js';
import { defaultPrices, llmCost } from '../../core/lifeforce.js';
import { agents, llmCalls, llmRegistry, type NewLlmRegistryEntry } from '../../db/schema/index.js';
import { assignModel, getModel } from '../../runtime/models.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { repoRoot, run } from '../helpers/spawn.js';
import { chatCompletion, startFakeOpenAiServer, type FakeOpenAiServer } from '../helpers/fake-openai-server.js';
import { thinkInput } from '../helpers/scripted.js';

let handle: MigratedDatabase;
const servers: FakeOpenAiServer[] = [];
const env = { FAKE_KEY: 'sk-test' };

beforeAll(async () => {
  handle = await migratedDatabase('prompt_cache');
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

afterAll(async () => {
  await handle?.dispose();
});

let seq = 0;
async function newAgent(row: Omit<NewLlmRegistryEntry, 'agentId' | 'name'>): Promise<string> {
  const id = `pc-${++seq}`;
  await handle.db.insert(agents).values({ id, name: id });
  await handle.db.insert(llmRegistry).values({ agentId: id, name: 'mind', apiKeyEnv: 'FAKE_KEY', ...row });
  return id;
}

async function fakeServer(): Promise<FakeOpenAiServer> {
  const s = await startFakeOpenAiServer();
  servers.push(s);
  return s;
}

const callsOf = (agentId: string) =>
  handle.db.select().from(llmCalls).where(eq(llmCalls.agentId, agentId)).orderBy(asc(llmCalls.id));

/** An OpenAI answer whose usage says how many prompt tokens were cached (or says nothing of it). */
function openAiAnswer(text: string, prompt: number, cached?: number) {
  return {
    body: {
      ...chatCompletion(text),
      usage: {
        prompt_tokens: prompt,
        completion_tokens: 20,
        total_tokens: prompt + 20,
        ...(cached !== undefined ? { prompt_tokens_details: { cached_tokens: cached } } : {}),
      },
    },
  };
}

/** An Anthropic Messages answer with its cache accounting. */
function anthropicAnswer(text: string, usage: { input: number; read: number; written: number }) {
  return {
    body: {
      id: 'msg_pc',
      type: 'message',
      role: 'assistant',
      model: 'claude-fake',
      content: [{ type: 'text', text }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: {
        input_tokens: usage.input,
        cache_creation_input_tokens: usage.written,
        cache_read_input_tokens: usage.read,
        output_tokens: 20,
      },
    },
  };
}

describe('a tick prompt keeps contexts 0–2 as its stable prefix', () => {
  it('two consecutive ticks send a byte-identical leading system message holding contexts 0–2 only', async () => {
    const server = await fakeServer();
    const agentId = await newAgent({ provider: 'openai', model: 'gpt-fake', baseUrl: server.baseUrl });
    server.serveRaw(openAiAnswer('First I look around.', 3000), openAiAnswer('Then I plan.', 3100, 2944));
    const acts = createActivities({ db: handle.db, llm: { env, toolsDir: '' } });

    await acts.think(thinkInput(agentId, 1));
    await acts.think({ ...thinkInput(agentId, 2), now: '2026-11-24T04:00:05.000Z' });

    const sent = server.chatRequests().map((r) => r.body.messages as ChatMessage[]);
    expect(sent).toHaveLength(2);
    const [first, second] = sent;
    expect(first![0]!.role).toBe('system');
    // The same bytes: what a provider's prefix cache matches on.
    expect(JSON.stringify(second![0])).toBe(JSON.stringify(first![0]));
    const stable = first![0]!.content;
    for (const n of [0, 1, 2]) expect(stable).toContain(`## Context ${n} `);
    for (const n of [3, 4, 5, 6, 7, 8]) expect(stable).not.toContain(`## Context ${n} `);
    // What changes with the tick follows it.
    expect(stable).not.toContain('tick 1');
    expect(first![1]!.content).toContain('tick 1, time 2026-11-24T04:00:00.000Z');
    expect(second![1]!.content).toContain('tick 2, time 2026-11-24T04:00:05.000Z');
    // The second tick's context shows the first tick's thought: the prompts differ after the prefix only.
    expect(second![1]!.content).toContain('First I look around.');

    const calls = await callsOf(agentId);
    expect(calls.map((c) => [c.promptTokens, c.cachedPromptTokens, c.uncachedPromptTokens])).toEqual([
      // The first answer's usage says nothing of caching: null, not 0.
      [3000, null, null],
      [3100, 2944, 156],
    ]);
  });

  it('Anthropic: the leading block carries the cache breakpoint, and cache reads and writes are recorded', async () => {
    const server = await fakeServer();
    const agentId = await newAgent({ provider: 'anthropic', model: 'claude-fake', baseUrl: server.origin });
    server.serveRaw(
      anthropicAnswer('I start.', { input: 300, read: 0, written: 2500 }),
      anthropicAnswer('I go on.', { input: 320, read: 2500, written: 0 }),
    );
    const acts = createActivities({ db: handle.db, llm: { env, toolsDir: '' } });

    await acts.think(thinkInput(agentId, 1));
    await acts.think(thinkInput(agentId, 2));

    const systems = server.chatRequests().map((r) => r.body.system as Array<Record<string, unknown>>);
    expect(systems).toHaveLength(2);
    for (const system of systems) {
      expect(system[0]).toMatchObject({ type: 'text', cache_control: { type: 'ephemeral' } });
      expect(system[0]!.text).toContain('## Context 2 ');
      // Only the stable block is a breakpoint.
      expect(system.slice(1).filter((b) => 'cache_control' in b)).toEqual([]);
    }
    expect(JSON.stringify(systems[1]![0])).toBe(JSON.stringify(systems[0]![0]));
    // The per-tick text is a message after the system prompt, never in the cached block.
    const user = JSON.stringify(server.chatRequests()[1]!.body.messages);
    expect(user).toContain('tick 2, time');
    expect(JSON.stringify(systems[1])).not.toContain('tick 2, time');

    const calls = await callsOf(agentId);
    expect(calls.map((c) => [c.promptTokens, c.cachedPromptTokens, c.uncachedPromptTokens])).toEqual([
      // A cache write is an uncached read of the prompt.
      [2800, 0, 2800],
      [2820, 2500, 320],
    ]);
    expect(calls[0]!.metadata).toMatchObject({ cacheWriteTokens: 2500 });
  });
});

describe('the ledger charges cached tokens at the cached price', () => {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'You are agent pc.' },
    { role: 'user', content: 'Tick 1.' },
  ];

  async function chargeFor(row: Partial<NewLlmRegistryEntry>, cached: number | undefined) {
    const server = await fakeServer();
    const agentId = await newAgent({ provider: 'openai', model: 'gpt-fake', baseUrl: server.baseUrl, ...row });
    server.serveRaw(openAiAnswer('ok', 4000, cached));
    const res = await createLlmRouter({ db: handle.db, env, toolsDir: '' }).chat({
      agentId,
      role: 'agent',
      messages,
      params: { maxTokens: 64 },
      purpose: 'think',
    });
    const [call] = await callsOf(agentId);
    return { charged: res.lifeforce?.charged, costUsd: res.costUsd, call: call! };
  }

  it('a cached token costs the row’s cached price; with none given it costs the input price', async () => {
    const price = { costPer1kInput: 0.002, costPer1kOutput: 0.008 };
    const discounted = await chargeFor({ ...price, costPer1kCachedInput: 0.0005 }, 3584);
    const undiscounted = await chargeFor(price, 3584);
    const uncachedReply = await chargeFor({ ...price, costPer1kCachedInput: 0.0005 }, undefined);

    const usage = { promptTokens: 4000, completionTokens: 20 };
    expect(discounted.charged).toBe(
      llmCost(defaultPrices, { ...price, costPer1kCachedInput: 0.0005 }, { ...usage, cachedPromptTokens: 3584 }),
    );
    // USD: 416 uncached at 0.002/1k, 3584 cached at 0.0005/1k, 20 out at 0.008/1k.
    expect(discounted.costUsd).toBeCloseTo(0.000832 + 0.001792 + 0.00016, 6);
    // No cached price on the row: every prompt token at the input price, as before caching was known.
    expect(undiscounted.charged).toBe(llmCost(defaultPrices, price, usage));
    expect(uncachedReply.charged).toBe(llmCost(defaultPrices, price, usage));
    expect(discounted.charged!).toBeLessThan(undiscounted.charged! * 0.5);
    expect(uncachedReply.call.cachedPromptTokens).toBeNull();
  });
});

describe('mindloop models add --price-cached-in', () => {
  const add = (...args: string[]) =>
    run(
      process.execPath,
      [
        `${repoRoot}/bin/mindloop.mjs`,
        'models',
        'add',
        ...args,
        '--provider',
        'openai',
        '--model',
        'm',
        '--base-url',
        'http://127.0.0.1:9/v1',
        '--no-test',
      ],
      { DATABASE_URL: handle.url },
    );

  it('stores the cached price, and an agent given the model is charged it; without the flag the input price holds', async () => {
    const withFlag = await add('cheap-cache', '--price-in', '2', '--price-out', '8', '--price-cached-in', '0.5');
    expect(withFlag.code, withFlag.stderr).toBe(0);
    const without = await add('no-cache-price', '--price-in', '2', '--price-out', '8');
    expect(without.code, without.stderr).toBe(0);
    const refused = await add('bad-cache-price', '--price-cached-in', '-1');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--price-cached-in');

    expect((await getModel(handle.db, 'cheap-cache'))?.priceCachedInPer1m).toBe(0.5);
    expect((await getModel(handle.db, 'no-cache-price'))?.priceCachedInPer1m).toBeNull();
    await handle.db.insert(agents).values({ id: 'pc-cli', name: 'pc-cli' });
    const [cheap] = await assignModel(handle.db, { agentId: 'pc-cli', modelName: 'cheap-cache', role: 'agent' });
    const [plain] = await assignModel(handle.db, { agentId: 'pc-cli', modelName: 'no-cache-price', role: 'oversight' });
    expect(cheap).toMatchObject({ costPer1kInput: 0.002, costPer1kCachedInput: 0.0005 });
    expect(plain).toMatchObject({ costPer1kInput: 0.002, costPer1kCachedInput: null });
  });
});
