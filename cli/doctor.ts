/**
 * `mindloop doctor`: what this machine has, what is missing, and the command that fixes it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { Client, Connection } from '@temporalio/client';
import { createDb } from '../db/client.js';
import { unhealthyAgentLoops } from '../runtime/agent-loops.js';
import { temporalConnectionOptions } from '../runtime/stack.js';
import type { Env } from '../env.js';
import { migrationsFolder } from '../db/migrate.js';
import { waitForTemporal } from '../runtime/temporal-dev-server.js';
import { installHint, resolveLocalModel, resolveTool } from '../runtime/tools.js';
import { createDocker, dockerStatus } from '../sandbox/docker.js';
import { busInstallHint, connectBus, defaultNatsUrl } from '../runtime/bus.js';
import { commandStreamName } from '../core/bus/subjects.js';
import { jetstreamManager } from '@nats-io/jetstream';
import { resolveSandboxImage } from '../sandbox/image.js';

export type CheckStatus = 'ok' | 'warn' | 'fail';
export interface Check {
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
    cli = resolveTool('temporal', { toolsDir: env.MINDLOOP_TOOLS_DIR, envOverrides: { temporal: env.TEMPORAL_CLI_PATH } });
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
        ? { name: 'temporal', status: 'ok', detail: `cluster at ${address} answers (namespace ${env.TEMPORAL_NAMESPACE})` }
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
        : { name: 'temporal', status: 'fail', detail: cliError ?? 'the Temporal CLI is not installed', fix: installHint },
    );
  }
  checks.push(
    testServer
      ? { name: 'temporal-test-server', status: 'ok', detail: testServer }
      : { name: 'temporal-test-server', status: 'warn', detail: 'time-skipping test server missing (npm test needs it)', fix: installHint },
  );
  return checks;
}

function expectedMigrations(): number {
  const journal = JSON.parse(readFileSync(join(migrationsFolder, 'meta', '_journal.json'), 'utf8')) as { entries: unknown[] };
  return journal.entries.length;
}

async function checkPostgres(env: Env): Promise<Check> {
  const url = env.DATABASE_URL ?? `postgres://postgres@127.0.0.1:${env.PGLITE_PORT}/postgres?sslmode=disable`;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    const version = (await client.query<{ v: string }>('select version() as v')).rows[0]?.v.split(' ').slice(0, 2).join(' ');
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
      return { name: 'postgres', status: 'fail', detail: `DATABASE_URL does not answer: ${(err as Error).message}`, fix: 'check DATABASE_URL, or unset it to use the embedded PGlite' };
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
      ? { name: 'docker', status: 'ok', detail: `engine ${status.version}, sandbox image ${image.id.slice(0, 19)} (sandbox queue can run)` }
      : { name: 'docker', status: 'warn', detail: `engine ${status.version}, but ${image.error}`, fix: 'npm run sandbox:image' };
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
  if (env.NATS_URL === 'off') return { name: 'bus', status: 'ok', detail: 'off (NATS_URL=off): workers run without the bus' };
  const url = env.NATS_URL ?? defaultNatsUrl;
  const uses = 'heartbeats, agent events, agent commands over the bus, the echo agent';
  let bus;
  try {
    bus = await connectBus({ url, root: env.MINDLOOP_BUS_ROOT, name: 'mindloop-doctor', timeoutMs: 1500, log: () => undefined });
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
      return { name: 'bus', status: 'warn', detail: `NATS ${version} at ${url}, but JetStream is off: agent commands over the bus need it`, fix: 'restart nats-server with -js (and a store dir, -sd)' };
    }
    const stream = commandStreamName(bus.root);
    const jsm = await jetstreamManager(bus.nc);
    const waiting = await jsm.streams.info(stream).then((i) => `${i.state.messages} command(s) waiting in ${stream}`, () => `${stream} not created yet (the first worker on the bus creates it)`);
    return { name: 'bus', status: 'ok', detail: `NATS ${version} with JetStream at ${url}, root ${bus.root}; ${waiting}` };
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
    if (bad.length === 0) return { name: 'agent-loops', status: 'ok', detail: 'every agent marked running has a running loop' };
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

/** Run every check; none throws. */
export async function runDoctor(env: Env): Promise<Check[]> {
  const [temporal, postgres, docker, bus] = await Promise.all([checkTemporal(env), checkPostgres(env), checkDocker(env), checkBus(env)]);
  // The loops can be checked only where both Temporal and the database answer.
  const loops = temporal[0]?.status === 'ok' && !temporal[0].detail.includes('not running') && postgres.status === 'ok' && !postgres.detail.includes('not running') ? [await checkAgentLoops(env)] : [];
  return [...temporal, postgres, docker, bus, checkLocalModel(env), ...loops];
}

/** Human-readable report: one line per check, with the fix indented under it. */
export function formatChecks(checks: Check[]): string {
  const mark: Record<CheckStatus, string> = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL' };
  const width = Math.max(...checks.map((c) => c.name.length));
  return checks
    .map((c) => `${mark[c.status]}  ${c.name.padEnd(width)}  ${c.detail}${c.fix ? `\n      ${' '.repeat(width)}  fix: ${c.fix}` : ''}`)
    .join('\n');
}
