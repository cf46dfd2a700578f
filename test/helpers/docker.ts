/**
 * The real Docker engine for sandbox tests. No silent skip: when the engine does not answer the
 * tests fail with the fix. Only MINDLOOP_TEST_NO_DOCKER=1 (a laptop without Docker) skips them,
 * and CI never sets it (`npm test` starts dockerd where it can).
 */
import type Docker from 'dockerode';
import { buildSandboxImage } from '../../sandbox/build-image.js';
import { createDocker, dockerStatus } from '../../sandbox/docker.js';

export const dockerSkipped = process.env.MINDLOOP_TEST_NO_DOCKER === '1';

/** A dockerode client whose engine answers, with the sandbox image built (idempotent). */
export async function requireDocker(): Promise<Docker> {
  const docker = createDocker(process.env.DOCKER_HOST);
  const status = await dockerStatus(docker);
  if (!status.available) {
    throw new Error(
      `the sandbox tests need a Docker engine (${status.reason}): start one (as root: apt-get install -y docker.io && dockerd &; ` +
        '`npm test` does this as root) or set MINDLOOP_TEST_NO_DOCKER=1 to skip them on a machine without Docker',
    );
  }
  // Throws with the fix when gcc is missing: the image's init and probe are compiled static.
  buildSandboxImage();
  return docker;
}
