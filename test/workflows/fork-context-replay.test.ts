/**
 * successorForkWorkflow with a `context_replay` evaluation (config and prompt patches) on the
 * time-skipping server, with the REAL fork activities on a real Postgres (fresh database) and
 * the LLM router's scripted provider: the agent model answers `fork_replay` calls according to
 * the (patched) system prompt it is sent, so a prompt that asks for variety gets varied replies
 * and one that asks for the same answer gets repeats.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyActivityErrors } from '../../activities/errors.js';
import { createForkActivities } from '../../activities/forks/index.js';
import { createLifeforceActivities } from '../../activities/lifeforce.js';
import { createLlmRouter, type ScriptedReplyFn } from '../../activities/llm/index.js';
import type { SuccessorForkInput } from '../../core/fork.js';
import { defaultPrices } from '../../core/lifeforce.js';
import { agents, llmCalls, llmRegistry, verdicts } from '../../db/schema/index.js';
import type { SuccessorForkResult } from '../../workflows/successor-fork.js';
import { migratedDatabase, tempDir, type MigratedDatabase } from '../helpers/env.js';
import { countRows, seedForkableAgent, snapshotAgent } from '../helpers/fork-fixture.js';
import { startWorkers, type RunningWorkers } from '../helpers/harness.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

const suite = timeSkippingSuite();
let handle: MigratedDatabase;
const data = tempDir('fork-replay');
/** Every scripted call: purpose, the tick it names and the system prompt it saw. */
const calls: Array<{ purpose?: string; tick: number | null; system: string; temperature?: number }> = [];

const vocabulary =
  'amber basalt cedar dune ember fjord glacier heron iris juniper kelp lichen meadow nectar onyx pollen quartz reed sorrel thistle umber violet willow yarrow zinnia'.split(
    ' ',
  );
/** Twelve words no other tick uses (distinct per tick): a "varied" reply. */
const varied = (tick: number) =>
  `Today: ${Array.from({ length: 12 }, (_, j) => `${vocabulary[(tick * 7 + j) % vocabulary.length]}${tick}`).join(' ')}.`;
const repeated = 'I keep thinking about the garden plan again today. Nothing new.';

const reply: ScriptedReplyFn = ({ messages, purpose, params }) => {
  const system = messages.find((m) => m.role === 'system')?.content ?? '';
  const m = /tick (\d+), time /.exec(messages.find((x) => x.role === 'user')?.content ?? '');
  calls.push({ purpose, tick: m ? Number(m[1]) : null, system, temperature: params.temperature });
  // The validator rates a word-for-word repeat poorly, anything else +1.
  if (purpose === 'validate')
    return messages.some((x) => x.role === 'user' && x.content === repeated) ? '-2 (repeats itself)' : '+1';
  if (purpose !== 'fork_replay') throw new Error(`unexpected purpose ${purpose}`);
  const tick = Number(m?.[1] ?? 0);
  return system.includes('VARY') || (params.temperature ?? 0) >= 1.5 ? varied(tick) : repeated;
};

beforeAll(async () => {
  handle = await migratedDatabase('mindloop_fork_replay', 10);
}, 120_000);

let workers: RunningWorkers | undefined;
beforeAll(async () => {
  const activities = classifyActivityErrors({
    ...createForkActivities({
      db: handle.db,
      llm: createLlmRouter({ db: handle.db, env: {}, toolsDir: '', scriptedReply: reply }),
      dataDir: data.path,
    }),
    ...createLifeforceActivities({ db: handle.db, prices: defaultPrices }),
  });
  workers = await startWorkers(suite.env, [{ taskQueue: 'mindloop', workflowBundle: suite.bundle, activities }]);
}, 60_000);
afterAll(async () => {
  await workers?.stop();
  await handle?.dispose();
  data.remove();
});

/** The parent: the fixture's agent (30 recorded replies, a scripted validator) plus a scripted `agent` model. */
async function seedParent(agentId: string, costPer1k = 0): Promise<void> {
  await seedForkableAgent(handle.db, agentId);
  await handle.db.insert(llmRegistry).values({
    agentId,
    name: 'thinker',
    provider: 'scripted',
    model: 'thinker',
    role: 'agent',
    costPer1kInput: costPer1k,
    params: { replies: ['x'] },
  });
}

async function run(id: string, input: SuccessorForkInput): Promise<SuccessorForkResult> {
  return suite.env.client.workflow.execute('successorForkWorkflow', {
    taskQueue: 'mindloop',
    workflowId: `fork/${id}`,
    args: [input],
  });
}

/** The scripted `fork_replay` calls since `calls` was last cleared. */
const replayed = () => calls.filter((c) => c.purpose === 'fork_replay');

describe('successorForkWorkflow · context_replay (config and prompt patches)', () => {
  it('a prompt patch that makes replies more varied is APPROVEd; one that makes them repeat is REJECTed; the parent is unchanged byte for byte', async () => {
    await seedParent('p-cr');
    const before = await snapshotAgent(handle.db, 'p-cr');
    const parentCalls = (await handle.db.select().from(llmCalls).where(eq(llmCalls.agentId, 'p-cr'))).length;

    calls.length = 0;
    const good = await run('cr-vary', {
      agentId: 'p-cr',
      patch: { kind: 'prompt', content: 'You are a patient gardener. VARY your ideas every tick.' },
      evaluation: { kind: 'context_replay' },
    });
    expect(good.verdict).toBe('APPROVE');
    expect(good.gate).toBe('expired'); // nobody answered within the (skipped) 24 h deadline: not applied
    expect(good.applied).toBeNull();
    expect(good.evaluationSummary).toMatch(
      /^5 contexts; parent: novelty [\d.]+, rating 1\.00, \d+ tokens\/reply; patched: novelty 9\d\.\d, rating 1\.00, \d+ tokens\/reply; Δnovelty \+[\d.]+, Δrating \+0\.00, token ratio 0\.\d+; more novel at no extra token cost$/,
    );
    // The replay ran on the patched prompt, once per replayed tick (26…30), each tick also rated twice.
    const goodReplays = replayed();
    expect(goodReplays.map((c) => c.tick)).toEqual([26, 27, 28, 29, 30]);
    expect(goodReplays.every((c) => c.system.includes('VARY'))).toBe(true);
    expect(calls.filter((c) => c.purpose === 'validate')).toHaveLength(10);
    const [v] = await handle.db.select().from(verdicts).where(eq(verdicts.forkId, 'cr-vary'));
    expect(v!.artifacts.map((a) => a.name)).toEqual(['context-replay.json', 'verdict.json']);
    const report = JSON.parse(readFileSync(fileURLToPath(v!.artifacts[0]!.uri!), 'utf8')) as {
      samples: number;
      contexts: Array<{ tick: number; patched: { reply: string; novelty: number } }>;
    };
    expect(report.samples).toBe(5);
    expect(report.contexts.map((c) => c.patched.reply)).toEqual([26, 27, 28, 29, 30].map(varied));

    calls.length = 0;
    const bad = await run('cr-repeat', {
      agentId: 'p-cr',
      patch: { kind: 'prompt', content: 'You are a patient gardener. Give the same answer as before.' },
      evaluation: { kind: 'context_replay', lastN: 6 },
    });
    expect(bad.verdict).toBe('REJECT');
    // The fixture's parent already repeats itself a lot (novelty ~10), so the novelty drop alone
    // is small; the validator's rating (+1 → −2) makes it a REJECT.
    expect(bad.evaluationSummary).toMatch(
      /^6 contexts; parent: novelty [\d.]+, rating 1\.00, .*patched: novelty [\d.]+, rating -2\.00, .*Δnovelty -[\d.]+, Δrating -3\.00, .*; rating fell by 3\.00$/,
    );
    expect(bad.gate).toBe('not_applicable');
    expect(replayed().map((c) => c.tick)).toEqual([25, 26, 27, 28, 29, 30]);

    // The parent: not a byte changed, no call billed to it, and both copies are gone.
    expect(await snapshotAgent(handle.db, 'p-cr')).toBe(before);
    expect(await handle.db.select().from(llmCalls).where(eq(llmCalls.agentId, 'p-cr'))).toHaveLength(parentCalls);
    for (const id of ['cr-vary', 'cr-repeat']) {
      expect(
        await handle.db
          .select()
          .from(agents)
          .where(eq(agents.id, `fk.${id}`)),
      ).toEqual([]);
      expect(await countRows(handle.db, `fk.${id}`)).toBe(0);
    }
  }, 120_000);

  it('a config patch reaches the replay as sampling params (temperature)', async () => {
    await seedParent('p-crc');
    calls.length = 0;
    const r = await run('cr-temp', {
      agentId: 'p-crc',
      patch: { kind: 'config', values: { temperature: 1.8 } },
      evaluation: { kind: 'context_replay', lastN: 4 },
    });
    expect(replayed().map((c) => c.temperature)).toEqual([1.8, 1.8, 1.8, 1.8]);
    expect(r.verdict).toBe('APPROVE');
    expect(r.evaluationSummary).toMatch(/^4 contexts; /);
  }, 120_000);

  it('model-cost budget: replay calls are billed to the fork until the budget runs out → REJECT budget_exceeded: cost', async () => {
    await seedParent('p-crb', 5);
    const before = await snapshotAgent(handle.db, 'p-crb');
    calls.length = 0;
    // Lifeforce far above the dollar budget: the model-cost check is what stops it.
    const r = await run('cr-cost', {
      agentId: 'p-crb',
      patch: { kind: 'prompt', content: 'VARY.' },
      evaluation: { kind: 'context_replay', lastN: 20 },
      budget: { costUsd: 0.05, lifeforce: 1_000_000 },
    });
    expect(r.verdict).toBe('REJECT');
    expect(r.evaluationSummary).toMatch(/^budget_exceeded: cost \(spent \$\d+\.\d+ > \$0\.05\)$/);
    // It stopped after the first call that broke the budget: one of the 20 contexts was replayed.
    expect(replayed()).toHaveLength(1);
    expect(await snapshotAgent(handle.db, 'p-crb')).toBe(before);
  }, 120_000);

  it('a retried evaluation pays nothing twice: one llm_calls row per fork + tick, the model is not called again', async () => {
    await seedParent('p-cri');
    const acts = createForkActivities({
      db: handle.db,
      llm: createLlmRouter({ db: handle.db, env: {}, toolsDir: '', scriptedReply: reply }),
      dataDir: data.path,
    });
    await acts.forkSpawn({
      forkId: 'cr-idem',
      workflowId: 'fork/cr-idem',
      agentId: 'p-cri',
      patch: { kind: 'prompt', promptKind: 'full', content: 'VARY.' },
      evaluation: { kind: 'context_replay', lastN: 3 },
      budget: { wallMs: 60_000, costUsd: 5, diskBytes: 1024 ** 3, cpus: 1 },
      startedAtMs: Date.now(),
    });
    await acts.forkApplyPatch({ forkId: 'cr-idem' });
    calls.length = 0;
    const first = await acts.forkEvaluateContexts({ forkId: 'cr-idem' });
    const modelCalls = calls.length;
    const second = await acts.forkEvaluateContexts({ forkId: 'cr-idem' });
    expect(modelCalls).toBe(3 + 6); // 3 replays + 2 ratings each
    expect(calls.length).toBe(modelCalls); // the retry was answered from llm_calls
    expect([second.parent, second.candidate, second.spentUsd]).toEqual([first.parent, first.candidate, first.spentUsd]);
    const rows = await handle.db.select().from(llmCalls).where(eq(llmCalls.agentId, 'fk.cr-idem'));
    expect(
      rows
        .filter((r) => r.purpose === 'fork_replay')
        .map((r) => r.requestKey)
        .sort(),
    ).toEqual(['fork/cr-idem/replay/28', 'fork/cr-idem/replay/29', 'fork/cr-idem/replay/30']);
    await acts.forkCleanup({ forkId: 'cr-idem' });
    expect(await countRows(handle.db, 'fk.cr-idem')).toBe(0);
  }, 60_000);

  it('refuses a context_replay of a strategy patch with a clear non-retryable error', async () => {
    const err = await run('cr-bad', {
      agentId: 'p-cr',
      patch: { kind: 'strategy', strategy: 'keyword_cluster' },
      evaluation: { kind: 'context_replay' },
    }).catch((e: unknown) => e);
    expect(String((err as { cause?: Error }).cause?.message)).toContain(
      'context_replay cannot evaluate a strategy patch',
    );
    expect(existsSync(data.path)).toBe(true);
  });
});
