/**
 * What the notebook does to running workflows: start, pause, resume and stop an agent's loop,
 * send it a note (the `addNote` update, whose answer carries the note id), and answer as the
 * human tier — an escalation's approve / reject / nudge / veto and a fork's gate — through
 * runtime/operator.ts, the code the CLI and the MCP bridge use. Every input is checked first with
 * the schema the workflow itself validates with, so a bad one is refused with its field named
 * before anything is sent; the workflow's validators still have the last word.
 */
import { WorkflowNotFoundError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { z } from 'zod';
import { humanApproveInput, humanNudgeInput, humanRejectInput, humanVetoInput } from '../../core/escalation.js';
import { forkIdSchema } from '../../core/fork.js';
import { agentIdSchema, workflowIds } from '../../core/ids.js';
import { formatIssues } from '../../core/zod-issues.js';
import {
  addNoteInput,
  agentLoopInput,
  type AddNoteResult,
  type AgentStatus,
} from '../../workflows/agent-loop/index.js';
import type { GateAnswer } from '../../workflows/successor-fork.js';
import { answerEscalation, answerForkGate, escalationIdSchema, type EscalationAnswer } from '../operator.js';
import { startAgentLoop } from '../workflow-starts.js';

/** One refused field: its path (`priority`, `tags.0`) and why. */
interface FieldError {
  field: string;
  message: string;
}

/** An answer the page shows as is: a status, a message, and the fields at fault when there are. */
export class NotebookError extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404 | 409 | 413 | 415 | 502,
    message: string,
    readonly fields: FieldError[] = [],
  ) {
    super(message);
  }
}

/** Parse `value` with `schema`, or a 400 naming each field at fault (under `under`, e.g. the route's id). */
export function parseOr400<S extends z.ZodType>(schema: S, value: unknown, root = '(input)'): z.output<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const fields = r.error.issues
    .slice(0, 10)
    .map((i) => ({ field: i.path.map(String).join('.') || root, message: i.message }));
  throw new NotebookError(400, formatIssues(r.error, root), fields);
}

/** The ids in a route, each checked by the schema its workflow id is built from. */
export const ids = {
  agent: (raw: string) => parseOr400(agentIdSchema, raw, 'agent'),
  escalation: (raw: string) => parseOr400(escalationIdSchema, raw, 'escalation'),
  fork: (raw: string) => parseOr400(forkIdSchema, raw, 'fork'),
};

/** What a new agent's start takes from the page: the loop input's own id and name fields. */
const startInput = z.strictObject({ agentId: agentLoopInput.shape.agentId, name: agentLoopInput.shape.name });

/** Start agent/<id> (or find the running one): as `mindloop start`. */
export async function startAgent(client: Client, body: unknown): Promise<{ workflowId: string; runId: string }> {
  const input = parseOr400(startInput, body);
  const handle = await startAgentLoop(client, { agentId: input.agentId, ...(input.name ? { name: input.name } : {}) });
  return { workflowId: handle.workflowId, runId: handle.firstExecutionRunId };
}

export type LoopSignal = 'pause' | 'resume' | 'stop';

/** Signal the loop: pause after the current tick, resume, or finish the tick and stop. */
export async function signalAgent(
  client: Client,
  agentId: string,
  signal: LoopSignal,
): Promise<{ sent: LoopSignal; workflowId: string }> {
  const workflowId = workflowIds.agent(agentId);
  try {
    if (signal === 'stop')
      await client.workflow.getHandle(workflowId).signal('stop', { reason: 'stopped from the notebook' });
    else await client.workflow.getHandle(workflowId).signal(signal);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError)
      throw new NotebookError(404, `no running loop for agent ${agentId}: start it first`);
    throw err;
  }
  return { sent: signal, workflowId };
}

/** The fields of a note the page may set; the rest of the update's input keeps its defaults. */
const noteFields = ['text', 'priority', 'tags'] as const;
/** An update id a client chose for its note. */
const updateIdSchema = z.string().regex(/^[A-Za-z0-9_.:-]{1,128}$/, 'letters, digits, _ . : - (at most 128)');

/**
 * Send a note through the loop's `addNote` update and return its answer (the stored note's id,
 * or that it is queued while the database is away). The body is checked with the update's own
 * schema; a refusal by the workflow's validator comes back as a 409 with its reason.
 */
export async function sendNote(client: Client, agentId: string, body: unknown): Promise<AddNoteResult> {
  const { updateId, ...raw } = body !== null && typeof body === 'object' ? (body as Record<string, unknown>) : {};
  const unknown = Object.keys(raw).filter((k) => !(noteFields as readonly string[]).includes(k));
  if (unknown.length)
    throw new NotebookError(
      400,
      `unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `'${k}'`).join(', ')}`,
      unknown.map((k) => ({ field: k, message: 'unknown field' })),
    );
  const note = parseOr400(
    addNoteInput,
    Object.fromEntries(noteFields.filter((k) => raw[k] !== undefined).map((k) => [k, raw[k]])),
  );
  // The sender's id for this note (the CLI's): the same id sent again, here or to Temporal, is the same update, applied once.
  const id =
    updateId === undefined ? undefined : parseOr400(z.object({ updateId: updateIdSchema }), { updateId }).updateId;
  try {
    return await client.workflow
      .getHandle(workflowIds.agent(agentId))
      .executeUpdate<AddNoteResult, [unknown]>('addNote', { args: [note], ...(id ? { updateId: id } : {}) });
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError)
      throw new NotebookError(409, (err.cause as Error | undefined)?.message ?? err.message);
    if (err instanceof WorkflowNotFoundError)
      throw new NotebookError(404, `no running loop for agent ${agentId}: start it first (nothing was stored)`);
    throw err;
  }
}

/** Each human answer with the schema the escalation workflow validates it with. */
const answerSchemas = {
  approve: humanApproveInput,
  reject: humanRejectInput,
  nudge: humanNudgeInput,
  veto: humanVetoInput,
} as const satisfies Record<EscalationAnswer, z.ZodType>;

export const escalationAnswers = Object.keys(answerSchemas) as EscalationAnswer[];

/** A refusal from runtime/operator.ts as an answer: a workflow that is gone is 404, one that refused is 409. */
function operatorError(err: unknown): never {
  const message = (err as Error).message ?? String(err);
  if (/^no (running escalation|fork workflow)/.test(message)) throw new NotebookError(404, message);
  if (/refused|is not awaiting approval/.test(message)) throw new NotebookError(409, message);
  throw err;
}

/** Answer escalation/<id> as the human tier; returns what the workflow now says. */
export async function answerEscalationFromPage(client: Client, id: string, answer: EscalationAnswer, body: unknown) {
  const arg = parseOr400(answerSchemas[answer], body ?? {});
  return answerEscalation(client, id, answer, arg).catch(operatorError);
}

/** The fork gate's input: who answers (the workflow records it; it keeps no reason). */
const forkGateInput = humanApproveInput.pick({ by: true });

/** Answer fork/<id>'s human gate: apply the approved patch to the parent, or discard it. */
export async function answerForkFromPage(
  client: Client,
  id: string,
  verdict: 'approve' | 'reject',
  body: unknown,
): Promise<GateAnswer> {
  const { by } = parseOr400(forkGateInput, body ?? {});
  return answerForkGate(client, id, verdict === 'approve' ? 'approveFork' : 'rejectFork', by).catch(operatorError);
}

/** A fork waiting at its gate says until when in its current details (`… until <ISO time> …`). */
export async function forkGateDeadline(client: Client, forkId: string): Promise<string | null> {
  try {
    const m = await client.workflow
      .getHandle(workflowIds.fork(forkId))
      .query<{ currentDetails?: string | null }>('__temporal_workflow_metadata');
    return /until (\d{4}-\d\d-\d\dT[\d:.]+Z)/.exec(m.currentDetails ?? '')?.[1] ?? null;
  } catch {
    return null;
  }
}

/** Each agent's loop as the list shows it: whether it runs, and its status query when it does. */
export async function loopStates(
  client: Client,
  agentIds: string[],
  concurrency = 8,
): Promise<Map<string, { execution: string; status: AgentStatus | null }>> {
  const out = new Map<string, { execution: string; status: AgentStatus | null }>();
  let next = 0;
  const worker = async () => {
    while (next < agentIds.length) {
      const id = agentIds[next++]!;
      const handle = client.workflow.getHandle(workflowIds.agent(id));
      try {
        const d = await handle.describe();
        // A closed loop is not queried: that would make a worker replay its whole history.
        const status = d.status.name === 'RUNNING' ? await handle.query<AgentStatus>('status').catch(() => null) : null;
        out.set(id, { execution: d.status.name, status });
      } catch (err) {
        out.set(id, { execution: err instanceof WorkflowNotFoundError ? 'NOT_STARTED' : 'UNKNOWN', status: null });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, agentIds.length) }, worker));
  return out;
}
