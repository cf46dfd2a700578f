/**
 * `npm run bench -- nerves`: what a collision-nerve decision costs in LF and wall time when the
 * LLM decides (deliberate), when learned rules decide what they cover (hybrid) and when the
 * compiled table decides (reflex), on a real Postgres (a fresh database on BENCH_DATABASE_URL /
 * TEST_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres).
 *
 * The decisions are `nerveDecide` activity calls (activities/nerves.ts) with the real router and
 * ledger; a workflow adds one activity round trip to each (bench `temporal-baseline`). The model
 * is scripted and instant and answers the ground truth, so the figures are the runtime's own.
 * The nerve learns from scratch in `auto` until it holds reflex (its hybrid decisions are measured
 * there), then deliberate and reflex decisions alternate in blocks on the same sensor stream. LF
 * per decision is read from the ledger: everything settled on the agent's budgets during a mode's
 * decisions (the state's cost and the LLM call the router charged), over their number. Beside it, a few deliberate decisions of the real
 * local model (SmolLM2-135M on the CPU), when it is installed.
 */
import { join } from 'node:path';
import pg from 'pg';
import { and, eq, gt, sql } from 'drizzle-orm';
import { createLlmRouter, defaultLocalModelName, disposeLocalModels, ensureDefaultRegistry, preloadLocalModel, type LlmRouter } from '../activities/llm/index.js';
import { createNerveActivities, type NerveDecideResult } from '../activities/nerves.js';
import { budgetIds, defaultPrices } from '../core/lifeforce.js';
import { collisionNerve } from '../core/nerves/collision.js';
import type { ModeSetting, NerveMode } from '../core/nerves/modes.js';
import type { Observation } from '../core/nerves/nerve.js';
import { observations } from '../core/nerves/scenario.js';
import { createDb } from '../db/client.js';
import { runMigrations } from '../db/migrate.js';
import { carveBudget, ensureBudget, reserve, settle } from '../db/queries/lifeforce.js';
import { agents, lifeforceLedger, llmRegistry, nerveRules } from '../db/schema/index.js';
import type { Db } from '../db/client.js';
import { resolveLocalModel } from '../runtime/tools.js';
import { summarize } from './lib.js';

const adminUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const toolsDir = process.env.MINDLOOP_TOOLS_DIR ?? join(import.meta.dirname, '..', '.tools');

const targets = { cost: 0.6, latency: 0.8 };
const warmup = 100;
const rounds = 3;
const perBlock = 100;
const localDecisions = 10;

/** One agent's nerve driven decision by decision along its sensor stream. */
interface Driver {
  agentId: string;
  acts: ReturnType<typeof createNerveActivities>;
  stream: Iterator<Observation>;
  state: string;
  seq: number;
}

interface Block {
  ms: number[];
  lf: number;
  llm: number;
  bad: number;
}

/** What the scripted model is asked about now: it answers the ground truth for it. */
let asking: { state: string; o: Observation } = { state: 'IDLE', o: { t: 0, distanceM: 100, closingSpeedMps: 0, bearingDeg: 0, obstacle: false } };

async function lastLedgerId(db: Db): Promise<number> {
  const [r] = await db.select({ id: sql<string | null>`max(${lifeforceLedger.id})` }).from(lifeforceLedger);
  return Number(r?.id ?? 0);
}

/** LF settled on the agent's budgets since ledger row `after`. */
async function settledSince(db: Db, agentId: string, after: number): Promise<number> {
  const [r] = await db
    .select({ total: sql<string>`coalesce(sum(${lifeforceLedger.amount}), 0)` })
    .from(lifeforceLedger)
    .where(and(eq(lifeforceLedger.agentId, agentId), eq(lifeforceLedger.kind, 'settle'), gt(lifeforceLedger.id, after)));
  return Number(r?.total ?? 0);
}

const emptyBlock = (): Block => ({ ms: [], lf: 0, llm: 0, bad: 0 });

/**
 * One decision in `mode`, counted into `into` (by the mode it was made in): its wall time, the
 * LF the ledger settled during it, whether it asked the LLM and went wrong. Every mode is
 * measured through this one step, so they run under the same pattern of queries.
 */
async function step(db: Db, d: Driver, mode: ModeSetting, into: Record<NerveMode, Block>): Promise<NerveDecideResult> {
  const before = await lastLedgerId(db);
  const o = d.stream.next().value as Observation;
  asking = { state: d.state, o };
  const t0 = performance.now();
  const r = await d.acts.nerveDecide({ agentId: d.agentId, nerve: 'collision', state: d.state, observation: o, mode, key: `bench/${d.agentId}/${d.seq++}`, at: Date.now() });
  const b = into[r.mode];
  b.ms.push(performance.now() - t0);
  b.lf += await settledSince(db, d.agentId, before);
  if (r.decidedBy === 'llm') b.llm++;
  if (r.outcome === 'bad') b.bad++;
  d.state = r.to;
  return r;
}

/** `n` decisions in a fixed mode. */
async function runBlock(db: Db, d: Driver, mode: NerveMode, n: number): Promise<Block> {
  const into = { deliberate: emptyBlock(), hybrid: emptyBlock(), reflex: emptyBlock() };
  for (let i = 0; i < n; i++) await step(db, d, mode, into);
  return into[mode];
}

function merge(blocks: Block[]): Block {
  return { ms: blocks.flatMap((b) => b.ms), lf: blocks.reduce((s, b) => s + b.lf, 0), llm: blocks.reduce((s, b) => s + b.llm, 0), bad: blocks.reduce((s, b) => s + b.bad, 0) };
}

/** An agent with a nerve budget (unlimited: the ledger still records every hold and charge). */
async function seedAgent(db: Db, agentId: string): Promise<void> {
  await db.insert(agents).values({ id: agentId, name: agentId });
  await ensureBudget(db, { id: budgetIds.agent(agentId), agentId, scope: 'agent', settings: { capacity: null } });
  await carveBudget(db, { parentId: budgetIds.agent(agentId), id: budgetIds.nerve(agentId, 'collision'), agentId, scope: 'nerve', amount: null });
}

interface Evolution {
  /** Decisions made in each mode while the nerve learned (auto), each with its own LF. */
  byMode: Record<NerveMode, Block>;
  /** How many decisions it took until the first in hybrid, and until reflex held. */
  toHybrid: number;
  toReflex: number;
}

/**
 * The nerve learning from scratch in `auto`, one decision at a time until reflex has held for
 * `settled` decisions in a row (at most `cap`): each decision's LF is what the ledger settled
 * during it, and it counts for the mode it was made in.
 */
async function evolve(db: Db, d: Driver, cap: number, settled: number): Promise<Evolution> {
  const byMode = { deliberate: emptyBlock(), hybrid: emptyBlock(), reflex: emptyBlock() };
  let toHybrid = 0;
  let inReflex = 0;
  let n = 0;
  while (n < cap && inReflex < settled) {
    const r = await step(db, d, 'auto', byMode);
    n++;
    if (r.mode === 'hybrid' && toHybrid === 0) toHybrid = n;
    inReflex = r.modeAfter === 'reflex' ? inReflex + 1 : 0;
  }
  return { byMode, toHybrid, toReflex: inReflex >= settled ? n - settled + 1 : Number.NaN };
}

/**
 * The instant scripted model. The nerve learns in `auto` until it holds reflex (the hybrid
 * figures come from there: decisions made in the hybrid mode it earned); then deliberate and
 * reflex (both forced) in alternating blocks on the same stream.
 */
async function measureModes(db: Db, router: LlmRouter): Promise<{ evolution: Evolution; deliberate: Block; reflex: Block; rules: number }> {
  const driver = async (agentId: string): Promise<Driver> => {
    await seedAgent(db, agentId);
    await db.insert(llmRegistry).values({ agentId, name: 'instant', provider: 'scripted', model: 'scripted-instant', role: 'agent', priority: 1 });
    return { agentId, acts: createNerveActivities({ db, llm: router, prices: defaultPrices }), stream: observations(2026), state: collisionNerve.machine.initial, seq: 0 };
  };
  // The JIT and the pool warm, on an agent of its own (its learning is not measured).
  await runBlock(db, await driver('bench-warm'), 'deliberate', warmup);
  const d = await driver('bench-nerve');
  const evolution = await evolve(db, d, 5_000, 100);
  const blocks = { deliberate: [] as Block[], reflex: [] as Block[] };
  for (let r = 0; r < rounds; r++) for (const mode of ['deliberate', 'reflex'] as const) blocks[mode].push(await runBlock(db, d, mode, perBlock));
  const rules = await db.$count(nerveRules, and(eq(nerveRules.agentId, d.agentId), sql`${nerveRules.action} is not null`));
  return { evolution, deliberate: merge(blocks.deliberate), reflex: merge(blocks.reflex), rules };
}

/** A hold and its settle alone, one after the other, on a budget of its own: the ledger's share of every decision. */
async function measureLedgerPair(db: Db, n: number): Promise<number[]> {
  await seedAgent(db, 'bench-ledger');
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

/** A few deliberate decisions of the real local model, or the reason there are none. */
async function measureLocal(db: Db, router: LlmRouter): Promise<{ block: Block; loadMs: number } | { skipped: string }> {
  if (!resolveLocalModel(toolsDir)) return { skipped: `the local model (${defaultLocalModelName}) is not installed in ${toolsDir}: run \`npm run setup\`` };
  const agentId = 'bench-local';
  await seedAgent(db, agentId);
  await ensureDefaultRegistry(db, agentId, { provider: 'local', roles: ['agent'] });
  const { loadMs } = await preloadLocalModel({ toolsDir });
  const d: Driver = { agentId, acts: createNerveActivities({ db, llm: router, prices: defaultPrices }), stream: observations(2026), state: collisionNerve.machine.initial, seq: 0 };
  await runBlock(db, d, 'deliberate', 2);
  return { block: await runBlock(db, d, 'deliberate', localDecisions), loadMs };
}

const perDecision = (b: Block) => b.lf / b.ms.length;

export async function measureNerves(): Promise<{ metrics: Record<string, number>; notes: Record<string, string> }> {
  const name = `mindloop_bench_nerves_${process.pid}_${Date.now()}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const h = createDb(url.toString(), { max: 4 });
  try {
    await runMigrations(h.pool);
    const router = createLlmRouter({ db: h.db, env: {}, toolsDir, scriptedReply: () => collisionNerve.policy(asking.state, collisionNerve.bucket(asking.o)) });
    const { evolution, deliberate, reflex, rules } = await measureModes(h.db, router);
    const hybrid = evolution.byMode.hybrid;
    const ledgerPair = summarize(await measureLedgerPair(h.db, perBlock * rounds));
    const local = await measureLocal(h.db, router);
    const s = { deliberate: summarize(deliberate.ms), hybrid: summarize(hybrid.ms), reflex: summarize(reflex.ms) };
    const lf = { deliberate: perDecision(deliberate), hybrid: perDecision(hybrid), reflex: perDecision(reflex) };
    const metrics: Record<string, number> = {
      deliberate_lf_per_decision: lf.deliberate,
      hybrid_lf_per_decision: lf.hybrid,
      reflex_lf_per_decision: lf.reflex,
      deliberate_p50_ms: s.deliberate.p50,
      hybrid_p50_ms: s.hybrid.p50,
      reflex_p50_ms: s.reflex.p50,
      deliberate_p99_ms: s.deliberate.p99,
      hybrid_p99_ms: s.hybrid.p99,
      reflex_p99_ms: s.reflex.p99,
      cost_reduction_ratio: 1 - lf.reflex / lf.deliberate,
      latency_reduction_ratio: 1 - s.reflex.p50 / s.deliberate.p50,
      hybrid_llm_share_ratio: hybrid.llm / hybrid.ms.length,
      deliberate_bad_ratio: deliberate.bad / deliberate.ms.length,
      reflex_bad_ratio: reflex.bad / reflex.ms.length,
      decisions_to_hybrid: evolution.toHybrid,
      decisions_to_reflex: evolution.toReflex,
      rules,
      ledger_pair_p50_ms: ledgerPair.p50,
    };
    const notes: Record<string, string> = {
      model: 'scripted, instant, answers the ground truth (deliberate figures are the runtime: the router, its ledger charge, the decision)',
      method: `nerveDecide activity calls on a real Postgres, no Temporal (a workflow adds one activity round trip to every mode); ${warmup} decisions of warm-up on another agent; the nerve learns in auto until reflex holds for 100 decisions (default promotion: 20 choices at 95 %); then ${rounds} rounds of ${perBlock} deliberate and ${perBlock} reflex decisions (both forced) in turn on the same stream`,
      hybrid: `the ${hybrid.ms.length} decisions made in the hybrid mode the nerve earned while learning (rules where they covered, the LLM elsewhere)`,
      lf: 'settled ledger amounts on the agent during the decisions of a mode (state cost + the LLM call the router charged) / decisions',
      ledger_pair: 'one reserve and its settle (db/queries/lifeforce.ts), back to back: what every decision pays whatever decides it; a deliberate one pays a second pair for its LLM call',
      prices: `core/lifeforce.ts defaults (${defaultPrices.lfPer1kTokens} LF per 1k tokens; the scripted row has no USD price); state costs ${JSON.stringify(collisionNerve.costLf)}`,
    };
    if ('skipped' in local) {
      notes.local = `skipped: ${local.skipped}`;
      process.stdout.write(`  local model run skipped: ${local.skipped}\n`);
    } else {
      const ls = summarize(local.block.ms);
      Object.assign(metrics, {
        local_deliberate_p50_ms: ls.p50,
        local_deliberate_lf_per_decision: perDecision(local.block),
        local_deliberate_bad_ratio: local.block.bad / local.block.ms.length,
        local_latency_reduction_ratio: 1 - s.reflex.p50 / ls.p50,
        local_cost_reduction_ratio: 1 - lf.reflex / perDecision(local.block),
      });
      notes.local = `${defaultLocalModelName} on the CPU, ${localDecisions} deliberate decisions after 2 of warm-up (model loaded in ${local.loadMs} ms, not counted); reflex figures from the same run`;
    }
    const met = (x: number, t: number) => `${x >= t ? 'met' : 'MISSED'} (${x.toFixed(3)} vs ≥ ${t})`;
    notes.targets = `cost_reduction_ratio ${met(metrics.cost_reduction_ratio!, targets.cost)}; latency_reduction_ratio ${met(metrics.latency_reduction_ratio!, targets.latency)}`;
    process.stdout.write(`  targets: ${notes.targets}\n`);
    return { metrics, notes };
  } finally {
    await disposeLocalModels();
    await h.close();
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.end();
  }
}
