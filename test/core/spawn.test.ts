/** The pure rules of descendants: the limits over a lineage, the child's name, the inputs, the parent's note. */
import { describe, expect, it } from 'vitest';
import { validateCommand, validateConfigValue } from '../../core/catalogue.js';
import { workflowIds } from '../../core/ids.js';
import {
  childNameSchema,
  limitRefusal,
  limitsFrom,
  spawnLimitDefaults,
  spawnNote,
  spawnWorkflowInput,
  type AncestorCount,
} from '../../core/society/spawn.js';
import { formatIssues } from '../../core/zod-issues.js';

const ancestor = (
  agentId: string,
  descendants: number,
  inGeneration: number,
  maxDescendants = 10,
  maxPerGeneration = 5,
): AncestorCount => ({ agentId, descendants, inGeneration, limits: { maxDescendants, maxPerGeneration } });

describe('limitRefusal', () => {
  it('admits while every ancestor has room, counting the child', () => {
    expect(limitRefusal(1, [ancestor('p', 9, 4)])).toBeNull();
    expect(limitRefusal(2, [ancestor('p', 0, 0), ancestor('gp', 9, 4)])).toBeNull();
  });

  it('refuses at the first ancestor whose limit the child would pass, naming it and the key', () => {
    expect(limitRefusal(1, [ancestor('p', 10, 4)])).toBe(
      'limit: p has 10 descendants and may have at most 10 (config max_descendants)',
    );
    expect(limitRefusal(1, [ancestor('p', 5, 5)])).toBe(
      'limit: p has 5 descendants in generation 1 and may have at most 5 per generation (config max_per_generation)',
    );
    // A grandchild counts against its grandparent.
    expect(limitRefusal(3, [ancestor('p', 0, 0), ancestor('gp', 1, 1, 10, 1)])).toBe(
      'limit: gp has 1 descendant in generation 3 and may have at most 1 per generation (config max_per_generation)',
    );
    expect(limitRefusal(1, [ancestor('p', 0, 0, 0)])).toMatch(/^limit: p has 0 descendants and may have at most 0/);
  });

  it('reads limits from config values, defaulting what is unset or invalid', () => {
    expect(limitsFrom({})).toEqual(spawnLimitDefaults);
    expect(limitsFrom({ max_descendants: 2, max_per_generation: 'many' })).toEqual({
      maxDescendants: 2,
      maxPerGeneration: spawnLimitDefaults.maxPerGeneration,
    });
    expect(validateConfigValue('max_descendants', -1)).toMatchObject({ ok: false });
    expect(validateConfigValue('max_per_generation', 3)).toEqual({ ok: true, value: 3 });
  });

  it('leaves the limits to a person: config.set of them is refused', () => {
    const v = validateCommand({ cmdId: 'c', type: 'config.set', args: { key: 'max_descendants', value: 100 } });
    expect(v).toMatchObject({ ok: false, code: 'invalid' });
    expect(v.ok ? '' : v.reason).toMatch(/max_descendants is set by a human only/);
  });
});

describe('the spawn command and workflow input', () => {
  it('accepts a child name that can be an agent id, and names the bad field otherwise', () => {
    expect(childNameSchema.parse(' kid.2 ')).toBe('kid.2');
    for (const bad of ['', 'a/b', 'two words', '-lead', 'x'.repeat(65)])
      expect(childNameSchema.safeParse(bad).success, bad).toBe(false);
    const v = validateCommand({
      cmdId: 's',
      type: 'spawn',
      args: { type: 'twin', name: 'a/b', goals: ['', 'ok'], budget: 0 },
    });
    expect(v.ok).toBe(false);
    const reason = v.ok ? '' : v.reason;
    expect(reason).toMatch(/args\.type: /);
    expect(reason).toMatch(/args\.name: a name that becomes the child's id/);
    expect(reason).toMatch(/args\.goals\.0: /);
    expect(reason).toMatch(/args\.budget: a positive amount of LF/);
    expect(
      validateCommand({ cmdId: 's', type: 'spawn', args: { type: 'clone', name: 'kid', color: 'red' } }),
    ).toMatchObject({ ok: false, reason: expect.stringContaining("unknown field 'color'") });
    expect(
      validateCommand({
        cmdId: 's',
        type: 'spawn',
        args: { type: 'newborn', name: 'kid', goals: ['grow'], budget: 12.5 },
      }),
    ).toMatchObject({ ok: true, command: { args: { type: 'newborn', name: 'kid', goals: ['grow'], budget: 12.5 } } });
  });

  it('the workflow input defaults the goals and refuses what the command would', () => {
    expect(spawnWorkflowInput.parse({ parentId: 'p', type: 'clone', name: 'c' })).toEqual({
      parentId: 'p',
      type: 'clone',
      name: 'c',
      goals: [],
    });
    const r = spawnWorkflowInput.safeParse({
      parentId: 'p',
      type: 'clone',
      name: 'c',
      goals: Array(11).fill('g'),
      extra: 1,
    });
    expect(r.success).toBe(false);
    expect(formatIssues(r.error!)).toMatch(/goals: at most 10 goals.*unknown field 'extra'/);
    expect(workflowIds.spawn('p', 'c')).toBe('agent/p/spawn/c');
  });
});

describe('spawnNote', () => {
  it('tells the parent what was born, or why not', () => {
    expect(
      spawnNote({ parentId: 'p', childId: 'c', type: 'clone', status: 'running', generation: 2, rows: 40, budget: 25 }),
    ).toBe(
      'Your clone descendant c (generation 2) is born and runs its own loop: 40 rows inherited, 25 LF carved from yours. It is your peer (relation child).',
    );
    expect(
      spawnNote({
        parentId: 'p',
        childId: 'c',
        type: 'newborn',
        status: 'running',
        generation: 1,
        rows: 1,
        budget: null,
      }),
    ).toMatch(/an unlimited budget/);
    expect(
      spawnNote({
        parentId: 'p',
        childId: 'c',
        type: 'trained',
        status: 'refused',
        reason: 'name taken: an agent c exists',
      }),
    ).toBe('Your trained descendant c was refused: name taken: an agent c exists.');
    expect(
      spawnNote({
        parentId: 'p',
        childId: 'c',
        type: 'trained',
        status: 'rolled_back',
        reason: 'the spawn was cancelled',
      }),
    ).toBe('Your trained descendant c was rolled back: the spawn was cancelled.');
  });
});
