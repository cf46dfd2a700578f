export * from './types.js';
export * from './cache.js';
export * from './local.js';
export * from './openai.js';
export {
  ensureMinilmGguf,
  fromFloat16,
  minilmPackage,
  quantizeQ8_0,
  resolveMinilmDir,
  toFloat16,
  type MinilmWeights,
} from './gguf.js';
export * from './catalogue.js';
export * from './agent-embedder.js';
export * from './memory-index.js';
