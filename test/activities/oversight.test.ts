/**
 * The oversight graph without Temporal: the router sends each category to its sub-agent, a
 * malformed answer is asked again (then a typed non-retryable failure), and an agent without
 * an `oversight` model gets the local one (the offline default). The escalation metrics over
 * several days of rows (escalation rate per task falling, catalogue growth, discovery rate).
 */
import { ApplicationFailure } from '@temporalio/common';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatRequest, ChatResult, LlmRouter } from '../../activities/llm/index.js';
import { escalationMetrics, formatMetrics } from '../../db/queries/escalation-metrics.js';
import { buildOversightGraph, ensureOversightModel } from '../../activities/oversight/index.js';
import { escalationInput, subAgentBriefs } from '../../core/escalation.js';
import { agents, discoveredTools, escalations, llmRegistry, tasks, toolRegistry } from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';

function fakeRouter(replies: (req: ChatRequest) => string): LlmRouter & { calls: ChatRequest[] } {
  const calls: ChatRequest[] = [];
  return {
    calls,
    async chat(req): Promise<ChatResult> {
      calls.push(req);
      return {
        text: replies(req),
        registryId: 1,
        provider: 'scripted',
        model: 'fake',
        usage: { promptTokens: 1, completionTokens: 1 },
        costUsd: 0,
        latencyMs: 1,
        attempts: [],
        replayed: false,
        callId: calls.length,
      };
    },
    async candidates() {
      return [];
    },
    async registry() {
      return [];
    },
    async previousCalls() {
      return [];
    },
  };
}
const good = JSON.stringify({ verdict: 'nudge', solution: 's', teaching_moment: 't', recommended_tools: ['database'] });
const input = (category: string) => ({
  escalation: escalationInput.parse({ escalationId: 'e1', agentId: 'ada', task: 'help', category }),
  round: 1,
  key: 'k',
  catalogue: [],
});

describe('oversight graph', () => {
  it('routes each category to its sub-agent', async () => {
    for (const category of Object.keys(subAgentBriefs)) {
      const llm = fakeRouter(() => good);
      const out = await buildOversightGraph({ db: undefined as never, llm }).invoke({ input: input(category) });
      expect(out.route).toBe(category);
      expect(llm.calls[0]).toMatchObject({
        role: 'oversight',
        purpose: `oversight:${category}`,
        idempotencyKey: `k/r1/${category}/a1`,
      });
      expect(llm.calls[0]!.messages[0]!.content).toBe(subAgentBriefs[category as keyof typeof subAgentBriefs]);
      expect(out.answer).toEqual({
        verdict: 'nudge',
        solution: 's',
        teaching_moment: 't',
        recommended_tools: ['database'],
        needs_human: false,
      });
    }
  });

  it('a malformed answer is asked again with the reason; twice malformed is a typed non-retryable failure', async () => {
    let n = 0;
    const llm = fakeRouter(() => (n++ === 0 ? '{"verdict":"maybe"}' : good));
    const out = await buildOversightGraph({ db: undefined as never, llm }).invoke({ input: input('code') });
    expect(out.callIds).toEqual([1, 2]);
    expect(llm.calls[1]!.messages.at(-1)!.content).toContain(
      'Your previous answer was invalid (verdict: Invalid option',
    );
    const bad = fakeRouter(() => 'no JSON here');
    const err = await buildOversightGraph({ db: undefined as never, llm: bad })
      .invoke({ input: input('code') })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ type: 'MalformedOversightReply', nonRetryable: true });
    expect((err as Error).message).toContain('no well-formed answer after 2 attempts: the answer is not JSON');
  });
});

describe('offline default oversight model', () => {
  let handle: MigratedDatabase;
  beforeAll(async () => {
    handle = await migratedDatabase('mindloop_oversight', 10);
  });
  afterAll(async () => {
    await handle?.dispose();
  });
  it('an agent without an oversight row gets the local model, once', async () => {
    await handle.db.insert(agents).values({ id: 'solo', name: 'solo' });
    expect(await ensureOversightModel(handle.db, 'solo')).toEqual({ created: true });
    expect(await ensureOversightModel(handle.db, 'solo')).toEqual({ created: false });
    const rows = await handle.db
      .select()
      .from(llmRegistry)
      .where(and(eq(llmRegistry.agentId, 'solo'), eq(llmRegistry.role, 'oversight')));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ provider: 'local', name: 'default-oversight' });
  });

  it('metrics over several days: the escalation rate per task falls; catalogue growth, discovery rate, first-try validation', async () => {
    const db = handle.db;
    const day = (d: number) => new Date(Date.UTC(2026, 0, d, 12)); // noon UTC: the same day in any session time zone within ±11 h
    await db.insert(agents).values([
      { id: 'grower', name: 'grower' },
      { id: 'other', name: 'other' },
    ]);
    // Tasks: 2 on day 1, 4 on day 2, 5 on day 3 (and another agent's, not counted).
    const taskRows = [
      ...[1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3].map((d, i) => ({
        agentId: 'grower',
        title: `task ${i}`,
        createdAt: day(d),
      })),
      { agentId: 'other', title: 'not mine', createdAt: day(1) },
    ];
    await db.insert(tasks).values(taskRows);
    // Escalations: 2, 2, 1 → rate 1, 0.5, 0.2 per task (falling).
    const esc = (id: string, d: number, agentId = 'grower') => ({
      id,
      agentId,
      task: id,
      category: 'statistics' as const,
      status: 'resolved' as const,
      createdAt: day(d),
    });
    await db
      .insert(escalations)
      .values([
        esc('g1', 1),
        esc('g2', 1),
        esc('g3', 2),
        esc('g4', 2),
        esc('g5', 3),
        esc('o1', 1, 'other'),
        esc('o2', 2, 'other'),
      ]);
    // Catalogue: 2 built-ins on day 1, a designed tool on day 2 (first try) and one on day 3 (second round).
    const design = (escalationId: string, rounds: number) => ({
      design: { rounds, firstTry: rounds === 1, escalationId },
    });
    const [b1, b2, d1, d2] = await db
      .insert(toolRegistry)
      .values([
        { name: 'm_builtin_a', kind: 'builtin', status: 'active', createdAt: day(1) },
        { name: 'm_builtin_b', kind: 'builtin', status: 'active', createdAt: day(1) },
        { name: 'm_queue', kind: 'designed', status: 'active', spec: design('g3', 1), createdAt: day(2) },
        { name: 'm_timer', kind: 'designed', status: 'active', spec: design('g5', 2), createdAt: day(3) },
      ])
      .returning({ id: toolRegistry.id });
    // Discovered: 2 by teaching (day 1), 1 through an escalation (day 2), 1 by design (day 3); another agent's is not counted.
    await db.insert(discoveredTools).values([
      { agentId: 'grower', toolId: b1!.id, via: 'teaching', discoveredAt: day(1) },
      { agentId: 'grower', toolId: b2!.id, via: 'teaching', discoveredAt: day(1) },
      { agentId: 'grower', toolId: d1!.id, via: 'escalation', escalationId: 'g3', discoveredAt: day(2) },
      { agentId: 'grower', toolId: d2!.id, via: 'design', escalationId: 'g5', discoveredAt: day(3) },
      { agentId: 'other', toolId: b1!.id, via: 'escalation', escalationId: 'o1', discoveredAt: day(1) },
    ]);

    const m = await escalationMetrics(db, 'grower');
    expect(m.escalations).toEqual({
      total: 5,
      tasks: 11,
      ratePerTask: 0.455,
      overTime: [
        { day: '2026-01-01', escalations: 2, tasks: 2, ratePerTask: 1 },
        { day: '2026-01-02', escalations: 2, tasks: 4, ratePerTask: 0.5 },
        { day: '2026-01-03', escalations: 1, tasks: 5, ratePerTask: 0.2 },
      ],
    });
    const rates = m.escalations.overTime.map((r) => r.ratePerTask!);
    expect(rates.every((r, i) => r > 0 && (i === 0 || r < rates[i - 1]!))).toBe(true); // nonzero and falling
    expect(m.catalogue).toEqual({
      total: 4,
      byKind: { builtin: 2, designed: 2 },
      growth: [
        { day: '2026-01-01', added: 2, total: 2 },
        { day: '2026-01-02', added: 1, total: 3 },
        { day: '2026-01-03', added: 1, total: 4 },
      ],
    });
    expect(m.discovery).toEqual({
      discovered: 4,
      byVia: { design: 1, escalation: 1, teaching: 2 },
      perEscalation: 0.4, // (escalation 1 + design 1) / 5 escalations
      overTime: [
        { day: '2026-01-01', discovered: 2 },
        { day: '2026-01-02', discovered: 1 },
        { day: '2026-01-03', discovered: 1 },
      ],
    });
    expect(m.designedTools).toEqual({ total: 2, firstTry: 1, firstTryRate: 0.5 });
    const text = formatMetrics(m);
    expect(text).toContain('escalations      5 for 11 tasks: 0.455 per task');
    expect(text).toContain('    2026-01-03  1 / 5 tasks = 0.2');
    expect(text).toContain('designed tools   2, first-try validation 50.0% (1/2)');
    // The other agent sees only its own escalations and discoveries (the catalogue is shared).
    const o = await escalationMetrics(db, 'other');
    expect(o.escalations).toMatchObject({ total: 2, tasks: 1, ratePerTask: 2 });
    expect(o.discovery).toMatchObject({ discovered: 1, perEscalation: 0.5 });
    expect(o.designedTools).toEqual({ total: 0, firstTry: 0, firstTryRate: null });
  });
});
