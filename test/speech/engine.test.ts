/**
 * The speech engine (speech/mindloop_speech, a Python Temporal worker) with its real models on
 * the CPU: workflows call `speak`, `transcribe` and `speech_health` by name on its queue, as
 * the product's speech workflows do. Round trips in English (piper) and German (SVOX Pico) are
 * scored by word error rate; bad input must fail at once, non-retryable, with its type, and the
 * worker must go on serving; a cancelled transcription must stop.
 */
import { copyFileSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ActivityFailure, ApplicationFailure, CancelledFailure, RetryState } from '@temporalio/common';
import { WorkflowFailedError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { everydaySentences } from '../../core/speech/sentences.js';
import { corpusWordErrorRate, wordErrorRate, type WerLanguage } from '../../core/speech/wer.js';
import type { speechCallWorkflow, speechRoundTripWorkflow } from '../fixtures/workflows/speech.js';
import { tempDir } from '../helpers/env.js';
import { startWorkers, type RunningWorkers } from '../helpers/harness.js';
import { fixtureWorkflowsPath, startDevTemporal, type DevTemporal } from '../helpers/temporal.js';
import {
  engineMissing,
  readWav,
  startEngine,
  toNoisyMp3,
  tone,
  writeSparseSilentWav,
  writeWav,
  type EngineProcess,
} from './engine-helpers.js';

const english = [...everydaySentences.en];
const german = everydaySentences.de.slice(0, 10);

// A paragraph for the "recording": several sentences, about 20 s spoken.
const paragraph =
  'Good morning everyone. Today we will talk about the garden behind the old school. ' +
  'The apple trees need water every evening, and the roses need more sun. ' +
  'If you have time on Saturday, please bring gloves and a small shovel.';

const maxWer = 0.25;
const workflowQueue = 'speech-engine-test';

const missing = engineMissing();
let dev: DevTemporal;
let workflowWorker: RunningWorkers;
let engine: EngineProcess;
let dir: { path: string; remove(): void };

async function call(
  activity: 'speak' | 'transcribe' | 'speech_health',
  payload?: unknown,
  queue = 'speech-cpu',
  heartbeatTimeout?: string,
) {
  return dev.client.workflow.execute<typeof speechCallWorkflow>('speechCallWorkflow', {
    taskQueue: workflowQueue,
    workflowId: `speech-call-${activity}-${Math.random().toString(36).slice(2)}`,
    args: [
      {
        queue,
        activity,
        ...(payload === undefined ? {} : { payload }),
        ...(heartbeatTimeout ? { heartbeatTimeout } : {}),
      },
    ],
  }) as Promise<Record<string, unknown>>;
}

/** The engine's failure behind a failed workflow: the ActivityFailure and its ApplicationFailure. */
async function failureOf(p: Promise<unknown>): Promise<{ activity: ActivityFailure; app: ApplicationFailure }> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowFailedError);
  const activity = (err as WorkflowFailedError).cause;
  expect(activity).toBeInstanceOf(ActivityFailure);
  const app = (activity as ActivityFailure).cause;
  expect(app).toBeInstanceOf(ApplicationFailure);
  return { activity: activity as ActivityFailure, app: app as ApplicationFailure };
}

function table(lang: string, rows: { sentence: string; heard: string; wer: number }[]): string {
  const w = Math.max(...rows.map((r) => r.sentence.length));
  const lines = rows.map((r) => `${r.wer.toFixed(2).padStart(5)}  ${r.sentence.padEnd(w)}  | ${r.heard}`);
  return [`-- ${lang}: WER  sentence${' '.repeat(Math.max(0, w - 8))}  | heard`, ...lines].join('\n');
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

describe('the speech engine (Python worker, real models, CPU)', () => {
  beforeAll(async () => {
    if (missing) throw new Error(missing);
    dir = tempDir('speech-engine');
    dev = await startDevTemporal('speech-engine', fixtureWorkflowsPath);
    workflowWorker = await startWorkers(dev, [{ taskQueue: workflowQueue, workflowBundle: dev.bundle }]);
    engine = await startEngine(dev.server.address, [
      '--queue',
      'speech-cpu',
      '--device',
      'cpu',
      '--concurrency',
      '2',
      '--allow-dir',
      dir.path,
    ]);
  }, 300_000);

  afterAll(async () => {
    await engine?.stop();
    await workflowWorker?.stop();
    await dev?.stop();
    dir?.remove();
  });

  it('says it is ready on its queue, with its engines, and reports them', async () => {
    expect(engine.readyLine).toBe(
      `speech worker polling speech-cpu on ${dev.server.address} (stt faster-whisper, tts piper,pico,espeak-ng)`,
    );
    const health = await call('speech_health');
    expect(health).toMatchObject({
      queue: 'speech-cpu',
      device: 'cpu',
      stt: ['faster-whisper'],
      tts: ['piper', 'pico', 'espeak-ng'],
    });
    // piper where a neural voice is packaged, Pico for its five languages, espeak-ng for the rest.
    expect(health.voices).toMatchObject({ en: 'en_US-joe-medium', de: 'de-DE', fr: 'fr-FR', nl: 'nl', ru: 'ru' });
  });

  it('picks the voice by language: piper, then Pico, then espeak-ng; an explicit voice wins', async () => {
    const say = async (name: string, payload: Record<string, unknown>) =>
      call('speak', { ...payload, out_path: join(dir.path, `${name}.wav`) });
    expect(await say('pick-en', { text: 'Good morning.', lang: 'en' })).toMatchObject({
      backend: 'piper',
      voice: 'en_US-joe-medium',
      sample_rate: 22050,
    });
    expect(await say('pick-de', { text: 'Guten Morgen.', lang: 'de-AT' })).toMatchObject({
      backend: 'pico',
      voice: 'de-DE',
      lang: 'de',
      sample_rate: 16000,
    });
    expect(await say('pick-nl', { text: 'Goedemorgen, hoe gaat het?', lang: 'nl' })).toMatchObject({
      backend: 'espeak-ng',
      voice: 'nl',
      lang: 'nl',
    });
    expect(await say('pick-gb', { text: 'Good morning.', voice: 'en-GB' })).toMatchObject({
      backend: 'pico',
      voice: 'en-GB',
      lang: 'en',
    });
  });

  it(`hears back what it says: ${english.length} English and ${german.length} German sentences, WER ≤ ${maxWer} each`, async () => {
    const roundTrip = (sentences: string[], name: string) =>
      dev.client.workflow.execute<typeof speechRoundTripWorkflow>('speechRoundTripWorkflow', {
        taskQueue: workflowQueue,
        workflowId: `speech-round-trip-${name}`,
        // No language given either way: speak guesses it from the text, transcribe detects it.
        args: [{ queue: 'speech-cpu', sentences, outDir: join(dir.path, name) }],
      });
    const [en, de] = await Promise.all([roundTrip(english, 'en'), roundTrip(german, 'de')]);
    const summary: string[] = [];
    const checks: (() => void)[] = [];
    for (const [lang, results, backend] of [
      ['en', en, 'piper'],
      ['de', de, 'pico'],
    ] as const) {
      const rows = results.map((r) => ({
        sentence: r.sentence,
        heard: `[${r.heard.language}] ${r.heard.text}`,
        wer: wordErrorRate(r.sentence, r.heard.text, lang as WerLanguage).wer,
      }));
      const total = corpusWordErrorRate(
        results.map((r) => ({ reference: r.sentence, hypothesis: r.heard.text })),
        lang as WerLanguage,
      );
      const detected = results.filter((r) => r.heard.language === lang).length;
      console.log(table(lang, rows));
      summary.push(
        `${lang}: WER ${total.wer.toFixed(3)} over ${total.referenceWords} words (${rows.filter((r) => r.wer === 0).length}/${rows.length} sentences exact, ` +
          `language detected ${detected}/${rows.length}); TTS ${backend} RTF ${mean(results.map((r) => r.spoken.rtf)).toFixed(3)}, STT RTF ${mean(results.map((r) => r.heard.rtf)).toFixed(3)}`,
      );
      checks.push(() => {
        for (const r of results) {
          // speak guessed the language from the text and picked that language's backend.
          expect(r.spoken, r.sentence).toMatchObject({
            lang,
            backend,
            device: 'cpu',
            sample_rate: backend === 'piper' ? 22050 : 16000,
          });
          expect(r.heard.duration_s).toBeCloseTo(r.spoken.duration_s, 1);
        }
        // Detection hears one short sentence at a time; allow one miss in ten.
        expect(detected / results.length, `${lang} detected`).toBeGreaterThanOrEqual(0.9);
        expect(total.wer, `${lang} corpus WER`).toBeLessThanOrEqual(maxWer);
      });
    }
    console.log(summary.join('\n'));
    for (const check of checks) check();
  }, 600_000);

  it('transcribes a noisy 44.1 kHz stereo MP3 with word timings in order and inside the audio', async () => {
    const wav = join(dir.path, 'paragraph.wav');
    const spoken = await call('speak', { text: paragraph, lang: 'en', out_path: wav });
    const mp3 = join(dir.path, 'paragraph.mp3');
    toNoisyMp3(wav, mp3);
    const heard = await call('transcribe', { audio_path: mp3, language: 'auto', word_timestamps: true });
    const words = heard.words as { word: string; start: number; end: number; probability: number }[];
    const duration = heard.duration_s as number;
    expect(heard).toMatchObject({ language: 'en', backend: 'faster-whisper', device: 'cpu', model: 'whisper-base' });
    expect(duration).toBeCloseTo(spoken.duration_s as number, 0);
    expect(words.length).toBeGreaterThan(30);
    let previousStart = 0;
    for (const w of words) {
      expect(w.start, w.word).toBeGreaterThanOrEqual(previousStart);
      expect(w.end, w.word).toBeGreaterThanOrEqual(w.start);
      expect(w.end, w.word).toBeLessThanOrEqual(duration + 0.05);
      expect(w.probability).toBeGreaterThan(0);
      expect(w.probability).toBeLessThanOrEqual(1);
      previousStart = w.start;
    }
    // The words and the text agree, and the confidence is their mean probability.
    expect(words.map((w) => w.word).join(' ')).toBe((heard.text as string).split(/\s+/).join(' '));
    expect(heard.confidence as number).toBeCloseTo(words.reduce((a, w) => a + w.probability, 0) / words.length, 3);
    // The last word ends near the end of the speech, not at zero: the timings follow the audio.
    expect(words.at(-1)!.end).toBeGreaterThan(duration - 3);
    expect(wordErrorRate(paragraph, heard.text as string).wer, heard.text as string).toBeLessThanOrEqual(maxWer);
  }, 300_000);

  it("transcribes recorded human speech (alsa-utils' channel announcements) with word timings; noise is no speech", async () => {
    // A man's voice recorded at 48 kHz, shipped by Debian's alsa-utils for speaker tests.
    const samples = '/usr/share/sounds/alsa';
    const expected: Record<string, string> = {
      Front_Center: 'front center',
      Front_Left: 'front left',
      Front_Right: 'front right',
      Rear_Center: 'rear center',
      Rear_Left: 'rear left',
      Rear_Right: 'rear right',
      Side_Left: 'side left',
      Side_Right: 'side right',
    };
    const rows: string[] = [];
    for (const [name, words] of Object.entries(expected)) {
      const file = join(dir.path, `${name}.wav`);
      copyFileSync(join(samples, `${name}.wav`), file);
      const heard = await call('transcribe', { audio_path: file, language: 'auto', word_timestamps: true });
      const timed = heard.words as { word: string; start: number; end: number }[];
      rows.push(
        `${name.padEnd(13)} ${String(heard.text).padEnd(16)} ${timed.map((w) => `${w.word}@${w.start.toFixed(2)}–${w.end.toFixed(2)}`).join(' ')}`,
      );
      expect(heard, name).toMatchObject({ language: 'en' });
      expect(wordErrorRate(words, heard.text as string).wer, `${name}: ${heard.text as string}`).toBe(0);
      expect(timed.length).toBe(2);
      expect(timed[0]!.end).toBeLessThanOrEqual(timed[1]!.start);
      expect(timed[1]!.end).toBeLessThanOrEqual((heard.duration_s as number) + 0.05);
    }
    console.log(`-- recorded human speech (alsa-utils)\n${rows.join('\n')}`);
    // Its pink-noise sample is loud, but has no words in it.
    const noise = join(dir.path, 'Noise.wav');
    copyFileSync(join(samples, 'Noise.wav'), noise);
    const { app } = await failureOf(call('transcribe', { audio_path: noise }));
    expect(app.type).toBe('EmptyAudio');
    expect(app.nonRetryable).toBe(true);
    expect(app.message).toMatch(/^no speech heard in 1\.\d s of audio/);
  }, 300_000);

  describe('refuses bad input at once, non-retryable, and keeps serving', () => {
    const cases: {
      name: string;
      make: () => [activity: 'speak' | 'transcribe', payload: unknown];
      type: string;
      message: RegExp;
    }[] = [
      {
        name: 'a text file renamed .wav',
        make: () => {
          const p = join(dir.path, 'notes.wav');
          writeFileSync(p, 'Dear diary, this is plain text and not audio at all.\n'.repeat(20));
          return ['transcribe', { audio_path: p }];
        },
        type: 'NotAudio',
        message: /notes\.wav is not decodable audio/,
      },
      {
        name: 'an empty WAV (a header, no samples)',
        make: () => {
          const p = join(dir.path, 'empty.wav');
          writeWav(p, 16000, new Int16Array(0));
          return ['transcribe', { audio_path: p }];
        },
        type: 'EmptyAudio',
        message: /empty\.wav holds 0\.000 s of audio; at least 0\.1 s is needed/,
      },
      {
        name: 'three seconds of silence',
        make: () => {
          const p = join(dir.path, 'silence.wav');
          writeWav(p, 16000, new Int16Array(48000));
          return ['transcribe', { audio_path: p }];
        },
        type: 'EmptyAudio',
        message: /silence\.wav contains only silence/,
      },
      {
        name: 'a two-hour WAV',
        make: () => {
          const p = join(dir.path, 'two-hours.wav');
          writeSparseSilentWav(p, 16000, 2 * 3600);
          expect(statSync(p).size).toBe(44 + 2 * 3600 * 16000 * 2);
          return ['transcribe', { audio_path: p }];
        },
        type: 'AudioTooLong',
        message: /two-hours\.wav lasts 2\.00 h; the limit is 30 min/,
      },
      {
        name: 'a 4 kHz WAV',
        make: () => {
          const p = join(dir.path, 'four-khz.wav');
          writeWav(p, 4000, tone(4000, 2));
          return ['transcribe', { audio_path: p }];
        },
        type: 'UnsupportedSampleRate',
        message: /sampled at 4000 Hz; supported: 8000-48000 Hz/,
      },
      {
        name: 'a language Whisper does not know',
        make: () => ['transcribe', { audio_path: join(dir.path, 'en', '0.wav'), language: 'xx' }],
        type: 'UnsupportedLanguage',
        message: /'xx' is not a language Whisper knows; use 'auto' or one of: .*\bde\b.*/,
      },
      {
        name: 'a file outside the folders the worker may use',
        make: () => ['transcribe', { audio_path: '/etc/hostname' }],
        type: 'BadInput',
        message: /audio_path \/etc\/hostname lies outside the folders this worker may use/,
      },
      {
        name: 'no audio_path',
        make: () => ['transcribe', {}],
        type: 'BadInput',
        message: /audio_path is required/,
      },
      {
        name: 'speak in a language nobody speaks',
        make: () => ['speak', { text: 'Hello there.', lang: 'xx', out_path: join(dir.path, 'xx.wav') }],
        type: 'UnsupportedLanguage',
        message: /no voice speaks 'xx'; languages with a voice on this host: .*\bde\b.*\ben\b/,
      },
      {
        name: 'speak an empty text',
        make: () => ['speak', { text: '   ', out_path: join(dir.path, 'blank.wav') }],
        type: 'BadInput',
        message: /text is required and must not be empty/,
      },
      {
        name: 'speak a text over 5000 characters',
        make: () => ['speak', { text: 'word '.repeat(1001), out_path: join(dir.path, 'long.wav') }],
        type: 'BadInput',
        message: /text has 5005 characters; the limit is 5000/,
      },
    ];

    it.each(cases)('$name → $type', async ({ make, type, message }) => {
      const [activity, payload] = make();
      const started = Date.now();
      const { activity: failure, app } = await failureOf(call(activity, payload));
      expect(app.type).toBe(type);
      expect(app.nonRetryable).toBe(true);
      expect(app.message).toMatch(message);
      // One attempt, not three: the server stopped because the failure said not to retry.
      expect(failure.retryState).toBe(RetryState.NON_RETRYABLE_FAILURE);
      expect(Date.now() - started).toBeLessThan(15_000);
      // And the worker is still there for the next request.
      await expect(call('speech_health')).resolves.toMatchObject({ queue: 'speech-cpu' });
    });

    it('still speaks and hears after all of them', async () => {
      const out = join(dir.path, 'after.wav');
      const spoken = await call('speak', { text: 'Everything still works.', out_path: out });
      const heard = await call('transcribe', { audio_path: out, language: 'en' });
      expect(wordErrorRate('Everything still works.', heard.text as string).wer).toBeLessThanOrEqual(0.34);
      expect(spoken.backend).toBe('piper');
    });
  });

  it('heartbeats while it transcribes long audio, and stops when cancelled', async () => {
    // About eight minutes of speech: the paragraph, said again and again.
    const src = join(dir.path, 'long-source.wav');
    await call('speak', { text: paragraph, lang: 'en', out_path: src });
    const one = readWav(src);
    const copies = Math.ceil((8 * 60 * one.sampleRate * 2) / one.pcm.length);
    const pcm = Buffer.concat(Array.from({ length: copies }, () => one.pcm));
    const long = join(dir.path, 'long.wav');
    writeWav(long, one.sampleRate, new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length / 2));
    const handle = await dev.client.workflow.start<typeof speechCallWorkflow>('speechCallWorkflow', {
      taskQueue: workflowQueue,
      workflowId: 'speech-cancel-long',
      args: [
        {
          queue: 'speech-cpu',
          activity: 'transcribe',
          payload: { audio_path: long, language: 'en' },
          heartbeatTimeout: '4 seconds',
        },
      ],
    });
    // Wait for a heartbeat from the transcribing stage that has got somewhere into the audio.
    let details: { stage?: string; position_s?: number; duration_s?: number } = {};
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline) {
      const described = await handle.describe();
      const payload = described.raw.pendingActivities?.[0]?.heartbeatDetails?.payloads?.[0]?.data;
      if (payload) details = JSON.parse(Buffer.from(payload).toString('utf8')) as typeof details;
      if (details.stage === 'transcribing' && (details.position_s ?? 0) > 0) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(details).toMatchObject({ stage: 'transcribing' });
    expect(details.position_s!).toBeGreaterThan(0);
    expect(details.duration_s!).toBeGreaterThan(7 * 60);
    const cancelledAt = Date.now();
    await handle.cancel();
    const err = await handle.result().then(
      () => undefined,
      (e: unknown) => e,
    );
    const cancelLatency = Date.now() - cancelledAt;
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause;
    expect(
      cause instanceof CancelledFailure ||
        (cause instanceof ActivityFailure && cause.cause instanceof CancelledFailure),
      String(cause),
    ).toBe(true);
    // The workflow waits for the activity to confirm the cancel, and the activity confirms only
    // once its thread has stopped: after the 30 s window it is on (a few seconds, more when the
    // decoder falls back to sampling), far sooner than the minutes eight minutes of audio take.
    expect(cancelLatency).toBeLessThan(40_000);
    expect(engine.log()).toMatch(/transcribe cancelled/);
    await expect(call('speech_health')).resolves.toMatchObject({ queue: 'speech-cpu' });
  }, 300_000);

  it('polls speech-gpu when told to (a GPU host simulated on the CPU) and serves there', async () => {
    const gpu = await startEngine(dev.server.address, [
      '--queue',
      'speech-gpu',
      '--device',
      'cpu',
      '--concurrency',
      '1',
      '--allow-dir',
      dir.path,
    ]);
    try {
      expect(gpu.readyLine).toMatch(/^speech worker polling speech-gpu on /);
      const health = await call('speech_health', undefined, 'speech-gpu');
      expect(health).toMatchObject({ queue: 'speech-gpu', device: 'cpu' });
      mkdirSync(join(dir.path, 'gpu'), { recursive: true });
      const spoken = await call(
        'speak',
        { text: 'Routed to the other queue.', out_path: join(dir.path, 'gpu', 'x.wav') },
        'speech-gpu',
      );
      expect(spoken).toMatchObject({ backend: 'piper', lang: 'en' });
      expect(gpu.log()).not.toMatch(/Traceback/);
    } finally {
      expect(await gpu.stop()).toBe(0);
    }
  }, 180_000);
});
