/**
 * The header of a WAV file (RIFF/WAVE): format, channels, rate and how long the audio lasts.
 * Pure: the caller reads the first bytes of the file (`wavHeadBytes` are enough for any header
 * a recorder writes) and its size. Speech is charged by the second, so a transcription's
 * lifeforce is held for the duration this reads before any engine runs.
 */

/** Bytes of the file's start the parser needs (chunks before `data` are usually small). */
export const wavHeadBytes = 64 * 1024;

export interface WavInfo {
  /** 1 PCM, 3 IEEE float, 0xFFFE extensible, … (the `fmt ` chunk's audio format). */
  audioFormat: number;
  channels: number;
  sampleRate: number;
  bitsPerSample: number;
  /** Bytes of audio in the `data` chunk (clipped to the file's size). */
  dataBytes: number;
  durationS: number;
}

type WavProblem = { code: 'NotAudio' | 'EmptyAudio'; reason: string };
type WavParse = { ok: true; wav: WavInfo } | ({ ok: false } & WavProblem);

const ascii = (b: Uint8Array, at: number) => String.fromCharCode(b[at]!, b[at + 1]!, b[at + 2]!, b[at + 3]!);
const u16 = (b: Uint8Array, at: number) => b[at]! | (b[at + 1]! << 8);
const u32 = (b: Uint8Array, at: number) => (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16) | (b[at + 3]! << 24)) >>> 0;

/**
 * Read a WAV header from `head` (the file's first bytes) of a file of `fileSize` bytes. Not a WAV
 * (no RIFF/WAVE, no `fmt ` or `data` chunk where it should be) is `NotAudio`; a WAV with no
 * audio in it is `EmptyAudio`.
 */
export function parseWavHeader(head: Uint8Array, fileSize: number): WavParse {
  if (head.length < 12 || ascii(head, 0) !== 'RIFF' || ascii(head, 8) !== 'WAVE') {
    return { ok: false, code: 'NotAudio', reason: 'not a WAV file (no RIFF/WAVE header)' };
  }
  let fmt: Omit<WavInfo, 'dataBytes' | 'durationS'> | null = null;
  let byteRate = 0;
  let at = 12;
  while (at + 8 <= head.length) {
    const id = ascii(head, at);
    const size = u32(head, at + 4);
    const body = at + 8;
    if (id === 'fmt ') {
      if (size < 16 || body + 16 > head.length)
        return { ok: false, code: 'NotAudio', reason: 'a WAV file with a truncated fmt chunk' };
      fmt = {
        audioFormat: u16(head, body),
        channels: u16(head, body + 2),
        sampleRate: u32(head, body + 4),
        bitsPerSample: u16(head, body + 14),
      };
      byteRate = u32(head, body + 8);
    } else if (id === 'data') {
      if (!fmt) return { ok: false, code: 'NotAudio', reason: 'a WAV file whose data comes before its fmt chunk' };
      if (fmt.channels === 0 || fmt.sampleRate === 0)
        return {
          ok: false,
          code: 'NotAudio',
          reason: `a WAV file with ${fmt.channels} channels at ${fmt.sampleRate} Hz`,
        };
      const rate = byteRate > 0 ? byteRate : (fmt.sampleRate * fmt.channels * Math.max(8, fmt.bitsPerSample)) / 8;
      // A streamed WAV may leave the size unset (0 or 0xFFFFFFFF): the rest of the file is audio.
      const dataBytes = Math.max(
        0,
        Math.min(size === 0 || size === 0xffffffff ? Number.POSITIVE_INFINITY : size, fileSize - body),
      );
      if (dataBytes === 0) return { ok: false, code: 'EmptyAudio', reason: 'a WAV file with no audio in it' };
      return { ok: true, wav: { ...fmt, dataBytes, durationS: dataBytes / rate } };
    }
    // Chunks are padded to an even size.
    at = body + size + (size % 2);
  }
  return {
    ok: false,
    code: 'NotAudio',
    reason: fmt ? 'a WAV file without a data chunk' : 'a WAV file without a fmt chunk',
  };
}

/** A 16-bit PCM WAV header for `samples` samples of mono audio at `sampleRate` (tests, fixtures). */
export function pcm16WavHeader(samples: number, sampleRate: number): Uint8Array {
  const head = new Uint8Array(44);
  const view = new DataView(head.buffer);
  const put = (at: number, s: string) => [...s].forEach((c, i) => (head[at + i] = c.charCodeAt(0)));
  put(0, 'RIFF');
  view.setUint32(4, 36 + samples * 2, true);
  put(8, 'WAVE');
  put(12, 'fmt ');
  view.setUint32(16, 16, true);
  view.setUint16(20, 1, true);
  view.setUint16(22, 1, true);
  view.setUint32(24, sampleRate, true);
  view.setUint32(28, sampleRate * 2, true);
  view.setUint16(32, 2, true);
  view.setUint16(34, 16, true);
  put(36, 'data');
  view.setUint32(40, samples * 2, true);
  return head;
}
