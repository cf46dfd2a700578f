/**
 * A minimal ustar writer: the files of a sandbox run go into the container as a tar stream on
 * stdin (busybox `tar -x` unpacks it into the tmpfs work dir). `docker cp`/putArchive cannot
 * write into a tmpfs mount, and the root file system is read-only, hence this path.
 */

const BLOCK = 512;

function octal(value: number, width: number): string {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

function header(name: string, size: number, mode: number): Buffer {
  const h = Buffer.alloc(BLOCK, 0);
  let prefix = '';
  let base = name;
  if (Buffer.byteLength(name) > 100) {
    const cut = name.lastIndexOf('/', 155);
    if (cut <= 0 || Buffer.byteLength(name.slice(cut + 1)) > 100) throw new Error(`path too long for tar: ${name}`);
    prefix = name.slice(0, cut);
    base = name.slice(cut + 1);
  }
  h.write(base, 0, 100, 'utf8');
  h.write(octal(mode, 8), 100, 'ascii');
  h.write(octal(0, 8), 108, 'ascii'); // uid: the extracting user owns the files
  h.write(octal(0, 8), 116, 'ascii');
  h.write(octal(size, 12), 124, 'ascii');
  h.write(octal(0, 12), 136, 'ascii'); // mtime 0: reproducible
  h.write('        ', 148, 'ascii'); // checksum placeholder
  h.write('0', 156, 'ascii');
  h.write('ustar\0', 257, 'ascii');
  h.write('00', 263, 'ascii');
  h.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return h;
}

/** Normalise a work-dir relative path; refuses absolute paths and `..` escapes. */
export function safeRelativePath(path: string): string {
  const parts = path.split('/').filter((p) => p !== '' && p !== '.');
  if (path.startsWith('/') || parts.length === 0 || parts.some((p) => p === '..')) {
    throw new Error(`file path must be relative to the work dir, without "..": ${JSON.stringify(path)}`);
  }
  return parts.join('/');
}

/** A tar archive of regular files (parent directories are created by tar -x). */
export function tarFiles(files: Record<string, string | Buffer>): Buffer {
  const chunks: Buffer[] = [];
  for (const [path, content] of Object.entries(files)) {
    const body = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
    const name = safeRelativePath(path);
    const mode = /\.(sh|mjs|js)$/.test(name) ? 0o755 : 0o644;
    chunks.push(header(name, body.length, mode), body, Buffer.alloc((BLOCK - (body.length % BLOCK)) % BLOCK, 0));
  }
  chunks.push(Buffer.alloc(BLOCK * 2, 0));
  return Buffer.concat(chunks);
}
