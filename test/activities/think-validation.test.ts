/**
 * Commands are parsed and validated once, in the think activity: its result carries the valid
 * commands with their validated args (an id given as "12" is 12) and, marked `validated`, each
 * invalid one with the status and reason applyCommands records for it. applyCommands records a
 * validated result exactly as it records the same reply's raw commands (the input a think result
 * recorded before the mark gives), in the reply's order, and still validates any input without
 * the mark. Against a real Postgres.
 */
import { and, asc, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { validateCommand } from '../../core/catalogue.js';
import type { ParsedCommand } from '../../core/loop-types.js';
import { inReplyOrder, parseReply, renderCommandBlock } from '../../core/reply-parser.js';
import { agents, commandLog, llmRegistry, preferenceCounts } from '../../db/schema/index.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';
import { thinkInput, thinkScript } from '../helpers/scripted.js';

let handle: MigratedDatabase;

beforeAll(async () => {
  handle = await migratedDatabase('think_validation');
});

afterAll(async () => {
  await handle?.dispose();
});

const commands: ParsedCommand[] = [
  { cmdId: 'u1', type: 'diary.frobnicate', args: { title: 'what' } },
  { cmdId: 'v1', type: 'diary.add', args: { title: 'found', content: 'a plain finding' } },
  { cmdId: 'b1', type: 'diary.add', args: { title: 'no content' }, description: 'half a command' },
  { cmdId: 'v2', type: 'diary.update', args: { id: '12', title: 'renamed' } },
];
const reply = ['I will note what I found.', renderCommandBlock(commands)].join('\n');

function activities() {
  return createActivities({ db: handle.db, llm: { env: {}, toolsDir: '', scriptedReply: thinkScript(() => reply) } });
}

async function newAgent(id: string): Promise<void> {
  await handle.db.insert(agents).values({ id, name: id });
  await handle.db
    .insert(llmRegistry)
    .values({ agentId: id, name: 'mind', provider: 'scripted', model: 'script', role: 'agent', priority: 1 });
}

/** The agent's command_log rows of one tick, in the order they were written. */
async function rows(agentId: string, tick: number) {
  return handle.db
    .select({
      cmdId: commandLog.cmdId,
      type: commandLog.type,
      args: commandLog.args,
      description: commandLog.description,
      status: commandLog.status,
      reason: commandLog.reason,
      result: commandLog.result,
      threshold: commandLog.threshold,
    })
    .from(commandLog)
    .where(and(eq(commandLog.agentId, agentId), eq(commandLog.tick, tick)))
    .orderBy(asc(commandLog.id));
}

/** Outcomes or rows with the id of a new diary entry left out of their messages. */
const anyEntry = <T>(items: T[]): T[] =>
  JSON.parse(JSON.stringify(items).replace(/entry #\d+ added/g, 'entry # added'));

/** The outcome feedback counted for the agent. */
const feedback = (agentId: string) =>
  handle.db
    .select({ kind: preferenceCounts.kind, pattern: preferenceCounts.pattern, count: preferenceCounts.count })
    .from(preferenceCounts)
    .where(eq(preferenceCounts.agentId, agentId))
    .orderBy(asc(preferenceCounts.kind), asc(preferenceCounts.pattern));

describe('commands parsed and validated once, in think', () => {
  it('think carries the valid commands validated and the invalid ones as rejections; applyCommands records them as before', async () => {
    await newAgent('tv-new');
    await newAgent('tv-old');
    const acts = activities();
    const thought = await acts.think(thinkInput('tv-new', 1));

    expect(thought.validated).toBe(true);
    expect(thought.commands).toEqual([
      { cmdId: 'v1', type: 'diary.add', args: { title: 'found', content: 'a plain finding' } },
      // The id given as "12" is validated to a number.
      { cmdId: 'v2', type: 'diary.update', args: { id: 12, title: 'renamed' } },
    ]);
    const reasonOf = (c: ParsedCommand) => {
      const v = validateCommand(c);
      return v.ok ? null : v.reason;
    };
    expect(thought.invalid).toEqual([
      { ...commands[0], status: 'unknown', reason: reasonOf(commands[0]!), at: 0 },
      { ...commands[2], status: 'rejected', reason: reasonOf(commands[2]!), at: 1 },
    ]);
    expect(thought.invalid![0]!.reason).toMatch(/^unknown command type 'diary.frobnicate'/);
    expect(thought.invalid![1]!.reason).toMatch(/^invalid args for diary.add: .*content/);
    expect(thought.rejected).toEqual([]);

    // The new input, as the loop builds it from the think result…
    const fresh = await acts.applyCommands({
      agentId: 'tv-new',
      tick: 1,
      workflowId: 'agent/tv-new',
      mode: 'main',
      commands: thought.commands,
      validated: true,
      invalid: thought.invalid!,
      rejected: thought.rejected,
    });
    // …and the one a think result recorded before the mark gives: the reply's raw commands.
    const parsed = parseReply(reply);
    const before = await acts.applyCommands({
      agentId: 'tv-old',
      tick: 1,
      workflowId: 'agent/tv-new',
      mode: 'main',
      commands: parsed.commands,
      rejected: parsed.rejected,
    });

    expect(fresh.map((o) => [o.cmdId, o.status])).toEqual([
      ['u1', 'unknown'],
      ['v1', 'applied'],
      ['b1', 'rejected'],
      ['v2', 'error'],
    ]);
    // The same outcomes (the two agents' new diary entries have ids of their own).
    expect(anyEntry(fresh)).toEqual(anyEntry(before));
    const recorded = await rows('tv-new', 1);
    const recordedBefore = await rows('tv-old', 1);
    // The same rows, in the same order; only the valid command's args are its validated ones.
    expect(anyEntry(recorded.map((r) => (r.cmdId === 'v2' ? { ...r, args: { ...r.args, id: '12' } } : r)))).toEqual(
      anyEntry(recordedBefore),
    );
    expect(recorded.find((r) => r.cmdId === 'v2')!.args).toEqual({ id: 12, title: 'renamed' });
    expect(recorded.find((r) => r.cmdId === 'b1')).toMatchObject({
      args: { title: 'no content' },
      description: 'half a command',
      status: 'rejected',
      reason: thought.invalid![1]!.reason,
    });
    // Outcome feedback counted the same (the rejected edit, the failed command).
    const counted = await feedback('tv-new');
    expect(counted).toEqual(await feedback('tv-old'));
    expect(counted.length).toBeGreaterThan(0);
  });

  it('the refused commands go back in their place in the reply, in a task loop under its keys too', async () => {
    expect(inReplyOrder(['a', 'b'], [{ at: 0 }, { at: 1 }, { at: 2 }, { at: 2 }])).toEqual([
      { invalid: { at: 0 } },
      { command: 'a' },
      { invalid: { at: 1 } },
      { command: 'b' },
      { invalid: { at: 2 } },
      { invalid: { at: 2 } },
    ]);
    expect(inReplyOrder([], [{ at: 0 }])).toEqual([{ invalid: { at: 0 } }]);
    expect(inReplyOrder(['a'])).toEqual([{ command: 'a' }]);

    await newAgent('tv-task');
    const outcomes = await activities().applyCommands({
      agentId: 'tv-task',
      tick: 1,
      mode: 'task',
      taskId: 7,
      commands: [{ cmdId: 'r1', type: 'diary.list', args: {} }],
      validated: true,
      invalid: [{ cmdId: 'u1', type: 'no.such', args: {}, status: 'unknown', reason: 'unknown command type', at: 1 }],
    });
    expect(outcomes.map((o) => [o.cmdId, o.status])).toEqual([
      ['r1', 'applied'],
      ['u1', 'unknown'],
    ]);
    expect((await rows('tv-task', 1)).map((r) => [r.cmdId, r.status, r.reason])).toEqual([
      ['task7.r1', 'applied', null],
      ['task7.u1', 'unknown', 'unknown command type'],
    ]);
  });

  it('an input without the mark is validated: a bad command given to applyCommands directly is refused', async () => {
    await newAgent('tv-direct');
    const acts = activities();
    const outcomes = await acts.applyCommands({
      agentId: 'tv-direct',
      tick: 1,
      mode: 'main',
      commands: [
        { cmdId: 'x1', type: 'diary.add', args: { title: 'no content' } },
        { cmdId: 'x2', type: 'no.such', args: {} },
        { cmdId: 'x2', type: 'diary.add', args: { title: 't', content: 'c' } },
      ],
    });
    expect(outcomes.map((o) => [o.cmdId, o.status])).toEqual([
      ['x1', 'rejected'],
      ['x2', 'unknown'],
      ['x2', 'rejected'],
    ]);
    expect(outcomes[0]!.message).toMatch(/^invalid args for diary.add: .*content/);
    expect(outcomes[2]!.message).toMatch(/duplicate cmd_id 'x2'/);
    expect((await rows('tv-direct', 1)).map((r) => [r.cmdId, r.status])).toEqual([
      ['x1', 'rejected'],
      ['x2', 'unknown'],
    ]);
  });
});
