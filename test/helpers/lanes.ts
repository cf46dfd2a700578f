/**
 * Which lane a test file belongs to, read from what it imports: `unit` when it needs no server, no
 * child process and no heavy in-process build (a workflow bundle, a type-aware lint), `suite`
 * otherwise. vitest.config.ts builds its `unit` project from this, so a new file lands in the right
 * lane by what it uses, not by a list someone keeps.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import ts from 'typescript';

/**
 * What makes a file slow or needs the machine, by module (relative to the repo root for our own
 * files, the bare name for a package): every value import (`'*'`), or only the names listed. A
 * type-only import never counts. A local test file not named here (a folder's own helpers) is
 * read in turn.
 */
export const needsMore: Readonly<Record<string, '*' | readonly string[]>> = {
  // The helpers that start or reach servers and processes.
  'test/helpers/temporal.ts': '*',
  'test/helpers/nats.ts': ['testBus', 'testNatsUrl', 'cleanupBus'],
  'test/helpers/docker.ts': '*',
  'test/helpers/worker-process.ts': ['startKillableStack'],
  'test/helpers/postgres-server.ts': '*',
  'test/helpers/mcp.ts': '*',
  'test/helpers/env.ts': ['migratedDatabase', 'migratedPglite', 'freshPostgresDatabase', 'adminDatabaseUrl'],
  'test/helpers/spawn.ts': ['run', 'start', 'tsxBin'],
  // Servers, databases and processes reached without a helper.
  '@temporalio/testing': ['TestWorkflowEnvironment'],
  '@temporalio/worker': ['Worker', 'NativeConnection', 'bundleWorkflowCode', 'Runtime'],
  '@temporalio/client': ['Connection', 'Client'],
  '@electric-sql/pglite': '*',
  '@electric-sql/pglite-socket': '*',
  pg: '*',
  dockerode: '*',
  'node:child_process': '*',
  child_process: '*',
  'db/client.ts': ['createDb'],
  'db/migrate.ts': '*',
  'runtime/stack.ts': '*',
  'runtime/temporal-dev-server.ts': '*',
  'runtime/embedded-postgres.ts': '*',
  'runtime/nats-server.ts': '*',
  'runtime/bus.ts': ['connectBus'],
  'sandbox/docker.ts': '*',
  'workers/build-bundle.ts': '*',
  // In-process but long: the type-aware lint builds a TypeScript program of the tree; the offline
  // embedder loads its model and runs it on the CPU.
  eslint: '*',
  'activities/embeddings/index.ts': ['createLocalEmbedder', 'createAgentEmbedders'],
  'activities/embeddings/local.ts': ['createLocalEmbedder'],
  'activities/embeddings/agent-embedder.ts': ['createAgentEmbedders'],
};

export type Lane = 'unit' | 'suite';

/** `file`'s lane, with the import that decides it when it is `suite`. */
export function laneOf(root: string, file: string, seen = new Set<string>()): { lane: Lane; because?: string } {
  const abs = resolve(root, file);
  if (seen.has(abs)) return { lane: 'unit' };
  seen.add(abs);
  const source = ts.createSourceFile(abs, readFileSync(abs, 'utf8'), ts.ScriptTarget.Latest);
  for (const { module, names } of valueImports(source)) {
    const key = module.startsWith('.') ? relative(root, resolve(dirname(abs), module)).replace(/\.js$/, '.ts') : module;
    const rule = needsMore[key];
    if (rule === '*' || (rule && names.some((n) => n === '*' || rule.includes(n))))
      return { lane: 'suite', because: `${key} (${names.join(', ')})` };
    if (!rule && key.startsWith('test/') && key.endsWith('.ts')) {
      const inner = laneOf(root, key, seen);
      if (inner.lane === 'suite') return { lane: 'suite', because: `${key} → ${inner.because}` };
    }
  }
  return { lane: 'unit' };
}

/** The value imports of a module (static and dynamic) with the names each binds; `*` for a namespace, default or bare import. */
function valueImports(source: ts.SourceFile): Array<{ module: string; names: string[] }> {
  const found: Array<{ module: string; names: string[] }> = [];
  for (const s of source.statements) {
    if (ts.isImportDeclaration(s) && ts.isStringLiteral(s.moduleSpecifier)) {
      const clause = s.importClause;
      if (clause?.isTypeOnly) continue;
      const names: string[] = [];
      if (!clause || clause.name) names.push('*');
      const bindings = clause?.namedBindings;
      if (bindings && ts.isNamespaceImport(bindings)) names.push('*');
      if (bindings && ts.isNamedImports(bindings)) {
        for (const e of bindings.elements) if (!e.isTypeOnly) names.push((e.propertyName ?? e.name).text);
      }
      if (names.length > 0) found.push({ module: s.moduleSpecifier.text, names });
    }
    if (ts.isExportDeclaration(s) && !s.isTypeOnly && s.moduleSpecifier && ts.isStringLiteral(s.moduleSpecifier)) {
      found.push({ module: s.moduleSpecifier.text, names: ['*'] });
    }
  }
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [arg] = node.arguments;
      if (arg && ts.isStringLiteral(arg)) found.push({ module: arg.text, names: ['*'] });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Every test file under `root`/test, relative to `root`, sorted. */
export function testFiles(root: string): string[] {
  return readdirSync(resolve(root, 'test'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.test.ts') && !f.split('/').includes('node_modules'))
    .map((f) => `test/${f}`)
    .sort();
}

/** The test files (relative to `root`) of the `unit` lane, sorted. */
export function unitTestFiles(root: string): string[] {
  return testFiles(root).filter((f) => laneOf(root, f).lane === 'unit');
}
