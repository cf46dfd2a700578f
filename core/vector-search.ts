/**
 * The in-memory side of search by meaning: vectors quantized to one signed byte per dimension
 * (what `memory_vectors.q` stores), and an index over them that finds the candidates a search
 * then scores exactly. Pure: no I/O, no clock.
 *
 * The index keeps, per entry, the int8 codes (one Int8Array for all entries) and their signs as
 * bits (one Uint32Array). A query over many entries first ranks every entry by how many signs it
 * shares with the query (a few integer operations per 32 dimensions), keeps the best few thousand,
 * ranks those by the int8 dot product, and returns the best `count`. Over few entries it ranks all
 * of them by the int8 dot product directly. Scores here only choose candidates: the caller scores
 * them with the full vectors.
 */

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

/** Bits set in a 32-bit word. */
function popcount(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  x = (x + (x >>> 4)) & 0x0f0f0f0f;
  return Math.imul(x, 0x01010101) >>> 24;
}

/** Below this many entries a query ranks them all by the int8 dot product (a few ms at most). */
export const fullScanBelow = 16_384;

/**
 * One agent's vectors of one kind under one model, all of `dimensions` components. Entries are
 * keyed by the memory row's id; `upsert` replaces an entry's codes, `remove` drops it (its slot
 * is reused by the next entry).
 */
export class VectorIndex {
  private ids = new Float64Array(0);
  private codes = new Int8Array(0);
  private norms = new Float32Array(0);
  private signs = new Uint32Array(0);
  private readonly words: number;
  private slots = new Map<number, number>();
  private free: number[] = [];
  private used = 0;
  /** The largest row id the index holds (0 when empty). */
  maxRowId = 0;

  constructor(readonly dimensions: number) {
    this.words = Math.ceil(dimensions / 32);
  }

  get size(): number {
    return this.slots.size;
  }

  has(rowId: number): boolean {
    return this.slots.has(rowId);
  }

  private grow(min: number): void {
    const cap = Math.max(min, this.ids.length * 2, 256);
    const ids = new Float64Array(cap);
    ids.set(this.ids);
    const codes = new Int8Array(cap * this.dimensions);
    codes.set(this.codes);
    const norms = new Float32Array(cap);
    norms.set(this.norms);
    const signs = new Uint32Array(cap * this.words);
    signs.set(this.signs);
    Object.assign(this, { ids, codes, norms, signs });
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
    const d = this.dimensions;
    const base = slot * d;
    let n = 0;
    const sb = slot * this.words;
    this.signs.fill(0, sb, sb + this.words);
    for (let i = 0; i < d; i++) {
      const c = q[i]!;
      this.codes[base + i] = c;
      n += c * c;
      if (c > 0) this.signs[sb + (i >>> 5)]! |= 1 << (i & 31);
    }
    this.norms[slot] = Math.sqrt(n);
    if (rowId > this.maxRowId) this.maxRowId = rowId;
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
    const d = this.dimensions;
    const qq = quantize(query).q;
    const qi = Int32Array.from(qq);
    const used = this.used;
    let pool: Int32Array;
    if (this.slots.size <= Math.max(fullScanBelow, prefilter)) {
      pool = new Int32Array(this.slots.size);
      let n = 0;
      for (const slot of this.slots.values()) pool[n++] = slot;
    } else {
      pool = this.bySigns(qq, Math.max(prefilter, count), used);
    }
    const scores = new Float64Array(pool.length);
    const codes = this.codes;
    for (let p = 0; p < pool.length; p++) {
      const slot = pool[p]!;
      const norm = this.norms[slot]!;
      if (norm === 0) {
        scores[p] = -Infinity;
        continue;
      }
      const o = slot * d;
      let a = 0;
      let b = 0;
      let i = 0;
      for (; i + 8 <= d; i += 8) {
        a += qi[i]! * codes[o + i]! + qi[i + 1]! * codes[o + i + 1]! + qi[i + 2]! * codes[o + i + 2]!;
        a += qi[i + 3]! * codes[o + i + 3]!;
        b += qi[i + 4]! * codes[o + i + 4]! + qi[i + 5]! * codes[o + i + 5]! + qi[i + 6]! * codes[o + i + 6]!;
        b += qi[i + 7]! * codes[o + i + 7]!;
      }
      for (; i < d; i++) a += qi[i]! * codes[o + i]!;
      scores[p] = (a + b) / norm;
    }
    const order = topIndices(scores, count);
    return order.map((p) => this.ids[pool[p]!]!);
  }

  /** The `keep` live slots sharing the most signs with the query (ties at the threshold kept as found). */
  private bySigns(qq: Int8Array, keep: number, used: number): Int32Array {
    const w = this.words;
    const qs = new Uint32Array(w);
    for (let i = 0; i < qq.length; i++) if (qq[i]! > 0) qs[i >>> 5]! |= 1 << (i & 31);
    const agree = new Uint16Array(used);
    const hist = new Uint32Array(w * 32 + 1);
    const signs = this.signs;
    const norms = this.norms;
    for (let s = 0, o = 0; s < used; s++, o += w) {
      if (norms[s] === 0) continue;
      let diff = 0;
      for (let j = 0; j < w; j++) diff += popcount((signs[o + j]! ^ qs[j]!) >>> 0);
      const a = w * 32 - diff;
      agree[s] = a;
      hist[a]!++;
    }
    // The threshold: the smallest agreement at which at least `keep` slots remain.
    let threshold = hist.length - 1;
    let taken = 0;
    while (threshold > 0 && taken + hist[threshold]! < keep) taken += hist[threshold--]!;
    const out = new Int32Array(Math.min(keep, this.slots.size));
    let n = 0;
    for (let s = 0; s < used && n < out.length; s++) {
      if (norms[s] !== 0 && agree[s]! > threshold) out[n++] = s;
    }
    for (let s = 0; s < used && n < out.length; s++) {
      if (norms[s] !== 0 && agree[s] === threshold) out[n++] = s;
    }
    return out.subarray(0, n);
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
