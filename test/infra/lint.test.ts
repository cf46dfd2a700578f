/**
 * The lint rules that keep workflow code deterministic, run
 * through the real ESLint API and the repo's own eslint.config.js on the sources in
 * test/fixtures/lint/, each linted as if it lived under workflows/ (or elsewhere, to show a
 * rule's scope).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const fixtures = join(root, 'test', 'fixtures', 'lint');

// Why the override: the fixtures are linted under virtual paths (nothing is written into
// workflows/, where a concurrent `tsc` or `eslint .` would see it), and typescript-eslint's
// project service only knows files that exist on disk. allowDefaultProject gives those
// virtual paths a program built from tsconfig.json's compiler options; every rule still
// comes from eslint.config.js.
const virtualGlob = '*/__lint_fixture__.ts';
const eslint = new ESLint({
  cwd: root,
  overrideConfigFile: join(root, 'eslint.config.js'),
  overrideConfig: {
    files: [virtualGlob],
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: [virtualGlob], defaultProject: 'tsconfig.json' },
      },
    },
  },
});

/**
 * Lint fixture `name` as `<folder>/__lint_fixture__.ts`; returns its sorted rule ids. One
 * virtual path per folder, because the project service caps default-project files at 8.
 */
async function lintFixture(name: string, folder = 'workflows'): Promise<string[]> {
  const code = readFileSync(join(fixtures, `${name}.ts.txt`), 'utf8');
  const filePath = join(root, folder, '__lint_fixture__.ts');
  const [result] = await eslint.lintText(code, { filePath });
  expect(result, `no lint result for ${name}`).toBeDefined();
  const messages = result?.messages ?? [];
  // A parsing error (ruleId null) would make a "clean" case pass for the wrong reason.
  const fatal = messages.filter((m) => m.fatal === true || m.ruleId === null);
  expect(fatal.map((m) => m.message)).toEqual([]);
  return [...new Set(messages.map((m) => m.ruleId ?? ''))].sort();
}

const restricted = '@typescript-eslint/no-restricted-imports';

// The first lint builds a TypeScript program (seconds); later ones reuse it.
describe('eslint.config.js', { timeout: 60_000 }, () => {
  it('rejects a value import of activities/ in a workflow', async () => {
    expect(await lintFixture('value-import-activities')).toEqual([restricted]);
  });

  it('accepts `import type` of activities/ in a workflow', async () => {
    expect(await lintFixture('type-import-activities')).toEqual([]);
  });

  it('rejects `import { type X }`, which verbatimModuleSyntax keeps as a side-effect import', async () => {
    expect(await lintFixture('inline-type-import-activities')).toEqual([
      '@typescript-eslint/no-import-type-side-effects',
    ]);
  });

  it('rejects a value import used only as a type in workflow code, not elsewhere', async () => {
    expect(await lintFixture('value-import-used-as-type')).toEqual(['@typescript-eslint/consistent-type-imports']);
    expect(await lintFixture('value-import-used-as-type', 'workers')).toEqual([]);
  });

  it('rejects value imports of @temporalio/client, drizzle-orm and pg in a workflow', async () => {
    const code = readFileSync(join(fixtures, 'value-import-sdk-and-db.ts.txt'), 'utf8');
    const [result] = await eslint.lintText(code, {
      filePath: join(root, 'workflows', '__lint_fixture__.ts'),
    });
    const flagged = (result?.messages ?? []).filter((m) => m.ruleId === restricted);
    expect(flagged.map((m) => m.message.split("'")[1])).toEqual(['@temporalio/client', 'drizzle-orm', 'pg']);
  });

  it("rejects `import fs from 'node:fs'` in a workflow", async () => {
    expect(await lintFixture('node-fs')).toEqual([restricted]);
  });

  it('rejects bare Node built-ins (crypto, path) in a workflow', async () => {
    expect(await lintFixture('bare-builtin')).toEqual([restricted]);
  });

  it('rejects the process global in a workflow', async () => {
    expect(await lintFixture('process-env')).toEqual(['no-restricted-globals']);
  });

  it('rejects dynamic import() in a workflow', async () => {
    expect(await lintFixture('dynamic-import')).toEqual(['no-restricted-syntax']);
  });

  it('reports a floating promise in a workflow', async () => {
    expect(await lintFixture('floating-promise')).toEqual(['@typescript-eslint/no-floating-promises']);
  });

  it('reports a floating promise outside workflows too', async () => {
    expect(await lintFixture('floating-promise', 'activities')).toEqual(['@typescript-eslint/no-floating-promises']);
  });

  it('allows Node built-ins, process and value imports outside workflows', async () => {
    expect(await lintFixture('node-fs', 'activities')).toEqual([]);
    expect(await lintFixture('process-env', 'activities')).toEqual([]);
    expect(await lintFixture('value-import-activities', 'workers')).toEqual([]);
  });

  it('limits a class to 400 lines of code, not counting blank lines and comments', async () => {
    const classOf = (methods: number) =>
      `/** A class of ${methods} small methods. */\nexport class Big {\n${Array.from({ length: methods }, (_, i) => `  /**\n   * Method ${i}.\n   */\n\n  m${i}(): number {\n    return ${i};\n  }\n`).join('')}}\n`;
    const ids = async (code: string) => {
      const [result] = await eslint.lintText(code, { filePath: join(root, 'cli', '__lint_fixture__.ts') });
      return (result?.messages ?? []).map((m) => `${m.ruleId}: ${m.message}`);
    };
    // 3 lines of code per method, plus the class's first and last: 133 methods = 401 lines.
    expect(await ids(classOf(133))).toEqual([
      "mindloop/max-class-lines: Class 'Big' has too many lines (401). Maximum allowed is 400.",
    ]);
    // 132 methods: 398 lines of code, though with comments and blank lines the class spans over 900.
    expect(await ids(classOf(132))).toEqual([]);
  });

  it('ignores test/fixtures when linting the repo', async () => {
    expect(await eslint.isPathIgnored(join(fixtures, 'node-fs.ts.txt'))).toBe(true);
    expect(await eslint.isPathIgnored(join(root, 'test', 'fixtures', 'lint', 'x.ts'))).toBe(true);
    expect(await eslint.isPathIgnored(join(root, 'db', 'migrations', 'x.ts'))).toBe(true);
  });
});
