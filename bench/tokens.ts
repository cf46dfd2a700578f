/**
 * `npm run bench -- tokens`: the prompt tokens a continuously thinking agent spends, and what its
 * ticks cost in LF, with the providers' prompt caching. A fresh demo agent (default settings) per
 * provider thinks `ticks` ticks through the think and applyCommands activities over a real
 * Postgres (a scratch database on BENCH_DATABASE_URL / TEST_DATABASE_URL), its model a fake
 * server of that provider written here, which counts tokens and caching as the provider documents:
 *
 * - OpenAI (Chat Completions): `prompt_tokens_details.cached_tokens` is the longest prefix of the
 *   prompt seen in an earlier request, rounded down to a multiple of 128 tokens, and 0 below 1 024.
 * - Anthropic (Messages): the prompt up to its last `cache_control` breakpoint (tools, then system
 *   blocks) is a cache read when the same prefix was sent within the last 5 minutes and a cache write
 *   otherwise (`cache_read_input_tokens` / `cache_creation_input_tokens`), if it is at least 1 024
 *   tokens; the rest is `input_tokens`.
 *
 * A token is 4 characters of the request's text (tools as JSON, then each message's role and text).
 * The model answers each tick with a short thought and one diary.add command, so contexts 3 and 5
 * grow and change as they would. LF per tick is what the ledger charged the think call ("after");
 * "before" is today's accounting of the same calls, every prompt token at the input price, same run.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createActivities } from '../activities/index.js';
import { defaultPrices, llmCost } from '../core/lifeforce.js';
import { renderCommandBlock } from '../core/reply-parser.js';
import { createDb } from '../db/client.js';
import { runMigrations } from '../db/migrate.js';
import { agents, llmCalls, llmRegistry } from '../db/schema/index.js';
import { and, asc, eq } from 'drizzle-orm';
import { scratchDatabase } from './lib.js';

export const tokensSizes = { full: { ticks: 50 }, smoke: { ticks: 3 } };

const targets = { cachedShare: 0.7, reduction: 0.4 };
const charsPerToken = 4;
const anthropicTtlMs = 5 * 60_000;
const minCacheable = 1024;

/** USD per 1M tokens, as the providers list them (OpenAI gpt-4.1; Anthropic Claude Sonnet 4, a cache read). */
const providers = {
  openai: { model: 'gpt-4.1', in: 2, cachedIn: 0.5, out: 8 },
  anthropic: { model: 'claude-sonnet-4', in: 3, cachedIn: 0.3, out: 15 },
} as const;
type Provider = keyof typeof providers;

const tokensOf = (text: string) => Math.ceil(text.length / charsPerToken);

function commonPrefix(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

const textOf = (content: unknown): string =>
  typeof content === 'string'
    ? content
    : Array.isArray(content)
      ? content.map((b: { text?: unknown }) => (typeof b.text === 'string' ? b.text : JSON.stringify(b))).join('')
      : JSON.stringify(content ?? '');

interface Usage {
  prompt: number;
  cached: number;
  written: number;
}

/** OpenAI's automatic prefix caching over the requests this server has seen. */
function openAiUsage(seen: string[], body: Record<string, unknown>): Usage {
  const messages = (body.messages ?? []) as Array<{ role: string; content: unknown }>;
  const text = JSON.stringify(body.tools ?? []) + messages.map((m) => `<|${m.role}|>${textOf(m.content)}`).join('');
  const longest = Math.max(0, ...seen.map((s) => commonPrefix(s, text)));
  seen.push(text);
  const prefix = Math.floor(longest / charsPerToken);
  const prompt = tokensOf(text);
  return { prompt, cached: prefix >= minCacheable ? Math.floor(prefix / 128) * 128 : 0, written: 0 };
}

/** Anthropic's explicit caching: the prefix up to the last breakpoint, read when seen within the TTL. */
function anthropicUsage(seen: Map<string, number>, body: Record<string, unknown>): Usage {
  const parts: Array<{ text: string; breakpoint: boolean }> = [
    { text: JSON.stringify(body.tools ?? []), breakpoint: false },
  ];
  const system = body.system;
  for (const b of Array.isArray(system) ? system : system ? [{ text: system }] : [])
    parts.push({ text: textOf([b]), breakpoint: Boolean((b as { cache_control?: unknown }).cache_control) });
  for (const m of (body.messages ?? []) as Array<{ role: string; content: unknown }>)
    parts.push({ text: `<|${m.role}|>${textOf(m.content)}`, breakpoint: false });
  const text = parts.map((p) => p.text).join('');
  const last = parts.map((p) => p.breakpoint).lastIndexOf(true);
  const prefix =
    last < 0
      ? ''
      : parts
          .slice(0, last + 1)
          .map((p) => p.text)
          .join('');
  const prompt = tokensOf(text);
  const cacheable = tokensOf(prefix);
  if (last < 0 || cacheable < minCacheable) return { prompt, cached: 0, written: 0 };
  const now = Date.now();
  const at = seen.get(prefix);
  seen.set(prefix, now);
  return at !== undefined && now - at <= anthropicTtlMs
    ? { prompt, cached: cacheable, written: 0 }
    : { prompt, cached: 0, written: cacheable };
}

/** The model's answer at a tick: a thought and one command. */
function replyText(tick: number): string {
  const thought = `Tick ${tick}: I keep my notes in order and look at what changed since the last tick.`;
  const command = {
    cmdId: 'c1',
    type: 'diary.add',
    args: { title: `Tick ${tick}`, content: `Noted at tick ${tick}.` },
  };
  return `${thought}\n${renderCommandBlock([command])}`;
}

/** A fake server of the provider that answers every chat request and accounts its caching. */
async function fakeProvider(provider: Provider): Promise<{ url: string; close(): Promise<void> }> {
  const openAiSeen: string[] = [];
  const anthropicSeen = new Map<string, number>();
  let tick = 0;
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
    const text = replyText(++tick);
    const completion = tokensOf(text);
    const answer =
      provider === 'openai'
        ? (() => {
            const u = openAiUsage(openAiSeen, body);
            return {
              id: `chatcmpl-${tick}`,
              object: 'chat.completion',
              model: body.model,
              choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
              usage: {
                prompt_tokens: u.prompt,
                completion_tokens: completion,
                total_tokens: u.prompt + completion,
                prompt_tokens_details: { cached_tokens: u.cached },
              },
            };
          })()
        : (() => {
            const u = anthropicUsage(anthropicSeen, body);
            return {
              id: `msg_${tick}`,
              type: 'message',
              role: 'assistant',
              model: body.model,
              content: [{ type: 'text', text }],
              stop_reason: 'end_turn',
              stop_sequence: null,
              usage: {
                input_tokens: u.prompt - u.cached - u.written,
                cache_creation_input_tokens: u.written,
                cache_read_input_tokens: u.cached,
                output_tokens: completion,
              },
            };
          })();
    const bytes = Buffer.from(JSON.stringify(answer));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': bytes.length });
    res.end(bytes);
  };
  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: provider === 'openai' ? `http://127.0.0.1:${port}/v1` : `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

interface TickFigures {
  prompt: number;
  cached: number;
  lf: number;
  lfBefore: number;
}

/** One provider's run: a fresh demo agent thinks `ticks` ticks against its fake server. */
async function runProvider(
  db: ReturnType<typeof createDb>['db'],
  provider: Provider,
  ticks: number,
): Promise<TickFigures[]> {
  const p = providers[provider];
  const server = await fakeProvider(provider);
  const agentId = `demo-${provider}`;
  const price = { costPer1kInput: p.in / 1000, costPer1kOutput: p.out / 1000, costPer1kCachedInput: p.cachedIn / 1000 };
  try {
    await db.insert(agents).values({ id: agentId, name: 'Demo' });
    await db.insert(llmRegistry).values({
      agentId,
      name: 'mind',
      provider,
      model: p.model,
      baseUrl: server.url,
      apiKeyEnv: 'BENCH_KEY',
      ...price,
    });
    const acts = createActivities({ db, llm: { env: { BENCH_KEY: 'bench' }, toolsDir: '' } });
    const start = Date.parse('2026-11-27T12:00:00.000Z');
    const charged: number[] = [];
    for (let tick = 1; tick <= ticks; tick++) {
      const input = {
        agentId,
        tick,
        workflowId: `agent/${agentId}`,
        now: new Date(start + tick * 5_000).toISOString(),
        mode: 'main' as const,
        loop: { contextMode: 'standard' as const, recentK: 5, notesMode: 'auto' as const },
        params: { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0, maxTokens: 512 },
      };
      const thought = await acts.think(input);
      charged.push(thought.lifeforce?.charged ?? Number.NaN);
      await acts.applyCommands({
        agentId,
        tick,
        workflowId: input.workflowId,
        mode: 'main',
        commands: thought.commands,
        rejected: thought.rejected,
        ...(thought.validated ? { validated: true, invalid: thought.invalid ?? [] } : {}),
      });
    }
    const calls = await db
      .select()
      .from(llmCalls)
      .where(and(eq(llmCalls.agentId, agentId), eq(llmCalls.purpose, 'think'), eq(llmCalls.ok, true)))
      .orderBy(asc(llmCalls.tick));
    return calls.map((c, i) => ({
      prompt: c.promptTokens,
      cached: c.cachedPromptTokens ?? 0,
      lf: charged[i]!,
      // Today's accounting of the same call: every prompt token at the input price.
      lfBefore: llmCost(
        defaultPrices,
        { costPer1kInput: price.costPer1kInput, costPer1kOutput: price.costPer1kOutput },
        { promptTokens: c.promptTokens, completionTokens: c.completionTokens },
      ),
    }));
  } finally {
    await server.close();
  }
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

export async function measureTokens(
  sizes: { ticks: number } = tokensSizes.full,
): Promise<{ metrics: Record<string, number>; notes: Record<string, string> }> {
  const scratch = await scratchDatabase('mindloop_bench_tokens');
  const handle = createDb(scratch.url, { max: 4 });
  const runs = {} as Record<Provider, TickFigures[]>;
  try {
    await runMigrations(handle.pool);
    for (const provider of Object.keys(providers) as Provider[])
      runs[provider] = await runProvider(handle.db, provider, sizes.ticks);
  } finally {
    await handle.close();
    await scratch.drop();
  }
  const metrics: Record<string, number> = {};
  const notes: Record<string, string> = {};
  const lines = [
    'tick  ' +
      Object.keys(runs)
        .map((p) => `${p}: prompt cached LF (before)`)
        .join(' | '),
  ];
  for (let i = 0; i < sizes.ticks; i++)
    lines.push(
      `${String(i + 1).padStart(4)}  ` +
        (Object.keys(runs) as Provider[])
          .map((p) => {
            const t = runs[p][i];
            return t ? `${t.prompt} ${t.cached} ${t.lf.toFixed(2)} (${t.lfBefore.toFixed(2)})` : '-';
          })
          .join(' | '),
    );
  process.stdout.write(`${lines.join('\n')}\n`);
  const verdicts: string[] = [];
  for (const [p, figures] of Object.entries(runs) as Array<[Provider, TickFigures[]]>) {
    const share = sum(figures.map((f) => f.cached)) / sum(figures.map((f) => f.prompt));
    const lf = mean(figures.map((f) => f.lf));
    const before = mean(figures.map((f) => f.lfBefore));
    metrics[`prompt_tokens_per_tick_${p}`] = mean(figures.map((f) => f.prompt));
    metrics[`cached_share_${p}`] = share;
    metrics[`lf_per_tick_${p}`] = lf;
    metrics[`lf_per_tick_before_${p}`] = before;
    metrics[`lf_per_tick_reduction_${p}`] = 1 - lf / before;
    verdicts.push(
      `${p}: cached share ${share.toFixed(2)} (target ≥ ${targets.cachedShare}: ${share >= targets.cachedShare ? 'met' : 'missed'}), LF per tick ${(100 * (1 - lf / before)).toFixed(0)} % lower (target ≥ ${100 * targets.reduction} %: ${1 - lf / before >= targets.reduction ? 'met' : 'missed'})`,
    );
  }
  notes.run = `a fresh demo agent (default settings) per provider, ${sizes.ticks} ticks of think + applyCommands over Postgres; its model a fake server of the provider that accounts prompt caching as the provider documents (see bench/tokens.ts); a token is ${charsPerToken} characters`;
  notes.prices = Object.entries(providers)
    .map(([p, v]) => `${p} ${v.model}: $${v.in} in, $${v.cachedIn} cached in, $${v.out} out per 1M tokens`)
    .join('; ');
  notes.lf = `after: what the ledger charged the think call (cached tokens at the cached price, their computation at the same share); before: the same calls with every prompt token at the input price (llmCost without the cached split); ${defaultPrices.lfPerUsd} LF per USD, ${defaultPrices.lfPer1kTokens} LF per 1k tokens of computation. An Anthropic cache write is charged at the input price (its 1.25× write price is not modelled)`;
  notes.targets = verdicts.join('; ');
  return { metrics, notes };
}
