/**
 * Command execution: validate each parsed command against the catalogue and
 * apply it, idempotently. Each command runs in its own transaction that first inserts its
 * command_log row (agent_id, tick, cmd_id) with ON CONFLICT DO NOTHING: a retried activity
 * finds the row and returns the stored outcome instead of applying the command again.
 */
import type { AgentEmbedders } from '../embeddings/agent-embedder.js';
import { clipText } from '../../core/sanitize.js';
import { and, desc, eq } from 'drizzle-orm';
import { defaultPrices, type PriceTable } from '../../core/lifeforce.js';
import { checkDanger, type DangerRule } from '../../core/danger-zones.js';
import { heldCommandEscalation } from '../commands/escalations.js';
import { classifyError } from '../../core/failure.js';
import { ErrorType, retryable } from '../errors.js';
import { activityContext } from '../heartbeat.js';
import { learningLimit, type TickSnapshots } from './snapshot.js';
import { catalogue, validateCommand, type ValidatedCommand } from '../../core/catalogue.js';
import {
  avoidPatternViolations,
  outcomeFeedback,
  replyActions,
  replyAvoidPatternViolations,
  type LoadedLearning,
} from '../../core/learnings.js';
import type {
  CommandLogResult,
  CommandOutcome,
  CommandRejection,
  InvalidCommand,
  LoopEffect,
  ParsedCommand,
} from '../../core/loop-types.js';
import { placeholderTick } from '../../core/novelty.js';
import { inReplyOrder, parseReply } from '../../core/reply-parser.js';
import type { Db } from '../../db/client.js';
import { commandLog, llmRecentResponses, notes, processLog } from '../../db/schema/index.js';
import { loadLearnings, recordFeedback } from '../../db/queries/learnings.js';
import { tellFeedbackLearning, type AgentEventSink } from '../agent-events.js';
import { handlers } from '../commands/index.js';
import {
  CommandError,
  maxMessage,
  maxResultText,
  type HandlerContext,
  type HandlerResult,
} from '../commands/shared.js';

export { commandResultText } from '../commands/shared.js';

export interface CommandDeps {
  db: Db;
  /** The agents' embedders (memory by meaning); without them memory compares words only. */
  embedders?: AgentEmbedders;
  hooks?: {
    /** Called after a writing command's transaction commits (tests use it to simulate a crash there). */
    afterWrite?: (cmd: ParsedCommand) => void | Promise<void>;
  };
  /** The danger-zone rules in force (default: core/danger-zones.ts defaults). */
  dangerRules?: readonly DangerRule[];
  /** The tick's snapshot (learnings, the parsed reply) when think ran on this worker. */
  snapshots?: TickSnapshots;
  /** Lifeforce prices (default core/lifeforce.ts's). */
  prices?: PriceTable;
  /** Told of the learnings that outcome feedback derives, once stored. */
  events?: AgentEventSink;
}

export interface ApplyCommandsInput {
  agentId: string;
  tick: number;
  workflowId?: string;
  mode: 'main' | 'task';
  /** The auxiliary loop's own task (mode 'task'). */
  taskId?: number;
  commands: ParsedCommand[];
  /**
   * The think activity checked `commands` against the catalogue (their args are the validated
   * ones) and the parser refused duplicate cmd_ids: neither is checked again. Without it (a think
   * result recorded before commands were validated there, an escalation's approved command, a
   * human's re-run) each command is validated and checked for a repeated cmd_id here.
   */
  validated?: boolean;
  /** The commands the think activity found invalid: recorded with their status and reason, in the reply's order. */
  invalid?: InvalidCommand[];
  /** Parser rejections: recorded with their reason, never applied. */
  rejected?: CommandRejection[];
  /** cmd_ids the validators let through; undefined = all (auto_pass). */
  allowedCmdIds?: string[];
  /** Why the reflexes held a command (cmd_id → reason: ethics policy, tie, threshold…), recorded with it. */
  heldReasons?: Record<string, string>;
  /** The tick's validation rating, recorded with each command. */
  rating?: number | null;
  /** A human approved these commands through this escalation: danger checks do not hold them again. */
  approvedBy?: string;
  /** Marks for later review on the rows of the commands that are applied (`emergency_consensus`: decided in Isolated mode). */
  tags?: string[];
}

type Status = CommandOutcome['status'];
type LogValues = typeof commandLog.$inferInsert;

const readOnlyReason = 'read-only auxiliary loop';

/**
 * The command_log key. Task-loop ticks count from 1 like the main loop's, so a task loop's
 * ids carry a `task<id>.` prefix (added here unless the caller already did).
 */
function logCmdId(input: Pick<ApplyCommandsInput, 'mode' | 'taskId'>, cmdId: string): string {
  if (input.mode !== 'task') return cmdId;
  const prefix = `task${input.taskId ?? 0}.`;
  return cmdId.startsWith(prefix) ? cmdId : `${prefix}${cmdId}`;
}

async function storedOutcome(
  deps: CommandDeps,
  agentId: string,
  tick: number,
  key: string,
  cmd: { cmdId: string; type: string },
): Promise<CommandOutcome> {
  const [row] = await deps.db
    .select()
    .from(commandLog)
    .where(and(eq(commandLog.agentId, agentId), eq(commandLog.tick, tick), eq(commandLog.cmdId, key)));
  if (!row) throw retryable(ErrorType.Unexpected, `command_log row ${agentId}/${tick}/${key} vanished`); // a retry applies it again
  const result = (row.result ?? {}) as Partial<CommandLogResult>;
  return {
    cmdId: cmd.cmdId,
    type: row.type,
    status: row.status,
    message: clipText(result.message ?? row.reason ?? row.status, maxMessage),
    duplicate: true,
    effects: Array.isArray(result.effects) ? result.effects : [],
  };
}

/** Record a command that is not applied (unknown, rejected, unvalidated, error). */
async function record(
  deps: CommandDeps,
  values: LogValues,
  status: Status,
  reason: string,
  outcomeId: string,
  text?: string,
): Promise<CommandOutcome> {
  const result: CommandLogResult = {
    message: clipText(reason, maxMessage),
    effects: [],
    ...(text ? { text: clipText(text, maxResultText) } : {}),
  };
  const inserted = await deps.db
    .insert(commandLog)
    .values({ ...values, status, reason: clipText(reason, 2000), result })
    .onConflictDoNothing({ target: [commandLog.agentId, commandLog.tick, commandLog.cmdId] })
    .returning({ id: commandLog.id });
  if (!inserted[0])
    return storedOutcome(deps, values.agentId, values.tick, values.cmdId, { cmdId: outcomeId, type: values.type });
  return { cmdId: outcomeId, type: values.type, status, message: result.message, duplicate: false, effects: [] };
}

/**
 * Rehydrated checks: a command that matches a learned avoid_pattern is not run;
 * it is recorded as held for clarification and the user gets a note asking.
 */
async function holdForClarification(
  deps: CommandDeps,
  input: ApplyCommandsInput,
  values: LogValues,
  cmd: ParsedCommand,
  hits: LoadedLearning[],
  inReply = false,
): Promise<CommandOutcome> {
  const what = hits
    .map((l) => `"${String(l.args.pattern)}" (learning #${l.id}, confidence ${l.confidence.toFixed(2)})`)
    .join(', ');
  const reason = inReply
    ? `needs clarification: the reply behind ${cmd.type} uses what you learned to avoid: ${what}; ask the user before doing it`
    : `needs clarification: ${cmd.type} matches what you learned to avoid: ${what}; ask the user before doing it`;
  const outcome = await record(deps, values, 'rejected', reason, cmd.cmdId);
  if (!outcome.duplicate) {
    await deps.db
      .insert(notes)
      .values({
        agentId: input.agentId,
        direction: 'out',
        source: 'agent',
        sender: input.agentId,
        recipient: 'user',
        priority: 1,
        tags: ['clarification', 'learning'],
        text: `Before I run ${cmd.type} (${cmd.cmdId}): ${inReply ? 'my reply uses' : 'it matches'} what I learned to avoid — ${what}. Should I go ahead?`,
        idempotencyKey: `clarify/${input.agentId}/${input.tick}/${values.cmdId}`,
      })
      .onConflictDoNothing();
  }
  return outcome;
}

/**
 * Outcome feedback: a command that failed counts as a rejection of `command:<type>` with its
 * error; so does a rejected edit (`rejectedEdit`: refused by its arg schema or the task-loop
 * rules, or not let through by the validators). Holds (clarification, danger zones) wait for
 * an answer and are not counted; a retry (duplicate) never counts twice.
 */
async function countFailure(
  deps: CommandDeps,
  input: ApplyCommandsInput,
  outcome: CommandOutcome,
  rejectedEdit = false,
): Promise<void> {
  if (outcome.duplicate) return;
  if (
    outcome.status !== 'error' &&
    !(rejectedEdit && (outcome.status === 'rejected' || outcome.status === 'unvalidated'))
  )
    return;
  try {
    const r = await recordFeedback(deps.db, {
      agentId: input.agentId,
      ...outcomeFeedback(outcome.type, outcome.message),
      source: `outcome:${input.tick}/${outcome.cmdId}`,
    });
    tellFeedbackLearning(deps.events, { agentId: input.agentId }, r);
  } catch (err) {
    // Preference counting never fails a tick (a refused derived learning is in learning_events); it is logged.
    const reason = errorText(err);
    activityLog().warn(`outcome feedback not counted for ${outcome.type} (${outcome.cmdId}): ${reason}`, {
      agentId: input.agentId,
      tick: input.tick,
      cmdId: outcome.cmdId,
      type: outcome.type,
      reason,
    });
  }
}

/** A rejected edit, counted as outcome feedback before it is returned. */
async function counted(deps: CommandDeps, input: ApplyCommandsInput, outcome: CommandOutcome): Promise<CommandOutcome> {
  await countFailure(deps, input, outcome, true);
  return outcome;
}

/** A command the catalogue refused: recorded with its status and reason, counted as a rejected edit. */
async function refuse(
  deps: CommandDeps,
  input: ApplyCommandsInput,
  values: LogValues,
  status: 'unknown' | 'rejected',
  reason: string,
  outcomeId: string,
): Promise<CommandOutcome> {
  return counted(deps, input, await record(deps, values, status, reason, outcomeId));
}

/** The command_log row of one command (status and reason are set when it is recorded). */
function logValues(input: ApplyCommandsInput, cmd: ParsedCommand, key: string): LogValues {
  return {
    agentId: input.agentId,
    tick: input.tick,
    cmdId: key,
    type: clipText(cmd.type, 200),
    args: cmd.args,
    description: cmd.description ?? null,
    status: 'applied',
    rating: input.rating ?? null,
    workflowId: input.workflowId ?? null,
  };
}

async function applyOne(
  deps: CommandDeps,
  input: ApplyCommandsInput,
  cmd: ParsedCommand,
  seen: Set<string>,
  learned: LoadedLearning[] = [],
  replyHits: LoadedLearning[] = [],
): Promise<CommandOutcome> {
  const key = logCmdId(input, cmd.cmdId);
  const values = logValues(input, cmd, key);
  if (!input.validated && seen.has(key)) {
    // Cannot share the first one's command_log key; reported, not recorded.
    return {
      cmdId: cmd.cmdId,
      type: cmd.type,
      status: 'rejected',
      message: `duplicate cmd_id '${clipText(cmd.cmdId, 60)}' in this tick`,
      duplicate: false,
      effects: [],
    };
  }
  seen.add(key);

  // A type this worker's catalogue lacks (validated by a worker with another catalogue) is validated, and refused, here.
  const v =
    input.validated && Object.hasOwn(catalogue, cmd.type)
      ? { ok: true as const, command: cmd as unknown as ValidatedCommand }
      : validateCommand(cmd);
  if (!v.ok) return refuse(deps, input, values, v.code === 'unknown' ? 'unknown' : 'rejected', v.reason, cmd.cmdId);
  const command = v.command;
  const spec = catalogue[command.type];
  values.threshold = spec.minRating;

  if (input.mode === 'task') {
    const refusal = taskModeRefusal(command, input.taskId);
    if (refusal) return counted(deps, input, await record(deps, values, 'rejected', refusal, cmd.cmdId));
  }
  const hits = avoidPatternViolations(cmd, learned);
  if (hits.length) return holdForClarification(deps, input, values, cmd, hits);
  if (replyHits.length) return holdForClarification(deps, input, values, cmd, replyHits, true);
  if (input.allowedCmdIds && !input.allowedCmdIds.includes(cmd.cmdId)) {
    const rating =
      input.rating === null || input.rating === undefined ? 'none' : `${input.rating >= 0 ? '+' : ''}${input.rating}`;
    const why = input.heldReasons?.[cmd.cmdId];
    // The gate's own threshold message says less than this one; the others (ethics, tie, no answer) say why.
    const reason =
      why && !why.startsWith('needs rating')
        ? `not validated: ${command.type} ${why} (this tick's rating is ${rating})`
        : `not validated: ${command.type} needs rating ≥ +${spec.minRating}, this tick's rating is ${rating}`;
    return counted(deps, input, await record(deps, values, 'unvalidated', clipText(reason, 500), cmd.cmdId));
  }
  // Danger zones: a flagged command is not run; it waits for a human through an escalation.
  const danger = input.approvedBy
    ? []
    : checkDanger(
        { kind: 'command', name: command.type, args: command.args as Record<string, unknown>, agentId: input.agentId },
        deps.dangerRules,
      );
  if (danger.length) {
    const e = heldCommandEscalation(
      input,
      key,
      cmd,
      danger.map((f) => f.rule),
    );
    const held = await record(
      deps,
      values,
      'rejected',
      `held for human approval (${danger.map((f) => f.rule).join(', ')}): escalation ${e.escalationId}`,
      cmd.cmdId,
    );
    // Deterministic effect: a retry (duplicate) starts the same escalation id, which Temporal dedupes.
    return { ...held, effects: [e] };
  }

  let applied: { duplicate: true } | { duplicate: false; result: CommandLogResult; committed?: () => void };
  try {
    applied = await deps.db.transaction(async (tx) => {
      const inserted = await tx
        .insert(commandLog)
        .values(input.tags?.length ? { ...values, tags: input.tags } : values)
        .onConflictDoNothing({ target: [commandLog.agentId, commandLog.tick, commandLog.cmdId] })
        .returning({ id: commandLog.id });
      // Already recorded by an earlier attempt (or one running concurrently, which this insert waited for).
      if (!inserted[0]) return { duplicate: true as const };
      const ctx: HandlerContext = {
        tx,
        agentId: input.agentId,
        tick: input.tick,
        mode: input.mode,
        logCmdId: key,
        prices: deps.prices ?? defaultPrices,
        ...(deps.events ? { events: deps.events } : {}),
        ...(deps.embedders ? { embedders: deps.embedders, searchIndexes: deps.db } : {}),
        ...(deps.dangerRules ? { dangerRules: deps.dangerRules } : {}),
        ...(input.taskId !== undefined ? { taskId: input.taskId } : {}),
        ...(input.workflowId !== undefined ? { workflowId: input.workflowId } : {}),
        ...(input.approvedBy ? { approvedBy: input.approvedBy } : {}),
      };
      const handler = handlers[command.type] as (c: HandlerContext, a: unknown) => Promise<HandlerResult>;
      const out = await handler(ctx, command.args);
      const result = toStored(out);
      await tx.update(commandLog).set({ result }).where(eq(commandLog.id, inserted[0].id));
      return { duplicate: false as const, result, ...(out.committed ? { committed: out.committed } : {}) };
    });
  } catch (err) {
    // An outage: the whole activity retries; applied commands come back as duplicates.
    if (classifyError(err) === 'infra') throw err;
    // The transaction rolled back (command_log row included): record the failure on its own.
    return record(deps, values, 'error', errorText(err), cmd.cmdId);
  }
  if (applied.duplicate) return storedOutcome(deps, input.agentId, input.tick, key, cmd);
  tellCommitted(applied.committed, cmd);
  if (spec.writes) await deps.hooks?.afterWrite?.(cmd);
  return {
    cmdId: cmd.cmdId,
    type: command.type,
    status: 'applied',
    message: applied.result.message,
    duplicate: false,
    effects: applied.result.effects,
  };
}

/**
 * The prose of the reply these commands came from (without its command and facts blocks), as
 * the think activity stored it: llm_recent_responses for the main loop, the process log for a
 * task loop. Empty when it is not there (an escalation's approved command, a test's direct call).
 */
async function replyBody(deps: CommandDeps, input: ApplyCommandsInput): Promise<string> {
  let content: string | undefined;
  if (input.mode === 'main') {
    const read = async (tick: number) =>
      (
        await deps.db
          .select({ content: llmRecentResponses.content })
          .from(llmRecentResponses)
          .where(and(eq(llmRecentResponses.agentId, input.agentId), eq(llmRecentResponses.tick, tick)))
      )[0]?.content;
    content = await read(input.tick);
    // An identical reply is stored as a placeholder naming the real reply it repeats (activities/reflexes/record.ts).
    const original = content === undefined ? null : placeholderTick(content);
    if (original !== null) content = await read(original);
  } else if (input.taskId !== undefined) {
    const [row] = await deps.db
      .select({ payload: processLog.payload })
      .from(processLog)
      .where(
        and(
          eq(processLog.agentId, input.agentId),
          eq(processLog.processId, `task/${input.taskId}`),
          eq(processLog.kind, 'task_loop'),
          eq(processLog.tick, input.tick),
        ),
      )
      .orderBy(desc(processLog.id))
      .limit(1);
    const c = row?.payload?.content;
    content = typeof c === 'string' ? c : undefined;
  }
  return content ? parseReply(content).body : '';
}

async function recordRejection(
  deps: CommandDeps,
  input: ApplyCommandsInput,
  r: CommandRejection,
  index: number,
): Promise<CommandOutcome> {
  // Parser rejections may lack a cmd_id or repeat an accepted one: they get their own key.
  const key = logCmdId(input, `!rejected.${index}${r.cmdId ? `:${r.cmdId}` : ''}`);
  const values: LogValues = {
    agentId: input.agentId,
    tick: input.tick,
    cmdId: key,
    type: clipText(r.type ?? '(unparsed)', 200),
    args: {},
    status: 'rejected',
    rating: input.rating ?? null,
    workflowId: input.workflowId ?? null,
  };
  return record(deps, values, 'rejected', r.reason, r.cmdId ?? key, r.raw);
}

/** Validate and apply one tick's commands; idempotent on (agent, tick, cmd_id). */
export async function applyCommands(deps: CommandDeps, input: ApplyCommandsInput): Promise<CommandOutcome[]> {
  const outcomes: CommandOutcome[] = [];
  const seen = new Set<string>();
  // The agent's learned avoid_patterns (confidence > 0.3) as the tick's snapshot holds them
  // (read by think on this worker), else read now: a learning takes effect from the next tick.
  const held = deps.snapshots?.held(
    { agentId: input.agentId, ...(input.mode === 'task' ? { taskId: input.taskId } : {}) },
    input.tick,
  );
  const learned = input.commands.length
    ? (
        held?.snapshot?.learnings ?? (await loadLearnings(deps.db, { agentId: input.agentId, limit: learningLimit }))
      ).filter((l) => l.predicate === 'avoid_pattern')
    : [];
  // The reply itself (its prose) may use a learned pattern of action `reply` or `*`: then all
  // its commands wait for clarification. A human-approved command is not held again.
  const replyLearned = learned.filter((l) => replyActions.includes(String(l.args.action)));
  const replyHits =
    replyLearned.length && !input.approvedBy
      ? replyAvoidPatternViolations(held?.reply ? held.reply.parsed.body : await replyBody(deps, input), replyLearned)
      : [];
  // Sequential on purpose: later commands may read what earlier ones wrote (add, then link).
  // Those the think found invalid are recorded in their place in the reply.
  for (const e of inReplyOrder(input.commands, input.invalid)) {
    const outcome = e.invalid
      ? await refuse(
          deps,
          input,
          logValues(input, e.invalid, logCmdId(input, e.invalid.cmdId)),
          e.invalid.status,
          e.invalid.reason,
          e.invalid.cmdId,
        )
      : await applyOne(deps, input, e.command, seen, learned, replyHits);
    await countFailure(deps, input, outcome);
    outcomes.push(outcome);
  }
  for (const [i, r] of (input.rejected ?? []).entries()) outcomes.push(await recordRejection(deps, input, r, i));
  return outcomes;
}

/** The `applyCommands` activity, built from its dependencies. */
export function createCommandActivities(deps: CommandDeps) {
  return {
    /** Validate and apply one tick's commands; idempotent on (agent, tick, cmd_id). */
    applyCommands: (input: ApplyCommandsInput) => applyCommands(deps, input),
  };
}

/** A handler's after-commit step: what it throws is logged, never fails the committed command. */
function tellCommitted(committed: (() => void) | undefined, cmd: ParsedCommand): void {
  if (!committed) return;
  try {
    committed();
  } catch (err) {
    activityLog().warn(`${cmd.type} (${cmd.cmdId}): observers not told: ${errorText(err)}`);
  }
}

/** The activity's logger; outside an activity (a direct call, a CLI), the console. */
function activityLog(): Pick<Console, 'warn'> {
  return activityContext()?.log ?? console;
}

/** Auxiliary (task) loops: read everything, write only notes and their own task row. */
function taskModeRefusal(command: ValidatedCommand, taskId: number | undefined): string | null {
  const spec = catalogue[command.type];
  if (!spec.writes) return null;
  if (!spec.allowedInTaskLoop || taskId === undefined) return `${readOnlyReason}: ${command.type} is not allowed`;
  if ((command.type === 'tasks.update' || command.type === 'tasks.status') && command.args.id !== taskId) {
    return `${readOnlyReason}: it may change only its own task #${taskId}`;
  }
  return null;
}

function toStored(out: HandlerResult): CommandLogResult {
  const effects: LoopEffect[] = out.effects ?? [];
  const result: CommandLogResult = { message: clipText(out.message, maxMessage), effects };
  if (out.text !== undefined) {
    result.text = clipText(out.text, maxResultText);
    if (out.text.length > maxResultText) result.truncated = true;
  }
  return result;
}

/** The Postgres error behind a (possibly Drizzle-wrapped) error, if any. */
function pgError(err: unknown): { code?: string; message: string; detail?: string; constraint?: string } | null {
  for (let e: unknown = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (
      typeof e === 'object' &&
      typeof (e as { code?: unknown }).code === 'string' &&
      (e as { severity?: unknown }).severity !== undefined
    ) {
      return e as { code?: string; message: string; detail?: string };
    }
  }
  return null;
}

function errorText(err: unknown): string {
  if (err instanceof CommandError) return err.message;
  const pg = pgError(err);
  if (pg) return `database error: ${pg.message}${pg.detail ? ` (${pg.detail})` : ''}`;
  return err instanceof Error ? err.message : String(err);
}
