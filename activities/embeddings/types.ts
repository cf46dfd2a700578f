/**
 * An embedder turns texts into vectors of one fixed size, so that texts can be compared by meaning
 * (cosine similarity). The offline one runs all-MiniLM-L6-v2 on the CPU (./local.ts); the
 * OpenAI-compatible one calls `{baseUrl}/embeddings` (./openai.ts). Not yet used by the loop.
 */

export interface Embedder {
  /** The model id vectors are cached under: vectors of different models are never compared. */
  readonly model: string;
  /** The length of every vector this embedder returns. */
  readonly dimensions: number;
  /** One vector per text, in order. */
  embed(texts: readonly string[]): Promise<Float32Array[]>;
}

/** A vector whose length is not the embedder's dimensions: refused, never stored or compared. */
export class EmbeddingSizeError extends Error {
  constructor(
    readonly model: string,
    readonly expected: number,
    readonly actual: number,
  ) {
    super(`embedder ${model} returned a vector of ${actual} dimensions, expected ${expected}`);
    this.name = 'EmbeddingSizeError';
  }
}

/** Throws an EmbeddingSizeError, naming both sizes, when the vector's length is not `dimensions`. */
export function checkDimensions(model: string, dimensions: number, vector: ArrayLike<number>): void {
  if (vector.length !== dimensions) throw new EmbeddingSizeError(model, dimensions, vector.length);
}

/** Cosine similarity of two vectors of the same length (0 when either is all zeros). */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`cosine of vectors of ${a.length} and ${b.length} dimensions`);
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}
