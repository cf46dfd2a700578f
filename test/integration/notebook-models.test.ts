/**
 * The notebook's Models page in a real browser (Debian's Chromium driven by playwright-core),
 * against the real Postgres and a fake OpenAI-compatible server (real HTTP):
 * - a model added from the form is tested first and listed with what the test found;
 * - every bad input is refused with the reason shown and nothing stored, never a false "added":
 *   a name that is not a slug, a key variable that is not set, a model the server lacks, a server
 *   nobody answers on;
 * - the list shows each model's calls, failures, median latency, tokens and spend from the
 *   agents' llm_calls rows; test calls the model again (and shows a server that went away);
 * - remove is refused, naming the agent, while an agent uses the model, and works once none does;
 * - a hostile model id is shown as text and never runs.
 * No Temporal: the Models page talks to Postgres and the model servers only.
 */
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agents, llmCalls, models } from '../../db/schema/index.js';
import type { NotebookServer } from '../../runtime/notebook/index.js';
import { assignModel, getModel, unassignModel } from '../../runtime/models.js';
import { browseNotebook, notebookArtifacts as artifacts, type BrowsedNotebook } from '../helpers/notebook.js';
import { freePort, migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { capabilityAnswer, startFakeOpenAiServer, type FakeOpenAiServer } from '../helpers/fake-openai-server.js';

const hostile = '<img src=x onerror=alert(1)>';

let h: MigratedDatabase;
let server: FakeOpenAiServer;
let notebook: NotebookServer;
let page: Page;
let deadUrl: string;
let dialogs: string[];
let nb: BrowsedNotebook;

beforeAll(async () => {
  h = await migratedDatabase('mindloop_notebook_models', 2);
  await h.db.insert(agents).values({ id: 'ada', name: 'Ada' });
  server = await startFakeOpenAiServer({
    models: [{ id: 'good-model', max_model_len: 8192 }],
    answer: capabilityAnswer({ json: true, tools: true }),
  });
  deadUrl = `http://127.0.0.1:${await freePort()}/v1`;
  nb = await browseNotebook({ db: h.db, models: { env: { NB_TEST_KEY: 'sk-nb-test' } } });
  ({ notebook, page, dialogs } = nb);
}, 120_000);

afterAll(async () => {
  await nb?.close();
  await server?.close();
  await h?.dispose();
});

const modelRow = (name: string) => page.locator(`#models tr[data-model="${name}"]`);

/** Fill the add form and submit it; returns the result box's text once it has settled. */
async function add(fields: {
  name: string;
  model: string;
  baseUrl?: string;
  apiKeyEnv?: string;
  priceIn?: string;
  priceOut?: string;
  test?: boolean;
}): Promise<string> {
  await page.fill('#model-name', fields.name);
  await page.fill('#model-model', fields.model);
  await page.fill('#model-baseUrl', fields.baseUrl ?? '');
  await page.fill('#model-apiKeyEnv', fields.apiKeyEnv ?? '');
  await page.fill('#model-priceInPer1m', fields.priceIn ?? '');
  await page.fill('#model-priceOutPer1m', fields.priceOut ?? '');
  await page.setChecked('#model-test', fields.test ?? true);
  await page.click('#model-add');
  const result = page.locator('#model-result');
  await expect.poll(async () => result.textContent(), { timeout: 30_000 }).not.toMatch(/^(testing|adding)…$/);
  return (await result.textContent()) ?? '';
}

describe('the notebook Models page', () => {
  it('adds a model from the form after testing it, and lists it with what the test found', async () => {
    await page.goto(`${notebook.url}#/models`);
    await expect.poll(async () => page.locator('#models-note').textContent()).toBe('no models yet: add one below');
    expect(await page.locator('header nav a.current').textContent()).toBe('Models');
    const text = await add({
      name: 'nb-fast',
      model: 'good-model',
      baseUrl: server.baseUrl,
      apiKeyEnv: 'NB_TEST_KEY',
      priceIn: '0.5',
      priceOut: '1.5',
    });
    expect(text).toMatch(/^added nb-fast: ok in \d+ ms · JSON yes · tools yes · context 8192$/);
    const row = modelRow('nb-fast');
    await row.waitFor();
    expect(await row.locator('td.test').textContent()).toMatch(/^ok in \d+ ms · JSON yes · tools yes · context 8192/);
    expect(await row.textContent()).toContain('key: $NB_TEST_KEY');
    expect(await getModel(h.db, 'nb-fast')).toMatchObject({
      priceInPer1m: 0.5,
      priceOutPer1m: 1.5,
      contextWindow: 8192,
      apiKeyEnv: 'NB_TEST_KEY',
      test: { ok: true },
    });
    expect(server.chatRequests().every((r) => r.authorization === 'Bearer sk-nb-test')).toBe(true);
    await page.screenshot({ path: join(artifacts, 'models.png'), fullPage: true });
  });

  it('refuses bad input with the reason shown and stores nothing', async () => {
    const cases: Array<[Parameters<typeof add>[0], RegExp, string]> = [
      [{ name: 'Bad Name', model: 'good-model', baseUrl: server.baseUrl }, /refused \(400\)/, 'name'],
      [
        { name: 'nb-nokey', model: 'good-model', baseUrl: server.baseUrl, apiKeyEnv: 'NB_UNSET_KEY' },
        /environment variable NB_UNSET_KEY is not set in this process/,
        'apiKeyEnv',
      ],
      [
        { name: 'nb-lacks', model: 'gpt-9', baseUrl: server.baseUrl },
        /does not serve model 'gpt-9' \(it serves: good-model\)/,
        'model',
      ],
      [
        { name: 'nb-dead', model: 'good-model', baseUrl: deadUrl },
        /cannot reach http:\/\/127\.0\.0\.1:\d+\/v1: ECONNREFUSED/,
        'baseUrl',
      ],
      [{ name: 'nb-url', model: 'good-model', baseUrl: 'localhost:11434' }, /an http\(s\) URL/, 'baseUrl'],
    ];
    for (const [fields, message, field] of cases) {
      const text = await add(fields);
      expect(text, fields.name).not.toMatch(/^added/);
      expect(text).toMatch(/^refused \(\d{3}\)/);
      expect(await page.locator('#model-result .field-error').getAttribute('data-field')).toBe(field);
      expect(text).toMatch(message);
    }
    expect((await h.db.select({ name: models.name }).from(models)).map((m) => m.name)).toEqual(['nb-fast']);
    await expect.poll(async () => page.locator('#models tbody tr').count()).toBe(1);
  }, 90_000);

  it("shows the calls, failures, median latency, tokens and spend of the agents' llm_calls, and tests again on asking", async () => {
    const [reg] = await assignModel(h.db, { agentId: 'ada', role: 'agent', modelName: 'nb-fast' });
    const call = (i: number, latencyMs: number, ok: boolean) => ({
      agentId: 'ada',
      registryId: reg!.id,
      role: 'agent' as const,
      model: 'good-model',
      ok,
      latencyMs,
      promptTokens: ok ? 1000 : 0,
      completionTokens: ok ? 500 : 0,
      costUsd: ok ? 0.002 : 0,
      idempotencyKey: `nb-${i}`,
    });
    await h.db
      .insert(llmCalls)
      .values([call(1, 100, true), call(2, 300, true), call(3, 200, true), call(4, 50, false)]);
    await page.click('button:text-is("refresh")');
    const row = modelRow('nb-fast');
    await expect.poll(async () => row.locator('td.calls').textContent()).toBe('4');
    expect(await row.locator('td.failures').textContent()).toBe('1');
    // The median of 50, 100, 200 and 300 ms.
    expect(await row.locator('td.p50').textContent()).toBe('150 ms');
    expect(await row.locator('td.tokens').textContent()).toBe('4.5k');
    expect(await row.locator('td.spend').textContent()).toBe('$0.0060');
    expect(await row.locator('td.agents').textContent()).toBe('ada');

    const before = server.chatRequests().length;
    await row.locator('button[data-action="test"]').click();
    await expect
      .poll(async () => modelRow('nb-fast').locator('td.result').textContent(), { timeout: 30_000 })
      .toMatch(/^ok in \d+ ms · JSON yes · tools yes · context 8192$/);
    expect(server.chatRequests().length).toBe(before + 3);

    await server.down('refused');
    try {
      await modelRow('nb-fast').locator('button[data-action="test"]').click();
      await expect
        .poll(async () => modelRow('nb-fast').locator('td.result').textContent(), { timeout: 30_000 })
        .toMatch(/^FAILED: cannot reach .*ECONNREFUSED$/);
      expect(await modelRow('nb-fast').locator('td.test').textContent()).toMatch(/^FAILED: cannot reach/);
      expect((await getModel(h.db, 'nb-fast'))!.test).toMatchObject({ ok: false });
    } finally {
      await server.up();
    }
  }, 90_000);

  it('refuses to remove a model an agent uses, naming it; removes it once none does', async () => {
    await modelRow('nb-fast').locator('button[data-action="remove"]').click();
    const result = modelRow('nb-fast').locator('td.result');
    await expect.poll(async () => result.textContent()).toMatch(/^refused \(409\): /);
    expect(await result.textContent()).toContain(
      "model 'nb-fast' is used by agent ada: name another model in its file (models:) and apply it first",
    );
    await page.screenshot({ path: join(artifacts, 'models-remove-refused.png'), fullPage: true });
    expect(await getModel(h.db, 'nb-fast')).not.toBeNull();

    await unassignModel(h.db, { agentId: 'ada', modelName: 'nb-fast' });
    await modelRow('nb-fast').locator('button[data-action="remove"]').click();
    await expect.poll(async () => page.locator('#models-note').textContent()).toBe('no models yet: add one below');
    expect(await getModel(h.db, 'nb-fast')).toBeNull();
  });

  it('the API refuses what the form cannot send: unknown fields (a key itself among them), a bad test flag, a bad or unknown name', async () => {
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(new URL(path, notebook.url), {
        method,
        headers: { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as { error: string; fields?: Array<{ field: string }> } };
    };
    const withKey = await call('POST', '/api/models', {
      name: 'nb-key',
      provider: 'openai',
      model: 'good-model',
      baseUrl: server.baseUrl,
      apiKey: 'sk-live-123',
    });
    expect(withKey.status).toBe(400);
    expect(withKey.body.error).toBe("(input): unknown field 'apiKey'");
    const badFlag = await call('POST', '/api/models', {
      name: 'nb-flag',
      provider: 'openai',
      model: 'good-model',
      test: 'yes',
    });
    expect(badFlag.status).toBe(400);
    expect(badFlag.body.fields?.map((f) => f.field)).toEqual(['test']);
    const notObject = await call('POST', '/api/models', ['nb-x']);
    expect(notObject.status).toBe(400);
    expect(notObject.body.fields?.map((f) => f.field)).toEqual(['name', 'provider', 'model']);
    expect((await call('POST', '/api/models/Not%20A%20Slug/test', {})).status).toBe(400);
    const ghost = await call('POST', '/api/models/ghost/test', {});
    expect(ghost).toMatchObject({
      status: 404,
      body: { error: "no model 'ghost' in the catalogue (`mindloop models list` shows them)" },
    });
    expect((await call('DELETE', '/api/models/ghost', {})).status).toBe(404);
    expect(await h.db.select().from(models)).toEqual([]);
  });

  it('shows a hostile model id as text', async () => {
    const text = await add({ name: 'nb-hostile', model: hostile, baseUrl: server.baseUrl, test: false });
    expect(text).toBe('added nb-hostile: not tested');
    const row = modelRow('nb-hostile');
    await row.waitFor();
    expect(await row.textContent()).toContain(`openai ${hostile}`);
    expect(await page.locator('#models img').count()).toBe(0);
    expect(dialogs).toEqual([]);
    expect((await h.db.select().from(models).where(eq(models.name, 'nb-hostile')))[0]!.model).toBe(hostile);
  });
});
