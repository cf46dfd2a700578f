/**
 * Activities of the `speech-gpu` task queue. GPU hosts poll it; a laptop polls it
 * with the CPU fallback backends (espeak-ng / flite for TTS, pocketsphinx for STT).
 */
import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';

export interface SpeechBackends {
  host: string;
  tts: string[];
  stt: string[];
  gpu: boolean;
}

function has(bin: string, args: string[] = ['--version']): boolean {
  const r = spawnSync(bin, args, { stdio: 'ignore', timeout: 5000 });
  return r.error === undefined;
}

/** Speech-queue activities. */
export function createSpeechActivities() {
  return {
    /** Lists the speech backends present on this host, so routing can prefer a GPU one. */
    async speechHealth(): Promise<SpeechBackends> {
      return {
        host: hostname(),
        tts: ['espeak-ng', 'flite'].filter((b) => has(b)),
        stt: ['pocketsphinx'].filter((b) => has(b, ['help'])),
        gpu: has('nvidia-smi', ['-L']),
      };
    },
  };
}
