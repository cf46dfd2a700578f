/**
 * The agent's page in a real browser (Debian's Chromium driven by playwright-core) shows its goal
 * metrics under the status: the line `mindloop status` prints, and a table of its goals (open
 * ones first) with tasks, open tasks, interruptions and time to achieve. A goal title with markup
 * is shown as text and never runs; the table stays open across the status reloads. Postgres is
 * real; Temporal is absent (the page says so in the status box and shows the goals anyway).
 */
import type { Client } from '@temporalio/client';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agents, goals, tasks } from '../../db/schema/index.js';
import { TickFeed, type NotebookServer } from '../../runtime/notebook/index.js';
import { browseNotebook, type BrowsedNotebook } from '../helpers/notebook.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';

const hostile = '<img src=x onerror=alert(1)>';
const t0 = Date.UTC(2026, 10, 20, 9);
const at = (minutes: number) => new Date(t0 + minutes * 60_000);

let handle: MigratedDatabase;
let notebook: NotebookServer;
const feed = new TickFeed();
let page: Page;
let dialogs: string[];
let nb: BrowsedNotebook;

beforeAll(async () => {
  handle = await migratedDatabase('notebook_goals');
  const db = handle.db;
  await db.insert(agents).values([
    { id: 'gp', name: 'gp' },
    { id: 'bare', name: 'bare' },
  ]);
  const rows = await db
    .insert(goals)
    .values([
      { agentId: 'gp', title: 'done slow', status: 'completed', startedAt: at(0), completedAt: at(130) },
      { agentId: 'gp', title: `ship ${hostile}`, status: 'active', startedAt: at(0) },
      { agentId: 'gp', title: 'paused one', status: 'paused', interruptions: 1, startedAt: at(0) },
    ])
    .returning({ id: goals.id });
  await db.insert(tasks).values([
    { agentId: 'gp', goalId: rows[1]!.id, title: 'a', status: 'open' },
    { agentId: 'gp', goalId: rows[1]!.id, title: 'b', status: 'done' },
  ]);
  const client = {
    workflow: {
      getHandle: () => {
        throw new Error('no Temporal here');
      },
    },
  } as unknown as Client;
  nb = await browseNotebook({ db, client, feed }, { width: 1280 });
  ({ notebook, page, dialogs } = nb);
}, 120_000);

afterAll(async () => {
  await nb?.close();
  await handle?.dispose();
});

describe("the agent page's goals", () => {
  it('shows the summary line and the goals, open first, titles as text', async () => {
    await page.goto(`${notebook.url}#/agent/gp`);
    const summary = page.locator('#goals [data-key="goals"]');
    await summary.waitFor();
    expect(await summary.textContent()).toBe(
      '1 active, 1 achieved of 1 closed (100 %), mean 2h10m to achieve; 1 paused (1 interruption), 0 failed; 0.7 tasks/goal, 0.5 open per open goal',
    );
    await page.locator('#goals summary').click();
    const cells = await page
      .locator('#goals tbody tr')
      .evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    expect(cells.map((r) => r.slice(1))).toEqual([
      ['active', '1', '2', '0', '-'],
      ['paused', '0', '0', '1', '-'],
      ['completed', '0', '0', '0', '2h10m'],
    ]);
    expect(cells[0]![0]).toMatch(new RegExp(`^#\\d+ ship ${hostile.replace(/[()]/g, '\\$&')}$`));
    expect(await page.locator('#goals img').count()).toBe(0);
    // A beat reloads the status box: the new failed goal is counted, and the table stays open.
    await handle.db
      .insert(goals)
      .values({ agentId: 'gp', title: 'gave up', status: 'failed', startedAt: at(0), failedAt: at(5) });
    feed.publish({ kind: 'beat', agentId: 'gp', tick: 1, loop: 'main', model: 'scripted:script' });
    await page.locator('#goals [data-key="goals"]', { hasText: '1 failed' }).waitFor({ timeout: 15_000 });
    expect(await page.locator('#goals').evaluate((d) => (d as unknown as { open: boolean }).open)).toBe(true);
    expect(await page.locator('#goals tbody tr').count()).toBe(4);
    expect(dialogs).toEqual([]);
  }, 60_000);

  it('shows no goals part for an agent without goals', async () => {
    await page.goto(`${notebook.url}#/agent/bare`);
    await page.locator('#status-box').getByText('no Temporal here').waitFor();
    expect(await page.locator('#goals').count()).toBe(0);
  }, 60_000);
});
