/**
 * `mindloop validators <agent>`: coverage, agreement, response time and drift per validator;
 * `mindloop unvalidated <agent>`: commands kept but not run, and
 * `unvalidated approve|reject <agent> <id>` a human's answer to one;
 * `mindloop memory-restore <agent> <table> <id>`: undo a memory-manager archiving;
 * `mindloop facts <agent>` / `mindloop fact-resolve <agent> <id> verified|rejected <why>`: the
 * low-confidence facts waiting for a fact-check, and recording a check's outcome.
 * They read Postgres directly (DATABASE_URL, default the PGlite socket of `npm start`).
 */
import { InvalidArgumentError, type Command } from 'commander';
import { table } from './table.js';
import { and, desc, eq, inArray, or } from 'drizzle-orm';
import { restorableTables, restoreArchived, type RestoreInput } from '../db/queries/archive.js';
import { resolveFact } from '../db/queries/facts.js';
import { approveUnvalidated, listUnvalidated, rejectUnvalidated } from '../runtime/unvalidated.js';
import { configKeys } from '../core/catalogue.js';
import { defaultTrustPolicy, validatorStats, type ValidatorRecord, type ValidatorStats } from '../core/validation.js';
import type { Db } from '../db/client.js';
import {
  agentConfig,
  agentPeers,
  llmRecentResponses,
  llmRegistry,
  unverifiedFacts,
  type ValidatorVote,
} from '../db/schema/index.js';
import { agentIdArg, numberArg } from './args.js';
import { withDb } from './client.js';

interface ValidatorReportRow extends ValidatorStats {
  trust: number;
  excluded: boolean;
  excludedReason: string | null;
}

/** Per-validator statistics over the agent's last `ticks` validated ticks, with trust and exclusion. */
export async function validatorReport(db: Db, agentId: string, ticks = 200): Promise<ValidatorReportRow[]> {
  const [registry, rows] = await Promise.all([
    db
      .select()
      .from(llmRegistry)
      .where(
        and(eq(llmRegistry.agentId, agentId), or(eq(llmRegistry.role, 'validator'), eq(llmRegistry.validator, true))),
      ),
    db
      .select({ rating: llmRecentResponses.rating, validators: llmRecentResponses.validators })
      .from(llmRecentResponses)
      .where(eq(llmRecentResponses.agentId, agentId))
      .orderBy(desc(llmRecentResponses.tick))
      .limit(ticks),
  ]);
  const stats = new Map(
    validatorStats(
      rows.map((r) => ({
        rating: r.rating,
        validators: r.validators.filter((v) => v.registryId !== undefined) as ValidatorRecord[],
      })),
    ).map((s) => [s.registryId, s]),
  );
  const fromRegistry = registry.map((v) => ({
    ...(stats.get(v.id) ?? {
      registryId: v.id,
      name: v.name,
      asked: 0,
      answered: 0,
      timeouts: 0,
      coverage: 0,
      agreement: 0,
      meanLatencyMs: null,
      drift: 0,
    }),
    name: v.name,
    trust: v.trust,
    excluded: v.excluded,
    excludedReason: v.excludedReason,
  }));
  return [...fromRegistry, ...(await peerValidatorRows(db, agentId, rows, stats))];
}

/**
 * The peers that validated in those ticks (their records name the peer): trust is the agent's
 * trust in the peer now; below the exclusion threshold it is no longer asked.
 */
async function peerValidatorRows(
  db: Db,
  agentId: string,
  rows: ReadonlyArray<{ validators: ValidatorVote[] }>,
  stats: Map<number, ValidatorStats>,
): Promise<ValidatorReportRow[]> {
  const peerOf = new Map<number, string>();
  for (const r of rows)
    for (const v of r.validators)
      if (v.peer !== undefined && v.registryId !== undefined) peerOf.set(v.registryId, v.peer);
  if (peerOf.size === 0) return [];
  const links = await db
    .select()
    .from(agentPeers)
    .where(and(eq(agentPeers.agentId, agentId), inArray(agentPeers.peerAgentId, [...new Set(peerOf.values())])));
  const trustOf = new Map(links.map((l) => [l.peerAgentId, l.trust]));
  return [...peerOf.entries()]
    .sort(([a], [b]) => a - b)
    .map(([registryId, peer]) => {
      const trust = trustOf.get(peer) ?? 0;
      const excluded = trust < defaultTrustPolicy.exclude;
      return {
        ...stats.get(registryId)!,
        name: `peer ${peer}`,
        trust,
        excluded,
        excludedReason: excluded ? `trust ${trust} below ${defaultTrustPolicy.exclude}: no longer asked` : null,
      };
    });
}

export function formatValidatorReport(agentId: string, rows: readonly ValidatorReportRow[]): string {
  if (rows.length === 0) return `agent ${agentId}: no validators (validation mode auto_pass)`;
  const head = ['id', 'name', 'trust', 'asked', 'coverage', 'agreement', 'latency', 'drift', 'timeouts', 'state'];
  const body = rows.map((r) => [
    String(r.registryId),
    r.name,
    r.trust.toFixed(2),
    String(r.asked),
    `${Math.round(r.coverage * 100)}%`,
    `${Math.round(r.agreement * 100)}%`,
    r.meanLatencyMs === null ? '-' : `${r.meanLatencyMs} ms`,
    `${r.drift >= 0 ? '+' : ''}${r.drift.toFixed(2)}`,
    String(r.timeouts),
    r.excluded ? `excluded: ${r.excludedReason ?? ''}` : 'active',
  ]);
  return table(head, body, '').join('\n');
}

export function registerValidatorCommands(program: Command): void {
  registerValidatorStats(program);
  registerUnvalidated(program);
  registerFacts(program);
  registerMemoryRestore(program);
}

/** `mindloop validators <agent>`. */
function registerValidatorStats(program: Command): void {
  program
    .command('validators')
    .description('per validator: trust, coverage, agreement with the consensus, response time, drift')
    .argument('<agent>', 'agent id', agentIdArg)
    .option('--ticks <n>', 'look at the last n ticks', numberArg('--ticks', 1, 100_000), 200)
    .option('--json', 'print JSON')
    .action(async (agentId: string, opts: { ticks: number; json?: boolean }) => {
      const rows = await withDb((db) => validatorReport(db, agentId, opts.ticks));
      process.stdout.write(`${opts.json ? JSON.stringify(rows, null, 2) : formatValidatorReport(agentId, rows)}\n`);
    });
}

/** `mindloop unvalidated list|approve|reject|auto-pass`: the commands held back and a human's answer to them. */
function registerUnvalidated(program: Command): void {
  const unvalidated = program
    .command('unvalidated')
    .description(
      'commands kept but not run (below their rating threshold, a tie, an ethics policy, or destructive with no validator); approve or reject them',
    );
  unvalidated
    .command('list', { isDefault: true })
    .description('the held commands, newest first (also: `mindloop unvalidated <agent>`)')
    .argument('<agent>', 'agent id', agentIdArg)
    .option('--limit <n>', 'newest n', numberArg('--limit', 1, 10_000), 50)
    .option('--json', 'print JSON')
    .action(async (agentId: string, opts: { limit: number; json?: boolean }) => {
      const rows = await withDb((db) => listUnvalidated(db, agentId, opts.limit));
      if (opts.json)
        process.stdout.write(
          `${JSON.stringify(
            rows.map(({ args: _args, ...r }) => r),
            null,
            2,
          )}\n`,
        );
      else if (rows.length === 0) process.stdout.write(`agent ${agentId}: no unvalidated commands\n`);
      else
        for (const r of rows)
          process.stdout.write(`#${r.id}  tick ${r.tick}  ${r.cmdId}  ${r.type}  ${r.reason ?? ''}\n`);
    });
  for (const verb of ['approve', 'reject'] as const) {
    unvalidated
      .command(verb)
      .description(
        verb === 'approve' ? 'run a held command once, as approved by you' : 'refuse a held command: it never runs',
      )
      .argument('<agent>', 'agent id', agentIdArg)
      .argument(
        '<id>',
        "the command's # in `mindloop unvalidated <agent>`",
        numberArg('<id>', 1, Number.MAX_SAFE_INTEGER),
      )
      .option('--by <name>', 'who decides (recorded with the command)', 'human:cli')
      .option('--reason <text>', 'why (reject)')
      .action(async (agentId: string, id: number, opts: { by: string; reason?: string }) => {
        const r = await withDb((db) =>
          verb === 'approve'
            ? approveUnvalidated(db, { agentId, id, by: opts.by })
            : rejectUnvalidated(db, { agentId, id, by: opts.by, ...(opts.reason ? { reason: opts.reason } : {}) }),
        );
        if (!r.ok) {
          process.stdout.write(`${r.error}\n`);
          process.exitCode = 1;
          return;
        }
        const o = r.outcome;
        const effects = o.effects.map((e) => e.kind);
        process.stdout.write(
          `#${id} ${o.type}: ${o.status}${o.duplicate ? ' (already approved)' : ''} — ${o.message}${effects.length ? ` (loop effects the agent loop applies, not run here: ${effects.join(', ')})` : ''}\n`,
        );
        if (verb === 'approve' && o.status !== 'applied') process.exitCode = 1;
      });
  }
  unvalidated
    .command('auto-pass')
    .description(
      'with no validator, run destructive commands (deletes, shell, config.set) instead of holding them: on|off (config auto_pass_destructive)',
    )
    .argument('<agent>', 'agent id', agentIdArg)
    .argument('<on|off>', 'on or off', (raw: string) => {
      if (raw !== 'on' && raw !== 'off') throw new InvalidArgumentError(`expected on or off, got "${raw}"`);
      return raw === 'on';
    })
    .action(async (agentId: string, on: boolean) => {
      await withDb((db) =>
        db
          .insert(agentConfig)
          .values({
            agentId,
            key: 'auto_pass_destructive',
            value: on,
            description: configKeys.auto_pass_destructive.help,
          })
          .onConflictDoUpdate({ target: [agentConfig.agentId, agentConfig.key], set: { value: on } }),
      );
      process.stdout.write(`agent ${agentId}: auto_pass_destructive ${on ? 'on' : 'off'}\n`);
    });
}

/** `mindloop facts` and `mindloop fact-resolve`: the low-confidence facts and a fact-check's outcome. */
function registerFacts(program: Command): void {
  const factStatuses = ['pending', 'verified', 'rejected'] as const;
  program
    .command('facts')
    .description('facts the agent gave with confidence < 0.7 (unverified_facts) and their fact-check state')
    .argument('<agent>', 'agent id', agentIdArg)
    .option(
      '--status <s>',
      `${factStatuses.join('|')}|all`,
      (raw: string) => {
        if (raw !== 'all' && !(factStatuses as readonly string[]).includes(raw))
          throw new InvalidArgumentError(`--status must be one of ${factStatuses.join(', ')}, all; got "${raw}"`);
        return raw;
      },
      'pending',
    )
    .option('--json', 'print JSON')
    .action(async (agentId: string, opts: { status: string; json?: boolean }) => {
      const rows = await withDb((db) =>
        db
          .select({
            id: unverifiedFacts.id,
            fact: unverifiedFacts.fact,
            confidence: unverifiedFacts.confidence,
            status: unverifiedFacts.status,
            sourceTick: unverifiedFacts.sourceTick,
            taskId: unverifiedFacts.taskId,
            resolution: unverifiedFacts.resolution,
          })
          .from(unverifiedFacts)
          .where(
            and(
              eq(unverifiedFacts.agentId, agentId),
              ...(opts.status === 'all'
                ? []
                : [eq(unverifiedFacts.status, opts.status as (typeof factStatuses)[number])]),
            ),
          )
          .orderBy(desc(unverifiedFacts.id)),
      );
      if (opts.json) process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
      else if (rows.length === 0)
        process.stdout.write(`agent ${agentId}: no ${opts.status === 'all' ? '' : `${opts.status} `}facts\n`);
      else
        for (const r of rows)
          process.stdout.write(
            `#${r.id}  ${r.status}  confidence ${r.confidence}  tick ${r.sourceTick ?? '-'}  task ${r.taskId ?? '-'}  ${r.fact}${r.resolution ? `  -- ${r.resolution}` : ''}\n`,
          );
    });

  program
    .command('fact-resolve')
    .description("record a fact-check's outcome (verified|rejected) and close its task")
    .argument('<agent>', 'agent id', agentIdArg)
    .argument('<id>', 'unverified_facts id', numberArg('<id>', 1, Number.MAX_SAFE_INTEGER))
    .argument('<outcome>', 'verified|rejected', (raw: string) => {
      if (raw !== 'verified' && raw !== 'rejected')
        throw new InvalidArgumentError(`outcome must be verified or rejected, got "${raw}"`);
      return raw;
    })
    .argument('<resolution...>', 'what the check found')
    .action(async (agentId: string, factId: number, outcome: 'verified' | 'rejected', resolution: string[]) => {
      const r = await withDb((db) =>
        resolveFact(db, { agentId, factId, status: outcome, resolution: resolution.join(' ') }),
      );
      process.stdout.write(r.ok ? `fact #${factId} ${outcome}\n` : `no fact #${factId} for ${agentId}\n`);
      if (!r.ok) process.exitCode = 1;
    });
}

/** `mindloop memory-restore <agent> <table> <id>`. */
function registerMemoryRestore(program: Command): void {
  program
    .command('memory-restore')
    .description('restore a row the memory manager (or a delete command) archived')
    .argument('<agent>', 'agent id', agentIdArg)
    .argument('<table>', restorableTables.join('|'), (raw: string) => {
      if (!(restorableTables as readonly string[]).includes(raw))
        throw new InvalidArgumentError(`table must be one of ${restorableTables.join(', ')}, got "${raw}"`);
      return raw as RestoreInput['table'];
    })
    .argument('<id>', 'row id', numberArg('<id>', 1, Number.MAX_SAFE_INTEGER))
    .action(async (agentId: string, table: RestoreInput['table'], id: number) => {
      const r = await withDb((db) => restoreArchived(db, { agentId, table, id }));
      process.stdout.write(
        r.restored ? `restored ${table} #${id}\n` : `${table} #${id} is not archived (or not ${agentId}'s)\n`,
      );
      if (!r.restored) process.exitCode = 1;
    });
}
