/**
 * The speech organ's pure parts: the GPU-first route from the pollers Temporal lists, the WAV
 * header the hold is sized from, the bound a text's seconds are held at, and the `speak`
 * command's validation.
 */
import { describe, expect, it } from 'vitest';
import { validateCommand } from '../../core/catalogue.js';
import { speakSecondsBound } from '../../core/speech/engine.js';
import { chooseSpeechQueue, defaultPollerFreshMs, pollerIsLive, type SpeechPollers } from '../../core/speech/route.js';
import { parseWavHeader, pcm16WavHeader } from '../../core/speech/wav.js';

const now = 1_800_000_000_000;
const seen = (identity: string, agoMs: number | null) => ({
  identity,
  lastAccessMs: agoMs === null ? null : now - agoMs,
});
const pollers = (gpu: SpeechPollers['speech-gpu'], cpu: SpeechPollers['speech-cpu']): SpeechPollers => ({
  'speech-gpu': gpu,
  'speech-cpu': cpu,
});

describe('chooseSpeechQueue: GPU first', () => {
  it('takes the GPU queue when a live worker polls it, even with CPU workers polling too', () => {
    const r = chooseSpeechQueue(pollers([seen('gpu-1', 2_000)], [seen('cpu-1', 1_000), seen('cpu-2', 500)]), now);
    expect(r).toMatchObject({ state: 'gpu', queue: 'speech-gpu', pollers: ['gpu-1'] });
  });

  it('takes the CPU queue when no GPU worker polls', () => {
    const r = chooseSpeechQueue(pollers([], [seen('cpu-1', 1_000)]), now);
    expect(r).toMatchObject({ state: 'cpu', queue: 'speech-cpu', pollers: ['cpu-1'] });
  });

  it('does not count a GPU poller last seen longer ago than the freshness window (a dead host the server still lists)', () => {
    const r = chooseSpeechQueue(pollers([seen('gpu-dead', defaultPollerFreshMs + 1)], [seen('cpu-1', 1_000)]), now);
    expect(r.state).toBe('cpu');
    expect(pollerIsLive(seen('gpu-edge', defaultPollerFreshMs), now)).toBe(true);
    // An idle worker's long poll holds ~60 s: still live.
    expect(chooseSpeechQueue(pollers([seen('gpu-idle', 65_000)], []), now).state).toBe('gpu');
  });

  it('with no live worker anywhere says so, and parks the job on the CPU queue', () => {
    const r = chooseSpeechQueue(
      pollers([seen('gpu-old', 10 * 60_000), seen('gpu-unknown', null)], [seen('cpu-old', 5 * 60_000)]),
      now,
    );
    expect(r.state).toBe('none');
    expect(r.queue).toBe('speech-cpu');
    expect(r.pollers).toEqual([]);
    expect(r.reason).toMatch(/no speech worker polls speech-gpu or speech-cpu/);
  });

  it('lists each live identity once, sorted (one worker polls with several pollers)', () => {
    const r = chooseSpeechQueue(pollers([seen('b', 1), seen('a', 2), seen('b', 3)], []), now);
    expect(r.pollers).toEqual(['a', 'b']);
  });

  it('counts a poller whose time is ahead of the clock (skew) as live', () => {
    expect(chooseSpeechQueue(pollers([{ identity: 'ahead', lastAccessMs: now + 5_000 }], []), now).state).toBe('gpu');
  });
});

/** A WAV file's bytes: a header and `seconds` of silence. */
function wav(seconds: number, rate = 16_000): Uint8Array {
  const samples = Math.round(seconds * rate);
  const out = new Uint8Array(44 + samples * 2);
  out.set(pcm16WavHeader(samples, rate));
  return out;
}

describe('parseWavHeader', () => {
  it('reads format, rate and duration of a PCM WAV', () => {
    const bytes = wav(2.5, 22_050);
    const r = parseWavHeader(bytes, bytes.length);
    expect(r).toEqual({
      ok: true,
      wav: {
        audioFormat: 1,
        channels: 1,
        sampleRate: 22_050,
        bitsPerSample: 16,
        dataBytes: Math.round(2.5 * 22_050) * 2,
        durationS: expect.closeTo(2.5, 3),
      },
    });
  });

  it('skips chunks before data (LIST, odd-sized with padding)', () => {
    const base = wav(1);
    const list = new Uint8Array([...'LIST'].map((c) => c.charCodeAt(0)).concat([3, 0, 0, 0, 1, 2, 3, 0]));
    const bytes = new Uint8Array(base.length + list.length);
    bytes.set(base.subarray(0, 36));
    bytes.set(list, 36);
    bytes.set(base.subarray(36), 36 + list.length);
    const r = parseWavHeader(bytes, bytes.length);
    expect(r.ok && r.wav.durationS).toBeCloseTo(1, 3);
  });

  it('takes the rest of the file as audio when a streamed WAV leaves the data size unset', () => {
    const bytes = wav(1.5);
    new DataView(bytes.buffer).setUint32(40, 0xffffffff, true);
    const r = parseWavHeader(bytes, bytes.length);
    expect(r.ok && r.wav.durationS).toBeCloseTo(1.5, 3);
  });

  it('clips a declared data size to what the file holds (a truncated recording)', () => {
    const bytes = wav(3);
    const r = parseWavHeader(bytes.subarray(0, 44 + 16_000), 44 + 16_000);
    expect(r.ok && r.wav.durationS).toBeCloseTo(0.5, 3);
  });

  it('calls a file that is not a WAV NotAudio, and a WAV without samples EmptyAudio', () => {
    const text = new TextEncoder().encode('hello, this is not audio at all');
    expect(parseWavHeader(text, text.length)).toMatchObject({
      ok: false,
      code: 'NotAudio',
      reason: expect.stringMatching(/not a WAV file/),
    });
    const empty = wav(0);
    expect(parseWavHeader(empty, empty.length)).toMatchObject({ ok: false, code: 'EmptyAudio' });
    const noData = wav(1).subarray(0, 36);
    expect(parseWavHeader(noData, noData.length)).toMatchObject({
      ok: false,
      code: 'NotAudio',
      reason: expect.stringMatching(/without a data chunk/),
    });
  });
});

describe('speech seconds and the speak command', () => {
  it('holds a text at a bound above what engines take to say it', () => {
    expect(speakSecondsBound('Hallo Welt')).toBe(3);
    // ~14 characters a second is ordinary speech: the bound is above it.
    const text = 'The quick brown fox jumps over the lazy dog. '.repeat(10);
    expect(speakSecondsBound(text)).toBeGreaterThan(text.length / 14);
  });

  it('validates speak: text required and non-empty, a real language, no unknown fields', () => {
    const check = (args: Record<string, unknown>) => validateCommand({ cmdId: 's1', type: 'speak', args });
    expect(check({ text: 'Guten Morgen', lang: 'DE' })).toMatchObject({
      ok: true,
      command: { type: 'speak', args: { text: 'Guten Morgen', lang: 'de' } },
    });
    expect(check({ text: '   ' })).toMatchObject({
      ok: false,
      code: 'invalid',
      reason: expect.stringMatching(/^invalid args for speak: args\.text: /),
    });
    expect(check({})).toMatchObject({ ok: false, reason: expect.stringMatching(/args\.text: required/) });
    expect(check({ text: 'hi', lang: 'auto' })).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/args\.lang: name the language/),
    });
    expect(check({ text: 'hi', lang: 'klingon' })).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/args\.lang/),
    });
    expect(check({ text: 'hi', voice: 'x' })).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/unknown field 'voice'/),
    });
  });
});
