/**
 * Novelty by meaning, measured: the labelled set (test/fixtures/novelty-pairs.jsonl) embedded by
 * the real offline embedder (all-MiniLM-L6-v2 on the CPU), and the ROC AUC of today's novelty
 * without an LLM (lexical), of the semantic similarity alone, and of the blend the tick uses with
 * an embedder. The LLM mini-prompt's own score needs a model and is not part of this offline run.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalEmbedder, disposeLocalEmbedders, type Embedder } from '../../activities/embeddings/index.js';
import { noveltyAucs, noveltyPairsFile, parseNoveltyPairs } from '../../core/novelty-eval.js';
import { repoToolsDir } from '../helpers/env.js';

const toolsDir = process.env.MINDLOOP_TOOLS_DIR ?? repoToolsDir;
let embedder: Embedder;

beforeAll(async () => {
  embedder = await createLocalEmbedder({ toolsDir });
});
afterAll(async () => {
  await disposeLocalEmbedders();
});

describe('novelty AUC on the labelled set (offline embedder)', () => {
  it('the blend tells novel replies from repeated ones better than the lexical score, AUC ≥ 0.9', async () => {
    const pairs = parseNoveltyPairs(readFileSync(join(import.meta.dirname, '..', '..', noveltyPairsFile), 'utf8'));
    const started = performance.now();
    const auc = await noveltyAucs(pairs, (texts) => embedder.embed(texts));
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    console.log(
      `novelty AUC over ${auc.pairs} pairs (${auc.novel} novel), ${embedder.model}, ${seconds} s:\n` +
        `  today (lexical, no LLM)  ${auc.today.toFixed(4)}\n` +
        `  semantic alone           ${auc.semantic.toFixed(4)}\n` +
        `  blend                    ${auc.blend.toFixed(4)}\n` +
        `  (the LLM mini-prompt's score needs a model: not measured offline; "today" is the lexical score)`,
    );
    expect(auc.pairs).toBeGreaterThanOrEqual(150);
    expect(auc.blend).toBeGreaterThanOrEqual(0.9);
    expect(auc.blend).toBeGreaterThan(auc.today);
    expect(auc.blend).toBeGreaterThan(auc.semantic);
  });
});
