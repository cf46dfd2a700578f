/**
 * tick: the agent loop's own cost with an instant scripted model, on the embedded stack.
 * - overhead per tick for 1 agent (delay 0): wall time between consecutive recorded ticks;
 * - aggregate ticks/s with 50 agents looping at once;
 * - worker RSS with 500, then 2 000 agent workflows open and idle;
 * each also as a ratio to the no-op activity round trip measured in the same run.
 * - agents at the 1 s heartbeat (measureAt1Hz): on the real Postgres, how many agents one worker
 *   keeps at a 1 s pace with the p99 lag within bounds.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { and, asc, eq, sql } from 'drizzle-orm';
import { createActivities } from '../activities/index.js';
import type { LedgerSwitch } from '../activities/llm/index.js';
import { defaultPrices } from '../core/lifeforce.js';
import { agents, llmRecentResponses, llmRegistry } from '../db/schema/index.js';
import type { Stack } from '../runtime/stack.js';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import type { agentLoopWorkflow } from '../workflows/agent-loop/index.js';
import { benchBundle, benchStack, scratchDatabase, summarize, withBenchWorker } from './lib.js';
import { measureBaseline, withBaselineWorker } from './temporal-baseline.js';
import { measureTickCost, seedInstantAgents, tickCostMetrics, tickCostSizes, tickCostTable } from './tick-cost.js';
import { workflowFailover } from '../workflows/lib/activity-options.js';
import { allocatorEnv } from '../scripts/allocator.mjs';
import { workflowThreadFlags } from '../scripts/workflow-threads.mjs';

/** Resident set size of a process, from /proc (Linux). */
function processRssMb(pid: number, field: 'VmRSS' | 'RssAnon' | 'RssFile' = 'VmRSS'): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${field}:`));
  return Number(line?.match(/(\d+)/)?.[1] ?? Number.NaN) / 1024;
}

/**
 * `workers/main.ts --queue mindloop` as its own node process, run as `npm run worker` runs it
 * (from its build, scripts/worker.mjs, on the worker's allocator and node flags), attached to the bench stack;
 * resolves once it polls. `nodeFlags` go before the script (flags, a preload), `env` beside the stack's.
 */
export async function workerProcess(
  stack: Stack,
  o: { nodeFlags?: string[]; env?: Record<string, string>; stderr?: 'inherit' | 'pipe' } = {},
): Promise<ChildProcess> {
  const path = join(tmpdir(), `mindloop-bench-bundle-${process.pid}.js`);
  writeFileSync(path, (await benchBundle()).code);
  const child = spawn(
    process.execPath,
    [
      ...workflowThreadFlags,
      ...(o.nodeFlags ?? []),
      'scripts/worker.mjs',
      'worker',
      '--queue',
      'mindloop',
      '--no-schedules',
    ],
    {
      cwd: join(import.meta.dirname, '..'),
      env: {
        ...process.env,
        TEMPORAL_ADDRESS: stack.temporal.address,
        DATABASE_URL: stack.database.url,
        MINDLOOP_WORKFLOW_BUNDLE: path,
        LOG_LEVEL: 'WARN',
        ...allocatorEnv(),
        ...o.env,
      },
      stdio: ['ignore', 'pipe', o.stderr ?? 'inherit'],
    },
  );
  await new Promise<void>((resolve, reject) => {
    let out = '';
    let err = '';
    const onErr = (d: Buffer) => (err = (err + d.toString()).slice(-4000));
    const onData = (d: Buffer) => {
      out += d.toString();
      if (!out.includes('worker polling')) return;
      child.stdout!.off('data', onData);
      child.stderr?.off('data', onErr);
      child.off('exit', onExit);
      resolve();
    };
    const onExit = (code: number | null) => reject(new Error(`worker process exited with ${code}: ${out}${err}`));
    child.stdout!.on('data', onData);
    child.stderr?.on('data', onErr);
    child.once('exit', onExit);
  });
  return child;
}

/** Until `total` idle agents have each recorded their first tick (then they wait for a note). */
async function waitIdle(stack: Stack, total: number): Promise<void> {
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    const [{ n } = { n: 0 }] = await stack.db.db
      .select({ n: sql<number>`count(distinct ${llmRecentResponses.agentId})::int` })
      .from(llmRecentResponses)
      .where(sql`${llmRecentResponses.agentId} like 'idle%'`);
    if (n >= total) break;
    if (Date.now() > deadline) throw new Error(`only ${n} of ${total} idle agents ticked within 10 min`);
    await new Promise((r) => setTimeout(r, 500));
  }
  await new Promise((r) => setTimeout(r, 2000)); // their idle wait begins
}

/** One agent's ticks back to back (the first `warmup` not counted), then `agents` at once for `agentTicks` each. */
export interface TickLoad {
  soloTicks: number;
  warmup: number;
  agents: number;
  agentTicks: number;
}

/**
 * The tick benchmark's sizes. `smoke`: the smallest that go through every part (its idle tiers
 * start a fiftieth of the agents, and keep the full run's keys).
 */
export const tickSizes = {
  full: {
    baseline: { activities: 300, workflows: 50 },
    ticks: { soloTicks: 200, warmup: 20, agents: 50, agentTicks: 20 } satisfies TickLoad,
    alternating: { blocks: 4, ticksPerBlock: 60 },
    idle: { totals: [500, 2000], divisor: 1 },
    hz: {
      ladder: [10, 25, 50, 75, 100, 150, 200, 300, 500, 700, 1000],
      // From 25: on a slower machine the floor may hold fewer than 100 (the ratio needs a rung it held).
      floorLadder: [25, 50, 75, 100, 150, 200, 250, 300, 400, 500, 700, 1000],
      ticks: 12,
    },
  },
  smoke: {
    baseline: { activities: 20, workflows: 5 },
    ticks: { soloTicks: 12, warmup: 4, agents: 5, agentTicks: 4 } satisfies TickLoad,
    alternating: { blocks: 1, ticksPerBlock: 10 },
    idle: { totals: [500, 2000], divisor: 50 },
    hz: { ladder: [2], floorLadder: [2], ticks: 4 },
  },
};

/**
 * One agent's tick overhead and 50 agents' ticks/s on `stack`; then, with `breakdown` (default:
 * on the embedded PGlite; measureTicksOnPostgres measures its own), where a paced tick's cost
 * goes there (measureCostBreakdown; keys without a suffix).
 */
export async function measureTicks(
  stack: Stack,
  toolsDir: string,
  load: TickLoad = tickSizes.full.ticks,
  o: { breakdown?: boolean } = {},
): Promise<Record<string, number>> {
  const activities = createActivities({ db: stack.db.db, llm: { env: {}, toolsDir } });
  const figures = await withBenchWorker(
    stack,
    { taskQueue: 'bench-tick', activities, maxCachedWorkflows: 1000 },
    async (client) => {
      const start = (id: string, args: Parameters<typeof agentLoopWorkflow>[0]) =>
        client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
          ...workflowFailover,
          taskQueue: 'bench-tick',
          workflowId: `agent/${id}`,
          args: [args],
        });
      // 1 agent, ticks back to back.
      await seedInstantAgents(stack, ['solo']);
      // The loop's own cost: reflexes off (they are measured against it in measureReflexOverhead).
      await (
        await start('solo', { agentId: 'solo', maxTicks: load.soloTicks, reflexes: false, settings: { delayMs: 0 } })
      ).result();
      const rows = await stack.db.db
        .select({ tick: llmRecentResponses.tick, at: llmRecentResponses.createdAt })
        .from(llmRecentResponses)
        .where(eq(llmRecentResponses.agentId, 'solo'))
        .orderBy(asc(llmRecentResponses.tick));
      const gaps = rows.slice(load.warmup + 1).map((r, i) => r.at.getTime() - rows[i + load.warmup]!.at.getTime());
      const solo = summarize(gaps);

      // Many agents at once.
      const many = Array.from({ length: load.agents }, (_, i) => `many${i}`);
      await seedInstantAgents(stack, many);
      const t0 = performance.now();
      await Promise.all(
        (
          await Promise.all(
            many.map((id) =>
              start(id, { agentId: id, maxTicks: load.agentTicks, reflexes: false, settings: { delayMs: 0 } }),
            ),
          )
        ).map((h) => h.result()),
      );
      const seconds = (performance.now() - t0) / 1000;
      const [{ n } = { n: 0 }] = await stack.db.db
        .select({ n: sql<number>`count(*)::int` })
        .from(llmRecentResponses)
        .where(and(sql`${llmRecentResponses.agentId} like 'many%'`));

      return {
        overhead_p50_ms: solo.p50,
        overhead_p99_ms: solo.p99,
        ticks_per_s_50_agents: n / seconds,
      };
    },
  );
  if (!(o.breakdown ?? !!stack.database.embedded)) return figures;
  const title = stack.database.embedded ? 'embedded PGlite' : 'Postgres';
  return {
    ...figures,
    ...(await measureCostBreakdown(stack, toolsDir, { suffix: '', title, smoke: load === tickSizes.smoke.ticks })),
  };
}

/**
 * Where a paced tick's cost goes on `stack`, beside the floor's step (bench/tick-cost.ts), printed
 * as a table; its keys end in `suffix`. `smoke`: two agents, a few ticks.
 */
export async function measureCostBreakdown(
  stack: Stack,
  toolsDir: string,
  o: { suffix: string; title: string; smoke?: boolean },
): Promise<Record<string, number>> {
  const sizes = o.smoke ? tickCostSizes.smoke : tickCostSizes.full;
  const bare = await measureTickCost(stack, toolsDir, { ...sizes, label: `cost${o.suffix.replace(/_/g, '-')}` });
  process.stdout.write(`${tickCostTable(bare, `${o.title}, reflexes off`)}\n`);
  const reflexive = await measureTickCost(stack, toolsDir, {
    ...sizes,
    reflexes: true,
    label: `costr${o.suffix.replace(/_/g, '-')}`,
  });
  process.stdout.write(`${tickCostTable(reflexive, `${o.title}, reflexes on`)}\n`);
  return {
    ...tickCostMetrics(bare, o.suffix),
    ...Object.fromEntries(Object.entries(tickCostMetrics(reflexive, o.suffix)).map(([k, v]) => [`reflex_${k}`, v])),
  };
}

/**
 * measureTicks on the real Postgres (a scratch database and a stack of their own), with the
 * no-op activity round trip of that stack's dev server: the keys end in `_pg`.
 */
export async function measureTicksOnPostgres(
  toolsDir: string,
  sizes: Pick<typeof tickSizes.full, 'baseline' | 'ticks'> = tickSizes.full,
): Promise<Record<string, number>> {
  const scratch = await scratchDatabase('mindloop_bench_ticks');
  const { stack, stop } = await benchStack({ databaseUrl: scratch.url });
  try {
    const base = await measureBaseline(stack, sizes.baseline);
    const t = await measureTicks(stack, toolsDir, sizes.ticks, { breakdown: false });
    const cost = await measureCostBreakdown(stack, toolsDir, {
      suffix: '_pg',
      title: 'real Postgres',
      smoke: sizes.ticks === tickSizes.smoke.ticks,
    });
    return {
      ...cost,
      overhead_p50_ms_pg: t.overhead_p50_ms!,
      overhead_p99_ms_pg: t.overhead_p99_ms!,
      ticks_per_s_50_agents_pg: t.ticks_per_s_50_agents!,
      activity_rt_p50_ms_pg: base.activity_rt_p50_ms,
      overhead_p50_ratio_to_activity_rt_pg: t.overhead_p50_ms! / base.activity_rt_p50_ms,
    };
  } finally {
    await stop();
    await scratch.drop();
  }
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
async function measureAlternating(
  stack: Stack,
  toolsDir: string,
  taskQueue: string,
  kinds: Record<string, TickKind>,
  opts: { blocks: number; perBlock: number; ledger?: LedgerSwitch },
): Promise<Record<string, number[]>> {
  const db = stack.db.db;
  const ids = Array.from({ length: opts.blocks }, (_, b) => Object.keys(kinds).map((k) => `${k}-${b}`)).flat();
  const kindOf = (agentId: string) => kinds[agentId.slice(0, agentId.lastIndexOf('-'))]!;
  await db
    .insert(agents)
    .values(ids.map((id) => ({ id, name: id })))
    .onConflictDoNothing();
  const rows = await db
    .insert(llmRegistry)
    .values(
      ids.flatMap((agentId) => [
        { agentId, name: 'mind', provider: 'scripted' as const, model: 'instant', role: 'agent' as const, priority: 1 },
        ...(kindOf(agentId).validators
          ? ['v1', 'v2', 'v3'].map((name) => ({
              agentId,
              name,
              provider: 'scripted' as const,
              model: name,
              role: 'validator' as const,
              validator: true,
              priority: 10,
            }))
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
          ...workflowFailover,
          taskQueue,
          workflowId: `agent/${agentId}`,
          args: [
            {
              agentId,
              maxTicks: opts.perBlock,
              reflexes: kind.reflexes,
              settings: { delayMs: 0 },
              ...(kind.lifeforce ? { lifeforce: kind.lifeforce } : {}),
            },
          ],
        });
        await h.result();
        gaps[name]!.push(...(await gapsOf(agentId)));
      }
    }
  });
  return gaps;
}

/** The tick with the reflexes on (3 scripted validators) against the bare tick, alternating blocks of one run. */
export async function measureReflexOverhead(
  stack: Stack,
  toolsDir: string,
  opts: { blocks?: number; ticksPerBlock?: number } = {},
): Promise<Record<string, number>> {
  const gaps = await measureAlternating(
    stack,
    toolsDir,
    'bench-reflexes',
    { bare: { reflexes: false }, reflexive: { reflexes: true, validators: true } },
    { blocks: opts.blocks ?? 4, perBlock: opts.ticksPerBlock ?? 60 },
  );
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
export async function measureLedgerOverhead(
  stack: Stack,
  toolsDir: string,
  opts: { blocks?: number; ticksPerBlock?: number } = {},
): Promise<Record<string, number>> {
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

/**
 * Worker memory with 500, then 2 000 agents (or `totals`) idle after their first tick, on a worker process of
 * their own (the product's `npm run worker -- --queue mindloop`), so its RSS is the worker's
 * alone. On the real Postgres (a scratch database): the embedded PGlite serves one connection per
 * process, which makes starting 2 000 agents take many minutes; the database is not what is
 * measured. Then a note wakes the first agent (long out of the worker's cache, so replayed from
 * its history) and the last (still cached): how long until its next tick is recorded.
 * `divisor`: each tier starts total / divisor agents and keeps the tier's key (a smoke run).
 */
export async function measureIdle(
  opts: { totals?: readonly number[]; divisor?: number } = {},
): Promise<Record<string, number>> {
  const tiers = opts.totals ?? tickSizes.full.idle.totals;
  const totals = tiers.map((t) => Math.max(1, Math.round(t / (opts.divisor ?? 1))));
  const scratch = await scratchDatabase('mindloop_bench_idle');
  const { stack, stop } = await benchStack({ databaseUrl: scratch.url });
  try {
    const client = new Client({
      connection: await Connection.connect(stack.temporal.connection),
      namespace: stack.temporal.namespace,
    });
    try {
      const idleWorker = await workerProcess(stack);
      const rss: Record<number, number> = {};
      const wake: Record<'evicted' | 'cached', number> = { evicted: Number.NaN, cached: Number.NaN };
      try {
        const handles: WorkflowHandle[] = [];
        for (const total of totals) {
          const idle = Array.from({ length: total - handles.length }, (_, i) => `idle${handles.length + i}`);
          await seedInstantAgents(stack, idle);
          for (let i = 0; i < idle.length; i += 100) {
            handles.push(
              ...(await Promise.all(
                idle.slice(i, i + 100).map((id) =>
                  client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
                    ...workflowFailover,
                    taskQueue: 'mindloop',
                    workflowId: `agent/${id}`,
                    args: [{ agentId: id, settings: { idle: { on: true, wakeOn: ['note'], timeoutMs: 3_600_000 } } }],
                  }),
                ),
              )),
            );
          }
          await waitIdle(stack, total);
          rss[total] = processRssMb(idleWorker.pid!);
          process.stdout.write(
            `  ${total} idle agents: worker RSS ${rss[total]!.toFixed(0)} MB (anonymous ${processRssMb(idleWorker.pid!, 'RssAnon').toFixed(0)}, files ${processRssMb(idleWorker.pid!, 'RssFile').toFixed(0)})\n`,
          );
        }
        // A note wakes the first agent (long out of the worker's cache, so replayed from its
        // history) and the last (still cached): how long until its next tick is recorded.
        for (const [key, h] of [
          ['evicted', handles[0]!],
          ['cached', handles.at(-1)!],
        ] as const) {
          const agentId = h.workflowId.slice('agent/'.length);
          const t0 = performance.now();
          await h.executeUpdate('addNote', { args: [{ text: 'wake up' }] });
          for (;;) {
            const [row] = await stack.db.db
              .select({ tick: llmRecentResponses.tick })
              .from(llmRecentResponses)
              .where(and(eq(llmRecentResponses.agentId, agentId), eq(llmRecentResponses.tick, 2)));
            if (row) break;
            if (performance.now() - t0 > 60_000) throw new Error(`${agentId} did not wake within 60 s`);
            await new Promise((r) => setTimeout(r, 5));
          }
          wake[key] = performance.now() - t0;
        }
        for (let i = 0; i < handles.length; i += 200)
          await Promise.all(handles.slice(i, i + 200).map((h) => h.terminate('benchmark done')));
      } finally {
        idleWorker.kill('SIGKILL');
      }
      return {
        ...Object.fromEntries(totals.map((t, i) => [`rss_mb_${tiers[i]}_idle_agents`, rss[t]!])),
        idle_wake_evicted_ms: wake.evicted,
        idle_wake_cached_ms: wake.cached,
      };
    } finally {
      await client.connection.close();
    }
  } finally {
    await stop();
    await scratch.drop();
  }
}

/** The most lag a tick at the 1 s heartbeat may have (p99) for the agents to count as held. */
export const maxLagMs = 250;
const heartbeatMs = 1000;

export interface HzRound {
  agents: number;
  lagP50: number;
  lagP99: number;
  ticksPerS: number;
}

/**
 * Rounds of N loops at the 1 s pace, N up the ladder while the p99 lag stays within `maxLagMs`.
 * `run(n, r, start)` starts round r's N loops through `start` (one pace spreads them: a fleet's
 * loops run out of step, each started at its own time; started at once they would stay in step
 * and each step would queue behind its burst), waits for them, and gives their lags and steps.
 */
async function climb(
  ladder: number[],
  label: string,
  run: (
    n: number,
    r: number,
    start: <H>(ids: string[], go: (id: string) => Promise<H>) => Promise<H[]>,
  ) => Promise<{ lags: number[]; steps: number }>,
): Promise<HzRound[]> {
  const rounds: HzRound[] = [];
  for (const [r, n] of ladder.entries()) {
    const t0 = performance.now();
    const staggered = async <H>(ids: string[], go: (id: string) => Promise<H>): Promise<H[]> => {
      const started: Array<Promise<H>> = [];
      for (const [i, id] of ids.entries()) {
        const wait = t0 + (i * heartbeatMs) / ids.length - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        started.push(go(id));
      }
      return Promise.all(started);
    };
    const { lags, steps } = await run(n, r, staggered);
    const seconds = (performance.now() - t0) / 1000;
    const lag = summarize(lags);
    rounds.push({ agents: n, lagP50: lag.p50, lagP99: lag.p99, ticksPerS: steps / seconds });
    process.stdout.write(
      `  ${n} ${label} at 1 Hz: lag p50 ${lag.p50.toFixed(0)} ms, p99 ${lag.p99.toFixed(0)} ms, ${(steps / seconds).toFixed(0)} steps/s\n`,
    );
    if (lag.p99 > maxLagMs) break;
  }
  return rounds;
}

/** The last round within the bound, and the first past it. */
function heldOf(rounds: HzRound[]): { held?: HzRound; over?: HzRound } {
  return { held: rounds.filter((x) => x.lagP99 <= maxLagMs).at(-1), over: rounds.find((x) => x.lagP99 > maxLagMs) };
}

const eventMs = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
  Number(t?.seconds ?? 0) * 1000 + Math.round((t?.nanos ?? 0) / 1e6);

/**
 * The floor under `agents_at_1hz`: bare workflows on the same dev server, each step a no-op
 * local activity then a 1 s timer (a paced tick with a local think, minus the tick). A step's
 * lag is, from the workflow's history, how much later than 1 s after its timer started its
 * workflow task completed; from its second step.
 */
async function measureFloorAt1Hz(stack: Stack, ladder: number[], steps: number): Promise<HzRound[]> {
  return withBaselineWorker(
    stack,
    (client, taskQueue) =>
      climb(ladder, 'bare workflows', async (n, r, start) => {
        const handles = await start(
          Array.from({ length: n }, (_, i) => `floor-${r}-${i}-${Date.now()}`),
          (workflowId) =>
            client.workflow.start('pacedLocalWorkflow', { taskQueue, workflowId, args: [steps, heartbeatMs] }),
        );
        for (let i = 0; i < handles.length; i += 200)
          await Promise.all(handles.slice(i, i + 200).map((h) => h.result()));
        const lags: number[] = [];
        for (const h of handles) {
          let timerStarted = 0;
          let nth = 0;
          for (const e of (await h.fetchHistory()).events ?? []) {
            if (e.timerStartedEventAttributes) timerStarted = eventMs(e.eventTime);
            else if (e.workflowTaskCompletedEventAttributes && timerStarted) {
              if (nth++ >= 1) lags.push(Math.max(0, eventMs(e.eventTime) - timerStarted - heartbeatMs));
              timerStarted = 0;
            }
          }
        }
        return { lags, steps: n * steps };
      }),
    { maxCachedWorkflows: 2000 },
  );
}

/**
 * Agents at the seed's 1 s heartbeat, on the real Postgres (a scratch database, bench/lib.ts `scratchDatabase`) and the dev server, one worker
 * with the product's defaults: rounds of N agents, each pacing its ticks 1 s apart (the loop's
 * `delayMs`, after the tick ends) for `ticks` ticks; a tick's lag is how much later than 1 s
 * after the previous one it was recorded (so it includes the tick's own time). N grows while the
 * p99 lag stays within `maxLagMs`; `agents_at_1hz` is the last N that did. Then, on the same dev
 * server, the floor (measureFloorAt1Hz): `floor_workflows_at_1hz`.
 */
export async function measureAt1Hz(
  toolsDir: string,
  o: { ladder?: number[]; floorLadder?: number[]; ticks?: number } = {},
): Promise<{ metrics: Record<string, number>; rounds: HzRound[]; floor: HzRound[] }> {
  const ladder = o.ladder ?? tickSizes.full.hz.ladder;
  const floorLadder = o.floorLadder ?? tickSizes.full.hz.floorLadder;
  const ticks = o.ticks ?? tickSizes.full.hz.ticks;
  const scratch = await scratchDatabase('mindloop_bench_1hz');
  const { stack, stop } = await benchStack({ databaseUrl: scratch.url });
  let rounds: HzRound[] = [];
  let floor: HzRound[] = [];
  try {
    const db = stack.db.db;
    const activities = createActivities({ db, llm: { env: {}, toolsDir } });
    rounds = await withBenchWorker(stack, { taskQueue: 'bench-1hz', activities }, (client) =>
      climb(ladder, 'agents', async (n, r, start) => {
        const ids = Array.from({ length: n }, (_, i) => `hz${r}-${i}`);
        await seedInstantAgents(stack, ids);
        const handles = await start(ids, (id) =>
          client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
            ...workflowFailover,
            taskQueue: 'bench-1hz',
            workflowId: `agent/${id}`,
            args: [{ agentId: id, maxTicks: ticks, reflexes: false, settings: { delayMs: heartbeatMs } }],
          }),
        );
        for (let i = 0; i < handles.length; i += 200)
          await Promise.all(handles.slice(i, i + 200).map((h) => h.result()));
        const rows = await db
          .select({ agentId: llmRecentResponses.agentId, at: llmRecentResponses.createdAt })
          .from(llmRecentResponses)
          .where(sql`${llmRecentResponses.agentId} like ${`hz${r}-%`}`)
          .orderBy(asc(llmRecentResponses.agentId), asc(llmRecentResponses.tick));
        const lags: number[] = [];
        // Each agent's first ticks start together; the pace shows from its third.
        for (let i = 1, nth = 0; i < rows.length; i++) {
          const [prev, cur] = [rows[i - 1]!, rows[i]!];
          nth = prev.agentId === cur.agentId ? nth + 1 : 0;
          if (nth >= 2) lags.push(Math.max(0, cur.at.getTime() - prev.at.getTime() - heartbeatMs));
        }
        return { lags, steps: rows.length };
      }),
    );
    floor = await measureFloorAt1Hz(stack, floorLadder, ticks);
  } finally {
    await stop();
    await scratch.drop();
  }
  const agents = heldOf(rounds);
  const bare = heldOf(floor);
  return {
    metrics: {
      agents_at_1hz: agents.held?.agents ?? 0,
      lag_p50_ms_at_1hz: agents.held?.lagP50 ?? Number.NaN,
      lag_p99_ms_at_1hz: agents.held?.lagP99 ?? Number.NaN,
      ...(agents.over ? { agents_over_1hz_bound: agents.over.agents, lag_p99_ms_over_bound: agents.over.lagP99 } : {}),
      floor_workflows_at_1hz: bare.held?.agents ?? 0,
      ...(bare.over
        ? { floor_workflows_over_1hz_bound: bare.over.agents, floor_lag_p99_ms_over_bound: bare.over.lagP99 }
        : {}),
      agents_at_1hz_ratio_to_floor: (agents.held?.agents ?? 0) / (bare.held?.agents ?? Number.NaN),
    },
    rounds,
    floor,
  };
}
