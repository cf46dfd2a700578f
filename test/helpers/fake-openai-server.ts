/**
 * A local stand-in for an OpenAI-compatible endpoint: POST /v1/chat/completions replays
 * chat.completion bodies from test/fixtures/llm/*.json, records what it was sent, and can be
 * taken down (503, connection refused, or hanging) and brought back on the same port. A queue
 * of raw answers (any status, any bytes — invalid UTF-8 included — or a hang) can be served
 * first, one per request, before the fixtures resume.
 * It also answers Anthropic's POST /v1/messages the same way (the `anthropic-*` fixtures).
 * Given `models`, it serves only those: GET /v1/models lists them, GET /v1/models/<id> answers
 * one (with whatever fields the entry carries, e.g. `context_length`), and any other model is a
 * 404 `model_not_found`, as OpenAI answers. Given `answer`, a chat request is answered from its
 * body (`capabilityAnswer`: JSON when asked for it, a call of the bound tool) before the fixtures.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { sendJson } from '../../runtime/http-json.js';

export const llmFixturesDir = join(import.meta.dirname, '..', 'fixtures', 'llm');

/** A recorded `chat.completion` body (the fields the tests read). */
export interface ChatCompletionFixture {
  id: string;
  object: 'chat.completion';
  model: string;
  choices: Array<{
    index: number;
    /** `content` is null when the model only called tools. */
    message: {
      role: 'assistant';
      content: string | null;
      tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>;
    };
    finish_reason: string;
  }>;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

/** Read one fixture by name (file name without `.json`). */
export function loadLlmFixture<T = ChatCompletionFixture>(name: string): T {
  return JSON.parse(readFileSync(join(llmFixturesDir, `${name}.json`), 'utf8')) as T;
}

/** A chat.completion body answering with this content (and these tool calls), as an endpoint sends it. */
export function chatCompletion(
  content: string | null,
  toolCalls: Array<{ id: string; name: string; arguments: string }> = [],
): ChatCompletionFixture {
  return {
    id: 'chatcmpl-raw',
    object: 'chat.completion',
    model: 'gpt-fake',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content,
          ...(toolCalls.length
            ? {
                tool_calls: toolCalls.map((c) => ({
                  id: c.id,
                  type: 'function' as const,
                  function: { name: c.name, arguments: c.arguments },
                })),
              }
            : {}),
        },
        finish_reason: toolCalls.length ? 'tool_calls' : 'stop',
      },
    ],
    usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 },
  };
}

/**
 * One raw answer: `body` sent as is (bytes or text; an object as its JSON) with `status`
 * (default 200), or `hang`: never answer (the client's timeout ends it).
 */
export type RawReply = { status?: number; body: Uint8Array | string | object; contentType?: string } | { hang: true };

export type DownMode = 'unavailable' | 'refused' | 'hang';

/** A model the fake serves: its id and the fields `/v1/models/<id>` answers with. */
export type FakeModel = { id: string } & Record<string, unknown>;

/** A reply computed from a chat request's body; undefined lets the fixtures answer. */
export type AnswerFn = (body: Record<string, unknown>) => ChatCompletionFixture | undefined;

/**
 * An endpoint that can do what it is told it can: with `tools` it calls the first tool bound
 * (no arguments), with `json` it answers `{"ok":true}` to a `response_format` request (else
 * prose), and anything else gets `pong`.
 */
export function capabilityAnswer(can: { json: boolean; tools: boolean }): AnswerFn {
  return (body) => {
    const tools = Array.isArray(body.tools) ? (body.tools as Array<{ function?: { name?: string } }>) : [];
    const tool = tools[0]?.function?.name;
    if (tool !== undefined)
      return can.tools
        ? chatCompletion(null, [{ id: 'call_1', name: tool, arguments: '{}' }])
        : chatCompletion('I cannot call tools.');
    if (body.response_format !== undefined) return chatCompletion(can.json ? '{"ok":true}' : 'Sure! Here it is: ok.');
    return chatCompletion('pong');
  };
}

const modelNotFound = (id: string) => ({
  error: {
    message: `The model \`${id}\` does not exist or you do not have access to it.`,
    type: 'invalid_request_error',
    param: null,
    code: 'model_not_found',
  },
});

export interface RecordedRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown>;
}

export interface FakeOpenAiServer {
  /** Base URL as an OpenAI client wants it (`http://127.0.0.1:<port>/v1`). */
  baseUrl: string;
  /** `http://127.0.0.1:<port>`, as Anthropic's client wants it. */
  origin: string;
  port: number;
  /** Every request that reached the server, in order. */
  requests: RecordedRequest[];
  /** Chat completion requests only. */
  chatRequests(): RecordedRequest[];
  /** Reply with these fixtures in turn; the last one repeats. */
  replay(...fixtures: string[]): void;
  /** Serve these raw answers first, one per chat request, in order; then the fixtures resume. */
  serveRaw(...replies: RawReply[]): void;
  /** How many raw answers have been served (a hang counts when the request arrived). */
  rawServed(): number;
  /** `unavailable`: 503 with OpenAI's error body; `refused`: stop listening; `hang`: never answer. */
  down(mode?: DownMode): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

/** Start the fake on a free port (or `opts.port`), replaying `opts.fixtures` (default: openai-think). */
export async function startFakeOpenAiServer(
  opts: { fixtures?: string[]; port?: number; models?: FakeModel[]; answer?: AnswerFn } = {},
): Promise<FakeOpenAiServer> {
  const available = new Set(
    readdirSync(llmFixturesDir)
      .filter((f) => f.endsWith('.json'))
      .map((f) => f.slice(0, -5)),
  );
  let queue = opts.fixtures ?? ['openai-think'];
  let mode: DownMode | 'up' = 'up';
  const rawQueue: RawReply[] = [];
  let rawServed = 0;
  const requests: RecordedRequest[] = [];
  const hanging = new Set<ServerResponse>();

  const check = (names: string[]) => {
    for (const n of names) if (!available.has(n)) throw new Error(`no LLM fixture ${n} in ${llmFixturesDir}`);
  };
  check(queue);

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    let body: Record<string, unknown> = {};
    try {
      body = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
    } catch {
      return sendJson(res, 400, {
        error: { message: 'invalid JSON body', type: 'invalid_request_error', param: null, code: null },
      });
    }
    const path = (req.url ?? '/').split('?')[0]!;
    requests.push({
      method: req.method ?? 'GET',
      path,
      authorization: req.headers.authorization,
      headers: req.headers,
      body,
    });

    if (mode === 'hang') {
      hanging.add(res);
      res.on('close', () => hanging.delete(res));
      return;
    }
    if (mode === 'unavailable') return sendJson(res, 503, loadLlmFixture('openai-error-503'));

    if (req.method === 'GET' && path === '/v1/models') {
      const data = opts.models ?? [{ id: 'gpt-4o-mini' }];
      return sendJson(res, 200, {
        object: 'list',
        data: data.map((m) => ({ object: 'model', created: 1721172741, owned_by: 'system', ...m })),
      });
    }
    const modelPath = /^\/v1\/models\/(.+)$/.exec(path);
    if (req.method === 'GET' && modelPath && opts.models) {
      const id = decodeURIComponent(modelPath[1]!);
      const found = opts.models.find((m) => m.id === id);
      return found
        ? sendJson(res, 200, { object: 'model', created: 1721172741, owned_by: 'system', ...found })
        : sendJson(res, 404, modelNotFound(id));
    }
    if (req.method !== 'POST' || (path !== '/v1/chat/completions' && path !== '/v1/messages')) {
      return sendJson(res, 404, {
        error: {
          message: `Unknown request URL: ${req.method} ${path}`,
          type: 'invalid_request_error',
          param: null,
          code: 'unknown_url',
        },
      });
    }
    const next = rawQueue.shift();
    if (next) {
      rawServed++;
      if ('hang' in next) {
        hanging.add(res);
        res.on('close', () => hanging.delete(res));
        return;
      }
      const bytes =
        typeof next.body === 'string'
          ? Buffer.from(next.body, 'utf8')
          : next.body instanceof Uint8Array
            ? Buffer.from(next.body)
            : Buffer.from(JSON.stringify(next.body), 'utf8');
      res.writeHead(next.status ?? 200, {
        'content-type': next.contentType ?? 'application/json',
        'content-length': bytes.length,
      });
      res.end(bytes);
      return;
    }
    if (opts.models && typeof body.model === 'string' && !opts.models.some((m) => m.id === body.model))
      return sendJson(res, 404, modelNotFound(body.model));
    const computed = opts.answer?.(body);
    if (computed)
      return sendJson(res, 200, { ...computed, model: typeof body.model === 'string' ? body.model : computed.model });
    const name = queue.length > 1 ? queue.shift()! : queue[0]!;
    // Replayed as recorded, except for the model: echo the requested one, as servers do.
    const fixture = loadLlmFixture<Record<string, unknown>>(name);
    sendJson(res, 200, { ...fixture, model: typeof body.model === 'string' ? body.model : fixture.model });
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) =>
      sendJson(res, 500, { error: { message: String(err), type: 'server_error', param: null, code: null } }),
    );
  });

  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve((server.address() as AddressInfo).port);
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const res of hanging) res.destroy();
      hanging.clear();
      if (!server.listening) return resolve();
      server.close(() => resolve());
      // Keep-alive sockets of the client would hold the server open (and keep "answering").
      server.closeAllConnections();
    });

  const port = await listen(opts.port ?? 0);

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    origin: `http://127.0.0.1:${port}`,
    port,
    requests,
    chatRequests: () => requests.filter((r) => r.path === '/v1/chat/completions' || r.path === '/v1/messages'),
    replay(...fixtures: string[]) {
      check(fixtures);
      if (fixtures.length === 0) throw new Error('replay: name at least one fixture');
      queue = [...fixtures];
    },
    serveRaw(...replies: RawReply[]) {
      rawQueue.push(...replies);
    },
    rawServed: () => rawServed,
    async down(m: DownMode = 'unavailable') {
      mode = m;
      if (m === 'refused') await stop();
    },
    async up() {
      for (const res of hanging) res.destroy();
      hanging.clear();
      mode = 'up';
      if (!server.listening) await listen(port);
    },
    close: stop,
  };
}
