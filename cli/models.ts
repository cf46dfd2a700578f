/**
 * `mindloop models add|list|test|remove`: the deployment's model catalogue (runtime/models.ts).
 * `add` checks the flags, that the key's variable is set here, and tests the model with real calls
 * before storing it (`--no-test` skips the calls); `list` shows each model with what agents did
 * with it; `test` calls it again and stores what it found; `remove` is refused while an agent uses it.
 * They read Postgres directly (DATABASE_URL, default the PGlite socket of `npm start`).
 */
import type { Command } from 'commander';
import { oneLine } from '../core/sanitize.js';
import type { Model, ModelTestResult } from '../db/schema/index.js';
import { loadEnvOrExit, secretSource } from '../env.js';
import {
  addModel,
  envVarSchema,
  httpUrl,
  listModels,
  ModelCatalogueError,
  modelNameSchema,
  modelRoles,
  removeModel,
  testModel,
  type CatalogueDeps,
  type ModelRole,
  type ModelWithUsage,
} from '../runtime/models.js';
import { numberArg, oneOfArg, schemaArg } from './args.js';
import { withDb } from './client.js';
import { table } from './table.js';

const out = (s: string): void => {
  process.stdout.write(`${s}\n`);
};

const cliProviders = ['openai', 'anthropic'] as const;
const nameArg = schemaArg('model name', modelNameSchema);
const priceArg = (flag: string) => numberArg(flag, 0, 100_000, false);

interface AddOptions {
  provider: (typeof cliProviders)[number];
  model: string;
  baseUrl?: string;
  keyEnv?: string;
  role: ModelRole;
  priceIn: number;
  priceOut: number;
  priceCachedIn?: number;
  contextWindow?: number;
  test: boolean;
  json?: boolean;
}

/** The catalogue with this process's environment (keys are read from it by name) and tools folder. */
function withCatalogue<T>(fn: (deps: CatalogueDeps) => Promise<T>): Promise<T> {
  const env = loadEnvOrExit();
  return withDb((db) => fn({ db, env: secretSource(), toolsDir: env.MINDLOOP_TOOLS_DIR }));
}

const yesNo = (v: boolean | null): string => (v === null ? 'unknown' : v ? 'yes' : 'no');

/** One line for a test's findings. */
export function testLine(t: ModelTestResult | null): string {
  if (!t) return 'not tested';
  if (!t.ok) return `FAILED: ${t.error ?? 'no answer'}`;
  // An embedder's test records the size of its vectors instead of chat capabilities.
  const dimensions = (t as { dimensions?: unknown }).dimensions;
  if (typeof dimensions === 'number') return `ok in ${t.latencyMs} ms; embeds ${dimensions} dimensions`;
  return `ok in ${t.latencyMs} ms; JSON replies ${yesNo(t.jsonReply)}; tool calls ${yesNo(t.toolCalls)}; context ${t.contextLength === null ? 'not reported' : `${t.contextLength} tokens`}`;
}

const where = (m: Model): string => `${m.provider} ${m.model}${m.baseUrl ? ` at ${m.baseUrl}` : ''}`;
const usd = (x: number): string => `$${x < 0.01 && x > 0 ? x.toPrecision(2) : x.toFixed(2)}`;
const tokens = (n: number): string =>
  n >= 1_000_000 ? `${(n / 1_000_000).toFixed(1)}M` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n);

/** `models list` as a table. */
export function formatModels(rows: readonly ModelWithUsage[]): string {
  if (rows.length === 0)
    return 'no models in the catalogue (`mindloop models add <name> --provider … --model …` adds one)';
  const head = [
    'name',
    'provider',
    'model',
    'role',
    '$/1M in/out',
    'context',
    'test',
    'calls',
    'failed',
    'p50',
    'tokens',
    'spend',
    'agents',
  ];
  const body = rows.map((m) => [
    m.name,
    m.provider,
    oneLine(m.model, 40),
    m.role,
    `${m.priceInPer1m}/${m.priceOutPer1m}`,
    m.contextWindow === null ? '-' : String(m.contextWindow),
    m.test ? (m.test.ok ? `ok ${m.test.latencyMs} ms` : 'FAILED') : 'untested',
    String(m.calls),
    String(m.failures),
    m.p50LatencyMs === null ? '-' : `${m.p50LatencyMs} ms`,
    tokens(m.promptTokens + m.completionTokens),
    usd(m.spendUsd),
    m.agents.join(',') || '-',
  ]);
  return table(head, body, '').join('\n');
}

/** A refusal of bad input is a usage error (exit 2); the others are the command's failure (exit 1). */
function refused(cmd: Command, err: unknown): never {
  if (err instanceof ModelCatalogueError && err.problem === 'invalid')
    cmd.error(`mindloop models: ${err.message}`, { exitCode: 2 });
  throw err;
}

export function registerModelCommands(program: Command): void {
  const models = program
    .command('models')
    .description('the model catalogue: models added once by name, then assigned to agents (add, list, test, remove)');

  models
    .command('add')
    .description('add a model, after a test call (refused when the server cannot be reached or lacks the model)')
    .argument('<name>', 'the name agents and agent files use: a slug (a-z, 0-9, . _ -), at most 64 characters', nameArg)
    .requiredOption(
      '--provider <provider>',
      `${cliProviders.join('|')} (openai: any OpenAI-compatible server, with --base-url)`,
      oneOfArg('--provider', cliProviders),
    )
    .requiredOption('--model <id>', "the model's id on the server, e.g. gpt-4o-mini")
    .option(
      '--base-url <url>',
      "the server, e.g. http://127.0.0.1:11434/v1 (default: the provider's own API)",
      schemaArg('--base-url', httpUrl),
    )
    .option(
      '--key-env <VAR>',
      "the NAME of the environment variable holding the key (never the key); needed for anthropic and OpenAI's own API, and must be set here",
      schemaArg('--key-env', envVarSchema),
    )
    .option(
      '--role <role>',
      `its default role: ${modelRoles.join('|')} (mini: the emotion and novelty mini-prompts after each reply, stored as emotion)`,
      oneOfArg('--role', modelRoles),
      'agent',
    )
    .option('--price-in <usd>', 'USD per 1M prompt tokens', priceArg('--price-in'), 0)
    .option('--price-out <usd>', 'USD per 1M completion tokens', priceArg('--price-out'), 0)
    .option(
      '--price-cached-in <usd>',
      'USD per 1M prompt tokens the provider reads from its prompt cache (default: the --price-in price)',
      priceArg('--price-cached-in'),
    )
    .option(
      '--context-window <tokens>',
      'its context length (default: what the server reports)',
      numberArg('--context-window', 1, 100_000_000),
    )
    .option('--no-test', 'store it without calling it')
    .option('--json', 'print JSON')
    .action(async function (this: Command, name: string, o: AddOptions) {
      const input = {
        name,
        provider: o.provider,
        model: o.model,
        baseUrl: o.baseUrl,
        apiKeyEnv: o.keyEnv,
        role: o.role,
        priceInPer1m: o.priceIn,
        priceOutPer1m: o.priceOut,
        ...(o.priceCachedIn !== undefined ? { priceCachedInPer1m: o.priceCachedIn } : {}),
        contextWindow: o.contextWindow,
      };
      const m = await withCatalogue((deps) => addModel(deps, input, { test: o.test })).catch((err: unknown) =>
        refused(this, err),
      );
      out(
        o.json
          ? JSON.stringify(m, null, 2)
          : `added model ${m.name}: ${where(m)}, role ${m.role} — ${testLine(m.test)}`,
      );
    });

  models
    .command('list')
    .description(
      'every model, with its last test and its calls by agents: count, failures, median latency, tokens, spend',
    )
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const rows = await withDb(listModels);
      out(o.json ? JSON.stringify(rows, null, 2) : formatModels(rows));
    });

  models
    .command('test')
    .description(
      'call the model now (latency, JSON replies, tool calls, context length) and store what was found; exit 1 when it does not answer',
    )
    .argument('<name>', 'the model', nameArg)
    .option('--json', 'print JSON')
    .action(async (name: string, o: { json?: boolean }) => {
      const m = await withCatalogue((deps) => testModel(deps, name));
      out(o.json ? JSON.stringify(m.test, null, 2) : `model ${m.name} (${where(m)}): ${testLine(m.test)}`);
      if (!m.test?.ok) process.exitCode = 1;
    });

  models
    .command('remove')
    .description('remove a model; refused while an agent uses it')
    .argument('<name>', 'the model', nameArg)
    .action(async (name: string) => {
      await withDb((db) => removeModel(db, name));
      out(`removed model ${name}`);
    });
}
