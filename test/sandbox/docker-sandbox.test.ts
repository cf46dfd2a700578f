/**
 * DockerSandbox behaviour on the real engine (idempotent re-find, cancellation, orphan reaping,
 * files and env, errors with their fix) and the sandboxRun activity in MockActivityEnvironment
 * (heartbeats, cancellation kills the container, bad input is non-retryable). The seccomp
 * profile's content is checked without an engine.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildSandboxImage } from '../../sandbox/build-image.js';
import { MockActivityEnvironment } from '@temporalio/testing';
import type Docker from 'dockerode';
import { beforeAll, describe, expect, it } from 'vitest';
import { createSandboxActivities, reapOrphansAtStart } from '../../activities/sandbox.js';
import { createDocker } from '../../sandbox/docker.js';
import {
  classify,
  containerName,
  diskShares,
  DockerSandbox,
  LABEL,
  LABEL_DEADLINE,
  LABEL_KEY,
  LABEL_OWNER,
  resolveBudget,
  SandboxInputError,
} from '../../sandbox/docker-sandbox.js';
import { SANDBOX_INIT, SandboxUnavailableError } from '../../sandbox/image.js';
import { safeRelativePath, tarFiles } from '../../sandbox/tar.js';
import { dockerSkipped, requireDocker } from '../helpers/docker.js';
import { testEnv } from '../helpers/env.js';
import { until } from '../helpers/wait.js';
import { checkDocker } from '../../cli/doctor.js';

const runId = `${process.pid}-${Date.now()}`;
const key = (name: string) => `sandbox-test/${runId}/${name}`;

async function containersWithKey(docker: Docker, k: string): Promise<Docker.ContainerInfo[]> {
  const all = await docker.listContainers({ all: true, filters: { label: [LABEL_KEY] } });
  return all.filter((c) => c.Labels[LABEL_KEY] === k);
}

/** Wait until no container carries key `k` (3 s). */
const gone = (docker: Docker, k: string) =>
  until(async () => (await containersWithKey(docker, k)).length === 0, `no container labelled ${k}`, 3000, 100);

describe('seccomp profile (sandbox/seccomp.json)', () => {
  const profile = JSON.parse(readFileSync(new URL('../../sandbox/seccomp.json', import.meta.url), 'utf8')) as {
    defaultAction: string;
    syscalls: Array<{
      names: string[];
      action: string;
      args?: Array<{ index: number; value: number; op: string }>;
      errnoRet?: number;
    }>;
  };
  const allowed = new Set(profile.syscalls.filter((s) => s.action === 'SCMP_ACT_ALLOW').flatMap((s) => s.names));

  it('is an allow-list: anything unnamed fails', () => {
    expect(profile.defaultAction).toBe('SCMP_ACT_ERRNO');
    expect(allowed.has('read') && allowed.has('execve') && allowed.has('clone')).toBe(true);
  });

  it('names none of the syscalls our workloads never need', () => {
    const forbidden = [
      'mount',
      'umount',
      'umount2',
      'unshare',
      'setns',
      'keyctl',
      'add_key',
      'request_key',
      'bpf',
      'ptrace',
      'process_vm_readv',
      'process_vm_writev',
      'perf_event_open',
      'kexec_load',
      'kexec_file_load',
      'init_module',
      'finit_module',
      'delete_module',
      'open_by_handle_at',
      'name_to_handle_at',
      'userfaultfd',
      'clock_settime',
      'clock_settime64',
      'settimeofday',
      'reboot',
      'swapon',
      'swapoff',
      'pivot_root',
      'chroot',
      'io_uring_setup',
      'kcmp',
      'pidfd_getfd',
      'fsopen',
      'fsmount',
      'move_mount',
      'open_tree',
      'clock_adjtime',
      'adjtimex',
      'modify_ldt',
      'acct',
      'quotactl',
      'syslog',
      'vhangup',
      'lookup_dcookie',
      'mq_open',
      'mq_unlink',
      'mq_timedsend',
      'mq_timedreceive',
      'mq_notify',
      'mq_getsetattr',
    ];
    expect(forbidden.filter((s) => allowed.has(s))).toEqual([]);
  });

  it('allows personality only to query or reset, and clone only without namespace flags', () => {
    const personality = profile.syscalls.filter((s) => s.names.includes('personality'));
    expect(personality.flatMap((s) => s.args!.map((a) => [a.op, a.value]))).toEqual([
      ['SCMP_CMP_EQ', 0],
      ['SCMP_CMP_EQ', 0xffffffff],
    ]);
    const clone = profile.syscalls.find((s) => s.names.includes('clone'))!;
    // CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET masked out.
    expect(clone.args).toEqual([expect.objectContaining({ index: 0, value: 0x7e020000, op: 'SCMP_CMP_MASKED_EQ' })]);
    expect(profile.syscalls.find((s) => s.names.includes('clone3'))).toMatchObject({
      action: 'SCMP_ACT_ERRNO',
      errnoRet: 38,
    });
  });
});

describe('pure parts', () => {
  it('budget checks name every bad field', () => {
    expect(() => resolveBudget({ wallMs: 10, pids: 1.5, memoryBytes: 1 })).toThrow(/wallMs.*memoryBytes.*pids/);
    expect(resolveBudget({ wallMs: 5000 })).toMatchObject({ wallMs: 5000, pids: 128 });
  });

  it('classify: the first cause wins over its consequences', () => {
    const base = {
      wallTimedOut: false,
      outputCapped: false,
      oomKilled: false,
      pidsLimitHit: false,
      exitCode: 0,
      stderr: '',
    };
    expect(classify(base)).toEqual({});
    expect(classify({ ...base, pidsLimitHit: true, wallTimedOut: true }).exceeded).toBe('pids');
    expect(classify({ ...base, exitCode: 1, stderr: 'dd: No space left on device' }).exceeded).toBe('disk');
    expect(classify({ ...base, exitCode: 152 }).exceeded).toBe('cpu');
    expect(classify({ ...base, oomKilled: true, exitCode: 137 }).exceeded).toBe('memory');
    expect(classify({ ...base, wallTimedOut: true, exitCode: 137 }).exceeded).toBe('wall_time');
  });

  it('the disk budget is split, page-aligned, between /tmp, the work dir and /dev/shm, and never exceeded', () => {
    for (const disk of [1 << 20, (1 << 20) + 123, 16 << 20, 64 << 20, 256 << 20, 10_000_000_007]) {
      const { tmp, work, shm } = diskShares(disk);
      expect(tmp + work + shm).toBeLessThanOrEqual(disk);
      expect(tmp + work + shm).toBeGreaterThan(disk - 3 * 4096);
      for (const v of [tmp, work, shm]) expect(v % 4096).toBe(0);
      expect(shm).toBeLessThan(tmp);
    }
    expect(diskShares(16 << 20)).toEqual({ tmp: 4 << 20, work: 11 << 20, shm: 1 << 20 });
  });

  it('the container spec: /dev/shm sized from the budget, /dev/mqueue read-only, no POSIX queues, our init as PID 1', () => {
    const sb = new DockerSandbox(createDocker('unix:///nonexistent/docker.sock'));
    const budget = resolveBudget({ diskBytes: 32 << 20, wallMs: 10_000 });
    const spec = sb.containerSpec({ key: key('spec'), command: ['echo', 'hi'] }, budget, 'sha256:x');
    const shares = diskShares(32 << 20);
    expect(spec.HostConfig?.ShmSize).toBe(shares.shm);
    expect(spec.HostConfig?.Tmpfs?.['/tmp']).toContain(`size=${shares.tmp},`);
    expect(spec.HostConfig?.Tmpfs?.['/work']).toContain(`size=${shares.work},`);
    expect(spec.HostConfig?.Tmpfs?.['/dev/mqueue']).toMatch(/^ro,/);
    expect(spec.HostConfig?.Ulimits).toContainEqual({ Name: 'msgqueue', Soft: 0, Hard: 0 });
    // docker-init (the host's readable binary) would be a dumpable PID 1.
    expect(spec.HostConfig?.Init).toBe(false);
    expect(spec.Cmd).toEqual([SANDBOX_INIT, '15', 'echo', 'hi']);
  });

  it('tar paths stay inside the work dir', () => {
    expect(safeRelativePath('./a//b.txt')).toBe('a/b.txt');
    expect(() => safeRelativePath('../etc/passwd')).toThrow(/without "\.\."/);
    expect(() => safeRelativePath('/etc/passwd')).toThrow(/relative/);
    expect(tarFiles({ 'x.txt': 'hi' }).length).toBe(512 * 4);
  });
});

describe('errors say how to fix them', () => {
  it('no engine: engine_unavailable with the fix; reaping at start only logs it', async () => {
    const sb = new DockerSandbox(createDocker('unix:///nonexistent/docker.sock'));
    const err = await sb.run({ key: key('no-engine'), command: ['true'] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxUnavailableError);
    expect((err as SandboxUnavailableError).reason).toBe('engine_unavailable');
    expect((err as Error).message).toMatch(/dockerd|DOCKER_HOST/);
    const logged: string[] = [];
    expect(await reapOrphansAtStart(sb, (m) => logged.push(m))).toBe(0);
    expect(logged.join('\n')).toMatch(/Docker engine unreachable/);
  });
});

describe.skipIf(dockerSkipped)('DockerSandbox on the real engine', () => {
  let docker: Docker;
  let sandbox: DockerSandbox;
  beforeAll(async () => {
    docker = await requireDocker();
    sandbox = new DockerSandbox(docker);
  });

  it('runs a command with files and env in the work dir and removes the container', async () => {
    const r = await sandbox.run({
      key: key('files'),
      command: ['sh', '-c', 'node tool/main.mjs && cat notes/n.txt && echo "$GREETING" >&2 && exit 3'],
      files: {
        'tool/main.mjs': 'import { x } from "./lib.mjs"; console.log("x =", x, "cwd", process.cwd());',
        'tool/lib.mjs': 'export const x = 41 + 1;',
        'notes/n.txt': 'a note\n',
      },
      env: { GREETING: 'hello sandbox' },
    });
    expect(r).toMatchObject({
      status: 'error',
      exitCode: 3,
      stdout: 'x = 42 cwd /work\na note\n',
      stderr: 'hello sandbox\n',
      truncated: false,
      oomKilled: false,
    });
    expect(r.imageId).toMatch(/^sha256:/);
    await gone(docker, r.key);
  });

  it('bad requests are refused before anything starts', async () => {
    await expect(sandbox.run({ key: key('bad'), command: [] })).rejects.toBeInstanceOf(SandboxInputError);
    await expect(sandbox.run({ key: key('bad2'), command: ['true'], files: { '../x': 'y' } })).rejects.toThrow(
      /without "\.\."/,
    );
    await expect(sandbox.run({ key: key('bad3'), command: ['true'], budget: { memoryBytes: 1000 } })).rejects.toThrow(
      /memoryBytes/,
    );
  });

  it('a missing image is a clear error naming `npm run sandbox:image`', async () => {
    const sb = new DockerSandbox(docker, { image: 'mindloop-sandbox:does-not-exist' });
    const err = await sb.run({ key: key('noimage'), command: ['true'] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxUnavailableError);
    expect((err as Error).message).toMatch(/npm run sandbox:image/);
  });

  it('a retry with the same key re-finds the running container instead of starting a second one', async () => {
    const k = key('refind');
    const first = sandbox.run({ key: k, command: ['sh', '-c', 'echo started; sleep 1.5; echo finished'] });
    // The "retry": same key while the first attempt's container runs.
    await new Promise((r) => setTimeout(r, 700));
    expect(await containersWithKey(docker, k)).toHaveLength(1);
    const second = await sandbox.run({ key: k, command: ['sh', '-c', 'echo a second container would print this'] });
    expect(second.reattached).toBe(true);
    expect(second.stdout).toBe('started\nfinished\n');
    const r1 = await first;
    expect(r1.stdout).toBe('started\nfinished\n');
    await gone(docker, k);
  });

  it('a retry after the first attempt exited picks up its output', async () => {
    const k = key('exited');
    // The first attempt's worker died after create+start: emulate with the same spec, started directly.
    const spec = sandbox.containerSpec(
      { key: k, command: ['sh', '-c', 'echo from the first attempt; exit 4'] },
      resolveBudget(),
      await sandbox.image(),
    );
    const c = await docker.createContainer(spec);
    await c.start();
    await c.wait();
    const r = await sandbox.run({ key: k, command: ['echo', 'never run'] });
    expect(r).toMatchObject({ reattached: true, exitCode: 4, status: 'error', stdout: 'from the first attempt\n' });
    await gone(docker, k);
  });

  it('a container whose worker is gone still ends: the in-container backstop kills it at wall + 5 s', async () => {
    const k = key('backstop');
    // Nobody follows this one (as if its worker died right after start). The run first kills
    // every process it may signal: the backstop lives in PID 1, which it cannot kill.
    const spec = sandbox.containerSpec(
      { key: k, command: ['sh', '-c', 'kill -9 -1; trap "" TERM; while :; do :; done'] },
      resolveBudget({ wallMs: 1000 }),
      await sandbox.image(),
    );
    const c = await docker.createContainer(spec);
    const t = Date.now();
    await c.start();
    const exit = (await c.wait()) as { StatusCode: number };
    const took = Date.now() - t;
    expect(exit.StatusCode).toBe(137);
    expect(took).toBeGreaterThanOrEqual(5500);
    expect(took).toBeLessThan(9000);
    // A retry re-finding it reports the wall-time breach.
    const r = await sandbox.run({ key: k, command: ['true'], budget: { wallMs: 1000 } });
    expect(r).toMatchObject({ reattached: true, status: 'budget_exceeded', exceeded: 'wall_time' });
    await gone(docker, k);
  });

  it("PID 1 is mindloop-init: not dumpable (its /proc files are root's), it reaps orphans, and it passes the exit status on", async () => {
    const r = await sandbox.run({
      key: key('init'),
      // Two orphans re-parented to PID 1 that exit at once; then count zombies.
      command: [
        'sh',
        '-c',
        'cat /proc/1/cmdline | tr "\\0" " "; echo; stat -c "%u %a" /proc/1/mem; (true &); (true &); sleep 0.5; grep -l "^State:.*Z" /proc/[0-9]*/status | wc -l; exit 7',
      ],
    });
    expect(r.exitCode).toBe(7);
    const [cmdline, mem, zombies] = r.stdout.trim().split('\n');
    expect(cmdline).toMatch(new RegExp(`^${SANDBOX_INIT} \\d+ sh -c `));
    expect(mem).toBe('0 600');
    expect(zombies!.trim()).toBe('0');
  });

  it('cancellation kills and removes the container', async () => {
    const k = key('cancel');
    const ac = new AbortController();
    const run = sandbox.run({ key: k, command: ['sleep', '30'] }, { signal: ac.signal });
    await new Promise((r) => setTimeout(r, 800));
    expect(await containersWithKey(docker, k)).toHaveLength(1);
    const t = Date.now();
    ac.abort(new Error('cancelled by test'));
    await expect(run).rejects.toThrow('cancelled by test');
    expect(Date.now() - t).toBeLessThan(3000);
    await gone(docker, k);
  });

  it('reaps containers past their deadline and unlabelled ones of dead workers, and leaves live ones', async () => {
    const image = await sandbox.image();
    const host = (await import('node:os')).hostname();
    const mk = async (name: string, labels: Record<string, string>) =>
      docker.createContainer({
        Image: image,
        Cmd: ['sleep', '60'],
        Labels: { [LABEL]: '1', [LABEL_KEY]: key(name), ...labels },
        HostConfig: { NetworkMode: 'none' },
      });
    // A pid that cannot be alive (above pid_max on Linux).
    await mk('orphan-dead-owner-no-deadline', { [LABEL_OWNER]: `${host}:99999999` });
    await mk('orphan-past-deadline', { [LABEL_OWNER]: `other-host:1`, [LABEL_DEADLINE]: String(Date.now() - 1000) });
    const adoptable = await mk('dead-owner-within-deadline', {
      [LABEL_OWNER]: `${host}:99999999`,
      [LABEL_DEADLINE]: String(Date.now() + 3_600_000),
    });
    const live = await mk('live', {
      [LABEL_OWNER]: `${host}:${process.pid}`,
      [LABEL_DEADLINE]: String(Date.now() + 3_600_000),
    });
    const n = await sandbox.reapOrphans();
    expect(n).toBeGreaterThanOrEqual(2);
    expect(await containersWithKey(docker, key('orphan-dead-owner-no-deadline'))).toHaveLength(0);
    expect(await containersWithKey(docker, key('orphan-past-deadline'))).toHaveLength(0);
    // Kept for its activity's retry to adopt (next test), until its deadline.
    expect(await containersWithKey(docker, key('dead-owner-within-deadline'))).toHaveLength(1);
    expect(await containersWithKey(docker, key('live'))).toHaveLength(1);
    await live.remove({ force: true });
    await adoptable.remove({ force: true });
  });

  it('a worker restarted after a crash does not reap its running container: the retry adopts it, the command runs once', async () => {
    const k = key('crash-adopt');
    // The crashed worker's attempt: created and started under an owner pid that is dead now.
    const spec = sandbox.containerSpec(
      { key: k, command: ['sh', '-c', 'echo run $$; sleep 1; echo done'] },
      resolveBudget(),
      await sandbox.image(),
    );
    spec.Labels = { ...spec.Labels, [LABEL_OWNER]: `${(await import('node:os')).hostname()}:99999999` };
    const c = await docker.createContainer(spec);
    await c.start();
    // The restarted worker's sweep at start, then the activity's retry with the same key.
    await reapOrphansAtStart(sandbox, () => undefined);
    expect(await containersWithKey(docker, k)).toHaveLength(1);
    const r = await sandbox.run({ key: k, command: ['sh', '-c', 'echo a second run would print this'] });
    expect(r).toMatchObject({ reattached: true, status: 'ok', exitCode: 0 });
    expect(r.stdout).toMatch(/^run \d+\ndone\n$/);
    await gone(docker, k);
  });

  it('the CPU budget: the quota is set in the cgroup, and RLIMIT_CPU ends a hog as `cpu`', async () => {
    // cgroup v1 or v2, whichever the engine uses.
    const limits = await sandbox.run({
      key: key('limits'),
      command: [
        'sh',
        '-c',
        'cd /sys/fs/cgroup; cat cpu/cpu.cfs_quota_us cpu.max memory/memory.limit_in_bytes memory.max pids/pids.max pids.max 2>/dev/null; true',
      ],
      budget: { cpus: 0.5, memoryBytes: 100 << 20, pids: 50 },
    });
    const values = limits.stdout.trim().split(/\s+/);
    expect(values).toContain(String(100 << 20));
    expect(values).toContain('50');
    expect(values.some((v) => v === '50000')).toBe(true); // 0.5 CPU of a 100 000 µs period
    const hog = await sandbox.run({
      key: key('cpu-hog'),
      command: ['node', '-e', 'for (;;) {}'],
      budget: { cpuSeconds: 1, wallMs: 15_000 },
    });
    expect(hog).toMatchObject({ status: 'budget_exceeded', exceeded: 'cpu', exitCode: 152 });
    expect(hog.durationMs).toBeLessThan(15_000);
  });

  it(
    'the image is built locally and reproducibly: same inputs → no-op, a forced rebuild gives the same root file system layer',
    { timeout: 180_000 },
    async () => {
      const tools = mkdtempSync(join(tmpdir(), 'mindloop-image-'));
      try {
        const first = buildSandboxImage({ toolsDir: tools });
        expect(first.image).toBe(`mindloop-sandbox:${first.inputs.slice(0, 16)}`);
        expect(JSON.parse(readFileSync(join(tools, 'sandbox-image.json'), 'utf8'))).toMatchObject({
          image: first.image,
          id: first.id,
          inputs: first.inputs,
        });
        expect((await docker.getImage('mindloop-sandbox:latest').inspect()).Id).toBe(first.id);
        const again = buildSandboxImage({ toolsDir: tools });
        expect(again.id).toBe(first.id);
        const layers = async (id: string) => (await docker.getImage(id).inspect()).RootFS.Layers;
        const before = await layers(first.id);
        const rebuilt = buildSandboxImage({ toolsDir: tools, force: true });
        // docker import stamps a creation time into the image config, so ids differ; the file
        // system layer (sorted names, mtime 0, uid 0) is byte for byte the same.
        expect(rebuilt.inputs).toBe(first.inputs);
        expect(await layers(rebuilt.id)).toEqual(before);
      } finally {
        rmSync(tools, { recursive: true, force: true });
      }
    },
  );

  it('doctor names the engine and the sandbox image', async () => {
    const check = await checkDocker(testEnv({ DOCKER_HOST: process.env.DOCKER_HOST }));
    expect(check).toMatchObject({ name: 'docker', status: 'ok' });
    expect(check.detail).toMatch(/sandbox image sha256:/);
  });

  it('container names are derived from the key', () => {
    expect(containerName('a')).toBe(containerName('a'));
    expect(containerName('a')).not.toBe(containerName('b'));
    expect(containerName('a')).toMatch(/^mindloop-sbx-[0-9a-f]{32}$/);
  });

  describe('sandboxRun activity (MockActivityEnvironment)', () => {
    it('heartbeats while the container runs and returns the typed result', async () => {
      const acts = createSandboxActivities({ docker, sandbox: new DockerSandbox(docker, { progressMs: 300 }) });
      const env = new MockActivityEnvironment();
      const beats: unknown[] = [];
      env.on('heartbeat', (d: unknown) => beats.push(d));
      const r = await env.run(acts.sandboxRun, { key: key('act-ok'), command: ['sh', '-c', 'sleep 1.2; echo done'] });
      expect(r).toMatchObject({ status: 'ok', stdout: 'done\n' });
      expect(beats.length).toBeGreaterThanOrEqual(2);
      expect(beats[0]).toMatchObject({ key: key('act-ok') });
    });

    it('a budget breach is a result, not a failure', async () => {
      const acts = createSandboxActivities({ docker, sandbox });
      const r = await new MockActivityEnvironment().run(acts.sandboxRun, {
        key: key('act-wall'),
        command: ['sleep', '10'],
        budget: { wallMs: 500 },
      });
      expect(r).toMatchObject({ status: 'budget_exceeded', exceeded: 'wall_time' });
    });

    it('cancellation kills the container and the activity reports cancelled', async () => {
      const acts = createSandboxActivities({ docker, sandbox });
      const env = new MockActivityEnvironment();
      const k = key('act-cancel');
      const run = env.run(acts.sandboxRun, { key: k, command: ['sleep', '30'] });
      await new Promise((r) => setTimeout(r, 800));
      env.cancel('CANCELLED');
      const err = await run.catch((e: unknown) => e);
      expect((err as Error).name).toBe('CancelledFailure');
      await gone(docker, k);
    });

    it('bad input is a non-retryable InvalidInput naming the field', async () => {
      const acts = createSandboxActivities({ docker, sandbox });
      const err = await new MockActivityEnvironment()
        .run(acts.sandboxRun, {
          key: key('act-bad'),
          command: ['true'],
          env: { 'BAD-NAME': 'x' },
          budget: { pids: -1 },
        })
        .catch((e: unknown) => e);
      expect(err).toMatchObject({ type: 'InvalidInput', nonRetryable: true });
      expect((err as Error).message).toMatch(/env\.BAD-NAME.*budget\.pids|budget\.pids.*env/);
    });

    it('sandboxHealth reports the engine and the image', async () => {
      const acts = createSandboxActivities({ docker, sandbox });
      const h = (await new MockActivityEnvironment().run(acts.sandboxHealth)) as Awaited<
        ReturnType<typeof acts.sandboxHealth>
      >;
      expect(h).toMatchObject({ available: true });
      expect(h.imageId).toMatch(/^sha256:/);
    });
  });
});
