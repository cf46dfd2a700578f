/**
 * `npm run sandbox:image`: build the sandbox image locally, no registry. The root file
 * system is busybox-static (with its applet links), this host's node binary and the shared
 * libraries `ldd` lists for it, `mindloop-init` (sandbox/init.c, PID 1 of every run) and
 * `mindloop-probe` (sandbox/probe.c, for the containment suite), both compiled static with gcc.
 * The executables are execute-only (0711) so that every process running one is not dumpable
 * (see EXEC_ONLY). The tarball is reproducible (sorted names, mtime 0, uid/gid 0) and the image
 * is tagged by the sha256 of its inputs, so a second run with the same inputs is a no-op. The
 * image id is recorded in <tools dir>/sandbox-image.json and the image is also tagged
 * `mindloop-sandbox:latest`, which DockerSandbox runs.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SANDBOX_IMAGE, SANDBOX_IMAGE_REPO, SANDBOX_INIT } from './image.js';
/** Bump when the layout below changes, so the inputs hash changes with it. */
const LAYOUT_VERSION = 3;

/** Where the static helpers go in the image, and their sources in sandbox/. */
const COMPILED: Record<string, string> = { [SANDBOX_INIT]: 'init.c', '/usr/local/bin/mindloop-probe': 'probe.c' };
/**
 * Execute-only for the uid the code runs as: the kernel makes a process that execs a file it
 * cannot read non-dumpable (fs.suid_dumpable is 0 or 2 on any sane host), and the /proc/<pid>/mem,
 * environ and fd of a non-dumpable process are refused to every other process of that uid. Exec
 * resets dumpability, so a prctl in a launcher would not survive the command's own execs: the
 * file mode does, for every process started from an image binary. Shared libraries stay
 * readable (ld.so maps them).
 */
const EXEC_ONLY = ['/bin/busybox', '/usr/local/bin/node', ...Object.keys(COMPILED)];

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');

interface ImageRecord {
  image: string;
  id: string;
  inputs: string;
  builtAt: string;
  files: Record<string, string>;
}

const say = (msg: string) => process.stderr.write(`[sandbox:image] ${msg}\n`);

function sha256File(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

function which(cmd: string): string | null {
  const r = spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

function docker(args: string[], input?: Buffer): string {
  const r = spawnSync('docker', args, { encoding: 'utf8', input, maxBuffer: 64 << 20 });
  if (r.error) throw new Error(`docker ${args[0]}: ${r.error.message} (is the docker CLI installed?)`);
  if (r.status !== 0) throw new Error(`docker ${args.join(' ')} failed: ${r.stderr.trim()}`);
  return r.stdout.trim();
}

/** The shared libraries a dynamic binary loads, as absolute host paths (the loader included). */
function sharedLibraries(binary: string): string[] {
  const out = execFileSync('ldd', [binary], { encoding: 'utf8' });
  const libs = new Set<string>();
  for (const line of out.split('\n')) {
    const m = /=>\s*(\/\S+)/.exec(line) ?? /^\s*(\/\S+)\s+\(/.exec(line);
    if (m) libs.add(m[1]!);
  }
  return [...libs].sort();
}

/** Everything that goes into the image: image path → host path. */
function collectInputs(compiled: Map<string, string>): Map<string, string> {
  const files = new Map<string, string>();
  const busybox = which('busybox');
  if (!busybox) throw new Error('busybox not found: install busybox-static (apt-get install -y busybox-static)');
  const bb = realpathSync(busybox);
  const kind = spawnSync('ldd', [bb], { encoding: 'utf8' });
  if (kind.status === 0 && !/not a dynamic executable|statically linked/.test(kind.stdout + kind.stderr)) {
    throw new Error(`${bb} is dynamically linked: install busybox-static (apt-get install -y busybox-static)`);
  }
  files.set('/bin/busybox', bb);
  const node = realpathSync(process.execPath);
  files.set('/usr/local/bin/node', node);
  for (const lib of sharedLibraries(node)) files.set(lib, realpathSync(lib));
  for (const [dest, binary] of compiled) files.set(dest, binary);
  return files;
}

/** The static helpers, image path → compiled binary. Without them there is no init to contain a run. */
function compileHelpers(workDir: string): Map<string, string> {
  if (!which('gcc'))
    throw new Error(
      'gcc not found: install gcc and a static libc (apt-get install -y gcc libc6-dev): the sandbox init and probe are compiled static',
    );
  const out = new Map<string, string>();
  for (const [dest, source] of Object.entries(COMPILED)) {
    const binary = join(workDir, source.replace(/\.c$/, ''));
    execFileSync('gcc', ['-static', '-O2', '-o', binary, join(here, source)], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    out.set(dest, binary);
  }
  return out;
}

/** Build (or find) the image; returns its record. */
export function buildSandboxImage(opts: { toolsDir?: string; force?: boolean } = {}): ImageRecord {
  const toolsDir = resolve(root, opts.toolsDir ?? process.env.MINDLOOP_TOOLS_DIR ?? '.tools');
  const work = mkdtempSync(join(tmpdir(), 'mindloop-sandbox-image-'));
  try {
    const files = collectInputs(compileHelpers(work));
    const digests: Record<string, string> = {};
    const h = createHash('sha256').update(`layout ${LAYOUT_VERSION}\n`);
    // A compiled helper's bytes can differ between gcc runs only through its source; hash that.
    for (const [dest, src] of [...files].sort(([a], [b]) => a.localeCompare(b))) {
      digests[dest] = COMPILED[dest] ? sha256File(join(here, COMPILED[dest])) : sha256File(src);
      h.update(`${dest} ${digests[dest]}\n`);
    }
    const inputs = h.digest('hex');
    const tag = `${SANDBOX_IMAGE_REPO}:${inputs.slice(0, 16)}`;

    const existing = spawnSync('docker', ['image', 'inspect', '--format', '{{.Id}}', tag], { encoding: 'utf8' });
    let id: string;
    if (existing.status === 0 && !opts.force) {
      id = existing.stdout.trim();
      say(`up to date: ${tag} (${id.slice(0, 19)})`);
    } else {
      const rootfs = join(work, 'rootfs');
      for (const d of ['bin', 'etc', 'tmp', 'work', 'proc', 'sys', 'dev', 'usr/local/bin'])
        mkdirSync(join(rootfs, d), { recursive: true });
      chmodSync(join(rootfs, 'tmp'), 0o1777);
      for (const [dest, src] of files) {
        mkdirSync(join(rootfs, dirname(dest)), { recursive: true });
        copyFileSync(src, join(rootfs, dest));
        if (EXEC_ONLY.includes(dest)) chmodSync(join(rootfs, dest), 0o711);
      }
      const applets = execFileSync(files.get('/bin/busybox')!, ['--list'], { encoding: 'utf8' })
        .split('\n')
        .filter(Boolean);
      for (const a of applets)
        if (a !== 'busybox' && !existsSync(join(rootfs, 'bin', a))) symlinkSync('busybox', join(rootfs, 'bin', a));
      writeFileSync(
        join(rootfs, 'etc/passwd'),
        'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/work:/bin/sh\n',
      );
      writeFileSync(join(rootfs, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\n');
      const tarball = join(work, 'rootfs.tar');
      execFileSync('tar', [
        '--sort=name',
        '--mtime=@0',
        '--owner=0',
        '--group=0',
        '--numeric-owner',
        '-C',
        rootfs,
        '-cf',
        tarball,
        '.',
      ]);
      say(`importing ${tag} (${applets.length} busybox applets, node ${process.version}, init and probe)…`);
      const changes = [
        'ENV PATH=/usr/local/bin:/bin',
        'ENV HOME=/work',
        'USER 65534:65534',
        'WORKDIR /work',
        `LABEL mindloop.sandbox.inputs=${inputs}`,
        'CMD ["/bin/sh"]',
      ];
      id = docker(['import', ...changes.flatMap((c) => ['--change', c]), tarball, tag]);
      say(`built ${tag} ${id}`);
    }
    docker(['tag', tag, SANDBOX_IMAGE]);
    const record: ImageRecord = { image: tag, id, inputs, builtAt: new Date().toISOString(), files: digests };
    mkdirSync(toolsDir, { recursive: true });
    writeFileSync(join(toolsDir, 'sandbox-image.json'), `${JSON.stringify(record, null, 2)}\n`);
    return record;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const r = buildSandboxImage({ force: process.argv.includes('--force') });
    process.stdout.write(`${r.image} ${r.id}\n`);
  } catch (err) {
    say((err as Error).message);
    process.exit(1);
  }
}
