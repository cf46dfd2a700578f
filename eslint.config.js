// @ts-check
// Lint for Mindloop, with the rules that keep workflow code deterministic. Type-aware rules
// run on the TypeScript sources through typescript-eslint's project service (the root
// tsconfig.json); the plain .js/.mjs bootstrap scripts get only the syntactic rules, since no
// tsconfig covers them.
import { builtinModules } from 'node:module';
import { defineConfig, globalIgnores } from 'eslint/config';
import tseslint from 'typescript-eslint';

/** @param {string} s */
const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

// Why: workflow code runs in Temporal's deterministic sandbox and is bundled by webpack. A
// value import of Node, I/O or SDK-side code either breaks the bundle or, worse, bundles it
// and makes replay nondeterministic. Types are erased, so `import type` stays allowed.
const serverSide = {
  regex: [
    // Repo folders that hold I/O code, reached from workflows/ by climbing up (`../`)
    // or through package.json subpath imports (`#activities/…`).
    String.raw`^(?:(?:\.\./)+|#)(?:activities|db|sandbox|workers|cli|web)(?:/|$)`,
    // env.ts reads process.env (workflows never read env).
    String.raw`^(?:(?:\.\./)+|#)env(?:\.[cm]?[jt]s)?$`,
    // Packages that do I/O or belong to the worker/client side of the SDK.
    String.raw`^(?:drizzle-orm|drizzle-zod|drizzle-kit|pg|pg-[^/]+|dockerode|tsx|commander)(?:/|$)`,
    String.raw`^@(?:langchain|electric-sql)/`,
    String.raw`^@temporalio/(?:worker|client|activity|testing)(?:/|$)`,
  ].join('|'),
  allowTypeImports: true,
  message:
    'Workflow code may only `import type` from activities/db/sandbox/workers/cli, drizzle, pg, ' +
    'dockerode, LangChain and the non-workflow Temporal SDK packages.',
};

const nodeBuiltins = {
  regex: `^(?:node:.+|${builtinModules.map(escapeRe).join('|')})$`,
  message: 'Node built-ins are not available in the Temporal workflow sandbox; do the I/O in an activity.',
};

/**
 * `max-lines-per-function` does not see a class: a class of forty short methods reads like one
 * long function. Counts a class's lines that hold code (not blank, not only a comment).
 * @type {import('eslint').Rule.RuleModule}
 */
const maxClassLines = {
  meta: {
    type: 'suggestion',
    schema: [{ type: 'object', properties: { max: { type: 'integer', minimum: 1 } }, additionalProperties: false }],
    messages: { tooLong: "Class '{{name}}' has too many lines ({{lines}}). Maximum allowed is {{max}}." },
  },
  create(context) {
    const max = context.options[0]?.max ?? 400;
    const source = context.sourceCode;
    /** Lines that hold only a comment (or part of a block comment). */
    const commentOnly = new Set();
    for (const c of source.getAllComments()) {
      for (let l = c.loc.start.line; l <= c.loc.end.line; l++) {
        const text = source.lines[l - 1] ?? '';
        const before = l === c.loc.start.line ? text.slice(0, c.loc.start.column) : '';
        const after = l === c.loc.end.line ? text.slice(c.loc.end.column) : '';
        if (before.trim() === '' && after.trim() === '') commentOnly.add(l);
      }
    }
    /** @param {import('estree').Node} node */
    const check = (node) => {
      if (!node.loc) return;
      let lines = 0;
      for (let l = node.loc.start.line; l <= node.loc.end.line; l++) {
        if ((source.lines[l - 1] ?? '').trim() !== '' && !commentOnly.has(l)) lines++;
      }
      if (lines > max) {
        const name = 'id' in node && node.id ? node.id.name : '(anonymous)';
        context.report({ node, messageId: 'tooLong', data: { name, lines: String(lines), max: String(max) } });
      }
    };
    return { ClassDeclaration: check, ClassExpression: check };
  },
};

export default defineConfig(
  globalIgnores([
    '**/node_modules/',
    '.tools/',
    '.build/',
    '.data/',
    '.git/',
    'db/migrations/',
    'bench/results/',
    // The peers benchmark's own package (other frameworks' code, its own tsconfig).
    'bench/peers/',
    'coverage/',
    'dist/',
    // Fixtures are deliberately bad code; test/infra/lint.test.ts lints them explicitly.
    'test/fixtures/',
  ]),

  {
    languageOptions: { ecmaVersion: 'latest', sourceType: 'module' },
  },

  {
    files: ['**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      // With verbatimModuleSyntax, `import { type X } from 'm'` is kept as `import {} from 'm'`:
      // the module still loads (and lands in the workflow bundle). Use `import type`.
      '@typescript-eslint/no-import-type-side-effects': 'error',
    },
  },

  {
    // Code that ends up in the workflow bundle: a value import used only as a type (e.g. a
    // class) would still pull its module in. Elsewhere such an import costs nothing.
    files: ['workflows/**/*.ts', 'core/**/*.ts'],
    rules: {
      '@typescript-eslint/consistent-type-imports': [
        'error',
        { prefer: 'type-imports', fixStyle: 'inline-type-imports' },
      ],
    },
  },

  {
    // core/ is pure and workflows import it: its imports end up in the workflow bundle too (a
    // value import of db/schema once put drizzle in every workflow's memory).
    files: ['workflows/**/*.{ts,js,mjs,cjs}', 'core/**/*.ts'],
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      'no-restricted-imports': 'off',
      '@typescript-eslint/no-restricted-imports': ['error', { patterns: [serverSide, nodeBuiltins] }],
    },
  },

  {
    files: ['workflows/**/*.{ts,js,mjs,cjs}'],
    rules: {
      'no-restricted-globals': [
        'error',
        {
          name: 'process',
          message: 'Workflows never read process state or env; pass values in the workflow input.',
        },
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector: 'ImportExpression',
          message: 'Dynamic import() is not supported in the workflow bundle; use a static import.',
        },
      ],
    },
  },

  // Sizes a newcomer can read in one sitting (blank lines and comments not counted): no function
  // in the product over 150 lines, no class over 400, no file over 800. A long activity or
  // workflow is split into named steps; a long class into the modules its steps belong to.
  {
    files: ['**/*.ts'],
    ignores: ['test/**'],
    plugins: { mindloop: { rules: { 'max-class-lines': maxClassLines } } },
    rules: {
      'max-lines-per-function': ['error', { max: 150, skipBlankLines: true, skipComments: true }],
      'mindloop/max-class-lines': ['error', { max: 400 }],
      'max-lines': ['error', { max: 800, skipBlankLines: true, skipComments: true }],
    },
  },
);
