/**
 * What a person at the controls does to running agents, in one place for every front end (the
 * `mindloop` CLI and the MCP bridge): reach Temporal and Postgres with errors that name the fix,
 * read an agent loop's status, and answer as the human
 * tier — an escalation's approve / reject / nudge / veto and a successor fork's gate — through
 * the workflows' own updates, whose validators have the last word (already decided, a missing
 * reason…). Workflow modules are imported for their types only: a value import would pull
 * workflow code into the caller.
 */
import { Connection, WorkflowNotFoundError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { z } from 'zod';
import { workflowIds } from '../core/ids.js';
import type { Env } from '../env.js';
import type { AgentStatus } from '../workflows/agent-loop/index.js';
import type { EscalationStatus } from '../workflows/escalation.js';
import type { GateAnswer } from '../workflows/successor-fork.js';
import { temporalAddress, temporalConnectionOptions } from './temporal-connection.js';

/** Connect to Temporal; one that does not answer is a one-line error with the fix. */
export async function connectTemporal(env: Env): Promise<Connection> {
  const address = temporalAddress(env);
  try {
    return await Connection.connect({ ...temporalConnectionOptions(env, address), connectTimeout: 3000 });
  } catch (err) {
    throw new Error(
      `cannot reach Temporal at ${address} (${(err as Error).message}); is \`npm start\` running, or TEMPORAL_ADDRESS set?`,
    );
  }
}

/** The database URL the environment names: DATABASE_URL, or the embedded PGlite socket. */
export function databaseUrl(env: Env): string {
  return env.DATABASE_URL ?? `postgres://postgres@127.0.0.1:${env.PGLITE_PORT}/postgres?sslmode=disable`;
}

/** A database error as a person can act on it (server away, tables missing, unknown agent); others unchanged. */
export function explainDbError(err: unknown, env: Pick<Env, 'DATABASE_URL' | 'PGLITE_PORT'>): Error {
  const code = (err as { code?: string }).code ?? (err as { cause?: { code?: string } }).cause?.code;
  if (code === 'ECONNREFUSED')
    return new Error(
      `cannot reach Postgres (${env.DATABASE_URL ? 'DATABASE_URL' : `embedded PGlite on :${env.PGLITE_PORT}`}); is \`npm start\` running, or DATABASE_URL set?`,
    );
  if (code === '23503')
    return new Error(`unknown agent: ${(err as { detail?: string }).detail ?? (err as Error).message}`);
  if (code === '42P01')
    return new Error('tables are missing: run the migrations (`npm start` applies them, or `npm run db:migrate`)');
  return err instanceof Error ? err : new Error(String(err));
}

/** There is no workflow agent/<id>: nothing has started that agent's loop. */
export class NoAgentLoopError extends Error {
  /** `outcome`: what became of the request, said after the fix (e.g. `nothing was stored`). */
  constructor(
    readonly agentId: string,
    outcome?: string,
  ) {
    super(`no loop for agent ${agentId}: start it with \`mindloop start ${agentId}\`${outcome ? ` (${outcome})` : ''}`);
    this.name = 'NoAgentLoopError';
  }
}

/** The loop's execution (running, failed, terminated…) beside its last status query answer. */
export interface AgentLoopStatus {
  workflowId: string;
  execution: { status: string; runId: string; startTime: string; closeTime: string | null; reason: string | null };
  /** The status query (a closed workflow answers it by replay, when a worker is polling); null if it could not. */
  status: AgentStatus | null;
  queryError?: string;
}

/** `fn`'s answer; when agent/<id> is not there (never started, or ended), NoAgentLoopError. */
export async function onAgentLoop<T>(agentId: string, outcome: string | undefined, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) throw new NoAgentLoopError(agentId, outcome);
    throw err;
  }
}

/** Describe agent/<id> and query its status; a closed loop still says how it ended. */
export async function agentLoopStatus(client: Client, id: string): Promise<AgentLoopStatus> {
  const handle = client.workflow.getHandle(workflowIds.agent(id));
  // The query goes out with the describe, both in flight at once; its answer counts only once
  // the describe has found the workflow.
  const queried = handle.query<AgentStatus>('status').then(
    (status) => ({ status }),
    (err: unknown) => ({ error: err as Error }),
  );
  const desc = await onAgentLoop(id, undefined, () => handle.describe());
  const execution = {
    status: desc.status.name,
    runId: desc.runId,
    startTime: desc.startTime.toISOString(),
    closeTime: desc.closeTime?.toISOString() ?? null,
    reason: desc.status.name === 'RUNNING' ? null : await closeReason(handle),
  };
  const q = await queried;
  return 'status' in q
    ? { workflowId: handle.workflowId, execution, status: q.status }
    : { workflowId: handle.workflowId, execution, status: null, queryError: q.error.message };
}

/**
 * Null when agent/<id>'s loop is running (so a command sent to it now is taken); else why it
 * is not, in words for the sender: no such loop here, or how it ended.
 */
export async function whyNotRunning(client: Client, agentId: string): Promise<string | null> {
  const handle = client.workflow.getHandle(workflowIds.agent(agentId));
  try {
    const desc = await handle.describe();
    if (desc.status.name === 'RUNNING') return null;
    return `the loop of agent ${agentId} is not running (${await closeReason(handle)}); \`mindloop start ${agentId}\` starts it again`;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return new NoAgentLoopError(agentId).message;
    throw err;
  }
}

/** Why a closed run ended: the failure's message, the termination's reason, or how it completed. */
async function closeReason(handle: ReturnType<Client['workflow']['getHandle']>): Promise<string> {
  const history = await handle.fetchHistory();
  const last = history.events?.at(-1);
  if (!last) return 'unknown';
  const failed = last.workflowExecutionFailedEventAttributes?.failure;
  if (failed) return `failed: ${failed.cause?.message ? `${failed.message}: ${failed.cause.message}` : failed.message}`;
  const terminated = last.workflowExecutionTerminatedEventAttributes;
  if (terminated)
    return `terminated${terminated.identity ? ` by ${terminated.identity}` : ''}: ${terminated.reason || '(no reason given)'}`;
  if (last.workflowExecutionTimedOutEventAttributes) return 'timed out';
  if (last.workflowExecutionCanceledEventAttributes) return 'cancelled';
  if (last.workflowExecutionCompletedEventAttributes) return 'completed';
  if (last.workflowExecutionContinuedAsNewEventAttributes) return 'continued as new';
  return 'closed';
}

export const escalationIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'expected letters, digits, _ . - (max 64)');

export type EscalationAnswer = 'approve' | 'reject' | 'nudge' | 'veto';

/**
 * Send one human answer to escalation/<id> and return what the workflow now says. A refusal by
 * the workflow (already decided, no reason given…) and a missing workflow are errors naming why.
 */
export async function answerEscalation(
  client: Client,
  id: string,
  name: EscalationAnswer,
  arg: Record<string, unknown>,
): Promise<EscalationStatus> {
  try {
    return await client.workflow
      .getHandle(workflowIds.escalation(id))
      .executeUpdate<EscalationStatus, [Record<string, unknown>]>(name, { args: [arg] });
  } catch (err) {
    if (err instanceof WorkflowNotFoundError)
      throw new Error(
        `no running escalation ${id} (workflow escalation/${id}); \`mindloop escalations list\` shows them`,
      );
    if (err instanceof WorkflowUpdateFailedError)
      throw new Error(`escalation ${id} refused the ${name}: ${err.cause?.message ?? err.message}`);
    throw err;
  }
}

type ForkGateUpdate = 'approveFork' | 'rejectFork';

/** Answer fork/<id>'s human gate: apply the approved patch, or discard it. */
export async function answerForkGate(
  client: Client,
  id: string,
  which: ForkGateUpdate,
  by: string,
): Promise<GateAnswer> {
  try {
    return await client.workflow
      .getHandle(workflowIds.fork(id))
      .executeUpdate<GateAnswer, [{ by?: string }]>(which, { args: [{ by }] });
  } catch (err) {
    if (err instanceof WorkflowNotFoundError)
      throw new Error(
        `no fork workflow ${workflowIds.fork(id)} is running (finished, or the deadline passed: see \`mindloop forks show ${id}\`)`,
      );
    if (err instanceof WorkflowUpdateFailedError)
      throw new Error(`fork ${id}: ${(err.cause as Error | undefined)?.message ?? err.message}`);
    throw err;
  }
}
