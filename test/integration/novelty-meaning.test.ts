/**
 * Novelty by meaning in the agent loop (time-skipping Temporal, the product bundle, the real
 * activities, a real migrated Postgres, scripted models, the real offline embedder): a
 * paraphrase of an earlier reply scores low novelty and Reflex-lite fires, where the same replies
 * compared by words score it high; an embedder that throws leaves the tick to the words, says
 * so in the verdict's notes, and `mindloop status` (and the notebook's line) says it is away —
 * then back once it answers again. The scripted novelty model gives no usable score (a malformed
 * answer), so the offline score decides.
 */
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentEmbedders, type AgentEmbedders } from '../../activities/embeddings/agent-embedder.js';
import { disposeLocalEmbedders, localEmbedderModel } from '../../activities/embeddings/index.js';
import { createActivities } from '../../activities/index.js';
import type { ScriptedReplyFn } from '../../activities/llm/providers/scripted.js';
import type { TickReflexesResult } from '../../activities/reflexes/types.js';
import { formatExecution } from '../../cli/status.js';
import { embedderHealth, embedderProcessId } from '../../db/queries/embedder-health.js';
import { agents, embeddings, llmRecentResponses, llmRegistry, processLog } from '../../db/schema/index.js';
import type { AgentStatus } from '../../workflows/agent-loop/index.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { startLoop, withWorker } from '../helpers/harness.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

const suite = timeSkippingSuite();
let database: MigratedDatabase;
let withMeaning: ReturnType<typeof createActivities>;
let wordsOnly: ReturnType<typeof createActivities>;

/** Tick 1 states a plan, tick 2 a new idea, tick 3 says tick 1 again in other words, tick 4 a new idea. */
const script = [
  'I should read my last five diary entries before deciding what to work on next.',
  "The bird counts the user shared look like they follow the moon phase; I'll plot them against lunar cycles.",
  'Before I pick the next task, let me go back over the most recent handful of diary notes.',
  'Today I noticed the user always writes late at night, so morning summaries may reach them too early.',
];
/** Think calls so far, by the agent's registry row. */
const thinks = new Map<number, number>();
const reply: ScriptedReplyFn = ({ purpose, registryId }) => {
  if (purpose === 'emotion') return 'curiosity:3 (something to look at)';
  if (purpose === 'novelty') return 'I cannot compare these.';
  if (purpose !== undefined && purpose !== 'think') return '+1 -- fine';
  const n = (thinks.get(registryId!) ?? 0) + 1;
  thinks.set(registryId!, n);
  return script[(n - 1) % script.length]!;
};

const downReason = 'connection refused by the embedding server';
const real = createAgentEmbedders({ env: {}, toolsDir: repoToolsDir });
/** The agent's replies stored so far. */
const replies = async (agentId: string) =>
  (await database.db.select().from(llmRecentResponses).where(eq(llmRecentResponses.agentId, agentId))).length;
/**
 * The real offline embedder, except for `down-*` (whose embedder always throws) and `flaky-*`
 * (whose embedder throws until its fourth reply is stored, then answers).
 */
const embedders: AgentEmbedders = {
  async forAgent(db, agentId) {
    if (agentId.startsWith('none')) return { ok: false, why: 'away', reason: 'no embedder row can be had' };
    const choice = await real.forAgent(db, agentId);
    if (choice.ok && agentId.startsWith('short'))
      // Vectors of 3 numbers from an embedder that says 384.
      return {
        ok: true,
        name: 'short',
        embedder: {
          model: 'short-vectors',
          dimensions: 384,
          embed: async (texts) => texts.map(() => new Float32Array(3)),
        },
      };
    if (!choice.ok || !(agentId.startsWith('down') || agentId.startsWith('flaky'))) return choice;
    const working = choice.embedder;
    return {
      ok: true,
      name: 'remote',
      embedder: {
        model: 'remote-embedder',
        dimensions: working.dimensions,
        embed: async (texts) => {
          if (agentId.startsWith('flaky') && (await replies(agentId)) >= 4) return working.embed(texts);
          throw new Error(downReason);
        },
      },
    };
  },
};

beforeAll(async () => {
  database = await migratedDatabase('mindloop_novelty_meaning', 6);
  const llm = { env: {}, toolsDir: repoToolsDir, scriptedReply: reply };
  withMeaning = createActivities({ db: database.db, llm, embedders });
  wordsOnly = createActivities({ db: database.db, llm });
}, 120_000);
afterAll(async () => {
  await database?.dispose();
  await disposeLocalEmbedders();
});

async function addAgent(id: string): Promise<void> {
  await database.db.insert(agents).values({ id, name: id });
  await database.db
    .insert(llmRegistry)
    .values({ agentId: id, name: `${id}-mind`, provider: 'scripted', model: `${id}-mind`, role: 'agent', priority: 1 });
}

async function runLoop(
  activities: ReturnType<typeof createActivities>,
  agentId: string,
  maxTicks: number,
): Promise<AgentStatus> {
  return withWorker(suite.env, { workflowBundle: suite.bundle, activities }, async (taskQueue) => {
    const h = await startLoop(suite.env.client, taskQueue, { agentId, maxTicks, settings: { delayMs: 1000 } });
    await h.result();
    return h.query<AgentStatus>('status');
  });
}

/** Each tick's stored verdict, by tick. */
async function verdicts(agentId: string): Promise<Map<number, TickReflexesResult>> {
  const rows = await database.db
    .select({ tick: llmRecentResponses.tick, reflexes: llmRecentResponses.reflexes })
    .from(llmRecentResponses)
    .where(eq(llmRecentResponses.agentId, agentId))
    .orderBy(asc(llmRecentResponses.tick));
  return new Map(rows.map((r) => [r.tick, r.reflexes as unknown as TickReflexesResult]));
}

describe('novelty by meaning in the tick', () => {
  it('a paraphrase of an earlier reply scores low and Reflex-lite fires, where words alone score it high', async () => {
    await addAgent('meaning-1');
    await addAgent('words-1');
    await runLoop(withMeaning, 'meaning-1', 3);
    await runLoop(wordsOnly, 'words-1', 3);
    const meaning = await verdicts('meaning-1');
    const words = await verdicts('words-1');
    console.log(
      `novelty by tick — meaning: ${[1, 2, 3].map((t) => meaning.get(t)?.novelty).join(', ')}; ` +
        `words: ${[1, 2, 3].map((t) => words.get(t)?.novelty).join(', ')}`,
    );
    // The paraphrase (tick 3): words see a new text, meaning sees tick 1 again.
    expect(words.get(3)!.novelty).toBeGreaterThanOrEqual(60);
    expect(words.get(3)!.actions).not.toContain('reflex_lite');
    expect(meaning.get(3)!.novelty).toBeLessThan(35);
    expect(meaning.get(3)!.actions).toContain('reflex_lite');
    expect(meaning.get(3)!.focus).not.toBeNull();
    // A new idea (tick 2) stays new by meaning too.
    expect(meaning.get(2)!.novelty).toBeGreaterThanOrEqual(60);
    expect(meaning.get(2)!.actions).not.toContain('reflex_lite');
    expect(meaning.get(3)!.notes.join(' ')).not.toMatch(/words only/);
    // The vectors are in the cache, each text once (the next tick's previous replies are not embedded again).
    const cached = await database.db.select().from(embeddings).where(eq(embeddings.model, localEmbedderModel));
    expect(cached.length).toBeGreaterThanOrEqual(3);
    expect(new Set(cached.map((c) => c.textSha256)).size).toBe(cached.length);
  });

  it('an embedder that throws: the ticks complete by words, the verdict says so, status says it is away', async () => {
    await addAgent('down-1');
    const status = await runLoop(withMeaning, 'down-1', 3);
    expect(status.tick).toBe(3);
    const down = await verdicts('down-1');
    const words = await verdicts('words-1');
    expect(down.size).toBe(3);
    // The same replies by words alone: the same novelty as the agent without embedders.
    expect(down.get(3)!.novelty).toBe(words.get(3)!.novelty);
    expect(down.get(3)!.notes).toContain(`novelty by words only: embedder away: remote: ${downReason}`);
    const open = await database.db
      .select()
      .from(processLog)
      .where(and(eq(processLog.agentId, 'down-1'), eq(processLog.processId, embedderProcessId)));
    expect(open).toHaveLength(1);
    expect(open[0]!.closedAt).toBeNull();
    const health = await embedderHealth(database.db, 'down-1');
    const printed = formatExecution(
      { workflowId: 'agent/down-1', execution: { status: 'RUNNING' }, status } as never,
      undefined,
      health,
    );
    console.log(printed);
    expect(printed).toMatch(
      new RegExp(`embedder away since \\d{4}-\\d\\d-\\d\\dT[^:]+:\\d\\d:\\d\\d\\.\\d+Z: remote: ${downReason}`),
    );
  });

  it('no embedder to be had, or vectors of the wrong size: words only, told, nothing cached', async () => {
    await addAgent('none-1');
    await addAgent('short-1');
    await runLoop(withMeaning, 'none-1', 3);
    await runLoop(withMeaning, 'short-1', 3);
    const words = await verdicts('words-1');
    for (const [agentId, reason] of [
      ['none-1', 'no embedder row can be had'],
      ['short-1', 'short: embedder short-vectors returned a vector of 3 dimensions, expected 384'],
    ] as const) {
      const v = await verdicts(agentId);
      expect(v.size).toBe(3);
      expect(v.get(3)!.novelty).toBe(words.get(3)!.novelty);
      expect(v.get(3)!.notes).toContain(`novelty by words only: embedder away: ${reason}`);
      expect(await embedderHealth(database.db, agentId)).toMatchObject({ state: 'away', reason });
    }
    expect(await database.db.select().from(embeddings).where(eq(embeddings.model, 'short-vectors'))).toHaveLength(0);
  });

  it('says when the embedder is back', async () => {
    await addAgent('flaky-1');
    await runLoop(withMeaning, 'flaky-1', 4);
    const v = await verdicts('flaky-1');
    expect(v.get(2)!.notes.join(' ')).toMatch(/words only: embedder away/);
    expect(v.get(3)!.notes.join(' ')).toMatch(/words only: embedder away/);
    expect(v.get(4)!.notes.join(' ')).not.toMatch(/words only/);
    const health = await embedderHealth(database.db, 'flaky-1');
    expect(health?.state).toBe('back');
    const printed = formatExecution(
      { workflowId: 'agent/flaky-1', execution: { status: 'RUNNING' }, status: null, queryError: 'not asked' } as never,
      undefined,
      health,
    );
    expect(printed).toMatch(/embedder back since \S+ \(was away since \S+: remote: connection refused/);
  });
});
