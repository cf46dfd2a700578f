/**
 * all-MiniLM-L6-v2 as an ONNX graph that onnxruntime-node runs on the CPU. No registry package
 * ships the graph, so it is written here once, on first use (or by `npm run setup`), from the
 * pinned safetensors into .tools/embedder/: BERT's embeddings, six encoder layers and mean pooling
 * over the tokens (sentence-transformers' pooling for this model; the caller scales to unit length).
 *
 * The default file stores every projection as int8 with one scale per output column, multiplied by
 * onnxruntime's DynamicQuantizeMatMul (the activations quantized per call), and the token table as
 * int8 rows with one scale each; biases, norms and the position table stay float32. Its vectors are
 * within a cosine of 0.99 of the float32 graph's, in a third of the time. `weights: 'f32'` writes
 * the float32 graph, exact to the model.
 */
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import protobuf from 'protobufjs';
import { readMinilm, resolveMinilmDir, type BertConfig, type Tensor } from './minilm.js';

/** How the matrices are stored: int8 with float scales (the default), or float32 as shipped. */
export type MinilmWeights = 'int8' | 'f32';
export const minilmOnnxName = (weights: MinilmWeights = 'int8') => `all-MiniLM-L6-v2-${weights}.onnx`;

/**
 * Path of the ONNX file, writing it from the installed package when it is missing. Undefined when
 * the package is not installed; throws when its files are not the pinned ones. Written to a
 * temporary name and renamed, so a crash leaves no half file under the final name.
 */
export function ensureMinilmOnnx(toolsDir: string, weights: MinilmWeights = 'int8'): string | undefined {
  const out = resolve(toolsDir, 'embedder', minilmOnnxName(weights));
  if (existsSync(out)) return out;
  const dir = resolveMinilmDir(toolsDir);
  if (!dir) return undefined;
  const { config, tensors } = readMinilm(dir);
  const bytes = bertOnnx(config, tensors, weights);
  mkdirSync(resolve(toolsDir, 'embedder'), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  writeFileSync(tmp, bytes);
  renameSync(tmp, out);
  return out;
}

// The part of onnx.proto (and its field numbers) this file writes.
const onnxProto = `
syntax = "proto3";
package onnx;
message AttributeProto { string name = 1; float f = 2; int64 i = 3; repeated int64 ints = 8; int32 type = 20; }
message NodeProto { repeated string input = 1; repeated string output = 2; string name = 3; string op_type = 4; repeated AttributeProto attribute = 5; string domain = 7; }
message TensorProto { repeated int64 dims = 1; int32 data_type = 2; string name = 8; bytes raw_data = 9; }
message Dimension { int64 dim_value = 1; string dim_param = 2; }
message TensorShapeProto { repeated Dimension dim = 1; }
message TensorType { int32 elem_type = 1; TensorShapeProto shape = 2; }
message TypeProto { TensorType tensor_type = 1; }
message ValueInfoProto { string name = 1; TypeProto type = 2; }
message GraphProto { repeated NodeProto node = 1; string name = 2; repeated TensorProto initializer = 5; repeated ValueInfoProto input = 11; repeated ValueInfoProto output = 12; }
message OperatorSetIdProto { string domain = 1; int64 version = 2; }
message ModelProto { int64 ir_version = 1; string producer_name = 2; GraphProto graph = 7; repeated OperatorSetIdProto opset_import = 8; }
`;

// TensorProto's element types and AttributeProto's kinds.
const [FLOAT, INT8, INT64] = [1, 3, 7];
const [ATTR_FLOAT, ATTR_INT, ATTR_INTS] = [1, 2, 7];

type Attribute = number | number[] | { f: number };

/** A graph under construction: initializers and nodes, each output named after its node. */
class Graph {
  readonly nodes: object[] = [];
  readonly initializers: object[] = [];
  private count = 0;

  constant(name: string, dims: number[], type: number, data: Uint8Array): string {
    this.initializers.push({ name, dims, dataType: type, rawData: data });
    return name;
  }

  floats(name: string, dims: number[], values: Float32Array): string {
    return this.constant(name, dims, FLOAT, new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
  }

  ints(name: string, values: number[]): string {
    const data = BigInt64Array.from(values.map(BigInt));
    return this.constant(name, [values.length], INT64, new Uint8Array(data.buffer));
  }

  node(op: string, inputs: string[], attributes: Record<string, Attribute> = {}, domain = '', name?: string): string {
    const output = name ?? `${op}_${++this.count}`;
    const attribute = Object.entries(attributes).map(([name, v]) =>
      Array.isArray(v)
        ? { name, ints: v, type: ATTR_INTS }
        : typeof v === 'number'
          ? { name, i: v, type: ATTR_INT }
          : { name, f: v.f, type: ATTR_FLOAT },
    );
    this.nodes.push({ opType: op, input: inputs, output: [output], attribute, domain, name: output });
    return output;
  }
}

/** The float32 values of a tensor (copied when its bytes are not 4-aligned). */
function values(t: Tensor): Float32Array {
  const b = t.data.byteOffset % 4 === 0 ? t.data : Buffer.from(t.data);
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
}

/**
 * A [rows, cols] row-major matrix as symmetric int8, one scale per row (absmax / 127, rounded to
 * nearest); `transpose` writes the int8 values as [cols, rows] (a Linear's weight → MatMul's B).
 */
export function quantizeRows(
  m: Float32Array,
  rows: number,
  cols: number,
  transpose = false,
): { q: Int8Array; scales: Float32Array } {
  const q = new Int8Array(rows * cols);
  const scales = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    let amax = 0;
    for (let c = 0; c < cols; c++) amax = Math.max(amax, Math.abs(m[r * cols + c]!));
    const scale = amax / 127;
    scales[r] = scale;
    const inv = scale === 0 ? 0 : 1 / scale;
    for (let c = 0; c < cols; c++) {
      const v = Math.max(-127, Math.min(127, Math.round(m[r * cols + c]! * inv)));
      q[transpose ? c * rows + r : r * cols + c] = v;
    }
  }
  return { q, scales };
}

/** The ONNX model: input `input_ids` int64 [1, tokens], output `embedding` float32 [1, hidden] (mean-pooled). */
export function bertOnnx(
  config: BertConfig,
  tensors: Map<string, Tensor>,
  weights: MinilmWeights = 'int8',
): Uint8Array {
  const get = (name: string): Tensor => {
    const t = tensors.get(name);
    if (!t) throw new Error(`model.safetensors has no ${name}`);
    return t;
  };
  const hidden = config.hidden_size;
  const heads = config.num_attention_heads;
  const headSize = hidden / heads;
  const g = new Graph();
  const f32 = (name: string) => g.floats(name, get(name).shape, values(get(name)));
  const layerNorm = (x: string, prefix: string) =>
    g.node('LayerNormalization', [x, f32(`${prefix}.weight`), f32(`${prefix}.bias`)], {
      axis: -1,
      epsilon: { f: config.layer_norm_eps },
    });
  /** x · Wᵀ + b for a Linear's [out, in] weight, its output scaled by `scale` (folded into W and b). */
  const linear = (x: string, prefix: string, scale = 1): string => {
    const w = get(`${prefix}.weight`);
    const [outs, ins] = w.shape as [number, number];
    const wv = values(w).map((v) => v * scale);
    const bias = g.floats(
      `${prefix}.bias`,
      [outs],
      values(get(`${prefix}.bias`)).map((v) => v * scale),
    );
    if (weights === 'f32') {
      const t = new Float32Array(ins * outs);
      for (let o = 0; o < outs; o++) for (let i = 0; i < ins; i++) t[i * outs + o] = wv[o * ins + i]!;
      return g.node('Add', [g.node('MatMul', [x, g.floats(`${prefix}.weightT`, [ins, outs], t)]), bias]);
    }
    const { q, scales } = quantizeRows(wv, outs, ins, true);
    const b = g.constant(`${prefix}.weightT.int8`, [ins, outs], INT8, new Uint8Array(q.buffer));
    const s = g.floats(`${prefix}.weightT.scale`, [outs], scales);
    return g.node('DynamicQuantizeMatMul', [x, b, s, '', bias], {}, 'com.microsoft');
  };

  // Embeddings: token row + position row + token type 0, then LayerNorm.
  const ids = 'input_ids';
  let word: string;
  const table = get('embeddings.word_embeddings.weight');
  const [vocab] = table.shape as [number, number];
  if (weights === 'f32') word = g.node('Gather', [f32('embeddings.word_embeddings.weight'), ids]);
  else {
    const { q, scales } = quantizeRows(values(table), vocab, hidden);
    const rows = g.constant('word_embeddings.int8', [vocab, hidden], INT8, new Uint8Array(q.buffer));
    const rowScales = g.floats('word_embeddings.scale', [vocab, 1], scales);
    word = g.node('Mul', [
      g.node('Cast', [g.node('Gather', [rows, ids])], { to: FLOAT }),
      g.node('Gather', [rowScales, ids]),
    ]);
  }
  const scalar = (name: string, v: number) =>
    g.constant(name, [], INT64, new Uint8Array(BigInt64Array.of(BigInt(v)).buffer));
  const length = g.node('Gather', [g.node('Shape', [ids]), scalar('axis_tokens', 1)]);
  const positions = g.node('Range', [scalar('range_start', 0), length, scalar('range_step', 1)]);
  const position = g.node('Gather', [f32('embeddings.position_embeddings.weight'), positions]);
  const types = values(get('embeddings.token_type_embeddings.weight')).slice(0, hidden);
  const typeZero = g.floats('token_type_0', [hidden], types);
  let x = layerNorm(g.node('Add', [g.node('Add', [word, position]), typeZero]), 'embeddings.LayerNorm');

  const toHeads = g.ints('to_heads', [0, 0, heads, headSize]);
  const fromHeads = g.ints('from_heads', [0, 0, hidden]);
  for (let l = 0; l < config.num_hidden_layers; l++) {
    const p = `encoder.layer.${l}`;
    // Q carries 1/sqrt(head size), folded into its weights and bias.
    const q = linear(x, `${p}.attention.self.query`, 1 / Math.sqrt(headSize));
    const k = linear(x, `${p}.attention.self.key`);
    const v = linear(x, `${p}.attention.self.value`);
    const heads4 = (t: string, perm: number[]) => g.node('Transpose', [g.node('Reshape', [t, toHeads])], { perm });
    const scores = g.node('MatMul', [heads4(q, [0, 2, 1, 3]), heads4(k, [0, 2, 3, 1])]);
    const attended = g.node('MatMul', [g.node('Softmax', [scores], { axis: -1 }), heads4(v, [0, 2, 1, 3])]);
    const context = g.node('Reshape', [g.node('Transpose', [attended], { perm: [0, 2, 1, 3] }), fromHeads]);
    x = layerNorm(
      g.node('Add', [x, linear(context, `${p}.attention.output.dense`)]),
      `${p}.attention.output.LayerNorm`,
    );
    const up = g.node('Gelu', [linear(x, `${p}.intermediate.dense`)], {}, 'com.microsoft');
    x = layerNorm(g.node('Add', [x, linear(up, `${p}.output.dense`)]), `${p}.output.LayerNorm`);
  }
  const pooled = g.node('ReduceMean', [x, g.ints('axis_pool', [1])], { keepdims: 0 }, '', 'embedding');
  const info = (name: string, elemType: number, dims: (number | string)[]) => ({
    name,
    type: {
      tensorType: {
        elemType,
        shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
      },
    },
  });
  const graph = {
    name: 'all-MiniLM-L6-v2',
    node: g.nodes,
    initializer: g.initializers,
    input: [info(ids, INT64, [1, 'tokens'])],
    output: [info(pooled, FLOAT, [1, hidden])],
  };
  const Model = protobuf.parse(onnxProto).root.lookupType('onnx.ModelProto');
  return Model.encode(
    Model.fromObject({
      irVersion: 9,
      producerName: 'mindloop',
      graph,
      opsetImport: [
        { domain: '', version: 18 },
        { domain: 'com.microsoft', version: 1 },
      ],
    }),
  ).finish();
}
