/**
 * A Postgres server of the test's own (this machine's PostgreSQL binaries, `initdb` into a
 * temp dir, its own port), so a test can stop and start it without disturbing the rest of the
 * suite. Postgres refuses to run as root: as root the server runs as the `postgres` user.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, tempDir } from './env.js';

export interface PrivatePostgres {
  url: string;
  port: number;
  /** Stop the server (fast shutdown: connections are cut, as in a crash of the network path). */
  stop(): void;
  start(): void;
  /** Stop (if running) and delete its files. */
  remove(): void;
}

/** The directory holding initdb/pg_ctl: PG_BIN, or the newest /usr/lib/postgresql/<v>/bin. */
export function postgresBinDir(): string {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest)
    throw new Error(
      'no PostgreSQL server binaries (initdb) found under /usr/lib/postgresql: apt-get install postgresql, or set PG_BIN',
    );
  return join(root, newest, 'bin');
}

function pgUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const out = execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim();
  const gid = execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim();
  return { uid: Number(out), gid: Number(gid) };
}

/** initdb a fresh cluster and start it on a free port. */
export async function startPrivatePostgres(name: string): Promise<PrivatePostgres> {
  const bin = postgresBinDir();
  const dir = tempDir(`pg-${name}`);
  const data = join(dir.path, 'data');
  const user = pgUser();
  if (user) {
    chmodSync(dir.path, 0o755);
    chownSync(dir.path, user.uid, user.gid);
  }
  const as = (cmd: string, args: string[]) => {
    const r = user
      ? spawnSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { encoding: 'utf8' })
      : spawnSync(cmd, args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr || r.stdout}`);
  };
  as(join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  const opts = `-p ${port} -k ${dir.path} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`;
  let running = false;
  const server: PrivatePostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start() {
      as(join(bin, 'pg_ctl'), ['-D', data, '-o', opts, '-l', join(dir.path, 'server.log'), '-w', '-t', '60', 'start']);
      running = true;
    },
    stop() {
      if (!running) return;
      as(join(bin, 'pg_ctl'), ['-D', data, '-m', 'fast', '-w', '-t', '60', 'stop']);
      running = false;
    },
    remove() {
      try {
        server.stop();
      } finally {
        dir.remove();
      }
    },
  };
  server.start();
  return server;
}
