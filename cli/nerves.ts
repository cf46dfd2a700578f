/**
 * `mindloop nerves <agent>` (also `nerves show <agent>`): each nerve the agent has used — the mode
 * its rules have earned, its rules, how its decisions were made, and its last promotions,
 * demotions and undos with their ids; `nerves undo <agent> <event>` reverses a promotion or a
 * demotion. Both read and write Postgres only (db/queries/nerves.ts): a running nerve picks an
 * undo up at its next decision (in reflex, when its arc is armed again).
 */
import type { Command } from 'commander';
import { eq } from 'drizzle-orm';
import { defaultLearning, modeOf, type NerveMode } from '../core/nerves/modes.js';
import { nerveNames } from '../core/nerves/index.js';
import type { Db } from '../db/client.js';
import {
  loadLearner,
  nerveDecisionCounts,
  nerveRuleEventRows,
  nerveRuleRows,
  undoRuleEvent,
  type NerveDecisionCount,
} from '../db/queries/nerves.js';
import { nerveRuleEvents, type NerveRuleEventRow, type NerveRuleRow } from '../db/schema/nerves.js';
import { agentIdArg, numberArg, oneOfArg } from './args.js';
import { table } from './table.js';
import { requireAgent, withDb } from './client.js';

const out = (s: string): void => {
  process.stdout.write(`${s}\n`);
};

interface NerveShow {
  nerve: string;
  /** The mode its rules have earned (default learning settings). */
  mode: NerveMode;
  rules: NerveRuleRow[];
  decisions: NerveDecisionCount[];
  events: NerveRuleEventRow[];
}

/** The agent's nerves that have decided or learned anything (all of them with `nerve` unset). */
async function showNerves(
  db: Db,
  agentId: string,
  opts: { nerve?: string; events?: number } = {},
): Promise<NerveShow[]> {
  await requireAgent(db, agentId);
  const shown: NerveShow[] = [];
  for (const nerve of opts.nerve ? [opts.nerve] : nerveNames) {
    const [rules, decisions, events, learner] = await Promise.all([
      nerveRuleRows(db, agentId, nerve),
      nerveDecisionCounts(db, agentId, nerve),
      nerveRuleEventRows(db, agentId, nerve, opts.events ?? 10),
      loadLearner(db, agentId, nerve, defaultLearning.window),
    ]);
    if (rules.length || decisions.length || opts.nerve)
      shown.push({ nerve, mode: modeOf(learner, defaultLearning), rules, decisions, events });
  }
  return shown;
}

const pct = (x: number) => `${Math.round(x * 100)}%`;

function describeEventRow(e: NerveRuleEventRow, undone: Set<number>): string {
  const what = `${e.state}/${e.bucket} → ${e.action}`;
  if (e.kind === 'undo') return `undo of #${e.undoes ?? '?'} (${what})`;
  const tail = undone.has(e.id) ? ' (undone)' : '';
  return e.kind === 'promote'
    ? `promoted ${what} (${e.support} choices, ${pct(e.agreement)} agreed)${tail}`
    : `demoted ${what}: a decision it made went wrong${tail}`;
}

/** Render `nerves show` for a person. */
function formatNerves(agentId: string, shown: NerveShow[]): string {
  if (shown.length === 0)
    return `agent ${agentId} has no nerve that decided anything yet (the agent's command \`nerve.start\` starts one)`;
  const lines: string[] = [];
  for (const n of shown) {
    const ruled = n.rules.filter((r) => r.action !== null);
    lines.push(
      `nerve ${n.nerve} of agent ${agentId}: earned mode ${n.mode}, ${ruled.length} rule${ruled.length === 1 ? '' : 's'} over ${n.rules.length} case${n.rules.length === 1 ? '' : 's'} seen`,
    );
    if (n.decisions.length) {
      lines.push('', '  decisions:');
      lines.push(
        ...table(
          ['mode', 'decided by', 'decisions', 'bad', 'LF'],
          n.decisions.map((d) => [
            d.mode,
            d.decidedBy,
            String(d.decisions),
            String(d.bad),
            String(Math.round(d.lf * 10_000) / 10_000),
          ]),
        ).map((l) => `  ${l}`),
      );
    }
    if (ruled.length) {
      lines.push('', '  rules:');
      lines.push(
        ...table(
          ['state', 'bucket', 'action', 'support', 'agreement', 'promoted'],
          ruled.map((r) => [
            r.state,
            r.bucket,
            r.action!,
            String(r.support),
            pct(r.agreement),
            r.promotedAt?.toISOString() ?? '-',
          ]),
        ).map((l) => `  ${l}`),
      );
    }
    if (n.events.length) {
      const undone = new Set(n.events.filter((e) => e.kind === 'undo' && e.undoes !== null).map((e) => e.undoes!));
      lines.push(
        '',
        `  last ${n.events.length} events (newest first; \`mindloop nerves undo ${agentId} <id>\` reverses a promotion or a demotion):`,
      );
      lines.push(
        ...table(
          ['id', 'time', 'event'],
          n.events.map((e) => [`#${e.id}`, e.createdAt.toISOString(), describeEventRow(e, undone)]),
        ).map((l) => `  ${l}`),
      );
    }
    lines.push('');
  }
  return lines.join('\n').trimEnd();
}

/** Reverse one promotion or demotion of the agent's nerves; what the user is told. */
async function undoNerveEvent(db: Db, agentId: string, eventId: number): Promise<string> {
  await requireAgent(db, agentId);
  const [event] = await nerveEventOf(db, eventId);
  if (event && event.agentId !== agentId)
    throw new Error(`nerve event #${eventId} belongs to agent ${event.agentId}, not ${agentId}`);
  const r = await undoRuleEvent(db, eventId);
  if (!r.ok) throw new Error(r.reason);
  const e = r.event;
  const what = `${e.state}/${e.bucket} → ${e.action}`;
  return `undid the ${e.kind === 'promote' ? 'promotion' : 'demotion'} of ${what} (undo #${r.undoId}): ${e.kind === 'promote' ? 'the LLM decides that case again' : 'the rule decides that case again'}`;
}

function nerveEventOf(db: Db, eventId: number): Promise<NerveRuleEventRow[]> {
  return db.select().from(nerveRuleEvents).where(eq(nerveRuleEvents.id, eventId));
}

export function registerNerveCommands(program: Command): void {
  const nerves = program
    .command('nerves')
    .description("an agent's nerves: their earned mode, rules, decisions and learning events; undo one");

  nerves
    .command('show', { isDefault: true })
    .description(
      'per nerve: the mode its rules have earned, its rules, its decisions by mode and decider, the last promotions, demotions and undos (also: `mindloop nerves <agent>`)',
    )
    .argument('<agent>', 'agent id', agentIdArg)
    .option('--nerve <name>', `only this nerve (${nerveNames.join(', ')})`, oneOfArg('--nerve', nerveNames))
    .option('--events <n>', 'how many events to list (1-500)', numberArg('--events', 1, 500))
    .option('--json', 'print JSON')
    .action(async (agentId: string, o: { nerve?: string; events?: number; json?: boolean }) => {
      const shown = await withDb((db) =>
        showNerves(db, agentId, { ...(o.nerve ? { nerve: o.nerve } : {}), ...(o.events ? { events: o.events } : {}) }),
      );
      out(o.json ? JSON.stringify(shown, null, 2) : formatNerves(agentId, shown));
    });

  nerves
    .command('undo')
    .description(
      'reverse a promotion (the LLM decides the case again) or a demotion (the rule comes back with its counts); refused when the case has moved on since',
    )
    .argument('<agent>', 'agent id', agentIdArg)
    .argument('<event>', 'the event id (`mindloop nerves <agent>` lists them, e.g. 12 or #12)', (raw: string) =>
      numberArg('<event>', 1, Number.MAX_SAFE_INTEGER)(raw.replace(/^#/, '')),
    )
    .action(async (agentId: string, eventId: number) => {
      out(await withDb((db) => undoNerveEvent(db, agentId, eventId)));
    });
}
