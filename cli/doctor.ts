/**
 * `mindloop doctor`: what this machine has, what is missing, and the command that fixes it.
 */
import { execFile } from 'node:child_process';
import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { Command } from 'commander';
import pg from 'pg';
import { Client, Connection } from '@temporalio/client';
import { and, asc, count, eq, sql } from 'drizzle-orm';
import { createDb, type Db } from '../db/client.js';
import { mcpCalls, mcpServers } from '../db/schema/index.js';
import { oneLine } from '../core/sanitize.js';
import { unhealthyAgentLoops } from '../runtime/agent-loops.js';
import { temporalConnectionOptions } from '../runtime/temporal-connection.js';
import { loadEnvOrExit, type Env } from '../env.js';
import { migrationsFolder } from '../db/migrate.js';
import { waitForTemporal } from '../runtime/temporal-dev-server.js';
import { installHint, resolveLocalModel, resolveTool } from '../runtime/tools.js';
import { createDocker, dockerStatus } from '../sandbox/docker.js';
import { busInstallHint, connectBus, defaultNatsUrl } from '../runtime/bus.js';
import { commandStreamName } from '../core/bus/subjects.js';
import { resolveDeployment } from '../runtime/deployment.js';
import { connectTemporal } from '../runtime/operator.js';
import { jetstreamManager } from '@nats-io/jetstream';
import { resolveSandboxImage } from '../sandbox/image.js';
import { isSpeechQueueSetting, speechSourceDir, type SpeechQueueSetting } from '../runtime/speech-worker.js';

type CheckStatus = 'ok' | 'warn' | 'fail';
interface Check {
  name: string;
  status: CheckStatus;
  detail: string;
  fix?: string;
}

async function checkTemporal(env: Env): Promise<Check[]> {
  const checks: Check[] = [];
  let cli: string | undefined;
  let cliError: string | undefined;
  try {
    cli = resolveTool('temporal', {
      toolsDir: env.MINDLOOP_TOOLS_DIR,
      envOverrides: { temporal: env.TEMPORAL_CLI_PATH },
    });
  } catch (err) {
    cliError = (err as Error).message;
  }
  let testServer: string | undefined;
  try {
    testServer = resolveTool('temporal-test-server', {
      toolsDir: env.MINDLOOP_TOOLS_DIR,
      envOverrides: { 'temporal-test-server': env.TEMPORAL_TEST_SERVER_PATH },
    });
  } catch (err) {
    cliError ??= (err as Error).message;
  }

  const address = env.TEMPORAL_ADDRESS ?? `127.0.0.1:${env.TEMPORAL_PORT}`;
  let answering = false;
  try {
    await waitForTemporal(address, 1500);
    answering = true;
  } catch {
    /* reported below */
  }
  if (env.TEMPORAL_ADDRESS) {
    checks.push(
      answering
        ? {
            name: 'temporal',
            status: 'ok',
            detail: `cluster at ${address} answers (namespace ${env.TEMPORAL_NAMESPACE})`,
          }
        : {
            name: 'temporal',
            status: 'fail',
            detail: `no Temporal frontend answers at ${address}`,
            fix: 'check TEMPORAL_ADDRESS (and TEMPORAL_TLS_CERT/KEY or TEMPORAL_API_KEY), or unset it to use the embedded dev server',
          },
    );
  } else {
    checks.push(
      cli
        ? {
            name: 'temporal',
            status: 'ok',
            detail: `CLI ${cli}; dev server ${answering ? `running at ${address}` : 'not running (npm start starts it)'}`,
          }
        : {
            name: 'temporal',
            status: 'fail',
            detail: cliError ?? 'the Temporal CLI is not installed',
            fix: installHint,
          },
    );
  }
  checks.push(
    testServer
      ? { name: 'temporal-test-server', status: 'ok', detail: testServer }
      : {
          name: 'temporal-test-server',
          status: 'warn',
          detail: 'time-skipping test server missing (npm test needs it)',
          fix: installHint,
        },
  );
  return checks;
}

function expectedMigrations(): number {
  const journal = JSON.parse(readFileSync(join(migrationsFolder, 'meta', '_journal.json'), 'utf8')) as {
    entries: unknown[];
  };
  return journal.entries.length;
}

async function checkPostgres(env: Env): Promise<Check> {
  const url = env.DATABASE_URL ?? `postgres://postgres@127.0.0.1:${env.PGLITE_PORT}/postgres?sslmode=disable`;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    const version = (await client.query<{ v: string }>('select version() as v')).rows[0]?.v
      .split(' ')
      .slice(0, 2)
      .join(' ');
    const applied = await client
      .query<{ n: string }>('select count(*)::text as n from drizzle.__migrations')
      .then((r) => Number(r.rows[0]?.n ?? 0))
      .catch(() => 0);
    const expected = expectedMigrations();
    const where = env.DATABASE_URL ? 'DATABASE_URL' : `embedded PGlite on :${env.PGLITE_PORT}`;
    if (applied < expected) {
      return {
        name: 'postgres',
        status: 'warn',
        detail: `${version} via ${where}; ${applied}/${expected} migrations applied`,
        fix: 'npm start applies them (or: DATABASE_URL=… npm run db:migrate)',
      };
    }
    return { name: 'postgres', status: 'ok', detail: `${version} via ${where}; migrations ${applied}/${expected}` };
  } catch (err) {
    if (env.DATABASE_URL) {
      return {
        name: 'postgres',
        status: 'fail',
        detail: `DATABASE_URL does not answer: ${(err as Error).message}`,
        fix: 'check DATABASE_URL, or unset it to use the embedded PGlite',
      };
    }
    const dataDir = resolve(env.MINDLOOP_DATA_DIR, 'pglite');
    return {
      name: 'postgres',
      status: 'ok',
      detail: `embedded PGlite not running (npm start serves it on :${env.PGLITE_PORT}); data ${existsSync(dataDir) ? `in ${dataDir}` : 'not created yet'}`,
    };
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function checkDocker(env: Env): Promise<Check> {
  const docker = createDocker(env.DOCKER_HOST);
  const status = await dockerStatus(docker);
  if (status.available) {
    // The engine answers; the sandbox also needs its locally built image.
    const image = await resolveSandboxImage(docker).then(
      (id) => ({ id }),
      (err: unknown) => ({ error: (err as Error).message }),
    );
    return 'id' in image
      ? {
          name: 'docker',
          status: 'ok',
          detail: `engine ${status.version}, sandbox image ${image.id.slice(0, 19)} (sandbox queue can run)`,
        }
      : {
          name: 'docker',
          status: 'warn',
          detail: `engine ${status.version}, but ${image.error}`,
          fix: 'npm run sandbox:image',
        };
  }
  return {
    name: 'docker',
    status: 'warn',
    detail: `no Docker engine answers (${status.reason}); the sandbox queue cannot run code`,
    fix: 'apt-get install -y docker.io && (dockerd > /var/log/dockerd.log 2>&1 &) — or set DOCKER_HOST',
  };
}

/** The bus (NATS): optional, like Docker; what answers at NATS_URL (or the default), JetStream, the command stream. */
export async function checkBus(env: Env): Promise<Check> {
  if (env.NATS_URL === 'off')
    return { name: 'bus', status: 'ok', detail: 'off (NATS_URL=off): workers run without the bus' };
  const url = env.NATS_URL ?? defaultNatsUrl;
  const uses = 'heartbeats, agent events, agent commands over the bus, the echo agent';
  // Which deployment's subjects to look at: MINDLOOP_DEPLOYMENT, or the one Temporal's namespace names.
  let connection: Connection | undefined;
  let deployment: string | undefined;
  let noDeployment = '';
  try {
    deployment = (
      await resolveDeployment(env, async () => {
        connection = await connectTemporal(env);
        return new Client({ connection, namespace: env.TEMPORAL_NAMESPACE });
      })
    ).id;
  } catch (err) {
    noDeployment = `; ${(err as Error).message.split('\n')[0]}`;
  } finally {
    await connection?.close().catch(() => undefined);
  }
  let bus;
  try {
    bus = await connectBus({
      url,
      root: env.MINDLOOP_BUS_ROOT,
      deployment,
      name: 'mindloop-doctor',
      timeoutMs: 1500,
      log: () => undefined,
    });
  } catch {
    return {
      name: 'bus',
      status: 'warn',
      detail: `no NATS answers at ${url}${env.NATS_URL ? ' (NATS_URL)' : ' (npm start runs a nats-server of its own when one is installed)'}; the bus is optional: everything else runs without it (it carries ${uses})`,
      fix: busInstallHint,
    };
  }
  try {
    const version = bus.nc.info?.version ?? '?';
    if (!bus.nc.info?.jetstream) {
      return {
        name: 'bus',
        status: 'warn',
        detail: `NATS ${version} at ${url}, but JetStream is off: agent commands over the bus need it`,
        fix: 'restart nats-server with -js (and a store dir, -sd)',
      };
    }
    if (!deployment)
      return {
        name: 'bus',
        status: 'warn',
        detail: `NATS ${version} with JetStream at ${url}${noDeployment}`,
        fix: 'start Temporal (`npm start`), or set MINDLOOP_DEPLOYMENT',
      };
    const stream = commandStreamName(bus.root);
    const jsm = await jetstreamManager(bus.nc);
    const waiting = await jsm.streams.info(stream).then(
      (i) => `${i.state.messages} command(s) waiting in ${stream}`,
      () => `${stream} not created yet (the first worker on the bus creates it)`,
    );
    return {
      name: 'bus',
      status: 'ok',
      detail: `NATS ${version} with JetStream at ${url}, deployment ${deployment}, subjects ${bus.root}.*; ${waiting}`,
    };
  } finally {
    await bus.close();
  }
}

function checkLocalModel(env: Env): Check {
  const model = resolveLocalModel(env.MINDLOOP_TOOLS_DIR);
  return model
    ? { name: 'local-model', status: 'ok', detail: `SmolLM2-135M-Instruct GGUF at ${model}` }
    : { name: 'local-model', status: 'warn', detail: 'the offline local model is not installed', fix: installHint };
}

/** What the speech engine's Python reports about itself (`speechProbeScript`), or why it does not start. */
export type SpeechProbe =
  | { error: string }
  | {
      versions: Record<string, string | null>;
      /** The two packages the Whisper model is assembled from: version, or null when missing. */
      whisper: Array<{ package: string; version: string | null }>;
      modelDir: string;
      modelReady: boolean;
      /** Why piper does not import, or null. */
      piperError: string | null;
      piperVoices: Array<{ name: string; lang: string }>;
      cudaDevices: number;
      /** Whether libcublas.so.12 loads (only asked when CTranslate2 sees a CUDA device). */
      cublas: boolean | null;
    };

/**
 * One Python start for the whole speech check. Its first line is `findSpeechEngine`'s test (the
 * venv's Python imports `mindloop_speech.worker`); the rest asks the engine's own functions, so
 * the doctor sees what the worker will: the Whisper packages, piper and its voices, and CUDA as
 * CTranslate2 sees it (plus cuBLAS, which the GPU needs and the driver does not bring).
 */
const speechProbeScript = `
import json, sys
try:
    import mindloop_speech.worker as worker
except Exception as err:
    print(json.dumps({"error": f"{type(err).__name__}: {err}"}))
    sys.exit(0)
import ctypes, importlib.metadata as md, importlib.util, pathlib
from mindloop_speech import models, tts
def version(dist):
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None
whisper = []
for dist, module, part in models.WHISPER_PARTS:
    spec = importlib.util.find_spec(module)
    present = spec is not None and spec.origin is not None and (pathlib.Path(spec.origin).parent / "data" / part).is_file()
    whisper.append({"package": dist, "version": version(dist) if present else None})
try:
    import onnxruntime
    from piper import PiperVoice
    piper_error = None
except ImportError as err:
    piper_error = str(err)
cuda = worker.cuda_devices()
cublas = None
if cuda > 0:
    try:
        ctypes.CDLL("libcublas.so.12")
        cublas = True
    except OSError:
        cublas = False
model_dir = models.default_whisper_dir()
print(json.dumps({
    "versions": {d: version(d) for d in ("temporalio", "faster-whisper", "piper-tts")},
    "whisper": whisper, "modelDir": str(model_dir), "modelReady": models.whisper_dir_ready(model_dir),
    "piperError": piper_error, "piperVoices": [{"name": v.name, "lang": v.lang} for v in tts.find_piper_voices()],
    "cudaDevices": cuda, "cublas": cublas,
}))
`;

/** Run the probe with the venv's Python (as the worker runs: PYTHONPATH = the repository's `speech/`). */
export async function probeSpeechEngine(toolsDir: string, sourceDir = speechSourceDir): Promise<SpeechProbe> {
  const python = join(resolve(toolsDir), 'venv', 'bin', 'python');
  if (!existsSync(python)) return { error: `no Python venv at ${python}` };
  try {
    const { stdout } = await promisify(execFile)(python, ['-c', speechProbeScript], {
      env: { ...process.env, PYTHONPATH: sourceDir },
      timeout: 30_000,
    });
    return JSON.parse(stdout.trim().split('\n').pop() ?? '') as SpeechProbe;
  } catch (err) {
    const e = err as Error & { stderr?: string };
    return { error: (e.stderr?.trim().split('\n').pop() || e.message).slice(0, 300) };
  }
}

/** The speech synthesisers that are commands, as the engine looks for them. */
export interface SpeechCommands {
  pico2wave: string | null;
  /** Whether SVOX Pico's voices are installed beside it (/usr/share/pico/lang). */
  picoLingware: boolean;
  espeakNg: string | null;
}

function onPath(bin: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    try {
      accessSync(join(dir, bin), constants.X_OK);
      return join(dir, bin);
    } catch {
      /* not here */
    }
  }
  return null;
}

function findSpeechCommands(): SpeechCommands {
  return {
    pico2wave: onPath('pico2wave'),
    picoLingware: existsSync('/usr/share/pico/lang'),
    espeakNg: onPath('espeak-ng'),
  };
}

const setupFix = 'npm run setup';

/** Which queue the engine will poll here, by MINDLOOP_QUEUES and the CUDA devices CTranslate2 sees. */
function cudaCheck(probe: Exclude<SpeechProbe, { error: string }>, setting: SpeechQueueSetting): Check {
  const name = 'speech-cuda';
  const devices = `CTranslate2 sees ${probe.cudaDevices} CUDA device(s)`;
  if (setting === 'speech-cpu')
    return {
      name,
      status: 'ok',
      detail: `${devices}; MINDLOOP_QUEUES pins the engine to speech-cpu (Whisper int8 on the CPU)`,
    };
  if (probe.cudaDevices === 0) {
    return setting === 'speech-gpu'
      ? {
          name,
          status: 'warn',
          detail:
            'MINDLOOP_QUEUES pins the engine to speech-gpu, but CTranslate2 sees no CUDA device: it will not start',
          fix: 'name `speech` (the engine picks by its device) or `speech-cpu` in MINDLOOP_QUEUES, or check the NVIDIA driver (nvidia-smi)',
        }
      : {
          name,
          status: 'ok',
          detail:
            'no CUDA device: the engine polls speech-cpu (Whisper int8 on the CPU); jobs go to a GPU host first whenever one polls speech-gpu',
        };
  }
  if (probe.cublas === false) {
    return {
      name,
      status: 'warn',
      detail: `${devices} but libcublas.so.12 does not load: the engine would poll speech-gpu and fail to load Whisper there`,
      fix: 'install cuBLAS for CUDA 12 (`.tools/venv/bin/pip install nvidia-cublas-cu12`, its nvidia/cublas/lib on LD_LIBRARY_PATH), or keep the engine on the CPU with speech-cpu in MINDLOOP_QUEUES',
    };
  }
  return { name, status: 'ok', detail: `${devices} and cuBLAS loads: the engine polls speech-gpu (Whisper float16)` };
}

/** The speech checks from what the probe and PATH say (pure: tests pass both in). */
export function speechChecks(
  probe: SpeechProbe,
  cmds: SpeechCommands,
  setting: SpeechQueueSetting = 'speech',
): Check[] {
  const pico = cmds.pico2wave && cmds.picoLingware ? cmds.pico2wave : null;
  if ('error' in probe) {
    const tts = [pico && 'pico2wave', cmds.espeakNg && 'espeak-ng'].filter(Boolean).join(', ') || 'none';
    return [
      {
        name: 'speech',
        status: 'warn',
        detail: `the speech engine is not installed (${probe.error}); speech jobs wait until a speech worker polls (voices on PATH: ${tts})`,
        fix: setupFix,
      },
    ];
  }
  const v = probe.versions;
  const checks: Check[] = [
    {
      name: 'speech',
      status: 'ok',
      detail: `engine importable (temporalio ${v.temporalio ?? '?'}, faster-whisper ${v['faster-whisper'] ?? '?'}, piper-tts ${v['piper-tts'] ?? '?'})`,
    },
  ];

  const missing = probe.whisper.filter((w) => !w.version).map((w) => w.package);
  checks.push(
    missing.length > 0
      ? {
          name: 'speech-stt',
          status: 'warn',
          detail: `the Whisper model package(s) ${missing.join(', ')} are missing: transcription is off`,
          fix: setupFix,
        }
      : {
          name: 'speech-stt',
          status: 'ok',
          detail: `Whisper base from ${probe.whisper.map((w) => `${w.package} ${w.version}`).join(' + ')}; ${probe.modelReady ? `assembled in ${probe.modelDir}` : `assembled into ${probe.modelDir} when the engine first starts`}`,
        },
  );

  const piper = probe.piperError ? [] : probe.piperVoices;
  const have = [
    piper.length > 0 && `piper (${piper.map((p) => `${p.name}: ${p.lang}`).join(', ')})`,
    pico && `pico2wave ${pico}`,
    cmds.espeakNg && `espeak-ng ${cmds.espeakNg}`,
  ].filter(Boolean);
  const lacking = [
    piper.length === 0 &&
      (probe.piperError
        ? `piper does not import (${probe.piperError}): English falls to Pico or espeak-ng`
        : 'no piper voice: English falls to Pico or espeak-ng'),
    !pico &&
      (cmds.pico2wave
        ? 'pico2wave without its voices in /usr/share/pico/lang'
        : 'no pico2wave: German, French, Spanish and Italian fall to espeak-ng'),
    !cmds.espeakNg && 'no espeak-ng: languages without a piper or Pico voice are refused',
  ].filter(Boolean);
  checks.push({
    name: 'speech-tts',
    status: lacking.length > 0 ? 'warn' : 'ok',
    detail:
      have.length > 0
        ? `${have.join('; ')}${lacking.length > 0 ? `; ${lacking.join('; ')}` : ''}`
        : `no voice at all: every speak is refused (${lacking.join('; ')})`,
    ...(lacking.length > 0 ? { fix: setupFix } : {}),
  });

  checks.push(cudaCheck(probe, setting));
  return checks;
}

/** The speech engine, when this machine's MINDLOOP_QUEUES asks for one. */
async function checkSpeech(env: Env): Promise<Check[]> {
  const setting = env.MINDLOOP_QUEUES.find(isSpeechQueueSetting);
  if (!setting) return [{ name: 'speech', status: 'ok', detail: 'off (MINDLOOP_QUEUES names no speech queue)' }];
  return speechChecks(await probeSpeechEngine(env.MINDLOOP_TOOLS_DIR), findSpeechCommands(), setting);
}

/**
 * Agents whose row says running but whose loop workflow is not (failed, terminated, gone):
 * listed, and their rows marked `failed` so that they stop claiming to run.
 */
async function checkAgentLoops(env: Env): Promise<Check> {
  const address = env.TEMPORAL_ADDRESS ?? `127.0.0.1:${env.TEMPORAL_PORT}`;
  const url = env.DATABASE_URL ?? `postgres://postgres@127.0.0.1:${env.PGLITE_PORT}/postgres?sslmode=disable`;
  let connection: Connection | undefined;
  const h = createDb(url, { max: 1 });
  try {
    connection = await Connection.connect({ ...temporalConnectionOptions(env, address), connectTimeout: 2000 });
    const client = new Client({ connection, namespace: env.TEMPORAL_NAMESPACE });
    const bad = await unhealthyAgentLoops(client, h.db, { fix: true });
    if (bad.length === 0)
      return { name: 'agent-loops', status: 'ok', detail: 'every agent marked running has a running loop' };
    return {
      name: 'agent-loops',
      status: 'warn',
      detail: `not running: ${bad.map((b) => `${b.agentId} (${b.workflowStatus}${b.closeTime ? ` at ${b.closeTime}` : ''})`).join(', ')}; marked failed`,
      fix: `see why with \`npx mindloop status <agent>\`; start again with \`npx mindloop start <agent>\` (it goes on from its last tick)`,
    };
  } catch (err) {
    return { name: 'agent-loops', status: 'warn', detail: `not checked: ${(err as Error).message.split('\n')[0]}` };
  } finally {
    await connection?.close().catch(() => undefined);
    await h.close().catch(() => undefined);
  }
}

/** One agent's MCP server as the workers last reported it, with its calls of unknown outcome in the last 24 h. */
export interface McpServerReport {
  agentId: string;
  name: string;
  transport: string;
  enabled: boolean;
  health: 'up' | 'down' | null;
  healthAt: Date | null;
  lastError: string | null;
  restarts: number;
  unknownCalls: number;
  /** No longer granted: only its calls of unknown outcome are left. */
  removed?: boolean;
}

/** How long ago `at` was, and the instant itself. */
function ago(at: Date, now: Date): string {
  const s = Math.max(0, Math.round((now.getTime() - at.getTime()) / 1000));
  const text =
    s < 90
      ? `${s} s`
      : s < 5400
        ? `${Math.round(s / 60)} min`
        : s < 172_800
          ? `${Math.round(s / 3600)} h`
          : `${Math.round(s / 86_400)} d`;
  return `${text} ago (${at.toISOString()})`;
}

const unknownFix =
  "a call of unknown outcome may or may not have happened, and is never made again by itself: see on the server's side whether it did, then tell the agent (the notebook's agent page, tab 'mcp', marks these calls)";

/**
 * One check per server (`mcp <agent>/<server>`): its transport, whether the workers saw it up,
 * down (with the last error on one line) or not started yet, its restarts, when it was last
 * reported, and its calls of unknown outcome in the last 24 h. A server down and a call of
 * unknown outcome are warnings; nothing here fails the doctor.
 */
export function mcpChecks(servers: readonly McpServerReport[], now = new Date()): Check[] {
  if (servers.length === 0)
    return [{ name: 'mcp', status: 'ok', detail: 'no agent has an MCP server (mindloop tools mcp add)' }];
  return servers.map((s) => {
    const state = s.removed
      ? 'removed'
      : !s.enabled
        ? 'disabled'
        : s.health === null
          ? 'not started (no worker has used it since it was added)'
          : s.health === 'up'
            ? 'up'
            : `DOWN: ${oneLine(s.lastError ?? 'no error recorded', 200)}`;
    const detail = [
      `agent ${s.agentId}, server ${s.name}${s.removed ? '' : `, ${s.transport}`}: ${state}`,
      ...(s.removed ? [] : [`restarts ${s.restarts}`]),
      ...(s.healthAt && !s.removed ? [`last seen ${ago(s.healthAt, now)}`] : []),
      `${s.unknownCalls} call(s) of unknown outcome in the last 24 h`,
    ].join('; ');
    const down = !s.removed && s.enabled && s.health === 'down';
    const fixes = [
      down &&
        `a worker starts it again on its next use, after a backoff; if the error stays, fix the server or take it away (mindloop tools mcp remove ${s.agentId} ${s.name})`,
      s.unknownCalls > 0 && unknownFix,
    ].filter((f): f is string => typeof f === 'string');
    return {
      name: `mcp ${s.agentId}/${s.name}`,
      status: fixes.length > 0 ? 'warn' : 'ok',
      detail,
      ...(fixes.length > 0 ? { fix: fixes.join('; and ') } : {}),
    };
  });
}

/** Every agent's MCP servers by agent and name, and the servers since removed that left calls of unknown outcome. */
export async function mcpServerReports(db: Db): Promise<McpServerReport[]> {
  const servers = await db
    .select({
      agentId: mcpServers.agentId,
      name: mcpServers.name,
      transport: mcpServers.transport,
      enabled: mcpServers.enabled,
      health: mcpServers.health,
      healthAt: mcpServers.healthAt,
      lastError: mcpServers.lastError,
      restarts: mcpServers.restarts,
    })
    .from(mcpServers)
    .orderBy(asc(mcpServers.agentId), asc(mcpServers.name));
  const unknown = await db
    .select({ agentId: mcpCalls.agentId, server: mcpCalls.server, n: count() })
    .from(mcpCalls)
    .where(
      and(
        eq(mcpCalls.status, 'unknown'),
        sql`coalesce(${mcpCalls.finishedAt}, ${mcpCalls.createdAt}) > now() - interval '24 hours'`,
      ),
    )
    .groupBy(mcpCalls.agentId, mcpCalls.server);
  const key = (agentId: string, server: string) => `${agentId}\u0000${server}`;
  const counts = new Map(unknown.map((u) => [key(u.agentId, u.server), u.n]));
  const reports: McpServerReport[] = servers.map((s) => ({
    ...s,
    unknownCalls: counts.get(key(s.agentId, s.name)) ?? 0,
  }));
  const granted = new Set(servers.map((s) => key(s.agentId, s.name)));
  for (const u of unknown)
    if (!granted.has(key(u.agentId, u.server)))
      reports.push({
        agentId: u.agentId,
        name: u.server,
        transport: '-',
        enabled: false,
        health: null,
        healthAt: null,
        lastError: null,
        restarts: 0,
        unknownCalls: u.n,
        removed: true,
      });
  return reports.sort((a, b) => a.agentId.localeCompare(b.agentId) || a.name.localeCompare(b.name));
}

/** The MCP servers' health as the workers recorded it in Postgres. */
async function checkMcp(env: Env): Promise<Check[]> {
  const url = env.DATABASE_URL ?? `postgres://postgres@127.0.0.1:${env.PGLITE_PORT}/postgres?sslmode=disable`;
  const h = createDb(url, { max: 1 });
  try {
    return mcpChecks(await mcpServerReports(h.db));
  } catch (err) {
    return [{ name: 'mcp', status: 'warn', detail: `not checked: ${(err as Error).message.split('\n')[0]}` }];
  } finally {
    await h.close().catch(() => undefined);
  }
}

/** Run every check; none throws. */
async function runDoctor(env: Env): Promise<Check[]> {
  const [temporal, postgres, docker, bus, speech] = await Promise.all([
    checkTemporal(env),
    checkPostgres(env),
    checkDocker(env),
    checkBus(env),
    checkSpeech(env),
  ]);
  // The loops can be checked only where both Temporal and the database answer; the MCP servers where the database does.
  const database = postgres.status === 'ok' && !postgres.detail.includes('not running');
  const temporalUp = temporal[0]?.status === 'ok' && !temporal[0].detail.includes('not running');
  const [loops, mcp] = await Promise.all([
    database && temporalUp ? checkAgentLoops(env).then((c) => [c]) : [],
    database ? checkMcp(env) : [],
  ]);
  return [...temporal, postgres, docker, bus, checkLocalModel(env), ...speech, ...loops, ...mcp];
}

/** Human-readable report: one line per check, with the fix indented under it. */
function formatChecks(checks: Check[]): string {
  const mark: Record<CheckStatus, string> = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL' };
  const width = Math.max(...checks.map((c) => c.name.length));
  return checks
    .map(
      (c) =>
        `${mark[c.status]}  ${c.name.padEnd(width)}  ${c.detail}${c.fix ? `\n      ${' '.repeat(width)}  fix: ${c.fix}` : ''}`,
    )
    .join('\n');
}

export function registerDoctorCommand(program: Command): void {
  program
    .command('doctor')
    .description(
      "check Temporal, Postgres, Docker, the bus (NATS), the local model, the speech engine and the agents' MCP servers; print what is missing and how to fix it",
    )
    .option('--json', 'print the checks as JSON')
    .action(async (opts: { json?: boolean }) => {
      const checks = await runDoctor(loadEnvOrExit());
      process.stdout.write(opts.json ? `${JSON.stringify(checks, null, 2)}\n` : `${formatChecks(checks)}\n`);
      process.exitCode = checks.some((c) => c.status === 'fail') ? 1 : 0;
    });
}
