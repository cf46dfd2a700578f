/**
 * The loop's small writes around the tick: incoming notes, the process log, and the loop's
 * start and end (the agent row, its default LLM and starter tools, the task loops to resume).
 */
import { and, eq, isNull, sql } from 'drizzle-orm';
import { parseFeedbackNote } from '../../core/learnings.js';
import type { Db } from '../../db/client.js';
import { recordFeedback } from '../../db/queries/learnings.js';
import {
  agentConfig,
  agents,
  discoveredTools,
  llmRecentResponses,
  notes,
  processLog,
  tasks,
  type IncomingNoteSource,
  type NoteAudio,
} from '../../db/schema/index.js';
import { ErrorType, retryable } from '../errors.js';
import { ensureDefaultRegistry } from '../llm/index.js';
import { ensureBuiltinTools, grantStarterTools } from '../tools.js';
import { tellFeedbackLearning, type AgentEventSink } from '../agent-events.js';

/** Loop-event activities, built from a database (and told of the learnings a feedback note derives). */
export function createLoopEventActivities({ db, events }: { db: Db; events?: AgentEventSink }) {
  return {
    /** Store an incoming note; idempotent on its key. */
    async recordNote(input: {
      agentId: string;
      text: string;
      priority: number;
      tags: string[];
      source: IncomingNoteSource;
      sender?: string;
      taskId?: number;
      /** The audio the note was transcribed from (a speech workflow's note). */
      audio?: NoteAudio;
      idempotencyKey: string;
    }): Promise<{
      noteId: number;
      feedback?: { pattern: string; count: number; learningId?: number } | { error: string };
    }> {
      const inserted = await db
        .insert(notes)
        .values({
          agentId: input.agentId,
          direction: 'in',
          source: input.source,
          sender: input.sender,
          priority: input.priority,
          tags: input.tags,
          text: input.text,
          taskId: input.taskId,
          audio: input.audio ?? null,
          idempotencyKey: input.idempotencyKey,
        })
        .onConflictDoNothing({ target: notes.idempotencyKey })
        .returning({ id: notes.id });
      const id =
        inserted[0]?.id ??
        (await db.select({ id: notes.id }).from(notes).where(eq(notes.idempotencyKey, input.idempotencyKey)))[0]?.id;
      if (id === undefined)
        throw retryable(ErrorType.Unexpected, `note ${input.idempotencyKey} vanished after its insert`); // a retry inserts it again
      // A user's note tagged `feedback` ("reject shell.exec: rm -rf") also counts as preference feedback (once: new notes only).
      if (inserted[0] && (input.source === 'user' || input.source === 'human') && input.tags.includes('feedback')) {
        const parsed = parseFeedbackNote(input.text);
        if (!parsed.ok) return { noteId: id, feedback: { error: parsed.reason } };
        try {
          const r = await recordFeedback(db, { agentId: input.agentId, ...parsed.feedback, source: `note:${id}` });
          tellFeedbackLearning(events, { agentId: input.agentId }, r);
          return {
            noteId: id,
            feedback: { pattern: r.pattern, count: r.count, ...(r.learning ? { learningId: r.learning.id } : {}) },
          };
        } catch (err) {
          return { noteId: id, feedback: { error: (err as Error).message } };
        }
      }
      return { noteId: id };
    },

    /** Append to the process log (outages, recoveries, loop events). */
    async logProcess(input: {
      agentId: string;
      processId: string;
      kind: string;
      status: 'ok' | 'warning' | 'error' | 'timeout' | 'offline' | 'close';
      message: string;
      tick: number;
      mode?: 'normal' | 'isolated' | 'core_outage';
    }): Promise<void> {
      await db.transaction(async (tx) => {
        if (input.status === 'close') {
          await tx
            .update(processLog)
            .set({ closedAt: new Date() })
            .where(
              and(
                eq(processLog.agentId, input.agentId),
                eq(processLog.processId, input.processId),
                isNull(processLog.closedAt),
              ),
            );
        }
        await tx.insert(processLog).values({
          agentId: input.agentId,
          processId: input.processId,
          kind: input.kind,
          status: input.status,
          message: input.message,
          tick: input.tick,
          closedAt: input.status === 'close' ? new Date() : null,
        });
        if (input.mode) await tx.update(agents).set({ operatingMode: input.mode }).where(eq(agents.id, input.agentId));
      });
    },

    /** Loop start: the agent row, a default LLM if it has none, its starter tools, and the task loops to resume. */
    async loopStarted(input: { agentId: string; name: string; workflowId: string }): Promise<{
      interruptedTaskLoops: Array<{ taskId: number; title: string }>;
      /** The agent's persisted settings (`agent_config`), applied by a fresh loop start. */
      config: Record<string, unknown>;
      /** The last tick the agent recorded: a loop started anew goes on from there. */
      lastTick?: number;
    }> {
      await db
        .insert(agents)
        .values({ id: input.agentId, name: input.name, status: 'running' })
        .onConflictDoUpdate({ target: agents.id, set: { status: 'running' } });
      await ensureDefaultRegistry(db, input.agentId);
      // Progressive discovery: the built-in state-machine tools are in the catalogue, and
      // an agent that has discovered nothing yet is taught the starter tools (discover_tools,
      // escalate, request_state_machine_design); the rest comes through escalations and designs.
      await ensureBuiltinTools(db);
      const [known] = await db
        .select({ id: discoveredTools.id })
        .from(discoveredTools)
        .where(eq(discoveredTools.agentId, input.agentId))
        .limit(1);
      if (!known) await grantStarterTools(db, { agentId: input.agentId });
      const running = await db
        .select({ id: tasks.id, title: tasks.title })
        .from(tasks)
        .where(and(eq(tasks.agentId, input.agentId), eq(tasks.replStatus, 'running'), eq(tasks.frozen, false)));
      const config = await db
        .select({ key: agentConfig.key, value: agentConfig.value })
        .from(agentConfig)
        .where(eq(agentConfig.agentId, input.agentId));
      // The agent row's tick, or the last stored reply's when a crash came between the two.
      const last = await db.execute<{ tick: string | null }>(
        sql`select greatest((select ${agents.lastTick} from ${agents} where ${agents.id} = ${input.agentId}), (select max(${llmRecentResponses.tick}) from ${llmRecentResponses} where ${llmRecentResponses.agentId} = ${input.agentId})) as tick`,
      );
      return {
        interruptedTaskLoops: running.map((t) => ({ taskId: t.id, title: t.title })),
        config: Object.fromEntries(config.map((c) => [c.key, c.value])),
        lastTick: Number(last.rows[0]?.tick ?? 0),
      };
    },

    /** The loop ended: stopped (or finished its ticks), or failed — then the process log says why. */
    async loopStopped(input: {
      agentId: string;
      tick: number;
      status?: 'stopped' | 'failed';
      reason?: string;
    }): Promise<void> {
      const status = input.status ?? 'stopped';
      await db.transaction(async (tx) => {
        await tx.update(agents).set({ status, lastTick: input.tick }).where(eq(agents.id, input.agentId));
        if (status === 'failed') {
          await tx.insert(processLog).values({
            agentId: input.agentId,
            processId: 'agent-loop',
            kind: 'loop_failed',
            status: 'error',
            message: input.reason ?? 'the loop failed',
            tick: input.tick,
          });
        }
      });
    },
  };
}
