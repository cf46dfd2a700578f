/**
 * Goals (with the goal_links hierarchy), tasks, and llm_task (auxiliary loops on a task).
 */
import { clipText, oneLine } from '../../core/sanitize.js';
import { and, asc, count, desc, eq, notInArray, or } from 'drizzle-orm';
import { abstractTriggerKey, closes } from '../../core/abstracts.js';
import { workflowIds } from '../../core/ids.js';
import { makeAutoAbstract, type AbstractTrigger } from '../../db/queries/abstracts.js';
import { goalLinks, goals, tasks, type Task } from '../../db/schema/index.js';
import {
  CommandError,
  listResult,
  notFound,
  tagSuffix,
  type FamilyTypes,
  type HandlerContext,
  type HandlerMap,
  type Tx,
} from './shared.js';

const now = () => new Date();
const finishedTaskStatuses = ['done', 'failed', 'cancelled'] as const;

async function requireGoal(tx: Tx, agentId: string, id: number) {
  const [g] = await tx
    .select()
    .from(goals)
    .where(and(eq(goals.agentId, agentId), eq(goals.id, id)));
  if (!g) notFound('goal', id);
  return g;
}

async function requireTask(tx: Tx, agentId: string, id: number): Promise<Task> {
  const [t] = await tx
    .select()
    .from(tasks)
    .where(and(eq(tasks.agentId, agentId), eq(tasks.id, id)));
  if (!t) notFound('task', id);
  return t;
}

/**
 * A goal or task that closes gets an abstract of the work since the last one, in the command's
 * transaction: it exists exactly when the status change does, and a retried command (found in
 * the command log) makes no second one.
 */
async function closingAbstract(ctx: HandlerContext, trigger: AbstractTrigger): Promise<string> {
  const r = await makeAutoAbstract(ctx.tx, {
    agentId: ctx.agentId,
    trigger,
    triggerKey: abstractTriggerKey(trigger, ctx.tick, ctx.mode === 'task' ? ctx.taskId : undefined),
  });
  return r.created && r.abstractId !== null ? `; abstract #${r.abstractId}` : '';
}

const renderTask = (t: Task) =>
  `#${t.id}${t.pinned ? ' [pinned]' : ''} [${t.status}] (p ${t.priority}) ${oneLine(t.title, 100)}${t.goalId ? ` (goal #${t.goalId})` : ''}${t.replStatus ? ` loop:${t.replStatus}` : ''}${t.frozen ? ' FROZEN' : ''}`;

export const goalHandlers: HandlerMap<FamilyTypes<'goals'>> = {
  async 'goals.add'({ tx, agentId }, a) {
    if (a.parent_id !== undefined) await requireGoal(tx, agentId, a.parent_id);
    const [g] = await tx
      .insert(goals)
      .values({
        agentId,
        title: a.title,
        description: a.description ?? null,
        constraints: a.constraints ?? null,
        successCriteria: a.success_criteria ?? null,
        priority: a.priority ?? 0,
        tags: a.tags ?? [],
      })
      .returning({ id: goals.id });
    if (a.parent_id !== undefined) {
      await tx
        .insert(goalLinks)
        .values({ agentId, parentGoalId: a.parent_id, childGoalId: g!.id, relation: 'subgoal' });
    }
    return { message: `goal #${g!.id} added${a.parent_id !== undefined ? ` as a subgoal of #${a.parent_id}` : ''}` };
  },
  async 'goals.list'({ tx, agentId }, a) {
    const status = a.status ?? 'active';
    const rows = await tx
      .select()
      .from(goals)
      .where(and(eq(goals.agentId, agentId), status === 'all' ? undefined : eq(goals.status, status)))
      .orderBy(desc(goals.priority), asc(goals.id))
      .limit(a.limit ?? 20);
    return listResult(
      status === 'all' ? 'goals' : `${status} goals`,
      rows.map((g) => `#${g.id} [${g.status}] (p ${g.priority}) ${oneLine(g.title, 100)}${tagSuffix(g.tags)}`),
    );
  },
  async 'goals.read'({ tx, agentId }, a) {
    const g = await requireGoal(tx, agentId, a.id);
    const rels = await tx
      .select()
      .from(goalLinks)
      .where(
        and(eq(goalLinks.agentId, agentId), or(eq(goalLinks.parentGoalId, g.id), eq(goalLinks.childGoalId, g.id))),
      );
    const taskCounts = await tx
      .select({ status: tasks.status, n: count() })
      .from(tasks)
      .where(and(eq(tasks.agentId, agentId), eq(tasks.goalId, g.id)))
      .groupBy(tasks.status);
    const lines = [
      `#${g.id} [${g.status}] (p ${g.priority}) ${g.title}${tagSuffix(g.tags)}`,
      g.description ? `Description: ${g.description}` : null,
      g.constraints ? `Constraints: ${g.constraints}` : null,
      g.successCriteria ? `Success criteria: ${g.successCriteria}` : null,
      g.failureReason ? `Failure reason: ${g.failureReason}` : null,
      `Interruptions: ${g.interruptions}`,
      `Links: ${rels.length ? rels.map((l) => (l.parentGoalId === g.id ? `→ #${l.childGoalId} (${l.relation})` : `← #${l.parentGoalId} (${l.relation})`)).join(', ') : 'none'}`,
      `Tasks: ${taskCounts.length ? taskCounts.map((c) => `${c.n} ${c.status}`).join(', ') : 'none'}`,
    ];
    return { message: `goal #${g.id}: ${oneLine(g.title, 100)}`, text: lines.filter((l) => l !== null).join('\n') };
  },
  async 'goals.update'({ tx, agentId }, a) {
    const rows = await tx
      .update(goals)
      .set({
        title: a.title,
        description: a.description,
        constraints: a.constraints,
        successCriteria: a.success_criteria,
        priority: a.priority,
        tags: a.tags,
      })
      .where(and(eq(goals.agentId, agentId), eq(goals.id, a.id)))
      .returning({ id: goals.id });
    if (!rows[0]) notFound('goal', a.id);
    return { message: `goal #${a.id} updated` };
  },
  async 'goals.status'(ctx, a) {
    const { tx, agentId } = ctx;
    const g = await requireGoal(tx, agentId, a.id);
    const set: Partial<typeof goals.$inferInsert> = { status: a.status };
    if (a.status === 'completed') set.completedAt = now();
    if (a.status === 'failed') {
      set.failedAt = now();
      set.failureReason = a.failure_reason ?? null;
    }
    if (a.status === 'paused' && g.status === 'active') set.interruptions = g.interruptions + 1;
    await tx.update(goals).set(set).where(eq(goals.id, g.id));
    const digest = closes('goal', g.status, a.status) ? await closingAbstract(ctx, 'goal_closed') : '';
    return {
      message: `goal #${g.id} ${g.status} → ${a.status}${a.failure_reason ? ` (${clipText(a.failure_reason, 80)})` : ''}${digest}`,
    };
  },
  async 'goals.link'({ tx, agentId }, a) {
    if (a.parent_id === a.child_id) throw new CommandError('a goal can not be linked to itself');
    await requireGoal(tx, agentId, a.parent_id);
    await requireGoal(tx, agentId, a.child_id);
    const relation = a.relation ?? 'subgoal';
    const rows = await tx
      .insert(goalLinks)
      .values({ agentId, parentGoalId: a.parent_id, childGoalId: a.child_id, relation })
      .onConflictDoNothing()
      .returning({ id: goalLinks.id });
    return {
      message: rows[0]
        ? `goal #${a.parent_id} -[${relation}]-> #${a.child_id} linked`
        : `goal #${a.parent_id} -[${relation}]-> #${a.child_id} was already linked`,
    };
  },
  async 'goals.unlink'({ tx, agentId }, a) {
    const rows = await tx
      .delete(goalLinks)
      .where(
        and(
          eq(goalLinks.agentId, agentId),
          eq(goalLinks.parentGoalId, a.parent_id),
          eq(goalLinks.childGoalId, a.child_id),
          a.relation ? eq(goalLinks.relation, a.relation) : undefined,
        ),
      )
      .returning({ id: goalLinks.id });
    if (!rows.length) throw new CommandError(`no link from goal #${a.parent_id} to #${a.child_id}`);
    return { message: `${rows.length} goal link(s) #${a.parent_id} → #${a.child_id} removed` };
  },
};

async function taskSet(tx: Tx, agentId: string, id: number, set: Partial<typeof tasks.$inferInsert>, done: string) {
  const rows = await tx
    .update(tasks)
    .set(set)
    .where(and(eq(tasks.agentId, agentId), eq(tasks.id, id)))
    .returning({ id: tasks.id });
  if (!rows[0]) notFound('task', id);
  return { message: `task #${id} ${done}` };
}

export const taskHandlers: HandlerMap<FamilyTypes<'tasks'>> = {
  async 'tasks.add'({ tx, agentId }, a) {
    if (a.goal_id !== undefined) await requireGoal(tx, agentId, a.goal_id);
    const [t] = await tx
      .insert(tasks)
      .values({
        agentId,
        title: a.title,
        description: a.description ?? null,
        goalId: a.goal_id ?? null,
        priority: a.priority ?? 0,
        pinned: a.pinned ?? false,
        tags: a.tags ?? [],
      })
      .returning({ id: tasks.id });
    return { message: `task #${t!.id} added` };
  },
  async 'tasks.list'({ tx, agentId }, a) {
    const status = a.status;
    const rows = await tx
      .select()
      .from(tasks)
      .where(
        and(
          eq(tasks.agentId, agentId),
          status === undefined
            ? notInArray(tasks.status, [...finishedTaskStatuses])
            : status === 'all'
              ? undefined
              : eq(tasks.status, status),
          a.goal_id !== undefined ? eq(tasks.goalId, a.goal_id) : undefined,
        ),
      )
      // Pinned first, then by priority.
      .orderBy(desc(tasks.pinned), desc(tasks.priority), asc(tasks.id))
      .limit(a.limit ?? 20);
    return listResult(
      status === undefined ? 'unfinished tasks' : status === 'all' ? 'tasks' : `${status} tasks`,
      rows.map(renderTask),
    );
  },
  async 'tasks.read'({ tx, agentId }, a) {
    const t = await requireTask(tx, agentId, a.id);
    const text = [
      renderTask(t),
      t.description ?? '',
      t.lastError ? `Last loop error: ${t.lastError}` : null,
      tagSuffix(t.tags).trim() || null,
    ]
      .filter((l): l is string => l !== null && l !== '')
      .join('\n');
    return { message: `task #${t.id}: ${oneLine(t.title, 100)}`, text };
  },
  async 'tasks.update'({ tx, agentId }, a) {
    if (a.goal_id !== undefined && a.goal_id !== null) await requireGoal(tx, agentId, a.goal_id);
    return taskSet(
      tx,
      agentId,
      a.id,
      { title: a.title, description: a.description, goalId: a.goal_id, tags: a.tags },
      'updated',
    );
  },
  'tasks.pin': ({ tx, agentId }, a) => taskSet(tx, agentId, a.id, { pinned: true }, 'pinned'),
  'tasks.unpin': ({ tx, agentId }, a) => taskSet(tx, agentId, a.id, { pinned: false }, 'unpinned'),
  'tasks.priority': ({ tx, agentId }, a) =>
    taskSet(tx, agentId, a.id, { priority: a.priority }, `priority set to ${a.priority}`),
  async 'tasks.status'(ctx, a) {
    const { tx, agentId } = ctx;
    const before = await requireTask(tx, agentId, a.id);
    const finished = (finishedTaskStatuses as readonly string[]).includes(a.status);
    const r = await taskSet(
      tx,
      agentId,
      a.id,
      { status: a.status, completedAt: finished ? now() : null },
      `status set to ${a.status}`,
    );
    return closes('task', before.status, a.status)
      ? { ...r, message: `${r.message}${await closingAbstract(ctx, 'task_closed')}` }
      : r;
  },
};

export const llmTaskHandlers: HandlerMap<'llm_task.start' | 'llm_task.stop'> = {
  async 'llm_task.start'({ tx, agentId }, a) {
    let task: Task;
    if (a.task_id !== undefined) {
      task = await requireTask(tx, agentId, a.task_id);
      if (task.frozen)
        throw new CommandError(
          `task #${task.id} is frozen for review (its loop failed: ${clipText(task.lastError ?? 'unknown error', 80)})`,
        );
      if ((finishedTaskStatuses as readonly string[]).includes(task.status))
        throw new CommandError(`task #${task.id} is ${task.status}`);
      if (task.replStatus === 'running')
        throw new CommandError(`task #${task.id} already has a running loop (llm_task.stop it first)`);
    } else {
      if (a.goal_id !== undefined) await requireGoal(tx, agentId, a.goal_id);
      const [created] = await tx
        .insert(tasks)
        .values({ agentId, title: a.title!, description: a.description ?? null, goalId: a.goal_id ?? null })
        .returning();
      task = created!;
    }
    // Marked running in the same transaction as the command: if the workflow dies before the
    // child starts, the loop's restart finds the task running and resumes it.
    await tx
      .update(tasks)
      .set({
        replStatus: 'running',
        replWorkflowId: workflowIds.task(agentId, task.id),
        status: task.status === 'open' ? 'in_progress' : task.status,
        lastError: null,
      })
      .where(eq(tasks.id, task.id));
    return {
      message: `auxiliary loop on task #${task.id} '${clipText(task.title, 60)}' starting`,
      effects: [
        {
          kind: 'startTaskLoop',
          taskId: task.id,
          title: task.title,
          ...(a.max_ticks !== undefined ? { maxTicks: a.max_ticks } : {}),
        },
      ],
    };
  },
  async 'llm_task.stop'({ tx, agentId }, a) {
    const task = await requireTask(tx, agentId, a.task_id);
    await tx.update(tasks).set({ replStatus: 'stopped' }).where(eq(tasks.id, task.id));
    return {
      message:
        task.replStatus === 'running'
          ? `auxiliary loop on task #${task.id} stopping`
          : `task #${task.id} had no running loop (stop sent anyway)`,
      effects: [{ kind: 'stopTaskLoop', taskId: task.id }],
    };
  },
};
