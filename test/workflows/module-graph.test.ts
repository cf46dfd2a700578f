/**
 * What an agent loop loads. The worker gives every open workflow its own module cache (only the
 * modules `workflows/lib/preload.ts` shares are one copy per worker), so a module the agent loop
 * imports for a value is evaluated and held once per agent: 500 idle agents with the command
 * catalogue's schemas in reach held ~1 MB more each (worker RSS 0.8 → 1.5 GB). Its children are
 * started by type name, and the values it shares with them live in small modules of their own.
 * This walks the agent loop's value imports (type-only ones are erased) and fails when one
 * reaches a module that only a child, a command or the ledger needs.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/spawn.js';

/** The relative modules a file imports or re-exports for a value (a type-only import is erased). */
function valueImports(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const specs: string[] = [];
  for (const node of source.statements) {
    if (ts.isImportDeclaration(node)) {
      const clause = node.importClause;
      if (clause?.isTypeOnly) continue;
      const named = clause?.namedBindings;
      // `import { type A, type B } from …` imports no value either.
      if (clause && !clause.name && named && ts.isNamedImports(named) && named.elements.length > 0 && named.elements.every((e) => e.isTypeOnly)) continue;
      specs.push((node.moduleSpecifier as ts.StringLiteral).text);
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && !node.isTypeOnly) {
      specs.push((node.moduleSpecifier as ts.StringLiteral).text);
    }
  }
  return specs.filter((s) => s.startsWith('.'));
}

/** Every repository module `entry` reaches through value imports, with the module that first imported it. */
function reachable(entry: string): Map<string, string | null> {
  const seen = new Map<string, string | null>([[entry, null]]);
  const queue = [entry];
  while (queue.length) {
    const file = queue.shift()!;
    for (const spec of valueImports(file)) {
      let target = resolve(dirname(file), spec).replace(/\.js$/, '.ts');
      if (!existsSync(target)) target = resolve(dirname(file), spec, 'index.ts');
      if (!seen.has(target)) {
        seen.set(target, file);
        queue.push(target);
      }
    }
  }
  return seen;
}

/** Import cycles among the modules `entry` reaches (each cycle once, as file → … → file). */
function cycles(entry: string): string[] {
  const found: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string): void => {
    state.set(file, 'open');
    stack.push(file);
    for (const spec of valueImports(file)) {
      let target = resolve(dirname(file), spec).replace(/\.js$/, '.ts');
      if (!existsSync(target)) target = resolve(dirname(file), spec, 'index.ts');
      if (state.get(target) === 'open') found.push([...stack.slice(stack.indexOf(target)), target].map((f) => relative(repoRoot, f)).join(' → '));
      else if (!state.has(target)) visit(target);
    }
    stack.pop();
    state.set(file, 'done');
  };
  visit(entry);
  return found;
}

/** How `file` was reached: entry → … → file. */
function chain(seen: Map<string, string | null>, file: string): string {
  const path: string[] = [];
  for (let f: string | null | undefined = file; f; f = seen.get(f)) path.unshift(relative(repoRoot, f));
  return path.join(' → ');
}

describe('the agent loop module graph', () => {
  it('reaches no child workflow, no command catalogue, no nerve and no ledger arithmetic', () => {
    const seen = reachable(resolve(repoRoot, 'workflows/agent-loop/index.ts'));
    const modules = [...seen.keys()].map((f) => relative(repoRoot, f));
    // The walk itself works: the loop's own helpers are found.
    expect(modules).toContain('workflows/lib/infra.ts');
    expect(modules).toContain('workflows/lib/task-signals.ts');
    const forbidden = [/^workflows\/(task-loop|nerve|campaign|successor-fork|escalation|tool-generation)\.ts$/, /^core\/catalogue\.ts$/, /^core\/nerves\//, /^core\/lifeforce\.ts$/, /^activities\//, /^db\//];
    const offending = modules.filter((m) => forbidden.some((re) => re.test(m))).map((m) => chain(seen, resolve(repoRoot, m)));
    expect(offending).toEqual([]);
  });

  it('has no import cycles: each step of the loop imports only what comes before it', () => {
    expect(cycles(resolve(repoRoot, 'workflows/agent-loop/index.ts'))).toEqual([]);
  });
});
