/**
 * The repository's import graph, read from the sources with the TypeScript parser: what a module
 * reaches, and the import cycles among what it reaches. Value imports only by default (a
 * type-only import is erased from the emitted code); `types: true` counts those too, for a
 * cycle between files that is a cycle in what a reader must hold in mind.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import ts from 'typescript';
import { repoRoot } from './spawn.js';

export interface GraphOptions {
  /** Count type-only imports and re-exports too (default: value imports only). */
  types?: boolean;
}

/** The relative modules a file imports or re-exports (for a value, unless `types`). */
export function importsOf(file: string, options: GraphOptions = {}): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const specs: string[] = [];
  for (const node of source.statements) {
    if (ts.isImportDeclaration(node)) {
      const clause = node.importClause;
      if (!options.types) {
        if (clause?.isTypeOnly) continue;
        const named = clause?.namedBindings;
        // `import { type A, type B } from …` imports no value either.
        if (
          clause &&
          !clause.name &&
          named &&
          ts.isNamedImports(named) &&
          named.elements.length > 0 &&
          named.elements.every((e) => e.isTypeOnly)
        )
          continue;
      }
      specs.push((node.moduleSpecifier as ts.StringLiteral).text);
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && (options.types || !node.isTypeOnly)) {
      specs.push((node.moduleSpecifier as ts.StringLiteral).text);
    }
  }
  return specs.filter((s) => s.startsWith('.'));
}

/** The file a relative specifier of `from` names (`x.js` → `x.ts`, a folder → its `index.ts`). */
function target(from: string, spec: string): string {
  const file = resolve(dirname(from), spec).replace(/\.js$/, '.ts');
  return existsSync(file) ? file : resolve(dirname(from), spec, 'index.ts');
}

/** Every repository module `entry` reaches, with the module that first imported it. */
export function reachable(entry: string, options: GraphOptions = {}): Map<string, string | null> {
  const seen = new Map<string, string | null>([[entry, null]]);
  const queue = [entry];
  while (queue.length) {
    const file = queue.shift()!;
    for (const spec of importsOf(file, options)) {
      const next = target(file, spec);
      if (!seen.has(next)) {
        seen.set(next, file);
        queue.push(next);
      }
    }
  }
  return seen;
}

/** Import cycles among the modules `entry` reaches (each found once, as file → … → file, paths from the repository root). */
export function cycles(entry: string, options: GraphOptions = {}): string[] {
  const found: string[] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string): void => {
    state.set(file, 'open');
    stack.push(file);
    for (const spec of importsOf(file, options)) {
      const next = target(file, spec);
      if (state.get(next) === 'open')
        found.push([...stack.slice(stack.indexOf(next)), next].map((f) => relative(repoRoot, f)).join(' → '));
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, 'done');
  };
  visit(entry);
  return found;
}

/** How `file` was reached: entry → … → file. */
export function chain(seen: Map<string, string | null>, file: string): string {
  const path: string[] = [];
  for (let f: string | null | undefined = file; f; f = seen.get(f)) path.unshift(relative(repoRoot, f));
  return path.join(' → ');
}
