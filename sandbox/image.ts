/**
 * The sandbox image by name, and the errors a caller gets when the engine or the image is not
 * there (each says how to fix it). The image itself is built by sandbox/build-image.ts.
 */
import type Docker from 'dockerode';

export const SANDBOX_IMAGE_REPO = 'mindloop-sandbox';
export const SANDBOX_IMAGE = `${SANDBOX_IMAGE_REPO}:latest`;
/** PID 1 of every run (sandbox/init.c): reaps, forwards signals, kills the run at its backstop. */
export const SANDBOX_INIT = '/usr/local/bin/mindloop-init';

/** The engine is unreachable or the image is missing: infrastructure, not the code inside. */
export class SandboxUnavailableError extends Error {
  override name = 'SandboxUnavailableError';
  constructor(
    readonly reason: 'engine_unavailable' | 'image_missing',
    message: string,
  ) {
    super(message);
  }
}

const ENGINE_FIX =
  'start a Docker engine (Debian: apt-get install -y docker.io && dockerd &; or Docker Desktop) or point DOCKER_HOST at one; ' +
  'the sandbox task queue needs it, the rest of Mindloop does not';

/** Map a dockerode connection error to a SandboxUnavailableError; other errors pass through. */
export function engineError(err: unknown): unknown {
  const e = err as NodeJS.ErrnoException;
  if (e && ['ECONNREFUSED', 'ENOENT', 'EACCES', 'ECONNRESET', 'EHOSTUNREACH', 'ETIMEDOUT'].includes(e.code ?? '')) {
    return new SandboxUnavailableError(
      'engine_unavailable',
      `Docker engine unreachable (${e.code}: ${e.message}): ${ENGINE_FIX}`,
    );
  }
  return err;
}

/** The id of the sandbox image, or a clear error with the fix. */
export async function resolveSandboxImage(docker: Docker, image = SANDBOX_IMAGE): Promise<string> {
  try {
    const info = await docker.getImage(image).inspect();
    return info.Id;
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) {
      throw new SandboxUnavailableError(
        'image_missing',
        `sandbox image ${image} is not in the Docker engine: build it with \`npm run sandbox:image\``,
      );
    }
    throw engineError(err);
  }
}
