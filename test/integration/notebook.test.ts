/**
 * The notebook in a real browser (Debian's Chromium driven by playwright-core), against a real
 * Temporal dev server, Postgres, the product's workflows and activities, and the scripted model:
 * - the agents page lists a ticking agent, and its page shows new ticks arriving live (the feed,
 *   no reload); a tick opens to the prompt its model got (equal to what the scripted model
 *   received, message for message, the system message folded), its reply, commands, verdict,
 *   emotions and novelty;
 * - a note sent from the note box comes back with its id and is in the agent's next prompt, as
 *   the page shows it; a tick whose prompt was not stored shows the note in its records instead;
 * - the inbox lists the agent's escalation, its shell held in a danger zone and a fork at its
 *   gate, with deadlines counting down; a veto without a reason is refused; approving the
 *   escalation there reaches the agent as the answer note; rejecting the fork's gate applies nothing;
 * - an agent whose budget cannot cover its think shows, in the list and on its page, the smallest
 *   grant that lets it go on;
 * - a bad input is refused with its field named; hostile text from an agent or a note
 *   (`<img src=x onerror=alert(1)>`) is shown as text and never runs;
 * - a non-loopback bind needs a token, carried as a bearer header or the cookie `/?token=` sets.
 * Screenshots of each page land in test/artifacts/notebook/.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { and, eq } from 'drizzle-orm';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ScriptedReplyFn } from '../../activities/llm/providers/scripted.js';
import type { ChatMessage } from '../../activities/llm/types.js';
import { ensureDemoAgent } from '../../cli/forks.js';
import { workflowIds } from '../../core/ids.js';
import { lfRound, lifeforceNeeds } from '../../core/lifeforce.js';
import { stateOf } from '../../db/queries/lifeforce.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { recordFeedback } from '../../db/queries/learnings.js';
import { agents, lifeforceBudgets, llmRegistry, notes, tickPrompts } from '../../db/schema/index.js';
import { TickFeed, feedSink, startNotebook, type NotebookServer } from '../../runtime/notebook/index.js';
import { startStack, type Stack } from '../../runtime/stack.js';
import { startAgentLoop, startSuccessorFork } from '../../runtime/workflow-starts.js';
import { bundleWorkflows } from '../../workers/queues.js';
import type { AgentStatus } from '../../workflows/agent-loop/index.js';
import type { EscalationStatus } from '../../workflows/escalation.js';
import type { ForkState } from '../../workflows/successor-fork.js';
import { freePort, freshPostgresDatabase, repoToolsDir, tempDir, testEnv } from '../helpers/env.js';
import { startWorkers, type RunningWorkers } from '../helpers/harness.js';
import { neutralReflexReplies, thinkScript } from '../helpers/scripted.js';
import { stopStackTest } from '../helpers/temporal.js';
import { waitFor } from '../helpers/worker-process.js';

/** What a function run in the page reads of it (the tests' TypeScript has no DOM types). */
type PageGlobals = { document: { querySelector(selector: string): { textContent: string | null } | null } };

const chromiumPath = process.env.MINDLOOP_CHROMIUM ?? '/usr/bin/chromium';
const artifacts = join(import.meta.dirname, '..', 'artifacts', 'notebook');
const hostile = '<img src=x onerror=alert(1)>';
const escalationId = 'ticker.t1.e1';

const data = tempDir('notebook');
let stack: Stack;
let client: Client;
let connection: NativeConnection;
let workers: RunningWorkers | undefined;
let notebook: NotebookServer;
let feed: TickFeed;
let browser: Browser;
let page: Page;
let dropDb: () => Promise<void>;
/** Every think prompt the agent was given, joined (what its context carried). */
const contexts: string[] = [];
/** Every think prompt the agent was given, message by message, as the model received it. */
const prompts: ChatMessage[][] = [];
/** Dialogs the page opened: a hostile text that ran would open one. */
const dialogs: string[] = [];

/** The agent's first reply escalates, writes a hostile diary entry and tries a dangerous shell; later ones are quiet. */
const think = thinkScript((messages, i) => {
  contexts.push(messages.map((m) => m.content).join('\n'));
  prompts.push(messages.map((m) => ({ ...m })));
  if (i === 0) {
    return `Thinking about ${hostile} and the garden.\n${renderCommandBlock([
      {
        cmdId: 'e1',
        type: 'escalate',
        args: { task: `may I publish the garden plan? ${hostile}`, category: 'general' },
      },
      { cmdId: 'd1', type: 'diary.add', args: { title: 'First entry', content: `a diary line with ${hostile}` } },
      // A danger zone (DELETE on a critical table): held for a human, not run.
      { cmdId: 's1', type: 'shell', args: { command: 'psql -c "delete from agents"' } },
    ])}`;
  }
  return `Quiet tick ${i + 1}: tending the notes.`;
});
/** The oversight answers at once but asks for a human, so the escalation waits in the inbox. */
const oversightAnswer = JSON.stringify({
  verdict: 'approve',
  solution: 'publish it after a read-through',
  teaching_moment: 'ask early',
  recommended_tools: [],
  needs_human: true,
});
const reply: ScriptedReplyFn = (call) => {
  if (call.purpose?.startsWith('oversight:')) return oversightAnswer;
  // +2 lets every command through the validators, so the shell meets the danger rules.
  if (call.purpose === 'validate') return '+2 -- fine';
  // Upkeep the loop may ask for in a long run (an abstract, a fact check): a plain answer.
  if (call.purpose !== undefined && call.purpose !== 'think' && !(call.purpose in neutralReflexReplies))
    return 'Nothing to add.';
  return think(call);
};

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });
}

beforeAll(async () => {
  if (!existsSync(chromiumPath))
    throw new Error(
      `no Chromium at ${chromiumPath}: \`npm test\` installs it (apt-get install -y chromium), or set MINDLOOP_CHROMIUM`,
    );
  mkdirSync(artifacts, { recursive: true });
  const fresh = await freshPostgresDatabase('mindloop_notebook');
  dropDb = fresh.drop;
  stack = await startStack({
    env: testEnv({ MINDLOOP_DATA_DIR: data.path, TEMPORAL_PORT: await freePort(), DATABASE_URL: fresh.url }),
    ui: false,
  });
  const db = stack.db.db;
  await db.insert(agents).values({ id: 'ticker', name: 'Ticker' });
  await db.insert(llmRegistry).values([
    { agentId: 'ticker', name: 'script', provider: 'scripted', model: 'scripted-ticker', role: 'agent', priority: 1 },
    {
      agentId: 'ticker',
      name: 'overseer',
      provider: 'scripted',
      model: 'scripted-oversight',
      role: 'oversight',
      priority: 1,
    },
    {
      agentId: 'ticker',
      name: 'checker',
      provider: 'scripted',
      model: 'scripted-checker',
      role: 'validator',
      validator: true,
      priority: 10,
      trust: 1,
    },
  ]);
  // A learning derived from three rejections, so the memory shows one with its reason.
  for (let i = 0; i < 3; i++)
    await recordFeedback(db, {
      agentId: 'ticker',
      kind: 'reject',
      action: 'shell.exec',
      reason: 'rm -rf',
      source: 'test',
    });
  await ensureDemoAgent(db, 'nb-forker');
  await db.insert(agents).values({ id: 'starved', name: 'Starved' });
  await db.insert(llmRegistry).values({
    agentId: 'starved',
    name: 'script',
    provider: 'scripted',
    model: 'scripted-starved',
    role: 'agent',
    priority: 1,
  });
  const [bundle, temporalClient, native] = await Promise.all([
    bundleWorkflows(),
    Connection.connect(stack.temporal.connection),
    NativeConnection.connect(stack.temporal.connection),
  ]);
  client = new Client({ connection: temporalClient });
  connection = native;
  feed = new TickFeed();
  workers = await startWorkers(connection, [
    {
      taskQueue: 'mindloop',
      workflowBundle: bundle,
      activities: createActivities({
        db,
        dataDir: data.path,
        llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: reply },
        events: feedSink(feed),
      }),
    },
  ]);
  notebook = await startNotebook({ db, client, feed, feedSource: 'in-process', port: 0, log: () => undefined });
  await startAgentLoop(client, { agentId: 'ticker', name: 'Ticker', delayMs: 700, lifeforce: { capacity: 100_000 } });
  // 1 LF: less than any think reserves, so its first think is refused and it waits.
  await startAgentLoop(client, { agentId: 'starved', name: 'Starved', delayMs: 60_000, lifeforce: { capacity: 1 } });
  await startSuccessorFork(
    client,
    {
      agentId: 'nb-forker',
      forkId: 'nb-fork',
      patch: { kind: 'strategy', strategy: 'keyword_cluster' },
      evaluation: { kind: 'abstracts_replay', lastN: 60, window: 10 },
    },
    { from: 'recency' },
  );
  browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await notebook?.close();
  await client?.workflow
    .getHandle(workflowIds.agent('ticker'))
    .terminate('test over')
    .catch(() => undefined);
  await client?.workflow
    .getHandle(workflowIds.agent('starved'))
    .terminate('test over')
    .catch(() => undefined);
  await client?.workflow
    .getHandle(workflowIds.fork('nb-fork'))
    .terminate('test over')
    .catch(() => undefined);
  await stopStackTest({
    runs: [workers?.stop()],
    connections: [connection, client?.connection],
    stack,
    dropDb,
    data,
  });
}, 60_000);

const url = (path = '') => `${notebook.url.replace('localhost', '127.0.0.1')}${path}`;

describe('the notebook page', () => {
  it('lists the ticking agent; its page shows ticks arriving live, each opening to the prompt its model got, reply, commands and verdict', async () => {
    await page.goto(url());
    const row = page.locator('tr[data-agent="ticker"]');
    await row.waitFor();
    await expect
      .poll(async () => Number(await row.locator('td.tick').textContent()), { timeout: 20_000 })
      .toBeGreaterThanOrEqual(2);
    expect(await row.locator('td.phase').textContent()).toMatch(/^(starting|thinking|reflexes|executing|pacing|idle)/);
    expect(await row.locator('td.llm').textContent()).toContain('scripted');
    expect(await row.locator('td.lifeforce').textContent()).toMatch(/LF/);
    await shot('agents');

    await page.goto(url('#/agent/ticker'));
    await page.locator('#ticks li.tick').first().waitFor();
    await page.evaluate(() => Object.assign(globalThis, { notReloaded: true }));
    const newest = Number(await page.locator('#ticks li.tick').first().getAttribute('data-tick'));
    // Two more ticks appear by themselves: the feed, not a reload.
    await page.locator(`#ticks li.tick[data-tick="${newest + 2}"]`).waitFor({ timeout: 20_000 });
    expect(await page.evaluate(() => (globalThis as { notReloaded?: boolean }).notReloaded)).toBe(true);
    await expect
      .poll(async () => page.locator('#status dd[data-key="tick"]').textContent(), { timeout: 10_000 })
      .not.toBe(String(newest));

    // Tick 1: the prompt its model got, the hostile reply, its escalate and diary commands, the validator's vote.
    const first = page.locator('#ticks li.tick[data-tick="1"]');
    await first.locator('summary').first().click();
    await first.locator('.tick-detail').waitFor();
    const messages = first.locator('.prompt details.prompt-message');
    expect(
      await messages.evaluateAll((els) =>
        els.map((e) => ({ role: e.getAttribute('data-role'), open: e.hasAttribute('open') })),
      ),
    ).toEqual([
      { role: 'system', open: false },
      { role: 'user', open: true },
    ]);
    expect(await first.locator('.prompt pre.prompt-text').allTextContents()).toEqual(prompts[0]!.map((m) => m.content));
    await messages.first().locator('summary').click();
    expect(await messages.first().evaluate((e) => e.hasAttribute('open'))).toBe(true);
    expect(await first.locator('.notes-read').count()).toBe(0);
    expect(await first.locator('pre.reply').textContent()).toContain(hostile);
    await expect.poll(async () => first.locator('tr.cmd').count()).toBe(3);
    expect(await first.locator('tr.cmd td.kind').allTextContents()).toEqual(['applied', 'applied', 'held']);
    expect(await first.locator('tr.cmd.held').textContent()).toMatch(
      /held for human approval \(delete_critical_table\)/,
    );
    expect(await first.locator('table.votes').textContent()).toContain('checker');
    const detail = await first.locator('.tick-detail').textContent();
    expect(detail).toMatch(/calm:2 \(steady work\)/);
    expect(detail).toMatch(/novelty \d+/);
    expect(await first.locator('.calls li').allTextContents()).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^think: scripted:scripted-ticker ok/),
        expect.stringMatching(/^validate: /),
      ]),
    );
    expect(await page.locator('main img').count()).toBe(0);
    await shot('agent-ticks');

    await page.locator('button[data-tab="pictures"]').click();
    await page.locator('#chart-novelty path.series').waitFor();
    for (const id of ['chart-rating', 'chart-trust', 'chart-decay', 'chart-lifeforce'])
      expect(await page.locator(`#${id} > svg path.series`).count(), id).toBeGreaterThan(0);
    await shot('agent-pictures');

    await page.locator('button[data-tab="memory"]').click();
    await page.locator('#memory .memory').waitFor();
    expect(await page.locator('#memory').textContent()).toContain(`a diary line with ${hostile}`);
    expect(await page.locator('#memory .why').first().textContent()).toMatch(/why: .*rm -rf/);
    expect(await page.locator('main img').count()).toBe(0);
    await shot('agent-memory');
    expect(dialogs).toEqual([]);
  });

  it('sends a note from the note box: its id comes back and the next prompt carries it (the records, for a tick without one); a bad one is refused naming the field', async () => {
    await page.goto(url('#/agent/ticker'));
    await page.locator('button[data-tab="ticks"]').click();
    await page.locator('#note-form').waitFor();
    const marker = `marker-${randomUUID()}`;
    const text = `look here ${hostile} ${marker}`;
    await page.locator('#note-text').fill(text);
    await page.locator('#note-send').click();
    const ok = page.locator('#note-result .ok');
    await ok.waitFor();
    const noteId = Number(/note #(\d+) delivered/.exec((await ok.textContent()) ?? '')?.[1]);
    expect(noteId).toBeGreaterThan(0);

    const seenAt = await waitFor('the note read by a tick', 20_000, async () => {
      const [n] = await stack.db.db
        .select({ tickSeen: notes.tickSeen })
        .from(notes)
        .where(and(eq(notes.id, noteId), eq(notes.agentId, 'ticker')));
      return n?.tickSeen ?? undefined;
    });
    expect(contexts.some((c) => c.includes(marker))).toBe(true);
    const tick = page.locator(`#ticks li.tick[data-tick="${seenAt}"]`);
    await tick.waitFor({ timeout: 20_000 });
    await tick.locator('summary').first().click();
    // The tick's prompt on the page carries the note as the model read it, as text.
    const user = tick.locator('.prompt details.prompt-message[data-role="user"] pre.prompt-text');
    await user.waitFor();
    const line = (await user.textContent())!.split('\n').find((l) => l.startsWith(`- note #${noteId} from `));
    expect(line?.endsWith(`): ${text}`), line).toBe(true);
    expect(await page.locator('main img').count()).toBe(0);
    await shot('agent-note-in-context');

    // The same tick without its stored prompt (as one recorded before prompts were kept): the
    // records show the note it read instead.
    await stack.db.db.delete(tickPrompts).where(and(eq(tickPrompts.agentId, 'ticker'), eq(tickPrompts.tick, seenAt)));
    await tick.locator('summary').first().click();
    await page.waitForTimeout(200);
    await tick.locator('summary').first().click();
    const read = tick.locator(`.notes-read li[data-note="${noteId}"] .note-text`);
    await read.waitFor();
    expect(await read.textContent()).toBe(text);
    expect(await tick.locator('.prompt').count()).toBe(0);
    expect(await page.locator('main img').count()).toBe(0);
    await shot('agent-note-in-records');

    // A priority outside 0..10: refused by the update's own schema, the field named.
    await page.locator('#note-text').fill('too loud');
    await page.locator('#note-priority').fill('11');
    await page.locator('#note-send').click();
    const field = page.locator('#note-result .field-error[data-field="priority"]');
    await field.waitFor();
    expect(await field.textContent()).toMatch(/priority: .*10/);
    await shot('agent-bad-input');
    expect(dialogs).toEqual([]);
  });

  it('the inbox: an escalation, a danger-zone hold and a fork gate count down; a veto needs a reason; approving reaches the agent as its answer; rejecting the gate applies nothing', async () => {
    const esc = client.workflow.getHandle(workflowIds.escalation(escalationId));
    await waitFor('the escalation waiting for a human', 30_000, async () =>
      (await esc.query<EscalationStatus>('status')).phase === 'awaiting_human' ? true : undefined,
    );
    await waitFor('the held shell waiting for a human', 30_000, async () =>
      (await inboxNow()).escalations.filter((e) => e.kind === 'danger_hold' && e.status === 'awaiting_human').length
        ? true
        : undefined,
    );
    const fork = client.workflow.getHandle(workflowIds.fork('nb-fork'));
    await waitFor('the fork at its gate', 60_000, async () =>
      (await fork.query<ForkState>('forkState')).phase === 'awaiting_approval' ? true : undefined,
    );

    await page.goto(url('#/inbox'));
    const card = page.locator(`article[data-escalation="${escalationId}"]`);
    await card.waitFor();
    expect(await card.locator('.task').textContent()).toBe(`may I publish the garden plan? ${hostile}`);
    const gate = page.locator('article[data-fork="nb-fork"]');
    await gate.waitFor();
    expect(await gate.textContent()).toMatch(/verdict APPROVE/);
    expect(await gate.locator('ul.artifacts li').count()).toBeGreaterThan(0);
    const left = await card.locator('.deadline').textContent();
    expect(left).toMatch(/^23 h \d\d min \d\d s left$/);
    expect(await gate.locator('.deadline').textContent()).toMatch(/ left$/);
    await expect.poll(async () => card.locator('.deadline').textContent(), { timeout: 3000 }).not.toBe(left);
    // The held shell: a danger-zone hold, its flag and the action it would run.
    const hold = page.locator('article.danger');
    await hold.waitFor();
    expect(await hold.textContent()).toContain('delete_critical_table');
    expect(await hold.locator('pre.json').textContent()).toContain('delete from agents');
    expect(await page.locator('#inbox-count').textContent()).toBe('3');
    await shot('inbox');

    // A veto without a reason: refused by the workflow's own schema, the field named; then with one.
    await hold.locator('button[data-answer="veto"]').click();
    await hold.locator('.field-error[data-field="reason"]').waitFor();
    await shot('inbox-bad-input');
    const holdId = await hold.getAttribute('data-escalation');
    await hold.locator('textarea').fill('never delete the agents table');
    await hold.locator('button[data-answer="veto"]').click();
    await hold.locator('.ok').waitFor();
    expect(await client.workflow.getHandle(workflowIds.escalation(holdId!)).result()).toMatchObject({
      outcome: 'denied',
      decidedBy: 'human',
    });

    const comment = `ship it <script>alert(2)</script> ${randomUUID()}`;
    await card.locator('textarea').fill(comment);
    await card.locator('button[data-answer="approve"]').click();
    await card.locator('.ok').waitFor();
    expect(await card.locator('.ok').textContent()).toMatch(/approve sent/);
    expect(await esc.result()).toMatchObject({ outcome: 'approved', decidedBy: 'human' });
    // The answer reaches the agent as a note, in its next context.
    await waitFor('the answer in the agent’s context', 20_000, async () =>
      contexts.some((c) => c.includes(comment)) ? true : undefined,
    );

    await gate.locator('button[data-answer="reject"]').click();
    // The answer or the refusal, whichever the page shows: a refusal fails here with its words.
    // Read the moment it shows, in the page: 1.5 s later the inbox reloads without the answered
    // gate, and a second call to read it could come after that under a full suite's load.
    const answered = await page.waitForFunction(
      () =>
        (globalThis as unknown as PageGlobals).document.querySelector(
          'article[data-fork="nb-fork"] .result :is(.ok, .error)',
        )?.textContent ?? '',
      undefined,
      { timeout: 60_000 },
    );
    expect(await answered.jsonValue()).toBe('gate rejected');
    expect(await fork.result()).toMatchObject({ gate: 'rejected', applied: null });
    await shot('inbox-answered');
    await expect.poll(async () => page.locator('article.item').count(), { timeout: 10_000 }).toBe(0);
    expect(dialogs).toEqual([]);
  });

  it('pauses and resumes the loop from its page', async () => {
    await page.goto(url('#/agent/ticker'));
    await page.locator('#status').waitFor();
    await page.locator('button[data-action="pause"]').first().click();
    await expect
      .poll(async () => page.locator('#status dd[data-key="loop"]').textContent(), { timeout: 15_000 })
      .toMatch(/paused/);
    await page.locator('button[data-action="resume"]').first().click();
    await expect
      .poll(async () => page.locator('#status dd[data-key="loop"]').textContent(), { timeout: 15_000 })
      .not.toMatch(/paused/);
  });

  it('an exhausted agent shows the smallest grant that lets it go on, in the list and on its page', async () => {
    const starved = client.workflow.getHandle(workflowIds.agent('starved'));
    await expect
      .poll(async () => (await starved.query<AgentStatus>('status')).phase, { timeout: 30_000 })
      .toBe('exhausted');
    const { needed } = (await starved.query<AgentStatus>('status')).lifeforce!.exhausted!;
    const [row] = await stack.db.db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, 'agent:starved'));
    const needs = lifeforceNeeds(stateOf(row!), needed, Date.now());
    expect(needs.grant).toBeGreaterThan(0);
    const said = `EXHAUSTED: needs a ${lfRound(needs.grant)} LF grant; capacity must be ≥ ${lfRound(needs.capacity!)} LF`;
    await page.goto(url());
    const cell = page.locator('tr[data-agent="starved"] td.lifeforce');
    await cell.waitFor();
    expect(await cell.textContent()).toContain(said);
    await page.goto(url('#/agent/starved'));
    await expect
      .poll(async () => page.locator('#status dd[data-key="lifeforce"]').textContent(), { timeout: 10_000 })
      .toContain(said);
    await shot('agent-exhausted');
  });
});

/** What the inbox API says now. */
async function inboxNow(): Promise<{ escalations: Array<{ id: string; kind: string; status: string }> }> {
  return (await (await fetch(url('api/inbox'))).json()) as {
    escalations: Array<{ id: string; kind: string; status: string }>;
  };
}

type Answer = { error: string; fields: Array<{ field: string; message: string }> };

/** GET /api/inbox with this Host header (fetch would send its own). */
function statusWithHost(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: notebook.port, path: '/api/inbox', headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the notebook API', () => {
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(url(path), {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  it('refuses bad input with the fields named, forms from elsewhere, and other sites', async () => {
    const empty = await post('api/agents/ticker/notes', { text: '' });
    expect(empty.status).toBe(400);
    expect(((await empty.json()) as Answer).fields).toEqual([expect.objectContaining({ field: 'text' })]);
    const extra = await post('api/agents/ticker/notes', { text: 'hi', audio: { path: '/etc/passwd' } });
    expect(extra.status).toBe(400);
    expect(((await extra.json()) as Answer).fields).toEqual([{ field: 'audio', message: 'unknown field' }]);
    const badId = await post('api/agents/no%20such/notes', { text: 'hi' });
    expect(((await badId.json()) as Answer).fields).toEqual([expect.objectContaining({ field: 'agent' })]);
    const badTick = await fetch(url('api/agents/ticker/ticks/-1'));
    expect(badTick.status).toBe(400);
    expect(((await badTick.json()) as Answer).fields).toEqual([expect.objectContaining({ field: 'tick' })]);
    expect((await fetch(url('api/agents/ticker/ticks/999999'))).status).toBe(404);
    const badStart = await post('api/agents', { agentId: '../x' });
    expect(((await badStart.json()) as Answer).fields).toEqual([expect.objectContaining({ field: 'agentId' })]);
    expect(
      (
        await fetch(url('api/agents/ticker/notes'), {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: 'text=hi',
        })
      ).status,
    ).toBe(415);
    expect((await post('api/agents/ticker/pause', {}, { origin: 'http://evil.example' })).status).toBe(403);
    expect(await statusWithHost('evil.example')).toBe(403);
    expect(await statusWithHost(`localhost:${notebook.port}`)).toBe(200);
    const page404 = await fetch(url('static/..%2F..%2Fpackage.json'));
    expect(page404.status).toBe(404);
    const home = await fetch(url());
    expect(home.headers.get('content-security-policy')).toContain("script-src 'self'");
  });

  it('an event stream that closes leaves the feed', async () => {
    const before = feed.listenerCount;
    const abort = new AbortController();
    const res = await fetch(url('api/events?agent=ticker'), { signal: abort.signal });
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toContain('event: ready');
    expect(feed.listenerCount).toBe(before + 1);
    abort.abort();
    await waitFor('the stream’s listener gone', 5000, async () => (feed.listenerCount === before ? true : undefined));
  });

  it('binds another address only with a token, carried as a bearer or the cookie /?token= sets', async () => {
    const base = {
      db: stack.db.db,
      client,
      feed: new TickFeed(),
      feedSource: 'in-process' as const,
      port: 0,
      log: () => undefined,
    };
    await expect(startNotebook({ ...base, host: '0.0.0.0' })).rejects.toThrow(/without a token/);
    const token = 'a-long-enough-test-token-0123456789';
    const open = await startNotebook({ ...base, host: '0.0.0.0', token });
    try {
      const at = `http://127.0.0.1:${open.port}`;
      expect((await fetch(`${at}/api/inbox`)).status).toBe(401);
      expect((await fetch(`${at}/api/inbox`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
      const first = await fetch(`${at}/?token=${token}`, { redirect: 'manual' });
      expect(first.status).toBe(303);
      expect(first.headers.get('location')).toBe('/');
      const cookie = first.headers.get('set-cookie') ?? '';
      expect(cookie).toMatch(/HttpOnly/i);
      expect(cookie).toMatch(/SameSite=Strict/i);
      expect((await fetch(`${at}/api/inbox`, { headers: { cookie: cookie.split(';')[0]! } })).status).toBe(200);
      expect(
        (await fetch(`${at}/api/inbox`, { headers: { authorization: 'Bearer wrong-token-wrong-token' } })).status,
      ).toBe(401);
    } finally {
      await open.close();
    }
  });
});
