/**
 * `npm run bench -- speech [--device=cuda]`: the speech engine (the Python worker,
 * speech/mindloop_speech) with its real models, called by name from workflows on a real Temporal
 * server (the embedded stack, a TypeScript worker in this process running the engine's fixture
 * workflows), as the product's speech workflow calls it.
 *
 * One engine worker at `--concurrency 1`, so every figure is one job alone on the machine:
 * - TTS: short sentences in English (lang 'en', piper) and German (lang 'de', whatever backend the
 *   engine picks, read from its answers), then voice-note paragraphs of 15–30 s in both languages;
 *   RTF per backend over all of that backend's clips.
 * - STT: the voice notes transcribed with language 'auto' (the headline `stt_rtf_p50`), and short
 *   single sentences apart (`stt_rtf_p50_short`): Whisper pads every window to 30 s, so a short clip
 *   costs about as much as a long one.
 * - WER of the round trips (text → speak → transcribe → text), per language over all its clips.
 * - Queue wait: the short clips' transcriptions put on the queue at once; a job's wait runs from
 *   its ActivityTaskScheduled event until the engine begins on it (its completion event less the
 *   engine's own `elapsed_ms`), because the worker takes a couple more tasks from Temporal than it
 *   runs (a health check keeps a slot) and they wait in its thread pool, where Temporal's own
 *   schedule-to-start (reported beside it) does not see them.
 *
 * RTF = the engine's elapsed time / the audio's duration, both as the engine reports them. Keys
 * carry the device (`cpu_…`, `gpu_…`); the plain keys (`stt_rtf_p50`, `tts_rtf_p50`, …) are the CPU's. A `cuda`
 * run keeps the CPU keys of the last results file and adds its own.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { NativeConnection, Worker, bundleWorkflowCode } from '@temporalio/worker';
import { everydaySentences } from '../core/speech/sentences.js';
import { corpusWordErrorRate, type WerLanguage } from '../core/speech/wer.js';
import { findSpeechEngine, speechInstallHint, startSpeechWorker, type SpeechWorker } from '../runtime/speech-worker.js';
import type { speechCallWorkflow } from '../test/fixtures/workflows/speech.js';
import { benchStack, summarize } from './lib.js';
import { failoverWorkerOptions } from '../workers/failover.js';

export type SpeechDevice = 'cpu' | 'cuda';

/** What the machine must reach; printed as met or missed, never adjusted. */
const targets = { sttRtf: 0.5, ttsRtf: 0.2 };
const voiceNoteSeconds = { min: 15, max: 30 };
const workflowQueue = 'bench-speech';

const englishSentences = everydaySentences.en;
const germanSentences = everydaySentences.de;

/** Voice notes as people leave them: several sentences, 15–30 s spoken. */
const englishNotes = [
  'Hi, it is me. I am running a bit late because the train stopped outside the station for twenty minutes. ' +
    'Could you start the meeting without me and ask Sarah to share the budget slides? ' +
    'I will join as soon as I can, probably around half past ten. ' +
    'Sorry again, and please keep a coffee for me. If the projector does not work, there is a spare cable in the top drawer of my desk.',
  'Quick reminder for tomorrow. The plumber is coming at eight in the morning to fix the kitchen sink. ' +
    'Please leave the back door open and put the dog in the garden. ' +
    'If he asks about the heating, tell him we want a price first. ' +
    'I will be back home before lunch, and we can decide together in the afternoon.',
  'Good morning everyone. Today we will talk about the garden behind the old school. ' +
    'The apple trees need water every evening, and the roses need more sun. ' +
    'If you have time on Saturday, please bring gloves and a small shovel. ' +
    'We will start at nine and finish before noon, and there will be tea and cake for everyone.',
  'Hey, thanks for the book you lent me last week. I finished it on the plane and loved the ending. ' +
    'I left it on your desk together with a box of chocolates. ' +
    'Let me know when you are free for lunch, I want to hear what you are reading next. ' +
    'My week is quite busy, but Friday looks good. Have a lovely weekend.',
  'Note to self. Buy milk, bread, eggs and coffee on the way home. ' +
    'Call the dentist before five to move the appointment to next Thursday. ' +
    'And do not forget to send the photos from the wedding to my parents tonight. ' +
    'Also check whether the car needs new tyres before the long drive next month, and then go to bed early for once.',
];

const germanNotes = [
  'Hallo, ich bin es. Ich komme heute etwas später nach Hause, weil die Besprechung länger dauert. ' +
    'Kannst du bitte die Kinder von der Schule abholen und mit ihnen zu Abend essen? ' +
    'Im Kühlschrank ist noch Suppe von gestern. ' +
    'Ich rufe dich an, sobald ich im Zug sitze, und bringe auf dem Weg noch frisches Brot mit.',
  'Guten Morgen zusammen. Am Freitag treffen wir uns um neun Uhr im großen Raum im ersten Stock. ' +
    'Bitte bringt eure Notizen zum neuen Projekt mit. ' +
    'Wer nicht kommen kann, schreibt mir bitte bis Donnerstag eine kurze Nachricht. ' +
    'Kaffee und Brötchen gibt es wie immer in der Küche. Vielen Dank und bis dann.',
  'Kurze Erinnerung für das Wochenende. Wir fahren am Samstag früh mit dem Auto an den See. ' +
    'Denk bitte an die Badesachen, die Decke und etwas zu trinken. ' +
    'Wenn es regnet, gehen wir stattdessen ins Museum in der Stadt. ' +
    'Am Abend wollen wir dann zusammen grillen. Ich freue mich schon sehr darauf.',
  'Danke für das schöne Geschenk zu meinem Geburtstag. Die Blumen stehen jetzt auf dem Tisch im Wohnzimmer. ' +
    'Wir sollten uns bald wieder sehen, vielleicht nächste Woche zum Kaffee. ' +
    'Sag mir einfach, welcher Tag dir am besten passt. ' +
    'Ich habe dienstags und donnerstags nachmittags meistens Zeit. Bis bald und liebe Grüße.',
  'Notiz für mich. Morgen den Arzt anrufen und einen Termin für die Kontrolle ausmachen. ' +
    'Danach zur Bank gehen und die Rechnung für die Wohnung bezahlen. ' +
    'Am Abend noch die Wäsche aufhängen und den Müll rausbringen. ' +
    'Und nicht vergessen, der Oma eine Karte zum Geburtstag zu schreiben. Dann früh ins Bett gehen.',
];

/**
 * Sentences per language (up to all there are), voice notes per language, whether a note is cut to
 * its first sentence, and how many of each language's short clips go into the backlog (both
 * together make it). `smoke`: one of each, the note a sentence long.
 */
export const speechSizes = {
  full: { sentences: 12, notes: 5, firstSentenceOnly: false, backlogPerLanguage: 6 },
  smoke: { sentences: 1, notes: 1, firstSentenceOnly: true, backlogPerLanguage: 1 },
};
type SpeechSizes = typeof speechSizes.full;

interface SpeakResult {
  audio_path: string;
  duration_s: number;
  backend: string;
  voice: string;
  elapsed_ms: number;
  rtf: number;
}
interface TranscribeResult {
  text: string;
  language: string;
  duration_s: number;
  backend: string;
  model: string;
  elapsed_ms: number;
  rtf: number;
}
interface Clip {
  text: string;
  lang: WerLanguage;
  kind: 'sentence' | 'note';
  spoken: SpeakResult;
}
interface Heard {
  clip: Clip;
  heard: TranscribeResult;
}

type Call = typeof speechCallWorkflow;

/** `espeak-ng` → `espeak_ng`: a backend's name as a key's suffix. */
const keyPart = (s: string) => s.replace(/[^a-z0-9]+/gi, '_').toLowerCase();
const fmt = (v: number, digits = 3) => (Number.isFinite(v) ? v.toFixed(digits) : 'n/a');

function eventMs(t: { seconds?: unknown; nanos?: number | null } | null | undefined): number {
  if (!t) return Number.NaN;
  return Number(t.seconds ?? 0) * 1000 + (t.nanos ?? 0) / 1e6;
}

/** A job's times from its history: when the activity was scheduled, started (as Temporal saw it) and completed. */
async function activityTimes(
  handle: WorkflowHandle,
): Promise<{ scheduled: number; started: number; completed: number; attempts: number }> {
  const events = (await handle.fetchHistory()).events ?? [];
  const at = (pick: (e: (typeof events)[number]) => unknown) => eventMs(events.find((e) => pick(e))?.eventTime);
  const started = events.find((e) => e.activityTaskStartedEventAttributes);
  return {
    scheduled: at((e) => e.activityTaskScheduledEventAttributes),
    started: eventMs(started?.eventTime),
    completed: at((e) => e.activityTaskCompletedEventAttributes),
    attempts: started?.activityTaskStartedEventAttributes?.attempt ?? 1,
  };
}

/**
 * The speech figures on `device`. `cpuIfNoGpu` (a smoke run): where the engine finds no usable
 * CUDA device, measure the CPU instead and say so; `measured` is the device measured.
 */
export async function measureSpeech(opts: {
  device: SpeechDevice;
  sizes?: SpeechSizes;
  cpuIfNoGpu?: boolean;
}): Promise<{ metrics: Record<string, number>; notes: Record<string, string>; measured: SpeechDevice }> {
  const sizes = opts.sizes ?? speechSizes.full;
  try {
    return { ...(await measureOn(opts.device, sizes)), measured: opts.device };
  } catch (err) {
    const noGpu = /sees no CUDA device|did not load on CUDA/.exec(String(err));
    if (!(opts.cpuIfNoGpu && opts.device === 'cuda' && noGpu)) throw err;
    const reason = `the engine found no usable GPU (${noGpu[0]})`;
    process.stdout.write(`  ${reason}: measuring the CPU backend instead\n`);
    const cpu = await measureOn('cpu', sizes);
    return {
      metrics: cpu.metrics,
      notes: { ...cpu.notes, gpu: `skipped: ${reason}; the CPU backend was measured` },
      measured: 'cpu',
    };
  }
}

async function measureOn(
  device: SpeechDevice,
  sizes: SpeechSizes,
): Promise<{ metrics: Record<string, number>; notes: Record<string, string> }> {
  const prefix = device === 'cpu' ? 'cpu_' : 'gpu_';
  const engineQueue = device === 'cpu' ? 'speech-cpu' : 'speech-gpu';
  // Other work on these small machines skews every figure: the load is recorded beside them.
  const loadBefore = loadavg()[0]!;
  const { env, stack, stop } = await benchStack();
  const engine = findSpeechEngine(env.MINDLOOP_TOOLS_DIR);
  if (!engine) {
    await stop();
    throw new Error(`the speech engine is not installed: ${speechInstallHint}`);
  }
  const audioDir = join(env.MINDLOOP_DATA_DIR, 'speech-bench');
  mkdirSync(audioDir, { recursive: true });
  let speech: SpeechWorker | undefined;
  let connection: NativeConnection | undefined;
  let client: Client | undefined;
  try {
    connection = await NativeConnection.connect(stack.temporal.connection);
    client = new Client({
      connection: await Connection.connect(stack.temporal.connection),
      namespace: stack.temporal.namespace,
    });
    const workflowBundle = await bundleWorkflowCode({
      workflowsPath: fileURLToPath(new URL('../test/fixtures/workflows/speech.ts', import.meta.url)),
      logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
    });
    const worker = await Worker.create({
      connection,
      namespace: stack.temporal.namespace,
      taskQueue: workflowQueue,
      ...failoverWorkerOptions,
      workflowBundle,
    });
    const startedAt = performance.now();
    speech = await startSpeechWorker({
      engine,
      address: stack.temporal.address,
      namespace: stack.temporal.namespace,
      queue: engineQueue,
      dataDir: env.MINDLOOP_DATA_DIR,
      // One job at a time: each figure is a job alone on the machine, and the backlog queues.
      args: ['--concurrency', '1', '--allow-dir', audioDir],
    }).catch((err: Error) => {
      const log = join(env.MINDLOOP_DATA_DIR, `speech-worker-${engineQueue.slice('speech-'.length)}.log`);
      const tail = existsSync(log) ? readFileSync(log, 'utf8').split('\n').slice(-15).join('\n') : '';
      throw new Error(`${err.message}${tail ? `\n${tail}` : ''}`);
    });
    const workerStartS = (performance.now() - startedAt) / 1000;
    process.stdout.write(`  ${speech.readyLine} (${workerStartS.toFixed(1)} s)\n`);

    let seq = 0;
    const temporal = client;
    const start = (activity: 'speak' | 'transcribe' | 'speech_health', payload?: unknown) =>
      temporal.workflow.start<Call>('speechCallWorkflow', {
        taskQueue: workflowQueue,
        workflowId: `bench-speech/${activity}/${seq++}`,
        args: [{ queue: engineQueue, activity, ...(payload === undefined ? {} : { payload }) }],
      });
    const call = async <T>(activity: 'speak' | 'transcribe' | 'speech_health', payload?: unknown) =>
      (await (await start(activity, payload)).result()) as T;
    const speak = async (text: string, lang: WerLanguage, kind: Clip['kind'], name: string): Promise<Clip> => ({
      text,
      lang,
      kind,
      spoken: await call<SpeakResult>('speak', { text, lang, out_path: join(audioDir, `${name}.wav`) }),
    });
    const transcribe = (clip: Clip) =>
      call<TranscribeResult>('transcribe', { audio_path: clip.spoken.audio_path, language: 'auto' });

    return await worker.runUntil(async () => {
      const health = await call<{ device: string; stt: string[]; tts: string[]; voices: Record<string, string> }>(
        'speech_health',
      );
      // Warm-up, not counted: the first call of each engine pays for lazy set-up.
      const warm = [
        await speak(englishSentences[0]!, 'en', 'sentence', 'warm-en'),
        await speak(germanSentences[0]!, 'de', 'sentence', 'warm-de'),
      ];
      await transcribe(warm[0]!);

      process.stdout.write('  speaking sentences and voice notes…\n');
      const sentences: Clip[] = [];
      for (const [i, s] of englishSentences.slice(0, sizes.sentences).entries())
        sentences.push(await speak(s, 'en', 'sentence', `en-${i}`));
      for (const [i, s] of germanSentences.slice(0, sizes.sentences).entries())
        sentences.push(await speak(s, 'de', 'sentence', `de-${i}`));
      const notes: Clip[] = [];
      const note = (text: string) => (sizes.firstSentenceOnly ? text.split(/(?<=[.?!])\s+/)[0]! : text);
      for (const [i, s] of englishNotes.slice(0, sizes.notes).entries())
        notes.push(await speak(note(s), 'en', 'note', `note-en-${i}`));
      for (const [i, s] of germanNotes.slice(0, sizes.notes).entries())
        notes.push(await speak(note(s), 'de', 'note', `note-de-${i}`));

      process.stdout.write(`  transcribing ${notes.length} voice notes one at a time…\n`);
      const heardNotes: Heard[] = [];
      for (const clip of notes) heardNotes.push({ clip, heard: await transcribe(clip) });

      const backlogClips = [
        ...sentences.filter((c) => c.lang === 'en').slice(0, sizes.backlogPerLanguage),
        ...sentences.filter((c) => c.lang === 'de').slice(0, sizes.backlogPerLanguage),
      ];
      process.stdout.write(`  a backlog of ${backlogClips.length} short transcriptions at once…\n`);
      const handles = await Promise.all(
        backlogClips.map((clip) => start('transcribe', { audio_path: clip.spoken.audio_path, language: 'auto' })),
      );
      const backlogResults = (await Promise.all(handles.map((h) => h.result()))) as TranscribeResult[];
      const heardShort: Heard[] = backlogClips.map((clip, i) => ({ clip, heard: backlogResults[i]! }));
      const times = await Promise.all(handles.map((h) => activityTimes(h)));
      const waits = times.map((t, i) => t.completed - t.scheduled - backlogResults[i]!.elapsed_ms);
      const scheduleToStart = times.map((t) => t.started - t.scheduled);
      const retried = times.filter((t) => t.attempts > 1).length;

      return report({
        prefix,
        device: device,
        firstSentenceOnly: sizes.firstSentenceOnly,
        health,
        workerStartS,
        load: [loadBefore, loadavg()[0]!],
        clips: [...sentences, ...notes],
        heardNotes,
        heardShort,
        waits,
        scheduleToStart,
        retried,
      });
    });
  } finally {
    await client?.connection.close();
    await connection?.close();
    await speech?.stop();
    await stop();
  }
}

interface Measured {
  prefix: string;
  device: SpeechDevice;
  /** The voice notes were cut to their first sentence (a smoke run): their length is not a voice note's. */
  firstSentenceOnly: boolean;
  health: { device: string; stt: string[]; tts: string[]; voices: Record<string, string> };
  workerStartS: number;
  /** The 1-minute load average before and after the run. */
  load: [number, number];
  clips: Clip[];
  heardNotes: Heard[];
  heardShort: Heard[];
  waits: number[];
  scheduleToStart: number[];
  retried: number;
}

function report(m: Measured): { metrics: Record<string, number>; notes: Record<string, string> } {
  const p = m.prefix;
  const metrics: Record<string, number> = {};
  const rows: string[][] = [];
  const verdict = (value: number, target: number) => (value <= target ? `≤ ${target} met` : `≤ ${target} MISSED`);
  const span = (xs: number[]) => {
    const s = summarize(xs);
    return `${fmt(s.p50, 1)} (${fmt(Math.min(...xs), 1)}–${fmt(Math.max(...xs), 1)})`;
  };

  // TTS, per backend the engine answered with.
  const byBackend = new Map<string, Clip[]>();
  for (const c of m.clips) byBackend.set(c.spoken.backend, [...(byBackend.get(c.spoken.backend) ?? []), c]);
  // The headline is the slowest backend's p50: every voice the engine uses must keep up.
  const tts = {
    p50: Math.max(...[...byBackend.values()].map((clips) => summarize(clips.map((c) => c.spoken.rtf)).p50)),
  };
  metrics[`${p}tts_rtf_p50`] = tts.p50;
  for (const [backend, clips] of byBackend) {
    const k = keyPart(backend);
    const r = summarize(clips.map((c) => c.spoken.rtf));
    const d = clips.map((c) => c.spoken.duration_s);
    metrics[`${p}tts_rtf_p50_${k}`] = r.p50;
    metrics[`${p}tts_rtf_p99_${k}`] = r.p99;
    metrics[`${p}tts_clips_${k}`] = clips.length;
    metrics[`${p}tts_clip_s_p50_${k}`] = summarize(d).p50;
    metrics[`${p}tts_audio_s_${k}`] = d.reduce((a, b) => a + b, 0);
    const langs = [...new Set(clips.map((c) => c.lang))].join('+');
    rows.push([
      `TTS ${langs} (${backend}, ${clips[0]!.spoken.voice})`,
      String(clips.length),
      span(d),
      fmt(r.p50),
      fmt(r.p99),
      verdict(r.p50, targets.ttsRtf),
    ]);
  }

  // STT: voice notes (the headline) and short sentences, apart.
  const sttRow = (label: string, heard: Heard[], key: string) => {
    const r = summarize(heard.map((h) => h.heard.rtf));
    const d = heard.map((h) => h.heard.duration_s);
    metrics[`${p}stt_rtf_p50${key}`] = r.p50;
    metrics[`${p}stt_rtf_p99${key}`] = r.p99;
    metrics[`${p}stt_clips${key}`] = heard.length;
    metrics[`${p}stt_clip_s_min${key}`] = Math.min(...d);
    metrics[`${p}stt_clip_s_p50${key}`] = summarize(d).p50;
    metrics[`${p}stt_clip_s_max${key}`] = Math.max(...d);
    metrics[`${p}stt_elapsed_ms_p50${key}`] = summarize(heard.map((h) => h.heard.elapsed_ms)).p50;
    rows.push([label, String(heard.length), span(d), fmt(r.p50), fmt(r.p99), verdict(r.p50, targets.sttRtf)]);
    return r;
  };
  const model = m.heardNotes[0]?.heard ? `${m.heardNotes[0].heard.backend} ${m.heardNotes[0].heard.model}` : 'stt';
  const stt = sttRow(`STT voice notes, auto (${model})`, m.heardNotes, '');
  sttRow(`STT short sentences, auto (${model})`, m.heardShort, '_short');

  // WER of the round trips, per language: all its clips, and voice notes / sentences apart.
  const all = [...m.heardNotes, ...m.heardShort];
  const wer = (heard: Heard[], lang: WerLanguage) =>
    corpusWordErrorRate(
      heard.filter((h) => h.clip.lang === lang).map((h) => ({ reference: h.clip.text, hypothesis: h.heard.text })),
      lang,
    ).wer;
  for (const lang of ['en', 'de'] as const) {
    metrics[`${p}wer_${lang}`] = wer(all, lang);
    metrics[`${p}wer_${lang}_notes`] = wer(m.heardNotes, lang);
    metrics[`${p}wer_${lang}_short`] = wer(m.heardShort, lang);
  }
  const misheardLanguage = all.filter((h) => h.heard.language !== h.clip.lang);
  metrics[`${p}language_id_errors`] = misheardLanguage.length;

  const wait = summarize(m.waits);
  const s2s = summarize(m.scheduleToStart);
  metrics[`${p}queue_wait_p50_ms`] = wait.p50;
  metrics[`${p}queue_wait_p99_ms`] = wait.p99;
  metrics[`${p}queue_temporal_schedule_to_start_p50_ms`] = s2s.p50;
  metrics[`${p}queue_temporal_schedule_to_start_p99_ms`] = s2s.p99;
  metrics[`${p}queue_backlog_jobs`] = m.waits.length;
  metrics[`${p}queue_retried_jobs`] = m.retried;
  metrics[`${p}worker_start_s`] = m.workerStartS;
  metrics[`${p}load_avg_1m_before`] = m.load[0];
  metrics[`${p}load_avg_1m_after`] = m.load[1];
  if (m.device === 'cpu') {
    Object.assign(metrics, {
      stt_rtf_p50: stt.p50,
      stt_rtf_p50_short: metrics.cpu_stt_rtf_p50_short,
      tts_rtf_p50: tts.p50,
      wer_en: metrics.cpu_wer_en,
      wer_de: metrics.cpu_wer_de,
      queue_wait_p50_ms: wait.p50,
      queue_wait_p99_ms: wait.p99,
    });
  }

  // The readable table.
  const head = ['', 'clips', 'audio s p50 (min–max)', 'RTF p50', 'RTF p99', 'target'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    `  ${r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')}`;
  const out = [
    `\nspeech on ${m.health.device} (${cpus().length} CPUs; engine stt ${m.health.stt.join(',') || 'none'}, tts ${m.health.tts.join(',') || 'none'}; one job at a time)`,
    line(head),
    ...rows.map(line),
    `  WER (corpus)     en ${fmt(metrics[`${p}wer_en`]!)} (notes ${fmt(metrics[`${p}wer_en_notes`]!)}, short ${fmt(metrics[`${p}wer_en_short`]!)})` +
      `   de ${fmt(metrics[`${p}wer_de`]!)} (notes ${fmt(metrics[`${p}wer_de_notes`]!)}, short ${fmt(metrics[`${p}wer_de_short`]!)})` +
      `   language mis-detected: ${misheardLanguage.length}/${all.length}`,
    `  queue wait       ${m.waits.length} transcriptions at once, concurrency 1: p50 ${fmt(wait.p50 / 1000, 1)} s, p99 ${fmt(wait.p99 / 1000, 1)} s` +
      ` (Temporal schedule-to-start p50 ${fmt(s2s.p50 / 1000, 1)} s, p99 ${fmt(s2s.p99 / 1000, 1)} s)`,
    `  worker start     ${fmt(m.workerStartS, 1)} s (models loaded)`,
    `  load average     ${fmt(m.load[0], 2)} before, ${fmt(m.load[1], 2)} after, its own work included (1 min, ${cpus().length} CPUs)`,
  ];
  process.stdout.write(`${out.join('\n')}\n`);
  for (const h of misheardLanguage)
    process.stdout.write(`  ! heard as '${h.heard.language}': ${h.clip.text.slice(0, 60)}…\n`);

  const count = (kind: Clip['kind'], lang: WerLanguage) =>
    m.clips.filter((c) => c.kind === kind && c.lang === lang).length;
  const notes: Record<string, string> = {
    engine: `speech/mindloop_speech on ${m.health.device}, --concurrency 1 (one job at a time); stt ${model}; tts voices en=${m.health.voices.en ?? '?'} de=${m.health.voices.de ?? '?'}`,
    rtf: 'the engine’s elapsed_ms / the audio’s duration_s, as each activity reports them (decode + inference + write; no queue time)',
    tts: `every speak of the run per backend: ${count('sentence', 'en')} + ${count('sentence', 'de')} short sentences (lang en / de) and ${count('note', 'en')} + ${count('note', 'de')} voice-note paragraphs${m.firstSentenceOnly ? ' (each cut to its first sentence)' : ''}; *_tts_rtf_p50_<backend> per backend, the plain key the slowest backend's`,
    stt: `stt_rtf_*: ${m.heardNotes.length} voice notes (${voiceNoteSeconds.min}–${voiceNoteSeconds.max} s wanted; see stt_clip_s_*), made by speak, language auto; stt_rtf_*_short: ${m.heardShort.length} single sentences — Whisper pads every window to 30 s, so a short clip costs about a long one's time`,
    wer: 'corpusWordErrorRate of the round trips (text → speak → transcribe), per language over its voice notes and short sentences (_notes, _short apart)',
    queue_wait: `${m.waits.length} transcriptions of the short clips started at once on ${m.device === 'cpu' ? 'speech-cpu' : 'speech-gpu'}: from ActivityTaskScheduled until the engine began (completed − scheduled − elapsed_ms); the worker takes concurrency + 2 tasks, so Temporal’s schedule-to-start (queue_temporal_*) misses the wait inside it`,
    targets: `stt_rtf_p50 <= ${targets.sttRtf}: ${stt.p50 <= targets.sttRtf ? 'met' : 'missed'} (short sentences ${fmt(metrics[`${p}stt_rtf_p50_short`]!)}: ${metrics[`${p}stt_rtf_p50_short`]! <= targets.sttRtf ? 'met' : 'missed'}); tts_rtf_p50 <= ${targets.ttsRtf} per backend: ${[...byBackend.keys()].map((b) => `${b} ${metrics[`${p}tts_rtf_p50_${keyPart(b)}`]! <= targets.ttsRtf ? 'met' : 'missed'}`).join(', ')}`,
  };
  const outOfRange = m.firstSentenceOnly
    ? []
    : m.heardNotes.filter(
        (h) => h.heard.duration_s < voiceNoteSeconds.min || h.heard.duration_s > voiceNoteSeconds.max,
      );
  if (outOfRange.length)
    notes.voice_notes = `${outOfRange.length} of ${m.heardNotes.length} voice notes fell outside ${voiceNoteSeconds.min}–${voiceNoteSeconds.max} s: ${outOfRange.map((h) => h.heard.duration_s.toFixed(1)).join(', ')} s`;
  // Only the load before counts: the run's own Whisper threads raise the load after it.
  if (m.load[0] > cpus().length / 2)
    notes.load = `the machine was busy with other work before the run (1-min load ${fmt(m.load[0], 2)} on ${cpus().length} CPUs): RTFs and waits are slower than on a quiet machine`;
  if (m.device === 'cuda')
    notes.gpu =
      'gpu_* keys from this run; cpu_* and the plain keys are the last CPU run’s, kept from the previous results file';
  return { metrics, notes };
}

/**
 * A `cuda` run keeps what the last results file holds for the CPU (its `cpu_…` and plain keys),
 * so one file has both devices; a CPU run writes its own keys only.
 */
export function withPreviousCpuRun(
  device: SpeechDevice,
  metrics: Record<string, number>,
  dir: string,
): Record<string, number> {
  const file = join(dir, 'speech.json');
  if (device === 'cpu' || !existsSync(file)) return metrics;
  const previous = (JSON.parse(readFileSync(file, 'utf8')) as { metrics?: Record<string, number> }).metrics ?? {};
  return { ...Object.fromEntries(Object.entries(previous).filter(([k]) => !k.startsWith('gpu_'))), ...metrics };
}
