/**
 * `npm run bench -- nerves`: what a collision-nerve decision costs a nerve workflow in LF and wall
 * time when the LLM decides (deliberate), when learned rules decide what they cover (hybrid) and
 * when the reflex arc decides on the compiled table (reflex). The nerve workflow runs on a real
 * Temporal worker (the embedded dev server, a worker in this process on a bench queue, the
 * product's bundle) over a real Postgres (a fresh database on BENCH_DATABASE_URL /
 * TEST_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres).
 *
 * The model is scripted and instant and answers the ground truth, so the figures are the
 * runtime's own. The nerve learns from scratch in `auto`, in runs of a block's length, until
 * reflex has held for 100 decisions (its hybrid decisions are measured there: the gaps between
 * consecutive decisions of a run, read from the decisions' row times); then forced deliberate and
 * forced reflex runs alternate, each a block of decisions on the same stream per round: a
 * decision's time is the run's wall time (client start to result) over its decisions. LF per
 * decision is read from the ledger: everything settled on the agent's budgets during a mode's
 * runs (the state costs, the reflex arc's leases and the LLM calls the router charged), over
 * their number.
 *
 * Beside it, at the activity level (no Temporal): `nerveDecide` calls in deliberate and forced
 * reflex (the figures a decision paid before the reflex arc, `activity_*`), one ledger reserve and
 * its settle alone, and a few deliberate decisions of the real local model (SmolLM2-135M on the
 * CPU) when it is installed.
 */
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { and, asc, eq, gt, sql } from 'drizzle-orm';
import {
  createLlmRouter,
  defaultLocalModelName,
  disposeLocalModels,
  ensureDefaultRegistry,
  preloadLocalModel,
  type LlmRouter,
} from '../activities/llm/index.js';
import { createNerveActivities, type NerveDecideResult } from '../activities/nerves.js';
import { workflowIds } from '../core/ids.js';
import { budgetIds, defaultPrices } from '../core/lifeforce.js';
import { collisionNerve } from '../core/nerves/collision.js';
import type { ModeSetting, NerveMode } from '../core/nerves/modes.js';
import type { Observation } from '../core/nerves/nerve.js';
import { observations } from '../core/nerves/scenario.js';
import { carveBudget, ensureBudget, reserve, settle } from '../db/queries/lifeforce.js';
import { agents, lifeforceLedger, llmRegistry, nerveDecisions, nerveRules } from '../db/schema/index.js';
import type { Db } from '../db/client.js';
import { resolveLocalModel } from '../runtime/tools.js';
import type { Stack } from '../runtime/stack.js';
import { collisionModel } from '../test/helpers/nerves.js';
import type { NerveStatus, nerveWorkflow } from '../workflows/nerve.js';
import { benchStack, scratchDatabase, summarize, withBenchWorker } from './lib.js';

const toolsDir = process.env.MINDLOOP_TOOLS_DIR ?? join(import.meta.dirname, '..', '.tools');

const targets = { cost: 0.6, latency: 0.8 };
const taskQueue = 'bench-nerves';
/** The benchmark's sizes; `smoke` the smallest that still learns, runs each mode and asks the local model once. */
export const nervesSizes = {
  full: {
    /** Decisions of one workflow block (one run, under its continue-as-new cap). */
    perBlock: 200,
    /** Blocks of each mode, alternating. */
    rounds: 5,
    /** The learning stops once reflex has held this long, or after this many runs. */
    reflexHeld: 100,
    maxLearningRuns: 30,
    /** Activity-level comparison: decisions per block, same rounds. */
    perActivityBlock: 100,
    warmup: 100,
    localWarmup: 2,
    localDecisions: 10,
  },
  smoke: {
    perBlock: 100,
    rounds: 1,
    reflexHeld: 20,
    maxLearningRuns: 2,
    perActivityBlock: 10,
    warmup: 10,
    localWarmup: 1,
    localDecisions: 1,
  },
};
type NerveSizes = typeof nervesSizes.full;

// ---- the nerve workflow --------------------------------------------------------------------------

interface WorkflowBlock {
  ms: number;
  decisions: number;
  lf: number;
  bad: number;
  llm: number;
  activities: number;
}

async function lastLedgerId(db: Db): Promise<number> {
  const [r] = await db.select({ id: sql<string | null>`max(${lifeforceLedger.id})` }).from(lifeforceLedger);
  return Number(r?.id ?? 0);
}

/** LF settled on the agent's budgets since ledger row `after`. */
async function settledSince(db: Db, agentId: string, after: number): Promise<number> {
  const [r] = await db
    .select({ total: sql<string>`coalesce(sum(${lifeforceLedger.amount}), 0)` })
    .from(lifeforceLedger)
    .where(
      and(eq(lifeforceLedger.agentId, agentId), eq(lifeforceLedger.kind, 'settle'), gt(lifeforceLedger.id, after)),
    );
  return Number(r?.total ?? 0);
}

/** An agent with a nerve budget (unlimited: the ledger still records every hold and charge) and the instant model. */
async function seedAgent(db: Db, agentId: string, model = true): Promise<void> {
  await db.insert(agents).values({ id: agentId, name: agentId });
  await ensureBudget(db, { id: budgetIds.agent(agentId), agentId, scope: 'agent', settings: { capacity: null } });
  await carveBudget(db, {
    parentId: budgetIds.agent(agentId),
    id: budgetIds.nerve(agentId, 'collision'),
    agentId,
    scope: 'nerve',
    amount: null,
  });
  if (model)
    await db.insert(llmRegistry).values({
      agentId,
      name: 'instant',
      provider: 'scripted',
      model: 'scripted-instant',
      role: 'agent',
      priority: 1,
    });
}

/** One run of the nerve workflow: its wall time from the client's start to its result, what it settled, and the activities it scheduled. */
async function runNerve(
  client: Client,
  db: Db,
  agentId: string,
  mode: ModeSetting,
  seed: number,
  steps: number,
): Promise<WorkflowBlock & { status: NerveStatus }> {
  const before = await lastLedgerId(db);
  const t0 = performance.now();
  const handle = await client.workflow.start<typeof nerveWorkflow>('nerveWorkflow', {
    taskQueue,
    workflowId: workflowIds.nerve(agentId, 'collision'),
    args: [{ agentId, nerve: 'collision', seed, steps, mode, stepsPerRun: steps }],
  });
  const status = await handle.result();
  const ms = performance.now() - t0;
  const history = await handle.fetchHistory();
  const activities = (history.events ?? []).filter((e) => e.activityTaskScheduledEventAttributes).length;
  return {
    ms,
    decisions: status.tally.decisions,
    lf: await settledSince(db, agentId, before),
    bad: status.tally.bad,
    llm: status.tally.byDecider.llm,
    activities,
    status,
  };
}

interface Learning {
  toHybrid: number;
  toReflex: number;
  hybrid: { gapsMs: number[]; decisions: number; llm: number; lf: number };
}

/** Whether reflex has held for `reflexHeld` decisions in a row: the index of the first of them, or -1. */
function reflexFrom(modes: NerveMode[], reflexHeld: number): number {
  let run = 0;
  for (let i = 0; i < modes.length; i++) {
    run = modes[i] === 'reflex' ? run + 1 : 0;
    if (run >= reflexHeld) return i - reflexHeld + 1;
  }
  return -1;
}

/**
 * The nerve learning from scratch in `auto`, in runs of `perBlock` readings (a seed of its own
 * each), until reflex holds. Its hybrid decisions: the wall time between consecutive decisions of
 * one run (row times, to the microsecond), and the LF the ledger settled for them (their state
 * holds and their LLM calls, found by the decisions' keys).
 */
async function learnToReflex(
  client: Client,
  db: Db,
  agentId: string,
  { maxLearningRuns, perBlock, reflexHeld }: NerveSizes,
): Promise<Learning> {
  let rows: Array<{ key: string; mode: NerveMode; decidedBy: string; atMs: number }> = [];
  for (let run = 0; run < maxLearningRuns; run++) {
    await runNerve(client, db, agentId, 'auto', 1000 + run, perBlock);
    rows = await db
      .select({
        key: nerveDecisions.idempotencyKey,
        mode: nerveDecisions.mode,
        decidedBy: nerveDecisions.decidedBy,
        atMs: sql<number>`extract(epoch from ${nerveDecisions.createdAt}) * 1000`,
      })
      .from(nerveDecisions)
      .where(eq(nerveDecisions.agentId, agentId))
      .orderBy(asc(nerveDecisions.id));
    if (
      reflexFrom(
        rows.map((r) => r.mode),
        reflexHeld,
      ) >= 0
    )
      break;
  }
  const held = reflexFrom(
    rows.map((r) => r.mode),
    reflexHeld,
  );
  const firstHybrid = rows.findIndex((r) => r.mode === 'hybrid');
  const runOf = (key: string) => key.slice(0, key.lastIndexOf('/'));
  const gapsMs = rows.flatMap((r, i) =>
    i > 0 && r.mode === 'hybrid' && rows[i - 1]!.mode === 'hybrid' && runOf(r.key) === runOf(rows[i - 1]!.key)
      ? [Number(r.atMs) - Number(rows[i - 1]!.atMs)]
      : [],
  );
  const hybridRows = rows.filter((r) => r.mode === 'hybrid');
  // The state's hold is the decision's ledger key; its LLM call's is `llm:<decision key>@<registry row>`.
  const lf = await db.execute<{ total: string }>(sql`
    select coalesce(sum(l.amount), 0) as total from lifeforce_ledger l join nerve_decisions d on l.reservation_key = d.ledger_key
    where l.kind = 'settle' and d.agent_id = ${agentId} and d.mode = 'hybrid'
    union all
    select coalesce(sum(l.amount), 0) from lifeforce_ledger l join nerve_decisions d on split_part(l.reservation_key, '@', 1) = 'llm:' || d.idempotency_key
    where l.kind = 'settle' and l.reservation_key like 'llm:%' and d.agent_id = ${agentId} and d.mode = 'hybrid'`);
  return {
    toHybrid: firstHybrid >= 0 ? firstHybrid + 1 : Number.NaN,
    toReflex: held >= 0 ? held : Number.NaN,
    hybrid: {
      gapsMs,
      decisions: hybridRows.length,
      llm: hybridRows.filter((r) => r.decidedBy === 'llm').length,
      lf: lf.rows.reduce((s, r) => s + Number(r.total), 0),
    },
  };
}

/**
 * The nerve workflow on the bench stack: a warm-up, the learning, then `rounds` of a forced
 * deliberate and a forced reflex block in turn, the same seed within a round.
 */
async function measureWorkflows(
  stack: Stack,
  router: LlmRouter,
  z: NerveSizes,
): Promise<{ learning: Learning; deliberate: WorkflowBlock[]; reflex: WorkflowBlock[]; rules: number }> {
  const db = stack.db.db;
  const activities = createNerveActivities({ db, llm: router, prices: defaultPrices });
  return withBenchWorker(stack, { taskQueue, activities }, async (client) => {
    // The JIT, the pools and the worker's workflow cache warm, on an agent of its own.
    await seedAgent(db, 'bench-warm');
    for (const mode of ['deliberate', 'reflex'] as const) await runNerve(client, db, 'bench-warm', mode, 7, z.warmup);
    await seedAgent(db, 'bench-nerve');
    const learning = await learnToReflex(client, db, 'bench-nerve', z);
    const blocks = { deliberate: [] as WorkflowBlock[], reflex: [] as WorkflowBlock[] };
    for (let r = 0; r < z.rounds; r++)
      for (const mode of ['deliberate', 'reflex'] as const)
        blocks[mode].push(await runNerve(client, db, 'bench-nerve', mode, 2026 + r, z.perBlock));
    const rules = await db.$count(
      nerveRules,
      and(eq(nerveRules.agentId, 'bench-nerve'), sql`${nerveRules.action} is not null`),
    );
    return { learning, ...blocks, rules };
  });
}

// ---- the activity level ------------------------------------------------------------------------

/** One agent's nerve driven decision by decision along its sensor stream, by `nerveDecide` calls. */
interface Driver {
  agentId: string;
  acts: ReturnType<typeof createNerveActivities>;
  stream: Iterator<Observation>;
  state: string;
  seq: number;
}

interface ActivityBlock {
  ms: number[];
  lf: number;
  llm: number;
  bad: number;
}

const emptyBlock = (): ActivityBlock => ({ ms: [], lf: 0, llm: 0, bad: 0 });

/** One `nerveDecide` in `mode`: its wall time, the LF the ledger settled during it, whether it asked the LLM and went wrong. */
async function step(db: Db, d: Driver, mode: ModeSetting, into: ActivityBlock): Promise<NerveDecideResult> {
  const before = await lastLedgerId(db);
  const o = d.stream.next().value as Observation;
  const t0 = performance.now();
  const r = await d.acts.nerveDecide({
    agentId: d.agentId,
    nerve: 'collision',
    state: d.state,
    observation: o,
    mode,
    key: `bench/${d.agentId}/${d.seq++}`,
    at: Date.now(),
  });
  into.ms.push(performance.now() - t0);
  into.lf += await settledSince(db, d.agentId, before);
  if (r.decidedBy === 'llm') into.llm++;
  if (r.outcome === 'bad') into.bad++;
  d.state = r.to;
  return r;
}

async function runBlock(db: Db, d: Driver, mode: ModeSetting, n: number): Promise<ActivityBlock> {
  const into = emptyBlock();
  for (let i = 0; i < n; i++) await step(db, d, mode, into);
  return into;
}

function merge(blocks: ActivityBlock[]): ActivityBlock {
  return {
    ms: blocks.flatMap((b) => b.ms),
    lf: blocks.reduce((s, b) => s + b.lf, 0),
    llm: blocks.reduce((s, b) => s + b.llm, 0),
    bad: blocks.reduce((s, b) => s + b.bad, 0),
  };
}

/** `nerveDecide` calls in forced deliberate and forced reflex, alternating, on the nerve the workflows taught. */
async function measureActivities(
  db: Db,
  router: LlmRouter,
  agentId: string,
  { rounds, perActivityBlock }: NerveSizes,
): Promise<{ deliberate: ActivityBlock; reflex: ActivityBlock }> {
  const d: Driver = {
    agentId,
    acts: createNerveActivities({ db, llm: router, prices: defaultPrices }),
    stream: observations(2026),
    state: collisionNerve.machine.initial,
    seq: 0,
  };
  const blocks = { deliberate: [] as ActivityBlock[], reflex: [] as ActivityBlock[] };
  for (let r = 0; r < rounds; r++)
    for (const mode of ['deliberate', 'reflex'] as const)
      blocks[mode].push(await runBlock(db, d, mode, perActivityBlock));
  return { deliberate: merge(blocks.deliberate), reflex: merge(blocks.reflex) };
}

/** A hold and its settle alone, one after the other, on a budget of its own: the ledger's share of a decision. */
async function measureLedgerPair(db: Db, n: number): Promise<number[]> {
  await seedAgent(db, 'bench-ledger', false);
  const budgetId = budgetIds.nerve('bench-ledger', 'collision');
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await reserve(db, { key: `bench-ledger/${i}`, budgetId, amount: 0.01, operation: 'nerve', ttlMs: 60_000 });
    await settle(db, `bench-ledger/${i}`, 0.01);
    ms.push(performance.now() - t0);
  }
  return ms;
}

/** A few deliberate decisions of the real local model (activity level), or the reason there are none. */
async function measureLocal(
  db: Db,
  router: LlmRouter,
  { localWarmup, localDecisions }: NerveSizes,
): Promise<{ block: ActivityBlock; loadMs: number } | { skipped: string }> {
  if (!resolveLocalModel(toolsDir))
    return {
      skipped: `the local model (${defaultLocalModelName}) is not installed in ${toolsDir}: run \`npm run setup\``,
    };
  const agentId = 'bench-local';
  await seedAgent(db, agentId, false);
  await ensureDefaultRegistry(db, agentId, { provider: 'local', roles: ['agent'] });
  const { loadMs } = await preloadLocalModel({ toolsDir });
  const d: Driver = {
    agentId,
    acts: createNerveActivities({ db, llm: router, prices: defaultPrices }),
    stream: observations(2026),
    state: collisionNerve.machine.initial,
    seq: 0,
  };
  await runBlock(db, d, 'deliberate', localWarmup);
  return { block: await runBlock(db, d, 'deliberate', localDecisions), loadMs };
}

// ---- the figures ---------------------------------------------------------------------------------

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
/** Per-decision figures of a mode's workflow blocks: time per block (wall / decisions), LF, bad and activity shares over all. */
function figures(blocks: WorkflowBlock[]) {
  const decisions = sum(blocks.map((b) => b.decisions));
  return {
    ms: summarize(blocks.map((b) => b.ms / b.decisions)),
    lf: sum(blocks.map((b) => b.lf)) / decisions,
    bad: sum(blocks.map((b) => b.bad)) / decisions,
    llm: sum(blocks.map((b) => b.llm)) / decisions,
    activities: sum(blocks.map((b) => b.activities)) / decisions,
  };
}

const loadText = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' / ');

export async function measureNerves(
  z: NerveSizes = nervesSizes.full,
): Promise<{ metrics: Record<string, number>; notes: Record<string, string> }> {
  const loadBefore = loadText();
  const scratch = await scratchDatabase('mindloop_bench_nerves');
  const { stack, stop } = await benchStack({ databaseUrl: scratch.url });
  try {
    const db = stack.db.db;
    const router = createLlmRouter({ db, env: {}, toolsDir, scriptedReply: collisionModel() });
    const { learning, deliberate: dBlocks, reflex: rBlocks, rules } = await measureWorkflows(stack, router, z);
    const wf = { deliberate: figures(dBlocks), reflex: figures(rBlocks) };
    const hybrid = { ms: summarize(learning.hybrid.gapsMs), lf: learning.hybrid.lf / learning.hybrid.decisions };
    const act = await measureActivities(db, router, 'bench-nerve', z);
    const actMs = { deliberate: summarize(act.deliberate.ms), reflex: summarize(act.reflex.ms) };
    const ledgerPair = summarize(await measureLedgerPair(db, z.perActivityBlock * z.rounds));
    const local = await measureLocal(db, router, z);
    const loadAfter = loadText();
    const metrics: Record<string, number> = {
      deliberate_lf_per_decision: wf.deliberate.lf,
      hybrid_lf_per_decision: hybrid.lf,
      reflex_lf_per_decision: wf.reflex.lf,
      deliberate_p50_ms: wf.deliberate.ms.p50,
      hybrid_p50_ms: hybrid.ms.p50,
      reflex_p50_ms: wf.reflex.ms.p50,
      deliberate_p99_ms: wf.deliberate.ms.p99,
      hybrid_p99_ms: hybrid.ms.p99,
      reflex_p99_ms: wf.reflex.ms.p99,
      cost_reduction_ratio: 1 - wf.reflex.lf / wf.deliberate.lf,
      latency_reduction_ratio: 1 - wf.reflex.ms.p50 / wf.deliberate.ms.p50,
      hybrid_llm_share_ratio: learning.hybrid.llm / learning.hybrid.decisions,
      deliberate_bad_ratio: wf.deliberate.bad,
      reflex_bad_ratio: wf.reflex.bad,
      deliberate_activities_per_decision: wf.deliberate.activities,
      reflex_activities_per_decision: wf.reflex.activities,
      decisions_to_hybrid: learning.toHybrid,
      decisions_to_reflex: learning.toReflex,
      rules,
      ledger_pair_p50_ms: ledgerPair.p50,
      activity_deliberate_p50_ms: actMs.deliberate.p50,
      activity_reflex_p50_ms: actMs.reflex.p50,
      activity_deliberate_p99_ms: actMs.deliberate.p99,
      activity_reflex_p99_ms: actMs.reflex.p99,
      activity_latency_reduction_ratio: 1 - actMs.reflex.p50 / actMs.deliberate.p50,
    };
    const notes: Record<string, string> = {
      model:
        'scripted, instant, answers the ground truth (deliberate figures are the runtime: the activity, the router, its ledger charge, the decision)',
      method: `the nerve workflow (workflows/nerve.ts) on the embedded Temporal dev server, one worker in this process on queue ${taskQueue}, a real Postgres; warm-up: a ${z.warmup}-decision deliberate and reflex run on another agent; the nerve learns in auto (runs of ${z.perBlock}, default promotion: 20 choices at 95 %) until reflex holds for ${z.reflexHeld} decisions; then ${z.rounds} rounds of a forced deliberate and a forced reflex run of ${z.perBlock} decisions each, in turn, the same stream within a round`,
      latency:
        'per decision = a run’s wall time (client start to result) / its decisions; p50 and p99 over the runs of a mode (p99 of 5 runs is their slowest)',
      reflex: `the reflex arc: one activity leases the budget for up to 50 decisions and compiles the table, the workflow decides them, one activity records them and settles the lease (reflex_activities_per_decision); a deliberate decision is one nerveDecide activity`,
      hybrid: `the ${learning.hybrid.decisions} decisions made in the hybrid mode the nerve earned while learning (rules where they covered, the LLM elsewhere); time = the gap between consecutive hybrid decisions of one run (row times); LF = what the ledger settled for their state holds and LLM calls`,
      lf: 'settled ledger amounts on the agent during a mode’s runs (state costs or the arc’s leases, and the LLM calls the router charged) / decisions',
      activity: `activity_*: nerveDecide called directly (no Temporal), ${z.rounds} rounds of ${z.perActivityBlock} forced deliberate and ${z.perActivityBlock} forced reflex decisions in turn on the taught nerve: what a decision cost before the reflex arc, less the activity round trip`,
      ledger_pair:
        'one reserve and its settle (db/queries/lifeforce.ts), back to back: what every nerveDecide pays; a reflex arc pays one per lease',
      prices: `core/lifeforce.ts defaults (${defaultPrices.lfPer1kTokens} LF per 1k tokens; the scripted row has no USD price); state costs ${JSON.stringify(collisionNerve.costLf)}`,
      load: `load average (1/5/15 min) ${loadBefore} before, ${loadAfter} after, on ${cpus().length} CPUs`,
    };
    if ('skipped' in local) {
      notes.local = `skipped: ${local.skipped}`;
      process.stdout.write(`  local model run skipped: ${local.skipped}\n`);
    } else {
      const ls = summarize(local.block.ms);
      const localLf = local.block.lf / local.block.ms.length;
      Object.assign(metrics, {
        local_deliberate_p50_ms: ls.p50,
        local_deliberate_lf_per_decision: localLf,
        local_deliberate_bad_ratio: local.block.bad / local.block.ms.length,
        local_latency_reduction_ratio: 1 - wf.reflex.ms.p50 / ls.p50,
        local_cost_reduction_ratio: 1 - wf.reflex.lf / localLf,
      });
      notes.local = `${defaultLocalModelName} on the CPU, ${z.localDecisions} deliberate decisions after ${z.localWarmup} of warm-up (model loaded in ${local.loadMs} ms, not counted), at the activity level (nerveDecide called directly, no workflow); the local ratios compare it with the workflow reflex figures of this run`;
    }
    const met = (x: number, t: number) => `${x >= t ? 'met' : 'MISSED'} (${x.toFixed(3)} vs ≥ ${t})`;
    notes.targets = `cost_reduction_ratio ${met(metrics.cost_reduction_ratio!, targets.cost)}; latency_reduction_ratio ${met(metrics.latency_reduction_ratio!, targets.latency)}`;
    process.stdout.write(`  targets: ${notes.targets}\n  load average ${loadBefore} before, ${loadAfter} after\n`);
    return { metrics, notes };
  } finally {
    await disposeLocalModels();
    await stop();
    await scratch.drop();
  }
}
