/**
 * The CLI loads only the module of the command it is given (cli/commands.ts): the table must
 * name exactly the commands each module registers, or a command would vanish or load the wrong
 * module.
 */
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { commandModules, modulesFor } from '../../cli/commands.js';

describe('the CLI command table', () => {
  it('names exactly the top-level commands each module registers, each once', async () => {
    const seen: string[] = [];
    for (const m of commandModules) {
      const program = new Command('mindloop');
      (await m.load())(program);
      expect(program.commands.map((c) => c.name())).toEqual(m.commands);
      seen.push(...m.commands);
    }
    expect(new Set(seen).size).toBe(seen.length);
  }, 120_000);

  it('loads one module for a named command, all of them otherwise', () => {
    const module = (name: string) => commandModules.find((m) => m.commands.includes(name))!;
    expect(modulesFor(['status', 'demo', '--json'])).toEqual([module('status')]);
    expect(modulesFor(['note', '--audio', 'a.wav', 'demo'])).toEqual([module('note')]);
    expect(module('status')).not.toBe(module('note'));
    expect(modulesFor(['pause', 'demo'])).toEqual([module('start')]);
    expect(modulesFor(['learnings', 'list'])).toEqual([commandModules.find((m) => m.commands.includes('learnings'))]);
    expect(modulesFor([])).toBe(commandModules);
    expect(modulesFor(['--help'])).toBe(commandModules);
    expect(modulesFor(['help', 'status'])).toBe(commandModules);
    expect(modulesFor(['no-such-command'])).toBe(commandModules);
  });
});
