/**
 * docker-compose.yml is valid for the Compose implementation installed here (Debian's
 * `docker-compose` v1, a standalone v2 binary, or the `docker compose` plugin) and declares
 * what a deployment needs: Temporal, its UI, the app's Postgres and one worker per task queue.
 * Only `config` is run: it needs neither a Docker daemon nor the network.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const composeFile = join(root, 'docker-compose.yml');
const installHint =
  'no Compose implementation found: install one with `apt-get install -y docker-compose` ' +
  '(Debian) or the `docker compose` plugin';

interface Compose {
  label: string;
  argv: string[];
  /** v2 prints JSON with `config --format json`; v1 only prints YAML. */
  json: boolean;
}

function sh(cmd: string, args: string[], input?: string): SpawnSyncReturns<string> {
  return spawnSync(cmd, args, { cwd: root, encoding: 'utf8', input, timeout: 60_000 });
}

/** Every Compose implementation on this machine: Debian's binary first, then the plugin. */
function findComposes(): Compose[] {
  const found: Compose[] = [];
  const standalone = sh('docker-compose', ['version', '--short']);
  if (standalone.status === 0) {
    const version = standalone.stdout.trim();
    found.push({ label: `docker-compose ${version}`, argv: ['docker-compose'], json: !/^1\./.test(version) });
  }
  const plugin = sh('docker', ['compose', 'version', '--short']);
  if (plugin.status === 0) {
    found.push({ label: `docker compose ${plugin.stdout.trim()}`, argv: ['docker', 'compose'], json: true });
  }
  return found;
}

function run(compose: Compose, args: string[]): SpawnSyncReturns<string> {
  const [cmd = '', ...pre] = compose.argv;
  return sh(cmd, [...pre, '-f', composeFile, ...args]);
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

const loaded = new Map<Compose, Obj>();

/** The normalized model that `config` prints, as a plain object (once per implementation). */
function loadConfig(compose: Compose): Obj {
  let config = loaded.get(compose);
  if (!config) loaded.set(compose, (config = parseConfig(compose)));
  return config;
}

function parseConfig(compose: Compose): Obj {
  if (compose.json) {
    const r = run(compose, ['config', '--format', 'json']);
    expect(r.status, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as Obj;
  }
  const r = run(compose, ['config']);
  expect(r.status, r.stderr).toBe(0);
  // Compose v1 is Python and depends on PyYAML, so the interpreter beside it can parse YAML.
  const toJson = sh(
    'python3',
    ['-c', 'import json,sys,yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)'],
    r.stdout,
  );
  expect(toJson.status, `python3 + PyYAML (a docker-compose v1 dependency): ${toJson.stderr}`).toBe(0);
  return JSON.parse(toJson.stdout) as Obj;
}

function service(config: Obj, name: string): Obj {
  const services = isObj(config['services']) ? config['services'] : {};
  const s = services[name];
  expect(isObj(s), `service ${name} is defined`).toBe(true);
  return s as Obj;
}

/** `environment` as a map, whether Compose printed a map or a `KEY=value` list. */
function env(s: Obj): Record<string, string> {
  const e = s['environment'];
  if (Array.isArray(e)) {
    return Object.fromEntries(e.map((kv) => String(kv).split(/=(.*)/s).slice(0, 2) as [string, string]));
  }
  return isObj(e) ? Object.fromEntries(Object.entries(e).map(([k, v]) => [k, String(v ?? '')])) : {};
}

/** Mount targets, from v1's `src:dst:mode` strings or v2's `{ source, target }` objects. */
function mounts(s: Obj): { source: string; target: string }[] {
  const vols = Array.isArray(s['volumes']) ? (s['volumes'] as unknown[]) : [];
  return vols.map((v) => {
    if (typeof v === 'string') {
      const [source = '', target = ''] = v.split(':');
      return { source, target };
    }
    const o = isObj(v) ? v : {};
    return { source: String(o['source'] ?? ''), target: String(o['target'] ?? '') };
  });
}

/** `depends_on` as name → condition (v1 and v2 both print the long form when conditions are used). */
function dependsOn(s: Obj): Record<string, string> {
  const d = s['depends_on'];
  if (Array.isArray(d)) return Object.fromEntries(d.map((n) => [String(n), 'service_started']));
  if (!isObj(d)) return {};
  return Object.fromEntries(
    Object.entries(d).map(([k, v]) => [k, String(isObj(v) ? v['condition'] : 'service_started')]),
  );
}

const workers = {
  'worker-mindloop': 'mindloop',
  'worker-sandbox': 'sandbox',
  'worker-speech': 'speech-gpu',
} as const;

const composes = findComposes();

describe('docker-compose.yml', { timeout: 60_000 }, () => {
  it('has a Compose implementation to validate it with', () => {
    expect(
      composes.map((c) => c.label),
      installHint,
    ).not.toEqual([]);
  });

  describe.each(composes.map((c) => [c.label, c] as const))('with %s', (_label, compose) => {
    it('passes `config -q` without unset variables', () => {
      const r = run(compose, ['config', '-q']);
      expect(r.error, installHint).toBeUndefined();
      expect(r.status, r.stderr).toBe(0);
      expect(r.stderr).not.toMatch(/variable is not set/i);
    });

    it('brings Temporal, its UI, the app database and one worker per task queue', () => {
      const config = loadConfig(compose);
      for (const name of ['temporal', 'temporal-ui', 'app-db', ...Object.keys(workers)]) service(config, name);

      const ui = service(config, 'temporal-ui');
      expect(env(ui)['TEMPORAL_ADDRESS']).toBe('temporal:7233');
      expect(JSON.stringify(ui['ports'])).toMatch(/8080/);
      expect(dependsOn(ui)['temporal']).toBe('service_healthy');

      const db = service(config, 'app-db');
      expect(db['image']).toMatch(/^postgres:16(\b|$)/);
      expect(db['healthcheck'], 'app-db has a healthcheck').toBeDefined();
      expect(mounts(db).map((m) => m.target)).toContain('/var/lib/postgresql/data');
    });

    it.each(Object.entries(workers))('%s polls %s with TEMPORAL_ADDRESS and DATABASE_URL', (name, queue) => {
      const w = service(loadConfig(compose), name);
      const e = env(w);
      expect(e['MINDLOOP_QUEUES']).toBe(queue);
      expect(e['TEMPORAL_ADDRESS']).toBe('temporal:7233');
      expect(e['DATABASE_URL']).toMatch(/^postgres(ql)?:\/\/[^@/]+@app-db:5432\/mindloop$/);
      expect(w['build'], `${name} is built from the Dockerfile`).toBeDefined();
      expect(w['command']).toEqual([
        'node',
        '--import',
        './scripts/workflow-threads.mjs',
        'scripts/worker.mjs',
        'worker',
      ]);
      expect(dependsOn(w)).toMatchObject({ 'app-db': 'service_healthy' });
      expect(
        Object.keys(dependsOn(w)).some((d) => d.startsWith('temporal')),
        `${name} waits for Temporal`,
      ).toBe(true);
    });

    it('mounts the Docker socket into the sandbox worker only', () => {
      const config = loadConfig(compose);
      const socketHolders = Object.keys(workers).filter((name) =>
        mounts(service(config, name)).some((m) => m.target === '/var/run/docker.sock'),
      );
      expect(socketHolders).toEqual(['worker-sandbox']);
    });

    it('reserves a GPU for the speech worker', () => {
      const speech = service(loadConfig(compose), 'worker-speech');
      const devices = (speech['deploy'] as { resources?: { reservations?: { devices?: unknown } } } | undefined)
        ?.resources?.reservations?.devices;
      expect(JSON.stringify(devices)).toMatch(/"gpu"/);
    });

    it('pins every pulled image to a tag other than latest', () => {
      const config = loadConfig(compose);
      const services = config['services'] as Record<string, Obj>;
      const unpinned = Object.entries(services)
        .filter(([, s]) => s['build'] === undefined)
        .filter(([, s]) => !/^[^:@]+(:[^:@]+)?@sha256:|^[^:]+:(?!latest$)[\w.-]+$/.test(String(s['image'])))
        .map(([name, s]) => `${name}: ${String(s['image'])}`);
      expect(unpinned).toEqual([]);
    });
  });
});
