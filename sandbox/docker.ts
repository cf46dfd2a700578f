/**
 * The Docker engine connection. DOCKER_HOST (tcp:// or unix://) wins; otherwise the local socket.
 */
import Docker from 'dockerode';

/** A dockerode client for DOCKER_HOST or /var/run/docker.sock. */
export function createDocker(dockerHost?: string): Docker {
  if (!dockerHost) return new Docker({ socketPath: '/var/run/docker.sock' });
  const url = new URL(dockerHost);
  if (url.protocol === 'unix:') return new Docker({ socketPath: url.pathname });
  return new Docker({
    host: url.hostname,
    port: Number(url.port || 2375),
    protocol: url.protocol === 'https:' ? 'https' : 'http',
  });
}

export interface DockerStatus {
  available: boolean;
  version?: string;
  reason?: string;
}

/** Whether an engine answers, and its version; never throws. */
export async function dockerStatus(docker: Docker): Promise<DockerStatus> {
  try {
    const v = await docker.version();
    return { available: true, version: v.Version };
  } catch (err) {
    return { available: false, reason: (err as Error).message };
  }
}
