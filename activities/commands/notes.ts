/**
 * Notes (context 6): read incoming ones, send outgoing ones. From an auxiliary loop a note
 * goes to the main loop (an incoming note, `source='llm:task'`, with its `task_id`).
 */
import { clipText, oneLine } from '../../core/sanitize.js';
import { and, desc, eq, inArray, isNull } from 'drizzle-orm';
import { notes } from '../../db/schema/index.js';
import { CommandError, listResult, notFound, tagSuffix, type FamilyTypes, type HandlerMap } from './shared.js';

export const noteHandlers: HandlerMap<FamilyTypes<'notes'>> = {
  async 'notes.list'({ tx, agentId }, a) {
    const direction = a.direction ?? 'in';
    const rows = await tx
      .select()
      .from(notes)
      .where(
        and(
          eq(notes.agentId, agentId),
          eq(notes.direction, direction),
          eq(notes.hidden, false),
          a.unread ? isNull(notes.readAt) : undefined,
          a.source ? eq(notes.source, a.source) : undefined,
        ),
      )
      .orderBy(desc(notes.priority), desc(notes.id))
      .limit(a.limit ?? 10);
    return listResult(
      direction === 'in' ? 'incoming notes' : 'sent notes',
      rows.map(
        (n) =>
          `#${n.id} [${n.source}${n.sender ? ` ${n.sender}` : ''}${n.recipient ? ` → ${n.recipient}` : ''}] (p ${n.priority})${n.readAt ? '' : ' unread'}${tagSuffix(n.tags)} ${oneLine(n.text, 160)}`,
      ),
    );
  },
  async 'notes.read'({ tx, agentId }, a) {
    const [n] = await tx
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, agentId), eq(notes.id, a.id), eq(notes.hidden, false)));
    if (!n) notFound('note', a.id);
    return {
      message: `note #${n.id} from ${n.sender ?? n.source}`,
      text: `#${n.id} ${n.direction === 'in' ? 'from' : 'to'} ${n.direction === 'in' ? (n.sender ?? n.source) : (n.recipient ?? 'user')} (${n.source}, p ${n.priority}, ${n.createdAt.toISOString()})${tagSuffix(n.tags)}\n${n.text}`,
    };
  },
  async 'notes.send'({ tx, agentId, tick, mode, taskId, logCmdId }, a) {
    const fromTask = mode === 'task';
    const recipient = a.recipient ?? (fromTask ? 'agent' : 'user');
    // A task loop's note to its agent is an incoming note of the main loop.
    const direction = fromTask && recipient === 'agent' ? 'in' : 'out';
    const [n] = await tx
      .insert(notes)
      .values({
        agentId,
        direction,
        source: fromTask ? 'llm:task' : 'agent',
        sender: fromTask ? `task/${taskId}` : agentId,
        recipient,
        priority: a.priority ?? 0,
        tags: a.tags ?? [],
        text: a.text,
        taskId: fromTask ? (taskId ?? null) : null,
        // Belt and braces next to command_log: the note itself is unique per command.
        idempotencyKey: `cmd/${agentId}/${tick}/${logCmdId}`,
      })
      .returning({ id: notes.id });
    return { message: clipText(`note #${n!.id} sent to ${recipient}`, 200) };
  },
  async 'notes.mark_read'({ tx, agentId, tick }, a) {
    const wanted = [...new Set(a.ids)];
    const rows = await tx
      .update(notes)
      .set({ readAt: new Date(), tickSeen: tick })
      .where(
        and(eq(notes.agentId, agentId), eq(notes.direction, 'in'), isNull(notes.readAt), inArray(notes.id, wanted)),
      )
      .returning({ id: notes.id });
    if (!rows.length) {
      const exists = await tx
        .select({ id: notes.id })
        .from(notes)
        .where(and(eq(notes.agentId, agentId), eq(notes.direction, 'in'), inArray(notes.id, wanted)));
      if (!exists.length) throw new CommandError(`no incoming note #${wanted.join(', #')}`);
    }
    return { message: `${rows.length} note(s) marked read` };
  },
};
