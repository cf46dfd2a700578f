/**
 * Activities of the `sandbox` task queue: only hosts with a Docker engine poll it.
 */
import { hostname } from 'node:os';
import { ApplicationFailure, Context } from '@temporalio/activity';
import { heartbeat } from './heartbeat.js';
import type Docker from 'dockerode';
import { z } from 'zod';
import { DockerSandbox, SandboxInputError } from '../sandbox/docker-sandbox.js';
import { dockerStatus, type DockerStatus } from '../sandbox/docker.js';
import { resolveSandboxImage, SandboxUnavailableError } from '../sandbox/image.js';
import type { Sandbox, SandboxRunRequest, SandboxRunResult } from '../sandbox/sandbox.js';
import { ErrorType, nonRetryable, parseInput } from './errors.js';

interface SandboxDeps {
  docker: Docker;
  /** Default: a DockerSandbox on `docker`. */
  sandbox?: Sandbox;
}

const budgetSchema = z
  .strictObject({
    wallMs: z.number().positive(),
    cpus: z.number().positive(),
    memoryBytes: z.number().int().positive(),
    pids: z.number().int().positive(),
    diskBytes: z.number().int().positive(),
    outputBytes: z.number().int().positive(),
    cpuSeconds: z.number().int().positive(),
  })
  .partial();

/** What a workflow may ask for; checked here because workflow payloads come from anywhere. */
const sandboxRunRequestSchema = z.strictObject({
  key: z.string().min(1).max(500),
  command: z.array(z.string()).min(1).max(1000),
  files: z.record(z.string().min(1), z.string()).optional(),
  env: z
    .record(
      z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'environment variable names are [A-Za-z_][A-Za-z0-9_]*'),
      z.string(),
    )
    .optional(),
  budget: budgetSchema.optional(),
});

/** Remove the containers dead workers left behind; logs and never throws (no engine is fine). */
export async function reapOrphansAtStart(
  sandbox: Sandbox,
  log: (msg: string) => void = (m) => process.stderr.write(`${m}\n`),
): Promise<number> {
  try {
    const n = await sandbox.reapOrphans();
    if (n > 0) log(`sandbox: removed ${n} orphaned container(s) left by dead workers`);
    return n;
  } catch (err) {
    log(`sandbox: ${(err as Error).message}`);
    return 0;
  }
}

/**
 * Keep reaping while the worker runs: a dead worker's container is left for its activity's
 * retry to adopt until its deadline, so the sweep at start cannot remove it. Logs removals only
 * (no engine is reported once, at start). The timer never keeps the process alive.
 */
export function sweepOrphans(
  sandbox: Sandbox,
  everyMs = 60_000,
  log: (msg: string) => void = (m) => process.stderr.write(`${m}\n`),
): () => void {
  const timer = setInterval(() => {
    sandbox.reapOrphans().then(
      (n) => n > 0 && log(`sandbox: removed ${n} container(s) past their deadline`),
      () => undefined,
    );
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** Sandbox-queue activities, built from a dockerode client. */
export function createSandboxActivities({ docker, sandbox = new DockerSandbox(docker) }: SandboxDeps) {
  return {
    /** Reports whether this host's Docker engine answers and the sandbox image is there (with the fix when not). */
    async sandboxHealth(): Promise<DockerStatus & { host: string; imageId?: string }> {
      const status = await dockerStatus(docker);
      if (!status.available) return { ...status, host: hostname() };
      try {
        return { ...status, host: hostname(), imageId: await resolveSandboxImage(docker) };
      } catch (err) {
        return { available: false, version: status.version, reason: (err as Error).message, host: hostname() };
      }
    },

    /**
     * Run one command in a fresh, budgeted container. Heartbeats every second while
     * it runs; cancellation or a heartbeat timeout kills and removes the container; a retry with
     * the same `key` re-finds the first attempt's container. What the code inside does (exit
     * code, budget breach) is the result, never an error.
     */
    async sandboxRun(input: SandboxRunRequest): Promise<SandboxRunResult> {
      const request = parseInput('bad sandbox run request', sandboxRunRequestSchema, input);
      const ctx = Context.current();
      try {
        return await sandbox.run(request, {
          signal: ctx.cancellationSignal,
          onProgress: (p) => heartbeat(p, ctx),
        });
      } catch (err) {
        // Cancelled (or the heartbeat timed out): the container is already gone; report as such.
        if (ctx.cancellationSignal.aborted) throw ctx.cancellationSignal.reason ?? err;
        if (err instanceof SandboxInputError) throw nonRetryable(ErrorType.InvalidInput, err.message);
        if (err instanceof SandboxUnavailableError) {
          // A missing image needs a person (`npm run sandbox:image`); an engine may come back.
          throw ApplicationFailure.create({
            type: ErrorType.Unavailable,
            message: err.message,
            nonRetryable: err.reason === 'image_missing',
          });
        }
        throw err;
      }
    },
  };
}
