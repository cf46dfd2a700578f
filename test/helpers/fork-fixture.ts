/**
 * An agent with rows in most agent-owned tables, references between them (goals ← links/tasks,
 * concepts ← links, responses ← facts/abstracts, escalations ← decisions, campaigns ← phases)
 * and globally unique keys, for fork tests and the fork benchmark. Also the snapshot used to
 * prove the parent is never written.
 */
import { getTableName, sql } from 'drizzle-orm';
import type { Db } from '../../db/client.js';
import {
  abstracts,
  agentConfig,
  agentOwnedTables,
  agents,
  campaignPhases,
  campaigns,
  concepts,
  decisionLog,
  diaryEntries,
  escalations,
  forks,
  goalLinks,
  goals,
  lifeforceBudgets,
  lifeforceLedger,
  links,
  llmCalls,
  llmRecentResponses,
  llmRegistry,
  llmMemory,
  notes,
  systemPrompts,
  tasks,
  unverifiedFacts,
  verdicts,
} from '../../db/schema/index.js';

const topics = [
  'soil moisture',
  'compost heat',
  'bee corridors',
  'rain barrels',
  'shade cloth',
  'seed saving',
  'worm bins',
  'frost dates',
  'drip lines',
  'mulch depth',
];

/**
 * Replies shaped like a looping agent's: each opens with the same stock sentence (what a
 * first-sentence digest keeps) and carries its idea later (what a keyword digest can find).
 */
export function replyFor(i: number): { content: string; tags: string[]; ideas: string[] } {
  const topic = topics[i % topics.length]!;
  const idea = `measure ${topic} weekly with a cheap sensor log`;
  return {
    content: `I keep thinking about the garden plan again today. Nothing urgent came in from the user. One concrete idea: ${idea}. It links to ${topics[(i + 3) % topics.length]} as well.`,
    tags: [topic.split(' ')[0]!, 'garden'],
    ideas: [idea],
  };
}

export interface SeedOptions {
  responses?: number;
  /** Extra diary and notebook rows, to reach a row count (the benchmark's 10 000). */
  filler?: number;
  /** Cost per 1k input tokens of the scripted validator (USD). */
  validatorCostPer1k?: number;
}

/** Insert the agent and its rows; returns how many rows it owns. */
export async function seedForkableAgent(db: Db, agentId: string, opts: SeedOptions = {}): Promise<number> {
  const n = opts.responses ?? 30;
  await db.transaction(async (tx) => {
    await tx
      .insert(agents)
      .values({ id: agentId, name: `Agent ${agentId}`, identity: { persona: 'gardener' }, lastTick: n });
    await tx.insert(agentConfig).values([
      { agentId, key: 'abstracts_strategy', value: 'recency' },
      { agentId, key: 'delay_ms', value: 0 },
    ]);
    await tx
      .insert(systemPrompts)
      .values({ agentId, kind: 'full', content: 'You are a patient gardener.', version: 1, active: true });
    const [validator] = await tx
      .insert(llmRegistry)
      .values({
        agentId,
        name: 'judge',
        provider: 'scripted',
        model: 'judge',
        role: 'validator',
        costPer1kInput: opts.validatorCostPer1k ?? 0,
        params: { replies: ['2'] },
      })
      .returning();
    await tx.insert(llmCalls).values([
      {
        agentId,
        registryId: validator!.id,
        role: 'validator',
        model: 'judge',
        ok: true,
        idempotencyKey: `${agentId}:call:1`,
        requestKey: `${agentId}:req:1`,
        reply: '1',
        costUsd: 0.25,
      },
      {
        agentId,
        registryId: validator!.id,
        role: 'validator',
        model: 'judge',
        ok: false,
        idempotencyKey: `${agentId}:call:2`,
        requestKey: `${agentId}:req:1`,
        error: 'timeout',
      },
    ]);
    const gs = await tx
      .insert(goals)
      .values([
        { agentId, title: 'Grow food' },
        { agentId, title: 'Save water' },
      ])
      .returning();
    await tx
      .insert(goalLinks)
      .values({ agentId, parentGoalId: gs[0]!.id, childGoalId: gs[1]!.id, relation: 'subgoal' });
    const ts = await tx
      .insert(tasks)
      .values([
        { agentId, title: 'Install barrels', goalId: gs[1]!.id },
        { agentId, title: 'Turn compost', goalId: gs[0]!.id },
      ])
      .returning();
    const cs = await tx
      .insert(concepts)
      .values([
        { agentId, name: 'water' },
        { agentId, name: 'soil' },
        { agentId, name: 'bees' },
      ])
      .returning();
    const ls = await tx
      .insert(links)
      .values([
        { agentId, fromConceptId: cs[0]!.id, toConceptId: cs[1]!.id, relation: 'feeds' },
        { agentId, fromConceptId: cs[2]!.id, toConceptId: cs[1]!.id, relation: 'enriches' },
      ])
      .returning();
    const rs = await tx
      .insert(llmRecentResponses)
      .values(
        Array.from({ length: n }, (_, i) => ({
          agentId,
          tick: i + 1,
          ...replyFor(i),
          ideas: { new: replyFor(i).ideas, refined: [], discarded: [] },
          novelty: 0.5,
          rating: 1,
        })),
      )
      .returning({ id: llmRecentResponses.id });
    await tx
      .insert(unverifiedFacts)
      .values({ agentId, fact: 'barrels hold 200 l', confidence: 0.6, responseId: rs[0]!.id, taskId: ts[0]!.id });
    await tx.insert(abstracts).values({
      agentId,
      title: 'First days',
      summary: 'garden plans',
      sources: { responses: rs.slice(0, 3).map((r) => r.id), concepts: [cs[0]!.id], links: [ls[0]!.id] },
      strategy: 'recency',
      auto: false,
      trigger: 'command',
    });
    await tx.insert(notes).values({
      agentId,
      direction: 'in',
      source: 'user',
      text: 'check the barrels',
      idempotencyKey: `${agentId}:note:1`,
      taskId: ts[0]!.id,
    });
    await tx.insert(escalations).values({ id: `${agentId}-esc-1`, agentId, task: 'buy a pump?', taskId: ts[0]!.id });
    await tx.insert(decisionLog).values({ agentId, proposal: { buy: 'pump' }, escalationId: `${agentId}-esc-1` });
    await tx.insert(campaigns).values({ id: `${agentId}-camp-1`, agentId, goal: 'winterise', goalId: gs[0]!.id });
    await tx
      .insert(campaignPhases)
      .values({ agentId, campaignId: `${agentId}-camp-1`, ordinal: 1, name: 'cover beds' });
    await tx
      .insert(lifeforceLedger)
      .values({ agentId, idempotencyKey: `${agentId}:grant:1`, kind: 'grant', amount: 100 });
    const filler = opts.filler ?? 0;
    for (let i = 0; i < filler; i += 1000) {
      const k = Math.min(1000, filler - i);
      const half = Math.ceil(k / 2);
      await tx.insert(diaryEntries).values(
        Array.from({ length: half }, (_, j) => ({
          agentId,
          title: `entry ${i + j}`,
          content: `diary text ${i + j} `.repeat(8),
        })),
      );
      if (k - half > 0)
        await tx
          .insert(llmMemory)
          .values(Array.from({ length: k - half }, (_, j) => ({ agentId, content: `remember ${i + j}` })));
    }
  });
  return countRows(db, agentId);
}

/** Rows of state `agentId` owns across every agent-owned table (its fork records and verdicts are not state). */
export async function countRows(db: Db, agentId: string): Promise<number> {
  let total = 0;
  for (const t of agentOwnedTables) {
    if (t === forks || t === verdicts) continue;
    const r = await db.execute(sql`select count(*)::int as n from ${t} where agent_id = ${agentId}`);
    total += Number((r.rows[0] as { n: number }).n);
  }
  return total;
}

/**
 * The parent's state, every table, ordered by id, each row as Postgres's own text: compared byte for byte
 * before and after a fork. Its own `forks`/`verdicts` records are not state (they log the forks), and
 * its lifeforce budgets and ledger are left out: the parent funds each fork (a carve, settled at what
 * the fork spent), which the lifeforce tests check on their own.
 */
export async function snapshotAgent(db: Db, agentId: string): Promise<string> {
  // Each row as Postgres prints it (`row::text`): every column, microseconds and jsonb as stored,
  // so the comparison is byte for byte and not through JS types (a Date drops microseconds).
  const out: Record<string, unknown> = {
    agents: (await db.execute(sql`select s::text as r from ${agents} s where s.id = ${agentId}`)).rows.map((x) => x.r),
  };
  for (const t of agentOwnedTables) {
    if (t === forks || t === verdicts || t === lifeforceBudgets || t === lifeforceLedger) continue;
    const r = await db.execute(sql`select s::text as r from ${t} s where s.agent_id = ${agentId} order by s.id`);
    out[getTableName(t)] = r.rows.map((x) => x.r);
  }
  return JSON.stringify(out);
}
