/**
 * Containment suite: every probe runs inside the real sandbox (DockerSandbox on the
 * real engine, the image of `npm run sandbox:image`) and must fail or be contained. Syscall
 * probes use mindloop-probe (sandbox/probe.c), which exits 0 only when the attempt was refused
 * and prints what the kernel answered. The suite ends by printing probe | expected | observed.
 */
import { createServer, connect, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { diskShares, DockerSandbox, LABEL_KEY } from '../../sandbox/docker-sandbox.js';
import type { SandboxBudget, SandboxRunResult } from '../../sandbox/sandbox.js';
import { dockerSkipped, requireDocker } from '../helpers/docker.js';

const rows: Array<{ probe: string; expected: string; observed: string }> = [];
const runId = `${process.pid}-${Date.now()}`;

let docker: Docker;
let sandbox: DockerSandbox;
let hostServer: Server;
let hostPort: number;
let gateway: string;
let hostIps: string[];

function summary(r: SandboxRunResult): string {
  const lines = `${r.stdout}${r.stderr}`
    .replace(/[\x00-\x08\x0e-\x1f]/g, '')
    .trim()
    .split('\n');
  const shown = lines.length > 3 ? [...lines.slice(0, 2), `… (${lines.length} lines)`] : lines;
  return `${r.status}${r.exceeded ? `: ${r.exceeded}` : ''} exit=${r.exitCode} ${r.durationMs}ms | ${shown.join(' ; ').slice(0, 160)}`;
}

async function probe(
  name: string,
  expected: string,
  command: string[],
  budget: Partial<SandboxBudget> = {},
): Promise<SandboxRunResult> {
  const r = await sandbox.run({ key: `containment/${runId}/${name}`, command, budget: { wallMs: 15_000, ...budget } });
  rows.push({ probe: name, expected, observed: summary(r) });
  return r;
}

/** A probe of mindloop-probe: contained means exit 0 and no line reporting success. */
async function syscallProbe(name: string, args: string[]): Promise<SandboxRunResult> {
  const r = await probe(name, 'refused (EPERM/EACCES/ENOENT…), exit 0', ['mindloop-probe', ...args]);
  expect(r.status, r.stdout + r.stderr).toBe('ok');
  expect(r.stdout).not.toMatch(/ ok /);
  expect(r.stdout).toMatch(/ denied /);
  return r;
}

describe.skipIf(dockerSkipped)('containment (real Docker engine)', () => {
  beforeAll(async () => {
    docker = await requireDocker();
    sandbox = new DockerSandbox(docker);
    // A TCP listener on every host address: the network probes must not reach it.
    hostServer = createServer((s) => s.end('hello from the host\n'));
    await new Promise<void>((r) => hostServer.listen(0, '0.0.0.0', r));
    hostPort = (hostServer.address() as { port: number }).port;
    const bridge = await docker.getNetwork('bridge').inspect();
    gateway = bridge.IPAM?.Config?.[0]?.Gateway ?? '172.17.0.1';
    hostIps = Object.values(networkInterfaces())
      .flat()
      .filter((a) => a && a.family === 'IPv4' && !a.internal)
      .map((a) => a!.address);
  });

  afterAll(async () => {
    await new Promise<void>((r) => (hostServer ? hostServer.close(() => r()) : r()));
    if (rows.length) {
      const w = [Math.max(5, ...rows.map((r) => r.probe.length)), Math.max(8, ...rows.map((r) => r.expected.length))];
      const table = [
        `${'probe'.padEnd(w[0]!)} | ${'expected'.padEnd(w[1]!)} | observed`,
        `${'-'.repeat(w[0]!)}-+-${'-'.repeat(w[1]!)}-+-${'-'.repeat(40)}`,
        ...rows.map((r) => `${r.probe.padEnd(w[0]!)} | ${r.expected.padEnd(w[1]!)} | ${r.observed}`),
      ].join('\n');
      process.stdout.write(`\ncontainment suite\n${table}\n\n`);
    }
    if (docker) {
      const left = await docker.listContainers({ all: true, filters: { label: [LABEL_KEY] } });
      expect(left.filter((c) => (c.Labels[LABEL_KEY] ?? '').includes(runId))).toEqual([]);
    }
  });

  it('mount is refused', async () => {
    await syscallProbe('mount', ['mount']);
    const r = await probe('mount (busybox)', 'mount fails', ['mount', '-t', 'tmpfs', 'none', '/tmp']);
    expect(r.status).toBe('error');
  });

  it('unshare (user and mount namespaces) is refused', async () => {
    await syscallProbe('unshare', ['unshare']);
    const r = await probe('unshare (busybox)', 'unshare fails', ['unshare', '-U', '-r', 'id']);
    expect(r.status).toBe('error');
  });

  it('keyctl / add_key / request_key are refused', async () => {
    await syscallProbe('keyctl', ['keyctl']);
  });

  it('bpf is refused', async () => {
    await syscallProbe('bpf', ['bpf']);
  });

  it('ptrace of another process is refused', async () => {
    const r = await syscallProbe('ptrace', ['ptrace']);
    expect(r.stdout).toMatch(/ptrace_attach denied/);
  });

  it("another process's /proc/<pid>/mem cannot be opened (a child after its exec, the parent, PID 1)", async () => {
    // Through a shell, so that the probe's parent is not PID 1 and both are tried.
    const r = await probe('/proc/<pid>/mem', 'open refused (EACCES), exit 0', [
      'sh',
      '-c',
      'mindloop-probe proc_mem; exit $?',
    ]);
    expect(r.status, r.stdout + r.stderr).toBe('ok');
    expect(r.stdout).not.toMatch(/ ok /);
    for (const who of ['child', 'parent', 'init']) {
      for (const mode of ['rdwr', 'wronly', 'rdonly'])
        expect(r.stdout).toMatch(
          new RegExp(`^proc_mem_${who}_${mode} denied (Permission denied|Operation not permitted)$`, 'm'),
        );
    }
    // The same from node, the usual workload: a spawned child's memory is not writable.
    const js = `const c = require('child_process').spawn('sleep', ['30']);
setTimeout(() => {
  for (const flags of ['r+', 'r']) {
    try { require('fs').closeSync(require('fs').openSync('/proc/' + c.pid + '/mem', flags)); console.log(flags, 'OPENED'); }
    catch (e) { console.log(flags, e.code); }
  }
  c.kill('SIGKILL');
}, 300);`;
    const n = await probe('/proc/<pid>/mem (node)', 'r+ and r: EACCES', ['node', '-e', js]);
    expect(n.stdout).toBe('r+ EACCES\nr EACCES\n');
  });

  it('no cgroup release_agent can be written (and no cgroup hierarchy mounted)', async () => {
    const r = await syscallProbe('release_agent', ['release_agent']);
    expect(r.stdout).toMatch(/cgroup_mount denied/);
  });

  it('/proc/self/exe cannot be opened for writing', async () => {
    await syscallProbe('/proc/self/exe', ['proc_self_exe']);
  });

  it('the other syscalls the profile removes are answered by seccomp (EPERM before the kernel)', async () => {
    const r = await syscallProbe('seccomp extras', ['syscalls']);
    for (const name of [
      'setns',
      'umount2',
      'pivot_root',
      'chroot',
      'personality',
      'userfaultfd',
      'perf_event_open',
      'process_vm_readv',
      'kexec_load',
      'init_module',
      'open_by_handle_at',
      'name_to_handle_at',
      'clock_settime',
      'reboot',
      'swapon',
      'mq_open',
      'mq_unlink',
    ]) {
      expect(r.stdout).toMatch(new RegExp(`^${name} denied Operation not permitted$`, 'm'));
    }
  });

  it('the Docker socket is not there and the engine ports are unreachable', async () => {
    await syscallProbe('docker socket', ['docker_socket']);
    const mounts = await probe('docker socket mounted?', 'no docker.sock in /proc/mounts', ['cat', '/proc/mounts']);
    expect(mounts.status).toBe('ok');
    expect(mounts.stdout).not.toMatch(/docker\.sock|containerd/);
    for (const ip of ['127.0.0.1', gateway, ...hostIps]) {
      for (const port of [2375, 2376]) await syscallProbe(`tcp ${ip}:${port} (engine)`, ['connect', ip, String(port)]);
    }
  });

  it('no network connection: not to the host (127.0.0.1, bridge gateway, host addresses), not outside', async () => {
    // Control: the listener answers from the host, so a refused probe means containment.
    const banner = await new Promise<string>((resolve, reject) => {
      const s = connect(hostPort, hostIps[0] ?? '127.0.0.1');
      let data = '';
      s.on('data', (d) => (data += d.toString()));
      s.on('end', () => resolve(data));
      s.on('error', reject);
    });
    expect(banner).toContain('hello from the host');
    for (const ip of ['127.0.0.1', gateway, ...hostIps, '1.1.1.1', '8.8.8.8']) {
      await syscallProbe(`tcp ${ip}:${ip.startsWith('1.') || ip.startsWith('8.') ? 53 : hostPort}`, [
        'connect',
        ip,
        String(ip.startsWith('1.') || ip.startsWith('8.') ? 53 : hostPort),
      ]);
    }
    const ifaces = await probe('interfaces', 'loopback only', ['cat', '/proc/net/dev']);
    const names = ifaces.stdout
      .split('\n')
      .slice(2)
      .map((l) => l.split(':')[0]!.trim())
      .filter(Boolean);
    expect(names).toEqual(['lo']);
    const dns = await probe('dns lookup', 'fails', ['nslookup', 'example.com']);
    expect(dns.status).not.toBe('ok');
  });

  it('a fork bomb is stopped at the pids limit', async () => {
    const r = await probe(
      'fork bomb',
      'budget_exceeded: pids',
      ['sh', '-c', 'bomb() { bomb | bomb & }; bomb; sleep 60'],
      { pids: 64, wallMs: 20_000 },
    );
    expect(r.status).toBe('budget_exceeded');
    expect(r.exceeded).toBe('pids');
    // Ended by the limit, long before the wall clock.
    expect(r.durationMs).toBeLessThan(10_000);
  });

  it('a memory hog is OOM-killed and reported', async () => {
    const r = await probe('memory hog', 'budget_exceeded: memory (OOM-killed)', ['mindloop-probe', 'memhog', '2048'], {
      memoryBytes: 64 << 20,
    });
    expect(r.status).toBe('budget_exceeded');
    expect(r.exceeded).toBe('memory');
    expect(r.oomKilled).toBe(true);
    expect(r.stdout).not.toMatch(/memhog ok/);
  });

  it('filling the disk stops at the tmpfs size', async () => {
    const r = await probe(
      'disk fill',
      'budget_exceeded: disk, file <= tmpfs size',
      ['sh', '-c', 'dd if=/dev/zero of=/work/fill bs=1M count=512; ls -l /work/fill; df -k /work'],
      {
        diskBytes: 16 << 20,
      },
    );
    expect(r.status).toBe('budget_exceeded');
    expect(r.exceeded).toBe('disk');
    const size = Number(/^\S+\s+\d+\s+\S+\s+\S+\s+(\d+)/m.exec(r.stdout)?.[1]);
    expect(size).toBeGreaterThan(0);
    expect(size).toBeLessThanOrEqual(diskShares(16 << 20).work); // 11 MiB of 16
    // /tmp is capped too (and not executable).
    const t = await probe(
      'disk fill /tmp',
      'budget_exceeded: disk',
      ['sh', '-c', 'dd if=/dev/zero of=/tmp/fill bs=1M count=512'],
      { diskBytes: 16 << 20 },
    );
    expect(t.exceeded).toBe('disk');
  });

  it('/dev/shm is a share of the disk budget, not 64 MiB beside it', async () => {
    const budget = 16 << 20;
    const r = await probe(
      'shm fill 64 MiB',
      `budget_exceeded: disk, file <= ${diskShares(budget).shm} bytes`,
      ['sh', '-c', 'dd if=/dev/zero of=/dev/shm/fill bs=1M count=64; ls -l /dev/shm/fill'],
      {
        diskBytes: budget,
      },
    );
    expect(r.status).toBe('budget_exceeded');
    expect(r.exceeded).toBe('disk');
    const size = Number(/^\S+\s+\d+\s+\S+\s+\S+\s+(\d+)/m.exec(r.stdout)?.[1]);
    expect(size).toBeGreaterThan(0);
    expect(size).toBeLessThanOrEqual(diskShares(budget).shm);
  });

  it('/dev/mqueue cannot be written (and POSIX queues cannot be created at all)', async () => {
    const r = await probe('write /dev/mqueue', 'fails (read-only file system)', ['sh', '-c', 'echo x > /dev/mqueue/q']);
    expect(r.status).toBe('error');
    expect(r.stderr).toMatch(/Read-only file system/);
    const limit = await probe('RLIMIT_MSGQUEUE', '0', ['sh', '-c', 'ulimit -q']);
    expect(limit.stdout.trim()).toBe('0');
  });

  it('the only writable mounts are /tmp, /work and /dev/shm, together no larger than the disk budget', async () => {
    const budget = 16 << 20;
    const script =
      'while read -r dev mp rest; do if touch "$mp/.w" 2>/dev/null; then rm -f "$mp/.w"; echo "writable $mp"; fi; done < /proc/mounts; df -k /tmp /work /dev/shm';
    const r = await probe(
      'writable mounts',
      `/dev/shm /tmp /work, <= ${budget >> 10} KiB in all`,
      ['sh', '-c', script],
      { diskBytes: budget },
    );
    expect(r.status, r.stderr).toBe('ok');
    const writable = [...r.stdout.matchAll(/^writable (\S+)$/gm)].map((m) => m[1]).sort();
    expect(writable).toEqual(['/dev/shm', '/tmp', '/work']);
    const kib = [...r.stdout.matchAll(/^\S+\s+(\d+)\s+\d+\s+\d+\s+\d+%\s+\/\S*$/gm)].map((m) => Number(m[1]));
    expect(kib).toHaveLength(3);
    expect(kib.reduce((a, b) => a + b, 0) * 1024).toBeLessThanOrEqual(budget);
  });

  it('the read-only root cannot be written', async () => {
    const r = await probe('write /bin', 'fails (read-only file system)', ['sh', '-c', 'echo x > /bin/evil']);
    expect(r.status).toBe('error');
    expect(r.stderr).toMatch(/Read-only file system|Permission denied/);
  });

  it('an infinite loop is killed within timeout + 1 s', async () => {
    const r = await probe(
      'infinite loop',
      'budget_exceeded: wall_time within 2 s + 1 s',
      ['sh', '-c', 'while :; do :; done'],
      { wallMs: 2000 },
    );
    expect(r.status).toBe('budget_exceeded');
    expect(r.exceeded).toBe('wall_time');
    expect(r.durationMs).toBeGreaterThanOrEqual(2000);
    expect(r.durationMs).toBeLessThanOrEqual(3000);
  });

  it('100 MB of stdout is capped', async () => {
    const cap = 1 << 20;
    const r = await probe(
      '100 MB stdout',
      `budget_exceeded: output, <= ${cap} bytes kept`,
      ['dd', 'if=/dev/zero', 'bs=1M', 'count=100'],
      { outputBytes: cap },
    );
    expect(r.status).toBe('budget_exceeded');
    expect(r.exceeded).toBe('output');
    expect(r.truncated).toBe(true);
    expect(Buffer.byteLength(r.stdout) + Buffer.byteLength(r.stderr)).toBeLessThanOrEqual(cap);
    expect(Buffer.byteLength(r.stdout)).toBeGreaterThan(cap / 2);
  });

  it('runs as nobody with no capabilities and no new privileges', async () => {
    const r = await probe('identity', 'uid 65534, CapEff 0, NoNewPrivs 1', [
      'sh',
      '-c',
      'id -u; grep -E "^(CapEff|CapBnd|NoNewPrivs|Seccomp):" /proc/self/status',
    ]);
    expect(r.stdout).toMatch(/^65534$/m);
    expect(r.stdout).toMatch(/CapEff:\s+0000000000000000/);
    expect(r.stdout).toMatch(/CapBnd:\s+0000000000000000/);
    expect(r.stdout).toMatch(/NoNewPrivs:\s+1/);
    expect(r.stdout).toMatch(/Seccomp:\s+2/);
  });
});
