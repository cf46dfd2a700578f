/**
 * `npm run sandbox:image`: build the sandbox image locally, no registry (SPEC §5). The root file
 * system is busybox-static (with its applet links), this host's node binary and the shared
 * libraries `ldd` lists for it, and `mindloop-probe` (sandbox/probe.c, compiled static when gcc
 * is present; the containment suite needs it). The tarball is reproducible (sorted names, mtime
 * 0, uid/gid 0) and the image is tagged by the sha256 of its inputs, so a second run with the
 * same inputs is a no-op. The image id is recorded in <tools dir>/sandbox-image.json and the
 * image is also tagged `mindloop-sandbox:latest`, which DockerSandbox runs.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SANDBOX_IMAGE, SANDBOX_IMAGE_REPO } from './image.js';
/** Bump when the layout below changes, so the inputs hash changes with it. */
const LAYOUT_VERSION = 2;

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');

export interface ImageRecord {
  image: string;
  id: string;
  inputs: string;
  probe: boolean;
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
function collectInputs(probeBinary: string | null): Map<string, string> {
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
  if (probeBinary) files.set('/usr/local/bin/mindloop-probe', probeBinary);
  return files;
}

function compileProbe(workDir: string): string | null {
  if (!which('gcc')) {
    say('gcc not found: building without mindloop-probe (the containment suite needs it)');
    return null;
  }
  const out = join(workDir, 'mindloop-probe');
  execFileSync('gcc', ['-static', '-O2', '-o', out, join(here, 'probe.c')], { stdio: ['ignore', 'inherit', 'inherit'] });
  return out;
}

/** Build (or find) the image; returns its record. */
export function buildSandboxImage(opts: { toolsDir?: string; force?: boolean } = {}): ImageRecord {
  const toolsDir = resolve(root, opts.toolsDir ?? process.env.MINDLOOP_TOOLS_DIR ?? '.tools');
  const work = mkdtempSync(join(tmpdir(), 'mindloop-sandbox-image-'));
  try {
    const probe = compileProbe(work);
    const files = collectInputs(probe);
    const digests: Record<string, string> = {};
    const h = createHash('sha256').update(`layout ${LAYOUT_VERSION}\n`);
    // The probe binary's bytes can differ between gcc runs only through its source; hash that.
    for (const [dest, src] of [...files].sort(([a], [b]) => a.localeCompare(b))) {
      digests[dest] = dest === '/usr/local/bin/mindloop-probe' ? sha256File(join(here, 'probe.c')) : sha256File(src);
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
      for (const d of ['bin', 'etc', 'tmp', 'work', 'proc', 'sys', 'dev', 'usr/local/bin']) mkdirSync(join(rootfs, d), { recursive: true });
      chmodSync(join(rootfs, 'tmp'), 0o1777);
      for (const [dest, src] of files) {
        mkdirSync(join(rootfs, dirname(dest)), { recursive: true });
        copyFileSync(src, join(rootfs, dest));
      }
      const applets = execFileSync(files.get('/bin/busybox')!, ['--list'], { encoding: 'utf8' }).split('\n').filter(Boolean);
      for (const a of applets) if (a !== 'busybox' && !existsSync(join(rootfs, 'bin', a))) symlinkSync('busybox', join(rootfs, 'bin', a));
      writeFileSync(join(rootfs, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/work:/bin/sh\n');
      writeFileSync(join(rootfs, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\n');
      const tarball = join(work, 'rootfs.tar');
      execFileSync('tar', ['--sort=name', '--mtime=@0', '--owner=0', '--group=0', '--numeric-owner', '-C', rootfs, '-cf', tarball, '.']);
      say(`importing ${tag} (${applets.length} busybox applets, node ${process.version}, ${probe ? 'with' : 'without'} probe)…`);
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
    const record: ImageRecord = { image: tag, id, inputs, probe: probe !== null, builtAt: new Date().toISOString(), files: digests };
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
