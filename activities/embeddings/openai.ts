/**
 * An OpenAI-compatible embedder: POST `{baseUrl}/embeddings` with `{model, input: [...]}` and read
 * `data[i].embedding` back in `data[i].index` order. OpenAI's own API, and servers that mimic it
 * (llama.cpp's server, Ollama, vLLM, text-embeddings-inference). The key, when the server needs one,
 * comes from the environment variable the model catalogue names; it is never stored.
 */
import { checkDimensions, type Embedder } from './types.js';

export interface OpenAiEmbedderOptions {
  /** The API root, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`. */
  baseUrl: string;
  model: string;
  apiKey?: string;
  /** Each request's limit (default 30 s). */
  timeoutMs?: number;
  /** Texts a request carries at most (default 256); more are sent in several requests. */
  batchSize?: number;
  fetch?: typeof fetch;
}

/** A reply that is not a list of vectors, one per text. */
export class EmbeddingReplyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EmbeddingReplyError';
  }
}

/** One request: the vectors of `input`, in its order. */
export async function requestEmbeddings(opts: OpenAiEmbedderOptions, input: readonly string[]): Promise<number[][]> {
  const doFetch = opts.fetch ?? fetch;
  const url = `${opts.baseUrl.replace(/\/+$/, '')}/embeddings`;
  const res = await doFetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {}),
    },
    body: JSON.stringify({ model: opts.model, input }),
    signal: AbortSignal.timeout(opts.timeoutMs ?? 30_000),
  });
  const text = await res.text();
  if (!res.ok) throw new EmbeddingReplyError(`POST ${url} answered ${res.status}: ${text.slice(0, 300)}`);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new EmbeddingReplyError(`POST ${url} answered with no JSON: ${text.slice(0, 300)}`);
  }
  const data = (body as { data?: unknown }).data;
  if (!Array.isArray(data) || data.length !== input.length) {
    throw new EmbeddingReplyError(
      `POST ${url}: expected ${input.length} embeddings in data, got ${text.slice(0, 300)}`,
    );
  }
  const out = new Array<number[]>(input.length);
  data.forEach((d: { index?: unknown; embedding?: unknown }, pos) => {
    const i = typeof d.index === 'number' ? d.index : pos;
    const v = d.embedding;
    if (!Array.isArray(v) || !v.every((x) => typeof x === 'number') || i < 0 || i >= input.length || out[i]) {
      throw new EmbeddingReplyError(`POST ${url}: data[${pos}] is not an embedding of one of the inputs`);
    }
    out[i] = v as number[];
  });
  return out;
}

/**
 * The embedder for a model whose size is known (the catalogue's record). Every vector is checked
 * against it: a server that changed model underneath is refused, not cached.
 */
export function createOpenAiEmbedder(opts: OpenAiEmbedderOptions & { dimensions: number }): Embedder {
  const batch = Math.max(1, opts.batchSize ?? 256);
  return {
    model: opts.model,
    dimensions: opts.dimensions,
    async embed(texts) {
      const out: Float32Array[] = [];
      for (let start = 0; start < texts.length; start += batch) {
        for (const v of await requestEmbeddings(opts, texts.slice(start, start + batch))) {
          checkDimensions(opts.model, opts.dimensions, v);
          out.push(Float32Array.from(v));
        }
      }
      return out;
    },
  };
}

/** The embedder for a model whose size is not known yet: one text is embedded to learn it. */
export async function probeOpenAiEmbedder(opts: OpenAiEmbedderOptions): Promise<Embedder> {
  const [v] = await requestEmbeddings(opts, ['dimension probe']);
  if (!v || v.length === 0) throw new EmbeddingReplyError(`${opts.model} returned an empty embedding`);
  return createOpenAiEmbedder({ ...opts, dimensions: v.length });
}
