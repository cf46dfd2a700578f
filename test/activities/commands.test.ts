/**
 * Command application against a real Postgres (a fresh, migrated database for this file):
 * every family applies and reads back, refusals are recorded with their reason, and a
 * retried applyCommands never applies a command twice.
 */
import { and, asc, eq, sql } from 'drizzle-orm';
import type { PgTable } from 'drizzle-orm/pg-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commandResultText, createCommandActivities } from '../../activities/tick/apply-commands.js';
import type { CommandOutcome, ParsedCommand } from '../../core/loop-types.js';
import {
  abstracts,
  agentConfig,
  agents,
  commandLog,
  concepts,
  diaryEntries,
  goalLinks,
  goals,
  links,
  llmMemory,
  llmRecentResponses,
  notes,
  processLog,
  tasks,
  unverifiedFacts,
} from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';

const agentId = 'cmd-test';
let handle: MigratedDatabase;
let acts: ReturnType<typeof createCommandActivities>;
let tick = 0;

beforeAll(async () => {
  handle = await migratedDatabase('mindloop_commands');
  await handle.db.insert(agents).values([
    { id: agentId, name: 'Command test' },
    { id: 'other-agent', name: 'Someone else' },
  ]);
  acts = createCommandActivities({ db: handle.db });
});

afterAll(async () => {
  await handle?.dispose();
});

let seq = 0;
const c = (type: string, args: Record<string, unknown> = {}, cmdId = `c${++seq}`): ParsedCommand => ({
  cmdId,
  type,
  args,
});

/** Apply commands at a new tick; returns the outcomes and that tick. */
async function run(commands: ParsedCommand[], extra: Partial<Parameters<typeof acts.applyCommands>[0]> = {}) {
  const t = ++tick;
  const outcomes = await acts.applyCommands({
    agentId,
    tick: t,
    workflowId: `agent/${agentId}`,
    mode: 'main',
    commands,
    ...extra,
  });
  return { outcomes, tick: t };
}

function expectApplied(outcomes: CommandOutcome[]) {
  for (const o of outcomes)
    expect([o.cmdId, o.type, o.status, o.message]).toEqual([o.cmdId, o.type, 'applied', o.message]);
}

/** The next-tick context text of one command (command_log.result). */
async function resultOf(t: number, cmdId: string): Promise<string> {
  const [row] = await handle.db
    .select()
    .from(commandLog)
    .where(and(eq(commandLog.agentId, agentId), eq(commandLog.tick, t), eq(commandLog.cmdId, cmdId)));
  if (!row) throw new Error(`no command_log row for ${t}/${cmdId}`);
  return commandResultText(row);
}

const idIn = (message: string) => Number(/#(\d+)/.exec(message)?.[1]);

describe('diary', () => {
  it('add → list → search → pin → read → update → delete', async () => {
    const add = await run([
      c('diary.add', { title: 'Quantum notes', content: 'Entanglement is not signalling.', tags: ['physics'] }),
      c('diary.add', { title: 'Groceries', content: 'Eggs, bread.' }),
    ]);
    expectApplied(add.outcomes);
    const [q, g] = add.outcomes.map((o) => idIn(o.message));
    expect(add.outcomes[0]!.message).toBe(`diary entry #${q} added`);
    const [row] = await handle.db.select().from(diaryEntries).where(eq(diaryEntries.id, q!));
    expect(row).toMatchObject({ agentId, title: 'Quantum notes', tags: ['physics'], tick: add.tick });

    const list = await run([
      c('diary.list', {}, 'l'),
      c('diary.search', { query: 'ENTANGLE' }, 's'),
      c('diary.search', { query: '100%' }, 's2'),
    ]);
    expectApplied(list.outcomes);
    expect(list.outcomes[0]!.message).toBe('2 diary entries');
    const listText = await resultOf(list.tick, 'l');
    expect(listText.split('\n')[0]).toMatch(new RegExp(`^#${g} Groceries`));
    expect(await resultOf(list.tick, 's')).toMatch(new RegExp(`^#${q} Quantum notes \\{physics\\} — Entanglement`));
    // No embedder here: the search compared words only, and says so.
    expect(list.outcomes[2]!.message).toBe("0 diary entries matching '100%' (by words only)");

    const pin = await run([
      c('diary.pin', { id: q }),
      c('diary.list', {}, 'l2'),
      c('diary.read', { id: String(q) }, 'r'),
    ]);
    expectApplied(pin.outcomes);
    expect((await resultOf(pin.tick, 'l2')).split('\n')[0]).toMatch(new RegExp(`^#${q} \\[pinned\\] Quantum notes`));
    expect(await resultOf(pin.tick, 'r')).toContain('Entanglement is not signalling.');
    const [read] = await handle.db.select().from(diaryEntries).where(eq(diaryEntries.id, q!));
    // Every read that showed it counts one use: the two lists, the search that found it and the read.
    expect(read!.accessCount).toBe(4);

    const upd = await run([
      c('diary.update', { id: q, content: 'Revised.' }),
      c('diary.delete', { id: g }),
      c('diary.list', {}, 'l3'),
    ]);
    expectApplied(upd.outcomes);
    expect(await resultOf(upd.tick, 'l3')).not.toContain('Groceries');
    const [archived] = await handle.db.select().from(diaryEntries).where(eq(diaryEntries.id, g!));
    expect(archived!.archivedAt).not.toBeNull();
    expect((await handle.db.select().from(diaryEntries).where(eq(diaryEntries.id, q!)))[0]!.content).toBe('Revised.');

    const missing = await run([c('diary.read', { id: 999_999 }), c('diary.pin', { id: g })]);
    expect(missing.outcomes.map((o) => [o.status, o.message])).toEqual([
      ['error', 'diary entry #999999 not found'],
      ['error', `diary entry #${g} not found`],
    ]);
  });

  it('stores read results capped at 8 KB and returns a short message', async () => {
    const long = 'x'.repeat(20_000);
    const add = await run([c('diary.add', { title: 'Long', content: long })]);
    const id = idIn(add.outcomes[0]!.message);
    const read = await run([c('diary.read', { id }, 'r')]);
    expect(read.outcomes[0]!.message.length).toBeLessThanOrEqual(200);
    const [row] = await handle.db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.tick, read.tick), eq(commandLog.cmdId, 'r')));
    const result = row!.result as { text: string; truncated: boolean };
    expect(result.text.length).toBeLessThanOrEqual(8 * 1024);
    expect(result.truncated).toBe(true);
  });
});

describe('concepts and links', () => {
  it('adds concepts, links them by name, reads the graph; a DB error rolls back only its command', async () => {
    const add = await run([
      c('concepts.add', { name: 'entropy', tags: ['physics'] }),
      c('concepts.add', { name: 'information', weight: 2 }),
      c('links.add', { from: 'entropy', to: 'information', relation: 'measures' }),
      c('concepts.read', { concept: 'entropy' }, 'read'),
      c('concepts.add', { name: 'entropy' }),
    ]);
    expect(add.outcomes.map((o) => o.status)).toEqual(['applied', 'applied', 'applied', 'applied', 'error']);
    expect(add.outcomes[4]!.message).toMatch(/^concept 'entropy' already exists \(#\d+\)$/);
    expect(await resultOf(add.tick, 'read')).toMatch(/Links:\n#\d+ entropy \(#\d+\) -\[measures, w 1\]-> information/);
    const entropyId = idIn(add.outcomes[0]!.message);
    const infoId = idIn(add.outcomes[1]!.message);

    // Renaming onto a taken name violates concepts_agent_id_name_uq inside the transaction:
    // that command is rolled back and recorded as 'error'; its neighbours still apply.
    const clash = await run([
      c('concepts.add', { name: 'order' }),
      c('concepts.update', { id: infoId, name: 'entropy', description: 'should not stick' }, 'clash'),
      c('links.list', { concept: entropyId }, 'll'),
    ]);
    expect(clash.outcomes.map((o) => o.status)).toEqual(['applied', 'error', 'applied']);
    expect(clash.outcomes[1]!.message).toMatch(
      /^database error: duplicate key value violates unique constraint "concepts_agent_id_name_uq"/,
    );
    const [info] = await handle.db.select().from(concepts).where(eq(concepts.id, infoId));
    expect(info).toMatchObject({ name: 'information', description: null });
    const [logRow] = await handle.db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.tick, clash.tick), eq(commandLog.cmdId, 'clash')));
    expect(logRow).toMatchObject({ status: 'error', type: 'concepts.update' });
    expect(await resultOf(clash.tick, 'll')).toContain('-[measures, w 1]->');

    const del = await run([
      c('links.delete', { id: (await handle.db.select().from(links))[0]!.id }),
      c('links.list', {}, 'l'),
    ]);
    expectApplied(del.outcomes);
    expect(del.outcomes[1]!.message).toBe('0 links');
    const missing = await run([c('links.add', { from: 'entropy', to: 'nothing' })]);
    expect(missing.outcomes[0]).toMatchObject({
      status: 'error',
      message: "concept 'nothing' not found (add it with concepts.add)",
    });
  });
});

describe('goals and tasks', () => {
  it('adds goals with a hierarchy, links, and completes one', async () => {
    const a = await run([c('goals.add', { title: 'Understand physics', priority: 5 })]);
    const parent = idIn(a.outcomes[0]!.message);
    const b = await run([
      c('goals.add', { title: 'Learn thermodynamics', parent_id: parent }),
      c('goals.add', { title: 'Read a textbook' }),
    ]);
    expectApplied(b.outcomes);
    const [child, other] = b.outcomes.map((o) => idIn(o.message));
    const l = await run([
      c('goals.link', { parent_id: child, child_id: other, relation: 'depends_on' }),
      c('goals.link', { parent_id: child, child_id: child }),
      c('goals.status', { id: child, status: 'completed' }),
      c('goals.status', { id: other, status: 'failed', failure_reason: 'no textbook' }),
      c('goals.read', { id: child }, 'read'),
      c('goals.list', { status: 'all' }, 'list'),
    ]);
    expect(l.outcomes.map((o) => o.status)).toEqual(['applied', 'error', 'applied', 'applied', 'applied', 'applied']);
    expect(l.outcomes[1]!.message).toBe('a goal can not be linked to itself');
    const rels = await handle.db.select().from(goalLinks).orderBy(asc(goalLinks.id));
    expect(rels.map((r) => [r.parentGoalId, r.childGoalId, r.relation])).toEqual([
      [parent, child, 'subgoal'],
      [child, other, 'depends_on'],
    ]);
    const [done] = await handle.db.select().from(goals).where(eq(goals.id, child!));
    expect(done!.status).toBe('completed');
    expect(done!.completedAt).not.toBeNull();
    const [failed] = await handle.db.select().from(goals).where(eq(goals.id, other!));
    expect(failed).toMatchObject({ status: 'failed', failureReason: 'no textbook' });
    const read = await resultOf(l.tick, 'read');
    expect(read).toContain(`← #${parent} (subgoal)`);
    expect(read).toContain(`→ #${other} (depends_on)`);
    expect((await resultOf(l.tick, 'list')).split('\n')[0]).toMatch(new RegExp(`^#${parent} \\[active\\] \\(p 5\\)`));

    const un = await run([
      c('goals.unlink', { parent_id: child, child_id: other }),
      c('goals.unlink', { parent_id: child, child_id: other }),
    ]);
    expect(un.outcomes.map((o) => o.status)).toEqual(['applied', 'error']);
  });

  it('lists tasks pinned first, then by priority', async () => {
    const add = await run([
      c('tasks.add', { title: 'medium', priority: 5 }),
      c('tasks.add', { title: 'high', priority: 10 }),
      c('tasks.add', { title: 'low', priority: 1 }),
      c('tasks.add', { title: 'finished', priority: 50 }),
    ]);
    expectApplied(add.outcomes);
    const [medium, high, low, finished] = add.outcomes.map((o) => idIn(o.message));
    const ops = await run([
      c('tasks.pin', { id: low }),
      c('tasks.status', { id: finished, status: 'done' }),
      c('tasks.priority', { id: medium, priority: 7 }),
      c('tasks.list', {}, 'list'),
    ]);
    expectApplied(ops.outcomes);
    const lines = (await resultOf(ops.tick, 'list')).split('\n');
    expect(lines.map((line) => idIn(line))).toEqual([low, high, medium]);
    expect(lines[0]).toContain('[pinned]');
    const [done] = await handle.db.select().from(tasks).where(eq(tasks.id, finished!));
    expect(done!.completedAt).not.toBeNull();
  });
});

describe('facts (fact-checks)', () => {
  it('facts.list shows pending facts; facts.resolve records the outcome and closes the task; a fact-check task set done/failed resolves its fact', async () => {
    const checks = await handle.db
      .insert(tasks)
      .values(['a', 'b', 'c', 'd'].map((x) => ({ agentId, title: `Fact-check: fact ${x}` })))
      .returning({ id: tasks.id });
    const [ta, tb, tc, td] = checks.map((t) => t.id);
    const facts = await handle.db
      .insert(unverifiedFacts)
      .values([
        { agentId, fact: 'water boils at 90 C at sea level', confidence: 0.4, taskId: ta },
        { agentId, fact: 'the Danube flows into the Black Sea', confidence: 0.6, taskId: tb },
        { agentId, fact: 'Pluto is a planet', confidence: 0.5, taskId: tc },
        { agentId, fact: 'already settled', confidence: 0.5, taskId: td, status: 'rejected', resolution: 'no' },
        { agentId: 'other-agent', fact: 'not yours', confidence: 0.2 },
      ])
      .returning({ id: unverifiedFacts.id });
    const [fa, fb, fc, fd, foreign] = facts.map((f) => f.id);
    const r = await run([
      c('facts.list', {}, 'list'),
      c('facts.resolve', { fact_id: fa, status: 'rejected', evidence: 'it boils at 100 C' }, 'res'),
      c('tasks.status', { id: tb, status: 'done' }, 'done'),
      c('tasks.status', { id: tc, status: 'failed' }, 'failed'),
      c('tasks.status', { id: td, status: 'done' }, 'settled'),
      c('facts.resolve', { fact_id: foreign, status: 'verified', evidence: 'mine now' }, 'foreign'),
      c('facts.resolve', { fact_id: fa, status: 'maybe', evidence: 'x' }, 'bad'),
    ]);
    expect(r.outcomes.map((o) => [o.cmdId, o.status])).toEqual([
      ['list', 'applied'],
      ['res', 'applied'],
      ['done', 'applied'],
      ['failed', 'applied'],
      ['settled', 'applied'],
      ['foreign', 'error'],
      ['bad', 'rejected'],
    ]);
    const listed = (await resultOf(r.tick, 'list')).split('\n');
    expect(listed.map((l) => idIn(l))).toEqual([fc, fb, fa]); // pending only, newest first
    expect(listed[2]).toBe(`#${fa} [pending] confidence 0.4 task #${ta} water boils at 90 C at sea level`);
    expect(r.outcomes[1]!.message).toBe(`fact #${fa} rejected; fact-check task #${ta} closed`);
    expect(r.outcomes[2]!.message).toBe(`task #${tb} status set to done; fact #${fb} verified`);
    expect(r.outcomes[3]!.message).toBe(`task #${tc} status set to failed; fact #${fc} rejected`);
    expect(r.outcomes[4]!.message).toBe(`task #${td} status set to done`); // its fact was settled before: untouched
    expect(r.outcomes[5]!.message).toBe(`fact #${foreign} not found`);
    const byId = Object.fromEntries((await handle.db.select().from(unverifiedFacts)).map((f) => [f.id, f]));
    expect(byId[fa!]).toMatchObject({ status: 'rejected', resolution: 'it boils at 100 C' });
    expect(byId[fb!]).toMatchObject({ status: 'verified', resolution: `fact-check task #${tb} set done` });
    expect(byId[fc!]).toMatchObject({ status: 'rejected', resolution: `fact-check task #${tc} set failed` });
    expect(byId[fd!]).toMatchObject({ status: 'rejected', resolution: 'no' });
    expect(byId[foreign!]).toMatchObject({ status: 'pending', resolution: null });
    for (const id of [fa, fb, fc]) expect(byId[id!]!.resolvedAt).not.toBeNull();
    const taskStatus = Object.fromEntries((await handle.db.select().from(tasks)).map((t) => [t.id, t]));
    expect(taskStatus[ta!]).toMatchObject({ status: 'done' });
    expect(taskStatus[ta!]!.completedAt).not.toBeNull();
    expect(taskStatus[tc!]).toMatchObject({ status: 'failed' }); // resolving its fact did not reopen or re-close it
  });
});

describe('notes', () => {
  it('sends an outgoing note, lists and marks incoming ones read', async () => {
    const [incoming] = await handle.db
      .insert(notes)
      .values({ agentId, direction: 'in', source: 'user', sender: 'alice', text: 'Hello agent', priority: 3 })
      .returning();
    const r = await run([
      c('notes.send', { text: 'Hello user', priority: 2 }),
      c('notes.list', { unread: true }, 'list'),
      c('notes.read', { id: incoming!.id }, 'read'),
      c('notes.mark_read', { ids: [incoming!.id] }),
    ]);
    expectApplied(r.outcomes);
    const out = await handle.db.select().from(notes).where(eq(notes.direction, 'out'));
    expect(out).toHaveLength(1);
    expect(out[0]).toMatchObject({
      source: 'agent',
      recipient: 'user',
      text: 'Hello user',
      priority: 2,
      idempotencyKey: `cmd/${agentId}/${r.tick}/${r.outcomes[0]!.cmdId}`,
    });
    expect(await resultOf(r.tick, 'list')).toMatch(
      new RegExp(`^#${incoming!.id} \\[user alice\\] \\(p 3\\) unread Hello agent`),
    );
    expect(await resultOf(r.tick, 'read')).toContain('Hello agent');
    const [seen] = await handle.db.select().from(notes).where(eq(notes.id, incoming!.id));
    expect(seen!.readAt).not.toBeNull();
    expect(seen!.tickSeen).toBe(r.tick);
  });
});

describe('llm_memory', () => {
  it('adds, pins, updates, lists and archives notebook entries', async () => {
    const a = await run([
      c('llm_memory.add', { content: 'User prefers short answers', tags: ['user'] }),
      c('llm_memory.add', { title: 'Todo', content: 'Check the logs' }),
    ]);
    const [m1, m2] = a.outcomes.map((o) => idIn(o.message));
    const b = await run([
      c('llm_memory.pin', { id: m2 }),
      c('llm_memory.update', { id: m1, content: 'User prefers very short answers' }),
      c('llm_memory.list', {}, 'list'),
      c('llm_memory.delete', { id: m1 }),
      c('llm_memory.list', { tag: 'user' }, 'list2'),
    ]);
    expectApplied(b.outcomes);
    const lines = (await resultOf(b.tick, 'list')).split('\n');
    expect(lines[0]).toBe(`#${m2} [pinned] Todo: Check the logs`);
    expect(lines[1]).toBe(`#${m1} User prefers very short answers {user}`);
    expect(b.outcomes[4]!.message).toBe('0 notebook entries');
    expect((await handle.db.select().from(llmMemory).where(eq(llmMemory.id, m1!)))[0]!.archivedAt).not.toBeNull();
  });
});

describe('config', () => {
  it('config.set writes agent_config and returns configChanged; a bad value is rejected and writes nothing', async () => {
    const r = await run([
      c('config.set', { key: 'delay_ms', value: 250 }),
      c('config.set', { key: 'recent_responses', value: 8 }),
      c('config.set', { key: 'delay_ms', value: -1 }),
      c('config.set', { key: 'api_key', value: 'x' }),
      c('config.get', { key: 'delay_ms' }, 'get'),
      c('config.list', {}, 'list'),
    ]);
    expect(r.outcomes.map((o) => o.status)).toEqual([
      'applied',
      'applied',
      'rejected',
      'rejected',
      'applied',
      'applied',
    ]);
    expect(r.outcomes[0]!.effects).toEqual([{ kind: 'configChanged', keys: ['delay_ms'], values: { delay_ms: 250 } }]);
    expect(r.outcomes[1]!.effects).toEqual([
      { kind: 'configChanged', keys: ['recent_responses'], values: { recent_responses: 8 } },
      { kind: 'setResponses', n: 8 },
    ]);
    expect(r.outcomes[2]!.message).toContain('args.value: Too small');
    expect(r.outcomes[3]!.message).toContain('args.key: Invalid option');
    const rows = await handle.db
      .select()
      .from(agentConfig)
      .where(eq(agentConfig.agentId, agentId))
      .orderBy(asc(agentConfig.key));
    expect(rows.map((x) => [x.key, x.value])).toEqual([
      ['delay_ms', 250],
      ['recent_responses', 8],
    ]);
    expect(await resultOf(r.tick, 'get')).toBe('delay_ms = 250 — pause between ticks (ms)');
    expect(await resultOf(r.tick, 'list')).toContain('novelty_threshold = 0.35 (default)');
  });
});

describe('cycle', () => {
  it('returns the loop effects and writes nothing but the log', async () => {
    const r = await run([
      c('cycle.responses', { n: 12 }),
      c('cycle.concentration', { on: 'on', tags: ['physics'], emotions: ['curiosity'], op: 'and' }),
      c('cycle.concentration', { on: false }),
      c('cycle.meditation', { on: true }),
      c('cycle.mode', { mode: 'manual', filter: { min_priority: 2, sources: ['user'] } }),
      c('cycle.pause', { ticks: 3 }),
      c('cycle.idle', { on: 'on', wake_on: ['note', 'timeout'], timeout_ms: 30_000 }),
      c('cycle.idle', { on: false }),
    ]);
    expectApplied(r.outcomes);
    expect(r.outcomes.map((o) => o.effects)).toEqual([
      [{ kind: 'setResponses', n: 12 }],
      [
        {
          kind: 'setContextMode',
          mode: 'concentration',
          filter: { tags: ['physics'], emotions: ['curiosity'], op: 'and' },
        },
      ],
      [{ kind: 'setContextMode', mode: 'standard' }],
      [{ kind: 'setContextMode', mode: 'meditation' }],
      [{ kind: 'setNotesMode', mode: 'manual', filter: { minPriority: 2, sources: ['user'] } }],
      [{ kind: 'pause', ticks: 3 }],
      [{ kind: 'idle', on: true, wakeOn: ['note', 'timeout'], timeoutMs: 30_000 }],
      [{ kind: 'idle', on: false }],
    ]);
  });
});

describe('process', () => {
  it('start → mark → cleanup closes the finished ones', async () => {
    const s = await run([
      c('process.start', { name: 'crawl', kind: 'sandbox', payload: { url: 'x' } }, 'p1'),
      c('process.start', { name: 'fetch', kind: 'http' }, 'p2'),
    ]);
    expectApplied(s.outcomes);
    const ids = [`p${s.tick}.p1`, `p${s.tick}.p2`];
    expect(s.outcomes[0]!.message).toBe(`process '${ids[0]}' (sandbox: crawl) started`);
    const m = await run([
      c('process.mark', { process_id: ids[0], status: 'error', message: 'boom' }),
      c('process.mark', { process_id: ids[1], status: 'warning', message: 'slow' }),
      c('process.cleanup'),
      c('process.list', {}, 'open'),
      c('process.mark', { process_id: 'nope', status: 'ok' }),
    ]);
    expect(m.outcomes.map((o) => o.status)).toEqual(['applied', 'applied', 'applied', 'applied', 'error']);
    expect(m.outcomes[2]!.message).toBe(`1 finished process(es) closed: ${ids[0]}`);
    expect(await resultOf(m.tick, 'open')).toBe(`${ids[1]} [warning] http: fetch — slow`);
    const rows = await handle.db.select().from(processLog).orderBy(asc(processLog.id));
    expect(rows.map((p) => [p.processId, p.status, p.closedAt !== null])).toEqual([
      [ids[0], 'error', true],
      [ids[1], 'warning', false],
    ]);
    const stop = await run([c('process.stop', { process_id: ids[1] })]);
    expectApplied(stop.outcomes);
  });
});

describe('abstracts', () => {
  it('creates an abstract from responses and diary entries, extends it, refuses unknown sources', async () => {
    const [resp] = await handle.db
      .insert(llmRecentResponses)
      .values({ agentId, tick: 900, content: 'A thought' })
      .returning();
    const [diary] = await handle.db.insert(diaryEntries).values({ agentId, title: 'd', content: 'e' }).returning();
    const [foreign] = await handle.db
      .insert(diaryEntries)
      .values({ agentId: 'other-agent', title: 'theirs', content: 'x' })
      .returning();
    const r = await run([
      c('abstracts.create', {
        title: 'Week one',
        summary: 'Thought about things.',
        tags: ['weekly'],
        sources: { responses: [resp!.id], diary: [diary!.id] },
      }),
      c('abstracts.create', { title: 'Bad', summary: 's', sources: { diary: [foreign!.id] } }),
    ]);
    expect(r.outcomes.map((o) => o.status)).toEqual(['applied', 'error']);
    expect(r.outcomes[1]!.message).toBe(`sources.diary: no #${foreign!.id}`);
    const id = idIn(r.outcomes[0]!.message);
    const [row] = await handle.db.select().from(abstracts).where(eq(abstracts.id, id));
    expect(row).toMatchObject({
      title: 'Week one',
      sources: { responses: [resp!.id], diary: [diary!.id] },
      tickFrom: 900,
      tickTo: 900,
      auto: false,
      trigger: 'command',
    });
    const e = await run([
      c('abstracts.extend', { id, append: 'And more.', sources: { diary: [diary!.id] }, tags: ['extra'] }),
      c('abstracts.read', { id }, 'read'),
      c('abstracts.list', {}, 'list'),
    ]);
    expectApplied(e.outcomes);
    const [ext] = await handle.db.select().from(abstracts).where(eq(abstracts.id, id));
    expect(ext).toMatchObject({
      summary: 'Thought about things.\n\nAnd more.',
      extensions: 1,
      tags: ['weekly', 'extra'],
      sources: { responses: [resp!.id], diary: [diary!.id] },
    });
    expect(await resultOf(e.tick, 'read')).toContain(`sources: responses #${resp!.id}; diary #${diary!.id}`);
  });
});

describe('llm_task', () => {
  it('start with a new task returns startTaskLoop with its id; stop returns stopTaskLoop', async () => {
    const r = await run([
      c('llm_task.start', { title: 'Research entropy', description: 'Find three sources', max_ticks: 5 }),
    ]);
    expectApplied(r.outcomes);
    const effect = r.outcomes[0]!.effects[0];
    expect(effect).toMatchObject({ kind: 'startTaskLoop', title: 'Research entropy', maxTicks: 5 });
    const taskId = (effect as { taskId: number }).taskId;
    const [task] = await handle.db.select().from(tasks).where(eq(tasks.id, taskId));
    expect(task).toMatchObject({
      title: 'Research entropy',
      status: 'in_progress',
      replStatus: 'running',
      replWorkflowId: `agent/${agentId}/task/${taskId}`,
    });

    const again = await run([c('llm_task.start', { task_id: taskId })]);
    expect(again.outcomes[0]).toMatchObject({
      status: 'error',
      message: `task #${taskId} already has a running loop (llm_task.stop it first)`,
    });
    const stop = await run([c('llm_task.stop', { task_id: taskId })]);
    expect(stop.outcomes[0]!.effects).toEqual([{ kind: 'stopTaskLoop', taskId }]);
    const restart = await run([c('llm_task.start', { task_id: taskId })]);
    expect(restart.outcomes[0]!.effects).toEqual([{ kind: 'startTaskLoop', taskId, title: 'Research entropy' }]);
  });
});

describe('refusals are recorded with a reason', () => {
  it('unknown types, malformed args, parser rejections, duplicate ids, help', async () => {
    const r = await run(
      [
        c('teleport.now', {}, 'u'),
        c('diary.add', { title: 'no content' }, 'm'),
        c('help', { family: 'cycle' }, 'h'),
        c('help', {}, 'h'),
      ],
      {
        rejected: [
          { raw: '{"type":"diary.list"}', reason: 'commands block 1 item 1: missing cmd_id', type: 'diary.list' },
          { cmdId: 'h', raw: '{}', reason: "duplicate cmd_id 'h'" },
        ],
      },
    );
    expect(r.outcomes.map((o) => [o.cmdId, o.status])).toEqual([
      ['u', 'unknown'],
      ['m', 'rejected'],
      ['h', 'applied'],
      ['h', 'rejected'],
      ['!rejected.0', 'rejected'],
      ['h', 'rejected'],
    ]);
    expect(r.outcomes[0]!.message).toBe("unknown command type 'teleport.now'; see help");
    expect(r.outcomes[1]!.message).toBe('invalid args for diary.add: args.content: required (string)');
    expect(r.outcomes[3]!.message).toBe("duplicate cmd_id 'h' in this tick");
    expect(await resultOf(r.tick, 'h')).toContain('cycle.pause {ticks}');
    const rows = await handle.db
      .select()
      .from(commandLog)
      .where(eq(commandLog.tick, r.tick))
      .orderBy(asc(commandLog.id));
    expect(rows.map((x) => [x.cmdId, x.type, x.status, x.reason])).toEqual([
      ['u', 'teleport.now', 'unknown', "unknown command type 'teleport.now'; see help"],
      ['m', 'diary.add', 'rejected', 'invalid args for diary.add: args.content: required (string)'],
      ['h', 'help', 'applied', null],
      ['!rejected.0', 'diary.list', 'rejected', 'commands block 1 item 1: missing cmd_id'],
      ['!rejected.1:h', '(unparsed)', 'rejected', "duplicate cmd_id 'h'"],
    ]);
    expect(await resultOf(r.tick, '!rejected.0')).toBe('{"type":"diary.list"}');
  });

  it('keeps commands outside allowedCmdIds as unvalidated, without applying them', async () => {
    const before = await countRows(diaryEntries);
    const r = await run(
      [
        c('diary.add', { title: 'a', content: 'b' }, 'ok'),
        c('diary.add', { title: 'c', content: 'd' }, 'held'),
        c('diary.delete', { id: 1 }, 'del'),
      ],
      {
        allowedCmdIds: ['ok'],
        rating: 1,
      },
    );
    expect(r.outcomes.map((o) => [o.cmdId, o.status])).toEqual([
      ['ok', 'applied'],
      ['held', 'unvalidated'],
      ['del', 'unvalidated'],
    ]);
    expect(r.outcomes[2]!.message).toBe("not validated: diary.delete needs rating ≥ +2, this tick's rating is +1");
    expect(await countRows(diaryEntries)).toBe(before + 1);
    const rows = await handle.db
      .select()
      .from(commandLog)
      .where(eq(commandLog.tick, r.tick))
      .orderBy(asc(commandLog.id));
    expect(rows.map((x) => [x.cmdId, x.status, x.rating, x.threshold, x.args])).toEqual([
      ['ok', 'applied', 1, 1, { title: 'a', content: 'b' }],
      ['held', 'unvalidated', 1, 1, { title: 'c', content: 'd' }],
      ['del', 'unvalidated', 1, 2, { id: 1 }],
    ]);
  });
});

describe('task mode (auxiliary loop)', () => {
  it('reads anything, writes only notes and its own task', async () => {
    const t = await run([c('tasks.add', { title: 'own task' }), c('tasks.add', { title: 'someone else’s' })]);
    const [own, other] = t.outcomes.map((o) => idIn(o.message));
    const r = await run(
      [
        c('diary.list', {}, 'read'),
        c('diary.add', { title: 'x', content: 'y' }, 'write'),
        c('tasks.status', { id: other, status: 'done' }, 'other'),
        c('tasks.status', { id: own, status: 'done' }, 'own'),
        c('tasks.update', { id: own, description: 'found it' }, 'own2'),
        c('notes.send', { text: 'Proposal: read chapter 3' }, 'note'),
        c('llm_task.start', { title: 'nested' }, 'nested'),
        c('cycle.pause', { ticks: 2 }, 'pause'),
      ],
      { mode: 'task', taskId: own },
    );
    expect(r.outcomes.map((o) => [o.cmdId, o.status])).toEqual([
      ['read', 'applied'],
      ['write', 'rejected'],
      ['other', 'rejected'],
      ['own', 'applied'],
      ['own2', 'applied'],
      ['note', 'applied'],
      ['nested', 'rejected'],
      ['pause', 'rejected'],
    ]);
    expect(r.outcomes[1]!.message).toBe('read-only auxiliary loop: diary.add is not allowed');
    expect(r.outcomes[2]!.message).toBe(`read-only auxiliary loop: it may change only its own task #${own}`);
    const [note] = await handle.db.select().from(notes).where(eq(notes.taskId, own!));
    expect(note).toMatchObject({
      source: 'llm:task',
      direction: 'in',
      recipient: 'agent',
      sender: `task/${own}`,
      text: 'Proposal: read chapter 3',
    });
    expect((await handle.db.select().from(tasks).where(eq(tasks.id, other!)))[0]!.status).toBe('open');
    expect((await handle.db.select().from(tasks).where(eq(tasks.id, own!)))[0]).toMatchObject({
      status: 'done',
      description: 'found it',
    });
    // The task loop's keys carry its prefix, so they never collide with the main loop's at the same tick.
    const keys = (
      await handle.db.select({ k: commandLog.cmdId }).from(commandLog).where(eq(commandLog.tick, r.tick))
    ).map((x) => x.k);
    expect(keys.every((k) => k.startsWith(`task${own}.`))).toBe(true);
    const main = await run([c('diary.list', {}, 'read')], {});
    expect(main.outcomes[0]!.status).toBe('applied');
    const sameTick = await acts.applyCommands({
      agentId,
      tick: r.tick,
      mode: 'main',
      commands: [c('diary.list', {}, 'read')],
    });
    expect(sameTick[0]).toMatchObject({ status: 'applied', duplicate: false });
  });
});

/** Rows of this agent in one table. */
async function countRows(table: PgTable): Promise<number> {
  const r = await handle.db.execute<{ n: number }>(
    sql`select count(*)::int as n from ${table} where agent_id = ${agentId}`,
  );
  return r.rows[0]!.n;
}

describe('idempotency', () => {
  it('a crash after the write (afterWrite throws once) and a retry apply nothing twice', async () => {
    let crashes = 0;
    const crashing = createCommandActivities({
      db: handle.db,
      hooks: {
        afterWrite: (cmd) => {
          if (crashes === 0 && cmd.cmdId === 'w2') {
            crashes++;
            throw new Error('worker killed after the write');
          }
        },
      },
    });
    const input = {
      agentId,
      tick: 5000,
      workflowId: `agent/${agentId}`,
      mode: 'main' as const,
      commands: [
        c('diary.add', { title: 'once', content: 'only once' }, 'w1'),
        c('goals.add', { title: 'once goal' }, 'w2'),
        c('notes.send', { text: 'once note' }, 'w3'),
        c('llm_task.start', { title: 'once task' }, 'w4'),
        c('diary.list', {}, 'r1'),
      ],
      rejected: [{ raw: 'x', reason: 'bad' }],
    };
    const tables = [diaryEntries, goals, notes, tasks, commandLog] as const;
    const before = await Promise.all(tables.map(countRows));

    await expect(crashing.applyCommands(input)).rejects.toThrow('worker killed after the write');
    const afterCrash = await Promise.all(tables.map(countRows));
    // w1 and w2 committed before the crash; w3, w4, r1 and the rejection never ran.
    expect(afterCrash.map((n, i) => n - before[i]!)).toEqual([1, 1, 0, 0, 2]);

    const retry = await crashing.applyCommands(input);
    expect(retry.map((o) => [o.cmdId, o.status, o.duplicate])).toEqual([
      ['w1', 'applied', true],
      ['w2', 'applied', true],
      ['w3', 'applied', false],
      ['w4', 'applied', false],
      ['r1', 'applied', false],
      ['!rejected.0', 'rejected', false],
    ]);
    const afterRetry = await Promise.all(tables.map(countRows));
    expect(afterRetry.map((n, i) => n - before[i]!)).toEqual([1, 1, 1, 1, 6]);

    // A third attempt: everything is a duplicate, with the stored messages and effects.
    const third = await crashing.applyCommands(input);
    expect(third.every((o) => o.duplicate)).toBe(true);
    expect(third.map((o) => o.message)).toEqual(retry.map((o) => o.message));
    expect(third[3]!.effects).toEqual(retry[3]!.effects);
    expect(third[3]!.effects[0]).toMatchObject({ kind: 'startTaskLoop', title: 'once task' });
    expect(await Promise.all(tables.map(countRows))).toEqual(afterRetry);
  });

  it('two concurrent attempts of the same tick apply each command once', async () => {
    const input = {
      agentId,
      tick: 6000,
      mode: 'main' as const,
      commands: [
        c('diary.add', { title: 'race', content: 'r' }, 'a'),
        c('tasks.add', { title: 'race task' }, 'b'),
        c('config.set', { key: 'delay_ms', value: 777 }, 'cfg'),
      ],
    };
    const before = await Promise.all([countRows(diaryEntries), countRows(tasks)]);
    const [x, y] = await Promise.all([acts.applyCommands(input), acts.applyCommands(input)]);
    expect(await Promise.all([countRows(diaryEntries), countRows(tasks)])).toEqual([before[0]! + 1, before[1]! + 1]);
    for (let i = 0; i < 3; i++) {
      expect([x[i]!.status, y[i]!.status]).toEqual(['applied', 'applied']);
      expect(x[i]!.duplicate !== y[i]!.duplicate).toBe(true);
      expect(x[i]!.effects).toEqual(y[i]!.effects);
    }
    const [row] = await handle.db
      .select({ n: sql<number>`count(*)::int` })
      .from(diaryEntries)
      .where(eq(diaryEntries.title, 'race'));
    expect(row!.n).toBe(1);
  });
});
