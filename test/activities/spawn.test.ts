/**
 * The spawn activities and the `spawn` command on the real Postgres: what each kind of child
 * gets (row counts per table, a clone every table with an agent id that it does not name as
 * left behind, its learnings included; never the prompts its parent's ticks sent), the parent left byte
 * for byte as it was, peers, goals, ethics,
 * the lifeforce carved through the ledger, the limits, names, idempotent retries, undoing an
 * unborn child, and the lineage.
 */
import { ApplicationFailure } from '@temporalio/common';
import { and, eq, like } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCommandActivities } from '../../activities/tick/apply-commands.js';
import { createSpawnActivities } from '../../activities/society/spawn.js';
import { workflowIds } from '../../core/ids.js';
import { spawnNote, type SpawnType } from '../../core/society/spawn.js';
import { configureBudget, budgetReport } from '../../db/queries/lifeforce.js';
import { copyPlan } from '../../db/queries/fork-copy.js';
import { loadLearnings } from '../../db/queries/learnings.js';
import { cloneLeavesOut, lineage, spawnCopyTables } from '../../db/queries/spawns.js';
import {
  abstracts,
  agentConfig,
  agentPeers,
  agents,
  commandLog,
  ethicsPolicies,
  goals,
  learningEvents,
  learnings,
  lifeforceLedger,
  notes,
  spawns,
  tasks,
  tickPrompts,
} from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { parentSnapshot, rowCounts, seedParent } from '../helpers/society.js';

let h: MigratedDatabase;
let acts: ReturnType<typeof createSpawnActivities>;

beforeAll(async () => {
  h = await migratedDatabase('mindloop_spawn_acts', 4);
  acts = createSpawnActivities({ db: h.db, ledger: true });
});
afterAll(async () => {
  await h?.dispose();
});

interface Spawned {
  begun: Awaited<ReturnType<typeof acts.spawnBegin>>;
  copy?: Awaited<ReturnType<typeof acts.spawnCopy>>;
  funded?: Awaited<ReturnType<typeof acts.spawnFund>>;
}

/** The spawn workflow's steps, in its order, without Temporal. */
async function spawn(
  parentId: string,
  childId: string,
  type: SpawnType,
  o: { goals?: string[]; budget?: number } = {},
): Promise<Spawned> {
  const workflowId = workflowIds.spawn(parentId, childId);
  const begun = await acts.spawnBegin({
    parentId,
    childId,
    type,
    goals: o.goals ?? [],
    ...(o.budget !== undefined ? { budget: o.budget } : {}),
    workflowId,
  });
  const finish = (outcome: 'running' | 'refused', reason?: string) =>
    acts.spawnFinish({
      parentId,
      childId,
      workflowId,
      admitted: begun.status !== 'refused',
      outcome,
      ...(reason ? { reason } : {}),
      note: spawnNote({ parentId, childId, type, status: outcome, ...(reason ? { reason } : {}) }),
      noteKey: `${workflowId}:outcome`,
    });
  if (begun.status === 'refused') {
    await finish('refused', begun.reason);
    return { begun };
  }
  const copy = await acts.spawnCopy({ parentId, childId, startedAtMs: Date.now() });
  const funded = await acts.spawnFund({ parentId, childId });
  await finish(funded.ok ? 'running' : 'refused', funded.ok ? undefined : funded.reason);
  return { begun, copy, funded };
}

async function rejection(p: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
}

const record = async (childId: string) => (await h.db.select().from(spawns).where(eq(spawns.childAgentId, childId)))[0];

describe('each kind of child gets what its type says, and the parent is left as it was', () => {
  const expected = (parent: Record<string, number>, type: SpawnType): Record<string, number> => {
    const tables = new Set(spawnCopyTables(type));
    const out: Record<string, number> = {};
    for (const [t, n] of Object.entries(parent)) out[t] = tables.has(t) ? n : 0;
    // The parent's link to `ghost` stays (the child is not named so); plus the child's link to its parent.
    out.agent_peers = (tables.has('agent_peers') ? parent.agent_peers! : 0) + 1;
    // A child gets no copy of the parent's lifeforce but a budget of its own; and what its parent spawned is not the child's.
    out.lifeforce_budgets = 1;
    out.lifeforce_ledger = 0;
    out.spawns = 0;
    return out;
  };

  it.each(['clone', 'trained', 'newborn'] as const)('%s', async (type) => {
    const parentId = `p-${type}`;
    const childId = `c-${type}`;
    await seedParent(h.db, parentId);
    // What the parent's model was sent at a tick: a record of the parent's, copied to no child.
    await h.db.insert(tickPrompts).values({
      agentId: parentId,
      tick: 12,
      messages: [{ role: 'user', content: 'tick 12' }],
      chars: 7,
      promptTokens: 2,
    });
    const before = await rowCounts(h.db, parentId);
    const snapshot = await parentSnapshot(h.db, parentId, [childId]);

    const r = await spawn(parentId, childId, type, { goals: ['learn to fly'] });
    expect(r.begun).toEqual({ status: 'copying', generation: 1, resumed: false });
    expect(r.funded).toEqual({ ok: true, budget: null });

    const counts = await rowCounts(h.db, childId);
    const goalsOfType = type === 'clone' ? before.goals! : 0;
    expect(counts).toEqual({ ...expected(before, type), goals: goalsOfType + 1 });
    expect([before.tick_prompts, counts.tick_prompts]).toEqual([1, 0]);
    expect(r.copy!.rows).toBe(Object.values(r.copy!.copied).reduce((a, b) => a + b, 0));
    expect(Object.keys(r.copy!.copied).sort()).toEqual([...spawnCopyTables(type)].sort());

    // The parent, byte for byte (what the spawn added to it is checked below).
    expect(await parentSnapshot(h.db, parentId, [childId])).toBe(snapshot);
    expect(await rowCounts(h.db, parentId)).toEqual({
      ...before,
      agent_peers: before.agent_peers! + 1,
      spawns: before.spawns! + 1,
      notes: before.notes! + 1,
    });

    const [child] = await h.db.select().from(agents).where(eq(agents.id, childId));
    expect(child).toMatchObject({ id: childId, name: childId, parentId, kind: type, generation: 1, status: 'created' });
    expect(child!.identity).toEqual(type === 'clone' ? { persona: 'gardener' } : {});
    expect(await record(childId)).toMatchObject({
      agentId: parentId,
      type,
      status: 'running',
      generation: 1,
      goals: ['learn to fly'],
      rows: r.copy!.rows,
      copied: r.copy!.copied,
      reason: null,
    });

    // Peers: both ways with the parent; copied links became the child's; never itself.
    const peers = await h.db.select().from(agentPeers).where(eq(agentPeers.agentId, childId));
    const rel = Object.fromEntries(peers.map((p) => [p.peerAgentId, p.relation]));
    expect(rel[parentId]).toBe('parent');
    expect(
      (
        await h.db
          .select()
          .from(agentPeers)
          .where(and(eq(agentPeers.agentId, parentId), eq(agentPeers.peerAgentId, childId)))
      )[0]?.relation,
    ).toBe('child');
    if (type !== 'newborn')
      expect(rel).toEqual({
        [parentId]: 'parent',
        [`${parentId}-older`]: 'sibling',
        [`${parentId}-friend`]: 'peer',
        [`${parentId}-ghost`]: 'peer',
      });
    else expect(rel).toEqual({ [parentId]: 'parent' });

    // Ethics for every type; the goal given at birth.
    expect(
      (await h.db.select().from(ethicsPolicies).where(eq(ethicsPolicies.agentId, childId))).map((e) => e.title).sort(),
    ).toEqual(['be kind', 'no shell']);
    expect((await h.db.select().from(goals).where(eq(goals.agentId, childId))).map((g) => g.title)).toContain(
      'learn to fly',
    );

    const [note] = await h.db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, parentId), like(notes.sender, 'spawn:%')));
    expect(note?.text).toMatch(new RegExp(`${type} descendant ${childId} .*is born`));
  });

  it('a clone keeps its references inside its own rows and resumes none of its parent’s loops', async () => {
    const [parentAbs] = await h.db.select().from(abstracts).where(eq(abstracts.agentId, 'p-clone'));
    const [childAbs] = await h.db.select().from(abstracts).where(eq(abstracts.agentId, 'c-clone'));
    const ids = (a: typeof parentAbs) => (a!.sources as { responses: number[] }).responses;
    expect(ids(childAbs)).toHaveLength(ids(parentAbs).length);
    expect(ids(childAbs).some((i) => ids(parentAbs).includes(i))).toBe(false);
    const running = await h.db
      .select()
      .from(tasks)
      .where(and(eq(tasks.agentId, 'c-clone'), eq(tasks.replStatus, 'running')));
    expect(running).toEqual([]);
    expect(
      (await h.db.select().from(tasks).where(eq(tasks.agentId, 'p-clone'))).filter((t) => t.replStatus === 'running'),
    ).toHaveLength(1);
  });

  it('a clone takes every table with an agent id that it does not name as left behind (read from the database)', async () => {
    const { rows } = await h.pool.query<{ table_name: string }>(
      `select distinct table_name from information_schema.columns where table_schema = 'public' and column_name = 'agent_id' order by 1`,
    );
    const withAgentId = rows.map((r) => r.table_name);
    const taken = spawnCopyTables('clone');
    expect(taken.filter((t) => t in cloneLeavesOut)).toEqual([]);
    expect([...taken, ...Object.keys(cloneLeavesOut)].sort()).toEqual(withAgentId);
    expect(withAgentId).toContain('learnings');
  });

  it('a clone loads what its parent loads: its learnings, in its own shard; a trained child none', async () => {
    const loaded = async (agentId: string) =>
      (await loadLearnings(h.db, { agentId, above: 0 }))
        .map((l) => [l.factPredicate, l.factArgs, l.confidence, l.reinforcements, l.sourceCampaign])
        .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
    const parent = await loaded('p-clone');
    expect(parent).toHaveLength(4);
    expect(await loaded('c-clone')).toEqual(parent);
    const own = await h.db.select().from(learnings).where(eq(learnings.agentId, 'c-clone'));
    expect(own.map((l) => l.shardType)).toEqual(['agent:c-clone', 'agent:c-clone', 'agent:c-clone', 'agent:c-clone']);
    // The events of the parent's shard, each naming the clone's copy of its learning.
    const events = await h.db.select().from(learningEvents).where(eq(learningEvents.shardType, 'agent:c-clone'));
    expect(events.map((e) => e.outcome).sort()).toEqual(['reinforced', 'saved', 'saved', 'saved']);
    const ownIds = new Set(own.map((l) => l.id));
    expect(events.every((e) => e.learningId !== null && ownIds.has(e.learningId))).toBe(true);
    expect(events.filter((e) => e.agentId === 'c-clone')).toHaveLength(3);
    expect(await loaded('c-trained')).toEqual([]);
    expect(await loaded('c-newborn')).toEqual([]);
  });

  it('an unborn clone undone takes its learnings and their events with it', async () => {
    await seedParent(h.db, 'p-unclone');
    const workflowId = workflowIds.spawn('p-unclone', 'c-unclone');
    await acts.spawnBegin({ parentId: 'p-unclone', childId: 'c-unclone', type: 'clone', goals: [], workflowId });
    const copy = await acts.spawnCopy({ parentId: 'p-unclone', childId: 'c-unclone', startedAtMs: Date.now() });
    expect([copy.copied.learnings, copy.copied.learning_events]).toEqual([4, 4]);
    await acts.spawnFinish({
      parentId: 'p-unclone',
      childId: 'c-unclone',
      workflowId,
      admitted: true,
      outcome: 'rolled_back',
      reason: 'boom',
      note: 'undone',
      noteKey: 'k-unclone',
    });
    expect(await rowCounts(h.db, 'c-unclone')).toMatchObject({ learnings: 0, learning_events: 0 });
    expect(await rowCounts(h.db, 'p-unclone')).toMatchObject({ learnings: 4, learning_events: 4 });
  });

  it('a child named like a lost peer of its parent does not become its own peer', async () => {
    await spawn('p-trained', 'p-trained-ghost', 'trained');
    const own = await h.db
      .select()
      .from(agentPeers)
      .where(and(eq(agentPeers.agentId, 'p-trained-ghost'), eq(agentPeers.peerAgentId, 'p-trained-ghost')));
    expect(own).toEqual([]);
    expect((await record('p-trained-ghost'))!.copied.agent_peers).toBe(3);
  });
});

describe('retries', () => {
  it('every step run twice does its work once', async () => {
    await seedParent(h.db, 'p-retry');
    await configureBudget(h.db, 'p-retry', { capacity: 1000 });
    const workflowId = workflowIds.spawn('p-retry', 'c-retry');
    const begin = {
      parentId: 'p-retry',
      childId: 'c-retry',
      type: 'clone' as const,
      goals: [],
      budget: 100,
      workflowId,
    };
    expect(await acts.spawnBegin(begin)).toMatchObject({ status: 'copying', resumed: false });
    expect(await acts.spawnBegin(begin)).toMatchObject({ status: 'copying', resumed: true });
    const first = await acts.spawnCopy({ parentId: 'p-retry', childId: 'c-retry', startedAtMs: Date.now() });
    const counts = await rowCounts(h.db, 'c-retry');
    const again = await acts.spawnCopy({ parentId: 'p-retry', childId: 'c-retry', startedAtMs: Date.now() });
    expect(again).toEqual(first);
    expect(await rowCounts(h.db, 'c-retry')).toEqual(counts);
    expect(await acts.spawnFund({ parentId: 'p-retry', childId: 'c-retry' })).toEqual({ ok: true, budget: 100 });
    expect(await acts.spawnFund({ parentId: 'p-retry', childId: 'c-retry' })).toEqual({ ok: true, budget: 100 });
    expect(await acts.spawnBegin(begin)).toMatchObject({ status: 'ready', resumed: true });
    // Once it ran, the spawn is final: the same name asked again is taken.
    await acts.spawnFinish({
      parentId: 'p-retry',
      childId: 'c-retry',
      workflowId,
      admitted: true,
      outcome: 'running',
      note: 'born',
      noteKey: 'k-retry',
    });
    expect(await acts.spawnBegin(begin)).toEqual({
      status: 'refused',
      generation: 1,
      reason: 'name taken: c-retry is already your descendant (spawn running)',
    });
    const parent = await budgetReport(h.db, 'agent:p-retry');
    expect(parent).toMatchObject({ available: 900, budget: { spent: 100 } });
    const child = await budgetReport(h.db, 'agent:c-retry');
    expect(child).toMatchObject({ available: 100, budget: { capacity: 100, funded: 100 } });
  });
});

describe('lifeforce', () => {
  it('a limited parent gives a quarter of what it has when no budget is asked; debit and grant are in the ledger', async () => {
    await seedParent(h.db, 'p-lf');
    await configureBudget(h.db, 'p-lf', { capacity: 400 });
    const r = await spawn('p-lf', 'c-lf', 'newborn');
    expect(r.funded).toEqual({ ok: true, budget: 100 });
    const debit = await h.db
      .select()
      .from(lifeforceLedger)
      .where(and(eq(lifeforceLedger.budgetId, 'agent:p-lf'), eq(lifeforceLedger.operation, 'spawn')));
    expect(debit.map((e) => [e.kind, e.amount]).sort()).toEqual([
      ['reserve', 100],
      ['settle', 100],
    ]);
    const grant = await h.db.select().from(lifeforceLedger).where(eq(lifeforceLedger.budgetId, 'agent:c-lf'));
    expect(grant.map((e) => [e.kind, e.amount])).toEqual([['grant', 100]]);
    expect((await budgetReport(h.db, 'agent:p-lf'))!.available).toBe(300);
  });

  it('a budget the parent cannot give is refused before anything is copied', async () => {
    await seedParent(h.db, 'p-poor');
    await configureBudget(h.db, 'p-poor', { capacity: 50 });
    const r = await spawn('p-poor', 'c-poor', 'clone', { budget: 80 });
    expect(r.begun).toEqual({
      status: 'refused',
      reason: 'lifeforce: p-poor cannot give 80 LF (50 available)',
      generation: 1,
    });
    expect(await h.db.select().from(agents).where(eq(agents.id, 'c-poor'))).toEqual([]);
    expect(await record('c-poor')).toMatchObject({
      status: 'refused',
      reason: 'lifeforce: p-poor cannot give 80 LF (50 available)',
    });
  });

  it('undoing a funded child removes it and gives its parent the debit back', async () => {
    await seedParent(h.db, 'p-undo');
    await configureBudget(h.db, 'p-undo', { capacity: 500 });
    const workflowId = workflowIds.spawn('p-undo', 'c-undo');
    await acts.spawnBegin({
      parentId: 'p-undo',
      childId: 'c-undo',
      type: 'trained',
      goals: [],
      budget: 200,
      workflowId,
    });
    await acts.spawnCopy({ parentId: 'p-undo', childId: 'c-undo', startedAtMs: Date.now() });
    await acts.spawnFund({ parentId: 'p-undo', childId: 'c-undo' });
    expect((await budgetReport(h.db, 'agent:p-undo'))!.available).toBe(300);
    const finish = {
      parentId: 'p-undo',
      childId: 'c-undo',
      workflowId,
      admitted: true,
      outcome: 'rolled_back' as const,
      reason: 'boom',
      note: 'undone',
      noteKey: 'k-undo',
    };
    expect(await acts.spawnFinish(finish)).toEqual({ status: 'rolled_back' });
    expect(await acts.spawnFinish(finish)).toEqual({ status: 'rolled_back' });
    expect(await h.db.select().from(agents).where(eq(agents.id, 'c-undo'))).toEqual([]);
    expect(await rowCounts(h.db, 'c-undo')).toEqual(
      Object.fromEntries(Object.keys(await rowCounts(h.db, 'c-undo')).map((k) => [k, 0])),
    );
    expect(await h.db.select().from(agentPeers).where(eq(agentPeers.peerAgentId, 'c-undo'))).toEqual([]);
    expect((await budgetReport(h.db, 'agent:p-undo'))!.available).toBe(500);
    expect(await record('c-undo')).toMatchObject({ status: 'rolled_back', reason: 'boom' });
    expect(await h.db.select().from(notes).where(eq(notes.idempotencyKey, 'k-undo'))).toHaveLength(1);
    // The name is free again for the same parent, and the new attempt is debited anew.
    const again = await spawn('p-undo', 'c-undo', 'newborn', { budget: 50 });
    expect(again.funded).toEqual({ ok: true, budget: 50 });
    expect((await budgetReport(h.db, 'agent:p-undo'))!.available).toBe(450);
  });

  it('a spawn that ended before it heard it was admitted is undone all the same', async () => {
    const workflowId = workflowIds.spawn('p-undo', 'c-early');
    await acts.spawnBegin({ parentId: 'p-undo', childId: 'c-early', type: 'newborn', goals: [], workflowId });
    await acts.spawnFinish({
      parentId: 'p-undo',
      childId: 'c-early',
      workflowId,
      admitted: false,
      outcome: 'rolled_back',
      reason: 'the spawn was cancelled',
      note: 'x',
      noteKey: 'k-early',
    });
    expect(await record('c-early')).toMatchObject({ status: 'rolled_back', reason: 'the spawn was cancelled' });
    // Another workflow's record under a name is never its to end.
    await acts.spawnFinish({
      parentId: 'p-undo',
      childId: 'c-undo',
      workflowId: 'agent/p-undo/spawn/other',
      admitted: true,
      outcome: 'rolled_back',
      reason: 'no',
      note: 'x',
      noteKey: 'k-other',
    });
    expect(await record('c-undo')).toMatchObject({ status: 'running' });
  });

  it('a child that runs is never undone', async () => {
    const r = await acts.spawnFinish({
      parentId: 'p-undo',
      childId: 'c-undo',
      workflowId: workflowIds.spawn('p-undo', 'c-undo'),
      admitted: true,
      outcome: 'rolled_back',
      reason: 'late',
      note: 'late',
      noteKey: 'k-late',
    });
    expect(r).toEqual({ status: 'running' });
    expect(await h.db.select().from(agents).where(eq(agents.id, 'c-undo'))).toHaveLength(1);
  });
});

describe('limits and names', () => {
  it('max_per_generation and max_descendants refuse with the reason, counting grandchildren for the grandparent', async () => {
    await h.db.insert(agents).values({ id: 'root-l', name: 'root' });
    await h.db.insert(agentConfig).values([
      { agentId: 'root-l', key: 'max_per_generation', value: 2 },
      { agentId: 'root-l', key: 'max_descendants', value: 3 },
    ]);
    expect((await spawn('root-l', 'l1', 'newborn')).begun.status).toBe('copying');
    expect((await spawn('root-l', 'l2', 'newborn')).begun.status).toBe('copying');
    const third = await spawn('root-l', 'l3', 'newborn');
    expect(third.begun).toEqual({
      status: 'refused',
      generation: 1,
      reason:
        'limit: root-l has 2 descendants in generation 1 and may have at most 2 per generation (config max_per_generation)',
    });
    expect(await record('l3')).toMatchObject({ status: 'refused', generation: 1 });
    // A grandchild is the root's third descendant: allowed; a fourth is not.
    expect((await spawn('l1', 'l1a', 'newborn')).begun).toMatchObject({ status: 'copying', generation: 2 });
    const fourth = await spawn('l2', 'l2a', 'newborn');
    expect(fourth.begun).toMatchObject({
      status: 'refused',
      reason: 'limit: root-l has 3 descendants and may have at most 3 (config max_descendants)',
    });
    // The refused l3 is not counted (three: l1, l2, l1a); raising the limit lets the fourth in.
    await h.db
      .update(agentConfig)
      .set({ value: 4 })
      .where(and(eq(agentConfig.agentId, 'root-l'), eq(agentConfig.key, 'max_descendants')));
    expect((await spawn('l2', 'l2a', 'newborn')).begun.status).toBe('copying');
  });

  it('a taken name is refused and leaves no record; a parent missing too', async () => {
    await h.db.insert(agents).values({ id: 'taken', name: 'taken' });
    expect((await spawn('root-l', 'taken', 'clone')).begun).toEqual({
      status: 'refused',
      generation: 1,
      reason: 'name taken: an agent taken exists',
    });
    expect(await record('taken')).toBeUndefined();
    expect((await spawn('l2', 'l1', 'clone')).begun).toEqual({
      status: 'refused',
      generation: 2,
      reason: "name taken: l1 is root-l's descendant (spawn running)",
    });
    expect((await spawn('nobody', 'orphan', 'clone')).begun).toEqual({
      status: 'refused',
      reason: 'no agent nobody to spawn from',
    });
    expect((await spawn('root-l', 'root-l', 'clone')).begun).toMatchObject({
      status: 'refused',
      reason: 'name taken: root-l is the parent itself',
    });
  });

  it('malformed input is refused naming the field', async () => {
    const bad = await rejection(
      acts.spawnBegin({ parentId: 'root-l', childId: 'no/slash', type: 'clone', goals: [], workflowId: 'w' }),
    );
    expect(bad.nonRetryable).toBe(true);
    expect(bad.message).toMatch(/^spawnBegin: childId: a name that becomes the child's id/);
    const type = await rejection(
      acts.spawnBegin({ parentId: 'root-l', childId: 'ok', type: 'twin' as never, goals: [], workflowId: 'w' }),
    );
    expect(type.message).toMatch(/^spawnBegin: type: /);
  });
});

describe('the spawn command', () => {
  const commands = () => createCommandActivities({ db: h.db });
  const apply = (agentId: string, tick: number, args: Record<string, unknown>) =>
    commands().applyCommands({
      agentId,
      tick,
      mode: 'main',
      workflowId: `agent/${agentId}`,
      commands: [{ cmdId: 's', type: 'spawn', args }],
    });

  it('asks for the spawn workflow with the child as an effect', async () => {
    await h.db.insert(agents).values({ id: 'cmd-p', name: 'cmd-p' });
    const [o] = await apply('cmd-p', 1, { type: 'trained', name: 'cmd-c', goals: ['g1'], budget: 5 });
    expect(o).toMatchObject({
      status: 'applied',
      effects: [{ kind: 'spawn', type: 'trained', name: 'cmd-c', goals: ['g1'], budget: 5, cmdId: 's' }],
    });
    expect(o!.message).toMatch(
      /spawning trained cmd-c \(generation 1, 5 LF from your budget\) as agent\/cmd-p\/spawn\/cmd-c/,
    );
  });

  it('refuses what it can see at once: a taken name, a limit', async () => {
    await h.db.insert(agentConfig).values({ agentId: 'cmd-p', key: 'max_descendants', value: 0 });
    const [limit] = await apply('cmd-p', 2, { type: 'clone', name: 'cmd-d' });
    expect(limit).toMatchObject({ status: 'error', effects: [] });
    expect(limit!.message).toMatch(/spawn refused: limit: cmd-p has 0 descendants and may have at most 0/);
    const [taken] = await apply('cmd-p', 3, { type: 'clone', name: 'taken' });
    expect(taken!.message).toMatch(/spawn refused: name taken: an agent taken exists/);
  });

  it('names the bad field of malformed args', async () => {
    const [o] = await apply('cmd-p', 4, { type: 'clone', name: 'bad name!', budget: -1, extra: 1 });
    expect(o!.status).toBe('rejected');
    expect(o!.message).toMatch(/args\.name: a name that becomes the child's id/);
    const [row] = await h.db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.agentId, 'cmd-p'), eq(commandLog.tick, 4)));
    expect(row!.reason).toMatch(/args\.budget: a positive amount of LF/);
    expect(row!.reason).toMatch(/unknown field 'extra'/);
  });
});

describe('the copy plan', () => {
  it('takes only tables of the agent’s state', () => {
    expect(() => copyPlan(['diary_entries', 'spawns'])).toThrow(/not a table of the agent's state: spawns/);
    expect(copyPlan(['links', 'concepts']).map((t) => t.name)).toEqual(['concepts', 'links']);
  });
});

describe('lineage', () => {
  it('ancestors up to the root and every spawn below, with kind, generation and status', async () => {
    const l = await lineage(h.db, 'l1');
    expect(l!.ancestors.map((a) => [a.id, a.kind, a.generation])).toEqual([['root-l', 'root', 0]]);
    expect(l!.self).toMatchObject({ id: 'l1', kind: 'newborn', generation: 1, spawn: { status: 'running' } });
    expect(l!.descendants.map((d) => [d.id, d.status, d.spawn?.status])).toEqual([['l1a', 'created', 'running']]);
    const root = await lineage(h.db, 'root-l');
    const flat = (nodes: NonNullable<typeof root>['descendants'], depth = 0): string[] =>
      nodes.flatMap((n) => [
        `${'  '.repeat(depth)}${n.id} g${n.generation} ${n.spawn?.status}`,
        ...flat(n.children, depth + 1),
      ]);
    expect(flat(root!.descendants)).toEqual([
      'l1 g1 running',
      '  l1a g2 running',
      'l2 g1 running',
      '  l2a g2 running',
      'l3 g1 refused',
    ]);
    expect(await lineage(h.db, 'nobody')).toBeUndefined();
  });
});
