/**
 * `mindloop escalations list|show|approve|reject|nudge|veto` and `mindloop metrics <agent>`.
 * Reads come from Postgres; human answers go to the escalation workflow as Temporal updates
 * (the workflow's validators answer: already decided, missing reason…).
 */
import type { Command } from 'commander';
import { and, asc, desc, eq, type SQL } from 'drizzle-orm';
import { escalationMetrics, formatMetrics } from '../db/queries/escalation-metrics.js';
import { decisionLog, escalations, escalationStatuses, partnershipMessages } from '../db/schema/index.js';
import { answerEscalation, escalationIdSchema, type EscalationAnswer } from '../runtime/operator.js';
import { requireAgent, withClient, withDb } from './client.js';
import { agentIdArg, numberArg, oneOfArg, schemaArg } from './args.js';

const escalationId = schemaArg('escalation id', escalationIdSchema);
const agent = agentIdArg;
const status = oneOfArg('status', escalationStatuses);
const limit = numberArg('--limit', 1, 500);

/** Send one human answer to `escalation/<id>`; print what the workflow now says. */
async function answer(id: string, name: EscalationAnswer, arg: Record<string, unknown>, json?: boolean): Promise<void> {
  const s = await withClient((client) => answerEscalation(client, id, name, arg));
  process.stdout.write(
    json
      ? `${JSON.stringify(s, null, 2)}\n`
      : `${name}: escalation ${id} — phase ${s.phase}${s.human ? `, human ${s.human.verdict} by ${s.human.by}` : ''}\n`,
  );
}

export function registerEscalationCommands(program: Command): void {
  const esc = program.command('escalations').description('escalations to the oversight and the human tiers');

  esc
    .command('list')
    .description('recent escalations (newest first)')
    .option('--agent <id>', 'only this agent', agent)
    .option('--status <status>', `only this status (${escalationStatuses.join(', ')})`, status)
    .option('--limit <n>', 'how many (1..500)', limit, 20)
    .option('--json', 'print JSON')
    .action(
      async (o: { agent?: string; status?: (typeof escalationStatuses)[number]; limit: number; json?: boolean }) => {
        const list = await withDb((db) => {
          const conds: SQL[] = [];
          if (o.agent) conds.push(eq(escalations.agentId, o.agent));
          if (o.status) conds.push(eq(escalations.status, o.status));
          return db
            .select()
            .from(escalations)
            .where(and(...conds))
            .orderBy(desc(escalations.createdAt))
            .limit(o.limit);
        });
        if (o.json) process.stdout.write(`${JSON.stringify(list, null, 2)}\n`);
        else if (!list.length) process.stdout.write('no escalations\n');
        else
          process.stdout.write(
            `${list.map((e) => `${e.id}  ${e.agentId}  ${e.category}  ${e.status}${e.decidedBy ? ` (${e.decidedBy})` : ''}  ${e.task.slice(0, 80)}`).join('\n')}\n`,
          );
      },
    );

  esc
    .command('show')
    .description('one escalation: the question, the answers, the decision log and the messages')
    .argument('<id>', 'escalation id', escalationId)
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      const data = await withDb(async (db) => {
        const [e] = await db.select().from(escalations).where(eq(escalations.id, id));
        if (!e) throw new Error(`no escalation ${id}`);
        const decisions = await db.select().from(decisionLog).where(eq(decisionLog.escalationId, id));
        const messages = await db
          .select()
          .from(partnershipMessages)
          .where(eq(partnershipMessages.escalationId, id))
          .orderBy(asc(partnershipMessages.id));
        return { escalation: e, decisions, messages };
      });
      if (o.json) return void process.stdout.write(`${JSON.stringify(data, null, 2)}\n`);
      const { escalation: e, decisions, messages } = data;
      const d = decisions[0];
      process.stdout.write(
        [
          `escalation ${e.id} — agent ${e.agentId}, ${e.category}, ${e.status}${e.decidedBy ? ` (decided by ${e.decidedBy})` : ''}`,
          `  task        ${e.task}`,
          `  tried       ${e.whatITried ?? '-'}`,
          `  deadline    ${e.deadlineAt?.toISOString() ?? '-'}`,
          `  solution    ${e.solution ?? '-'}`,
          `  teaching    ${e.teachingMoment ?? '-'}`,
          `  granted     ${e.grantedTools.join(', ') || '-'}`,
          d
            ? `  decision    oversight ${d.oversightAnswer}, human ${d.humanAnswer}, outcome ${d.outcome}${d.dangerFlags.length ? `, danger ${d.dangerFlags.join(', ')}` : ''}`
            : '  decision    -',
          ...messages.map(
            (m) =>
              `  [${m.createdAt.toISOString()}] ${m.fromTier} → ${m.toTier} (${m.kind}): ${m.body.split('\n')[0]!.slice(0, 120)}`,
          ),
        ].join('\n') + '\n',
      );
    });

  esc
    .command('approve')
    .description('approve (beats the oversight)')
    .argument('<id>', 'escalation id', escalationId)
    .option('--by <name>', 'who answers', 'human')
    .option('--comment <text>', 'a comment for the agent')
    .option('--json', 'print JSON')
    .action((id: string, o: { by: string; comment?: string; json?: boolean }) =>
      answer(id, 'approve', { by: o.by, ...(o.comment ? { comment: o.comment } : {}) }, o.json),
    );
  esc
    .command('reject')
    .description('reject, with a reason')
    .argument('<id>', 'escalation id', escalationId)
    .requiredOption('--reason <text>', 'why')
    .option('--by <name>', 'who answers', 'human')
    .option('--json', 'print JSON')
    .action((id: string, o: { by: string; reason: string; json?: boolean }) =>
      answer(id, 'reject', { by: o.by, reason: o.reason }, o.json),
    );
  esc
    .command('nudge')
    .description('nudge: guidance instead of approval (a learning moment for the agent)')
    .argument('<id>', 'escalation id', escalationId)
    .argument('<text...>', 'the nudge')
    .option('--by <name>', 'who answers', 'human')
    .option('--json', 'print JSON')
    .action((id: string, words: string[], o: { by: string; json?: boolean }) =>
      answer(id, 'nudge', { by: o.by, text: words.join(' ') }, o.json),
    );
  esc
    .command('veto')
    .description('veto: beats everything, an oversight approval included')
    .argument('<id>', 'escalation id', escalationId)
    .requiredOption('--reason <text>', 'why')
    .option('--by <name>', 'who answers', 'human')
    .option('--json', 'print JSON')
    .action((id: string, o: { by: string; reason: string; json?: boolean }) =>
      answer(id, 'veto', { by: o.by, reason: o.reason }, o.json),
    );

  program
    .command('metrics')
    .description(
      'escalation metrics: catalogue growth, escalation rate per task, discovery rate, first-try validation of designed tools',
    )
    .argument('<agent>', 'agent id', agent)
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      const m = await withDb(async (db) => {
        await requireAgent(db, id);
        return escalationMetrics(db, id);
      });
      process.stdout.write(o.json ? `${JSON.stringify(m, null, 2)}\n` : `${formatMetrics(m)}\n`);
    });
}
