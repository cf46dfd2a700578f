/**
 * The society and self-steering commands against a real Postgres (a fresh, migrated database for
 * this file): known peers, peer messages (a note on the receiver, a wake effect, an event told
 * once the command committed, never twice on a retry), ratings whose history moves trust, the
 * identity, tag counts, the registry choice, thinking methods, strategies applied on demand and
 * measured like the automatic ones, and `llm_task.ask` (the command only asks; the activity
 * calls the model and stores the answer as a note). Malformed arguments are refused naming the field.
 */
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentEventSink } from '../../activities/agent-events.js';
import { commandResultText, createCommandActivities } from '../../activities/tick/apply-commands.js';
import { createLlmTaskActivities } from '../../activities/llm-task.js';
import { createLlmRouter, type LlmRouter } from '../../activities/llm/index.js';
import { assembleContext, type ContextInput } from '../../core/context.js';
import { defaultPrices } from '../../core/lifeforce.js';
import type { CommandOutcome, LoopEffect, ParsedCommand } from '../../core/loop-types.js';
import { trustFromRatings, trustToScore } from '../../core/society/trust.js';
import { usableRegistry } from '../../db/queries/llm.js';
import {
  agentPeers,
  agentReputation,
  agents,
  antiStagnationMetrics,
  commandLog,
  diaryEntries,
  goals,
  llmCalls,
  llmRecentResponses,
  llmRegistry,
  notes,
  peerRatings,
  stagnationStrategies,
  thinkingMethods,
} from '../../db/schema/index.js';
import { initialState } from '../../workflows/lib/loop-state.js';
import { applyStateEffects } from '../../workflows/agent-loop/effects.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { contextInput as baseInput } from '../helpers/context.js';

let handle: MigratedDatabase;
const told: Array<{ agentId: string; kind: string; event: unknown }> = [];
const sink: AgentEventSink = {
  tick: () => undefined,
  event: (agentId, kind, event) => void told.push({ agentId, kind, event }),
};
let acts: ReturnType<typeof createCommandActivities>;

beforeAll(async () => {
  handle = await migratedDatabase('mindloop_society');
  await handle.db.insert(agents).values([
    { id: 'ana', name: 'Ana' },
    { id: 'ben', name: 'Ben' },
    { id: 'cy', name: 'Cy' },
    { id: 'dee', name: 'Dee' },
  ]);
  acts = createCommandActivities({ db: handle.db, events: sink });
});

afterAll(async () => {
  await handle?.dispose();
});

const ticks = new Map<string, number>();
let seq = 0;
const c = (type: string, args: Record<string, unknown> = {}, cmdId = `c${++seq}`): ParsedCommand => ({
  cmdId,
  type,
  args,
});

/** Apply commands as `agentId` at its next tick. */
async function run(agentId: string, commands: ParsedCommand[], at?: number) {
  const tick = at ?? (ticks.get(agentId) ?? 0) + 1;
  ticks.set(agentId, Math.max(tick, ticks.get(agentId) ?? 0));
  const input = { agentId, tick, workflowId: `agent/${agentId}`, mode: 'main' as const, commands };
  return { outcomes: await acts.applyCommands(input), tick, input };
}

async function one(
  agentId: string,
  type: string,
  args: Record<string, unknown> = {},
  at?: number,
): Promise<CommandOutcome & { tick: number }> {
  const r = await run(agentId, [c(type, args)], at);
  return { ...r.outcomes[0]!, tick: r.tick };
}

async function resultText(agentId: string, o: { tick: number; cmdId: string }): Promise<string> {
  const [row] = await handle.db
    .select()
    .from(commandLog)
    .where(and(eq(commandLog.agentId, agentId), eq(commandLog.tick, o.tick), eq(commandLog.cmdId, o.cmdId)));
  return commandResultText(row!);
}

const statusAndMessage = (o: CommandOutcome) => [o.status, o.message];

describe('agents: known peers', () => {
  it('add links both ways; list shows relation, status and trust; remove forgets, block refuses', async () => {
    const add = await one('ana', 'agents.add', { peer: 'ben', note: 'met in the test' });
    expect(statusAndMessage(add)).toEqual(['applied', 'ben is now a known peer (peer, trust 0.50)']);
    const links = await handle.db.select().from(agentPeers).orderBy(asc(agentPeers.agentId));
    expect(links.map((l) => [l.agentId, l.peerAgentId, l.relation, l.status])).toEqual([
      ['ana', 'ben', 'peer', 'active'],
      ['ben', 'ana', 'peer', 'active'],
    ]);
    expect((await one('ana', 'agents.add', { peer: 'ben' })).message).toBe(
      'ben is already a known peer (peer, trust 0.50)',
    );

    await one('ana', 'agents.add', { peer: 'cy', relation: 'sibling' });
    const list = await one('ana', 'agents.list');
    expect(list.message).toBe('2 known peers');
    expect((await resultText('ana', list)).split('\n')).toEqual([
      'ben "Ben" (peer, active) trust 0.50 — met in the test',
      'cy "Cy" (sibling, active) trust 0.50',
    ]);

    expect(statusAndMessage(await one('ana', 'agents.remove', { peer: 'cy' }))).toEqual([
      'applied',
      'cy is no longer a known peer',
    ]);
    expect(await handle.db.select().from(agentPeers).where(eq(agentPeers.agentId, 'ana'))).toHaveLength(1);
    // The peer's own side is left as it is: cy still knows ana.
    expect(
      await handle.db
        .select()
        .from(agentPeers)
        .where(and(eq(agentPeers.agentId, 'cy'), eq(agentPeers.peerAgentId, 'ana'))),
    ).toHaveLength(1);

    expect(statusAndMessage(await one('cy', 'agents.remove', { peer: 'ana', block: true }))).toEqual([
      'applied',
      'ana is blocked: its messages are refused',
    ]);
    // ana adding cy again does not undo cy's block on its side.
    await one('ana', 'agents.add', { peer: 'cy' });
    const [cySide] = await handle.db
      .select()
      .from(agentPeers)
      .where(and(eq(agentPeers.agentId, 'cy'), eq(agentPeers.peerAgentId, 'ana')));
    expect(cySide!.status).toBe('blocked');
  });

  it('refuses malformed and impossible arguments, naming the field', async () => {
    expect(statusAndMessage(await one('ana', 'agents.add', {}))).toEqual([
      'rejected',
      'invalid args for agents.add: args.peer: required (string)',
    ]);
    expect((await one('ana', 'agents.add', { peer: 'no spaces allowed' })).message).toMatch(
      /^invalid args for agents\.add: args\.peer: letters, digits/,
    );
    expect((await one('ana', 'agents.add', { peer: 'ben', relation: 'parent' })).message).toMatch(
      /^invalid args for agents\.add: args\.relation: /,
    );
    expect(statusAndMessage(await one('ana', 'agents.add', { peer: 'ana' }))).toEqual(['error', "peer: 'ana' is you"]);
    expect(statusAndMessage(await one('ana', 'agents.add', { peer: 'ghost' }))).toEqual([
      'error',
      "peer: no agent 'ghost'",
    ]);
    expect(statusAndMessage(await one('ana', 'agents.remove', { peer: 'dee' }))).toEqual([
      'error',
      "peer: 'dee' is not one of your known peers",
    ]);
    expect((await one('ana', 'agents.list', { status: 'gone' })).message).toMatch(
      /^invalid args for agents\.list: args\.status: /,
    );
  });
});

describe('messages.send', () => {
  it('stores the message as a peer note on the receiver, wakes it, and tells the bus once it committed — once, even when retried', async () => {
    told.length = 0;
    const r = await run('ana', [
      c('messages.send', { to: 'ben', text: 'Hello Ben, what do you see?', tags: ['greeting'], priority: 4 }, 'm1'),
    ]);
    const [o] = r.outcomes;
    const [inNote] = await handle.db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'ben'), eq(notes.direction, 'in')));
    expect(statusAndMessage(o!)).toEqual(['applied', `message sent to ben (its note #${inNote!.id})`]);
    expect(inNote).toMatchObject({
      source: 'peer',
      sender: 'ana',
      text: 'Hello Ben, what do you see?',
      tags: ['greeting'],
      priority: 4,
      readAt: null,
    });
    const out = await handle.db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'ana'), eq(notes.direction, 'out')));
    expect(out.map((n) => [n.recipient, n.text])).toEqual([['ben', 'Hello Ben, what do you see?']]);
    expect(o!.effects).toEqual([{ kind: 'wakeAgent', agentId: 'ben' }]);
    expect(told).toEqual([
      {
        agentId: 'ana',
        kind: 'message',
        event: {
          to: 'ben',
          noteId: inNote!.id,
          tick: r.tick,
          text: 'Hello Ben, what do you see?',
          priority: 4,
          tags: ['greeting'],
        },
      },
    ]);
    // The receiver heard from the sender now.
    const [benSide] = await handle.db
      .select()
      .from(agentPeers)
      .where(and(eq(agentPeers.agentId, 'ben'), eq(agentPeers.peerAgentId, 'ana')));
    expect(benSide!.lastSeenAt).not.toBeNull();

    // A retried applyCommands (same tick and cmd_id) delivers nothing again and tells nobody again.
    const again = await acts.applyCommands(r.input);
    expect(again[0]).toMatchObject({
      status: 'applied',
      duplicate: true,
      effects: [{ kind: 'wakeAgent', agentId: 'ben' }],
    });
    expect(await handle.db.select().from(notes).where(eq(notes.agentId, 'ben'))).toHaveLength(1);
    expect(told).toHaveLength(1);
  });

  it('refuses messages to strangers, to blocked peers, from blocked senders, and malformed ones; none is delivered or told', async () => {
    told.length = 0;
    const before = (await handle.db.select().from(notes)).length;
    expect(statusAndMessage(await one('ana', 'messages.send', { to: 'ben' }))).toEqual([
      'rejected',
      'invalid args for messages.send: args.text: required (string)',
    ]);
    expect((await one('ana', 'messages.send', { to: 'ben', text: '   ' })).message).toMatch(
      /^invalid args for messages\.send: args\.text: /,
    );
    expect((await one('ana', 'messages.send', { to: 'ben', text: 'x', priority: 11 })).message).toMatch(
      /^invalid args for messages\.send: args\.priority: /,
    );
    expect(statusAndMessage(await one('ana', 'messages.send', { to: 'dee', text: 'hi' }))).toEqual([
      'error',
      `to: 'dee' is not one of your known peers (agents.add {peer: "dee"} first)`,
    ]);
    expect(statusAndMessage(await one('ana', 'messages.send', { to: 'ana', text: 'hi' }))).toEqual([
      'error',
      "to: 'ana' is you",
    ]);
    // cy blocked ana: ana's message is refused.
    expect(statusAndMessage(await one('ana', 'messages.send', { to: 'cy', text: 'hi' }))).toEqual([
      'error',
      "to: 'cy' does not accept your messages",
    ]);
    // cy blocked ana: cy cannot write to ana until it adds ana again.
    expect(statusAndMessage(await one('cy', 'messages.send', { to: 'ana', text: 'hi' }))).toEqual([
      'error',
      "to: you blocked 'ana' (agents.add it again to write to it)",
    ]);
    expect((await handle.db.select().from(notes)).length).toBe(before);
    expect(told).toEqual([]);
  });
});

describe('reputation', () => {
  it('a rating moves trust as the whole history says; read shows the history and what others think', async () => {
    const first = await one('ben', 'reputation.rate', { peer: 'ana', score: 3, reason: 'clear and kind' });
    expect(statusAndMessage(first)).toEqual([
      'applied',
      `rated ana +3 (overall): trust 0.50 → ${trustFromRatings([3]).toFixed(2)} over 1 rating(s)`,
    ]);
    await one('ben', 'reputation.rate', { peer: 'ana', score: 3, reason: 'helpful again' });
    const [up] = await handle.db
      .select()
      .from(agentPeers)
      .where(and(eq(agentPeers.agentId, 'ben'), eq(agentPeers.peerAgentId, 'ana')));
    expect(up!.trust).toBeCloseTo(trustFromRatings([3, 3]), 3);
    expect(up!.trust).toBeGreaterThan(trustFromRatings([3]));
    const down = await one('ben', 'reputation.rate', { peer: 'ana', score: -3, reason: 'made things up' });
    const [after] = await handle.db
      .select()
      .from(agentPeers)
      .where(and(eq(agentPeers.agentId, 'ben'), eq(agentPeers.peerAgentId, 'ana')));
    expect(after!.trust).toBeCloseTo(trustFromRatings([3, 3, -3]), 3);
    expect(after!.trust).toBeLessThan(up!.trust);
    expect(down.message).toBe(
      `rated ana -3 (overall): trust ${up!.trust.toFixed(2)} → ${after!.trust.toFixed(2)} over 3 rating(s)`,
    );
    const history = await handle.db
      .select()
      .from(peerRatings)
      .where(eq(peerRatings.agentId, 'ben'))
      .orderBy(asc(peerRatings.id));
    expect(history.map((h) => [h.score, h.reason, h.source, h.tick])).toEqual([
      [3, 'clear and kind', 'agent', first.tick],
      [3, 'helpful again', 'agent', first.tick + 1],
      [-3, 'made things up', 'agent', down.tick],
    ]);
    // Another dimension has its own history and leaves the link's trust alone.
    await one('ben', 'reputation.rate', { peer: 'ana', score: 2, reason: 'fast', dimension: 'speed' });
    const [still] = await handle.db
      .select()
      .from(agentPeers)
      .where(and(eq(agentPeers.agentId, 'ben'), eq(agentPeers.peerAgentId, 'ana')));
    expect(still!.trust).toBe(after!.trust);
    const rep = await handle.db
      .select()
      .from(agentReputation)
      .where(eq(agentReputation.agentId, 'ben'))
      .orderBy(asc(agentReputation.dimension));
    expect(rep.map((r) => [r.subject, r.dimension, r.evidenceCount])).toEqual([
      ['ana', 'overall', 3],
      ['ana', 'speed', 1],
    ]);

    const read = await one('ben', 'reputation.read', { peer: 'ana' });
    const text = await resultText('ben', read);
    expect(text.split('\n')[0]).toBe(`ana: peer, active, trust ${after!.trust.toFixed(2)}`);
    expect(text).toContain('- -3 overall at tick');
    expect(text).toContain('made things up');
    const mine = await one('ana', 'reputation.read');
    const signed = (n: number) => `${n > 0 ? '+' : ''}${n}`;
    const overall = trustToScore(trustFromRatings([3, 3, -3]));
    expect(await resultText('ana', mine)).toBe(
      `(you have rated no one)\nOthers about you: overall ${signed(overall)} from 1 peer(s); speed ${signed(trustToScore(trustFromRatings([2])))} from 1 peer(s)`,
    );
  });

  it('refuses malformed and impossible ratings, naming the field', async () => {
    expect((await one('ben', 'reputation.rate', { peer: 'ana', score: 5, reason: 'x' })).message).toMatch(
      /^invalid args for reputation\.rate: args\.score: /,
    );
    expect((await one('ben', 'reputation.rate', { peer: 'ana', score: 1.5, reason: 'x' })).message).toMatch(
      /^invalid args for reputation\.rate: args\.score: /,
    );
    expect(statusAndMessage(await one('ben', 'reputation.rate', { peer: 'ana', score: 1 }))).toEqual([
      'rejected',
      'invalid args for reputation.rate: args.reason: required (string)',
    ]);
    expect(
      (await one('ben', 'reputation.rate', { peer: 'ana', score: 1, reason: 'x', dimension: 'Not A Word' })).message,
    ).toMatch(/^invalid args for reputation\.rate: args\.dimension: a lowercase word/);
    expect(statusAndMessage(await one('ben', 'reputation.rate', { peer: 'ben', score: 1, reason: 'me' }))).toEqual([
      'error',
      "peer: 'ben' is you; rate your peers, not yourself",
    ]);
    expect(statusAndMessage(await one('ben', 'reputation.rate', { peer: 'ghost', score: 1, reason: 'who' }))).toEqual([
      'error',
      "peer: no agent 'ghost'",
    ]);
    expect(statusAndMessage(await one('ben', 'reputation.read', { peer: 'dee' }))).toEqual([
      'error',
      "peer: you know nothing of 'dee' (not a known peer, never rated)",
    ]);
  });
});

describe('identity', () => {
  it('set changes name, description and the identity values; read and context 0 show them', async () => {
    const set = await one('dee', 'identity.set', {
      name: 'Dee the Careful',
      description: 'Checks facts twice.',
      values: ['honesty', 'patience'],
      languages: ['en', 'de'],
    });
    expect(statusAndMessage(set)).toEqual(['applied', 'identity updated: name, description, values, languages']);
    await one('dee', 'identity.set', { persona: 'a quiet librarian' });
    const [row] = await handle.db.select().from(agents).where(eq(agents.id, 'dee'));
    expect(row).toMatchObject({
      name: 'Dee the Careful',
      description: 'Checks facts twice.',
      identity: { values: ['honesty', 'patience'], languages: ['en', 'de'], persona: 'a quiet librarian' },
    });
    const read = await one('dee', 'identity.read');
    expect((await resultText('dee', read)).split('\n')).toEqual([
      'name: Dee the Careful (agent id dee, root, generation 0)',
      'description: Checks facts twice.',
      'persona: a quiet librarian',
      'values: honesty; patience',
      'languages: en, de',
    ]);
    const system = assembleContext(
      contextInput({ agent: { id: row!.id, name: row!.name, description: row!.description, identity: row!.identity } }),
    ).messages[0]!.content;
    expect(system).toContain(
      'Your name is Dee the Careful (agent id dee).\nAbout you: Checks facts twice.\nYour persona: a quiet librarian\nYour values: honesty; patience\nYour languages: en, de',
    );
  });

  it('refuses an empty or malformed change, naming the field', async () => {
    expect(statusAndMessage(await one('dee', 'identity.set', {}))).toEqual([
      'rejected',
      'invalid args for identity.set: args: give at least one of: name, description, persona, values, languages',
    ]);
    expect((await one('dee', 'identity.set', { values: 'honesty' })).message).toMatch(
      /^invalid args for identity\.set: args\.values: /,
    );
    expect((await one('dee', 'identity.set', { languages: ['English'] })).message).toMatch(
      /^invalid args for identity\.set: args\.languages\.0: a language code/,
    );
    expect((await one('dee', 'identity.set', { mood: 'grumpy' })).message).toMatch(
      /^invalid args for identity\.set: args: unknown field 'mood'/,
    );
  });
});

describe('tags.stats', () => {
  it('counts each tag across diary, notebook, notes, replies, goals and tasks, archived rows left out', async () => {
    await handle.db.insert(diaryEntries).values([
      { agentId: 'cy', title: 'a', content: 'a', tags: ['physics', 'notes'] },
      { agentId: 'cy', title: 'b', content: 'b', tags: ['physics'] },
      { agentId: 'cy', title: 'c', content: 'c', tags: ['physics'], archivedAt: new Date() },
    ]);
    await handle.db.insert(goals).values({ agentId: 'cy', title: 'learn', tags: ['physics', 'study'] });
    await handle.db
      .insert(notes)
      .values({ agentId: 'cy', direction: 'in', source: 'user', text: 'n', tags: ['study'] });
    await handle.db.insert(llmRecentResponses).values({ agentId: 'cy', tick: 900, content: 'r', tags: ['physics'] });
    const all = await one('cy', 'tags.stats');
    expect(all.message).toBe('3 tags');
    expect((await resultText('cy', all)).split('\n')).toEqual([
      'physics: 4 (diary 2, goals 1, replies 1)',
      'study: 2 (goals 1, notes 1)',
      'notes: 1 (diary 1)',
    ]);
    const only = await one('cy', 'tags.stats', { tag: 'study' });
    expect(only.message).toBe("tag 'study' is used 2 times");
    expect((await one('cy', 'tags.stats', { limit: 0 })).message).toMatch(
      /^invalid args for tags\.stats: args\.limit: /,
    );
  });
});

describe('llm_registry', () => {
  it('list shows the models by role with the one in use; select puts a model first for its role', async () => {
    await handle.db.insert(llmRegistry).values([
      { agentId: 'ana', name: 'main', provider: 'scripted', model: 'm-main', role: 'agent', priority: 1 },
      { agentId: 'ana', name: 'alt', provider: 'scripted', model: 'm-alt', role: 'agent', priority: 5 },
      { agentId: 'ana', name: 'helper', provider: 'scripted', model: 'm-helper', role: 'task', priority: 1 },
      { agentId: 'ana', name: 'off', provider: 'scripted', model: 'm-off', role: 'agent', priority: 0, enabled: false },
    ]);
    const list = await one('ana', 'llm_registry.list', { role: 'agent' });
    const lines = (await resultText('ana', list)).split('\n');
    expect(lines.map((l) => l.replace(/^#\d+ /, ''))).toEqual([
      'off — scripted:m-off, role agent, priority 0, trust 1 [disabled]',
      'main — scripted:m-main, role agent, priority 1, trust 1 [in use]',
      'alt — scripted:m-alt, role agent, priority 5, trust 1',
    ]);
    const select = await one('ana', 'llm_registry.select', { model: 'alt' });
    expect(statusAndMessage(select)).toEqual([
      'applied',
      'alt (scripted:m-alt) is now your first agent model, before main; from your next tick',
    ]);
    // The router tries it first now.
    expect((await usableRegistry(handle.db, 'ana')).filter((r) => r.role === 'agent').map((r) => r.name)).toEqual([
      'alt',
      'main',
    ]);
    expect((await one('ana', 'llm_registry.select', { model: 'alt', role: 'agent' })).message).toBe(
      'alt is already your first agent model',
    );
  });

  it('refuses unknown models, a wrong role and disabled rows, naming the field', async () => {
    expect(statusAndMessage(await one('ana', 'llm_registry.select', {}))).toEqual([
      'rejected',
      'invalid args for llm_registry.select: args.model: expected a registry model id (number) or name (string)',
    ]);
    expect((await one('ana', 'llm_registry.select', { model: 'nope' })).message).toMatch(
      /^model: no model 'nope' in your registry \(yours: .*main #\d+/,
    );
    expect(statusAndMessage(await one('ana', 'llm_registry.select', { model: 'helper', role: 'agent' }))).toEqual([
      'error',
      'role: helper serves role task, not agent',
    ]);
    expect(statusAndMessage(await one('ana', 'llm_registry.select', { model: 'off' }))).toEqual([
      'error',
      'model: off is disabled',
    ]);
    expect((await one('ana', 'llm_registry.list', { role: 'embedder' })).message).toMatch(
      /^invalid args for llm_registry\.list: args\.role: /,
    );
  });
});

describe('thinking_methods', () => {
  it('add, use (one active at a time, shown in context 0), stop', async () => {
    expect(
      statusAndMessage(
        await one('cy', 'thinking_methods.add', { name: 'socratic', prompt: 'Answer every claim with a question.' }),
      ),
    ).toEqual([
      'applied',
      expect.stringMatching(/^thinking method 'socratic' added \(#\d+\); thinking_methods\.use makes it active$/),
    ]);
    await one('cy', 'thinking_methods.add', {
      name: 'first_principles',
      prompt: 'Reduce the problem to what is certainly true.',
      tags: ['rigour'],
    });
    expect((await one('cy', 'thinking_methods.use', { name: 'socratic' })).message).toBe(
      "thinking method 'socratic' is active from your next tick (thinking_methods.stop ends it)",
    );
    await one('cy', 'thinking_methods.use', { name: 'first_principles' });
    const rows = await handle.db
      .select()
      .from(thinkingMethods)
      .where(eq(thinkingMethods.agentId, 'cy'))
      .orderBy(asc(thinkingMethods.name));
    expect(rows.map((m) => [m.name, m.active, m.uses])).toEqual([
      ['first_principles', true, 1],
      ['socratic', false, 1],
    ]);
    const list = await one('cy', 'thinking_methods.list');
    expect(await resultText('cy', list)).toMatch(/^first_principles \[active\] \(used 1×\) \{rigour\} prompt: Reduce/);
    const system = assembleContext(contextInput({ thinkingMethod: { name: rows[0]!.name, prompt: rows[0]!.prompt } }))
      .messages[0]!.content;
    expect(system).toContain(
      'Thinking method in use — first_principles: Reduce the problem to what is certainly true.',
    );
    expect(assembleContext(contextInput()).messages[0]!.content).not.toContain('Thinking method');

    expect((await one('cy', 'thinking_methods.stop')).message).toBe("thinking method 'first_principles' stopped");
    expect(statusAndMessage(await one('cy', 'thinking_methods.stop'))).toEqual([
      'error',
      'no thinking method is active',
    ]);
  });

  it('refuses duplicates, unknown names and malformed arguments, naming the field', async () => {
    expect(statusAndMessage(await one('cy', 'thinking_methods.add', { name: 'socratic', prompt: 'again' }))).toEqual([
      'error',
      "name: a thinking method 'socratic' exists already",
    ]);
    expect(statusAndMessage(await one('cy', 'thinking_methods.add', { name: 'x' }))).toEqual([
      'rejected',
      'invalid args for thinking_methods.add: args.prompt: required (string)',
    ]);
    expect((await one('cy', 'thinking_methods.add', { name: 'has space', prompt: 'p' })).message).toMatch(
      /^invalid args for thinking_methods\.add: args\.name: letters, digits/,
    );
    expect(statusAndMessage(await one('cy', 'thinking_methods.use', { name: 'zen' }))).toEqual([
      'error',
      "name: no thinking method 'zen' (yours: first_principles, socratic)",
    ]);
  });
});

describe('stagnation_strategies', () => {
  it('list shows the built-in ones (a read: nothing written); add a custom one; use applies it now and opens a measurement like an automatic one', async () => {
    const list = await one('dee', 'stagnation_strategies.list', { class: 'fatigue' });
    expect(await resultText('dee', list)).toMatch(
      /^radical_pause \(fatigue, action pause, cost 5\) used 0×, not measured/,
    );
    expect(await handle.db.select().from(stagnationStrategies).where(eq(stagnationStrategies.agentId, 'dee'))).toEqual(
      [],
    );
    const add = await one('dee', 'stagnation_strategies.add', {
      name: 'short_nap',
      class: 'fatigue',
      action: 'pause',
      ticks: 2,
      cost: 0.5,
      description: 'two ticks off',
    });
    expect(add.message).toMatch(/^strategy 'short_nap' added \(#\d+, fatigue, action pause\)$/);
    // Adding seeded the built-in ones beside it.
    expect(
      (await handle.db.select().from(stagnationStrategies).where(eq(stagnationStrategies.agentId, 'dee'))).map(
        (s) => s.name,
      ),
    ).toContain('radical_pause');

    // The reflexes recorded this tick's reply (with its novelty) before the commands ran.
    const tick = (ticks.get('dee') ?? 0) + 1;
    await handle.db
      .insert(llmRecentResponses)
      .values({ agentId: 'dee', tick, content: 'same old', novelty: 20, contextMode: 'standard' });
    const use = await one('dee', 'stagnation_strategies.use', { name: 'short_nap' }, tick);
    expect(statusAndMessage(use)).toEqual([
      'applied',
      `strategy 'short_nap' applied: radical pause of 2 ticks; its effect on novelty (now 20) is measured at tick ${tick + 2}`,
    ]);
    const [strategy] = await handle.db
      .select()
      .from(stagnationStrategies)
      .where(and(eq(stagnationStrategies.agentId, 'dee'), eq(stagnationStrategies.name, 'short_nap')));
    expect(strategy!.uses).toBe(1);
    const [metric] = await handle.db
      .select()
      .from(antiStagnationMetrics)
      .where(eq(antiStagnationMetrics.strategyId, strategy!.id));
    expect(metric).toMatchObject({
      tick,
      action: 'short_nap',
      noveltyBefore: 20,
      noveltyAfter: null,
      evaluatedAt: null,
      params: { source: 'command', detail: 'radical pause of 2 ticks' },
    });
    const measure: LoopEffect = {
      kind: 'measureStrategy',
      strategyId: strategy!.id,
      metricId: metric!.id,
      tick,
      noveltyBefore: 20,
    };
    expect(use.effects).toEqual([{ kind: 'pause', ticks: 2 }, measure]);

    // The loop takes the effects: it sits out two ticks and measures the strategy like an automatic one.
    const state = initialState();
    applyStateEffects(state, use.effects);
    expect(state.pauseTicks).toBe(2);
    expect(state.reflexState.pending).toEqual({
      strategyId: strategy!.id,
      metricId: metric!.id,
      tick,
      noveltyBefore: 20,
    });

    // While it is measured, another strategy waits; from tick + 2 (measured by then) it may run.
    expect(
      statusAndMessage(await one('dee', 'stagnation_strategies.use', { name: 'meta_analysis' }, tick + 1)),
    ).toEqual([
      'error',
      `name: 'short_nap' (applied at tick ${tick}) is still being measured; use a strategy again from tick ${tick + 3}`,
    ]);
    const meta = await one('dee', 'stagnation_strategies.use', { name: 'meta_analysis' }, tick + 3);
    expect(meta.status).toBe('applied');
    const focus = meta.effects.find((e) => e.kind === 'measureStrategy');
    // No reply at that tick: applied, not measured, its focus still goes to the next think.
    expect(focus).toMatchObject({
      noveltyBefore: null,
      focus: expect.stringMatching(/^Anti-stagnation meta-analysis/),
    });
    const next = initialState();
    applyStateEffects(next, meta.effects);
    expect(next.reflexState.pending).toBeNull();
    expect(next.reflexState.focus).toMatch(/^Anti-stagnation meta-analysis/);
  });

  it('refuses unknown names, duplicates and malformed arguments, naming the field', async () => {
    expect((await one('dee', 'stagnation_strategies.use', { name: 'teleport' }, 500)).message).toMatch(
      /^name: no strategy 'teleport' \(yours: ask_peers, ask_user, /,
    );
    expect(
      statusAndMessage(
        await one('dee', 'stagnation_strategies.add', { name: 'short_nap', class: 'fatigue', action: 'pause' }),
      ),
    ).toEqual(['error', "name: a strategy 'short_nap' exists already"]);
    expect(
      (await one('dee', 'stagnation_strategies.add', { name: 'dance', class: 'fatigue', action: 'dance' })).message,
    ).toMatch(/^invalid args for stagnation_strategies\.add: args\.action: /);
    expect(
      (await one('dee', 'stagnation_strategies.add', { name: 'dance', class: 'boredom', action: 'pause' })).message,
    ).toMatch(/^invalid args for stagnation_strategies\.add: args\.class: /);
    expect(statusAndMessage(await one('dee', 'stagnation_strategies.use', {}))).toEqual([
      'rejected',
      'invalid args for stagnation_strategies.use: args.name: required (string)',
    ]);
  });
});

describe('llm_task.ask', () => {
  let router: LlmRouter;
  const asked: string[] = [];
  beforeAll(async () => {
    await handle.db.insert(llmRegistry).values([
      { agentId: 'ben', name: 'ben-mind', provider: 'scripted', model: 'm-ben', role: 'agent', priority: 1 },
      { agentId: 'ben', name: 'oracle', provider: 'scripted', model: 'm-oracle', role: 'oversight', priority: 1 },
      {
        agentId: 'ben',
        name: 'broken',
        provider: 'scripted',
        model: 'm-broken',
        role: 'task',
        priority: 1,
        params: { error: 'endpoint down' },
      },
    ]);
    router = createLlmRouter({
      db: handle.db,
      env: {},
      toolsDir: '',
      lifeforce: { enabled: false, prices: defaultPrices },
      scriptedReply: ({ messages, purpose }) => {
        asked.push(`${purpose}: ${messages.at(-1)!.content}`);
        return 'Forty-two, roughly.';
      },
    });
  });

  it('the command only asks (an askLlm effect); the activity calls the model once and stores the answer as an llm:task note', async () => {
    const ask = await one('ben', 'llm_task.ask', { question: 'How many moons?', model: 'oracle' });
    const [oracle] = await handle.db
      .select()
      .from(llmRegistry)
      .where(and(eq(llmRegistry.agentId, 'ben'), eq(llmRegistry.name, 'oracle')));
    const effect = {
      kind: 'askLlm',
      cmdId: ask.cmdId,
      key: `agent/ben:${ask.tick}:ask:${ask.cmdId}`,
      question: 'How many moons?',
      role: 'task',
      registryId: oracle!.id,
      model: 'oracle',
    } as const;
    expect(statusAndMessage(ask)).toEqual(['applied', 'asked oracle; the answer comes as a note']);
    expect(ask.effects).toEqual([effect]);
    // No model was called inside the command.
    expect(asked).toEqual([]);

    const llmTask = createLlmTaskActivities({ db: handle.db, llm: router });
    const input = {
      agentId: 'ben',
      tick: ask.tick,
      workflowId: 'agent/ben',
      cmdId: effect.cmdId,
      key: effect.key,
      question: effect.question,
      role: effect.role,
      registryId: effect.registryId,
      model: effect.model,
    };
    const r = await llmTask.askLlmOnce(input);
    expect(r).toEqual({ noteId: expect.any(Number), answered: true, model: 'scripted:m-oracle' });
    const [note] = await handle.db.select().from(notes).where(eq(notes.id, r.noteId));
    expect(note).toMatchObject({
      agentId: 'ben',
      direction: 'in',
      source: 'llm:task',
      sender: 'scripted:m-oracle',
      tags: ['llm_task', 'answer'],
    });
    expect(note!.text).toBe(
      `Answer from scripted:m-oracle to your question (llm_task.ask ${ask.cmdId}) "How many moons?":\nForty-two, roughly.`,
    );
    expect(asked).toEqual(['llm_task: How many moons?']);
    // A retried activity finds the note and calls nothing.
    expect(await llmTask.askLlmOnce(input)).toEqual(r);
    expect(asked).toHaveLength(1);
    expect(
      await handle.db
        .select()
        .from(llmCalls)
        .where(and(eq(llmCalls.agentId, 'ben'), eq(llmCalls.purpose, 'llm_task'), eq(llmCalls.ok, true))),
    ).toHaveLength(1);
  });

  it('with no model named it asks the task role; a model that does not answer becomes a note saying so', async () => {
    const ask = await one('ben', 'llm_task.ask', { question: 'Is it raining?' });
    expect(ask.effects).toEqual([
      {
        kind: 'askLlm',
        cmdId: ask.cmdId,
        key: `agent/ben:${ask.tick}:ask:${ask.cmdId}`,
        question: 'Is it raining?',
        role: 'task',
      },
    ]);
    const r = await createLlmTaskActivities({ db: handle.db, llm: router }).askLlmOnce({
      agentId: 'ben',
      tick: ask.tick,
      cmdId: ask.cmdId,
      key: `agent/ben:${ask.tick}:ask:${ask.cmdId}`,
      question: 'Is it raining?',
      role: 'task',
    });
    expect(r).toMatchObject({ answered: false, model: null });
    const [note] = await handle.db.select().from(notes).where(eq(notes.id, r.noteId));
    expect(note!.tags).toEqual(['llm_task', 'unanswered']);
    expect(note!.text).toMatch(
      /^Your question \(llm_task\.ask c\d+\) "Is it raining\?" was not answered: no model answered \(.*endpoint down/,
    );
    // An agent without task models asks its own.
    expect((await one('dee', 'llm_task.ask', { question: 'Anyone?' })).effects).toMatchObject([
      { kind: 'askLlm', role: 'agent' },
    ]);
  });

  it('refuses a missing question and an unknown model, naming the field', async () => {
    expect(statusAndMessage(await one('ben', 'llm_task.ask', {}))).toEqual([
      'rejected',
      'invalid args for llm_task.ask: args.question: required (string)',
    ]);
    expect((await one('ben', 'llm_task.ask', { question: 'q', model: 'gpt-9' })).message).toMatch(
      /^model: no model 'gpt-9' in your registry/,
    );
    expect((await one('ben', 'llm_task.ask', { question: 'q', model: 'broken', extra: 1 })).message).toBe(
      "invalid args for llm_task.ask: args: unknown field 'extra'",
    );
  });
});

/** A minimal context input; the tests override the parts they look at. */
function contextInput(over: Partial<ContextInput> = {}): ContextInput {
  return baseInput({
    agent: { id: 'x', name: 'X' },
    tick: 1,
    now: '2026-01-01T00:00:00.000Z',
    catalogue: '',
    recentK: 3,
    ...over,
  });
}
