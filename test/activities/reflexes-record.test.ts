/**
 * How the reflexes record a tick's verdict, against a real Postgres (every statement the pool
 * sends is recorded): a tick with nothing to write beside the verdict records it and its metrics
 * row in one statement, with no transaction; a retry after it adds nothing and returns the same
 * verdict. A tick with more to write (a fact-check) does it in a transaction with the verdict
 * last: two attempts of the same tick at once leave one verdict, one metrics row and one
 * fact-check task, and both return the verdict recorded.
 */
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import type { TickReflexesInput } from '../../activities/reflexes/types.js';
import { renderFactsBlock } from '../../core/reply-parser.js';
import { agents, antiStagnationMetrics, llmRecentResponses, llmRegistry, tasks } from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { sqlLog } from '../helpers/sql-log.js';
import { thinkInput, thinkScript } from '../helpers/scripted.js';

let handle: MigratedDatabase;
/** Every SQL text sent through any pg client while `sql.recording` is on. */
const sql = sqlLog();

beforeAll(async () => {
  handle = await migratedDatabase('reflexrecord');
  sql.install();
});

afterAll(async () => {
  sql.restore();
  await handle?.dispose();
});

const acts = (reply: string) =>
  createActivities({ db: handle.db, llm: { env: {}, toolsDir: '', scriptedReply: thinkScript(() => reply) } });

async function newAgent(id: string): Promise<void> {
  await handle.db.insert(agents).values({ id, name: id });
  await handle.db
    .insert(llmRegistry)
    .values({ agentId: id, name: 'mind', provider: 'scripted', model: 'script', role: 'agent', priority: 1 });
}

const params = { temperature: 0.7, topP: 0.9, presencePenalty: 0, frequencyPenalty: 0 };
const reflexInput = (agentId: string, tick: number, responseId: number): TickReflexesInput => ({
  agentId,
  tick,
  workflowId: `agent/${agentId}`,
  responseId,
  commands: [],
  params,
  defaults: params,
  stagnation: { lowStreak: 0, anxietyStreak: 0, pending: null, lastStrategyTick: 0 },
  contextMode: 'standard',
});

const metricsOf = (agentId: string) =>
  handle.db.select().from(antiStagnationMetrics).where(eq(antiStagnationMetrics.agentId, agentId));
const verdictOf = async (id: number) =>
  (
    await handle.db
      .select({ reflexes: llmRecentResponses.reflexes })
      .from(llmRecentResponses)
      .where(eq(llmRecentResponses.id, id))
  )[0]?.reflexes;

describe('recording the verdict', () => {
  it('a tick with nothing beside the verdict: one statement, no transaction; a retry adds nothing', async () => {
    await newAgent('quiet');
    const a = acts('A plain thought.');
    const thought = await a.think(thinkInput('quiet', 1));
    sql.statements.length = 0;
    sql.recording = true;
    const verdict = await a.tickReflexes(reflexInput('quiet', 1, thought.responseId!));
    sql.recording = false;
    expect(sql.statements.filter((s) => /^\s*(begin|commit)/i.test(s))).toEqual([]);
    // Beside the model calls' own writes (their ledger, llm_calls, the model's health).
    const writes = sql.statements.filter(
      (s) => /^\s*(with|insert|update)/i.test(s) && !/llm_calls|ledger|llm_registry/.test(s),
    );
    expect(writes).toHaveLength(1);
    expect(writes[0]).toMatch(/update "llm_recent_responses".*insert into "anti_stagnation_metrics"/s);
    expect(await verdictOf(thought.responseId!)).toEqual(verdict);
    expect(await metricsOf('quiet')).toHaveLength(1);

    // A retry (another worker: nothing kept) finds the verdict and writes nothing.
    const again = await acts('A plain thought.').tickReflexes(reflexInput('quiet', 1, thought.responseId!));
    expect(again).toEqual(verdict);
    expect(await metricsOf('quiet')).toHaveLength(1);
  });

  it('a tick with a fact-check: two attempts at once leave one verdict, one metrics row, one task', async () => {
    await newAgent('facts');
    const reply = `The moon is far.\n${renderFactsBlock([{ fact: 'the moon is made of rock', confidence: 0.4 }])}`;
    const thought = await acts(reply).think(thinkInput('facts', 1));
    const input = reflexInput('facts', 1, thought.responseId!);
    sql.statements.length = 0;
    sql.recording = true;
    // Two workers' attempts of the same tick, side by side.
    const [one, two] = await Promise.all([acts(reply).tickReflexes(input), acts(reply).tickReflexes(input)]);
    sql.recording = false;
    expect(two).toEqual(one);
    expect(await verdictOf(thought.responseId!)).toEqual(one);
    expect(sql.statements.filter((s) => /^\s*begin/i.test(s)).length).toBeGreaterThanOrEqual(1);
    expect(await metricsOf('facts')).toHaveLength(1);
    const checks = await handle.db.select().from(tasks).where(eq(tasks.agentId, 'facts'));
    expect(checks.map((t) => t.title)).toEqual(['Fact-check: the moon is made of rock']);
  });
});
