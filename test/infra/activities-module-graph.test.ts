/**
 * The tick's three activities (activities/tick/: think, reflexes, applyCommands) and the pieces
 * they use (activities/reflexes/, activities/commands/) import one another in one direction:
 * no cycle among them, type-only imports included, so each file reads without the one that
 * imports it. Walked from activities/index.ts, as the worker loads them.
 */
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cycles, reachable } from '../helpers/module-graph.js';
import { repoRoot } from '../helpers/spawn.js';

const entry = resolve(repoRoot, 'activities/index.ts');
const tickFolders = /activities\/(tick|reflexes|commands)\//;

describe('the tick activities module graph', () => {
  it('reaches the three tick activities and their pieces', () => {
    const modules = [...reachable(entry, { types: true }).keys()];
    for (const m of [
      'activities/tick/think.ts',
      'activities/tick/reflexes.ts',
      'activities/tick/apply-commands.ts',
      'activities/reflexes/record.ts',
      'activities/commands/index.ts',
    ])
      expect(modules).toContain(resolve(repoRoot, m));
  });

  it('has no import cycle through activities/tick/, activities/reflexes/ or activities/commands/, type-only imports included', () => {
    expect(cycles(entry, { types: true }).filter((c) => tickFolders.test(c))).toEqual([]);
  });
});
