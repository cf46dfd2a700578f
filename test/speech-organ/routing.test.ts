/**
 * Routing on a real dev server: `speechRoute` reads the pollers of both speech queues (none, CPU
 * only, GPU and CPU), and a speech job follows it. Around the engine call: the lifeforce held
 * and settled in speech seconds, the note or WAV recorded, input the engine refuses ending the
 * job with the problem named (its hold given back), and an engine that fails being waited out.
 */
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { Worker } from '@temporalio/worker';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSpeechActivities } from '../../activities/speech.js';
import { defaultPrices, speechCost } from '../../core/lifeforce.js';
import { speakSecondsBound } from '../../core/speech/engine.js';
import { notes } from '../../db/schema/index.js';
import type { SpeechStatus, speechWorkflow } from '../../workflows/speech.js';
import { waitFor } from '../helpers/worker-process.js';
import {
  agentWithLifeforce,
  fakeEngine,
  speechLedger,
  speechTestStack,
  writeWav,
  type SpeechTestStack,
} from './helpers.js';

let s: SpeechTestStack;
const engines: Array<{ worker: Worker; run: Promise<void> }> = [];
let route: ReturnType<typeof createSpeechActivities>['speechRoute'];
const failEngineTimes = new Map<string, number>();

async function startEngine(...args: Parameters<typeof fakeEngine>): Promise<void> {
  const worker = await fakeEngine(...args);
  engines.push({ worker, run: worker.run() });
}

beforeAll(async () => {
  s = await speechTestStack('speech-routing');
  route = createSpeechActivities({
    db: s.db.db,
    prices: defaultPrices,
    dataDir: s.dataDir,
    client: () => s.temporal.client,
    routeCacheMs: 0,
  }).speechRoute;
  await agentWithLifeforce(s.db, 'talker', { capacity: 1000, available: 1000 });
});

afterAll(async () => {
  for (const e of engines) if (e.worker.getState() === 'RUNNING') e.worker.shutdown();
  await Promise.all(engines.map((e) => e.run));
  await s?.stop();
});

function start(workflowId: string, args: Parameters<typeof speechWorkflow>[0]) {
  return s.temporal.client.workflow.start<typeof speechWorkflow>('speechWorkflow', {
    taskQueue: 'mindloop',
    workflowId,
    args: [args],
  });
}

describe('speech routing, GPU first', () => {
  it('says no speech worker while none polls; then CPU with a CPU worker; then GPU once a GPU worker polls too', async () => {
    const none = await route({});
    expect(none).toMatchObject({ state: 'none', queue: 'speech-cpu' });
    expect(none.reason).toMatch(/no speech worker polls speech-gpu or speech-cpu/);

    await startEngine({ connection: s.temporal.connection, queue: 'speech-cpu', backend: 'fake-cpu' });
    const cpu = await waitFor('a CPU route', 20_000, async () => {
      const r = await route({});
      return r.state === 'cpu' ? r : undefined;
    });
    expect(cpu.queue).toBe('speech-cpu');

    await startEngine({
      connection: s.temporal.connection,
      queue: 'speech-gpu',
      backend: 'fake-gpu',
      transcribe: (input) => {
        const left = failEngineTimes.get(input.audio_path) ?? 0;
        if (left > 0) {
          failEngineTimes.set(input.audio_path, left - 1);
          throw ApplicationFailure.retryable('CUDA out of memory', 'SpeechEngineFailed');
        }
        if (input.audio_path.endsWith('8khz.wav'))
          throw ApplicationFailure.nonRetryable(
            'audio at 8000 Hz: the engine takes 16 kHz and up',
            'UnsupportedSampleRate',
          );
        return { duration_s: 2 };
      },
    });
    const gpu = await waitFor('a GPU route', 20_000, async () => {
      const r = await route({});
      return r.state === 'gpu' ? r : undefined;
    });
    expect(gpu).toMatchObject({ queue: 'speech-gpu', pollers: [expect.any(String)] });
  });

  it('a transcription goes to the GPU worker; its seconds are held and settled; the note carries the audio', async () => {
    const audioPath = writeWav(join(s.dataDir, 'in', 'hello.wav'), 2);
    const h = await start('speech/talker/t1', {
      kind: 'transcribe',
      agentId: 'talker',
      audioPath,
      note: { tags: ['voice'] },
    });
    const r = await h.result();
    expect(r).toMatchObject({
      kind: 'transcribe',
      queue: 'speech-gpu',
      backend: 'fake-gpu',
      device: 'cuda',
      text: 'heard hello.wav',
      delivered: 'stored',
      charged: speechCost(defaultPrices, 2),
    });

    const [note] = await s.db.db.select().from(notes).where(eq(notes.id, r.noteId!));
    expect(note).toMatchObject({
      agentId: 'talker',
      direction: 'in',
      source: 'user',
      text: 'heard hello.wav',
      tags: ['audio', 'voice'],
    });
    expect(note!.audio).toMatchObject({
      kind: 'heard',
      path: audioPath,
      durationS: 2,
      language: 'en',
      backend: 'fake-gpu',
      device: 'cuda',
      model: 'fake-whisper',
      workflowId: 'speech/talker/t1',
    });

    const ledger = (await speechLedger(s.db, 'talker')).filter((e) => e.key.includes('speech/talker/t1'));
    expect(ledger.map((e) => [e.kind, e.amount])).toEqual([
      ['reserve', speechCost(defaultPrices, 2)],
      ['settle', speechCost(defaultPrices, 2)],
    ]);
  });

  it('a spoken text is held at its bound and settled at the seconds the engine said; the WAV is under the data dir', async () => {
    const text = 'Good morning, this is the talker speaking.';
    const h = await start('speech/talker/s1', { kind: 'speak', agentId: 'talker', text, lang: 'en' });
    const r = await h.result();
    expect(r).toMatchObject({
      kind: 'speak',
      queue: 'speech-gpu',
      backend: 'fake-gpu',
      durationS: 1.2,
      charged: speechCost(defaultPrices, 1.2),
    });
    if (r.kind !== 'speak') throw new Error('not a speak result');
    expect(r.audioPath.startsWith(join(s.dataDir, 'speech', 'talker') + '/')).toBe(true);
    expect(r.audioPath).toMatch(/\.wav$/);
    expect(existsSync(r.audioPath)).toBe(true);

    const ledger = (await speechLedger(s.db, 'talker')).filter((e) => e.key.includes('speech/talker/s1'));
    expect(ledger.map((e) => [e.kind, e.amount])).toEqual([
      ['reserve', speechCost(defaultPrices, speakSecondsBound(text))],
      ['settle', speechCost(defaultPrices, 1.2)],
    ]);
    const [spoken] = await s.db.db.select().from(notes).where(eq(notes.id, r.noteId!));
    expect(spoken).toMatchObject({ direction: 'out', source: 'agent', recipient: 'user', text });
    expect(spoken!.audio).toMatchObject({
      kind: 'spoken',
      path: r.audioPath,
      durationS: 1.2,
      backend: 'fake-gpu',
      voice: 'fake-voice',
      sampleRate: 22_050,
    });
  });

  it('input the engine refuses ends the job naming the problem, and its hold goes back', async () => {
    const audioPath = writeWav(join(s.dataDir, 'in', 'phone-8khz.wav'), 1, 8_000);
    const h = await start('speech/talker/refused', { kind: 'transcribe', agentId: 'talker', audioPath });
    const err = await h.result().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause.type).toBe('UnsupportedSampleRate');
    expect(cause.message).toMatch(/speech transcribe for talker refused \(UnsupportedSampleRate\): audio at 8000 Hz/);
    expect((await h.query<SpeechStatus>('status')).phase).toBe('failed');
    const ledger = (await speechLedger(s.db, 'talker')).filter((e) => e.key.includes('speech/talker/refused'));
    expect(ledger.map((e) => [e.kind, e.amount])).toEqual([
      ['reserve', speechCost(defaultPrices, 1)],
      ['release', 0],
    ]);
  });

  it('refuses a file that is not audio before any engine sees it, and an empty speak at the input', async () => {
    const notAudio = join(s.dataDir, 'in', 'notes.txt');
    writeFileSync(notAudio, 'these are my notes, not a recording');
    const err = await (
      await start('speech/talker/notaudio', { kind: 'transcribe', agentId: 'talker', audioPath: notAudio })
    )
      .result()
      .catch((e: unknown) => e);
    expect(((err as WorkflowFailedError).cause as ApplicationFailure).type).toBe('NotAudio');
    expect(((err as WorkflowFailedError).cause as ApplicationFailure).message).toMatch(/notes\.txt: not a WAV file/);
    expect(await speechLedger(s.db, 'talker').then((l) => l.filter((e) => e.key.includes('notaudio')))).toEqual([]);

    const empty = await (
      await start('speech/talker/empty', { kind: 'speak', agentId: 'talker', text: '  ' })
    )
      .result()
      .catch((e: unknown) => e);
    const cause = (empty as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause.type).toBe('InvalidInput');
    expect(cause.message).toMatch(/text: nothing to say: text is empty/);
  });

  it('an engine that keeps failing is waited out, not failed: the status says why, and the job completes once it works', async () => {
    const audioPath = writeWav(join(s.dataDir, 'in', 'flaky.wav'), 1);
    failEngineTimes.set(audioPath, 3); // the engine activity's three attempts all fail
    const h = await start('speech/talker/flaky', { kind: 'transcribe', agentId: 'talker', audioPath });
    const waiting = await waitFor(
      'the job waiting on a failing engine',
      30_000,
      async () => {
        const st = await h.query<SpeechStatus>('status');
        return st.waiting ? st : undefined;
      },
      200,
    );
    expect(waiting.phase).toMatch(/waiting|routing|queued/);
    expect(waiting.waiting!.reason).toMatch(/the speech engine on speech-gpu failed: CUDA out of memory; trying again/);
    const r = await h.result();
    expect(r).toMatchObject({ kind: 'transcribe', text: 'heard flaky.wav', queue: 'speech-gpu' });
    expect((await h.query<SpeechStatus>('status')).waiting).toBeNull();
    const rows = await s.db.db
      .select({ id: notes.id })
      .from(notes)
      .where(and(eq(notes.agentId, 'talker'), eq(notes.text, 'heard flaky.wav')));
    expect(rows).toHaveLength(1);
  }, 60_000);
});
