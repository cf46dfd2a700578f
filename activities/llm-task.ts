/**
 * `llm_task.ask`, the part after the command: the agent loop runs `askLlmOnce` once the command
 * committed, so no model call ever holds a database transaction open. One question goes to one
 * model of the agent's registry (a named row, or a role with its failover) and the answer is
 * stored as an incoming note (`source = 'llm:task'`), read in the agent's next context.
 *
 * Idempotent by the command's key: a retried activity gets the recorded answer from the router
 * (the key is the call's request key; nothing is paid twice) and finds the note by its key.
 * No model answering, or a budget that cannot cover the call, is an answer too: a note says so.
 */
import { eq } from 'drizzle-orm';
import { z } from 'zod';
import { clipText } from '../core/sanitize.js';
import type { Db } from '../db/client.js';
import { notes } from '../db/schema/index.js';
import { ErrorType, parseInput, retryable } from './errors.js';
import { withHeartbeat } from './heartbeat.js';
import { LifeforceExhaustedError, LlmUnavailableError, type LlmRouter } from './llm/index.js';

interface LlmTaskDeps {
  db: Db;
  llm: LlmRouter;
}

const askInput = z.object({
  agentId: z.string().min(1),
  tick: z.number().int().min(0),
  workflowId: z.string().min(1).optional(),
  cmdId: z.string().min(1).max(200),
  key: z.string().min(1).max(500),
  question: z.string().trim().min(1).max(8000),
  role: z.enum(['task', 'agent']),
  registryId: z.number().int().positive().optional(),
  model: z.string().max(200).optional(),
});
type AskLlmInput = z.input<typeof askInput>;

interface AskLlmResult {
  noteId: number;
  /** False when no model answered (the note says why). */
  answered: boolean;
  /** `provider:model` that answered. */
  model: string | null;
}

/** The longest answer kept in the note (the context clips what it shows further). */
const maxAnswerChars = 16_000;

const systemPrompt = (agentId: string) =>
  `Another AI agent (${agentId}) asks you one question. Answer it directly and concisely, in plain text; there will be no follow-up.`;

async function askOnce(deps: LlmTaskDeps, raw: AskLlmInput): Promise<AskLlmResult> {
  const input = parseInput('askLlmOnce', askInput, raw);
  const noteKey = `${input.key}:answer`;
  const [done] = await deps.db
    .select({ id: notes.id, sender: notes.sender, tags: notes.tags })
    .from(notes)
    .where(eq(notes.idempotencyKey, noteKey));
  if (done) return { noteId: done.id, answered: !done.tags.includes('unanswered'), model: done.sender };

  const quoted = `"${clipText(input.question.replace(/\s+/g, ' '), 300)}"`;
  let note: { text: string; sender: string; answered: boolean };
  try {
    const r = await withHeartbeat(
      (signal) =>
        deps.llm.chat({
          agentId: input.agentId,
          role: input.role,
          ...(input.registryId !== undefined ? { registryId: input.registryId } : {}),
          messages: [
            { role: 'system', content: systemPrompt(input.agentId) },
            { role: 'user', content: input.question },
          ],
          idempotencyKey: input.key,
          purpose: 'llm_task',
          tick: input.tick,
          ...(input.workflowId ? { workflowId: input.workflowId } : {}),
          signal,
        }),
      { details: { waitingFor: 'llm', purpose: 'llm_task' } },
    );
    const model = `${r.provider}:${r.model}`;
    note = {
      text: `Answer from ${model} to your question (llm_task.ask ${input.cmdId}) ${quoted}:\n${clipText(r.text, maxAnswerChars)}`,
      sender: model,
      answered: true,
    };
  } catch (err) {
    if (!(err instanceof LlmUnavailableError || err instanceof LifeforceExhaustedError)) throw err;
    const why =
      err instanceof LifeforceExhaustedError
        ? 'your lifeforce budget cannot cover the call'
        : `no model answered (${clipText(err.message, 300)})`;
    note = {
      text: `Your question (llm_task.ask ${input.cmdId}) ${quoted} was not answered: ${why}.`,
      sender: input.model ?? `${input.role} model`,
      answered: false,
    };
  }
  const [row] = await deps.db
    .insert(notes)
    .values({
      agentId: input.agentId,
      direction: 'in',
      source: 'llm:task',
      sender: clipText(note.sender, 200),
      priority: 2,
      tags: note.answered ? ['llm_task', 'answer'] : ['llm_task', 'unanswered'],
      text: note.text,
      idempotencyKey: noteKey,
    })
    .onConflictDoNothing({ target: notes.idempotencyKey })
    .returning({ id: notes.id });
  const id =
    row?.id ?? (await deps.db.select({ id: notes.id }).from(notes).where(eq(notes.idempotencyKey, noteKey)))[0]?.id;
  if (id === undefined) throw retryable(ErrorType.Unexpected, `note ${noteKey} vanished after its insert`);
  return { noteId: id, answered: note.answered, model: note.answered ? note.sender : null };
}

/** The `llm_task.ask` activity, built from its dependencies. */
export function createLlmTaskActivities(deps: LlmTaskDeps) {
  return {
    /** Ask one model one question for `llm_task.ask`; the answer (or why there is none) becomes a note. Idempotent by `key`. */
    askLlmOnce: (input: AskLlmInput) => askOnce(deps, input),
  };
}
