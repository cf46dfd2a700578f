/**
 * Activities of the `sandbox` task queue: only hosts with a Docker engine poll it.
 */
import { hostname } from 'node:os';
import type Docker from 'dockerode';
import { dockerStatus, type DockerStatus } from '../sandbox/docker.js';

export interface SandboxDeps {
  docker: Docker;
}

/** Sandbox-queue activities, built from a dockerode client. */
export function createSandboxActivities({ docker }: SandboxDeps) {
  return {
    /** Reports whether this host's Docker engine answers (workflows check before they schedule runs). */
    async sandboxHealth(): Promise<DockerStatus & { host: string }> {
      return { ...(await dockerStatus(docker)), host: hostname() };
    },
  };
}
