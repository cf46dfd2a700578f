/**
 * The loop makes abstracts by itself, on a real migrated Postgres with the real activities and
 * the scripted model: every `abstract_every` ticks (in think), when a goal or task closes (in
 * the command's transaction), and when the context mode changes. Each firing is keyed by agent,
 * tick and trigger, so a retried activity makes none twice. The last test runs them all through
 * the agent loop on the time-skipping server.
 */
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ThinkInput } from '../../activities/tick/think.js';
import type { ParsedCommand } from '../../core/loop-types.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import {
  abstracts,
  agentConfig,
  agents,
  goals,
  llmRecentResponses,
  llmRegistry,
  tasks,
} from '../../db/schema/index.js';
import { startLoop, withWorker } from '../helpers/harness.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { thinkScript } from '../helpers/scripted.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

let database: MigratedDatabase;
let activities: ReturnType<typeof createActivities>;
/** What each agent's model says at a tick, by its llm_registry row (the prompt's tick line decides). */
const scripts = new Map<number, (tick: number) => string>();

beforeAll(async () => {
  database = await migratedDatabase('mindloop_abstract_triggers', 6);
  activities = createActivities({
    db: database.db,
    llm: {
      env: {},
      toolsDir: repoToolsDir,
      scriptedReply: thinkScript((messages, _n, call) => {
        const tick = Number(/tick (\d+), time/.exec(messages.map((m) => m.content).join('\n'))?.[1] ?? 0);
        return (
          scripts.get(call.registryId ?? -1)?.(tick) ??
          `Tick ${tick}: a thought about orbits and lanterns, number ${tick * 7}.`
        );
      }),
    },
  });
}, 60_000);
afterAll(async () => {
  await database?.dispose();
});

/** An agent with a scripted model (its registry row id returned) and the given agent_config. */
async function addAgent(id: string, config: Record<string, unknown> = {}): Promise<number> {
  await database.db.insert(agents).values({ id, name: id });
  const [row] = await database.db
    .insert(llmRegistry)
    .values({ agentId: id, name: `${id}-mind`, provider: 'scripted', model: `${id}-mind`, role: 'agent', priority: 1 })
    .returning({ id: llmRegistry.id });
  const entries = Object.entries(config);
  if (entries.length)
    await database.db
      .insert(agentConfig)
      .values(entries.map(([key, value]) => ({ agentId: id, key, value: value as object })));
  return row!.id;
}

const thinkInput = (
  agentId: string,
  tick: number,
  contextMode: ThinkInput['loop']['contextMode'] = 'standard',
): ThinkInput => ({
  agentId,
  tick,
  workflowId: `agent/${agentId}`,
  now: new Date(Date.UTC(2030, 0, 1, 0, 0, tick)).toISOString(),
  mode: 'main',
  loop: { contextMode, recentK: 5, notesMode: 'auto' },
  params: { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0, maxTokens: 512 },
});

const abstractsOf = (agentId: string) =>
  database.db
    .select({
      id: abstracts.id,
      trigger: abstracts.trigger,
      triggerKey: abstracts.triggerKey,
      tickFrom: abstracts.tickFrom,
      tickTo: abstracts.tickTo,
      strategy: abstracts.strategy,
    })
    .from(abstracts)
    .where(eq(abstracts.agentId, agentId))
    .orderBy(asc(abstracts.id));

/** A recorded reply at `tick` (what think writes), thought in `mode`. */
async function reply(
  agentId: string,
  tick: number,
  contextMode: 'standard' | 'concentration' | 'meditation' = 'standard',
): Promise<void> {
  await database.db
    .insert(llmRecentResponses)
    .values({ agentId, tick, content: `Tick ${tick}: notes on quartz and meadows, step ${tick}.`, contextMode });
}

const apply = (
  agentId: string,
  tick: number,
  commands: ParsedCommand[],
  extra: { mode?: 'main' | 'task'; taskId?: number } = {},
) =>
  activities.applyCommands({
    agentId,
    tick,
    workflowId: `agent/${agentId}`,
    mode: extra.mode ?? 'main',
    ...(extra.taskId ? { taskId: extra.taskId } : {}),
    commands,
  });

describe('abstracts the loop makes by itself (real Postgres)', () => {
  it('abstract_every: think makes one on every N-th tick, keyed by the tick; a retried think makes none twice; 0 turns it off', async () => {
    await addAgent('every3', { abstract_every: 3 });
    for (let t = 1; t <= 7; t++) await activities.think(thinkInput('every3', t));
    expect(await abstractsOf('every3')).toMatchObject([
      { trigger: 'interval', triggerKey: '3:interval', tickFrom: 1, tickTo: 3, strategy: 'recency' },
      { trigger: 'interval', triggerKey: '6:interval', tickFrom: 4, tickTo: 6 },
    ]);
    // A retried think at tick 6 takes the recorded path: still the one abstract.
    await activities.think(thinkInput('every3', 6));
    expect(await abstractsOf('every3')).toHaveLength(2);
    // A first attempt that died after recording the reply but before the abstract: the retry makes it.
    await database.db
      .delete(abstracts)
      .where(and(eq(abstracts.agentId, 'every3'), eq(abstracts.triggerKey, '6:interval')));
    await activities.think(thinkInput('every3', 6));
    expect((await abstractsOf('every3')).map((a) => a.triggerKey)).toEqual(['3:interval', '6:interval']);

    await addAgent('never', { abstract_every: 0 });
    for (let t = 1; t <= 4; t++) await activities.think(thinkInput('never', t));
    expect(await abstractsOf('never')).toEqual([]);
  });

  it('abstract_every defaults to 50 when the agent has not set it', async () => {
    await addAgent('default-every');
    await database.db.insert(llmRecentResponses).values(
      Array.from({ length: 48 }, (_, i) => ({
        agentId: 'default-every',
        tick: i + 1,
        content: `Tick ${i + 1}: filler ${i}.`,
      })),
    );
    await activities.think(thinkInput('default-every', 49));
    expect(await abstractsOf('default-every')).toEqual([]);
    await activities.think(thinkInput('default-every', 50));
    expect(await abstractsOf('default-every')).toMatchObject([
      { trigger: 'interval', triggerKey: '50:interval', tickFrom: 1, tickTo: 50 },
    ]);
  });

  it('a goal that becomes completed or failed, and a task that becomes done or failed, gets an abstract in the same transaction; a retry makes none twice', async () => {
    await addAgent('closer');
    const [g1, g2] = await database.db
      .insert(goals)
      .values([
        { agentId: 'closer', title: 'chart the river' },
        { agentId: 'closer', title: 'name the stars' },
      ])
      .returning({ id: goals.id });
    const [t1, t2] = await database.db
      .insert(tasks)
      .values([
        { agentId: 'closer', title: 'measure the bank' },
        { agentId: 'closer', title: 'drop it' },
      ])
      .returning({ id: tasks.id });

    await reply('closer', 1);
    await apply('closer', 1, [{ cmdId: 'p1', type: 'goals.status', args: { id: g1!.id, status: 'paused' } }]);
    expect(await abstractsOf('closer')).toEqual([]); // pausing closes nothing

    await reply('closer', 2);
    const done = await apply('closer', 2, [
      { cmdId: 'c1', type: 'goals.status', args: { id: g1!.id, status: 'completed' } },
    ]);
    expect(done[0]).toMatchObject({ status: 'applied' });
    expect(done[0]!.message).toMatch(/abstract #\d+/);
    // The retried activity finds c1 in the command log: no second abstract.
    await apply('closer', 2, [{ cmdId: 'c1', type: 'goals.status', args: { id: g1!.id, status: 'completed' } }]);
    expect(await abstractsOf('closer')).toMatchObject([
      { trigger: 'goal_closed', triggerKey: '2:goal_closed', tickFrom: 1, tickTo: 2 },
    ]);

    await reply('closer', 3);
    await apply('closer', 3, [
      { cmdId: 'f1', type: 'goals.status', args: { id: g2!.id, status: 'failed', failure_reason: 'cloudy' } },
      { cmdId: 't1', type: 'tasks.status', args: { id: t1!.id, status: 'done' } },
    ]);
    await reply('closer', 4);
    await apply('closer', 4, [{ cmdId: 'x1', type: 'tasks.status', args: { id: t2!.id, status: 'cancelled' } }]);
    await reply('closer', 5);
    await apply('closer', 5, [{ cmdId: 't2', type: 'tasks.status', args: { id: t1!.id, status: 'done' } }]); // already done
    // Tick 3: the failed goal digests tick 3; the task closed in the same tick has nothing newer to digest.
    expect(await abstractsOf('closer')).toMatchObject([
      { trigger: 'goal_closed', triggerKey: '2:goal_closed' },
      { trigger: 'goal_closed', triggerKey: '3:goal_closed', tickFrom: 3, tickTo: 3 },
    ]);

    // A task loop closing its own task: keyed by the task (its ticks are its own).
    const [t3] = await database.db
      .insert(tasks)
      .values({ agentId: 'closer', title: 'write it up' })
      .returning({ id: tasks.id });
    await reply('closer', 6);
    const out = await apply(
      'closer',
      1,
      [{ cmdId: 's1', type: 'tasks.status', args: { id: t3!.id, status: 'failed' } }],
      { mode: 'task', taskId: t3!.id },
    );
    expect(out[0]).toMatchObject({ status: 'applied' });
    expect((await abstractsOf('closer')).at(-1)).toMatchObject({
      trigger: 'task_closed',
      triggerKey: `task${t3!.id}.1:task_closed`,
      tickFrom: 4,
      tickTo: 6,
    });
  });

  it('a context mode change (cycle or config.set context_mode) digests the work done in the old mode; the same mode again does not', async () => {
    await addAgent('shifter');
    await reply('shifter', 1, 'standard');
    await apply('shifter', 1, [{ cmdId: 'm1', type: 'cycle.meditation', args: { on: true } }]);
    await apply('shifter', 1, [{ cmdId: 'm1', type: 'cycle.meditation', args: { on: true } }]); // retried
    await reply('shifter', 2, 'meditation');
    await apply('shifter', 2, [{ cmdId: 'm2', type: 'cycle.meditation', args: { on: true } }]); // already meditating
    await reply('shifter', 3, 'meditation');
    await apply('shifter', 3, [{ cmdId: 'm3', type: 'cycle.concentration', args: { on: true, tags: ['quartz'] } }]);
    await reply('shifter', 4, 'concentration');
    await apply('shifter', 4, [{ cmdId: 'm4', type: 'config.set', args: { key: 'context_mode', value: 'standard' } }]);
    expect(await abstractsOf('shifter')).toMatchObject([
      { trigger: 'mode_change', triggerKey: '1:mode_change', tickFrom: 1, tickTo: 1 },
      { trigger: 'mode_change', triggerKey: '3:mode_change', tickFrom: 2, tickTo: 3 },
      { trigger: 'mode_change', triggerKey: '4:mode_change', tickFrom: 4, tickTo: 4 },
    ]);
  });
});

describe('through the agent loop (time-skipping server, scripted model)', () => {
  const suite = timeSkippingSuite();

  it('every 2 ticks, on a goal closing and on a mode change, each once, in order', async () => {
    const mind = await addAgent('looper', { abstract_every: 2 });
    const [goal] = await database.db
      .insert(goals)
      .values({ agentId: 'looper', title: 'finish the map' })
      .returning({ id: goals.id });
    scripts.set(mind, (tick) => {
      if (tick === 3)
        return `The map is finished.\n${renderCommandBlock([{ cmdId: 'g', type: 'goals.status', args: { id: goal!.id, status: 'completed' } }])}`;
      if (tick === 5)
        return `Time to wander.\n${renderCommandBlock([{ cmdId: 'm', type: 'cycle.meditation', args: { on: true } }])}`;
      return `Tick ${tick}: thinking about ember and prism, idea ${tick * 11}.`;
    });
    const spec = { taskQueue: 'abstract-triggers', workflowBundle: suite.bundle, activities };
    await withWorker(suite.env, spec, async (taskQueue) => {
      const h = await startLoop(suite.env.client, taskQueue, { agentId: 'looper', maxTicks: 6 });
      expect(await h.result()).toMatchObject({ ticks: 6, reason: 'max_ticks' });
    });
    expect((await database.db.select().from(goals).where(eq(goals.id, goal!.id)))[0]?.status).toBe('completed');
    expect((await abstractsOf('looper')).map((a) => [a.trigger, a.triggerKey, a.tickFrom, a.tickTo])).toEqual([
      ['interval', '2:interval', 1, 2],
      ['goal_closed', '3:goal_closed', 3, 3],
      ['interval', '4:interval', 4, 4],
      ['mode_change', '5:mode_change', 5, 5],
      ['interval', '6:interval', 6, 6],
    ]);
    // Tick 6 was thought in the new mode, and its context showed the newest abstracts.
    const sixth = await database.db
      .select()
      .from(llmRecentResponses)
      .where(and(eq(llmRecentResponses.agentId, 'looper'), eq(llmRecentResponses.tick, 6)));
    expect(sixth[0]?.contextMode).toBe('meditation');
  }, 120_000);
});
