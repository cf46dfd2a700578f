/**
 * The sandbox contract: run untrusted code — generated tools, patched modules, the
 * agent's `shell` command — in an isolated, budgeted container and get a typed result back.
 * `DockerSandbox` (docker-sandbox.ts) implements it on dockerode; callers depend only on this.
 */

/** Limits a run may not exceed; a breach ends the run with `budget_exceeded: <which>`. */
export interface SandboxBudget {
  /** Wall clock, ms; the container is killed when it runs out. */
  wallMs: number;
  /** CPU cores (fractional allowed). */
  cpus: number;
  /** Memory limit, bytes (no swap). */
  memoryBytes: number;
  /** Max processes/threads in the container. */
  pids: number;
  /** All the run can write, bytes: the tmpfs of `/tmp`, the work dir and `/dev/shm` together. */
  diskBytes: number;
  /** stdout + stderr kept, bytes; the rest is dropped and the run ends as `output`. */
  outputBytes: number;
  /**
   * CPU seconds any one process may use (RLIMIT_CPU; SIGXCPU ends it as `cpu`). Optional: the
   * `cpus` quota already throttles; this bounds total work. Unset: no per-process limit.
   */
  cpuSeconds?: number;
}

export type BudgetName = 'wall_time' | 'cpu' | 'memory' | 'pids' | 'disk' | 'output';

export interface SandboxRunRequest {
  /** Idempotency key (workflow id + tick + cmd id): labels the container so a retry re-finds it. */
  key: string;
  /** argv run in the container, e.g. `['sh', '-c', 'echo hi']` or `['node', 'tool.test.mjs']`. */
  command: string[];
  /** Files written into the work dir before the command starts (path relative to it → content). */
  files?: Record<string, string>;
  env?: Record<string, string>;
  budget?: Partial<SandboxBudget>;
}

export interface SandboxRunResult {
  key: string;
  status: 'ok' | 'error' | 'budget_exceeded';
  /** Set when status is `budget_exceeded`. */
  exceeded?: BudgetName;
  exitCode: number | null;
  stdout: string;
  stderr: string;
  /** Whether output was cut at `outputBytes`. */
  truncated: boolean;
  oomKilled: boolean;
  durationMs: number;
  imageId: string;
  /** Why the run ended when it was not a plain exit (the breach, or how it was detected). */
  detail?: string;
  /** True when this call re-found the container an earlier attempt with the same key started. */
  reattached?: boolean;
}

/** Called while a run is in flight (activities heartbeat from it). */
export type SandboxProgress = (info: { key: string; elapsedMs: number }) => void;

export interface Sandbox {
  /** Run one command under the budget; never throws for what the code inside does. */
  run(req: SandboxRunRequest, opts?: { signal?: AbortSignal; onProgress?: SandboxProgress }): Promise<SandboxRunResult>;
  /** Remove containers left by dead workers (run at worker start). Returns how many. */
  reapOrphans(): Promise<number>;
}
