/**
 * sandbox: cold start of a minimal sandboxed command (`true`), each run a fresh container with
 * every limit of DockerSandbox (seccomp profile, caps dropped, read-only root, two tmpfs,
 * memory/CPU/pids limits, output streaming, removal), timed from the call to the typed result.
 * Compared in the same run, interleaved, with the same image and command run without our
 * limits two ways: `docker run --rm` through the CLI, and the same
 * create/attach/start/wait/remove calls through dockerode (the like-for-like API path).
 */
import { spawn } from 'node:child_process';
import type Docker from 'dockerode';
import { buildSandboxImage } from '../sandbox/build-image.js';
import { createDocker, dockerStatus } from '../sandbox/docker.js';
import { DockerSandbox } from '../sandbox/docker-sandbox.js';
import { SANDBOX_IMAGE } from '../sandbox/image.js';
import { summarize } from './lib.js';

function cliRun(image: string, extra: string[] = []): Promise<number> {
  const t = performance.now();
  return new Promise((resolve, reject) => {
    const p = spawn('docker', ['run', '--rm', ...extra, image, 'true'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('error', reject);
    p.on('close', (code) =>
      code === 0 ? resolve(performance.now() - t) : reject(new Error(`docker run exited ${code}: ${err}`)),
    );
  });
}

async function apiRun(docker: Docker, image: string): Promise<number> {
  const t = performance.now();
  const c = await docker.createContainer({ Image: image, Cmd: ['true'], AttachStdout: true, AttachStderr: true });
  const stream = await c.attach({ stream: true, stdout: true, stderr: true });
  stream.resume();
  await c.start();
  await c.wait();
  await c.remove({ force: true });
  return performance.now() - t;
}

/** Timed runs of each of the four kinds, after warm-up rounds; `smoke` the fewest that give a figure of each. */
export const sandboxSizes = { full: { runs: 60, warmups: 3 }, smoke: { runs: 2, warmups: 1 } };

export async function measureSandbox(
  { runs, warmups } = sandboxSizes.full,
): Promise<{ metrics: Record<string, number>; notes: Record<string, string> }> {
  const docker = createDocker(process.env.DOCKER_HOST);
  const status = await dockerStatus(docker);
  if (!status.available) throw new Error(`the sandbox benchmark needs a Docker engine: ${status.reason}`);
  const image = buildSandboxImage();
  const sandbox = new DockerSandbox(docker);
  const ours: number[] = [];
  const cli: number[] = [];
  const api: number[] = [];
  const cliNoNet: number[] = [];
  const tag = `${process.pid}-${Date.now()}`;
  const oursOnce = async (i: number) => {
    const t = performance.now();
    const r = await sandbox.run({ key: `bench/sandbox/${tag}/${i}`, command: ['true'] });
    if (r.status !== 'ok') throw new Error(`sandboxed true failed: ${JSON.stringify(r)}`);
    return performance.now() - t;
  };
  for (let i = 0; i < warmups; i++) {
    await oursOnce(-1 - i);
    await cliRun(SANDBOX_IMAGE);
    await apiRun(docker, SANDBOX_IMAGE);
    await cliRun(SANDBOX_IMAGE, ['--network', 'none']);
  }
  for (let i = 0; i < runs; i++) {
    // Rotate the order so none of the three always runs right after another.
    const order = [0, 1, 2, 3].map((k) => (k + i) % 4);
    for (const k of order) {
      if (k === 0) ours.push(await oursOnce(i));
      else if (k === 1) cli.push(await cliRun(SANDBOX_IMAGE));
      else if (k === 2) api.push(await apiRun(docker, SANDBOX_IMAGE));
      else cliNoNet.push(await cliRun(SANDBOX_IMAGE, ['--network', 'none']));
    }
  }
  const o = summarize(ours);
  const c = summarize(cli);
  const a = summarize(api);
  const n = summarize(cliNoNet);
  return {
    metrics: {
      start_p50_ms: o.p50,
      start_p99_ms: o.p99,
      start_mean_ms: o.mean,
      plain_docker_p50_ms: c.p50,
      plain_docker_p99_ms: c.p99,
      start_ratio_vs_plain_docker: o.p50 / c.p50,
      plain_api_p50_ms: a.p50,
      plain_api_p99_ms: a.p99,
      start_ratio_vs_plain_api: o.p50 / a.p50,
      plain_docker_no_network_p50_ms: n.p50,
      start_ratio_vs_plain_docker_no_network: o.p50 / n.p50,
      runs: o.n,
    },
    notes: {
      sandboxed:
        'DockerSandbox.run({command:["true"]}) with the default budget: create (seccomp, caps, ro root, tmpfs, limits, docker-init + in-container timeout backstop) + attach + start + wait + inspect + remove, timed call → result',
      plain_docker: '`docker run --rm <same image> true` through the CLI (process spawn included), no limits',
      plain_api: 'the same image and command through dockerode create/attach/start/wait/remove, no limits',
      plain_docker_no_network:
        '`docker run --rm --network none <same image> true` through the CLI: the plain run without the bridge network set-up (a veth pair per container) that the sandbox also skips',
      image: `${image.image} ${image.id}`,
      engine: `Docker ${status.version}`,
      targets: 'start p50 <= 700 ms and <= 1.25x plain docker run',
    },
  };
}
