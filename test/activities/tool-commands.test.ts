/**
 * `tools.generate` (Ouroboros) through the real applyCommands path on a real Postgres:
 * - no active tool has the capability: the command applies with a `generateTool` loop effect
 *   (the agent loop starts toolGenerationWorkflow from it), keyed by the command_log id;
 * - an active registered tool already provides it: that tool is named, no effect is returned;
 *   a draft or deprecated tool with the capability does not count;
 * - bad args and a task loop are refused with the reason; a retry returns the stored outcome.
 * And `tool.call` on a designed tool: the machine moves and its implementation goes to the sandbox
 * as a `shell` effect (run for real in test/integration/shell.test.ts), unless it is too big to
 * carry through workflow history.
 */
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commandResultText, createCommandActivities } from '../../activities/tick/apply-commands.js';
import type { LoopEffect, ParsedCommand } from '../../core/loop-types.js';
import { agents, commandLog, discoveredTools, toolRegistry } from '../../db/schema/index.js';
import { maxInlineToolBytes } from '../../activities/commands/escalations.js';
import { migratedDatabase, type MigratedDatabase } from '../helpers/env.js';

const agentId = 'smith';
let h: MigratedDatabase;
let acts: ReturnType<typeof createCommandActivities>;

beforeAll(async () => {
  h = await migratedDatabase('mindloop_tool_commands', 4);
  await h.db.insert(agents).values({ id: agentId, name: 'Smith' });
  acts = createCommandActivities({ db: h.db });
});
afterAll(async () => {
  await h?.dispose();
});

const generate = (cmdId: string, capability: string): ParsedCommand => ({
  cmdId,
  type: 'tools.generate',
  args: { capability, description: `a tool for ${capability}` },
});
const apply = (
  tick: number,
  commands: ParsedCommand[],
  extra: Partial<Parameters<typeof acts.applyCommands>[0]> = {},
) => acts.applyCommands({ agentId, tick, workflowId: `agent/${agentId}`, mode: 'main', commands, ...extra });
const logRow = async (tick: number, cmdId: string) =>
  (
    await h.db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.agentId, agentId), eq(commandLog.tick, tick), eq(commandLog.cmdId, cmdId)))
  )[0];

describe('tools.generate', () => {
  it('asks for a new tool (a generateTool effect) when no active tool has the capability', async () => {
    // A draft and a deprecated tool with the capability are not "registered tools that provide it".
    await h.db.insert(toolRegistry).values([
      { name: 'wf_draft', capability: 'text.word_frequencies', kind: 'generated', status: 'draft' },
      { name: 'wf_old', capability: 'text.word_frequencies', kind: 'generated', status: 'deprecated' },
    ]);
    const [o] = await apply(1, [generate('g1', 'text.word_frequencies')]);
    expect(o).toMatchObject({
      status: 'applied',
      duplicate: false,
      message: 'generating a tool for text.word_frequencies; a note will say when it is ready',
    });
    expect(o!.effects).toEqual([
      {
        kind: 'generateTool',
        capability: 'text.word_frequencies',
        description: 'a tool for text.word_frequencies',
        cmdId: 'g1',
      },
    ]);
    expect(await logRow(1, 'g1')).toMatchObject({ status: 'applied', type: 'tools.generate' });

    // A retried activity returns the stored outcome, effect included, without applying again.
    const [again] = await apply(1, [generate('g1', 'text.word_frequencies')]);
    expect(again).toMatchObject({ status: 'applied', duplicate: true, effects: o!.effects });

    // A task loop (read-only) may not ask for a tool.
    const [inTask] = await apply(1, [generate('g1', 'text.word_frequencies')], { mode: 'task', taskId: 4 });
    expect(inTask).toMatchObject({
      status: 'rejected',
      message: 'read-only auxiliary loop: tools.generate is not allowed',
      effects: [],
    });
  });

  it('names the registered tool instead when an active one already provides the capability', async () => {
    const [tool] = await h.db
      .insert(toolRegistry)
      .values({ name: 'csv_parse', capability: 'data.csv_parse', kind: 'generated', status: 'active', version: 3 })
      .returning({ id: toolRegistry.id });
    const [o] = await apply(2, [generate('g2', 'data.csv_parse')]);
    const line = `tool csv_parse (#${tool!.id}, v3) already provides data.csv_parse`;
    expect(o).toMatchObject({ status: 'applied', message: line, effects: [] });
    const row = await logRow(2, 'g2');
    expect(commandResultText(row!)).toBe(line);
  });

  it('refuses a capability that is not a capability name, with the reason', async () => {
    const [o] = await apply(3, [generate('g3', 'Word Counts!')]);
    expect(o!.status).toBe('rejected');
    expect(o!.message).toMatch(/capability.*a capability like "text\.word_frequencies"/);
    expect(o!.effects).toEqual([]);
  });
});

describe('tool.call on a designed tool', () => {
  const machine = (name: string) => ({
    name,
    description: 'a traffic light',
    initial: 'RED',
    states: {
      RED: { description: 'stop', actions: { next: { to: 'GREEN', description: 'switch to green' } } },
      GREEN: { description: 'go', actions: { next: { to: 'RED', description: 'switch to red' } } },
    },
  });
  const designed = async (name: string, implementation: string) => {
    const [tool] = await h.db
      .insert(toolRegistry)
      .values({
        name,
        kind: 'designed',
        status: 'active',
        createdBy: 'oversight',
        implementation,
        tests: '',
        spec: { states: ['RED', 'GREEN'], initial: 'RED', machine: machine(name) },
      })
      .returning({ id: toolRegistry.id });
    await h.db.insert(discoveredTools).values({ agentId, toolId: tool!.id, via: 'design' });
  };
  const call = (cmdId: string, tool: string): ParsedCommand => ({
    cmdId,
    type: 'tool.call',
    args: { tool, action: 'next', args: { why: 'traffic' } },
  });

  it('moves the machine and hands its implementation to the sandbox as a shell effect (argv + files, a readable command line)', async () => {
    const code = "export function run(state) { return state === 'RED' ? 'GREEN' : 'RED'; }\n";
    await designed('light', code);
    const [o] = await apply(10, [call('c1', 'light')]);
    expect(o).toMatchObject({
      status: 'applied',
      message: expect.stringMatching(
        /^light\.next → GREEN; its implementation runs in the sandbox as process 'tool\.t10\.c1'/,
      ),
    });
    expect(o!.effects).toHaveLength(1);
    const e = o!.effects[0] as Extract<LoopEffect, { kind: 'shell' }>;
    expect(e).toMatchObject({
      kind: 'shell',
      processId: 'tool.t10.c1',
      cmdId: 'c1',
      key: `agent/${agentId}:tool:10:c1`,
      command: 'tool light.next {"why":"traffic"} (RED → GREEN)',
      argv: ['node', 'run.mjs'],
    });
    expect(e.files!['tool.mjs']).toBe(code);
    expect(JSON.parse(e.files!['input.json']!)).toEqual({
      from: 'RED',
      action: 'next',
      to: 'GREEN',
      args: { why: 'traffic' },
      states: ['RED', 'GREEN'],
    });
  });

  it('does not carry an implementation too big for workflow history: the machine moves, the agent is told why nothing ran', async () => {
    await designed('big_light', `// ${'x'.repeat(maxInlineToolBytes)}\nexport function run() { return 'GREEN'; }\n`);
    const [o] = await apply(11, [call('c2', 'big_light')]);
    expect(o).toMatchObject({
      status: 'applied',
      effects: [],
      message: expect.stringMatching(
        /^big_light\.next → GREEN; its implementation was not run: \d+ KB is more than the 48 KB/,
      ),
    });
  });
});
