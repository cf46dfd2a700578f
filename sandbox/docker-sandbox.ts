/**
 * DockerSandbox: the Sandbox contract (sandbox.ts) on dockerode. One container per
 * run, created with everything that contains it: no network, our seccomp profile
 * (seccomp.json), all capabilities dropped, no-new-privileges, read-only root, size-limited
 * tmpfs for /tmp, the work dir and /dev/shm, /dev/mqueue read-only, memory (= memory+swap), CPU
 * and pids limits, a non-root user, and our own non-dumpable init as PID 1. Budgets are enforced
 * here, not advised: wall clock (timer → SIGKILL), output (counted while streaming → SIGKILL at
 * the cap), memory (cgroup OOM kill), pids (cgroup limit; the run ends as soon as the limit is
 * hit), disk (tmpfs sizes → ENOSPC), CPU (quota + RLIMIT_CPU).
 *
 * Idempotency: the container's name is derived from the request key (and the key is a label),
 * so a retried activity finds the first attempt's container — running or exited — and picks
 * up its output instead of starting a second one.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type Docker from 'dockerode';
import { engineError, resolveSandboxImage, SANDBOX_IMAGE, SANDBOX_INIT, SandboxUnavailableError } from './image.js';
import type {
  BudgetName,
  Sandbox,
  SandboxBudget,
  SandboxProgress,
  SandboxRunRequest,
  SandboxRunResult,
} from './sandbox.js';
import { tarFiles } from './tar.js';

export { SandboxUnavailableError };

export const LABEL = 'mindloop.sandbox';
export const LABEL_KEY = 'mindloop.sandbox.key';
export const LABEL_OWNER = 'mindloop.sandbox.owner';
export const LABEL_DEADLINE = 'mindloop.sandbox.deadline';

/** The uid:gid the code runs as (nobody). */
const SANDBOX_USER = '65534:65534';
const WORK_DIR = '/work';
/** Seconds past the wall budget after which the in-container backstop kills the command. */
const BACKSTOP_GRACE_S = 5;

const defaultBudget: SandboxBudget = {
  wallMs: 30_000,
  cpus: 1,
  memoryBytes: 256 << 20,
  pids: 128,
  diskBytes: 64 << 20,
  outputBytes: 1 << 20,
};

/** The seccomp profile as Docker wants it in SecurityOpt (the JSON text, not a path). */
const seccompProfile: string = JSON.stringify(
  JSON.parse(readFileSync(new URL('./seccomp.json', import.meta.url), 'utf8')),
);

/** A bad request (budget out of range, bad file path): the caller's mistake, never retried. */
export class SandboxInputError extends Error {
  override name = 'SandboxInputError';
}

const PAGE = 4096;

/**
 * The disk budget split between every mount the run can write: /tmp, the work dir and /dev/shm
 * (a tmpfs like the others; left at Docker's default it would be 64 MiB outside the budget).
 * Page-aligned, because tmpfs rounds a size up to whole pages, so the three add up to at most
 * the budget.
 */
export function diskShares(diskBytes: number): { tmp: number; work: number; shm: number } {
  const pages = (n: number) => Math.max(PAGE, Math.floor(n / PAGE) * PAGE);
  const shm = pages(diskBytes / 16);
  const tmp = pages(diskBytes / 4);
  return { tmp, work: pages(diskBytes - shm - tmp), shm };
}

export function containerName(key: string): string {
  return `mindloop-sbx-${createHash('sha256').update(key).digest('hex').slice(0, 32)}`;
}

/** Merge and check a budget. */
export function resolveBudget(partial: Partial<SandboxBudget> = {}): SandboxBudget {
  const b = {
    ...defaultBudget,
    ...Object.fromEntries(Object.entries(partial).filter(([, v]) => v !== undefined)),
  } as SandboxBudget;
  const bad: string[] = [];
  if (!(b.wallMs >= 100 && b.wallMs <= 24 * 3_600_000)) bad.push('wallMs (100 ms … 24 h)');
  if (!(b.cpus > 0 && b.cpus <= 64)) bad.push('cpus (0 … 64]');
  if (!(b.memoryBytes >= 16 << 20)) bad.push('memoryBytes (>= 16 MiB)');
  if (!(Number.isInteger(b.pids) && b.pids >= 4)) bad.push('pids (integer >= 4)');
  if (!(b.diskBytes >= 1 << 20)) bad.push('diskBytes (>= 1 MiB)');
  if (!(b.outputBytes >= 1)) bad.push('outputBytes (>= 1)');
  if (b.cpuSeconds !== undefined && !(Number.isInteger(b.cpuSeconds) && b.cpuSeconds >= 1))
    bad.push('cpuSeconds (integer >= 1)');
  if (bad.length) throw new SandboxInputError(`invalid sandbox budget: ${bad.join(', ')}`);
  return b;
}

interface Observed {
  wallTimedOut: boolean;
  outputCapped: boolean;
  oomKilled: boolean;
  pidsLimitHit: boolean;
  exitCode: number | null;
  stderr: string;
}

/**
 * Which budget, if any, ended the run. The first cause wins over its consequences: a fork
 * bomb that hits the pids limit and then spins until the wall clock is a `pids` breach.
 */
export function classify(o: Observed): { exceeded?: BudgetName; detail?: string } {
  if (o.outputCapped) return { exceeded: 'output', detail: 'output cap reached; container killed' };
  if (o.oomKilled) return { exceeded: 'memory', detail: 'OOM-killed at the memory limit' };
  if (o.pidsLimitHit) return { exceeded: 'pids', detail: 'process limit reached (fork refused); container killed' };
  if (/No space left on device|ENOSPC/.test(o.stderr)) return { exceeded: 'disk', detail: 'tmpfs full (ENOSPC)' };
  // 128 + SIGXCPU(24): RLIMIT_CPU reached.
  if (o.exitCode === 152 || /CPU time limit exceeded/.test(o.stderr))
    return { exceeded: 'cpu', detail: 'CPU seconds limit reached (SIGXCPU)' };
  if (o.wallTimedOut) return { exceeded: 'wall_time', detail: 'wall-clock timeout; container killed' };
  return {};
}

/** Splits Docker's multiplexed stdout/stderr stream (8-byte frame headers, no TTY). */
class Demuxer {
  private buf: Buffer = Buffer.alloc(0);
  constructor(private readonly onFrame: (stream: 1 | 2, chunk: Buffer) => void) {}
  push(chunk: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    while (this.buf.length >= 8) {
      const size = this.buf.readUInt32BE(4);
      if (this.buf.length < 8 + size) break;
      const type = this.buf[0] === 2 ? 2 : 1;
      this.onFrame(type, this.buf.subarray(8, 8 + size));
      this.buf = this.buf.subarray(8 + size);
    }
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function statusCode(err: unknown): number | undefined {
  return (err as { statusCode?: number }).statusCode;
}

/** Kill/remove that tolerate a container already gone or already stopped. */
async function quietly(p: Promise<unknown>): Promise<void> {
  try {
    await p;
  } catch (err) {
    const code = statusCode(err);
    if (code !== 404 && code !== 409 && code !== 304) throw err;
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

interface DockerSandboxOptions {
  /** Image name or id; default `mindloop-sandbox:latest` (npm run sandbox:image). */
  image?: string;
  /** Where the engine's cgroups are visible (pids.events); only when the engine is local. */
  cgroupRoot?: string;
  /** How often the run is checked (pids limit) and progress reported, ms. */
  pollMs?: number;
  progressMs?: number;
}

/** Whether a cgroup's pids.events says a fork was refused at the limit (`max N`, N > 0). */
function pidsMaxHit(events: string): boolean {
  return Number(/max (\d+)/.exec(events)?.[1] ?? 0) > 0;
}

export class DockerSandbox implements Sandbox {
  private imageId: Promise<string> | null = null;
  private readonly owner = `${hostname()}:${process.pid}`;

  constructor(
    private readonly docker: Docker,
    private readonly opts: DockerSandboxOptions = {},
  ) {}

  /** The image id (inspected once); a clear error when the image or the engine is missing. */
  image(): Promise<string> {
    this.imageId ??= resolveSandboxImage(this.docker, this.opts.image ?? SANDBOX_IMAGE).catch((err: unknown) => {
      this.imageId = null;
      throw err;
    });
    return this.imageId;
  }

  /** The create options: every containment setting lives here. */
  containerSpec(req: SandboxRunRequest, budget: SandboxBudget, imageId: string): Docker.ContainerCreateOptions {
    const files = req.files && Object.keys(req.files).length > 0;
    const disk = diskShares(budget.diskBytes);
    // Files arrive as a tar stream on stdin, unpacked into the tmpfs work dir before the command
    // runs (putArchive cannot write into a tmpfs mount, and the root is read-only).
    const inner = files
      ? ['/bin/sh', '-c', `tar -x -f - -C ${WORK_DIR} && exec "$@"`, 'mindloop-sandbox', ...req.command]
      : req.command;
    // PID 1 is our init, not docker-init: it is not dumpable (docker-init, the host's readable
    // binary, would let any process of the run rewrite it through /proc/1/mem), and it is the
    // backstop: if no worker is left to enforce the wall clock (it died and no retry came), it
    // kills the run at wall + grace. PID 1 cannot be killed from inside, so neither can the
    // backstop.
    const cmd = [SANDBOX_INIT, String(Math.ceil(budget.wallMs / 1000) + BACKSTOP_GRACE_S), ...inner];
    return {
      name: containerName(req.key),
      Image: imageId,
      Cmd: cmd,
      Env: Object.entries(req.env ?? {}).map(([k, v]) => `${k}=${v}`),
      WorkingDir: WORK_DIR,
      User: SANDBOX_USER,
      Labels: {
        [LABEL]: '1',
        [LABEL_KEY]: req.key,
        [LABEL_OWNER]: this.owner,
        [LABEL_DEADLINE]: String(Date.now() + budget.wallMs + 60_000),
      },
      AttachStdin: !!files,
      OpenStdin: !!files,
      StdinOnce: !!files,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      NetworkDisabled: true,
      HostConfig: {
        Init: false,
        NetworkMode: 'none',
        ReadonlyRootfs: true,
        CapDrop: ['ALL'],
        SecurityOpt: ['no-new-privileges', `seccomp=${seccompProfile}`],
        Tmpfs: {
          '/tmp': `rw,nosuid,nodev,noexec,size=${disk.tmp},mode=1777`,
          [WORK_DIR]: `rw,nosuid,nodev,exec,size=${disk.work},uid=65534,gid=65534,mode=0700`,
          // Docker mounts the IPC namespace's mqueue fs here, writable by anyone and counted in
          // no budget; an empty read-only tmpfs hides it (POSIX queues are refused anyway: seccomp
          // drops mq_*, and RLIMIT_MSGQUEUE below is 0).
          '/dev/mqueue': `ro,nosuid,nodev,noexec,size=${PAGE},mode=0555`,
        },
        ShmSize: disk.shm,
        Memory: budget.memoryBytes,
        MemorySwap: budget.memoryBytes,
        NanoCpus: Math.round(budget.cpus * 1e9),
        PidsLimit: budget.pids,
        Ulimits: [
          { Name: 'nofile', Soft: 1024, Hard: 1024 },
          { Name: 'msgqueue', Soft: 0, Hard: 0 },
          ...(budget.cpuSeconds ? [{ Name: 'cpu', Soft: budget.cpuSeconds, Hard: budget.cpuSeconds + 1 }] : []),
        ],
        // Docker keeps at most this much log per container: what a retry re-reads.
        LogConfig: {
          Type: 'json-file',
          Config: { 'max-size': `${Math.ceil(budget.outputBytes / 1024) + 64}k`, 'max-file': '1' },
        },
        AutoRemove: false,
        Privileged: false,
      },
    };
  }

  async run(
    req: SandboxRunRequest,
    opts: { signal?: AbortSignal; onProgress?: SandboxProgress } = {},
  ): Promise<SandboxRunResult> {
    if (!req.key) throw new SandboxInputError('a sandbox run needs an idempotency key');
    if (!Array.isArray(req.command) || req.command.length === 0 || !req.command.every((c) => typeof c === 'string')) {
      throw new SandboxInputError('command must be a non-empty array of strings');
    }
    const budget = resolveBudget(req.budget);
    const tar = req.files && Object.keys(req.files).length > 0 ? tarFiles(req.files) : null;
    const imageId = await this.image();
    opts.signal?.throwIfAborted();

    // Create first (one round trip on the usual path); the name is unique per key, so 409 means
    // an earlier attempt with this key made it: re-find that container instead.
    let container = this.docker.getContainer(containerName(req.key));
    let state: Docker.ContainerInspectInfo['State'] | null = null;
    try {
      container = await this.docker.createContainer(this.containerSpec(req, budget, imageId));
    } catch (err) {
      if (statusCode(err) !== 409) throw engineError(err);
      state = (await container.inspect()).State;
    }
    // A container created but never started (the first attempt died in between) starts now.
    const reattached = state !== null && state.Status !== 'created';
    try {
      return await this.follow(container, req, budget, imageId, tar, reattached ? state : null, opts);
    } finally {
      await quietly(container.remove({ force: true, v: true })).catch(() => undefined);
    }
  }

  private async follow(
    container: Docker.Container,
    req: SandboxRunRequest,
    budget: SandboxBudget,
    imageId: string,
    tar: Buffer | null,
    previous: Docker.ContainerInspectInfo['State'] | null,
    opts: { signal?: AbortSignal; onProgress?: SandboxProgress },
  ): Promise<SandboxRunResult> {
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let kept = 0;
    let outputCapped = false;
    let wallTimedOut = false;
    let pidsLimitHit = false;
    let killing: Promise<void> | null = null;
    const kill = () => (killing ??= quietly(container.kill({ signal: 'SIGKILL' })).catch(() => undefined));

    const demux = new Demuxer((type, chunk) => {
      if (outputCapped) return;
      const room = budget.outputBytes - kept;
      const take = chunk.length <= room ? chunk : chunk.subarray(0, Math.max(0, room));
      (type === 1 ? out : err).push(take);
      kept += take.length;
      if (chunk.length > room) {
        outputCapped = true;
        void kill();
      }
    });

    let stream: NodeJS.ReadWriteStream | NodeJS.ReadableStream;
    let startedAt: number;
    if (previous) {
      // Re-found: replay its output from the start and keep following it.
      startedAt = Date.parse(previous.StartedAt) || Date.now();
      stream = await container.logs({ follow: true, stdout: true, stderr: true });
    } else {
      stream = await container.attach({ stream: true, stdin: !!tar, stdout: true, stderr: true, hijack: !!tar });
    }
    const ended = new Promise<void>((resolve) => {
      stream.on('end', resolve);
      stream.on('close', resolve);
      stream.on('error', () => resolve());
    });
    stream.on('data', (c: Buffer) => demux.push(c));

    if (!previous) {
      startedAt = Date.now();
      await container.start();
      if (tar) {
        const w = stream as NodeJS.ReadWriteStream;
        w.write(tar);
        w.end();
      }
    }
    const t0 = startedAt!;

    const remaining = Math.max(0, t0 + budget.wallMs - Date.now());
    const wallTimer = setTimeout(() => {
      wallTimedOut = true;
      void kill();
    }, remaining);
    // Cancellation kills the container at once; run()'s finally removes it.
    let rejectAborted: (reason: unknown) => void = () => undefined;
    const aborted = new Promise<never>((_, reject) => (rejectAborted = reject));
    aborted.catch(() => undefined);
    const onAbort = () => {
      void kill();
      rejectAborted(opts.signal?.reason ?? new Error('sandbox run aborted'));
    };
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener('abort', onAbort);

    const pidsFile = await this.pidsEventsFile(container.id);
    let stopPolling = false;
    const poll = (async () => {
      let lastProgress = 0;
      while (!stopPolling) {
        if (pidsFile && !pidsLimitHit) {
          if (pidsMaxHit(await readFile(pidsFile, 'utf8').catch(() => ''))) {
            pidsLimitHit = true;
            void kill();
          }
        }
        const now = Date.now();
        if (opts.onProgress && now - lastProgress >= (this.opts.progressMs ?? 1000)) {
          lastProgress = now;
          opts.onProgress({ key: req.key, elapsedMs: now - t0 });
        }
        await sleep(this.opts.pollMs ?? 100);
      }
    })();

    let exit: { StatusCode?: number };
    try {
      // 404: a concurrent attempt with the same key finished and removed it first.
      const waited = (container.wait() as Promise<{ StatusCode?: number }>).catch((e: unknown) => {
        if (statusCode(e) === 404) return {};
        throw e;
      });
      exit = await Promise.race([waited, aborted]);
    } finally {
      clearTimeout(wallTimer);
      stopPolling = true;
      opts.signal?.removeEventListener('abort', onAbort);
    }
    await poll;
    // The last frames may trail the exit; do not wait long for them.
    await Promise.race([ended, sleep(1000)]);
    const durationMs = Date.now() - t0;
    // Killed by the in-container backstop (a re-found run whose worker was gone): still wall time.
    if (!wallTimedOut && exit.StatusCode === 137 && durationMs >= budget.wallMs) wallTimedOut = true;
    if (killing) await killing;
    const state = await container.inspect().then(
      (i) => i.State,
      (e: unknown) => {
        if (statusCode(e) === 404) return null;
        throw e;
      },
    );
    const oomKilled = state?.OOMKilled ?? false;
    const stderr = Buffer.concat(err).toString('utf8');
    const exitCode = exit.StatusCode ?? state?.ExitCode ?? null;
    // The run may end (a shell that cannot fork gives up) between two polls: read the counter
    // once more. Where it cannot be read (no local cgroup, or the cgroup went with the
    // container), the shell's own words say it.
    if (!pidsLimitHit) {
      const events = pidsFile ? await readFile(pidsFile, 'utf8').catch(() => null) : null;
      if (events !== null) pidsLimitHit = pidsMaxHit(events);
      else pidsLimitHit = /can't fork|Resource temporarily unavailable|fork: retry/i.test(stderr);
    }
    const { exceeded, detail } = classify({ wallTimedOut, outputCapped, oomKilled, pidsLimitHit, exitCode, stderr });
    return {
      key: req.key,
      status: exceeded ? 'budget_exceeded' : exitCode === 0 ? 'ok' : 'error',
      ...(exceeded ? { exceeded } : {}),
      exitCode,
      stdout: Buffer.concat(out).toString('utf8'),
      stderr,
      truncated: outputCapped,
      oomKilled,
      durationMs,
      imageId,
      ...(detail ? { detail } : {}),
      ...(previous ? { reattached: true } : {}),
    };
  }

  /** The container's pids.events on this host (cgroup v1 or v2), when the engine is local. */
  private async pidsEventsFile(id: string): Promise<string | null> {
    const root = this.opts.cgroupRoot ?? '/sys/fs/cgroup';
    const candidates = [
      `${root}/pids/docker/${id}/pids.events`,
      `${root}/system.slice/docker-${id}.scope/pids.events`,
      `${root}/docker/${id}/pids.events`,
    ];
    for (const c of candidates) {
      try {
        await readFile(c, 'utf8');
        return c;
      } catch {
        /* next */
      }
    }
    return null;
  }

  /**
   * Remove sandbox containers nobody will come back for: any past its deadline label (wall budget
   * + a minute, which covers the activity's heartbeat timeout and retry), and unlabelled ones of a
   * dead worker process on this host.
   */
  async reapOrphans(): Promise<number> {
    let list: Docker.ContainerInfo[];
    try {
      list = await this.docker.listContainers({ all: true, filters: { label: [`${LABEL}=1`] } });
    } catch (err) {
      throw engineError(err);
    }
    const host = hostname();
    let reaped = 0;
    for (const c of list) {
      const [ownerHost, ownerPid] = (c.Labels[LABEL_OWNER] ?? '').split(':');
      const deadline = Number(c.Labels[LABEL_DEADLINE] ?? 0);
      const deadOwner = ownerHost === host && ownerPid !== undefined && !pidAlive(Number(ownerPid));
      // A dead worker's container is kept until its deadline: the activity's retry (on any
      // worker) re-finds it by name and adopts its run and output instead of running the
      // command a second time. Past the deadline nobody can be waiting for it any more.
      if ((deadline > 0 && deadline < Date.now()) || (deadOwner && !(deadline > 0))) {
        await quietly(this.docker.getContainer(c.Id).remove({ force: true, v: true }));
        reaped++;
      }
    }
    return reaped;
  }
}
