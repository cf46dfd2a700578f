/**
 * tick: the agent loop's own cost with an instant scripted model, on the embedded stack.
 * - overhead per tick for 1 agent (delay 0): wall time between consecutive recorded ticks;
 * - aggregate ticks/s with 50 agents looping at once;
 * - worker RSS with 500 agent workflows open and idle;
 * each also as a ratio to the no-op activity round trip measured in the same run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { and, asc, eq, sql } from 'drizzle-orm';
import { createActivities } from '../activities/index.js';
import type { LedgerSwitch } from '../activities/llm/index.js';
import { defaultPrices } from '../core/lifeforce.js';
import { agents, llmRecentResponses, llmRegistry } from '../db/schema/index.js';
import type { Stack } from '../runtime/stack.js';
import { writeWorkflowBundle } from '../workers/build-bundle.js';
import type { AgentStatus, agentLoopWorkflow } from '../workflows/agent-loop.js';
import { summarize, withBenchWorker } from './lib.js';

async function seed(stack: Stack, ids: string[]): Promise<void> {
  await stack.db.db.insert(agents).values(ids.map((id) => ({ id, name: id }))).onConflictDoNothing();
  await stack.db.db
    .insert(llmRegistry)
    .values(ids.map((id) => ({ agentId: id, name: 'instant', provider: 'scripted' as const, model: 'instant', role: 'agent' as const, priority: 1, params: { replies: ['A quick thought.'] } })))
    .onConflictDoNothing();
}

/** Resident set size of a process, from /proc (Linux). */
function processRssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'));
  return Number(line?.match(/(\d+)/)?.[1] ?? Number.NaN) / 1024;
}

/** `workers/main.ts --queue mindloop` as its own node process, attached to the bench stack. */
async function idleWorkerProcess(stack: Stack): Promise<ChildProcess> {
  const { path } = await writeWorkflowBundle(join(tmpdir(), `mindloop-bench-bundle-${process.pid}.js`));
  const child = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts', '--queue', 'mindloop', '--no-schedules'], {
    cwd: join(import.meta.dirname, '..'),
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: stack.temporal.address,
      DATABASE_URL: stack.database.url,
      // PGlite's socket serves one connection per process safely.
      DATABASE_POOL_MAX: '1',
      MINDLOOP_WORKFLOW_BUNDLE: path,
      LOG_LEVEL: 'WARN',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('worker polling')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`idle worker exited with ${code}: ${out}`)));
  });
  return child;
}

export async function measureTicks(stack: Stack, toolsDir: string): Promise<Record<string, number>> {
  const activities = createActivities({ db: stack.db.db, llm: { env: {}, toolsDir } });
  return withBenchWorker(stack, { taskQueue: 'bench-tick', activities, maxCachedWorkflows: 1000 }, async (client) => {
    const start = (id: string, args: Parameters<typeof agentLoopWorkflow>[0]) =>
      client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', { taskQueue: 'bench-tick', workflowId: `agent/${id}`, args: [args] });
    // 1 agent, 200 ticks back to back.
    await seed(stack, ['solo']);
    // The loop's own cost: reflexes off (they are measured against it in measureReflexOverhead).
    await (await start('solo', { agentId: 'solo', maxTicks: 200, reflexes: false, settings: { delayMs: 0 } })).result();
    const rows = await stack.db.db
      .select({ tick: llmRecentResponses.tick, at: llmRecentResponses.createdAt })
      .from(llmRecentResponses)
      .where(eq(llmRecentResponses.agentId, 'solo'))
      .orderBy(asc(llmRecentResponses.tick));
    const gaps = rows.slice(21).map((r, i) => r.at.getTime() - rows[i + 20]!.at.getTime()); // skip warm-up
    const solo = summarize(gaps);

    // 50 agents at once, 20 ticks each.
    const many = Array.from({ length: 50 }, (_, i) => `many${i}`);
    await seed(stack, many);
    const t0 = performance.now();
    await Promise.all((await Promise.all(many.map((id) => start(id, { agentId: id, maxTicks: 20, reflexes: false, settings: { delayMs: 0 } })))).map((h) => h.result()));
    const seconds = (performance.now() - t0) / 1000;
    const [{ n } = { n: 0 }] = await stack.db.db
      .select({ n: sql<number>`count(*)::int` })
      .from(llmRecentResponses)
      .where(and(sql`${llmRecentResponses.agentId} like 'many%'`));

    // 500 agents idle after their first tick, on a worker process of their own (the
    // product's `npm run worker -- --queue mindloop`), so its RSS is the worker's alone: in
    // this process PGlite's WASM heap (~700 MB) would be counted too.
    const idle = Array.from({ length: 500 }, (_, i) => `idle${i}`);
    await seed(stack, idle);
    const idleWorker = await idleWorkerProcess(stack);
    let rssMb: number;
    try {
      const handles = await Promise.all(
        idle.map((id) =>
          client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
            taskQueue: 'mindloop',
            workflowId: `agent/${id}`,
            args: [{ agentId: id, settings: { idle: { on: true, wakeOn: ['note'], timeoutMs: 3_600_000 } } }],
          }),
        ),
      );
      for (const h of handles) {
        while ((await h.query<AgentStatus>('status')).tick < 1) await new Promise((r) => setTimeout(r, 100));
      }
      rssMb = processRssMb(idleWorker.pid!);
      await Promise.all(handles.map((h) => h.terminate('benchmark done')));
    } finally {
      idleWorker.kill('SIGKILL');
    }
    return {
      overhead_p50_ms: solo.p50,
      overhead_p99_ms: solo.p99,
      ticks_per_s_50_agents: n / seconds,
      rss_mb_500_idle_agents: rssMb,
    };
  });
}

/** One kind of tick an alternating measurement compares: its agents' loop input and what is set before each of its blocks. */
interface TickKind {
  reflexes: boolean;
  validators?: boolean;
  lifeforce?: { capacity: number | null };
  /** Run before each block of this kind (flip a switch). */
  before?: () => void;
}

/**
 * Tick gaps of several kinds of agent, measured in alternating blocks of one run (so the machine's
 * drift hits every kind alike): for each block and kind, a fresh agent runs `perBlock` ticks.
 */
async function measureAlternating(stack: Stack, toolsDir: string, taskQueue: string, kinds: Record<string, TickKind>, opts: { blocks: number; perBlock: number; ledger?: LedgerSwitch }): Promise<Record<string, number[]>> {
  const db = stack.db.db;
  const ids = Array.from({ length: opts.blocks }, (_, b) => Object.keys(kinds).map((k) => `${k}-${b}`)).flat();
  const kindOf = (agentId: string) => kinds[agentId.slice(0, agentId.lastIndexOf('-'))]!;
  await db.insert(agents).values(ids.map((id) => ({ id, name: id }))).onConflictDoNothing();
  const rows = await db
    .insert(llmRegistry)
    .values(
      ids.flatMap((agentId) => [
        { agentId, name: 'mind', provider: 'scripted' as const, model: 'instant', role: 'agent' as const, priority: 1 },
        ...(kindOf(agentId).validators
          ? ['v1', 'v2', 'v3'].map((name) => ({ agentId, name, provider: 'scripted' as const, model: name, role: 'validator' as const, validator: true, priority: 10 }))
          : []),
      ]),
    )
    .returning({ id: llmRegistry.id, role: llmRegistry.role });
  const validatorIds = new Set(rows.filter((r) => r.role === 'validator').map((r) => r.id));
  const activities = createActivities({
    db,
    ...(opts.ledger ? { lifeforce: opts.ledger } : {}),
    llm: {
      env: {},
      toolsDir,
      scriptedReply: ({ messages, callIndex, registryId }) => {
        if (registryId !== undefined && validatorIds.has(registryId)) return '+2 -- fine';
        const text = messages.map((m) => m.content).join('\n');
        if (text.includes('Name the emotions')) return 'curiosity:3 (bench)';
        if (text.includes('PREVIOUS replies')) return '{"novelty": 60, "new": ["x"], "tags": ["bench"]}';
        return `Thought ${callIndex}: ${['river', 'orbit', 'quartz', 'meadow', 'cipher', 'ember'][callIndex % 6]} ${callIndex * 7}.`;
      },
    },
  });
  const gapsOf = async (agentId: string) => {
    const r = await db
      .select({ tick: llmRecentResponses.tick, at: llmRecentResponses.createdAt })
      .from(llmRecentResponses)
      .where(eq(llmRecentResponses.agentId, agentId))
      .orderBy(asc(llmRecentResponses.tick));
    return r.slice(6).map((x, i) => x.at.getTime() - r[i + 5]!.at.getTime()); // skip each block's warm-up
  };
  const gaps: Record<string, number[]> = Object.fromEntries(Object.keys(kinds).map((k) => [k, []]));
  await withBenchWorker(stack, { taskQueue, activities }, async (client) => {
    for (let b = 0; b < opts.blocks; b++) {
      for (const [name, kind] of Object.entries(kinds)) {
        const agentId = `${name}-${b}`;
        kind.before?.();
        const h = await client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
          taskQueue,
          workflowId: `agent/${agentId}`,
          args: [{ agentId, maxTicks: opts.perBlock, reflexes: kind.reflexes, settings: { delayMs: 0 }, ...(kind.lifeforce ? { lifeforce: kind.lifeforce } : {}) }],
        });
        await h.result();
        gaps[name]!.push(...(await gapsOf(agentId)));
      }
    }
  });
  return gaps;
}

/** The tick with the reflexes on (3 scripted validators) against the bare tick, alternating blocks of one run. */
export async function measureReflexOverhead(stack: Stack, toolsDir: string, opts: { blocks?: number; ticksPerBlock?: number } = {}): Promise<Record<string, number>> {
  const gaps = await measureAlternating(stack, toolsDir, 'bench-reflexes', { bare: { reflexes: false }, reflexive: { reflexes: true, validators: true } }, { blocks: opts.blocks ?? 4, perBlock: opts.ticksPerBlock ?? 60 });
  const bare = summarize(gaps.bare!);
  const reflexive = summarize(gaps.reflexive!);
  return {
    bare_overhead_p50_ms: bare.p50,
    bare_overhead_p99_ms: bare.p99,
    reflex_overhead_p50_ms: reflexive.p50,
    reflex_overhead_p99_ms: reflexive.p99,
    reflex_overhead_ratio: reflexive.p50 / bare.p50,
    reflex_overhead_p99_ratio: reflexive.p99 / bare.p99,
  };
}

/**
 * What the lifeforce ledger adds to a tick: the bare tick with every LLM call reserved and settled
 * (a limited budget, so the whole check runs) against the same tick with the ledger switched off,
 * alternating blocks of one run.
 */
export async function measureLedgerOverhead(stack: Stack, toolsDir: string, opts: { blocks?: number; ticksPerBlock?: number } = {}): Promise<Record<string, number>> {
  const ledger: LedgerSwitch = { enabled: true, prices: defaultPrices };
  const gaps = await measureAlternating(
    stack,
    toolsDir,
    'bench-ledger',
    {
      'ledger-off': { reflexes: false, before: () => (ledger.enabled = false) },
      'ledger-on': { reflexes: false, lifeforce: { capacity: 1e9 }, before: () => (ledger.enabled = true) },
    },
    { blocks: opts.blocks ?? 4, perBlock: opts.ticksPerBlock ?? 60, ledger },
  );
  const off = summarize(gaps['ledger-off']!);
  const on = summarize(gaps['ledger-on']!);
  return {
    ledger_off_p50_ms: off.p50,
    ledger_on_p50_ms: on.p50,
    ledger_overhead_p50_ms: on.p50 - off.p50,
    ledger_overhead_p99_ms: on.p99 - off.p99,
  };
}
