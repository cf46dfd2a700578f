/**
 * End to end with the real speech engine (the Python worker, started and stopped by
 * runtime/speech-worker.ts): the engine says a sentence for agent `demo` (a speech workflow of
 * kind speak), then `mindloop note demo --audio <that WAV> --wait` hears it back. The note
 * stored carries the words, the engine's backend and the audio; the ledger is charged the
 * seconds heard. Skipped where the engine is not installed (`npm run setup` installs it).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultPrices, speechCost } from '../../core/lifeforce.js';
import { llmRegistry, notes } from '../../db/schema/index.js';
import { pidAlive } from '../../runtime/pid.js';
import { findSpeechEngine, startSpeechWorker, type SpeechWorker } from '../../runtime/speech-worker.js';
import type { agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import type { speechWorkflow } from '../../workflows/speech.js';
import { repoToolsDir } from '../helpers/env.js';
import { thinkScript } from '../helpers/scripted.js';
import { repoRoot, run } from '../helpers/spawn.js';
import { agentWithLifeforce, speechLedger, speechTestStack, type SpeechTestStack } from './helpers.js';

const engine = findSpeechEngine(repoToolsDir);
let s: SpeechTestStack;
let worker: SpeechWorker;
let loop: WorkflowHandle<typeof agentLoopWorkflow>;

/** Lower-case words, no punctuation. */
const words = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^a-z0-9' ]+/g, ' ')
    .split(/\s+/)
    .filter(Boolean);

describe.skipIf(!engine)('the real speech engine', () => {
  beforeAll(async () => {
    s = await speechTestStack(
      'speech-e2e',
      thinkScript((_m, i) => `Tick ${i + 1}: listening.`),
    );
    await agentWithLifeforce(s.db, 'demo', { capacity: 1000, available: 1000 });
    await s.db.db.insert(llmRegistry).values({
      agentId: 'demo',
      name: 'script',
      provider: 'scripted',
      model: 'scripted-e2e',
      role: 'agent',
      priority: 1,
    });
    worker = await startSpeechWorker({
      engine: engine!,
      address: s.temporal.server.address,
      namespace: 'default',
      dataDir: s.dataDir,
      args: ['--concurrency', '1'],
    });
    loop = await s.temporal.client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
      taskQueue: 'mindloop',
      workflowId: 'agent/demo',
      args: [{ agentId: 'demo', settings: { delayMs: 500 } }],
    });
  }, 300_000);

  afterAll(async () => {
    await loop?.signal('stop').catch(() => undefined);
    await loop?.result().catch(() => undefined);
    await worker?.stop();
    await s?.stop();
  });

  it('polls the queue of its device, ready line first', () => {
    expect(worker.readyLine).toMatch(/^speech worker polling speech-(gpu|cpu) on 127\.0\.0\.1:\d+/);
    expect(pidAlive(worker.pid)).toBe(true);
    expect(existsSync(worker.logFile)).toBe(true);
  });

  it('`mindloop note demo --audio <a WAV the engine spoke>` stores the words, the backend and the charge', async () => {
    const sentence = 'The quick brown fox jumps over the lazy dog.';
    const spoken = await s.temporal.client.workflow.execute<typeof speechWorkflow>('speechWorkflow', {
      taskQueue: 'mindloop',
      workflowId: 'speech/demo/e2e-speak',
      args: [{ kind: 'speak', agentId: 'demo', text: sentence, lang: 'en' }],
    });
    if (spoken.kind !== 'speak') throw new Error('not a speak result');
    expect(spoken.queue).toBe(worker.queue);
    expect(spoken.durationS).toBeGreaterThan(1);
    expect(existsSync(spoken.audioPath)).toBe(true);

    const env = {
      TEMPORAL_ADDRESS: s.temporal.server.address,
      MINDLOOP_DATA_DIR: s.dataDir,
      MINDLOOP_TOOLS_DIR: repoToolsDir,
    };
    const r = await run(
      process.execPath,
      [join(repoRoot, 'bin/mindloop.mjs'), 'note', 'demo', '--audio', spoken.audioPath, '--lang', 'en', '--wait'],
      env,
      240_000,
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const workflowId = /as workflow (speech\/demo\/cli\/[0-9a-f-]+)/.exec(r.stdout)?.[1];
    expect(workflowId).toBeDefined();
    const heard = await s.temporal.client.workflow.getHandle<typeof speechWorkflow>(workflowId!).result();
    if (heard.kind !== 'transcribe') throw new Error('not a transcription');
    expect(heard.delivered).toBe('loop');

    const [note] = await s.db.db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'demo'), eq(notes.id, heard.noteId!)));
    const got = words(note!.text);
    const want = words(sentence);
    const hits = want.filter((w) => got.includes(w)).length;
    expect(hits / want.length, `heard: ${note!.text}`).toBeGreaterThanOrEqual(0.7);
    expect(note!.audio).toMatchObject({
      kind: 'heard',
      language: 'en',
      backend: heard.backend,
      device: heard.device,
      workflowId,
    });
    expect(note!.audio!.backend).not.toMatch(/fake/);
    expect(r.stdout).toContain(note!.text.trim().split('\n')[0]!);

    const ledger = (await speechLedger(s.db, 'demo')).filter((e) => e.key.includes(workflowId!));
    expect(ledger.map((e) => e.kind)).toEqual(['reserve', 'settle']);
    expect(ledger[1]!.amount).toBeCloseTo(speechCost(defaultPrices, heard.durationS), 3);
    expect(ledger[1]!.amount).toBeGreaterThan(0);
  }, 300_000);

  it('stops with its process gone', async () => {
    await worker.stop();
    expect(pidAlive(worker.pid)).toBe(false);
    expect(await worker.exited).not.toBeUndefined();
  });
});
