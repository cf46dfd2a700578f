/**
 * `makeAbstract` (the abstracts strategies on real rows, called by the maintenance schedule)
 * and the fork activities' refusals, on the real Postgres.
 */
import { createHash } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/common';
import { and, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createForkActivities, patchHashOf } from '../../activities/forks/index.js';
import { canonicalJson, forkPatchSchema } from '../../core/fork.js';
import {
  abstracts,
  agentConfig,
  forks,
  forkToolRegistry,
  llmRecentResponses,
  systemPrompts,
  toolRegistry,
} from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase, tempDir } from '../helpers/env.js';
import { countRows, replyFor, seedForkableAgent, snapshotAgent } from '../helpers/fork-fixture.js';

let h: MigratedDatabase;
const dir = tempDir('fork-acts');
let acts: ReturnType<typeof createForkActivities>;

beforeAll(async () => {
  h = await migratedDatabase('mindloop_fork_acts', 2);
  acts = createForkActivities({ db: h.db, dataDir: dir.path });
});
afterAll(async () => {
  await h?.dispose();
  dir.remove();
});

async function rejection(p: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
}

describe('makeAbstract', () => {
  it('digests the replies since the last automatic abstract with the configured strategy, once', async () => {
    await seedForkableAgent(h.db, 'abs', { responses: 12 });
    const first = await acts.makeAbstract({ agentId: 'abs', trigger: 'interval' });
    expect(first).toMatchObject({ created: true, strategy: 'recency', responses: 12 });
    const [row] = await h.db.select().from(abstracts).where(eq(abstracts.id, first.abstractId!));
    expect(row).toMatchObject({
      agentId: 'abs',
      strategy: 'recency',
      tickFrom: 1,
      tickTo: 12,
      auto: true,
      trigger: 'interval',
    });
    expect(row!.sources.responses).toHaveLength(12);

    // Nothing new since: nothing made.
    expect(await acts.makeAbstract({ agentId: 'abs', trigger: 'interval' })).toEqual({
      abstractId: null,
      created: false,
      strategy: 'recency',
      responses: 0,
    });

    // New replies and the strategy switched by config: the next one covers only them, by keyword_cluster.
    await h.db.insert(llmRecentResponses).values(
      [13, 14, 15].map((tick) => ({
        agentId: 'abs',
        tick,
        ...replyFor(tick),
        ideas: { new: replyFor(tick).ideas, refined: [], discarded: [] },
      })),
    );
    await h.db
      .update(agentConfig)
      .set({ value: 'keyword_cluster' })
      .where(and(eq(agentConfig.agentId, 'abs'), eq(agentConfig.key, 'abstracts_strategy')));
    const next = await acts.makeAbstract({ agentId: 'abs', trigger: 'interval' });
    expect(next).toMatchObject({ created: true, strategy: 'keyword_cluster', responses: 3 });
    const [n] = await h.db.select().from(abstracts).where(eq(abstracts.id, next.abstractId!));
    expect([n!.tickFrom, n!.tickTo]).toEqual([13, 15]);
    expect(n!.summary).toContain('measure');
  });

  it('refuses a bad trigger, strategy or agent id', async () => {
    expect((await rejection(acts.makeAbstract({ agentId: 'abs', trigger: 'hourly' as never }))).message).toContain(
      'trigger must be one of',
    );
    expect(
      (await rejection(acts.makeAbstract({ agentId: 'abs', trigger: 'interval', strategy: 'zip' as never }))).type,
    ).toBe('InvalidInput');
    expect((await rejection(acts.makeAbstract({ agentId: 'a b', trigger: 'interval' }))).type).toBe('InvalidInput');
  });
});

describe('fork activities', () => {
  it('patch_hash is the sha256 of the canonical patch', () => {
    const p = forkPatchSchema.parse({ strategy: 'keyword_cluster', kind: 'strategy' });
    expect(canonicalJson(p)).toBe('{"kind":"strategy","strategy":"keyword_cluster","target":"abstracts"}');
    expect(patchHashOf(p)).toBe(
      createHash('sha256')
        .update('{"kind":"strategy","strategy":"keyword_cluster","target":"abstracts"}')
        .digest('hex'),
    );
    expect(patchHashOf(forkPatchSchema.parse({ kind: 'strategy', strategy: 'recency' }))).not.toBe(patchHashOf(p));
  });

  it('refuses an unknown parent, a reused fork id with another patch, and gating a non-APPROVE', async () => {
    const base = {
      workflowId: 'fork/x',
      evaluation: { kind: 'abstracts_replay', lastN: 10, window: 5, judge: false },
      budget: { wallMs: 1000, costUsd: 1, diskBytes: 1 << 30, cpus: 1 },
      startedAtMs: Date.now(),
    } as const;
    expect(
      (
        await rejection(
          acts.forkSpawn({
            ...base,
            forkId: 'x1',
            agentId: 'ghost',
            patch: { kind: 'strategy', target: 'abstracts', strategy: 'recency' },
          }),
        )
      ).type,
    ).toBe('NotFound');
    await seedForkableAgent(h.db, 'par', { responses: 3 });
    await acts.forkSpawn({
      ...base,
      forkId: 'x2',
      agentId: 'par',
      patch: { kind: 'strategy', target: 'abstracts', strategy: 'recency' },
    });
    const reused = await rejection(
      acts.forkSpawn({
        ...base,
        forkId: 'x2',
        agentId: 'par',
        patch: { kind: 'prompt', promptKind: 'full', content: 'other' },
      }),
    );
    expect(reused.message).toMatch(/fork x2 already exists for agent par with patch [0-9a-f]{12}/);
    await acts.forkRecordVerdict({
      forkId: 'x2',
      decision: { verdict: 'REJECT', confidence: 0.9, summary: 'no', caveats: [] },
      artifacts: [],
      status: 'completed',
    });
    expect((await rejection(acts.forkGate({ forkId: 'x2', decision: 'approved', by: 'me' }))).message).toContain(
      'only an APPROVE verdict can be applied (got REJECT)',
    );
    await acts.forkCleanup({ forkId: 'x2' });
  });

  const base = {
    evaluation: { kind: 'abstracts_replay', lastN: 10, window: 5, judge: false },
    budget: { wallMs: 60_000, costUsd: 1, diskBytes: 1 << 30, cpus: 1 },
    startedAtMs: Date.now(),
  } as const;
  const config = async (agentId: string, key: string) =>
    (
      await h.db
        .select()
        .from(agentConfig)
        .where(and(eq(agentConfig.agentId, agentId), eq(agentConfig.key, key)))
    )[0]?.value;
  const prompts = (agentId: string) =>
    h.db
      .select({ version: systemPrompts.version, active: systemPrompts.active, content: systemPrompts.content })
      .from(systemPrompts)
      .where(eq(systemPrompts.agentId, agentId))
      .orderBy(systemPrompts.version);

  it('config and prompt patches are written to the copy only; an approved gate writes them to the parent', async () => {
    await seedForkableAgent(h.db, 'cfg');
    const before = await snapshotAgent(h.db, 'cfg');
    const patches = {
      c1: { kind: 'config', values: { delay_ms: 250, novelty_threshold: 0.4 } },
      p1: { kind: 'prompt', promptKind: 'full', content: 'You are a terse gardener.' },
    } as const;
    for (const [forkId, patch] of Object.entries(patches)) {
      await acts.forkSpawn({ ...base, forkId, workflowId: `fork/${forkId}`, agentId: 'cfg', patch: patch as never });
      const applied = await acts.forkApplyPatch({ forkId });
      // A retry finds the first attempt's write.
      expect(await acts.forkApplyPatch({ forkId })).toEqual(applied);
    }
    expect(await config('fk.c1', 'delay_ms')).toBe(250);
    expect(await config('fk.c1', 'novelty_threshold')).toBe(0.4);
    expect(await prompts('fk.p1')).toEqual([
      { version: 1, active: false, content: 'You are a patient gardener.' },
      { version: 2, active: true, content: 'You are a terse gardener.' },
    ]);
    expect(await snapshotAgent(h.db, 'cfg')).toBe(before);

    for (const forkId of Object.keys(patches)) {
      await acts.forkRecordVerdict({
        forkId,
        decision: { verdict: 'APPROVE', confidence: 0.8, summary: 'test', caveats: [] },
        artifacts: [],
        status: 'completed',
      });
      await acts.forkCleanup({ forkId });
      expect(await countRows(h.db, `fk.${forkId}`)).toBe(0);
    }
    expect(await snapshotAgent(h.db, 'cfg')).toBe(before);
    expect(await acts.forkGate({ forkId: 'c1', decision: 'approved', by: 'ann' })).toEqual({
      gate: 'approved',
      applied: 'config delay_ms, novelty_threshold',
    });
    expect(await acts.forkGate({ forkId: 'p1', decision: 'approved', by: 'ann' })).toEqual({
      gate: 'approved',
      applied: 'full system prompt v2',
    });
    expect(await config('cfg', 'delay_ms')).toBe(250);
    expect((await prompts('cfg')).map((p) => [p.version, p.active])).toEqual([
      [1, false],
      [2, true],
    ]);
    expect(await snapshotAgent(h.db, 'cfg')).not.toBe(before);
  });

  it('the tool registry is copied for the fork; a tool patch changes only that copy, which cleanup removes', async () => {
    await seedForkableAgent(h.db, 'tools');
    await h.db.insert(toolRegistry).values([
      {
        name: 'adder',
        kind: 'generated',
        implementation: 'export const add = (a, b) => a - b;',
        tests: 't',
        status: 'active',
      },
      { name: 'echo', kind: 'builtin', status: 'active' },
    ]);
    const registry = async () =>
      (await h.db.execute(sql`select r::text as r from tool_registry r order by id`)).rows.map((x) => x.r);
    const before = await registry();
    const patch = {
      kind: 'tool',
      tool: 'adder',
      implementation: 'export const add = (a, b) => a + b;',
      tests: 'new tests',
    } as const;
    await acts.forkSpawn({
      ...base,
      evaluation: { kind: 'tool_tests' },
      forkId: 't1',
      workflowId: 'fork/t1',
      agentId: 'tools',
      patch,
    });
    const copy = () =>
      h.db
        .select({
          name: forkToolRegistry.name,
          version: forkToolRegistry.version,
          implementation: forkToolRegistry.implementation,
          patched: forkToolRegistry.patched,
        })
        .from(forkToolRegistry)
        .where(eq(forkToolRegistry.agentId, 'fk.t1'))
        .orderBy(forkToolRegistry.name);
    expect(await copy()).toEqual([
      { name: 'adder', version: 1, implementation: 'export const add = (a, b) => a - b;', patched: false },
      { name: 'echo', version: 1, implementation: null, patched: false },
    ]);
    const [f] = await h.db.select().from(forks).where(eq(forks.id, 't1'));
    expect((f!.usage as { toolsCopied?: number }).toolsCopied).toBe(before.length);
    expect(await acts.forkApplyPatch({ forkId: 't1' })).toEqual({
      applied: "tool adder v2 in the fork's registry copy (evaluated in the sandbox)",
    });
    expect(await acts.forkApplyPatch({ forkId: 't1' })).toEqual({
      applied: "tool adder v2 in the fork's registry copy (evaluated in the sandbox)",
    });
    expect((await copy())[0]).toEqual({
      name: 'adder',
      version: 2,
      implementation: 'export const add = (a, b) => a + b;',
      patched: true,
    });
    expect(await registry()).toEqual(before);
    await acts.forkCleanup({ forkId: 't1' });
    expect(await copy()).toEqual([]);
    expect(await registry()).toEqual(before);
  });

  it('the parent snapshot is byte for byte: a microsecond or a jsonb key changes it', async () => {
    await seedForkableAgent(h.db, 'snap');
    const before = await snapshotAgent(h.db, 'snap');
    await h.db.execute(sql`update agents set updated_at = updated_at + interval '1 microsecond' where id = 'snap'`);
    const touched = await snapshotAgent(h.db, 'snap');
    expect(touched).not.toBe(before);
    await h.db.execute(
      sql`update llm_recent_responses set ideas = ideas || '{"x": 1}'::jsonb where id = (select min(id) from llm_recent_responses where agent_id = 'snap')`,
    );
    expect(await snapshotAgent(h.db, 'snap')).not.toBe(touched);
  });
});
