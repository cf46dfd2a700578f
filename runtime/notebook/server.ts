/**
 * The notebook: a web page that shows the agents and what waits for a human, served by the
 * process that runs the workers (`npm start`). Hono on Node's HTTP server; the page itself is
 * plain ES modules under web/notebook/, read once at start and served as they are (no build).
 *
 * Reads come from Postgres (db/queries/notebook.ts) and the loops' status queries; changes go to
 * the workflows' own signals and updates (./actions.ts); the live stream is a feed told by the
 * agents' activities (./feed.ts), sent to the page as server-sent events.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createAdaptorServer } from '@hono/node-server';
import type { Client } from '@temporalio/client';
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { streamSSE } from 'hono/streaming';
import { z } from 'zod';
import { goalMetricsSummary } from '../../core/goal-metrics.js';
import type { Db } from '../../db/client.js';
import { embedderHealth, embedderHealthLine } from '../../db/queries/embedder-health.js';
import { agentGoalMetrics } from '../../db/queries/goal-metrics.js';
import { budgetReport } from '../../db/queries/lifeforce.js';
import { agentMemory, agentRow, agentSeries, inbox, tickDetail, tickPage } from '../../db/queries/notebook.js';
import { listAgents } from '../../db/queries/operator.js';
import { agentLoopStatus, NoAgentLoopError } from '../operator.js';
import { temporalHeader } from '../temporal-connection.js';
import {
  NotebookError,
  answerEscalationFromPage,
  answerForkFromPage,
  escalationAnswers,
  forkGateDeadline,
  ids,
  loopStates,
  parseOr400,
  sendNote,
  signalAgent,
  startAgent,
  type LoopSignal,
} from './actions.js';
import { agentFileRoutes } from './agent-file.js';
import type { FeedEvent, TickFeed } from './feed.js';
import { guard, type GuardOptions } from './guard.js';
import { mcpRoutes } from './mcp.js';
import { modelRoutes, type NotebookModelDeps } from './models.js';

export const defaultNotebookPort = 8234;

export interface NotebookDeps {
  db: Db;
  client: Client;
  feed: TickFeed;
  /** The Temporal cluster and namespace `client` talks to: the CLI lets the notebook answer its `status` only for its own. */
  temporal?: { address: string; namespace: string };
  /** What fills the feed, as the page's footer says: the bus, or this process's worker. */
  feedSource: 'bus' | 'in-process';
  /** Turns a database error into one a person can act on (server away, tables missing). */
  explainDbError?: (err: unknown) => Error;
  log?: (line: string) => void;
  /** What the Models page tests models with (the process environment the keys are read from by name). */
  models?: NotebookModelDeps['models'];
}

/** The page's files: a fixed list, so no request can name another file. */
const pageFiles: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'views.js': 'text/javascript; charset=utf-8',
  'inbox.js': 'text/javascript; charset=utf-8',
  'models.js': 'text/javascript; charset=utf-8',
  'agent-file.js': 'text/javascript; charset=utf-8',
  'goals.js': 'text/javascript; charset=utf-8',
  'mcp.js': 'text/javascript; charset=utf-8',
  'charts.js': 'text/javascript; charset=utf-8',
  'dom.js': 'text/javascript; charset=utf-8',
  'style.css': 'text/css; charset=utf-8',
};
const pageDir = join(import.meta.dirname, '..', '..', 'web', 'notebook');

/**
 * Scripts, styles and connections from this origin only; no inline script, no frames, no
 * plugins. The page builds every element from text (never from HTML), and this is the second
 * wall should something slip.
 */
const contentSecurityPolicy =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/** The most a request body may hold (a note is at most 16 000 characters). */
const maxBodyBytes = 256 * 1024;

async function jsonBody(c: Context): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new NotebookError(400, 'the body is not JSON');
  }
}

const tickQuery = z.object({
  before: z.coerce.number().int().min(0).optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
});
const tickParam = z.coerce.number().int().min(0);

function agentReads(app: Hono, d: NotebookDeps): void {
  app.get('/api/agents', async (c) => {
    const rows = await listAgents(d.db, { limit: 500 });
    const loops = await loopStates(
      d.client,
      rows.map((r) => r.id),
    );
    return c.json({
      feedSource: d.feedSource,
      agents: rows.map((r) => {
        const loop = loops.get(r.id);
        const s = loop?.status;
        return {
          ...r,
          execution: loop?.execution ?? 'UNKNOWN',
          tick: s?.tick ?? r.lastTick,
          phase: s?.phase ?? null,
          paused: s?.paused ?? false,
          mode: s?.operatingMode ?? r.operatingMode,
          llm: s?.llm ?? null,
          lifeforce: s?.lifeforce
            ? {
                available: s.lifeforce.available,
                capacity: s.lifeforce.capacity,
                lastCharge: s.lifeforce.lastCharge,
                exhausted: s.lifeforce.exhausted !== null,
                needs: s.lifeforce.exhausted?.needs ?? null,
              }
            : null,
          last: s?.last ?? null,
        };
      }),
    });
  });
  app.get('/api/agents/:id', async (c) => {
    const id = ids.agent(c.req.param('id'));
    const [row, loop, budget, goals, embedder] = await Promise.all([
      agentRow(d.db, id),
      agentLoopStatus(d.client, id).catch((err: unknown) => ({ error: (err as Error).message })),
      budgetReport(d.db, `agent:${id}`, { entries: 10 }),
      agentGoalMetrics(d.db, id),
      embedderHealth(d.db, id),
    ]);
    if (!row && 'error' in loop) throw new NotebookError(404, `no agent ${id}`);
    // The goal metrics, with the line the CLI's status prints.
    return c.json({
      agent: row ?? null,
      loop,
      lifeforce: budget ?? null,
      goals: { ...goals, summary: goals.total ? goalMetricsSummary(goals) : 'none' },
      // The embedder's health (away since when and why, or back), with the line the CLI's status prints.
      embedder: embedder ? { ...embedder, line: embedderHealthLine(embedder) } : null,
    });
  });
  // The CLI's `status` (cli/status.ts): the loop's status as `mindloop status --json` prints it.
  app.get('/api/agents/:id/loop', async (c) => {
    const id = ids.agent(c.req.param('id'));
    try {
      return c.json({ loop: await agentLoopStatus(d.client, id) });
    } catch (err) {
      if (err instanceof NoAgentLoopError) return c.json({ error: err.message, noLoop: true }, 404);
      throw err;
    }
  });
  app.get('/api/agents/:id/ticks', async (c) => {
    const id = ids.agent(c.req.param('id'));
    const q = parseOr400(tickQuery, c.req.query());
    return c.json({ ticks: await tickPage(d.db, id, q) });
  });
  app.get('/api/agents/:id/ticks/:tick', async (c) => {
    const id = ids.agent(c.req.param('id'));
    const tick = parseOr400(tickParam, c.req.param('tick'), 'tick');
    const detail = await tickDetail(d.db, id, tick);
    if (!detail) throw new NotebookError(404, `agent ${id} has no recorded tick ${tick}`);
    return c.json(detail);
  });
  app.get('/api/agents/:id/memory', async (c) => c.json(await agentMemory(d.db, ids.agent(c.req.param('id')))));
  app.get('/api/agents/:id/series', async (c) => c.json(await agentSeries(d.db, ids.agent(c.req.param('id')))));
}

const loopSignals: readonly LoopSignal[] = ['pause', 'resume', 'stop'];

function agentChanges(app: Hono, d: NotebookDeps): void {
  app.post('/api/agents', async (c) => c.json(await startAgent(d.client, await jsonBody(c)), 201));
  app.post('/api/agents/:id/notes', async (c) =>
    c.json(await sendNote(d.client, ids.agent(c.req.param('id')), await jsonBody(c)), 201),
  );
  app.post('/api/agents/:id/:signal', async (c) => {
    const signal = parseOr400(z.enum(loopSignals), c.req.param('signal'), 'signal');
    return c.json(await signalAgent(d.client, ids.agent(c.req.param('id')), signal));
  });
}

function inboxRoutes(app: Hono, d: NotebookDeps): void {
  app.get('/api/inbox', async (c) => {
    const agentId = c.req.query('agent') ? ids.agent(c.req.query('agent')!) : undefined;
    const items = await inbox(d.db, agentId ? { agentId } : {});
    const forks = await Promise.all(
      items.forks.map(async (f) => ({ ...f, deadlineAt: await forkGateDeadline(d.client, f.id) })),
    );
    return c.json({ escalations: items.escalations, forks, now: new Date().toISOString() });
  });
  app.post('/api/escalations/:id/:answer', async (c) => {
    const answer = parseOr400(
      z.enum(escalationAnswers as [string, ...string[]]),
      c.req.param('answer'),
      'answer',
    ) as (typeof escalationAnswers)[number];
    return c.json(
      await answerEscalationFromPage(d.client, ids.escalation(c.req.param('id')), answer, await jsonBody(c)),
    );
  });
  app.post('/api/forks/:id/:verdict', async (c) => {
    const verdict = parseOr400(z.enum(['approve', 'reject']), c.req.param('verdict'), 'verdict');
    return c.json(await answerForkFromPage(d.client, ids.fork(c.req.param('id')), verdict, await jsonBody(c)));
  });
}

/** Events a slow page may have waiting before it is cut off (it reconnects and reloads). */
const maxQueuedEvents = 500;

/**
 * `GET /api/events?agent=<id>`: the feed as server-sent events (every agent's without `agent`),
 * one `event: <kind>` per feed event, a comment every 15 s to keep proxies from closing it.
 */
function eventRoutes(app: Hono, d: NotebookDeps): void {
  app.get('/api/events', (c) => {
    const agentId = c.req.query('agent') ? ids.agent(c.req.query('agent')!) : undefined;
    return streamSSE(c, async (stream) => {
      let queued = 0;
      const send = (e: FeedEvent) => {
        if (stream.aborted || stream.closed) return;
        if (++queued > maxQueuedEvents) return void stream.close().catch(() => undefined);
        // A page that went away fails its writes: nothing to tell anyone, the abort unsubscribes it.
        void stream
          .writeSSE({ event: e.kind, data: JSON.stringify(e) })
          .catch(() => undefined)
          .finally(() => queued--);
      };
      const unsubscribe = d.feed.subscribe(send, agentId);
      stream.onAbort(unsubscribe);
      await stream.writeSSE({
        event: 'ready',
        data: JSON.stringify({ agentId: agentId ?? null, feedSource: d.feedSource }),
      });
      while (!stream.aborted && !stream.closed) {
        await stream.sleep(15_000);
        if (!stream.aborted && !stream.closed) await stream.write(': keep-alive\n\n');
      }
      unsubscribe();
    });
  });
}

function pageRoutes(app: Hono): void {
  const files = new Map(
    Object.entries(pageFiles).map(([name, type]) => [name, { type, body: readFileSync(join(pageDir, name)) }]),
  );
  const serve = (c: Context, name: string) => {
    const f = files.get(name);
    if (!f) return c.json({ error: `not found: ${name}` }, 404);
    return c.body(new Uint8Array(f.body), 200, { 'content-type': f.type, 'cache-control': 'no-cache' });
  };
  app.get('/', (c) => serve(c, 'index.html'));
  app.get('/static/:file', (c) => serve(c, c.req.param('file')));
}

/** The notebook as a Hono app (tests call `app.request` on it; `startNotebook` serves it). */
export function notebookApp(d: NotebookDeps, g: GuardOptions): Hono {
  const app = new Hono();
  const log = d.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  app.use('*', async (c, next) => {
    await next();
    c.header('content-security-policy', contentSecurityPolicy);
    c.header('x-content-type-options', 'nosniff');
    c.header('referrer-policy', 'no-referrer');
    c.header('x-frame-options', 'DENY');
    if (c.req.path.startsWith('/api/') && !c.res.headers.has('cache-control')) c.header('cache-control', 'no-store');
  });
  app.use('*', guard(g));
  // A CLI command names the cluster it would talk to; a notebook serving another refuses it unread.
  app.use('/api/*', async (c, next) => {
    const wanted = c.req.header(temporalHeader);
    if (wanted === undefined) return next();
    const served = d.temporal ? `${d.temporal.address}/${d.temporal.namespace}` : null;
    if (wanted !== served)
      return c.json({ error: `this notebook serves ${served ?? 'an unnamed Temporal'}, not ${wanted}` }, 421);
    return next();
  });
  app.use(
    '/api/*',
    bodyLimit({
      maxSize: maxBodyBytes,
      onError: (c) => c.json({ error: `request body over ${maxBodyBytes} bytes` }, 413),
    }),
  );
  pageRoutes(app);
  agentReads(app, d);
  agentFileRoutes(app, d);
  mcpRoutes(app, d);
  agentChanges(app, d);
  inboxRoutes(app, d);
  modelRoutes(app, d, jsonBody);
  eventRoutes(app, d);
  app.notFound((c) => c.json({ error: `not found: ${c.req.method} ${c.req.path}` }, 404));
  app.onError((err, c) => {
    if (err instanceof NotebookError) return c.json({ error: err.message, fields: err.fields }, err.status);
    const explained = d.explainDbError ? d.explainDbError(err) : (err as Error);
    log(`notebook: ${c.req.method} ${c.req.path}: ${explained.message}`);
    return c.json({ error: explained.message }, 500);
  });
  return app;
}

export interface NotebookServer {
  /** `http://<host>:<port>/`. */
  url: string;
  port: number;
  close(): Promise<void>;
}

export type StartNotebookOptions = NotebookDeps & {
  /** Default 127.0.0.1; any other address needs `token`. */
  host?: string;
  /** Default 8234; 0 picks a free port. */
  port?: number;
  token?: string;
  allowedHosts?: readonly string[];
};

/** Serve the notebook; resolves once it listens. */
export async function startNotebook(o: StartNotebookOptions): Promise<NotebookServer> {
  const host = o.host ?? '127.0.0.1';
  const app = notebookApp(o, {
    host,
    ...(o.token !== undefined ? { token: o.token } : {}),
    ...(o.allowedHosts ? { allowedHosts: o.allowedHosts } : {}),
  });
  const server = createAdaptorServer({ fetch: app.fetch, hostname: host });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'EADDRINUSE'
          ? new Error(
              `port ${o.port ?? defaultNotebookPort} is taken: set MINDLOOP_NOTEBOOK_PORT to another port (or off)`,
            )
          : err,
      ),
    );
    server.listen(o.port ?? defaultNotebookPort, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const shownHost = host.includes(':') ? `[${host}]` : host === '127.0.0.1' ? 'localhost' : host;
  return {
    url: `http://${shownHost}:${port}/`,
    port,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Open event streams would hold the close forever.
        if ('closeAllConnections' in server) server.closeAllConnections();
      });
    },
  };
}
