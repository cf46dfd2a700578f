/**
 * The in-memory side of search by meaning: vectors quantized to one signed byte per dimension
 * (what `memory_vectors.q` stores), and an index over them that finds the candidates a search
 * then scores exactly. Pure: no I/O, no clock.
 *
 * The index keeps, per entry, the int8 codes and their signs as bits, in WebAssembly memory where
 * its two loops run with 128-bit SIMD (./kernels/vector-kernels.wat; about five times as fast as
 * the same loops in JavaScript). A query over many entries first ranks every entry by how many
 * signs it shares with the query (one popcount per 64 dimensions), keeps the best few thousand,
 * ranks those by the int8 dot product, and returns the best `count`. Over few entries it ranks all
 * of them by the int8 dot product directly. Scores here only choose candidates: the caller scores
 * them with the full vectors.
 */
import { vectorKernelsWasm } from './kernels/vector-kernels.js';

/** A vector quantized: `q[i] ≈ round(v[i] / scale * 127)`, `scale` = the largest absolute component. */
export interface Quantized {
  scale: number;
  q: Int8Array;
}

export function quantize(v: ArrayLike<number>): Quantized {
  let scale = 0;
  for (let i = 0; i < v.length; i++) scale = Math.max(scale, Math.abs(v[i]!));
  const q = new Int8Array(v.length);
  if (scale === 0) return { scale: 0, q };
  const f = 127 / scale;
  for (let i = 0; i < v.length; i++) q[i] = Math.max(-127, Math.min(127, Math.round(v[i]! * f)));
  return { scale, q };
}

/** The vector a quantized one stands for (`q[i] / 127 * scale`). */
export function dequantize({ scale, q }: Quantized): Float32Array {
  const out = new Float32Array(q.length);
  for (let i = 0; i < q.length; i++) out[i] = (q[i]! / 127) * scale;
  return out;
}

/** Below this many entries a query ranks them all by the int8 dot product (a few ms at most). */
export const fullScanBelow = 16_384;

// Compiled once per process; every index instantiates it over its own memory.
let kernels: WebAssembly.Module | undefined;

interface Kernels {
  agreements(signs: number, words: number, n: number, query: number, out: number): void;
  dots(codes: number, stride: number, pool: number, n: number, query: number, out: number): void;
}

/**
 * Where an index of `cap` slots keeps what it holds in its memory: the int8 codes (rows of
 * `stride` bytes, a multiple of 16, zero-padded), the sign bits (rows of `words` 64-bit words),
 * then room for one query: its agreements (u16 per slot), the slots it ranks and their dot
 * products (i32 each), its codes and its signs.
 */
function layout(cap: number, stride: number, words: number) {
  const codes = 0;
  const signs = codes + cap * stride;
  const agree = signs + cap * words * 8;
  const pool = agree + Math.ceil((cap * 2) / 16) * 16;
  const dots = pool + cap * 4;
  const queryCodes = dots + cap * 4;
  const querySigns = queryCodes + stride;
  return { codes, signs, agree, pool, dots, queryCodes, querySigns, bytes: querySigns + words * 8 };
}

/**
 * One agent's vectors of one kind under one model, all of `dimensions` components. Entries are
 * keyed by the memory row's id; `upsert` replaces an entry's codes, `remove` drops it (its slot
 * is reused by the next entry). The codes and signs live in WebAssembly memory, where the
 * ranking loops run with 128-bit SIMD (./kernels/vector-kernels.wat).
 */
export class VectorIndex {
  private ids = new Float64Array(0);
  private norms = new Float32Array(0);
  private readonly stride: number;
  private readonly words: number;
  private memory: WebAssembly.Memory;
  private run: Kernels;
  private at: ReturnType<typeof layout>;
  private slots = new Map<number, number>();
  private free: number[] = [];
  private used = 0;
  /** The largest row id the index holds (0 when empty). */
  maxRowId = 0;

  constructor(readonly dimensions: number) {
    this.stride = Math.ceil(dimensions / 16) * 16;
    this.words = Math.ceil(dimensions / 64);
    this.at = layout(0, this.stride, this.words);
    this.memory = new WebAssembly.Memory({ initial: Math.ceil(this.at.bytes / 65_536) || 1 });
    this.run = this.instantiate(this.memory);
  }

  get size(): number {
    return this.slots.size;
  }

  has(rowId: number): boolean {
    return this.slots.has(rowId);
  }

  private instantiate(memory: WebAssembly.Memory): Kernels {
    kernels ??= new WebAssembly.Module(vectorKernelsWasm());
    return new WebAssembly.Instance(kernels, { env: { memory } }).exports as unknown as Kernels;
  }

  private grow(min: number): void {
    const cap = Math.max(min, this.ids.length * 2, 256);
    const ids = new Float64Array(cap);
    ids.set(this.ids);
    const norms = new Float32Array(cap);
    norms.set(this.norms);
    const at = layout(cap, this.stride, this.words);
    const memory = new WebAssembly.Memory({ initial: Math.ceil(at.bytes / 65_536) });
    const from = new Uint8Array(this.memory.buffer);
    const to = new Uint8Array(memory.buffer);
    to.set(from.subarray(this.at.codes, this.at.signs), at.codes);
    to.set(from.subarray(this.at.signs, this.at.agree), at.signs);
    Object.assign(this, { ids, norms, at, memory, run: this.instantiate(memory) });
  }

  /** Adds or replaces the entry of `rowId` with its int8 codes (the scale does not matter for ranking). */
  upsert(rowId: number, q: ArrayLike<number>): void {
    if (q.length !== this.dimensions)
      throw new Error(`vector index of ${this.dimensions} dimensions given ${q.length}`);
    let slot = this.slots.get(rowId);
    if (slot === undefined) {
      slot = this.free.pop();
      if (slot === undefined) {
        if (this.used === this.ids.length) this.grow(this.used + 1);
        slot = this.used++;
      }
      this.slots.set(rowId, slot);
      this.ids[slot] = rowId;
    }
    this.norms[slot] = this.write(q, this.at.codes + slot * this.stride, this.at.signs + slot * this.words * 8);
    if (rowId > this.maxRowId) this.maxRowId = rowId;
  }

  /** Writes int8 codes and their sign bits at those offsets; returns the codes' norm. */
  private write(q: ArrayLike<number>, codesAt: number, signsAt: number): number {
    const codes = new Int8Array(this.memory.buffer, codesAt, this.stride);
    const signs = new Uint32Array(this.memory.buffer, signsAt, this.words * 2);
    codes.fill(0);
    signs.fill(0);
    let n = 0;
    for (let i = 0; i < this.dimensions; i++) {
      const c = q[i]!;
      codes[i] = c;
      n += c * c;
      if (c > 0) signs[i >>> 5]! |= 1 << (i & 31);
    }
    return Math.sqrt(n);
  }

  remove(rowId: number): void {
    const slot = this.slots.get(rowId);
    if (slot === undefined) return;
    this.slots.delete(rowId);
    this.norms[slot] = 0;
    this.free.push(slot);
  }

  /**
   * The `count` row ids whose int8 codes have the largest cosine with `query`, best first. Over
   * more than `fullScanBelow` entries only the `prefilter` entries that share the most signs with
   * the query are ranked by their codes.
   */
  candidates(query: ArrayLike<number>, count: number, prefilter = 4_096): number[] {
    if (query.length !== this.dimensions)
      throw new Error(`vector index of ${this.dimensions} dimensions queried with ${query.length}`);
    if (this.slots.size === 0 || count <= 0) return [];
    const { at } = this;
    this.write(quantize(query).q, at.queryCodes, at.querySigns);
    const pool = new Int32Array(this.memory.buffer, at.pool, this.used);
    let n = 0;
    if (this.slots.size <= Math.max(fullScanBelow, prefilter)) {
      for (const slot of this.slots.values()) pool[n++] = slot;
    } else {
      n = this.bySigns(pool, Math.max(prefilter, count));
    }
    this.run.dots(at.codes, this.stride, at.pool, n, at.queryCodes, at.dots);
    const dots = new Int32Array(this.memory.buffer, at.dots, n);
    const scores = new Float64Array(n);
    for (let p = 0; p < n; p++) {
      const norm = this.norms[pool[p]!]!;
      scores[p] = norm === 0 ? -Infinity : dots[p]! / norm;
    }
    return topIndices(scores, count).map((p) => this.ids[pool[p]!]!);
  }

  /** Fills `pool` with the `keep` live slots sharing the most signs with the query (ties at the threshold kept as found); returns how many. */
  private bySigns(pool: Int32Array, keep: number): number {
    const { at, used, norms } = this;
    this.run.agreements(at.signs, this.words, used, at.querySigns, at.agree);
    const agree = new Uint16Array(this.memory.buffer, at.agree, used);
    const hist = new Uint32Array(this.words * 64 + 1);
    for (let s = 0; s < used; s++) if (norms[s] !== 0) hist[agree[s]!]!++;
    // The threshold: the smallest agreement at which at least `keep` slots remain.
    let threshold = hist.length - 1;
    let taken = 0;
    while (threshold > 0 && taken + hist[threshold]! < keep) taken += hist[threshold--]!;
    const size = Math.min(keep, this.slots.size);
    let n = 0;
    for (let s = 0; s < used && n < size; s++) {
      if (norms[s] !== 0 && agree[s]! > threshold) pool[n++] = s;
    }
    for (let s = 0; s < used && n < size; s++) {
      if (norms[s] !== 0 && agree[s] === threshold) pool[n++] = s;
    }
    return n;
  }
}

/** The indices of the `k` largest scores, largest first (a -Infinity score is never chosen). */
export function topIndices(scores: ArrayLike<number>, k: number): number[] {
  // A small sorted buffer: k is at most a few hundred, so insertion beats a heap here.
  const best: number[] = [];
  let floor = -Infinity;
  for (let i = 0; i < scores.length; i++) {
    const s = scores[i]!;
    if (s === -Infinity || (best.length >= k && s <= floor)) continue;
    let j = best.length;
    while (j > 0 && scores[best[j - 1]!]! < s) j--;
    best.splice(j, 0, i);
    if (best.length > k) best.pop();
    if (best.length >= k) floor = scores[best[best.length - 1]!]!;
  }
  return best;
}
