/**
 * How a model catalogue entry names an embedder (`mindloop models add <name> --role embedder`):
 * provider `local` with model `all-MiniLM-L6-v2` is the offline embedder; provider `openai` is an
 * OpenAI-compatible `/embeddings` endpoint at `base_url` (OpenAI's own API when unset), its key in
 * the variable `api_key_env` names. `testEmbedder` embeds one text, which also tells the size.
 */
import type { EnvSource } from '../llm/providers/keys.js';
import type { Model } from '../../db/schema/models.js';
import { createLocalEmbedder, localEmbedderModel } from './local.js';
import { createOpenAiEmbedder, probeOpenAiEmbedder } from './openai.js';
import type { Embedder } from './types.js';

export type EmbedderSpec = Pick<Model, 'name' | 'provider' | 'model' | 'baseUrl' | 'apiKeyEnv'>;

export interface EmbedderDeps {
  env: EnvSource;
  /** Needed for the offline embedder only. */
  toolsDir?: string;
  /** The size recorded for the entry; unknown: learned by embedding one text. */
  dimensions?: number;
  timeoutMs?: number;
}

export const openAiEmbeddingsDefaultBaseUrl = 'https://api.openai.com/v1';

/** The embedder a catalogue entry names; throws, saying why, when it cannot be had. */
export async function embedderOf(spec: EmbedderSpec, deps: EmbedderDeps): Promise<Embedder> {
  if (spec.provider === 'local') {
    if (spec.model !== localEmbedderModel) {
      throw new Error(`the offline embedder is ${localEmbedderModel}; there is no local embedder '${spec.model}'`);
    }
    if (!deps.toolsDir) throw new Error('the offline embedder needs the tools folder (MINDLOOP_TOOLS_DIR)');
    return createLocalEmbedder({ toolsDir: deps.toolsDir });
  }
  if (spec.provider !== 'openai') {
    throw new Error(`a ${spec.provider} model cannot embed: an embedder is local or OpenAI-compatible`);
  }
  let apiKey: string | undefined;
  if (spec.apiKeyEnv) {
    apiKey = deps.env[spec.apiKeyEnv];
    if (!apiKey)
      throw new Error(`environment variable ${spec.apiKeyEnv} is not set (it should hold the key of ${spec.name})`);
  }
  const opts = {
    baseUrl: spec.baseUrl ?? openAiEmbeddingsDefaultBaseUrl,
    model: spec.model,
    timeoutMs: deps.timeoutMs,
    ...(apiKey ? { apiKey } : {}),
  };
  return deps.dimensions ? createOpenAiEmbedder({ ...opts, dimensions: deps.dimensions }) : probeOpenAiEmbedder(opts);
}

export type EmbedderTestOutcome =
  { ok: true; latencyMs: number; dimensions: number } | { ok: false; latencyMs: number; error: string };

/** Embed one text with the entry's embedder: whether it answers, how fast, and its vectors' size. Never throws. */
export async function testEmbedder(spec: EmbedderSpec, deps: EmbedderDeps): Promise<EmbedderTestOutcome> {
  const started = performance.now();
  const latencyMs = (): number => Math.round(performance.now() - started);
  try {
    const embedder = await embedderOf(spec, deps);
    const [v] = await embedder.embed(['The quick brown fox jumps over the lazy dog.']);
    if (!v || v.length !== embedder.dimensions) throw new Error('no vector came back');
    return { ok: true, latencyMs: latencyMs(), dimensions: embedder.dimensions };
  } catch (err) {
    return { ok: false, latencyMs: latencyMs(), error: err instanceof Error ? err.message : String(err) };
  }
}
