/**
 * No dead config knobs: every key the command catalogue advertises to the agent (its help's
 * config section) changes behaviour. The keys are read from the catalogue itself, so a new
 * advertised key without a probe here fails. Each probe runs the agent loop (time-skipping
 * server, product bundle, real activities, scripted model) or the activity the key steers, on
 * a real migrated Postgres, with the key at two values, and observes something other than
 * the value itself (the prompt also lists the config, so no probe looks at that section).
 */
import { and, eq, isNotNull } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentEmbedders } from '../../activities/embeddings/agent-embedder.js';
import { createActivities } from '../../activities/index.js';
import { recordFeedback } from '../../db/queries/learnings.js';
import { linkPeers } from '../../db/queries/peers.js';
import type { ChatMessage } from '../../activities/llm/index.js';
import type { ScriptedReplyFn } from '../../activities/llm/providers/scripted.js';
import { configKeyNames, configKeys, helpText, validateConfigValue } from '../../core/catalogue.js';
import { workflowIds } from '../../core/ids.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import {
  abstracts,
  agentConfig,
  agents,
  antiStagnationMetrics,
  goals,
  llmRecentResponses,
  llmRegistry,
  notes,
  processLog,
  tasks,
} from '../../db/schema/index.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { neutralReflexReplies } from '../helpers/scripted.js';
import { startLoop, withWorker } from '../helpers/harness.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

type Call = Parameters<ScriptedReplyFn>[0];
interface Behaviour {
  /** The tick's reply; `tick` is read from the prompt (a task loop's own tick in task mode). */
  think?: (tick: number, messages: ChatMessage[]) => string;
  emotion?: (tick: number) => string;
}
interface Seen {
  thinks: Array<{ tick: number; user: string; maxTokens?: number; time: number }>;
  emotionPrompts: string[];
}

const suite = timeSkippingSuite();
let database: MigratedDatabase;
let activities: ReturnType<typeof createActivities>;
const behaviours = new Map<number, { agentId: string; b: Behaviour; seen: Seen }>();
const seenBy = new Map<string, Seen>();

const text = (m: ChatMessage[]) => m.map((x) => x.content).join('\n');
const words =
  'river lantern orbit quartz meadow cipher harbor violet engine glacier whisper canyon ember prism falcon tundra mosaic comet anchor velvet'.split(
    ' ',
  );
/** A reply that shares few words with the others (keeps novelty up), tagged with its tick. */
const varied = (tick: number) =>
  `marker-${tick}: thinking about the ${words[(tick * 7) % 20]} and the ${words[(tick * 3 + 5) % 20]}, count ${tick * 13}.`;

function reply(call: Call): string {
  const entry = behaviours.get(call.registryId ?? -1);
  if (!entry) throw new Error(`no behaviour for registry row ${call.registryId}`);
  const all = text(call.messages);
  const tick = Number(/tick (\d+), time/.exec(all)?.[1] ?? 0);
  if (call.purpose === 'emotion') {
    entry.seen.emotionPrompts.push(all);
    return entry.b.emotion?.(entry.seen.emotionPrompts.length) ?? neutralReflexReplies.emotion!;
  }
  if (call.purpose === 'novelty') return '{"novelty": 80, "new": ["a fresh idea"], "tags": ["probe"]}';
  if (call.purpose !== undefined && call.purpose !== 'think') return neutralReflexReplies[call.purpose] ?? '+1 -- fine';
  const time = Date.parse(/tick \d+, time (\S+)/.exec(all)?.[1] ?? '');
  entry.seen.thinks.push({
    tick,
    user: call.messages.find((m) => m.role === 'user')?.content ?? '',
    maxTokens: call.params.maxTokens,
    time,
  });
  return entry.b.think?.(tick, call.messages) ?? varied(tick);
}

beforeAll(async () => {
  database = await migratedDatabase('mindloop_config_knobs', 6);
  activities = createActivities({ db: database.db, llm: { env: {}, toolsDir: repoToolsDir, scriptedReply: reply } });
}, 120_000);
afterAll(async () => {
  await database?.dispose();
});

/** An agent with its own scripted model and the given agent_config (as a human would set it). */
async function addAgent(agentId: string, config: Record<string, unknown>, b: Behaviour = {}): Promise<number> {
  await database.db.insert(agents).values({ id: agentId, name: agentId });
  const [row] = await database.db
    .insert(llmRegistry)
    .values({
      agentId,
      name: `${agentId}-mind`,
      provider: 'scripted',
      model: `${agentId}-mind`,
      role: 'agent',
      priority: 1,
    })
    .returning({ id: llmRegistry.id });
  const seen: Seen = { thinks: [], emotionPrompts: [] };
  behaviours.set(row!.id, { agentId, b, seen });
  seenBy.set(agentId, seen);
  await database.db
    .insert(agentConfig)
    .values(Object.entries(config).map(([key, value]) => ({ agentId, key, value: value as object })));
  return row!.id;
}

let queue = 0;
/** Run the agent loop for `maxTicks` ticks; `after` runs while the worker still polls (child workflows). */
async function runLoop(agentId: string, maxTicks: number, after?: () => Promise<void>): Promise<void> {
  const taskQueue = `knobs-${++queue}`;
  await withWorker(suite.env, { taskQueue, workflowBundle: suite.bundle, activities }, async () => {
    const h = await startLoop(suite.env.client, taskQueue, { agentId, maxTicks });
    await h.result();
    await after?.();
  });
}

const thinks = (agentId: string) => seenBy.get(agentId)!.thinks;
/** Which earlier replies (by their marker) the prompt of tick `tick` showed. */
const shownAt = (agentId: string, tick: number) =>
  [
    ...new Set(
      [...(thinks(agentId).find((t) => t.tick === tick)?.user ?? '').matchAll(/marker-(\d+):/g)].map((m) =>
        Number(m[1]),
      ),
    ),
  ].sort((a, b) => a - b);
const secondsBetween = (agentId: string, from: number, to: number) => {
  const at = (t: number) => thinks(agentId).find((x) => x.tick === t)!.time;
  return (at(to) - at(from)) / 1000;
};

/** The short tier's memory manager on seeded rows: which seeded ticks it archives at tick 30. */
async function memoryArchives(
  agentId: string,
  rows: Array<{ tick: number; novelty: number; tags?: string[]; anxiety?: number }>,
  goalTags: string[] = [],
): Promise<number[]> {
  if (goalTags.length) await database.db.insert(goals).values({ agentId, title: 'the goal', tags: goalTags });
  await database.db.insert(llmRecentResponses).values(
    rows.map((r) => ({
      agentId,
      tick: r.tick,
      content: varied(r.tick),
      novelty: r.novelty,
      tags: r.tags ?? ['common'],
      emotions: r.anxiety ? [{ emotion: 'anxiety', strength: r.anxiety, reason: 'worry' }] : [],
    })),
  );
  const [now] = await database.db
    .insert(llmRecentResponses)
    .values({ agentId, tick: 30, content: varied(30) })
    .returning({ id: llmRecentResponses.id });
  const params = { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0 };
  await activities.tickReflexes({
    agentId,
    tick: 30,
    workflowId: `agent/${agentId}`,
    responseId: now!.id,
    commands: [],
    params,
    defaults: params,
    stagnation: { lowStreak: 0, anxietyStreak: 0, pending: null, lastStrategyTick: 0 },
    contextMode: 'standard',
  });
  const archived = await database.db
    .select({ tick: llmRecentResponses.tick })
    .from(llmRecentResponses)
    .where(and(eq(llmRecentResponses.agentId, agentId), isNotNull(llmRecentResponses.archivedAt)));
  return archived.map((r) => r.tick).sort((a, b) => a - b);
}

const reflexLites = async (agentId: string) =>
  (
    await database.db
      .select()
      .from(antiStagnationMetrics)
      .where(and(eq(antiStagnationMetrics.agentId, agentId), eq(antiStagnationMetrics.action, 'reflex_lite')))
  ).length;

/** Two children asked for in a row (the spawn's admission): whether the second is admitted or refused. */
async function secondChild(agentId: string): Promise<string[]> {
  const statuses: string[] = [];
  for (const name of ['a', 'b']) {
    const r = await activities.spawnBegin({
      parentId: agentId,
      childId: `${agentId}-${name}`,
      type: 'newborn',
      goals: [],
      workflowId: workflowIds.spawn(agentId, `${agentId}-${name}`),
    });
    statuses.push(r.status);
  }
  return statuses;
}

interface Probe {
  /** Two valid values whose behaviour differs. */
  values: readonly [unknown, unknown];
  /** Other agent_config both runs share. */
  extra?: Record<string, unknown>;
  behaviour?: Behaviour;
  /** Runs what the key steers for a fresh agent configured with it; returns what it did. */
  observe(agentId: string): Promise<unknown>;
}

/** One probe per advertised key. */
const probes: Record<string, Probe> = {
  delay_ms: {
    values: [1000, 20_000],
    // Two pauses between ticks 1 and 3: ~2 s (plus the ticks' work) or at least 40 s.
    observe: async (id) => (await runLoop(id, 3), secondsBetween(id, 1, 3) >= 30),
  },
  recent_responses: {
    values: [1, 4],
    observe: async (id) => (await runLoop(id, 5), shownAt(id, 5)),
  },
  context_mode: {
    values: ['standard', 'meditation'],
    extra: { recent_responses: 3 },
    // standard: the last K replies; meditation: K spread over the whole history.
    observe: async (id) => (await runLoop(id, 9), shownAt(id, 9)),
  },
  notes_mode: {
    values: ['auto', 'manual'],
    observe: async (id) => {
      await database.db
        .insert(notes)
        .values({ agentId: id, direction: 'in', source: 'user', text: 'The secret word is heliotrope.', priority: 3 });
      await runLoop(id, 1);
      return thinks(id)[0]!.user.includes('heliotrope');
    },
  },
  idle_timeout_ms: {
    values: [5000, 120_000],
    behaviour: {
      think: (tick) =>
        tick === 1
          ? `Resting.\n${renderCommandBlock([{ cmdId: 'i', type: 'cycle.idle', args: { on: true, wake_on: ['timeout'] } }])}`
          : varied(tick),
    },
    observe: async (id) => (await runLoop(id, 2), secondsBetween(id, 1, 2) >= 60),
  },
  emotions: {
    values: [
      ['calm', 'joy'],
      ['zest', 'calm'],
    ],
    // The evaluator's prompt offers the configured names.
    observe: async (id) => (await runLoop(id, 1), seenBy.get(id)!.emotionPrompts[0]!.includes('zest')),
  },
  semantic_memory: {
    values: ['on', 'off'],
    // Which embedder a worker with the offline one gives the agent's memory: it, or none (words only).
    observe: async (id) => {
      const choice = await createAgentEmbedders({ env: {}, toolsDir: repoToolsDir }).forAgent(database.db, id);
      return choice.ok ? `by meaning: ${choice.embedder.model}` : `by words: ${choice.why}`;
    },
  },
  novelty_threshold: {
    values: [0.35, 0.6],
    observe: (id) =>
      memoryArchives(id, [
        { tick: 1, novelty: 50 },
        { tick: 2, novelty: 90 },
      ]),
  },
  anxiety_threshold: {
    values: [3, 4],
    behaviour: { emotion: () => 'anxiety:4 (a deadline)' },
    observe: async (id) => (await runLoop(id, 3), reflexLites(id)),
  },
  anxiety_ticks: {
    values: [2, 5],
    behaviour: { emotion: () => 'anxiety:5 (panic)' },
    observe: async (id) => (await runLoop(id, 3), reflexLites(id)),
  },
  lru_limit: {
    values: [10, 500],
    observe: (id) =>
      memoryArchives(
        id,
        Array.from({ length: 14 }, (_, i) => ({ tick: i + 1, novelty: 90 })),
      ),
  },
  emotion_weight: {
    values: [0.6, 0],
    // A dull reply kept only for its strong emotion (retention 0.64 at weight 0.6, 0.1 at 0).
    observe: (id) =>
      memoryArchives(id, [
        { tick: 1, novelty: 10, anxiety: 5 },
        { tick: 2, novelty: 90 },
      ]),
  },
  goal_focus: {
    values: [0.7, 0],
    // astronomy is on two rows, so it is not rare (the diversity boost stays out of it).
    observe: (id) =>
      memoryArchives(
        id,
        [
          { tick: 1, novelty: 10, tags: ['astronomy', 'common'] },
          { tick: 2, novelty: 90, tags: ['astronomy', 'common'] },
        ],
        ['astronomy'],
      ),
  },
  diversity_boost: {
    values: [0.8, 0],
    observe: (id) =>
      memoryArchives(id, [
        { tick: 1, novelty: 10, tags: ['lonely', 'common'] },
        { tick: 2, novelty: 90 },
        { tick: 3, novelty: 90 },
      ]),
  },
  abstract_every: {
    values: [0, 2],
    observe: async (id) => (
      await runLoop(id, 4),
      (
        await database.db
          .select()
          .from(abstracts)
          .where(and(eq(abstracts.agentId, id), eq(abstracts.trigger, 'interval')))
      ).map((a) => a.triggerKey)
    ),
  },
  abstracts_strategy: {
    values: ['recency', 'keyword_cluster'],
    extra: { abstract_every: 2 },
    observe: async (id) => (
      await runLoop(id, 2),
      (await database.db.select().from(abstracts).where(eq(abstracts.agentId, id))).map((a) => a.strategy)
    ),
  },
  task_loop_max_ticks: {
    values: [1, 3],
    // The main loop starts an auxiliary loop without a tick cap of its own; the task loop would
    // finish its task at its 6th tick. Observed: how many ticks it ran.
    behaviour: {
      think: (tick, messages) => {
        const all = text(messages);
        if (/auxiliary loop working only on task #(\d+)/.test(all)) {
          const taskId = Number(/auxiliary loop working only on task #(\d+)/.exec(all)![1]);
          return tick >= 6
            ? `Finished.\n${renderCommandBlock([{ cmdId: 'done', type: 'tasks.status', args: { id: taskId, status: 'done' } }])}`
            : `Task tick ${tick}: working.`;
        }
        return `Delegating.\n${renderCommandBlock([{ cmdId: 'l', type: 'llm_task.start', args: { title: 'count the stars' } }])}`;
      },
    },
    observe: async (id) => {
      await runLoop(id, 1, async () => {
        const [task] = await database.db.select({ id: tasks.id }).from(tasks).where(eq(tasks.agentId, id));
        await suite.env.client.workflow.getHandle(workflowIds.task(id, task!.id)).result();
      });
      return (
        await database.db
          .select()
          .from(processLog)
          .where(and(eq(processLog.agentId, id), eq(processLog.kind, 'task_loop')))
      ).length;
    },
  },
  max_tokens: {
    values: [64, 256],
    observe: async (id) => (await runLoop(id, 1), thinks(id)[0]!.maxTokens),
  },
  learning_threshold: {
    values: [2, 5],
    // Two identical rejections: a learning derived, or not yet.
    observe: async (id) => {
      await recordFeedback(database.db, { agentId: id, kind: 'reject', action: 'diary.add', reason: 'too long' });
      const second = await recordFeedback(database.db, {
        agentId: id,
        kind: 'reject',
        action: 'diary.add',
        reason: 'too long',
      });
      return second.learning !== undefined;
    },
  },
  auto_pass_destructive: {
    values: [false, true],
    // No validator: a delete is held for a human unless the human opted in.
    observe: async (id) => {
      const [row] = await database.db
        .insert(llmRecentResponses)
        .values({ agentId: id, tick: 1, content: varied(1) })
        .returning({ id: llmRecentResponses.id });
      const params = { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0 };
      const r = await activities.tickReflexes({
        agentId: id,
        tick: 1,
        workflowId: `agent/${id}`,
        responseId: row!.id,
        commands: [{ cmdId: 'del', type: 'diary.delete', args: { id: 1 } }],
        params,
        defaults: params,
        stagnation: { lowStreak: 0, anxietyStreak: 0, pending: null, lastStrategyTick: 0 },
        contextMode: 'standard',
      });
      return 'del' in r.held;
    },
  },
  max_descendants: {
    values: [1, 3],
    extra: { max_per_generation: 10 },
    observe: (id) => secondChild(id),
  },
  max_per_generation: {
    values: [1, 3],
    extra: { max_descendants: 10 },
    observe: (id) => secondChild(id),
  },
  isolation_ticks: {
    values: [1, 4],
    // Its only peer is stopped: after 3 ticks alone the agent is isolated, or not yet.
    observe: async (id) => {
      await database.db.insert(agents).values({ id: `${id}-peer`, name: 'peer', status: 'stopped' });
      await linkPeers(database.db, id, `${id}-peer`);
      await runLoop(id, 3);
      const [row] = await database.db.select({ mode: agents.operatingMode }).from(agents).where(eq(agents.id, id));
      return row!.mode;
    },
  },
  peer_validators: {
    values: [0, 1],
    // A reachable peer validates the reply (a normal validation), or nobody does (auto_pass).
    observe: async (id) => {
      const peer = `${id}-peer`;
      await database.db.insert(agents).values({ id: peer, name: 'peer', status: 'running', lastSeenAt: new Date() });
      const [model] = await database.db
        .insert(llmRegistry)
        .values({
          agentId: peer,
          name: `${peer}-mind`,
          provider: 'scripted',
          model: `${peer}-mind`,
          role: 'agent',
          priority: 1,
        })
        .returning({ id: llmRegistry.id });
      behaviours.set(model!.id, { agentId: peer, b: {}, seen: { thinks: [], emotionPrompts: [] } });
      await linkPeers(database.db, id, peer);
      const [row] = await database.db
        .insert(llmRecentResponses)
        .values({ agentId: id, tick: 1, content: varied(1) })
        .returning({ id: llmRecentResponses.id });
      const params = { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0 };
      const r = await activities.tickReflexes({
        agentId: id,
        tick: 1,
        workflowId: `agent/${id}`,
        responseId: row!.id,
        commands: [],
        params,
        defaults: params,
        stagnation: { lowStreak: 0, anxietyStreak: 0, pending: null, lastStrategyTick: 0 },
        contextMode: 'standard',
      });
      return [r.validationMode, r.rating];
    },
  },
};

describe('every config key the catalogue advertises changes behaviour', () => {
  it('the help shows the agent exactly the catalogue keys', () => {
    const help = helpText('config');
    for (const key of configKeyNames) expect(help).toContain(`  ${key} (default `);
  });

  it.each([...configKeyNames])(
    '%s',
    async (key) => {
      const probe = probes[key];
      expect(
        probe,
        `config key '${key}' is advertised but no probe shows that it does anything: add one here, or remove the key`,
      ).toBeDefined();
      const observed: unknown[] = [];
      for (const [i, value] of probe!.values.entries()) {
        expect(validateConfigValue(key, value)).toMatchObject({ ok: true });
        const agentId = `${key.replace(/_/g, '-')}-${i}`;
        await addAgent(agentId, { ...probe!.extra, [key]: value }, probe!.behaviour);
        observed.push(await probe!.observe(agentId));
      }
      expect(
        observed[0],
        `${key}: ${JSON.stringify(probe!.values[0])} and ${JSON.stringify(probe!.values[1])} behaved the same`,
      ).not.toEqual(observed[1]);
      // The default is one of the schema's values (what an unset key means).
      expect(configKeys[key].schema.safeParse(configKeys[key].default).success).toBe(true);
    },
    120_000,
  );

  it('no probe is left for a key the catalogue no longer advertises', () => {
    expect(Object.keys(probes).filter((k) => !(configKeyNames as readonly string[]).includes(k))).toEqual([]);
  });
});
