/**
 * What an agent loop loads. The worker gives every open workflow its own module cache (only the
 * modules `workflows/lib/preload.ts` shares are one copy per worker), so a module the agent loop
 * imports for a value is evaluated and held once per agent: 500 idle agents with the command
 * catalogue's schemas in reach held ~1 MB more each (worker RSS 0.8 → 1.5 GB). Its children are
 * started by type name, and the values it shares with them live in small modules of their own.
 * This walks the agent loop's value imports (type-only ones are erased) and fails when one
 * reaches a module that only a child, a command or the ledger needs.
 */
import { relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { chain, cycles, reachable } from '../helpers/module-graph.js';
import { repoRoot } from '../helpers/spawn.js';

describe('the agent loop module graph', () => {
  it('reaches no child workflow, no command catalogue, no nerve and no ledger arithmetic', () => {
    const seen = reachable(resolve(repoRoot, 'workflows/agent-loop/index.ts'));
    const modules = [...seen.keys()].map((f) => relative(repoRoot, f));
    // The walk itself works: the loop's own helpers are found.
    expect(modules).toContain('workflows/lib/infra.ts');
    expect(modules).toContain('workflows/lib/task-signals.ts');
    const forbidden = [
      /^workflows\/(task-loop|nerve|campaign|successor-fork|escalation|tool-generation)\.ts$/,
      /^core\/catalogue(\.ts$|\/)/,
      /^core\/nerves\//,
      /^core\/lifeforce\.ts$/,
      /^activities\//,
      /^db\//,
    ];
    const offending = modules
      .filter((m) => forbidden.some((re) => re.test(m)))
      .map((m) => chain(seen, resolve(repoRoot, m)));
    expect(offending).toEqual([]);
  });

  it('has no import cycles: each step of the loop imports only what comes before it', () => {
    expect(cycles(resolve(repoRoot, 'workflows/agent-loop/index.ts'))).toEqual([]);
  });
});
