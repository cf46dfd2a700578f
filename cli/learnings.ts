/**
 * `mindloop learnings list|stats|export|import|decay|clear|why` (per shard) and
 * `mindloop feedback <agent> accept|reject <action> [--reason …]` (preference learning).
 * They talk to Postgres directly (DATABASE_URL, default the PGlite socket of `npm start`).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { InvalidArgumentError, type Command } from 'commander';
import {
  clearLearnings,
  decayLearnings,
  explainLearning,
  exportLearnings,
  importLearnings,
  learningStats,
  listLearnings,
  recordFeedback,
} from '../db/queries/learnings.js';
import { agentIdSchema } from '../core/ids.js';
import { feedbackKinds, learningDefaults, shardSchema, type FeedbackKind } from '../core/learnings.js';
import { withDb } from './client.js';
import { numberArg } from './args.js';

const shardOpt = (raw: string): string => {
  const r = shardSchema.safeParse(raw);
  if (!r.success) throw new InvalidArgumentError(r.error.issues[0]?.message ?? 'bad shard');
  return r.data;
};
const num = (name: string, min: number, max: number, int = false) => numberArg(name, min, max, int);
const out = (s: string): void => {
  process.stdout.write(s.endsWith('\n') ? s : `${s}\n`);
};

export function registerLearningCommands(program: Command): void {
  const learnings = program
    .command('learnings')
    .description('the learning store, per shard: list, stats, export, import, decay, clear, why');
  learnings.showHelpAfterError(true);
  registerLearningViews(learnings);
  registerLearningTransfer(learnings);
  registerLearningUpkeep(learnings);
  registerLearningWhy(learnings);
  registerFeedback(program);
}

/** `learnings list` and `learnings stats`: what a shard holds. */
function registerLearningViews(learnings: Command): void {
  learnings
    .command('list')
    .description('learnings above the load threshold (confidence > 0.3), by confidence then recency')
    .requiredOption('--shard <shard>', 'shard (e.g. coder, campaign, agent:<id>)', shardOpt)
    .option('--all', 'include low-confidence learnings')
    .option('--json', 'print JSON')
    .action(async (o: { shard: string; all?: boolean; json?: boolean }) => {
      const rows = await withDb((db) => listLearnings(db, o.shard, { all: o.all }));
      if (o.json) return out(JSON.stringify(rows, null, 2));
      if (rows.length === 0) return out(`no learnings in shard ${o.shard}${o.all ? '' : ' above 0.3'}`);
      for (const l of rows) {
        out(
          `#${l.id}  ${l.confidence.toFixed(3)}  ${l.factPredicate}  ${JSON.stringify(l.factArgs)}  learned ${l.learnedAt.toISOString()}${l.sourceCampaign ? `  from ${l.sourceCampaign}` : ''}`,
        );
      }
    });

  learnings
    .command('stats')
    .description('total, mean confidence, counts by predicate, refusals in the last day')
    .requiredOption('--shard <shard>', 'shard', shardOpt)
    .action(async (o: { shard: string }) =>
      out(JSON.stringify(await withDb((db) => learningStats(db, o.shard)), null, 2)),
    );
}

/** `learnings export` and `learnings import`: a shard as JSON, out and back in. */
function registerLearningTransfer(learnings: Command): void {
  learnings
    .command('export')
    .description('every learning of the shard as JSON (what import restores)')
    .requiredOption('--shard <shard>', 'shard', shardOpt)
    .option('--format <format>', 'json (the only format)', (v) => {
      if (v !== 'json') throw new InvalidArgumentError(`only "json" is supported, got "${v}"`);
      return v;
    })
    .option('--file <path>', 'write to a file instead of stdout')
    .action(async (o: { shard: string; file?: string }) => {
      const json = `${JSON.stringify(await withDb((db) => exportLearnings(db, o.shard)), null, 2)}\n`;
      if (o.file) {
        await writeFile(o.file, json);
        process.stderr.write(`exported to ${o.file}\n`);
      } else out(json);
    });

  learnings
    .command('import')
    .description('import an export into the shard (checked: allow-list, typed args, shard cap; all or nothing)')
    .requiredOption('--shard <shard>', 'shard', shardOpt)
    .requiredOption('--file <path>', 'JSON file from `learnings export` (- for stdin)')
    .action(async (o: { shard: string; file: string }) => {
      const text = o.file === '-' ? await readStdin() : await readFile(o.file, 'utf8');
      let records: unknown;
      try {
        records = JSON.parse(text);
      } catch (err) {
        throw new Error(`${o.file} is not JSON: ${(err as Error).message}`);
      }
      process.stderr.write(
        `${Array.isArray(records) ? `${records.length} records` : 'the records'} read from ${o.file === '-' ? 'stdin' : o.file}; checking and importing them in one transaction…\n`,
      );
      const r = await withDb((db) => importLearnings(db, o.shard, records));
      out(`imported ${r.imported}, updated ${r.updated} learnings into shard ${o.shard}`);
    });
}

/** `learnings decay` and `learnings clear`: forgetting, slowly or at once. */
function registerLearningUpkeep(learnings: Command): void {
  learnings
    .command('decay')
    .description(
      `multiply by --factor the confidence of learnings not reinforced for ${learningDefaults.staleAfterDays} days; delete those below ${learningDefaults.deleteBelow}`,
    )
    .requiredOption('--shard <shard>', 'shard', shardOpt)
    .option('--factor <x>', 'decay factor in (0, 1]', num('--factor', 0.000001, 1), learningDefaults.decayFactor)
    .option(
      '--stale-days <n>',
      'only learnings older than this many days',
      num('--stale-days', 0, 3650),
      learningDefaults.staleAfterDays,
    )
    .action(async (o: { shard: string; factor: number; staleDays: number }) => {
      const r = await withDb((db) =>
        decayLearnings(db, { shardType: o.shard, factor: o.factor, staleAfterDays: o.staleDays }),
      );
      out(
        `shard ${o.shard}: ${r.decayed} decayed (× ${o.factor}), ${r.deleted} deleted (below ${learningDefaults.deleteBelow})`,
      );
    });

  learnings
    .command('clear')
    .description('delete every learning of the shard (needs --confirm)')
    .requiredOption('--shard <shard>', 'shard', shardOpt)
    .option('--confirm', 'really delete them')
    .action(async (o: { shard: string; confirm?: boolean }) => {
      if (!o.confirm) {
        process.stderr.write(`refusing to clear shard ${o.shard} without --confirm (nothing deleted)\n`);
        process.exitCode = 1;
        return;
      }
      const r = await withDb((db) => clearLearnings(db, o.shard));
      out(`shard ${o.shard}: ${r.deleted} learnings deleted`);
    });
}

/** `learnings why <id>`: how a learning was derived. */
function registerLearningWhy(learnings: Command): void {
  learnings
    .command('why')
    .description('how a learning was derived: the rule, the counts at the threshold, the counts now')
    .argument('<id>', 'learning id', num('<id>', 1, Number.MAX_SAFE_INTEGER, true))
    .option('--json', 'print JSON')
    .action(async (id: number, o: { json?: boolean }) => {
      const e = await withDb((db) => explainLearning(db, id));
      if (!e) throw new Error(`no learning #${id}`);
      if (o.json) return out(JSON.stringify(e, null, 2));
      const l = e.learning;
      out(
        `learning #${l.id} [${l.shardType}] ${l.factPredicate} ${JSON.stringify(l.factArgs)} — confidence ${l.confidence.toFixed(3)}, reinforced ${l.reinforcements}×, learned ${l.learnedAt.toISOString()}`,
      );
      if (!e.derivation) return out(`  not derived from preference counts; source: ${l.sourceCampaign ?? '(none)'}`);
      const d = e.derivation;
      out(`  rule ${d.rule}: ${d.explain}`);
      out(`  fired when ${d.kind} count of "${d.pattern}" reached ${d.count} (threshold ${d.threshold})`);
      for (const c of e.counts)
        out(
          `  now: agent ${c.agentId} ${c.kind} "${c.pattern}" × ${c.count}${c.promotedAt ? `, promoted ${c.promotedAt.toISOString()}` : ''}`,
        );
    });
}

/** `mindloop feedback <agent> accept|reject <action>`: one preference signal. */
function registerFeedback(program: Command): void {
  program
    .command('feedback')
    .description(
      `accept or reject an action of an agent; at ${learningDefaults.threshold} (configurable) the same pattern becomes a learning`,
    )
    .argument('<agent>', 'agent id')
    .argument('<verdict>', 'accept | reject', (v: string): FeedbackKind => {
      if (!(feedbackKinds as readonly string[]).includes(v))
        throw new InvalidArgumentError(`expected accept or reject, got "${v}"`);
      return v as FeedbackKind;
    })
    .argument('<action>', 'the action: a command type (shell.exec), style.<name>, tool.<name>, lang.<language>')
    .option('--reason <text>', 'why (rejections count action:reason)')
    .option('--shard <shard>', 'shard (default agent:<id>)', shardOpt)
    .option(
      '--threshold <n>',
      `occurrences that make a signal (default: the agent's learning_threshold config, else ${learningDefaults.threshold})`,
      num('--threshold', 1, 1000, true),
    )
    .showHelpAfterError(true)
    .action(
      async (
        rawAgent: string,
        kind: FeedbackKind,
        action: string,
        o: { reason?: string; shard?: string; threshold?: number },
      ) => {
        const a = agentIdSchema.safeParse(rawAgent);
        if (!a.success) throw new Error(`bad agent id "${rawAgent}": ${a.error.issues[0]?.message}`);
        const r = await withDb((db) =>
          recordFeedback(db, {
            agentId: a.data,
            kind,
            action,
            reason: o.reason,
            shardType: o.shard,
            threshold: o.threshold,
            source: 'cli',
          }),
        );
        out(`${kind} "${r.pattern}" for ${a.data}: count ${r.count} (threshold ${r.threshold})`);
        if (r.learning)
          out(
            `learning #${r.learning.id} ${r.learning.reinforced ? 'reinforced' : 'created'}: ${r.learning.predicate} ${JSON.stringify(r.learning.args)} (rule ${r.learning.rule}, confidence ${r.learning.confidence})`,
          );
        if (r.refused) {
          process.stderr.write(`${r.refused}\n`);
          process.exitCode = 1;
        }
      },
    );
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
