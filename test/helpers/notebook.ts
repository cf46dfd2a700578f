/**
 * The notebook in a real browser for the page tests: a notebook over the test's database on a free
 * port (a Temporal client that never connects unless the test gives one: these pages read Postgres
 * only) and a page of Debian's Chromium, driven by playwright-core, that records every dialog (a
 * script that ran where only text belongs would show one).
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@temporalio/client';
import { chromium, type Browser, type Page } from 'playwright-core';
import {
  TickFeed,
  startNotebook,
  type NotebookServer,
  type StartNotebookOptions,
} from '../../runtime/notebook/index.js';

export const chromiumPath = process.env.MINDLOOP_CHROMIUM ?? '/usr/bin/chromium';
/** Where the page tests write their screenshots. */
export const notebookArtifacts = join(import.meta.dirname, '..', 'artifacts', 'notebook');

export interface BrowsedNotebook {
  notebook: NotebookServer;
  browser: Browser;
  page: Page;
  /** The messages of the dialogs the page opened (each dismissed). */
  dialogs: string[];
  close(): Promise<void>;
}

export async function browseNotebook(
  deps: Pick<StartNotebookOptions, 'db'> & Partial<StartNotebookOptions>,
  page: { width?: number; acceptDownloads?: boolean } = {},
): Promise<BrowsedNotebook> {
  if (!existsSync(chromiumPath))
    throw new Error(
      `no Chromium at ${chromiumPath}: \`npm test\` installs it (apt-get install -y chromium), or set MINDLOOP_CHROMIUM`,
    );
  mkdirSync(notebookArtifacts, { recursive: true });
  const notebook = await startNotebook({
    client: new Client(),
    feed: new TickFeed(),
    feedSource: 'in-process',
    port: 0,
    log: () => undefined,
    ...deps,
  });
  const browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
  const p = await browser.newPage({
    viewport: { width: page.width ?? 1400, height: 900 },
    ...(page.acceptDownloads ? { acceptDownloads: true } : {}),
  });
  const dialogs: string[] = [];
  p.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  return {
    notebook,
    browser,
    page: p,
    dialogs,
    async close() {
      await browser.close();
      await notebook.close();
    },
  };
}
