/**
 * The registry of campaign task types: what a task of kind `activity` can do, its
 * args schema, and how it is undone. Every run gets an idempotency key (campaign + phase +
 * task) so a retry after a worker crash finds the first attempt's effect.
 */
import { and, arrayContains, eq, isNull } from 'drizzle-orm';
import { z } from 'zod';
import { formatIssues } from '../core/zod-issues.js';
import type { Db } from '../db/client.js';
import { addNoteOnce } from '../db/queries/notes.js';
import { diaryEntries, notes } from '../db/schema/index.js';
import { ErrorType, nonRetryable } from './errors.js';
import type { LlmRouter } from './llm/index.js';

export interface TaskContext {
  db: Db;
  llm?: LlmRouter;
  agentId: string;
  campaignId: string;
  /** campaign/<id>/p<i>/t<j>: stable across retries. */
  key: string;
  /** The budget the task's LLM calls are charged to (the campaign's); unset: the agent's. */
  lifeforce?: { budgetId: string };
  signal?: AbortSignal;
  heartbeat?: (details?: unknown) => void;
}

export interface TaskType<A extends z.ZodType = z.ZodType> {
  args: A;
  help: string;
  run(ctx: TaskContext, args: z.output<A>): Promise<Record<string, unknown>>;
  /** Undo a completed run; must be idempotent. No compensate = nothing to undo. */
  compensate?(ctx: TaskContext, args: z.output<A>, result: Record<string, unknown> | undefined): Promise<void>;
}

const taskType = <A extends z.ZodType>(t: TaskType<A>): TaskType => t as unknown as TaskType;

/** The built-in task types. */
export const builtinTaskTypes: Record<string, TaskType> = {
  note: taskType({
    args: z.strictObject({
      text: z.string().trim().min(1).max(16_000),
      priority: z.number().int().min(0).max(10).default(1),
      tags: z.array(z.string().min(1).max(40)).max(20).default([]),
    }),
    help: 'leave a note for the agent (it reads it next tick); undone by hiding it',
    async run(ctx, args) {
      const noteId = await addNoteOnce(ctx.db, {
        agentId: ctx.agentId,
        direction: 'in',
        source: 'system',
        sender: `campaign/${ctx.campaignId}`,
        priority: args.priority,
        tags: args.tags,
        text: args.text,
        idempotencyKey: `${ctx.key}:note`,
      });
      return { noteId };
    },
    async compensate(ctx) {
      await ctx.db
        .update(notes)
        .set({ hidden: true })
        .where(eq(notes.idempotencyKey, `${ctx.key}:note`));
    },
  }),

  'diary.add': taskType({
    args: z.strictObject({
      title: z.string().trim().min(1).max(200),
      content: z.string().trim().min(1).max(20_000),
      tags: z.array(z.string().min(1).max(64)).max(19).default([]),
    }),
    help: 'write a diary entry for the agent; undone by archiving it',
    async run(ctx, args) {
      // The key travels as a tag: a retry finds the entry its first attempt wrote.
      const keyTag = `campaign-task:${ctx.key}`;
      const existing = await ctx.db
        .select({ id: diaryEntries.id })
        .from(diaryEntries)
        .where(and(eq(diaryEntries.agentId, ctx.agentId), arrayContains(diaryEntries.tags, [keyTag])));
      if (existing[0]) return { diaryId: existing[0].id };
      const [row] = await ctx.db
        .insert(diaryEntries)
        .values({ agentId: ctx.agentId, title: args.title, content: args.content, tags: [...args.tags, keyTag] })
        .returning({ id: diaryEntries.id });
      return { diaryId: row!.id };
    },
    async compensate(ctx) {
      await ctx.db
        .update(diaryEntries)
        .set({ archivedAt: new Date() })
        .where(
          and(
            eq(diaryEntries.agentId, ctx.agentId),
            arrayContains(diaryEntries.tags, [`campaign-task:${ctx.key}`]),
            isNull(diaryEntries.archivedAt),
          ),
        );
    },
  }),

  'llm.ask': taskType({
    args: z.strictObject({
      prompt: z.string().trim().min(1).max(20_000),
      role: z.enum(['agent', 'task', 'oversight']).default('task'),
      maxTokens: z.number().int().min(1).max(8192).optional(),
    }),
    help: "ask one of the agent's LLMs; the answer is the task's result",
    async run(ctx, args) {
      // Not Unavailable: the campaign waits out an outage, and this worker's wiring will not change.
      if (!ctx.llm) throw nonRetryable(ErrorType.Unexpected, 'llm.ask: no LLM router on this worker');
      const r = await ctx.llm.chat({
        agentId: ctx.agentId,
        role: args.role,
        messages: [{ role: 'user', content: args.prompt }],
        params: args.maxTokens ? { maxTokens: args.maxTokens } : undefined,
        idempotencyKey: `${ctx.key}:ask`,
        purpose: 'campaign',
        lifeforce: ctx.lifeforce,
        signal: ctx.signal,
      });
      return { answer: r.text.slice(0, 8192), model: `${r.provider}:${r.model}` };
    },
  }),

  wait: taskType({
    args: z.strictObject({ ms: z.number().int().min(0).max(3_600_000) }),
    help: 'wait N ms in an activity (an external job in flight), heartbeating',
    async run(ctx, args) {
      const started = Date.now();
      while (Date.now() - started < args.ms) {
        ctx.signal?.throwIfAborted();
        ctx.heartbeat?.({ waitedMs: Date.now() - started });
        await new Promise((r) => setTimeout(r, Math.min(500, args.ms - (Date.now() - started))));
      }
      return { waitedMs: Date.now() - started };
    },
  }),
};

/** Validate a task's args against its type; returns the parsed args or a message naming the fields. */
export function parseTaskArgs(
  registry: Record<string, TaskType>,
  type: string,
  args: unknown,
): { ok: true; args: unknown } | { ok: false; reason: string } {
  const t = registry[type];
  if (!t)
    return { ok: false, reason: `unknown task type '${type}' (known: ${Object.keys(registry).sort().join(', ')})` };
  const r = t.args.safeParse(args);
  if (!r.success) return { ok: false, reason: `${type}: ${formatIssues(r.error, 'args')}` };
  return { ok: true, args: r.data };
}
