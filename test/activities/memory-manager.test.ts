/**
 * The memory manager by use, on a real Postgres: the scheduled pruning job over every tier
 * (replies, diary, notebook, concepts, links), each decision in the process log, and the
 * restores (the agent's `memory.restore`, the person's `mindloop memory restore`).
 */
import { and, eq, sql } from 'drizzle-orm';
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLearningActivities } from '../../activities/learnings.js';
import { createCommandActivities } from '../../activities/tick/apply-commands.js';
import { registerMemoryCommands } from '../../cli/memory.js';
import { createAgentEmbedders } from '../../activities/embeddings/agent-embedder.js';
import type { ParsedCommand } from '../../core/loop-types.js';
import {
  agentConfig,
  agents,
  commandLog,
  concepts,
  diaryEntries,
  links,
  llmMemory,
  processLog,
} from '../../db/schema/index.js';
import { migratedDatabase, migratedPglite, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';

let handle: MigratedDatabase;
let cmds: ReturnType<typeof createCommandActivities>;
/** The same commands with the agents' embedders (the offline one): search by meaning. */
let semantic: ReturnType<typeof createCommandActivities>;
let jobs: ReturnType<typeof createLearningActivities>;
const ticks = new Map<string, number>();
const day = 24 * 3_600_000;

beforeAll(async () => {
  handle = await migratedDatabase('mindloop_memory_manager');
  cmds = createCommandActivities({ db: handle.db });
  semantic = createCommandActivities({
    db: handle.db,
    embedders: createAgentEmbedders({ env: {}, toolsDir: repoToolsDir }),
  });
  jobs = createLearningActivities({ db: handle.db });
});

afterAll(async () => {
  await handle?.dispose();
});

async function agent(id: string, lruLimit = 10) {
  await handle.db.insert(agents).values({ id, name: id });
  await handle.db.insert(agentConfig).values({ agentId: id, key: 'lru_limit', value: lruLimit });
}

/** Apply commands at the agent's next tick; returns the command_log rows (status, result text). */
async function apply(agentId: string, ...commands: Array<[string, Record<string, unknown>]>) {
  return applyWith(cmds, agentId, ...commands);
}

async function applyWith(
  via: ReturnType<typeof createCommandActivities>,
  agentId: string,
  ...commands: Array<[string, Record<string, unknown>]>
) {
  const tick = (ticks.get(agentId) ?? 0) + 1;
  ticks.set(agentId, tick);
  const parsed: ParsedCommand[] = commands.map(([type, args], i) => ({ cmdId: `c${i}`, type, args }));
  const outcomes = await via.applyCommands({
    agentId,
    tick,
    workflowId: `agent/${agentId}`,
    mode: 'main',
    commands: parsed,
  });
  const rows = await handle.db
    .select()
    .from(commandLog)
    .where(and(eq(commandLog.agentId, agentId), eq(commandLog.tick, tick)));
  return outcomes.map((o) => {
    const r = rows.find((x) => x.cmdId === o.cmdId)?.result as { text?: string } | null;
    return { status: o.status, message: o.message, text: r?.text ?? '' };
  });
}

/** Diary entries, the i-th written `ages[i]` days ago; returns their ids in that order. */
async function diaryAged(agentId: string, ages: number[]): Promise<number[]> {
  const ids: number[] = [];
  for (const [i, age] of ages.entries()) {
    const [r] = await handle.db
      .insert(diaryEntries)
      .values({
        agentId,
        title: `entry ${i}`,
        content: `day ${age}`,
        createdAt: new Date(Date.now() - age * day),
      })
      .returning({ id: diaryEntries.id });
    ids.push(r!.id);
  }
  return ids;
}

const archivedIds = async (
  table: typeof diaryEntries | typeof llmMemory | typeof concepts | typeof links,
  agentId: string,
) =>
  (
    await handle.db
      .select({ id: table.id })
      .from(table)
      .where(and(eq(table.agentId, agentId), sql`${table.archivedAt} is not null`))
  )
    .map((r) => r.id)
    .sort((a, b) => a - b);

/** `mindloop <args>` against this file's database: what it printed. */
async function cli(...args: string[]): Promise<string> {
  const saved = process.env.DATABASE_URL;
  process.env.DATABASE_URL = handle.url;
  const out: string[] = [];
  const write = vi
    .spyOn(process.stdout, 'write')
    .mockImplementation((chunk: string | Uint8Array) => (out.push(String(chunk)), true));
  try {
    const program = new Command().exitOverride();
    registerMemoryCommands(program);
    await program.parseAsync(args, { from: 'user' });
    return out.join('');
  } finally {
    write.mockRestore();
    if (saved === undefined) delete process.env.DATABASE_URL;
    else process.env.DATABASE_URL = saved;
  }
}

const decisions = async (agentId: string, table: string) =>
  (
    await handle.db
      .select({ message: processLog.message, payload: processLog.payload })
      .from(processLog)
      .where(and(eq(processLog.agentId, agentId), eq(processLog.kind, 'memory_manager')))
      .orderBy(processLog.id)
  ).filter((r) => r.payload?.table === table);

describe('the memory manager by use', () => {
  it('a diary entry read often survives pruning over a newer one never read (and without the reads it would not)', async () => {
    // Eleven entries for ten places: the oldest (30 days) and the next oldest (20 days) compete.
    const ages = [30, 20, 9, 8, 7, 6, 5, 4, 3, 2, 1];
    await agent('reader');
    await agent('skimmer');
    const read = await diaryAged('reader', ages);
    const unread = await diaryAged('skimmer', ages);
    for (let i = 0; i < 3; i++) {
      const [r] = await apply('reader', ['diary.read', { id: read[0] }]);
      expect(r!.text).toContain('day 30');
    }
    const [row] = await handle.db.select().from(diaryEntries).where(eq(diaryEntries.id, read[0]!));
    expect(row!.accessCount).toBe(3);

    expect(await jobs.pruneMemory({ agentId: 'reader' })).toMatchObject({ archivedDiary: 1, limit: 10 });
    expect(await jobs.pruneMemory({ agentId: 'skimmer' })).toMatchObject({ archivedDiary: 1, limit: 10 });
    // The read one stays; the newer never-read one goes. Unread, the oldest goes.
    expect(await archivedIds(diaryEntries, 'reader')).toEqual([read[1]]);
    expect(await archivedIds(diaryEntries, 'skimmer')).toEqual([unread[0]]);

    // Each decision is logged: the row, why, its retention and keep score.
    const log = await decisions('reader', 'diary_entries');
    expect(log).toHaveLength(11);
    const archived = log.find((d) => d.payload?.action === 'archive')!;
    expect(archived.message).toMatch(
      new RegExp(`^archive diary_entries #${read[1]}: least_kept \\(retention 0, keep score 0\\.0\\d+\\)$`),
    );
    const kept = log.find((d) => d.payload?.id === read[0])!;
    expect(kept.payload).toMatchObject({ action: 'keep', reason: 'retained' });
    expect(kept.payload!.retention as number).toBeGreaterThan(0.3);

    // The agent sees it: the archived entry is gone from its list, the read one is there.
    const [list] = await apply('reader', ['diary.list', { limit: 20 }]);
    expect(list!.text).not.toContain(`#${read[1]} `);
    expect(list!.text).toContain(`#${read[0]} `);
  });

  it('prunes the notebook, concepts and links each to its cap, pinned and weighty rows kept, every decision logged', async () => {
    await agent('grapher');
    // Notebook: 12 unpinned entries for 10 places (a pinned one stays outside the cap); #0 pinned,
    // #1 of priority 80, #2 read: the three oldest.
    const noteIds: number[] = [];
    for (let i = 0; i < 13; i++) {
      const [r] = await handle.db
        .insert(llmMemory)
        .values({
          agentId: 'grapher',
          content: `note ${i}`,
          pinned: i === 0,
          priority: i === 1 ? 80 : 0,
          createdAt: new Date(Date.now() - (40 - i) * day),
        })
        .returning({ id: llmMemory.id });
      noteIds.push(r!.id);
    }
    await apply('grapher', ['llm_memory.read', { id: noteIds[2] }]);
    // Concepts: 22 for 20 places (2·lru_limit), oldest first; c0 is shown by concepts.read.
    const conceptIds: number[] = [];
    for (let i = 0; i < 22; i++) {
      const [r] = await handle.db
        .insert(concepts)
        .values({ agentId: 'grapher', name: `c${i}`, createdAt: new Date(Date.now() - (40 - i) * day) })
        .returning({ id: concepts.id });
      conceptIds.push(r!.id);
    }
    // Links: c1→c21 (c1 will be archived: the link goes with it), and 41 more among kept concepts
    // for 40 places (4·lru_limit); the first of those, c0→c2, is shown when c0 is read.
    const linkRows = [
      { from: 1, to: 21, relation: 'orphan', age: 1 },
      ...Array.from({ length: 41 }, (_, i) => ({
        from: i === 0 ? 0 : 4 + (i % 18),
        to: 2,
        relation: `r${i}`,
        age: 35 - i / 2,
      })),
    ];
    const linkIds: number[] = [];
    for (const l of linkRows) {
      const [r] = await handle.db
        .insert(links)
        .values({
          agentId: 'grapher',
          fromConceptId: conceptIds[l.from]!,
          toConceptId: conceptIds[l.to]!,
          relation: l.relation,
          createdAt: new Date(Date.now() - l.age * day),
        })
        .returning({ id: links.id });
      linkIds.push(r!.id);
    }
    const [read] = await apply('grapher', ['concepts.read', { concept: 'c0' }]);
    expect(read!.text).toContain('-[r0, w 1]-> c2');
    const [c0] = await handle.db.select().from(concepts).where(eq(concepts.id, conceptIds[0]!));
    expect(c0!.accessCount).toBe(1);

    const r = await jobs.pruneMemory({ agentId: 'grapher' });
    expect(r).toMatchObject({ archivedNotes: 2, archivedConcepts: 2, archivedLinks: 2 });
    // The two oldest that are neither pinned, weighty nor read.
    expect(await archivedIds(llmMemory, 'grapher')).toEqual([noteIds[3], noteIds[4]]);
    // c0 was read; c1 and c2… are the oldest unread, but c2 was shown at the end of c0's link.
    expect(await archivedIds(concepts, 'grapher')).toEqual([conceptIds[1], conceptIds[3]]);
    // The orphan (its concept c1 archived) and the oldest unread link beyond the cap; c0→c2 was read.
    expect(await archivedIds(links, 'grapher')).toEqual([linkIds[0], linkIds[2]]);

    const notes = await decisions('grapher', 'llm_memory');
    expect(notes).toHaveLength(13);
    expect(notes.find((d) => d.payload?.id === noteIds[0])!.payload).toMatchObject({
      action: 'keep',
      reason: 'pinned',
    });
    const linkLog = await decisions('grapher', 'links');
    expect(linkLog.find((d) => d.payload?.id === linkIds[0])!.message).toBe(
      `archive links #${linkIds[0]}: endpoint (retention 0)`,
    );
    expect(linkLog.filter((d) => d.payload?.action === 'archive')).toHaveLength(2);
    const { rows } = await handle.db.execute<{ message: string }>(
      sql`select message from process_log where agent_id = 'grapher' and kind = 'schedule'`,
    );
    expect(rows[0]!.message).toContain('2 notebook entries, 2 concepts and 2 links');

    // Restoring the orphaned link brings its concept back; the agent sees both again.
    const [back] = await apply('grapher', ['memory.restore', { kind: 'link', id: linkIds[0] }]);
    expect(back).toMatchObject({
      status: 'applied',
      message: `link #${linkIds[0]} restored (with concepts #${conceptIds[1]})`,
    });
    const [list] = await apply('grapher', ['links.list', { concept: 'c1' }]);
    expect(list!.text).toContain(`#${linkIds[0]} c1 (#${conceptIds[1]}) -[orphan, w 1]-> c21`);
  });

  it('memory.restore brings an archived entry back into the agent`s list; a live or missing one is refused', async () => {
    await agent('restorer');
    const [id] = await diaryAged('restorer', [3]);
    const [del] = await apply('restorer', ['diary.delete', { id }]);
    expect(del!.status).toBe('applied');
    expect((await apply('restorer', ['diary.list', {}]))[0]!.text).toBe('(no diary entries)');
    const [back] = await apply('restorer', ['memory.restore', { kind: 'diary', id }]);
    expect(back).toMatchObject({ status: 'applied', message: `diary #${id} restored` });
    expect((await apply('restorer', ['diary.list', {}]))[0]!.text).toContain(`#${id} entry 0`);
    const [again] = await apply('restorer', ['memory.restore', { kind: 'diary', id }]);
    expect(again).toMatchObject({ status: 'error' });
    expect(again!.message).toContain(`diary #${id} is not archived`);
    const [none] = await apply('restorer', ['memory.restore', { kind: 'note', id: 999_999 }]);
    expect(none!.message).toContain('note #999999 not found');
    // A refused restore rolls back with its command: only the restore that happened is logged.
    const log = await decisions('restorer', 'diary_entries');
    expect(log.map((d) => d.message)).toEqual([`restore diary_entries #${id}: restored`]);
  });

  it('`mindloop memory restore <agent> <kind> <id>` restores and says so; a live row exits 1', async () => {
    await agent('person');
    const [n] = await handle.db
      .insert(llmMemory)
      .values({ agentId: 'person', content: 'forgotten', archivedAt: new Date() })
      .returning({ id: llmMemory.id });
    try {
      expect(await cli('memory', 'restore', 'person', 'note', String(n!.id))).toBe(`restored note #${n!.id}\n`);
      expect((await apply('person', ['llm_memory.list', {}]))[0]!.text).toContain(`#${n!.id} forgotten`);
      expect(await cli('memory', 'restore', 'person', 'note', String(n!.id))).toBe(
        `note #${n!.id} of person: not archived\n`,
      );
      expect(process.exitCode).toBe(1);
    } finally {
      process.exitCode = 0;
    }
  });
});

describe('searching by words and by meaning', () => {
  const walk = 'I took the dog for a stroll around the park after dinner.';
  let walkId: number;
  let taxId: number;

  beforeAll(async () => {
    await agent('searcher');
    const [w] = await apply('searcher', ['diary.add', { title: 'Evening', content: walk }]);
    const [t] = await apply('searcher', [
      'diary.add',
      { title: 'Paperwork', content: 'Filled in the quarterly tax return forms.' },
    ]);
    walkId = Number(/#(\d+)/.exec(w!.message)![1]);
    taxId = Number(/#(\d+)/.exec(t!.message)![1]);
  });

  it('diary.search finds a paraphrase by meaning that the words miss; without an embedder it says words only', async () => {
    const query = 'walking my puppy outdoors';
    const [words] = await apply('searcher', ['diary.search', { query }]);
    expect(words!.message).toBe(`0 diary entries matching '${query}' (by words only)`);
    expect(words!.text).toBe(`(no diary entries matching '${query}')\n(by words only: no embedder here)`);

    const [meaning] = await applyWith(semantic, 'searcher', ['diary.search', { query }]);
    expect(meaning!.status).toBe('applied');
    const first = meaning!.text.split('\n')[0]!;
    expect(first).toMatch(new RegExp(`^#${walkId} Evening — I took the dog .* \\[meaning 0\\.\\d\\d\\]$`));
    expect(meaning!.text).not.toContain('by words only');
    // The exact words still come first when they match, and are marked found both ways.
    const [both] = await applyWith(semantic, 'searcher', ['diary.search', { query: 'tax return' }]);
    expect(both!.text.split('\n')[0]).toMatch(new RegExp(`^#${taxId} Paperwork — .*\\[words, meaning 0\\.\\d\\d\\]$`));
    // A shown entry counts as a use.
    const [row] = await handle.db.select().from(diaryEntries).where(eq(diaryEntries.id, walkId));
    expect(row!.accessCount).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it('archived entries are found only when asked, marked with how to restore them', async () => {
    await apply('searcher', ['diary.delete', { id: walkId }]);
    const query = 'walking my puppy outdoors';
    const [live] = await applyWith(semantic, 'searcher', ['diary.search', { query }]);
    expect(live!.text).not.toContain(`#${walkId} `);
    const [all] = await applyWith(semantic, 'searcher', ['diary.search', { query, archived: true }]);
    expect(all!.text.split('\n')[0]).toMatch(
      new RegExp(`^#${walkId} \\[archived: memory\\.restore \\{kind: diary, id: ${walkId}\\}\\] Evening`),
    );
    const [words] = await apply('searcher', ['diary.search', { query: 'stroll', archived: true }]);
    expect(words!.text.split('\n')[0]).toContain(`#${walkId} [archived`);
    await apply('searcher', ['memory.restore', { kind: 'diary', id: walkId }]);
  }, 60_000);

  it('`mindloop memory search` prints what the agent would see, found by meaning', async () => {
    const out = await cli(
      'memory',
      'search',
      'searcher',
      'walking',
      'my',
      'puppy',
      'outdoors',
      '--kinds',
      'diary,note',
    );
    const lines = out.split('\n');
    expect(lines[0]).toMatch(/^\d+ memories matching 'walking my puppy outdoors'$/);
    expect(lines[1]).toMatch(new RegExp(`^diary #${walkId} Evening — I took the dog .*\\[meaning 0\\.\\d\\d\\]$`));
    // A person's search is no use of the agent's rows.
    const [row] = await handle.db.select().from(diaryEntries).where(eq(diaryEntries.id, walkId));
    const before = row!.accessCount;
    await cli('memory', 'search', 'searcher', 'stroll');
    const [after] = await handle.db.select().from(diaryEntries).where(eq(diaryEntries.id, walkId));
    expect(after!.accessCount).toBe(before);
    // An agent that does not exist is named, not searched.
    await expect(cli('memory', 'search', 'nobody-here', 'stroll')).rejects.toThrow(/no agent 'nobody-here'/);
  }, 60_000);

  it('memory.search looks through the notebook, concepts and abstracts too, each marked with its kind', async () => {
    await apply(
      'searcher',
      ['llm_memory.add', { title: 'Vet', content: 'The veterinarian said the dog needs more exercise.' }],
      ['concepts.add', { name: 'canine companionship', description: 'why people keep dogs as pets' }],
    );
    const [r] = await applyWith(semantic, 'searcher', [
      'memory.search',
      { query: 'caring for my pet', kinds: ['note', 'concept'], limit: 5 },
    ]);
    const kinds = r!.text.split('\n').map((l) => l.split(' ')[0]);
    expect(kinds.sort()).toEqual(['concept', 'notebook']);
    const [off] = await apply('searcher', ['memory.search', { query: 'veterinarian' }]);
    expect(off!.text).toMatch(/^notebook #\d+ Vet: |^notebook #\d+ Vet —/);
    expect(off!.text).toContain('(by words only: no embedder here)');
    await handle.db.insert(agentConfig).values({ agentId: 'searcher', key: 'semantic_memory', value: 'off' });
    const [noMeaning] = await applyWith(semantic, 'searcher', ['memory.search', { query: 'caring for my pet' }]);
    expect(noMeaning!.text).toMatch(/\(by words only: .+\)$/);
  }, 60_000);
});

describe("searching on PGlite (one connection: the search runs in the command's transaction)", () => {
  let lite: MigratedDatabase | undefined;
  beforeAll(async () => {
    lite = await migratedPglite();
    await lite.db.insert(agents).values({ id: 'lite', name: 'lite' });
  }, 60_000);
  afterAll(async () => {
    await lite?.dispose();
  });

  it('words (substring, all words, tags, archived) and meaning both work', async () => {
    const words = createCommandActivities({ db: lite!.db });
    const meaning = createCommandActivities({
      db: lite!.db,
      embedders: createAgentEmbedders({ env: {}, toolsDir: repoToolsDir }),
    });
    let tick = 0;
    const one = async (via: typeof words, type: string, args: Record<string, unknown>) => {
      tick++;
      const [o] = await via.applyCommands({
        agentId: 'lite',
        tick,
        workflowId: 'agent/lite',
        mode: 'main',
        commands: [{ cmdId: 'c', type, args }],
      });
      const [row] = await lite!.db
        .select()
        .from(commandLog)
        .where(and(eq(commandLog.agentId, 'lite'), eq(commandLog.tick, tick)));
      return { ...o!, text: (row?.result as { text?: string } | null)?.text ?? '' };
    };
    await one(words, 'diary.add', {
      title: 'Evening',
      content: 'I took the dog for a stroll in the park.',
      tags: ['pets'],
    });
    await one(words, 'diary.add', { title: 'Paperwork', content: 'Filled in the tax return forms.', tags: ['chores'] });
    expect((await one(words, 'diary.search', { query: 'park stroll' })).text).toMatch(/^#1 Evening \{pets\} — /);
    expect((await one(words, 'diary.search', { query: 'tax', tags: ['pets'] })).text).toMatch(/^\(no diary entries/);
    await one(words, 'diary.delete', { id: 2 });
    expect((await one(words, 'diary.search', { query: 'tax' })).text).toMatch(/^\(no diary entries/);
    expect((await one(words, 'diary.search', { query: 'tax', archived: true })).text).toMatch(/^#2 \[archived: /);
    const r = await one(meaning, 'diary.search', { query: 'walking my puppy outdoors' });
    expect(r.status).toBe('applied');
    expect(r.text).toMatch(/^#1 Evening \{pets\} — .*\[meaning 0\.\d\d\]$/);
  }, 60_000);
});
