/**
 * One read of an agent per tick: think, the reflexes and applyCommands, built by
 * createActivities as a worker builds them, read the agent's settings, ethics policies, LLM
 * registry, learnings, system prompts, thinking method and MCP tools once per tick (and not at
 * all while none of those rows changed), and the tick's reply is not read back (think hands it
 * on, parsed). On another worker (no snapshot there) the reflexes and applyCommands read the
 * rows themselves and decide the same. Think stores the messages its model got (tick_prompts)
 * in the statement that records the reply, once per tick: a retry neither adds nor changes it,
 * a reply re-read from an earlier attempt's call stores none, an oversized prompt is cut to the
 * cap, and an agent keeps its last ticks' prompts only. Against a real Postgres; every statement
 * the pool runs is recorded.
 */
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { ScriptedReplyFn } from '../../activities/llm/providers/scripted.js';
import type { ChatMessage } from '../../activities/llm/types.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { utf8Bytes } from '../../core/sanitize.js';
import { tickPromptLimits } from '../../core/tick-prompt.js';
import { saveLearning } from '../../db/queries/learnings.js';
import {
  agentConfig,
  agents,
  ethicsPolicies,
  llmRecentResponses,
  llmRegistry,
  notes,
  systemPrompts,
  thinkingMethods,
  tickPrompts,
} from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { sqlLog } from '../helpers/sql-log.js';
import { thinkScript, thinkInput } from '../helpers/scripted.js';

let handle: MigratedDatabase;
/** Every SQL text sent through any pg client while `sql.recording` is on. */
const sql = sqlLog();

beforeAll(async () => {
  handle = await migratedDatabase('ticksnap');
  sql.install();
});

afterAll(async () => {
  sql.restore();
  await handle?.dispose();
});

const reply = [
  'I will note what I found.',
  renderCommandBlock([
    { cmdId: 'c1', type: 'diary.add', args: { title: 'found', content: 'a plain finding' } },
    { cmdId: 'c2', type: 'diary.add', args: { title: 'secret', content: 'the secret plan' } },
  ]),
].join('\n');

function activities(scriptedReply: ScriptedReplyFn = thinkScript(() => reply)) {
  return createActivities({ db: handle.db, llm: { env: {}, toolsDir: '', scriptedReply } });
}

async function newAgent(id: string): Promise<void> {
  await handle.db.insert(agents).values({ id, name: id });
  await handle.db.insert(llmRegistry).values([
    { agentId: id, name: 'mind', provider: 'scripted', model: 'script', role: 'agent', priority: 1 },
    { agentId: id, name: 'judge', provider: 'scripted', model: 'script', role: 'validator', priority: 1 },
  ]);
  await handle.db.insert(agentConfig).values({ agentId: id, key: 'novelty_threshold', value: 0.2 });
  await handle.db.insert(ethicsPolicies).values({ agentId: id, title: 'be kind', rule: 'do no harm' });
  await saveLearning(handle.db, {
    shardType: `agent:${id}`,
    agentId: id,
    predicate: 'avoid_pattern',
    args: { action: 'diary.add', pattern: 'secret' },
  });
}

type Acts = ReturnType<typeof activities>;

/** One tick as the agent loop runs it; `rest` runs the reflexes and applyCommands (another worker's activities, or the same). */
async function tick(thinker: Acts, rest: Acts, agentId: string, n: number) {
  const thought = await thinker.think(thinkInput(agentId, n));
  const params = { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0 };
  const verdict = await rest.tickReflexes({
    agentId,
    tick: n,
    workflowId: `agent/${agentId}`,
    responseId: thought.responseId!,
    commands: thought.commands.map((c) => ({ cmdId: c.cmdId, type: c.type, args: c.args })),
    params,
    defaults: params,
    stagnation: { lowStreak: 0, anxietyStreak: 0, pending: null, lastStrategyTick: 0 },
    contextMode: 'standard',
  });
  const outcomes = await rest.applyCommands({
    agentId,
    tick: n,
    workflowId: `agent/${agentId}`,
    mode: 'main',
    commands: thought.commands,
    rejected: thought.rejected,
    ...(verdict.allowedCmdIds ? { allowedCmdIds: verdict.allowedCmdIds } : {}),
    heldReasons: verdict.held,
    rating: verdict.rating,
  });
  return { thought, verdict, outcomes: outcomes.map((o) => ({ cmdId: o.cmdId, status: o.status })) };
}

/**
 * Statements that read `table` (a SELECT naming it in its FROM or a JOIN). The read of the
 * agent's row names the kept rows' tables too, for their fingerprint only: it counts as a read of
 * `agents` alone.
 */
const readsOf = (table: string) =>
  sql.statements.filter(
    (s) =>
      /^\s*\(*\s*select/i.test(s) &&
      (table === 'agents' || !/^\s*select .* from "agents"/is.test(s)) &&
      new RegExp(`(from|join)\\s+"${table}"`, 'i').test(s),
  );

/** The rows a snapshot keeps per agent while their fingerprint holds. */
const rareTables = [
  'agent_config',
  'ethics_policies',
  'llm_registry',
  'learnings',
  'system_prompts',
  'thinking_methods',
  'mcp_tools',
];

describe('one snapshot per tick', () => {
  it('think, reflexes and applyCommands read the kept rows once, and never read the reply back', async () => {
    await newAgent('snap-a');
    const worker = activities();
    await tick(worker, worker, 'snap-a', 1); // warm-up: starter rows, first calls
    sql.statements.length = 0;
    sql.recording = true;
    const r = await tick(worker, worker, 'snap-a', 2);
    sql.recording = false;

    expect(r.outcomes).toEqual([
      { cmdId: 'c1', status: 'applied' },
      // The learned avoid_pattern (from the snapshot's learnings) holds the second one.
      { cmdId: 'c2', status: 'rejected' },
    ]);
    // Each table once (the MCP tools twice: those the agent discovered, and how many it has not).
    for (const table of rareTables) expect(readsOf(table), table).toHaveLength(table === 'mcp_tools' ? 2 : 1);
    // The agent's row, the previous replies and think's retry check come in the context's one
    // statement; the reply is never read back (by its id).
    const [contextRead, ...more] = readsOf('agents');
    expect(more).toEqual([]);
    expect(contextRead).toMatch(/from "llm_recent_responses"/);
    expect(contextRead).toMatch(/from "goals"/);
    expect(sql.statements.filter((s) => /^\s*select/i.test(s) && /"llm_recent_responses"\."id" = \$/.test(s))).toEqual(
      [],
    );

    // The next tick, nothing of those rows changed since: the agent's row only, and the same decisions.
    sql.statements.length = 0;
    sql.recording = true;
    const next = await tick(worker, worker, 'snap-a', 3);
    sql.recording = false;
    expect(next.outcomes).toEqual(r.outcomes);
    for (const table of rareTables) expect(readsOf(table), table).toHaveLength(0);
    expect(readsOf('agents')).toHaveLength(1);
  });

  it("a new system prompt, then a thinking method put in use, are each in the next tick's prompt, their rows read once", async () => {
    await newAgent('snap-p');
    const worker = activities();
    await tick(worker, worker, 'snap-p', 1);
    await tick(worker, worker, 'snap-p', 2);
    /** Tick n's system message, and which of the kept rows it read. */
    const run = async (n: number) => {
      sql.statements.length = 0;
      sql.recording = true;
      await tick(worker, worker, 'snap-p', n);
      sql.recording = false;
      const [stored] = await handle.db
        .select({ messages: tickPrompts.messages })
        .from(tickPrompts)
        .where(and(eq(tickPrompts.agentId, 'snap-p'), eq(tickPrompts.tick, n)));
      return { system: stored!.messages[0]!.content, read: rareTables.filter((t) => readsOf(t).length > 0) };
    };
    await handle.db
      .insert(systemPrompts)
      .values({ agentId: 'snap-p', kind: 'full', content: 'You are Pell, who counts herons.', version: 2 });
    const third = await run(3);
    expect(third.system).toContain('You are Pell, who counts herons.');
    expect(third.read).toEqual(rareTables);
    await handle.db
      .insert(thinkingMethods)
      .values({ agentId: 'snap-p', name: 'pros-cons', prompt: 'Weigh the pros and cons first.', active: true });
    const fourth = await run(4);
    expect(fourth.system).toContain('Weigh the pros and cons first.');
    expect(fourth.read).toEqual(rareTables);
    // Unchanged since: the next tick reads none of them again, and shows both.
    const fifth = await run(5);
    expect(fifth.read).toEqual([]);
    expect(fifth.system).toContain('You are Pell, who counts herons.');
    expect(fifth.system).toContain('Weigh the pros and cons first.');
  });

  it('on another worker the reflexes and applyCommands read for themselves and decide the same', async () => {
    await newAgent('snap-b');
    await newAgent('snap-c');
    const one = activities();
    const other = activities();
    await tick(one, one, 'snap-b', 1);
    await tick(one, other, 'snap-c', 1);
    const same = await tick(one, one, 'snap-b', 2);
    // A setting written since: both workers read the rows again.
    await handle.db.update(agentConfig).set({ value: 0.25 }).where(eq(agentConfig.agentId, 'snap-c'));
    sql.statements.length = 0;
    sql.recording = true;
    const split = await tick(one, other, 'snap-c', 2);
    sql.recording = false;

    expect(split.outcomes).toEqual(same.outcomes);
    expect(split.verdict.validationMode).toBe(same.verdict.validationMode);
    expect(split.verdict.rating).toBe(same.verdict.rating);
    expect(split.verdict.allowedCmdIds).toEqual(same.verdict.allowedCmdIds);
    // The other worker read the snapshot once for both of its activities, and the reply by its id.
    expect(readsOf('agent_config')).toHaveLength(2);
    expect(readsOf('learnings')).toHaveLength(2);
    expect(readsOf('llm_recent_responses').some((s) => /"id" = \$/.test(s))).toBe(true);
  });

  it('a retried think reads afresh: a registry row fixed during an outage is used at once', async () => {
    await handle.db.insert(agents).values({ id: 'snap-d', name: 'snap-d' });
    const [row] = await handle.db
      .insert(llmRegistry)
      .values({
        agentId: 'snap-d',
        name: 'mind',
        provider: 'scripted',
        model: 'script',
        role: 'agent',
        priority: 1,
        params: { error: 'endpoint down' },
      })
      .returning({ id: llmRegistry.id });
    const worker = activities();
    await expect(worker.think(thinkInput('snap-d', 1))).rejects.toMatchObject({ type: 'LlmUnavailable' });
    await handle.db.update(llmRegistry).set({ params: {} }).where(eq(llmRegistry.id, row!.id));
    const thought = await worker.think(thinkInput('snap-d', 1));
    expect(thought.responseId).not.toBeNull();
    expect(thought.commands.map((c) => c.cmdId)).toEqual(['c1', 'c2']);
  });
});

describe('the prompt a tick sent its model', () => {
  /** Every think call's messages, as the scripted model received them. */
  const seen: ChatMessage[][] = [];
  const listening = () => activities(thinkScript((messages) => (seen.push(messages.map((m) => ({ ...m }))), reply)));
  const promptRows = (agentId: string) =>
    handle.db.select().from(tickPrompts).where(eq(tickPrompts.agentId, agentId)).orderBy(asc(tickPrompts.tick));

  it('is stored as the model got it, in the statement that records the reply, once: a retry neither adds nor changes it', async () => {
    await newAgent('prompt-a');
    await handle.db.insert(notes).values({
      agentId: 'prompt-a',
      direction: 'in',
      source: 'user',
      text: 'look at <b>this</b> & that',
      priority: 5,
    });
    const worker = listening();
    seen.length = 0;
    sql.statements.length = 0;
    sql.recording = true;
    const first = await worker.think(thinkInput('prompt-a', 1));
    sql.recording = false;

    expect(seen).toHaveLength(1);
    const [row] = await promptRows('prompt-a');
    expect(row).toMatchObject({
      tick: 1,
      messages: seen[0],
      chars: seen[0]!.reduce((n, m) => n + m.content.length, 0),
    });
    expect(row!.chars).toBe(first.promptChars);
    expect(row!.messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(row!.messages[1]!.content).toContain('look at <b>this</b> & that');
    // The scripted model counts ceil(chars / 4) over the messages joined by newlines.
    expect(row!.promptTokens).toBe(Math.ceil((row!.chars + seen[0]!.length - 1) / 4));
    // No round trip of its own: the one statement that writes the prompt also inserts the reply.
    const writes = sql.statements.filter((q) => /"tick_prompts"/.test(q));
    expect(writes).toHaveLength(1);
    expect(writes[0]).toMatch(/insert into "llm_recent_responses"/);
    expect(writes[0]).toMatch(/insert into "tick_prompts"/);

    const again = await worker.think(thinkInput('prompt-a', 1));
    expect(again.replayed).toBe(true);
    expect(seen).toHaveLength(1);
    expect(await promptRows('prompt-a')).toEqual([row]);
  });

  it('is not stored when the reply was re-read from an earlier attempt’s model call', async () => {
    await newAgent('prompt-b');
    const worker = listening();
    await worker.think(thinkInput('prompt-b', 1));
    // As if the first attempt died after the model answered and before its reply was recorded.
    await handle.db.delete(llmRecentResponses).where(eq(llmRecentResponses.agentId, 'prompt-b'));
    await handle.db.delete(tickPrompts).where(eq(tickPrompts.agentId, 'prompt-b'));
    seen.length = 0;
    const retried = await worker.think(thinkInput('prompt-b', 1));
    expect(seen).toHaveLength(0);
    expect(retried.responseId).not.toBeNull();
    expect(await promptRows('prompt-b')).toEqual([]);
  });

  it('is cut to the cap, each message keeping its beginning and its full length', async () => {
    await newAgent('prompt-c');
    const huge = `You are a careful agent. ${'Remember the bees. '.repeat(6_000)}`;
    await handle.db.insert(systemPrompts).values({ agentId: 'prompt-c', kind: 'full', content: huge });
    seen.length = 0;
    await listening().think(thinkInput('prompt-c', 1));
    const [row] = await promptRows('prompt-c');
    const [system, user] = seen[0]!;
    expect(system!.content.length).toBeGreaterThan(tickPromptLimits.maxBytes);
    // The user message (this tick) is whole; the system message keeps what room is left.
    expect(row!.messages[1]).toEqual(user);
    const kept = row!.messages[0]!;
    expect({ role: kept.role, chars: kept.chars, prefix: system!.content.startsWith(kept.content) }).toEqual({
      role: 'system',
      chars: system!.content.length,
      prefix: true,
    });
    // All the room is used, to the last whole character.
    const bytes = utf8Bytes(kept.content) + utf8Bytes(user!.content);
    expect(bytes).toBeLessThanOrEqual(tickPromptLimits.maxBytes);
    expect(bytes).toBeGreaterThan(tickPromptLimits.maxBytes - 4);
    expect(row!.chars).toBe(system!.content.length + user!.content.length);
  });

  it('is kept for the agent’s last ticks only, another agent’s untouched', async () => {
    await newAgent('prompt-d');
    await newAgent('prompt-e');
    const old = (agentId: string, tick: number) => ({
      agentId,
      tick,
      messages: [{ role: 'user' as const, content: `tick ${tick}` }],
      chars: 6,
      promptTokens: 2,
    });
    const kept = tickPromptLimits.keptTicks;
    await handle.db
      .insert(tickPrompts)
      .values([old('prompt-d', 1), old('prompt-d', 2), old('prompt-d', 3), old('prompt-e', 1)]);
    await listening().think(thinkInput('prompt-d', kept + 2));
    expect((await promptRows('prompt-d')).map((r) => r.tick)).toEqual([3, kept + 2]);
    expect((await promptRows('prompt-e')).map((r) => r.tick)).toEqual([1]);
    expect(
      await handle.db
        .select({ tick: llmRecentResponses.tick })
        .from(llmRecentResponses)
        .where(and(eq(llmRecentResponses.agentId, 'prompt-d'), eq(llmRecentResponses.tick, kept + 2))),
    ).toHaveLength(1);
  });
});
