/**
 * The activities that tell the bus of an agent's events, on the real NATS and a real migrated
 * Postgres with the scripted model: think → heartbeat and reply; tickReflexes → the verdict it
 * recorded; openEscalation → the escalation it created; every place a learning is stored in an
 * agent's name (the saveLearning and recordFeedback activities, the learning sink, outcome
 * feedback in applyCommands, a feedback note, a nudge when an escalation finishes) → the
 * learning. Each is told once its write committed, and a retry that finds the work done tells
 * nobody again. A closed bus or a sink that throws never fails an activity.
 */
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentEventSink } from '../../activities/agent-events.js';
import { createActivities } from '../../activities/index.js';
import { createLearningSink } from '../../activities/learnings.js';
import type { ThinkInput } from '../../activities/tick/think.js';
import { escalationInput } from '../../core/escalation.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { agentConfig, agents, escalations, learnings, llmRecentResponses, llmRegistry } from '../../db/schema/index.js';
import type { Bus, BusMessage } from '../../runtime/bus.js';
import { agentEventSink } from '../../runtime/bus-agents.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { cleanupBus, testBus, testRoot, until } from '../helpers/nats.js';
import { thinkScript } from '../helpers/scripted.js';

let bus: Bus & { lines: string[] };
let database: MigratedDatabase;
const busLog: string[] = [];

/** What the scripted agent says at each tick (the prompt's tick line decides). */
function say(tick: number): string {
  return `Tick ${tick}: I write down what I saw at the harbour.\nConfidence: 0.8\n${renderCommandBlock([{ cmdId: `d${tick}`, type: 'diary.add', args: { title: `Harbour ${tick}`, content: `Boats, number ${tick}.` } }])}`;
}
const llm = {
  env: {},
  toolsDir: repoToolsDir,
  scriptedReply: thinkScript((messages) =>
    say(Number(/tick (\d+), time/.exec(messages.map((m) => m.content).join('\n'))?.[1] ?? 0)),
  ),
};
const activitiesWith = (events: AgentEventSink) => createActivities({ db: database.db, llm, events });
let acts: ReturnType<typeof createActivities>;

beforeAll(async () => {
  bus = await testBus(testRoot('events'));
  database = await migratedDatabase('mindloop_bus_events', 4);
  acts = activitiesWith(agentEventSink(bus, (l) => busLog.push(l)));
}, 60_000);
afterAll(async () => {
  await cleanupBus(bus);
  await database?.dispose();
});

/** An agent with a scripted model, a scripted validator, and a learning threshold of 1 (one feedback makes a learning). */
async function addAgent(id: string): Promise<void> {
  await database.db.insert(agents).values({ id, name: id });
  await database.db.insert(llmRegistry).values([
    { agentId: id, name: `${id}-mind`, provider: 'scripted', model: `${id}-mind`, role: 'agent', priority: 1 },
    { agentId: id, name: `${id}-judge`, provider: 'scripted', model: `${id}-judge`, role: 'validator', priority: 1 },
  ]);
  await database.db.insert(agentConfig).values({ agentId: id, key: 'learning_threshold', value: 1 });
}

const thinkInput = (agentId: string, tick: number): ThinkInput => ({
  agentId,
  tick,
  workflowId: `agent/${agentId}`,
  now: new Date(Date.UTC(2030, 0, 1, 0, 0, tick)).toISOString(),
  mode: 'main',
  loop: { contextMode: 'standard', recentK: 5, notesMode: 'auto' },
  params: { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0, maxTokens: 512 },
});
const stagnation = { lowStreak: 0, anxietyStreak: 0, pending: null, lastStrategyTick: 0 };
const params = { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0 };

/** Every event of `agentId` from now on, in arrival order (one connection: publish order). */
async function watch(agentId: string) {
  const got: BusMessage[] = [];
  const beats: BusMessage[] = [];
  const subs = [
    bus.subscribe(bus.subjects.agentEvents(agentId), (m) => void got.push(m)),
    bus.on(bus.subjects.heartbeat(agentId), 'HeartbeatSignal', (m) => void beats.push(m)),
  ];
  await bus.flush();
  const of = (event: string) =>
    got.filter((m) => m.subject.endsWith(`.${event}`)).map((m) => m.payload as Record<string, unknown>);
  return { got, beats, of, stop: () => subs.forEach((s) => s.unsubscribe()) };
}

const learningRow = async (agentId: string, predicate: string) => {
  const [row] = await database.db
    .select()
    .from(learnings)
    .where(and(eq(learnings.agentId, agentId), eq(learnings.factPredicate, predicate)));
  return row!;
};

describe('activities publish the agent events they record', () => {
  it('think: the heartbeat and the reply of the recorded tick; tickReflexes: the verdict it recorded, not again on a retry', async () => {
    const id = 'hook.tick';
    await addAgent(id);
    const w = await watch(id);
    const t1 = await acts.think(thinkInput(id, 1));
    await until(() => w.beats.length === 1 && w.of('reply').length === 1, 'the beat and the reply of tick 1');
    expect(w.got[0]!.subject).toBe(`${bus.root}.high.agent.hook~2Etick.reply`);
    expect(w.of('reply')[0]).toEqual({
      agent_id: id,
      tick: 1,
      summary: t1.summary,
      model: `scripted:${id}-mind`,
      commands: 1,
      confidence: 0.8,
    });
    expect(t1.summary).toMatch(/^Tick 1: I write down what I saw at the harbour/);
    expect(w.beats[0]!.payload).toMatchObject({
      agent_id: id,
      tick: 1,
      loop: 'main',
      model: `scripted:${id}-mind`,
      replayed: false,
    });
    // Published after the reply row committed.
    expect(
      await database.db
        .select({ tick: llmRecentResponses.tick })
        .from(llmRecentResponses)
        .where(eq(llmRecentResponses.agentId, id)),
    ).toEqual([{ tick: 1 }]);

    const reflexInput = (tick: number, t: typeof t1) => ({
      agentId: id,
      tick,
      workflowId: `agent/${id}`,
      responseId: t.responseId!,
      commands: t.commands.map((c) => ({ cmdId: c.cmdId, type: c.type, args: c.args })),
      params,
      defaults: params,
      stagnation,
      contextMode: 'standard' as const,
    });
    const v1 = await acts.tickReflexes(reflexInput(1, t1));
    await until(() => w.of('verdict').length === 1, 'the verdict of tick 1');
    const [row] = await database.db
      .select()
      .from(llmRecentResponses)
      .where(and(eq(llmRecentResponses.agentId, id), eq(llmRecentResponses.tick, 1)));
    expect(row).toMatchObject({ validationMode: 'normal', rating: 1 });
    expect(w.of('verdict')[0]).toEqual({
      agent_id: id,
      tick: 1,
      validation_mode: 'normal',
      rating: v1.rating,
      notes: v1.notes,
    });
    expect(v1.rating).toBe(1);

    // A retried tickReflexes finds the verdict recorded: the same result, no second message.
    expect(await acts.tickReflexes(reflexInput(1, t1))).toEqual(v1);
    const t2 = await acts.think(thinkInput(id, 2));
    await acts.tickReflexes(reflexInput(2, t2));
    await until(() => w.of('verdict').length >= 2, 'the verdict of tick 2');
    expect(w.got.map((m) => `${m.subject.split('.').at(-1)}:${String((m.payload as { tick: number }).tick)}`)).toEqual([
      'reply:1',
      'verdict:1',
      'reply:2',
      'verdict:2',
    ]);
    expect(w.beats.map((m) => (m.payload as { tick: number }).tick)).toEqual([1, 2]);
    w.stop();
  });

  it('openEscalation: the escalation it created, once; finishing it with a nudge: the nudge learning', async () => {
    const id = 'hook.esc';
    await addAgent(id);
    const w = await watch(id);
    const escalation = escalationInput.parse({
      escalationId: `${id}.t3.e1`,
      agentId: id,
      task: 'May I clear the build cache?',
      category: 'code',
      humanRequired: true,
      tick: 3,
    });
    expect(await acts.openEscalation({ escalation, workflowId: `escalation/${id}`, deadlineAt: null })).toEqual({
      created: true,
    });
    await until(() => w.got.length === 1, 'the escalation');
    expect(w.got[0]!.subject).toBe(`${bus.root}.high.agent.hook~2Eesc.escalation`);
    expect(w.got[0]!.header.message_type).toBe('AgentEscalation');
    expect(w.got[0]!.payload).toEqual({
      agent_id: id,
      escalation_id: `${id}.t3.e1`,
      reason: 'code: May I clear the build cache?',
      severity: 'high',
      tick: 3,
    });
    expect(
      await database.db.select({ id: escalations.id }).from(escalations).where(eq(escalations.agentId, id)),
    ).toEqual([{ id: `${id}.t3.e1` }]);

    // The workflow's retry finds the row: nothing is told again (the nudge's learning comes next, nothing between).
    expect(await acts.openEscalation({ escalation, workflowId: `escalation/${id}`, deadlineAt: null })).toEqual({
      created: false,
    });
    const answer = {
      verdict: 'nudge' as const,
      solution: 'Clear it, but keep the lockfile.',
      teaching_moment: 'Caches are safe to clear; lockfiles are not.',
      recommended_tools: [],
      needs_human: false,
      comment: 'keep the lockfile when clearing caches',
    };
    const finished = await acts.finishEscalation({
      escalationId: escalation.escalationId,
      agentId: id,
      category: 'code',
      outcome: 'nudged',
      decidedBy: 'oversight',
      why: 'a nudge',
      answer,
      human: null,
    });
    expect(finished.learning).toMatchObject({ id: expect.any(Number) });
    await until(() => w.got.length === 2, 'the nudge learning');
    const row = await learningRow(id, 'nudge');
    expect(w.got.map((m) => m.header.message_type)).toEqual(['AgentEscalation', 'AgentLearning']);
    expect(w.got[1]!.payload).toEqual({
      agent_id: id,
      predicate: 'nudge',
      subject: `agent:${id}`,
      object: JSON.stringify({ category: 'code', hint: 'keep the lockfile when clearing caches' }),
      confidence: row.confidence,
    });
    w.stop();
  });

  it("every place a learning is stored in the agent's name publishes it: saveLearning, recordFeedback, the sink, outcome feedback, a feedback note", async () => {
    const id = 'hook.learn';
    await addAgent(id);
    const w = await watch(id);
    const learned = () => w.of('learning');

    const saved = await acts.saveLearning({
      shardType: `agent:${id}`,
      predicate: 'style_preference',
      args: { style: 'short answers', stance: 'prefer' },
      agentId: id,
    });
    await until(() => learned().length === 1, 'the saved learning');
    expect(learned()[0]).toEqual({
      agent_id: id,
      predicate: 'style_preference',
      subject: `agent:${id}`,
      object: '{"style":"short answers","stance":"prefer"}',
      confidence: saved.confidence,
    });
    // Saved again: reinforced, told again with the stored confidence.
    const again = await acts.saveLearning({
      shardType: `agent:${id}`,
      predicate: 'style_preference',
      args: { style: 'short answers', stance: 'prefer' },
      agentId: id,
    });
    expect(again).toMatchObject({ id: saved.id, reinforced: true });
    await until(() => learned().length === 2, 'the reinforced learning');
    expect(learned()[1]).toMatchObject({
      predicate: 'style_preference',
      confidence: (await learningRow(id, 'style_preference')).confidence,
    });

    const fb = await acts.recordFeedback({ agentId: id, kind: 'reject', action: 'shell.exec', reason: 'too slow' });
    expect(fb.learning).toBeDefined();
    await until(() => learned().length === 3, 'the learning feedback derived');
    expect(learned()[2]).toMatchObject({
      predicate: fb.learning!.predicate,
      subject: `agent:${id}`,
      object: JSON.stringify(fb.learning!.args),
      confidence: fb.learning!.confidence,
    });

    // The product's sink (campaigns, generated tools).
    const sink = createLearningSink({ db: database.db, events: agentEventSink(bus) });
    await sink({
      agentId: id,
      shardType: 'tools',
      predicate: 'generated_tool',
      args: { name: 'wc', capability: 'count words' },
      source: `tool/${id}/wc`,
    });
    await until(() => learned().length === 4, "the sink's learning");
    expect(learned()[3]).toMatchObject({
      predicate: 'generated_tool',
      subject: 'tools',
      object: '{"name":"wc","capability":"count words"}',
      confidence: (await learningRow(id, 'generated_tool')).confidence,
    });

    // Outcome feedback: diary.add without its content is a rejected edit; at threshold 1 it is a learning.
    await database.db.insert(llmRecentResponses).values({ agentId: id, tick: 5, content: 'Tick 5.' });
    const [outcome] = await acts.applyCommands({
      agentId: id,
      tick: 5,
      workflowId: `agent/${id}`,
      mode: 'main',
      commands: [{ cmdId: 'bad', type: 'diary.add', args: { title: 'no content' } }],
    });
    expect(outcome).toMatchObject({ status: 'rejected' });
    await until(() => learned().length === 5, 'the outcome learning');
    expect(learned()[4]).toMatchObject({
      predicate: 'avoid_error',
      subject: `agent:${id}`,
      confidence: (await learningRow(id, 'avoid_error')).confidence,
    });
    expect(String(learned()[4]!.object)).toContain('"task_type":"command:diary.add"');

    // A user's note tagged feedback.
    const note = await acts.recordNote({
      agentId: id,
      text: 'accept style.bullets',
      priority: 1,
      tags: ['feedback'],
      source: 'user',
      idempotencyKey: `${id}:fb1`,
    });
    expect(note.feedback).toMatchObject({ learningId: expect.any(Number) });
    await until(() => learned().length === 6, "the note's learning");
    expect(learned()[5]).toMatchObject({
      predicate: 'style_preference',
      subject: `agent:${id}`,
      object: '{"style":"bullets","stance":"prefer"}',
    });

    // A learning of no agent has no subject to go on; a marker after it proves nothing was sent.
    await acts.saveLearning({
      shardType: 'shared',
      predicate: 'language_hint',
      args: { language: 'go', hint: 'wrap errors' },
    });
    await acts.saveLearning({
      shardType: `agent:${id}`,
      predicate: 'language_hint',
      args: { language: 'go', hint: 'marker' },
      agentId: id,
    });
    await until(() => learned().length === 7, 'the marker');
    expect(learned()[6]).toMatchObject({ predicate: 'language_hint', object: '{"language":"go","hint":"marker"}' });
    expect(w.got.every((m) => m.header.message_type === 'AgentLearning')).toBe(true);
    expect(busLog).toEqual([]);
    w.stop();
  });

  it('a closed bus or a throwing sink never fails an activity: the work is recorded, the drop logged', async () => {
    const id = 'hook.down';
    await addAgent(id);
    const closed = await testBus(bus.root);
    await closed.close();
    const lines: string[] = [];
    const down = activitiesWith(agentEventSink(closed, (l) => lines.push(l)));
    const throwing = activitiesWith({
      tick() {
        throw new Error('sink down');
      },
      event() {
        throw new Error('sink down');
      },
    });
    for (const [i, a] of [down, throwing].entries()) {
      const tick = i + 1;
      const t = await a.think(thinkInput(id, tick));
      expect(t.responseId).not.toBeNull();
      const v = await a.tickReflexes({
        agentId: id,
        tick,
        workflowId: `agent/${id}`,
        responseId: t.responseId!,
        commands: [],
        params,
        defaults: params,
        stagnation,
        contextMode: 'standard',
      });
      expect(v.validationMode).toBe('normal');
      const e = escalationInput.parse({ escalationId: `${id}.t${tick}.e`, agentId: id, task: 'help', tick });
      expect(
        await a.openEscalation({ escalation: e, workflowId: `escalation/${id}/${tick}`, deadlineAt: null }),
      ).toEqual({ created: true });
      expect(
        await a.saveLearning({
          shardType: `agent:${id}`,
          predicate: 'language_hint',
          args: { language: 'ts', hint: `run ${tick}` },
          agentId: id,
        }),
      ).toMatchObject({ reinforced: false });
    }
    const rows = await database.db
      .select({ tick: llmRecentResponses.tick, rating: llmRecentResponses.rating })
      .from(llmRecentResponses)
      .where(eq(llmRecentResponses.agentId, id));
    expect(rows.sort((a, b) => a.tick - b.tick)).toEqual([
      { tick: 1, rating: 1 },
      { tick: 2, rating: 1 },
    ]);
    expect(
      await database.db.select({ id: escalations.id }).from(escalations).where(eq(escalations.agentId, id)),
    ).toHaveLength(2);
    // Once a minute per kind, each line counting the drops so far.
    expect(lines).toEqual([
      'bus: heartbeat not published (1 dropped so far): closed connection',
      'bus: reply not published (2 dropped so far): closed connection',
      'bus: verdict not published (3 dropped so far): closed connection',
      'bus: escalation not published (4 dropped so far): closed connection',
      'bus: learning not published (5 dropped so far): closed connection',
    ]);
  });
});
