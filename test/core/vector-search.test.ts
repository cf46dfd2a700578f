/**
 * The in-memory side of search by meaning: quantization to one signed byte per dimension, and the
 * index's candidates — over few entries every entry ranked by its int8 codes, over many the sign
 * prefilter first — finding the entries nearest a query; removed entries are never returned.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { dequantize, fullScanBelow, quantize, topIndices, VectorIndex } from '../../core/vector-search.js';
// @ts-expect-error -- a plain JavaScript build script, without types
import { compileWat, kernelModule } from '../../scripts/build-kernels.mjs';

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296 - 0.5;
  };
}

const cos = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let d = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    d += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return d / Math.sqrt(na * nb);
};

describe('quantize', () => {
  it('scales by the largest component, to ±127, and comes back within half a step', () => {
    const r = rng(1);
    const v = Float32Array.from({ length: 384 }, r);
    const { scale, q } = quantize(v);
    expect(scale).toBeCloseTo(Math.max(...Array.from(v, Math.abs)), 6);
    expect(Math.max(...Array.from(q, Math.abs))).toBe(127);
    const back = dequantize({ scale, q });
    v.forEach((x, i) => expect(Math.abs(back[i]! - x)).toBeLessThanOrEqual(scale / 254 + 1e-7));
    expect(cos(v, back)).toBeGreaterThan(0.999);
    expect(quantize(new Float32Array(4))).toEqual({ scale: 0, q: new Int8Array(4) });
  });

  it('topIndices: the k largest, largest first', () => {
    expect(topIndices([0.1, 0.9, -Infinity, 0.5, 0.7], 3)).toEqual([1, 4, 3]);
    expect(topIndices([0.2], 5)).toEqual([0]);
  });
});

describe('VectorIndex', () => {
  /** Clustered vectors (as texts' embeddings are): `n` entries around 50 centres. */
  function clustered(n: number, d: number, seed: number) {
    const r = rng(seed);
    const centres = Array.from({ length: 50 }, () => Float32Array.from({ length: d }, r));
    return Array.from({ length: n }, (_, i) => {
      const c = centres[i % centres.length]!;
      return Float32Array.from(c, (x) => x + r() * 0.6);
    });
  }

  for (const n of [500, fullScanBelow + 4_000]) {
    it(`over ${n} entries the candidates hold the exact nearest (${n > fullScanBelow ? 'sign prefilter' : 'full int8 scan'})`, () => {
      const d = 64;
      const vs = clustered(n, d, n);
      const index = new VectorIndex(d);
      vs.forEach((v, i) => index.upsert(i + 1, quantize(v).q));
      expect(index.size).toBe(n);
      expect(index.maxRowId).toBe(n);
      const r = rng(99);
      let found = 0;
      for (let t = 0; t < 10; t++) {
        const q = Float32Array.from(vs[t * 7]!, (x) => x + r() * 0.3);
        const exact = vs
          .map((v, i) => [cos(q, v), i + 1] as const)
          .sort((a, b) => b[0] - a[0])
          .slice(0, 10)
          .map(([, id]) => id);
        const got = new Set(index.candidates(q, 40));
        found += exact.filter((id) => got.has(id)).length;
      }
      expect(found / 100).toBeGreaterThanOrEqual(0.95);
    });
  }

  it('ranks by the int8 cosine exactly, in any size (rows padded to whole SIMD words), across growth', () => {
    const r = rng(7);
    for (const d of [1, 15, 100, 384]) {
      const index = new VectorIndex(d);
      // 1 000 entries: the index grows from 256 slots three times, copying what it holds.
      const codes = Array.from({ length: 1_000 }, () => Int8Array.from({ length: d }, () => Math.round(r() * 254)));
      codes.forEach((q, i) => index.upsert(i + 1, q));
      const query = Float32Array.from({ length: d }, r);
      const qq = quantize(query).q;
      const score = (c: Int8Array) => {
        let dot = 0;
        let n = 0;
        for (let i = 0; i < d; i++) ((dot += qq[i]! * c[i]!), (n += c[i]! * c[i]!));
        return n === 0 ? -Infinity : dot / Math.sqrt(n);
      };
      const got = index.candidates(query, 50);
      const want = codes
        .map((c, i) => [score(c), i + 1] as const)
        .sort((a, b) => b[0] - a[0] || a[1] - b[1])
        .slice(0, 50);
      expect(got.map((id) => score(codes[id - 1]!))).toEqual(want.map(([s]) => s));
    }
  });

  it('an entry removed or replaced is ranked by what it is now', () => {
    const index = new VectorIndex(4);
    index.upsert(1, [127, 0, 0, 0]);
    index.upsert(2, [0, 127, 0, 0]);
    expect(index.candidates([1, 0, 0, 0], 1)).toEqual([1]);
    index.remove(1);
    expect(index.candidates([1, 0, 0, 0], 2)).toEqual([2]);
    index.upsert(2, [-127, 0, 0, 0]);
    index.upsert(3, [127, 10, 0, 0]);
    expect(index.candidates([1, 0, 0, 0], 2)).toEqual([3, 2]);
    expect(() => index.upsert(4, [1, 2])).toThrow(/4 dimensions given 2/);
  });
});

describe('the WebAssembly kernels', () => {
  it('the committed module is what vector-kernels.wat compiles to', async () => {
    const dir = join(import.meta.dirname, '..', '..', 'core', 'kernels');
    const wasm: Buffer = await compileWat(join(dir, 'vector-kernels.wat'));
    expect(readFileSync(join(dir, 'vector-kernels.ts'), 'utf8')).toBe(kernelModule('vector-kernels', wasm));
  });
});
