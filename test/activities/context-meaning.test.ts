/**
 * What the agent sees when its context is chosen by meaning: the think activity with the real
 * offline embedder (all-MiniLM-L6-v2 from .tools/) on a real Postgres, against the same rows with
 * semantic memory off or no embedder at all. Meditation shows replies of distinct topics instead
 * of near-duplicates; concentration on a goal shows the related replies and leaves out the rest;
 * a small budget shows fewer, more relevant replies and abstracts.
 */
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { createAgentEmbedders } from '../../activities/embeddings/agent-embedder.js';
import { disposeLocalEmbedders } from '../../activities/embeddings/local.js';
import type { Embedder } from '../../activities/embeddings/types.js';
import type { ChatMessage } from '../../activities/llm/types.js';
import type { ThinkInput } from '../../activities/tick/context.js';
import { meaningClauses } from '../../core/novelty.js';
import {
  abstracts,
  agentConfig,
  agents,
  embeddings,
  goals,
  llmRecentResponses,
  llmRegistry,
} from '../../db/schema/index.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';
import { thinkInput, thinkScript } from '../helpers/scripted.js';

let handle: MigratedDatabase;
const prompts = new Map<string, string>();
let withMeaning: ReturnType<typeof createActivities>;
let withoutEmbedder: ReturnType<typeof createActivities>;

/** The scripted model keeps each agent's last prompt (by the name context 0 gives). */
const llm = {
  env: {},
  toolsDir: '',
  scriptedReply: thinkScript((messages: ChatMessage[]) => {
    const user = messages.find((m) => m.role === 'user')!.content;
    prompts.set(/Your name is (\S+) /.exec(messages[0]!.content)![1]!, user);
    return 'A thought.';
  }),
};

beforeAll(async () => {
  handle = await migratedDatabase('ctxmeaning');
  withMeaning = createActivities({
    db: handle.db,
    llm,
    embedders: createAgentEmbedders({ env: {}, toolsDir: repoToolsDir }),
  });
  withoutEmbedder = createActivities({ db: handle.db, llm });
}, 60_000);
afterAll(async () => {
  await disposeLocalEmbedders();
  await handle?.dispose();
});

const migration = [
  'I reviewed the billing migration script and found a missing index on invoices.',
  'The billing database migration still lacks an index on the invoices table.',
  'Checked the invoice table migration again: the index is missing.',
  'The migration for billing needs the invoices index before it ships.',
  'Still working on the billing migration; the invoices index must be added.',
  'Added notes on the billing schema migration and its missing invoice index.',
  'The invoices migration is blocked on the index; billing cannot ship yet.',
  'Billing migration review: the index on invoices is the last open point.',
  'I should finish the invoice table migration for billing this week.',
  'The billing migration: one more pass over the invoices index.',
];
const garden = 'The tomatoes on the balcony need more sun and water; I will move the pots.';
const travel = 'Booked a ryokan in Kyoto for three nights and a train pass for the trip to Japan.';

/** An agent (its name = its id) with replies at ticks 1… and the given config, goals and abstracts. */
async function agent(
  id: string,
  replies: string[],
  opts: { config?: Record<string, unknown>; goals?: string[]; abstracts?: Array<[string, string]> } = {},
) {
  await handle.db.insert(agents).values({ id, name: id });
  await handle.db
    .insert(llmRegistry)
    .values({ agentId: id, name: 'mind', provider: 'scripted', model: 'script', role: 'agent', priority: 1 });
  await handle.db
    .insert(llmRecentResponses)
    .values(replies.map((content, i) => ({ agentId: id, tick: i + 1, content })));
  for (const [key, value] of Object.entries(opts.config ?? {}))
    await handle.db.insert(agentConfig).values({ agentId: id, key, value: value as object });
  if (opts.goals?.length) await handle.db.insert(goals).values(opts.goals.map((title) => ({ agentId: id, title })));
  for (const [title, summary] of opts.abstracts ?? [])
    await handle.db.insert(abstracts).values({ agentId: id, title, summary });
}

/** The prompt's context 3 and 5 (from "## Context 3" up to context 6). */
const contexts3to5 = (id: string) => prompts.get(id)!.split('## Context 3')[1]!.split('## Context 6')[0]!;
/** The replies context 3 shows, `tick N: …`. */
const thoughts = (id: string) =>
  contexts3to5(id)
    .split('\n')
    .filter((l) => l.startsWith('- tick '));

async function think(
  acts: ReturnType<typeof createActivities>,
  id: string,
  tick: number,
  loop: Partial<ThinkInput['loop']>,
) {
  const input = thinkInput(id, tick);
  await acts.think({ ...input, loop: { ...input.loop, ...loop } });
}

describe('contexts chosen by meaning (offline embedder)', () => {
  // Ticks 1–12: the billing migration over and over, a garden reply at tick 3 and a travel one at 8.
  const history = [...migration.slice(0, 2), garden, ...migration.slice(2, 6), travel, ...migration.slice(6, 10)];

  it('meditation shows replies of distinct topics, where the even spread shows near-duplicates', async () => {
    await agent('med-on', history);
    await agent('med-off', history, { config: { semantic_memory: 'off' } });
    await think(withMeaning, 'med-on', 13, { contextMode: 'meditation', recentK: 3 });
    await think(withMeaning, 'med-off', 13, { contextMode: 'meditation', recentK: 3 });

    const on = thoughts('med-on');
    expect(on).toHaveLength(3);
    expect(on.some((l) => l.includes('tomatoes'))).toBe(true);
    expect(on.some((l) => l.includes('Kyoto'))).toBe(true);
    expect(contexts3to5('med-on')).toContain('(meditation, 3, by meaning)');
    // Off: the even spread over ticks 12, 6, 1, all about the migration.
    const off = thoughts('med-off');
    expect(off.map((l) => Number(/tick (\d+)/.exec(l)![1]))).toEqual([1, 6, 12]);
    expect(off.every((l) => /migration|invoice/i.test(l))).toBe(true);
    // The texts are cached by content: the embedder ran once for each distinct text (replies, queries).
    const cached = await handle.db.select({ model: embeddings.model }).from(embeddings);
    expect(cached.length).toBeGreaterThanOrEqual(12);
  }, 60_000);

  it('concentration on a goal shows the related replies and leaves out the unrelated', async () => {
    const mixed = [garden, migration[0]!, travel, migration[1]!, 'The weather is grey and it rains again.'];
    const goal = ['Ship the billing database migration with its invoice index'];
    await agent('conc-on', mixed, { goals: goal });
    await think(withMeaning, 'conc-on', 6, { contextMode: 'concentration', recentK: 5 });
    const on = thoughts('conc-on');
    expect(on.map((l) => Number(/tick (\d+)/.exec(l)![1]))).toEqual([2, 4]);

    // Without an embedder, concentration without a filter is the last K, whatever they are about.
    await agent('conc-plain', mixed, { goals: goal });
    await think(withoutEmbedder, 'conc-plain', 6, { contextMode: 'concentration', recentK: 5 });
    expect(thoughts('conc-plain')).toHaveLength(5);
  }, 60_000);

  it('a small budget shows fewer, more relevant replies and abstracts', async () => {
    const long = (s: string) => `${s} ${'Details follow at length. '.repeat(14)}`;
    const opts = {
      goals: ['Plan the trip to Japan'],
      abstracts: [
        ['Japan trip', long('Trains, ryokans and temples in Kyoto and Tokyo for the holiday.')],
        ['Billing', long('The billing migration and its invoice index.')],
        ['Garden', long('Tomatoes, pots and watering on the balcony.')],
        ['Billing again', long('More on the invoices table migration.')],
      ] as Array<[string, string]>,
    };
    // Standard mode: the budget is K replies' worth of tokens (at most 2K replies).
    await agent('budget-on', history, opts);
    await think(withMeaning, 'budget-on', 13, { contextMode: 'standard', recentK: 1 });
    await agent('budget-wide', history, opts);
    await think(withMeaning, 'budget-wide', 13, { contextMode: 'standard', recentK: 2 });
    await agent('budget-plain', history, opts);
    await think(withoutEmbedder, 'budget-plain', 13, { contextMode: 'standard', recentK: 1 });

    const ticks = (id: string) => thoughts(id).map((l) => Number(/tick (\d+)/.exec(l)![1]));
    // The newest reply, then the one about the goal (tick 8): not simply the last one.
    expect(ticks('budget-on')).toEqual([8, 12]);
    expect(ticks('budget-plain')).toEqual([12]);
    // A larger budget shows more, the goal's reply still among them.
    expect(ticks('budget-wide').length).toBeGreaterThan(2);
    expect(ticks('budget-wide')).toEqual(expect.arrayContaining([8, 12]));
    // Abstracts: the newest three without an embedder; by meaning, the Japan one (the oldest) first,
    // and only as many as fit the budget.
    const shown = (id: string) =>
      contexts3to5(id)
        .match(/^- #\d+ [^:]+/gm)!
        .map((l) => l.replace(/^- #\d+ /, ''));
    expect(shown('budget-plain')).toEqual(['Billing again', 'Garden', 'Billing']);
    const onShown = shown('budget-on');
    expect(onShown).toContain('Japan trip');
    expect(onShown.length).toBeLessThan(3);
  }, 60_000);

  it('with semantic memory off the context is what it is without an embedder', async () => {
    const opts = {
      goals: ['Plan the trip to Japan'],
      abstracts: [['Billing', 'The billing migration.']] as Array<[string, string]>,
    };
    await agent('same-off', history, { ...opts, config: { semantic_memory: 'off' } });
    await agent('same-plain', history, { ...opts, config: { semantic_memory: 'off' } });
    await think(withMeaning, 'same-off', 13, { contextMode: 'standard', recentK: 4 });
    await think(withoutEmbedder, 'same-plain', 13, { contextMode: 'standard', recentK: 4 });
    const strip = (s: string) => s.replace(/#\d+/g, '#n');
    expect(strip(contexts3to5('same-off'))).toEqual(strip(contexts3to5('same-plain')));
    expect(thoughts('same-off').map((l) => Number(/tick (\d+)/.exec(l)![1]))).toEqual([9, 10, 11, 12]);
    const [off] = await handle.db.select().from(agentConfig).where(eq(agentConfig.agentId, 'same-off'));
    expect(off?.value).toBe('off');
  }, 60_000);

  it('an embedder that fails leaves the context as without one, and the tick goes on', async () => {
    const broken = createActivities({
      db: handle.db,
      llm,
      embedders: {
        forAgent: async () => ({
          ok: true,
          name: 'broken',
          embedder: {
            model: 'broken',
            dimensions: 3,
            embed: async () => {
              throw new Error('embedder down');
            },
          },
        }),
      },
    });
    await agent('broken-emb', history);
    await agent('broken-plain', history);
    await think(broken, 'broken-emb', 13, { contextMode: 'meditation', recentK: 3 });
    await think(withoutEmbedder, 'broken-plain', 13, { contextMode: 'meditation', recentK: 3 });
    expect(thoughts('broken-emb').map((l) => Number(/tick (\d+)/.exec(l)![1]))).toEqual([1, 6, 12]);
    expect(contexts3to5('broken-emb')).toEqual(contexts3to5('broken-plain'));
  }, 60_000);

  it('after the first tick only new texts are embedded', async () => {
    const real = createAgentEmbedders({ env: {}, toolsDir: repoToolsDir });
    const asked: string[][] = [];
    let counting: Embedder | undefined;
    const acts = createActivities({
      db: handle.db,
      llm,
      embedders: {
        async forAgent(db, agentId) {
          const choice = await real.forAgent(db, agentId);
          if (!choice.ok) return choice;
          counting ??= {
            model: choice.embedder.model,
            dimensions: choice.embedder.dimensions,
            embed: async (texts) => (asked.push([...texts]), choice.embedder.embed(texts)),
          };
          return { ...choice, embedder: counting };
        },
      },
    });
    // Texts no other test embedded.
    const own = history.map((t, i) => `Cost check ${i}: ${t}`);
    const goalTexts = ['Cost check of the billing migration'];
    await agent('cost', own, { goals: goalTexts });
    await think(acts, 'cost', 13, { contextMode: 'meditation', recentK: 3 });
    // A reply is embedded as its clauses (its vector is their mean): those no earlier test embedded.
    const clauses = own.flatMap(meaningClauses);
    expect(asked.flat()).toEqual(expect.arrayContaining(clauses.filter((c) => c.startsWith('Cost check'))));
    expect(asked.flat().filter((t) => !clauses.includes(t) && !goalTexts.includes(t))).toEqual([]);
    asked.length = 0;
    // Tick 13 stored its reply ('A thought.', embedded once by an earlier test or now): tick 14 asks for at most it.
    await think(acts, 'cost', 14, { contextMode: 'meditation', recentK: 3 });
    expect(asked.flat().filter((t) => t !== 'A thought.')).toEqual([]);
  }, 60_000);

  it('an embedder that hangs: the context is chosen as without one after 20 s', async () => {
    const hanging = createActivities({
      db: handle.db,
      llm,
      embedders: {
        forAgent: async () => ({
          ok: true,
          name: 'hanging',
          embedder: { model: 'hanging', dimensions: 3, embed: () => new Promise<never>(() => undefined) },
        }),
      },
    });
    await agent('hang', history);
    const started = Date.now();
    await think(hanging, 'hang', 13, { contextMode: 'meditation', recentK: 3 });
    expect(Date.now() - started).toBeLessThan(40_000);
    expect(thoughts('hang').map((l) => Number(/tick (\d+)/.exec(l)![1]))).toEqual([1, 6, 12]);
  }, 60_000);
});
