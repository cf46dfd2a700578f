/**
 * State-machine tools on the real Postgres: progressive discovery (undiscovered → refused and
 * logged), invalid actions list the valid ones, every transition logged, state kept per agent
 * in tool_states (a fresh activity instance — a restarted worker — finds it), read-only queries
 * scoped to the agent's own rows, danger-zone actions held, LangChain descriptions that show
 * the current state.
 */
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createToolActivities, toolDefinitions } from '../../activities/tools.js';
import {
  agents,
  decisionLog,
  discoveredTools,
  escalations,
  notes,
  toolRegistry,
  toolStates,
  toolTransitions,
} from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';

let handle: MigratedDatabase;
let tools: ReturnType<typeof createToolActivities>;
let n = 0;
const key = () => `test/${++n}`;

beforeAll(async () => {
  handle = await migratedDatabase('mindloop_tools', 10);
  tools = createToolActivities({ db: handle.db });
  await tools.ensureBuiltinTools();
  await handle.db.insert(agents).values([
    { id: 'ada', name: 'ada' },
    { id: 'bob', name: 'bob' },
  ]);
  await tools.grantStarterTools({ agentId: 'ada' });
});
afterAll(async () => {
  await handle?.dispose();
});

async function grant(agentId: string, name: string) {
  const [t] = await handle.db.select().from(toolRegistry).where(eq(toolRegistry.name, name));
  await handle.db.insert(discoveredTools).values({ agentId, toolId: t!.id, via: 'escalation' }).onConflictDoNothing();
}

describe('state-machine tools (Postgres)', () => {
  it('an undiscovered tool is refused and the refusal is logged', async () => {
    const r = await tools.callTool({ agentId: 'ada', tool: 'database', action: 'connect', key: 'undiscovered-1' });
    expect(r).toEqual({
      ok: false,
      tool: 'database',
      action: 'connect',
      refused: 'undiscovered',
      error:
        "tool 'database' is not among your discovered tools (discover_tools, escalate, request_state_machine_design); escalate to be granted it",
    });
    const [row] = await handle.db
      .select()
      .from(toolTransitions)
      .where(eq(toolTransitions.idempotencyKey, 'undiscovered-1'));
    expect(row).toMatchObject({ agentId: 'ada', tool: 'database', result: 'undiscovered', discovered: false });
    expect((await tools.toolDescriptions({ agentId: 'ada' })).map((d) => d.name)).toEqual([
      'discover_tools',
      'escalate',
      'request_state_machine_design',
    ]);
  });

  it('an invalid action returns an error listing the valid actions; the transition is logged', async () => {
    await grant('ada', 'database');
    const r = await tools.callTool({
      agentId: 'ada',
      tool: 'database',
      action: 'query',
      args: { table: 'notes' },
      key: 'invalid-1',
    });
    expect(r).toMatchObject({
      ok: false,
      refused: 'invalid_action',
      state: 'IDLE',
      validActions: ['connect'],
      error: "database: action 'query' is not valid in state IDLE; valid actions: connect",
    });
    const [row] = await handle.db.select().from(toolTransitions).where(eq(toolTransitions.idempotencyKey, 'invalid-1'));
    expect(row).toMatchObject({ result: 'invalid_action', fromState: 'IDLE', toState: 'IDLE' });
  });

  it('IDLE → CONNECTED → QUERY_READY: read-only queries on the agent’s own rows only; state survives a new activity instance', async () => {
    const db = handle.db;
    await db.insert(notes).values([
      { agentId: 'ada', direction: 'in', source: 'user', text: 'mine' },
      { agentId: 'bob', direction: 'in', source: 'user', text: 'not yours' },
    ]);
    expect(await tools.callTool({ agentId: 'ada', tool: 'database', action: 'connect', key: key() })).toMatchObject({
      ok: true,
      state: 'CONNECTED',
    });
    // A restarted worker: a new activity instance reads the state from tool_states.
    const again = createToolActivities({ db });
    const q = await again.callTool({
      agentId: 'ada',
      tool: 'database',
      action: 'query',
      args: { table: 'notes', columns: ['agent_id', 'text'] },
      key: key(),
    });
    expect(q).toMatchObject({
      ok: true,
      state: 'QUERY_READY',
      output: { table: 'notes', count: 1, rows: [{ agent_id: 'ada', text: 'mine' }] },
    });
    // Even asking for bob's rows explicitly yields only ada's (agent_id is always ANDed in).
    const sneaky = await again.callTool({
      agentId: 'ada',
      tool: 'database',
      action: 'query',
      args: { table: 'notes', where: { agent_id: 'bob' } },
      key: key(),
    });
    expect(sneaky).toMatchObject({ ok: true, output: { count: 0 } });
    const bad = await again.callTool({
      agentId: 'ada',
      tool: 'database',
      action: 'query',
      args: { table: 'pg_shadow' },
      key: key(),
    });
    expect(bad).toMatchObject({
      ok: false,
      refused: 'error',
      state: 'QUERY_READY',
      error: expect.stringContaining("table 'pg_shadow' is not one of yours"),
    });
    const badCol = await again.callTool({
      agentId: 'ada',
      tool: 'database',
      action: 'query',
      args: { table: 'notes', columns: ['text; drop table notes'] },
      key: key(),
    });
    expect(badCol).toMatchObject({
      ok: false,
      refused: 'error',
      error: expect.stringContaining("notes has no column 'text; drop table notes'"),
    });
    const [st] = await db
      .select()
      .from(toolStates)
      .where(and(eq(toolStates.agentId, 'ada'), eq(toolStates.tool, 'database')));
    expect(st!.state).toBe('QUERY_READY');
    const log = await db
      .select()
      .from(toolTransitions)
      .where(
        and(eq(toolTransitions.agentId, 'ada'), eq(toolTransitions.tool, 'database'), eq(toolTransitions.result, 'ok')),
      )
      .orderBy(asc(toolTransitions.id));
    expect(log.map((r) => `${r.fromState}-${r.action}->${r.toState}`)).toEqual([
      'IDLE-connect->CONNECTED',
      'CONNECTED-query->QUERY_READY',
      'QUERY_READY-query->QUERY_READY',
    ]);
    expect(await again.callTool({ agentId: 'ada', tool: 'database', action: 'disconnect', key: key() })).toMatchObject({
      ok: true,
      state: 'IDLE',
    });
  });

  it('a retried call (same key) returns the first answer without a second transition', async () => {
    const first = await tools.callTool({ agentId: 'ada', tool: 'database', action: 'connect', key: 'retry-1' });
    const second = await tools.callTool({ agentId: 'ada', tool: 'database', action: 'connect', key: 'retry-1' });
    expect(second).toEqual(first);
    expect(
      await handle.db.select().from(toolTransitions).where(eq(toolTransitions.idempotencyKey, 'retry-1')),
    ).toHaveLength(1);
    await tools.callTool({ agentId: 'ada', tool: 'database', action: 'disconnect', key: key() });
  });

  it('a danger-zone action is held (not run, state unchanged) unless approved', async () => {
    const db = handle.db;
    const machine = {
      name: 'container_runner',
      description: 'run a container',
      initial: 'READY',
      states: {
        READY: {
          description: 'ready',
          actions: { run: { description: 'run an image', args: { image: 'image', privileged: 'bool' } } },
        },
      },
    };
    await db
      .insert(toolRegistry)
      .values({ name: 'container_runner', kind: 'designed', status: 'active', spec: { machine } });
    await grant('ada', 'container_runner');
    const held = await tools.callTool({
      agentId: 'ada',
      tool: 'container_runner',
      action: 'run',
      args: { image: 'alpine', privileged: true },
      key: 'held-1',
    });
    expect(held).toMatchObject({ ok: false, refused: 'held', dangerFlags: ['privileged_container'] });
    expect(
      await db
        .select()
        .from(toolStates)
        .where(and(eq(toolStates.agentId, 'ada'), eq(toolStates.tool, 'container_runner'))),
    ).toEqual([]);
    const approved = await tools.callTool({
      agentId: 'ada',
      tool: 'container_runner',
      action: 'run',
      args: { image: 'alpine', privileged: true },
      key: 'held-2',
      approvedBy: 'esc-1',
    });
    expect(approved).toMatchObject({ ok: true, state: 'READY' });
    const [row] = await db.select().from(toolTransitions).where(eq(toolTransitions.idempotencyKey, 'held-2'));
    expect(row).toMatchObject({ result: 'ok', approvedBy: 'esc-1', dangerFlags: ['privileged_container'] });
  });

  it('escalate.list: the agent’s own recent escalations (id, category, status, decision, created), newest first, read-only', async () => {
    const db = handle.db;
    const day = (d: number) => new Date(Date.UTC(2026, 0, d));
    await db.insert(escalations).values([
      {
        id: 'ada-old',
        agentId: 'ada',
        task: 'old question',
        category: 'statistics',
        status: 'resolved',
        decidedBy: 'oversight',
        createdAt: day(1),
      },
      {
        id: 'ada-new',
        agentId: 'ada',
        task: 'new question',
        category: 'code',
        status: 'awaiting_human',
        createdAt: day(3),
      },
      { id: 'bob-1', agentId: 'bob', task: 'not yours', category: 'general', status: 'open', createdAt: day(2) },
    ]);
    await db.insert(decisionLog).values({
      agentId: 'ada',
      escalationId: 'ada-old',
      proposal: { task: 'old question' },
      oversightAnswer: 'approve',
      outcome: 'executed',
    });
    const before = await db.select().from(escalations).orderBy(asc(escalations.id));
    const r = await tools.callTool({ agentId: 'ada', tool: 'escalate', action: 'list', key: 'esc-list-1' });
    expect(r).toEqual({
      ok: true,
      tool: 'escalate',
      action: 'list',
      from: 'READY',
      state: 'READY',
      output: {
        escalations: [
          {
            id: 'ada-new',
            task: 'new question',
            category: 'code',
            status: 'awaiting_human',
            decision: null,
            created: day(3).toISOString(),
          },
          {
            id: 'ada-old',
            task: 'old question',
            category: 'statistics',
            status: 'resolved',
            decision: { by: 'oversight', outcome: 'executed', oversight: 'approve', human: 'none' },
            created: day(1).toISOString(),
          },
        ],
      },
    });
    expect(
      await tools.callTool({ agentId: 'ada', tool: 'escalate', action: 'list', args: { limit: 1 }, key: 'esc-list-2' }),
    ).toMatchObject({ ok: true, output: { escalations: [{ id: 'ada-new' }] } });
    expect(
      await tools.callTool({ agentId: 'ada', tool: 'escalate', action: 'list', args: { limit: 0 }, key: 'esc-list-3' }),
    ).toMatchObject({ ok: false, refused: 'error', error: expect.stringContaining('escalate.list: limit:') });
    expect(await db.select().from(escalations).orderBy(asc(escalations.id))).toEqual(before); // read-only
  });

  it('escalate.escalate with a bad category is refused with the `escalate` command’s error (never silently `general`)', async () => {
    const bad = await tools.callTool({
      agentId: 'ada',
      tool: 'escalate',
      action: 'escalate',
      args: { task: 'help', category: 'astrology' },
      key: 'esc-bad-1',
    });
    expect(bad).toMatchObject({
      ok: false,
      refused: 'error',
      state: 'READY',
      error: expect.stringMatching(
        /^invalid args for escalate: args.category: Invalid option: expected one of "statistics"\|"code"/,
      ),
    });
    const [logged] = await handle.db
      .select()
      .from(toolTransitions)
      .where(eq(toolTransitions.idempotencyKey, 'esc-bad-1'));
    expect(logged).toMatchObject({ result: 'error', fromState: 'READY', toState: 'READY' });
    const good = await tools.callTool({
      agentId: 'ada',
      tool: 'escalate',
      action: 'escalate',
      args: { task: 'help', category: 'code' },
      key: 'esc-ok-1',
    });
    expect(good).toMatchObject({
      ok: true,
      output: { requested: 'escalate.escalate', args: { task: 'help', category: 'code' } },
    });
    const noCap = await tools.callTool({
      agentId: 'ada',
      tool: 'request_state_machine_design',
      action: 'request',
      args: { context: 'why' },
      key: 'design-bad-1',
    });
    expect(noCap).toMatchObject({
      ok: false,
      refused: 'error',
      error: expect.stringContaining('invalid args for request_state_machine_design.request: capability:'),
    });
  });

  it("the model's tool descriptions and native definitions follow the state machine's current state", async () => {
    const described = async () =>
      (await tools.toolDescriptions({ agentId: 'ada' })).find((t) => t.name === 'database')!;
    const db0 = await described();
    expect(db0.description).toContain('Current state: IDLE');
    expect(db0.description).toContain('- connect() → CONNECTED');
    const [def0] = toolDefinitions([db0]);
    expect(def0).toEqual({
      name: 'database',
      description: db0.description,
      parameters: {
        type: 'object',
        properties: {
          action: { type: 'string', description: `one of: ${db0.validActions.join(', ')}` },
          args: { type: 'object', propertyNames: { type: 'string' }, additionalProperties: {} },
        },
        required: ['action'],
        additionalProperties: false,
      },
    });
    expect(await tools.callTool({ agentId: 'ada', tool: 'database', action: 'connect', key: 'desc-1' })).toMatchObject({
      ok: true,
      state: 'CONNECTED',
    });
    const db1 = await described();
    expect(db1.description).toContain('Current state: CONNECTED');
    expect(db1.description).toContain('query(table, columns, where, limit) → QUERY_READY');
    expect(toolDefinitions([db1])[0]!.parameters).toMatchObject({
      properties: { action: { description: 'one of: list_tables, query, disconnect' } },
    });
    expect((await tools.toolDescriptions({ agentId: 'ada' })).map((t) => t.name)).not.toContain('nonexistent');
  });
});
