/**
 * An agent's file in the notebook, in a real browser (Debian's Chromium driven by
 * playwright-core), against the real Postgres:
 * - an agent applied from a file shows that file's YAML in its page's "agent file" tab, with the
 *   way to change it (edit the file, then `mindloop apply -f <id>.yaml`);
 * - the download link downloads `<id>.yaml`, whose text is the export (`renderAgentFile` of the
 *   live document) and parses back to the same document; `?format=json` is that document as JSON;
 * - an unknown agent answers 404 with a message, a bad id or format 400 naming the field;
 * - agent text holding HTML (`<script>` in a goal title) is shown as those characters and never runs.
 * No Temporal: the file is read from Postgres only.
 */
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { applyAgentFileTo, readLiveDocument } from '../../activities/agent-file.js';
import { parseAgentFile, renderAgentFile } from '../../core/agent-file/index.js';
import type { NotebookServer } from '../../runtime/notebook/index.js';
import { browseNotebook, notebookArtifacts as artifacts, type BrowsedNotebook } from '../helpers/notebook.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';

const hostile = '<script>window.__ran = 1</script><img src=x onerror=alert(1)>';

const agentFile = `id: ada
name: Ada Lovelace
description: works out what the engine can compute
systemPrompt:
  short: You are Ada. Work in small steps.
goals:
  - title: Write the first program
    priority: 2
  - title: ${JSON.stringify(hostile)}
models:
  agent: local
pace:
  delayMs: 2000
config:
  max_tokens: 256
`;

let h: MigratedDatabase;
let notebook: NotebookServer;
let page: Page;
let dialogs: string[];
let nb: BrowsedNotebook;

beforeAll(async () => {
  h = await migratedDatabase('mindloop_notebook_agent_file', 2);
  await applyAgentFileTo(h.db, {
    agentId: 'ada',
    document: parse(agentFile) as unknown,
    appliedBy: 'test',
    source: 'ada.yaml',
  });
  nb = await browseNotebook({ db: h.db }, { acceptDownloads: true });
  ({ notebook, page, dialogs } = nb);
}, 120_000);

afterAll(async () => {
  await nb?.close();
  await h?.dispose();
});

const exported = async () => renderAgentFile((await readLiveDocument(h.db, 'ada'))!, 'yaml');

describe("the notebook's agent file", () => {
  it("shows the agent's file read-only in its page, with the way to change it", async () => {
    await page.goto(`${notebook.url}#/agent/ada`);
    await page.click('button[data-tab="agent file"]');
    const text = page.locator('#agent-file-text');
    await text.waitFor();
    const shown = (await text.textContent()) ?? '';
    expect(shown).toBe(await exported());
    expect(shown).toContain('name: Ada Lovelace');
    expect(shown).toContain('title: Write the first program');
    expect(await page.locator('#agent-file-how').textContent()).toBe(
      'The agent as it is now, as mindloop agents export ada writes it. Read-only here: to change it, edit the file, then mindloop apply -f ada.yaml.',
    );
    expect(await page.locator('#pane-file textarea, #pane-file input, #pane-file [contenteditable]').count()).toBe(0);
    await page.screenshot({ path: join(artifacts, 'agent-file.png'), fullPage: true });
  });

  it('shows a goal title holding HTML as text, and nothing of it runs', async () => {
    expect(await page.locator('#agent-file-text').textContent()).toContain(hostile);
    expect(await page.locator('#pane-file script, #pane-file img, main img').count()).toBe(0);
    expect(await page.evaluate('typeof window.__ran')).toBe('undefined');
    expect(dialogs).toEqual([]);
  });

  it('downloads <id>.yaml: the export, which parses back to the live document', async () => {
    const link = page.locator('#agent-file-download');
    expect(await link.getAttribute('download')).toBe('ada.yaml');
    const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
    expect(download.suggestedFilename()).toBe('ada.yaml');
    const body = readFileSync((await download.path())!, 'utf8');
    const live = (await readLiveDocument(h.db, 'ada'))!;
    expect(body).toBe(renderAgentFile(live, 'yaml'));
    const reparsed = parseAgentFile(body);
    expect(reparsed.ok && reparsed.document).toEqual(live);
    expect((parse(body) as { goals: Array<{ title: string }> }).goals.map((g) => g.title).sort()).toEqual([
      hostile,
      'Write the first program',
    ]);
  });

  it('answers YAML, or JSON with ?format=json; an unknown agent 404 with a message; a bad id or format 400 naming it', async () => {
    const get = (path: string) => fetch(new URL(path, notebook.url));
    const yaml = await get('/api/agents/ada/file');
    expect(yaml.status).toBe(200);
    expect(yaml.headers.get('content-type')).toBe('application/yaml; charset=utf-8');
    expect(yaml.headers.get('content-disposition')).toBe('inline; filename="ada.yaml"');
    expect(await yaml.text()).toBe(await exported());

    const json = await get('/api/agents/ada/file?format=json');
    expect(json.status).toBe(200);
    expect(json.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const live = (await readLiveDocument(h.db, 'ada'))!;
    expect(await json.json()).toEqual(JSON.parse(renderAgentFile(live, 'json')));

    const ghost = await get('/api/agents/ghost/file');
    expect(ghost.status).toBe(404);
    expect(await ghost.json()).toMatchObject({
      error: 'no agent ghost: apply its file first (mindloop apply -f ghost.yaml)',
    });

    const badFormat = await get('/api/agents/ada/file?format=xml');
    expect(badFormat.status).toBe(400);
    expect(((await badFormat.json()) as { fields: Array<{ field: string }> }).fields.map((f) => f.field)).toEqual([
      'format',
    ]);
    expect((await get('/api/agents/..%2Fada/file')).status).toBe(400);
    // The guard holds here as on every route: a Host the loopback notebook does not serve is refused.
    const foreign = await new Promise<number>((resolve, reject) => {
      const u = new URL('/api/agents/ada/file', notebook.url);
      request(
        { host: '127.0.0.1', port: u.port, path: u.pathname, headers: { host: 'evil.example' } },
        (res) => (res.resume(), resolve(res.statusCode ?? 0)),
      )
        .on('error', reject)
        .end();
    });
    expect(foreign).toBe(403);
  });

  it('shows an unknown agent’s page with the 404 message in place of the file', async () => {
    await page.goto(`${notebook.url}#/agent/ghost`);
    await page.click('button[data-tab="agent file"]');
    const box = page.locator('#agent-file [role="alert"]');
    await box.waitFor();
    expect(await box.textContent()).toBe(
      'refused (404): no agent ghost: apply its file first (mindloop apply -f ghost.yaml)',
    );
  });
});
