/** The command catalogue: its shape, validation messages that name the bad fields, help text. */
import { describe, expect, it } from 'vitest';
import {
  allowedByRating,
  catalogue,
  commandTypes,
  configKeys,
  families,
  helpText,
  minRatingFor,
  validateCommand,
  validateConfigValue,
} from '../../core/catalogue.js';
import type { ParsedCommand } from '../../core/loop-types.js';

const cmd = (type: string, args: Record<string, unknown> = {}): ParsedCommand => ({ cmdId: 'c1', type, args });
const reason = (type: string, args: Record<string, unknown> = {}) => {
  const v = validateCommand(cmd(type, args));
  if (v.ok) throw new Error(`${type} ${JSON.stringify(args)} unexpectedly valid`);
  return v.reason;
};

describe('catalogue shape', () => {
  it('covers every command family of the agent loop', () => {
    expect([...families].sort()).toEqual(
      [
        ...[
          'abstracts',
          'concepts',
          'config',
          'cycle',
          'diary',
          'goals',
          'help',
          'links',
          'llm_memory',
          'llm_task',
          'memory',
          'notes',
          'process',
          'shell',
          'tasks',
          'tools',
          'escalate',
          'tool',
          'facts',
          'nerve',
          'speak',
          'spawn',
        ],
        ...[
          'agents',
          'messages',
          'reputation',
          'identity',
          'tags',
          'llm_registry',
          'thinking_methods',
          'stagnation_strategies',
        ],
      ].sort(),
    );
    const actions = (f: string) =>
      commandTypes.filter((t) => catalogue[t].family === f).map((t) => catalogue[t].action);
    expect(actions('diary')).toEqual(['list', 'search', 'read', 'add', 'update', 'delete', 'pin', 'unpin']);
    expect(actions('goals')).toEqual(['add', 'list', 'read', 'update', 'status', 'link', 'unlink']);
    expect(actions('tasks')).toEqual(['add', 'list', 'read', 'update', 'pin', 'unpin', 'priority', 'status']);
    expect(actions('cycle')).toEqual(['responses', 'concentration', 'meditation', 'mode', 'pause', 'idle']);
    expect(actions('process')).toEqual(['start', 'list', 'stop', 'mark', 'cleanup']);
    expect(actions('facts')).toEqual(['list', 'resolve']);
    expect(actions('llm_task')).toEqual(['start', 'stop', 'ask']);
    expect(actions('agents')).toEqual(['list', 'add', 'remove']);
    expect(actions('messages')).toEqual(['send']);
    expect(actions('reputation')).toEqual(['read', 'rate']);
    expect(actions('identity')).toEqual(['read', 'set']);
    expect(actions('tags')).toEqual(['stats']);
    expect(actions('llm_registry')).toEqual(['list', 'select']);
    expect(actions('thinking_methods')).toEqual(['list', 'add', 'use', 'stop']);
    expect(actions('stagnation_strategies')).toEqual(['list', 'add', 'use']);
    expect(actions('memory')).toEqual(['restore', 'search']);
    expect(commandTypes.length).toBe(94);
  });

  it('needs +2 for config.set, shell, spawn, identity.set and every delete, +1 otherwise; unknown types need +2', () => {
    for (const t of commandTypes) {
      const expected = ['config.set', 'shell', 'spawn', 'identity.set'].includes(t) || t.endsWith('.delete') ? 2 : 1;
      expect([t, catalogue[t].minRating]).toEqual([t, expected]);
    }
    expect(minRatingFor('shell')).toBe(2);
  });

  it('lets task loops read everything and write only notes.send, tasks.update, tasks.status', () => {
    const writesAllowed = commandTypes.filter((t) => catalogue[t].writes && catalogue[t].allowedInTaskLoop);
    expect(writesAllowed.sort()).toEqual(['notes.send', 'tasks.status', 'tasks.update']);
    for (const t of commandTypes.filter((x) => !catalogue[x].writes)) expect(catalogue[t].allowedInTaskLoop).toBe(true);
  });

  it('marks list/search/read/get/help as reads', () => {
    for (const t of commandTypes) {
      if (/^(help|.*\.(list|search|read|get))$/.test(t)) expect([t, catalogue[t].writes]).toEqual([t, false]);
    }
  });
});

describe('validateCommand', () => {
  it('accepts valid commands and returns parsed args (numeric strings become ids)', () => {
    const v = validateCommand(cmd('diary.read', { id: '12' }));
    expect(v).toEqual({ ok: true, command: { cmdId: 'c1', type: 'diary.read', args: { id: 12 } } });
    const on = validateCommand(cmd('cycle.meditation', { on: 'on' }));
    expect(on.ok && on.command.args).toEqual({ on: true });
  });

  it('calls an unknown type unknown, with the family’s actions as a hint', () => {
    const v = validateCommand(cmd('diary.write'));
    expect(v).toEqual({
      ok: false,
      code: 'unknown',
      reason: "unknown command type 'diary.write'; diary has: list, search, read, add, update, delete, pin, unpin",
    });
    expect(validateCommand(cmd('teleport.now'))).toMatchObject({
      ok: false,
      code: 'unknown',
      reason: "unknown command type 'teleport.now'; see help",
    });
  });

  it.each([
    ['diary.add', { title: 'x' }, 'args.content: required (string)'],
    ['diary.add', { title: 'x', content: 'y', titel: 'z' }, "args: unknown field 'titel'"],
    ['diary.add', { title: 'x', content: 'y', tags: 'a' }, 'args.tags: Invalid input: expected array, received string'],
    ['diary.read', { id: -1 }, 'args.id: Too small: expected number to be >0'],
    ['diary.read', { id: 'twelve' }, 'args.id: expected a positive integer id'],
    ['diary.update', { id: 1 }, 'args: give at least one of: title, content, tags, priority'],
    [
      'goals.status',
      { id: 1, status: 'failed' },
      'args.failure_reason: failure_reason is required when status is failed',
    ],
    [
      'goals.status',
      { id: 1, status: 'done' },
      'args.status: Invalid option: expected one of "active"|"paused"|"completed"|"failed"',
    ],
    ['tasks.priority', { id: 1, priority: 1.5 }, 'args.priority: Invalid input: expected int, received number'],
    ['config.set', { key: 'delay_ms', value: -5 }, 'args.value: Too small: expected number to be >=0'],
    ['config.set', { key: 'novelty_threshold', value: 1.5 }, 'args.value: Too big: expected number to be <=1'],
    ['config.set', { key: 'nope', value: 1 }, 'args.key: Invalid option'],
    ['cycle.idle', { on: true, wake_on: ['note', 'sunrise'] }, 'args.wake_on.1: Invalid option'],
    ['cycle.responses', { n: 0 }, 'args.n: Too small'],
    ['abstracts.create', { title: 't', summary: 's', sources: {} }, 'args.sources: name at least one source id'],
    [
      'llm_task.start',
      { task_id: 1, title: 'x' },
      'args.task_id: give task_id (an existing task) or title (a new task), not both',
    ],
    ['links.add', { from: 1, to: {} }, 'args.to: expected a concept id (number) or name (string)'],
    ['process.mark', { process_id: 'p1', status: 'done' }, 'args.status: Invalid option'],
  ])('%s %j → %s', (type, args, expected) => {
    const r = reason(type, args);
    expect(r.startsWith(`invalid args for ${type}: `)).toBe(true);
    expect(r).toContain(expected);
  });

  it('validates config values against the key table', () => {
    expect(validateConfigValue('delay_ms', 250)).toEqual({ ok: true, value: 250 });
    expect(validateConfigValue('emotions', [' joy ', 'awe'])).toEqual({ ok: true, value: ['joy', 'awe'] });
    expect(validateConfigValue('context_mode', 'dreaming')).toMatchObject({ ok: false });
    expect(validateConfigValue('secret', 1)).toMatchObject({
      ok: false,
      reason: expect.stringContaining("unknown config key 'secret'"),
    });
    for (const [key, spec] of Object.entries(configKeys))
      expect([key, spec.schema.safeParse(spec.default).success]).toEqual([key, true]);
  });
});

describe('allowedByRating', () => {
  const cmds = [cmd('diary.add'), { ...cmd('diary.delete'), cmdId: 'c2' }, { ...cmd('config.set'), cmdId: 'c3' }];
  it('lets everything through on auto_pass (null) and filters by threshold otherwise', () => {
    expect(allowedByRating(cmds, null)).toEqual(['c1', 'c2', 'c3']);
    expect(allowedByRating(cmds, 1)).toEqual(['c1']);
    expect(allowedByRating(cmds, 2.5)).toEqual(['c1', 'c2', 'c3']);
    expect(allowedByRating(cmds, 0)).toEqual([]);
  });
});

describe('helpText', () => {
  it('lists every command on one line, and one family in detail', () => {
    const all = helpText();
    for (const t of commandTypes) expect(all).toContain(`\n${t} `);
    expect(helpText('diary')).toContain(
      'diary.add {title, content, tags?, priority?, pinned?, emotions?} — write a long-term diary entry (writes; needs rating ≥ +1)',
    );
    expect(helpText('config')).toContain('delay_ms (default 1000)');
    expect(helpText('nonsense')).toMatch(/^No family 'nonsense'/);
  });
});
