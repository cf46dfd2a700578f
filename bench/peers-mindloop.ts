/**
 * Mindloop in the peers bench's crash test (bench/peers.ts runs it; the killed worker process is
 * bench/peers-mindloop-child.ts). A step is one tick of the product's agent loop, and its model
 * is an OpenAI-compatible endpoint served here, in the harness's process, so that it outlives
 * the worker the harness kills and counts every request that reached it, as a provider bills it.
 *
 * Each think is answered with a reply whose one command is `diary.add`: the tick's side effect is
 * a diary_entries row, which carries the tick and has no unique key, so a command applied twice
 * would show as a second row (what keeps it once is the loop, not the table). The reflexes' mini
 * prompts (emotion, novelty) are answered too, and every request is recorded with its tick and
 * purpose: a model call asked again after a crash is a cost even when its answer is not applied
 * twice.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { eq, sql } from 'drizzle-orm';
import type { Db } from '../db/client.js';
import { agents, diaryEntries, llmRegistry } from '../db/schema/index.js';
import { sendJson } from '../runtime/http-json.js';

/** What a request asked for: the tick's reply, one of the reflexes' mini prompts, anything else. */
export type CallPurpose = 'think' | 'emotion' | 'novelty' | 'other';

export interface ModelCall {
  /** The tick the request belongs to (null: none could be read from it). */
  tick: number | null;
  purpose: CallPurpose;
}

export interface ScriptedEndpoint {
  /** The base URL for `loop`'s llm_registry row (the loop's name is in the path). */
  baseUrl(loop: string): string;
  /** Every request for `loop` that reached the endpoint, in order (answered or not). */
  calls(loop: string): ModelCall[];
  /** Leave the think request of `tick` for `loop` unanswered, once, and call `onHold` when it arrives. */
  holdThink(loop: string, tick: number, onHold: () => void): void;
  close(): Promise<void>;
}

const topics = [
  'river',
  'orbit',
  'quartz',
  'meadow',
  'cipher',
  'ember',
  'lantern',
  'harbor',
  'thistle',
  'comet',
  'granite',
];

/** The tick's reply: a thought that differs from the last ones (the reflexes compare them) and one diary.add. */
export function thinkReply(tick: number): string {
  const topic = topics[tick % topics.length]!;
  const other = topics[(tick * 7 + 3) % topics.length]!;
  const command = {
    cmd_id: `tick${tick}`,
    type: 'diary.add',
    args: { title: `tick ${tick}`, content: `At tick ${tick} I thought about ${topic} and ${other}.` },
    description: 'keep the thought',
  };
  return `Thought at tick ${tick}: ${topic} ${tick * 13} leads to ${other}.\n<<<COMMANDS\n${JSON.stringify([command])}\nCOMMANDS>>>\nConfidence: 0.8`;
}

/** Which call this is and its tick, from the prompt the loop rendered (its context 7 shows the tick; the mini prompts quote the reply). */
export function classify(text: string): ModelCall {
  const quoted = [...text.matchAll(/Thought at tick (\d+)/g)];
  const lastQuoted = quoted.length ? Number(quoted[quoted.length - 1]![1]) : null;
  if (text.includes('Name the emotions')) return { purpose: 'emotion', tick: lastQuoted };
  // The NEW reply comes after the PREVIOUS ones: the last quoted tick is this tick's.
  if (text.includes('PREVIOUS replies')) return { purpose: 'novelty', tick: lastQuoted };
  const own = /\btick (\d+), time /.exec(text);
  if (own) return { purpose: 'think', tick: Number(own[1]) };
  return { purpose: 'other', tick: null };
}

function answer(call: ModelCall): string {
  switch (call.purpose) {
    case 'think':
      return thinkReply(call.tick!);
    case 'emotion':
      return 'curiosity:3 (bench)';
    case 'novelty':
      return '{"novelty": 60, "new": ["bench"], "tags": ["bench"]}';
    default:
      return 'OK';
  }
}

function completion(content: string, model: string): object {
  return {
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 },
  };
}

/** The endpoint on a free port of 127.0.0.1: POST /<loop>/v1/chat/completions. */
export async function startScriptedEndpoint(): Promise<ScriptedEndpoint> {
  const byLoop = new Map<string, ModelCall[]>();
  const holds = new Map<string, { tick: number; onHold: () => void }>();
  const held = new Set<ServerResponse>();

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const m = /^\/([^/]+)\/v1\/chat\/completions$/.exec((req.url ?? '').split('?')[0]!);
    if (req.method !== 'POST' || !m)
      return sendJson(res, 404, {
        error: { message: `no ${req.method} ${req.url} here`, type: 'invalid_request_error' },
      });
    const loop = decodeURIComponent(m[1]!);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
      model?: string;
      messages?: Array<{ content?: unknown }>;
    };
    const text = (body.messages ?? [])
      .map((x) => (typeof x.content === 'string' ? x.content : JSON.stringify(x.content)))
      .join('\n');
    const call = classify(text);
    const calls = byLoop.get(loop) ?? [];
    calls.push(call);
    byLoop.set(loop, calls);
    const hold = holds.get(loop);
    if (hold && call.purpose === 'think' && call.tick === hold.tick) {
      holds.delete(loop);
      held.add(res);
      res.on('close', () => held.delete(res));
      hold.onHold();
      return;
    }
    sendJson(res, 200, completion(answer(call), body.model ?? 'scripted-endpoint'));
  };
  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) =>
      sendJson(res, 500, { error: { message: String(err), type: 'server_error' } }),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: (loop) => `http://127.0.0.1:${port}/${encodeURIComponent(loop)}/v1`,
    calls: (loop) => byLoop.get(loop) ?? [],
    holdThink(loop, tick, onHold) {
      holds.set(loop, { tick, onHold });
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of held) res.destroy();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The agent of one crash loop, its only model the endpoint (the loop's id is the agent's). */
export async function seedCrashAgent(db: Db, loop: string, baseUrl: string): Promise<void> {
  await db.insert(agents).values({ id: loop, name: loop });
  await db.insert(llmRegistry).values({
    agentId: loop,
    name: 'endpoint',
    provider: 'openai',
    model: 'scripted-endpoint',
    baseUrl,
    role: 'agent',
    priority: 1,
  });
}

/** Diary rows per tick of the loop's agent. */
export async function diaryRowsPerTick(db: Db, loop: string): Promise<Map<number, number>> {
  const rows = await db
    .select({ tick: diaryEntries.tick, n: sql<number>`count(*)::int` })
    .from(diaryEntries)
    .where(eq(diaryEntries.agentId, loop))
    .groupBy(diaryEntries.tick);
  return new Map(rows.filter((r) => r.tick !== null).map((r) => [r.tick!, r.n]));
}

/** Requests beyond the first for the same tick and purpose: model calls asked again. */
export function repeatedCalls(calls: readonly ModelCall[]): {
  repeated: number;
  byPurpose: Partial<Record<CallPurpose, number>>;
  unattributed: number;
} {
  const seen = new Map<string, number>();
  const byPurpose: Partial<Record<CallPurpose, number>> = {};
  let repeated = 0;
  let unattributed = 0;
  for (const c of calls) {
    if (c.tick === null) {
      unattributed++;
      continue;
    }
    const key = `${c.purpose}:${c.tick}`;
    const n = (seen.get(key) ?? 0) + 1;
    seen.set(key, n);
    if (n > 1) {
      repeated++;
      byPurpose[c.purpose] = (byPurpose[c.purpose] ?? 0) + 1;
    }
  }
  return { repeated, byPurpose, unattributed };
}
