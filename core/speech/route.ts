/**
 * Which speech queue takes a job, from the pollers Temporal reports on each. Pure: the caller
 * asks the server (activities/speech.ts `speechRoute`) and passes the clock in.
 *
 * Speech is routed by task queue, not by host: the engine (the Python worker) polls
 * `speech-gpu` when CUDA is usable on its host and `speech-cpu` otherwise, so the queue a
 * poller sits on says what hardware answers there. A GPU host transcribes and speaks many
 * times faster than real time and frees its budget sooner, so when both queues have a live
 * poller the GPU queue gets the job; the CPU queue is the fallback every host can run. A job
 * is scheduled on one queue; if no worker takes it from there in time (the host went away), the
 * workflow asks again and may land on the other one.
 */

const gpuSpeechQueue = 'speech-gpu';
const cpuSpeechQueue = 'speech-cpu';
export const speechQueues = [gpuSpeechQueue, cpuSpeechQueue] as const;
export type SpeechQueue = (typeof speechQueues)[number];

/** One poller as the server lists it (identity, and when it last polled, in ms; null: not said). */
export interface SpeechPoller {
  identity: string;
  lastAccessMs: number | null;
}

export type SpeechPollers = Record<SpeechQueue, readonly SpeechPoller[]>;

/**
 * A poller counts as live when it polled within this long. An idle worker's long poll is held by
 * the server for about a minute before the worker polls again, so a live one may not have been
 * seen for up to ~70 s; the server itself keeps listing a poller for minutes after it died.
 */
export const defaultPollerFreshMs = 90_000;

export type SpeechRoute =
  /** A worker polls `queue`: the job goes there. */
  | { state: 'gpu' | 'cpu'; queue: SpeechQueue; pollers: string[]; reason: string }
  /**
   * No speech worker polls either queue. The job still waits on a queue (`queue`, the CPU one:
   * every host can run that worker), where the first worker to come takes the backlog in
   * priority order; the workflow asks again after a while, in case a GPU worker came instead.
   */
  | { state: 'none'; queue: SpeechQueue; pollers: []; reason: string };

/** Whether the poller polled within `freshMs` of `nowMs` (a time ahead of the clock counts as now). */
export function pollerIsLive(p: SpeechPoller, nowMs: number, freshMs = defaultPollerFreshMs): boolean {
  return p.lastAccessMs !== null && nowMs - p.lastAccessMs <= freshMs;
}

/** GPU first: the GPU queue when a live worker polls it, else the CPU queue when one polls that, else none. */
export function chooseSpeechQueue(pollers: SpeechPollers, nowMs: number, freshMs = defaultPollerFreshMs): SpeechRoute {
  const live = (q: SpeechQueue) =>
    [...new Set(pollers[q].filter((p) => pollerIsLive(p, nowMs, freshMs)).map((p) => p.identity))].sort();
  const gpu = live(gpuSpeechQueue);
  if (gpu.length > 0)
    return {
      state: 'gpu',
      queue: gpuSpeechQueue,
      pollers: gpu,
      reason: `${gpu.length} GPU speech worker(s) poll ${gpuSpeechQueue}`,
    };
  const cpu = live(cpuSpeechQueue);
  if (cpu.length > 0)
    return {
      state: 'cpu',
      queue: cpuSpeechQueue,
      pollers: cpu,
      reason: `no GPU speech worker; ${cpu.length} CPU speech worker(s) poll ${cpuSpeechQueue}`,
    };
  return {
    state: 'none',
    queue: cpuSpeechQueue,
    pollers: [],
    reason: `no speech worker polls ${gpuSpeechQueue} or ${cpuSpeechQueue} (within ${Math.round(freshMs / 1000)} s): start one with \`npm start\` or \`npm run worker -- --queue speech\``,
  };
}
