/**
 * `mindloop lifeforce <agent>` (also `lifeforce show <agent>`): the agent's budget, its burn
 * rate and last ledger entries, and its child budgets; `lifeforce grant <agent> <LF>` and
 * `lifeforce set <agent> --capacity …`: an operator's grant and settings. Both write through
 * db/queries/lifeforce.ts, then wake the agent's loop (`wake` signal to `agent/<id>`); a loop
 * that is not running, or a Temporal that does not answer, leaves the change stored all the same.
 * A setting or grant under which the agent cannot think is stored too, with a warning that says
 * what one think reserves and what lets it think.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import { InvalidArgumentError, type Command } from 'commander';
import { asc, eq } from 'drizzle-orm';
import {
  available,
  budgetIds,
  exhaustedPolicies,
  lifeforceNeeds,
  regenerate,
  thinkReservation,
  type ExhaustedPolicy,
} from '../core/lifeforce.js';
import { workflowIds } from '../core/ids.js';
import type { Db } from '../db/client.js';
import { loadEnvOrExit } from '../env.js';
import {
  budgetReport,
  configureBudget,
  grantLifeforce,
  stateOf,
  type BudgetConfig,
  type BudgetReport,
} from '../db/queries/lifeforce.js';
import { thinkBasis } from '../db/queries/think-basis.js';
import { lifeforceBudgets, type LifeforceBudget } from '../db/schema/index.js';
import { formatDuration } from '../workflows/lib/ui-text.js';
import { oneLine } from '../core/sanitize.js';
import { agentIdArg, oneOfArg } from './args.js';
import { fmtLf, thinkWarning } from './lifeforce-text.js';
import { table } from './table.js';
import { requireAgent, withClient, withDb } from './client.js';

/** The largest amount one flag may name (the ledger's numeric(14,4) holds less than 1e10). */
const maxLf = 1e9;

const out = (s: string): void => {
  process.stdout.write(`${s}\n`);
};

/**
 * An LF amount for `flag`: a finite number in range, or one of `words` (unlimited, none) kept as
 * the word, since commander stores a parser's null as ''; `configOf` turns the word into null.
 */
function lfArg<const W extends string = never>(flag: string, opts: { positive?: boolean; words?: readonly W[] } = {}) {
  const words: readonly string[] = opts.words ?? [];
  return (raw: string): number | W => {
    if (words.includes(raw)) return raw as W;
    const n = raw.trim() === '' ? Number.NaN : Number(raw);
    if (!Number.isFinite(n) || (opts.positive ? n <= 0 : n < 0) || n > maxLf) {
      const range = `a number ${opts.positive ? '> 0' : '>= 0'} and <= ${maxLf}`;
      throw new InvalidArgumentError(
        `${flag} must be ${range}${words.length ? ` or ${words.join(' / ')}` : ''}, got "${raw}"`,
      );
    }
    return n;
  };
}

const priorityArg = (raw: string): number | 'auto' => {
  if (raw === 'auto') return raw;
  if (!/^[1-5]$/.test(raw)) throw new InvalidArgumentError(`--priority must be 1, 2, 3, 4, 5 or auto, got "${raw}"`);
  return Number(raw);
};

/** A flag's number, or null for its word (unlimited, none, auto); undefined when not given. */
const numberOrNull = (v: number | string | undefined): number | null | undefined =>
  v === undefined ? undefined : typeof v === 'number' ? v : null;

interface LifeforceShow {
  report: BudgetReport;
  children: LifeforceBudget[];
}

/** The agent's child budgets (task loops, campaigns, forks, nerves, escalations), open or closed. */
async function childBudgets(db: Db, parentId: string): Promise<LifeforceBudget[]> {
  return db
    .select()
    .from(lifeforceBudgets)
    .where(eq(lifeforceBudgets.parentId, parentId))
    .orderBy(asc(lifeforceBudgets.createdAt), asc(lifeforceBudgets.id));
}

/** The agent's budget as `lifeforce show` prints it; a clear error when the agent or its budget is missing. */
async function showLifeforce(db: Db, agentId: string): Promise<LifeforceShow> {
  const id = budgetIds.agent(agentId);
  const report = await budgetReport(db, id, { entries: 10 });
  if (!report) {
    await requireAgent(db, agentId);
    throw new Error(
      `agent ${agentId} has no lifeforce budget yet (its loop creates one, unlimited, at its first tick; \`mindloop lifeforce set ${agentId} --capacity <LF>\` sets one up now)`,
    );
  }
  return { report, children: await childBudgets(db, id) };
}

const envelope = (limit: number | null, used: number, window: string): string =>
  limit === null ? 'no limit' : `${fmtLf(used)} used of ${fmtLf(limit)} (${window})`;

/** Render `lifeforce show` for a person. */
function formatLifeforce(agentId: string, { report, children }: LifeforceShow, now = Date.now()): string {
  const b = report.budget;
  const lines = [
    `lifeforce of agent ${agentId} — budget ${b.id}${b.closedAt ? ` (closed ${b.closedAt.toISOString()})` : ''}`,
    `  capacity      ${fmtLf(b.capacity)}`,
    `  available     ${fmtLf(report.available)}`,
    `  reserved      ${fmtLf(b.reserved)}`,
    `  spent         ${fmtLf(b.spent)} (funded ${fmtLf(b.funded)})`,
    `  regeneration  ${b.regenPerHour > 0 ? `${fmtLf(b.regenPerHour)} per hour` : 'none'}`,
    `  daily         ${envelope(b.dailyLimit, b.dailyUsed, b.dailyWindow)}`,
    `  monthly       ${envelope(b.monthlyLimit, b.monthlyUsed, b.monthlyWindow)}`,
    `  burn rate     ${fmtLf(report.burnPerHour)} per hour (settled in the last hour)`,
    `  exhaustion    ${report.hoursToExhaustion === null ? 'never' : `in ${formatDuration(report.hoursToExhaustion * 3_600_000)} at this rate`}`,
    `  on exhausted  ${b.onExhausted}${b.onExhausted === 'escalate' ? ` (asks for ${fmtLf(b.askFor)})` : ''}`,
    `  priority      ${b.priority ?? 'auto (from the lifeforce left)'}`,
    `  exhausted     ${b.exhaustedAt ? `yes, since ${b.exhaustedAt.toISOString()}` : 'no'}`,
  ];
  lines.push(
    '',
    report.recent.length ? `last ${report.recent.length} ledger entries (newest first):` : 'no ledger entries yet',
  );
  if (report.recent.length) {
    const rows = report.recent.map((e) => [
      e.createdAt.toISOString(),
      e.kind,
      fmtLf(e.amount),
      e.operation ?? '-',
      oneLine(e.reason ?? '-', 70),
    ]);
    lines.push(...table(['time', 'kind', 'amount', 'operation', 'reason'], rows));
  }
  if (children.length) {
    lines.push('', `child budgets (${children.length}):`);
    const rows = children.map((c) => {
      const state = regenerate(stateOf(c), now);
      return [
        c.id,
        c.scope,
        fmtLf(c.capacity),
        fmtLf(c.closedAt ? 0 : available(state)),
        fmtLf(c.reserved),
        fmtLf(c.spent),
        c.closedAt ? `closed ${c.closedAt.toISOString()}` : 'open',
      ];
    });
    lines.push(...table(['id', 'scope', 'capacity', 'available', 'reserved', 'spent', 'state'], rows));
  } else lines.push('', 'no child budgets');
  return lines.join('\n');
}

/**
 * Wake `agent/<id>` so a loop waiting for lifeforce tries again now. The change is stored
 * before this: a loop that is not running, or a Temporal that does not answer, only means no
 * wake; the loop reads its budget at its next check. Returns what happened, for the user.
 */
async function wakeAgent(agentId: string): Promise<{ signalled: boolean; message: string }> {
  const workflowId = workflowIds.agent(agentId);
  try {
    await withClient((client) => client.workflow.getHandle(workflowId).signal('wake', { reason: 'lifeforce' }));
    return { signalled: true, message: `woke ${workflowId}` };
  } catch (err) {
    const why = err instanceof WorkflowNotFoundError ? `${workflowId} is not running` : (err as Error).message;
    return {
      signalled: false,
      message: `agent ${agentId} not signalled (${why}): the change is stored all the same; the loop reads it at its next budget check`,
    };
  }
}

/**
 * The warning for an agent whose budget, as it is now, cannot cover its next think (or whose
 * capacity never could): what one think reserves, from its model, output cap and last prompt,
 * and the smallest grant, capacity or limit that lets it think. null when it can think.
 */
async function thinkShortfall(db: Db, agentId: string, at = Date.now()): Promise<string | null> {
  const [row] = await db
    .select()
    .from(lifeforceBudgets)
    .where(eq(lifeforceBudgets.id, budgetIds.agent(agentId)));
  if (!row) return null;
  const known = await thinkBasis(db, agentId);
  const reserves = thinkReservation(loadEnvOrExit().MINDLOOP_LIFEFORCE_PRICES, known.basis);
  if (reserves === null) return null;
  return thinkWarning(
    agentId,
    reserves,
    { model: known.model, maxTokens: known.basis.maxTokens, promptTick: known.promptTick },
    lifeforceNeeds(stateOf(row), reserves, at),
  );
}

function warn(line: string | null): void {
  if (line) process.stderr.write(`${line}\n`);
}

function reportWake(w: { signalled: boolean; message: string }): void {
  if (w.signalled) out(w.message);
  else process.stderr.write(`${w.message}\n`);
}

interface GrantOpts {
  reason?: string;
  budget?: string;
  by?: string;
}

/** Check the agent and the budget to grant to, then grant; what the user is told, and a warning when the agent still cannot think. */
async function grant(
  db: Db,
  agentId: string,
  amount: number,
  o: GrantOpts,
): Promise<{ said: string; warning: string | null }> {
  await requireAgent(db, agentId);
  const budgetId = o.budget ?? budgetIds.agent(agentId);
  const [row] = await db.select().from(lifeforceBudgets).where(eq(lifeforceBudgets.id, budgetId));
  if (!row) {
    if (o.budget)
      throw new Error(`no lifeforce budget ${budgetId} (\`mindloop lifeforce ${agentId}\` lists the agent's budgets)`);
    throw new Error(
      `agent ${agentId} has no lifeforce budget yet (its loop creates one at its first tick; \`mindloop lifeforce set ${agentId} --capacity <LF>\` sets one up now)`,
    );
  }
  if (row.agentId !== agentId) throw new Error(`budget ${budgetId} belongs to agent ${row.agentId}, not ${agentId}`);
  if (row.closedAt)
    throw new Error(
      `budget ${budgetId} is closed (${row.closedAt.toISOString()}): grant to the agent's budget instead`,
    );
  const reason = o.reason ?? 'granted from the CLI';
  await grantLifeforce(db, { budgetId, amount, key: `cli:${randomUUID()}`, reason, ...(o.by ? { by: o.by } : {}) });
  const after = await budgetReport(db, budgetId, { entries: 0 });
  const said = `granted ${fmtLf(amount)} to ${budgetId}${o.by ? ` (by ${o.by})` : ''}: available now ${fmtLf(after?.available ?? null)}${row.capacity === null ? ' (the budget is unlimited: the grant only adds to its funding)' : ''}`;
  // A child's budget pays for other work than the agent's think.
  return { said, warning: budgetId === budgetIds.agent(agentId) ? await thinkShortfall(db, agentId) : null };
}

interface SetOpts {
  capacity?: number | 'unlimited';
  regen?: number;
  daily?: number | 'none';
  monthly?: number | 'none';
  onExhausted?: ExhaustedPolicy;
  askFor?: number;
  priority?: number | 'auto';
}

/** The settings the flags name (only those given). */
function configOf(o: SetOpts): BudgetConfig {
  const cfg: BudgetConfig = {
    capacity: numberOrNull(o.capacity),
    regenPerHour: o.regen,
    dailyLimit: numberOrNull(o.daily),
    monthlyLimit: numberOrNull(o.monthly),
    onExhausted: o.onExhausted,
    askFor: o.askFor,
    priority: numberOrNull(o.priority),
  };
  return Object.fromEntries(Object.entries(cfg).filter(([, v]) => v !== undefined));
}

function formatSettings(b: LifeforceBudget): string {
  const limit = (n: number | null) => fmtLf(n, 'none');
  return `${b.id}: capacity ${fmtLf(b.capacity)}, regeneration ${fmtLf(b.regenPerHour)} per hour, daily ${limit(b.dailyLimit)}, monthly ${limit(b.monthlyLimit)}, on exhausted ${b.onExhausted} (asks for ${fmtLf(b.askFor)}), priority ${b.priority ?? 'auto'}`;
}

export function registerLifeforceCommands(program: Command): void {
  const lifeforce = program
    .command('lifeforce')
    .description("an agent's lifeforce budget: show it, grant more, change its settings");

  lifeforce
    .command('show', { isDefault: true })
    .description(
      'capacity, available, reserved, spent, regeneration, envelopes, burn rate, time to exhaustion, the last ledger entries and the child budgets (also: `mindloop lifeforce <agent>`)',
    )
    .argument('<agent>', 'agent id', agentIdArg)
    .option('--json', 'print JSON')
    .action(async (agentId: string, o: { json?: boolean }) => {
      const shown = await withDb((db) => showLifeforce(db, agentId));
      out(
        o.json
          ? JSON.stringify({ ...shown.report, children: shown.children }, null, 2)
          : formatLifeforce(agentId, shown),
      );
    });

  lifeforce
    .command('grant')
    .description("add lifeforce to the agent's budget (or one of its child budgets) and wake its loop")
    .argument('<agent>', 'agent id', agentIdArg)
    .argument('<amount>', 'LF to add (> 0)', lfArg('<amount>', { positive: true }))
    .option('--reason <text>', 'why (recorded in the ledger)')
    .option('--budget <budgetId>', 'grant to this budget of the agent (default agent:<agent>)')
    .option('--by <name>', 'who grants (recorded in the ledger)')
    .action(async (agentId: string, amount: number, o: GrantOpts) => {
      const r = await withDb((db) => grant(db, agentId, amount, o));
      out(r.said);
      warn(r.warning);
      reportWake(await wakeAgent(agentId));
    });

  lifeforce
    .command('set')
    .description(
      "change the agent's budget settings (at least one option) and wake its loop; a new capacity refills the balance to it; warns when one think then cannot be covered",
    )
    .argument('<agent>', 'agent id', agentIdArg)
    .option(
      '--capacity <n|unlimited>',
      'the balance it holds (refilled to this now)',
      lfArg('--capacity', { words: ['unlimited'] }),
    )
    .option('--regen <n>', 'LF regenerated per hour, up to the capacity (0: none)', lfArg('--regen'))
    .option('--daily <n|none>', 'most LF per UTC day', lfArg('--daily', { words: ['none'] }))
    .option('--monthly <n|none>', 'most LF per UTC month', lfArg('--monthly', { words: ['none'] }))
    .option(
      '--on-exhausted <policy>',
      `when a reservation is refused: ${exhaustedPolicies.join(' | ')}`,
      oneOfArg('--on-exhausted', exhaustedPolicies),
    )
    .option(
      '--ask-for <n>',
      'the grant an escalation for more lifeforce asks for',
      lfArg('--ask-for', { positive: true }),
    )
    .option('--priority <1-5|auto>', 'task priority, 1 first (auto: from the lifeforce left)', priorityArg)
    .action(async function (this: Command, agentId: string, o: SetOpts) {
      const cfg = configOf(o);
      if (Object.keys(cfg).length === 0)
        this.error(
          'error: lifeforce set needs at least one of --capacity, --regen, --daily, --monthly, --on-exhausted, --ask-for, --priority',
          { exitCode: 2 },
        );
      // Stored even when the agent cannot think under it (the operator may mean it), with a warning.
      const { row, warning } = await withDb(async (db) => {
        await requireAgent(db, agentId);
        const stored = await configureBudget(db, agentId, cfg);
        return { row: stored, warning: await thinkShortfall(db, agentId) };
      });
      out(`set ${formatSettings(row)}`);
      warn(warning);
      reportWake(await wakeAgent(agentId));
    });
}
