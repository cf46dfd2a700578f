/**
 * `mindloop status <agent>`: the loop's execution and its status query. Where `npm start` serves
 * the notebook for the same Temporal cluster, the notebook answers it (cli/notebook-client.ts);
 * anything else (no notebook, another cluster, an error) falls back to asking Temporal directly,
 * as `--direct` always does.
 */
import type { Command } from 'commander';
import { goalMetricsSummary, type GoalMetrics } from '../core/goal-metrics.js';
import { embedderHealthLine, type EmbedderHealth } from '../db/queries/embedder-health.js';
import { loadEnvOrExit, type Env } from '../env.js';
import type { AgentLoopStatus } from '../runtime/operator.js';
import type { AgentStatus } from '../workflows/agent-loop/index.js';
import { agentIdArg } from './args.js';
import { needsClauses } from './lifeforce-text.js';
import { askNotebook } from './notebook-client.js';

/** Render the status query for a person. */
export function formatStatus(s: AgentStatus): string {
  const lines = [
    `agent ${s.agentId} — tick ${s.tick}, ${s.phase}${s.paused ? ' (paused)' : ''}, mode ${s.operatingMode}`,
    `  llm          ${s.llm ?? '(none yet)'}`,
    `  context      ${s.settings.contextMode}, last ${s.settings.recentK} responses; notes ${s.settings.notesMode}; delay ${s.settings.delayMs} ms${s.settings.idle.on ? `; idle until ${s.settings.idle.wakeOn.join('/')}` : ''}`,
    `  last reply   ${s.last ? `${s.last.summary} (${s.last.model})` : '(none yet)'}`,
    `  validation   ${s.lastVerdict ? `${s.lastVerdict.validationMode}${s.lastVerdict.rating === null ? '' : ` rating ${s.lastVerdict.rating}`}` : '-'}`,
    `  commands     ${s.counters.commandsApplied} applied, ${s.counters.commandsRejected} rejected, ${s.counters.commandsUnvalidated} unvalidated; parse errors ${s.counters.parseErrors}`,
    `  notes in     ${s.counters.notesReceived}; LLM failures ${s.counters.llmFailures}; outages ${s.counters.outages}`,
  ];
  if (s.reflexes) {
    const r = s.reflexes;
    lines.push(
      `  reflexes     novelty ${r.lastNovelty ?? '-'}; low streak ${r.lowStreak}; Reflex-lite ${r.reflexLiteFired}×, strategies ${r.strategiesFired}×; validator timeouts ${r.validatorTimeouts}`,
    );
    const held = Object.entries(r.held ?? {});
    if (held.length)
      lines.push(
        `  unvalidated  ${held.map(([id, why]) => `${id}: ${why}`).join('; ')}  (all: mindloop unvalidated ${s.agentId})`,
      );
  }
  const lf = s.lifeforce;
  if (lf) {
    const left =
      lf.available === null
        ? 'unlimited'
        : `${lf.available} LF available${lf.capacity !== null ? ` of ${lf.capacity}` : ''}`;
    lines.push(
      `  lifeforce    ${left}; last tick ${lf.lastCharge ?? '-'} LF; priority ${lf.priorityKey}; when exhausted: ${lf.onExhausted}  (mindloop lifeforce ${s.agentId})`,
    );
    const x = lf.exhausted;
    if (x) {
      const needs = x.needs ? needsClauses(s.agentId, lf.budgetId, x.needs) : [];
      const waiting =
        x.waitMs === null ? 'waiting for a grant' : `regeneration covers it in ${Math.ceil(x.waitMs / 60_000)} min`;
      lines.push(
        `  EXHAUSTED    since ${x.since}: ${x.needed} LF refused (${x.reason}); ${[...needs, waiting].join('; ')}${x.escalationId ? `; escalation ${x.escalationId} asks a human` : ''}`,
      );
    }
  }
  if (s.outage)
    lines.push(`  CORE OUTAGE  since ${s.outage.since}, ${s.outage.attempts} attempt(s): ${s.outage.lastError}`);
  const iso = s.isolation;
  if (iso?.since)
    lines.push(
      `  ISOLATED     since ${iso.since} (tick ${iso.sinceTick ?? '?'}): none of ${iso.known} known peer(s) reachable for ${iso.unreachableTicks} tick(s); applied commands tagged emergency_consensus`,
    );
  else if (iso && iso.known > 0)
    lines.push(
      `  peers        ${iso.reachable.length ? `reachable: ${iso.reachable.join(', ')}` : 'none reachable'} (${iso.known} known)${iso.unreachableTicks ? `; unreachable for ${iso.unreachableTicks} tick(s)` : ''}`,
    );
  if (s.degraded)
    lines.push(
      `  DEGRADED     ${s.degraded.step} waits for an unavailable dependency since ${s.degraded.since}, ${s.degraded.attempts} attempt(s): ${s.degraded.lastError}`,
    );
  if (s.queuedNotes) lines.push(`  queued notes ${s.queuedNotes} (stored when the database returns)`);
  if (s.lastTickFailure)
    lines.push(
      `  last failed  tick ${s.lastTickFailure.tick} at ${s.lastTickFailure.step}: ${s.lastTickFailure.error} (${s.counters.tickFailures ?? 0} in all)`,
    );
  const loops = Object.entries(s.taskLoops);
  if (loops.length) lines.push(`  task loops   ${loops.map(([t, id]) => `#${t} (${id})`).join(', ')}`);
  return lines.join('\n');
}

/** The goal metrics line: the figures, `none` without goals, or why the database could not say. */
export function formatGoals(goals: GoalMetrics | Error): string {
  if (goals instanceof Error) return `  goals        unavailable: ${goals.message.split('\n')[0]}`;
  return `  goals        ${goals.total ? goalMetricsSummary(goals) : 'none'}`;
}

/** The embedder line: away since when and why, or back since when; nothing when it was never away. */
export function formatEmbedder(health: EmbedderHealth | null | undefined): string[] {
  return health ? [`  ${embedderHealthLine(health)}`] : [];
}

/**
 * Render the execution state and, when the query answered, the status; then the goals and the
 * embedder's health, when read.
 */
export function formatExecution(
  r: AgentLoopStatus,
  goals?: GoalMetrics | Error,
  embedder?: EmbedderHealth | null,
): string {
  const goalLine = [...(goals === undefined ? [] : [formatGoals(goals)]), ...formatEmbedder(embedder)];
  const head =
    r.execution.status === 'RUNNING'
      ? []
      : [
          `workflow ${r.workflowId} is ${r.execution.status} (since ${r.execution.closeTime}): ${r.execution.reason}`,
          `  start it again with \`mindloop start ${r.workflowId.replace(/^agent\//, '')}\` (it goes on from its last tick)`,
        ];
  if (!r.status) return [...head, `  status query: ${r.queryError ?? 'no answer'}`, ...goalLine].join('\n');
  return [
    ...head,
    r.execution.status === 'RUNNING' ? formatStatus(r.status) : `last status:\n${formatStatus(r.status)}`,
    ...goalLine,
  ].join('\n');
}

/** Who answered: the notebook of a running `npm start`, or Temporal itself. */
type StatusSource = 'notebook' | 'temporal';

/**
 * The notebook's answer for this environment's cluster: the status, or an error when that
 * cluster has no such loop; null when the notebook cannot answer (the command asks Temporal).
 */
async function statusFromNotebook(env: Env, agentId: string): Promise<AgentLoopStatus | Error | null> {
  const answer = await askNotebook(env, 'GET', `/api/agents/${encodeURIComponent(agentId)}/loop`);
  if (answer?.status === 200 && typeof answer.body.loop === 'object' && answer.body.loop !== null)
    return answer.body.loop as AgentLoopStatus;
  if (answer?.status === 404 && answer.body.noLoop === true) return new Error(String(answer.body.error));
  return null;
}

/** The status, from the notebook when it can answer for this environment, else from Temporal. */
async function agentStatus(
  agentId: string,
  o: { direct?: boolean } = {},
): Promise<{ status: AgentLoopStatus; source: StatusSource }> {
  const env = loadEnvOrExit();
  const viaNotebook = o.direct ? null : await statusFromNotebook(env, agentId);
  if (viaNotebook instanceof Error) throw viaNotebook;
  if (viaNotebook) return { status: viaNotebook, source: 'notebook' };
  const [{ withClient }, { agentLoopStatus }] = await Promise.all([
    import('./client.js'),
    import('../runtime/operator.js'),
  ]);
  return { status: await withClient((client) => agentLoopStatus(client, agentId)), source: 'temporal' };
}

/** The agent's embedder health from the database (null when never away, or when it cannot be read). */
async function embedderFromDb(agentId: string): Promise<EmbedderHealth | null> {
  try {
    const [{ withDb }, { embedderHealth }] = await Promise.all([
      import('./client.js'),
      import('../db/queries/embedder-health.js'),
    ]);
    return await withDb((db) => embedderHealth(db, agentId));
  } catch {
    return null;
  }
}

/** The agent's goal metrics from the database; an error in their place when it cannot be read. */
async function goalsFromDb(agentId: string): Promise<GoalMetrics | Error> {
  try {
    const [{ withDb }, { agentGoalMetrics }] = await Promise.all([
      import('./client.js'),
      import('../db/queries/goal-metrics.js'),
    ]);
    return await withDb((db) => agentGoalMetrics(db, agentId));
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

export function registerStatusCommand(program: Command): void {
  program
    .command('status')
    .description(
      "the agent loop's status query (through the notebook of a running `npm start` when it serves the same Temporal, else from Temporal)",
    )
    .argument('<agent>', 'agent id', agentIdArg)
    .option('--json', 'print JSON (with `source`: notebook or temporal)')
    .option('--direct', 'ask Temporal directly, not the notebook')
    .action(async (id: string, opts: { json?: boolean; direct?: boolean }) => {
      const [{ status, source }, goals, embedder] = await Promise.all([
        agentStatus(id, opts),
        goalsFromDb(id),
        embedderFromDb(id),
      ]);
      process.stdout.write(
        opts.json
          ? `${JSON.stringify({ ...status, goals: goals instanceof Error ? null : goals, embedder, source }, null, 2)}\n`
          : `${formatExecution(status, goals, embedder)}\n`,
      );
    });
}
