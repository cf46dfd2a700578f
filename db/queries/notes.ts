/**
 * Notes written once per idempotency key: a retry (of an activity, a campaign task, an
 * escalation's answer) finds the note its first attempt wrote instead of adding another.
 */
import { eq } from 'drizzle-orm';
import { notes, type NewNote } from '../schema/index.js';
import type { Queryable } from './abstracts.js';

/** Insert the note unless one with its key exists; returns the id of the note under that key. */
export async function addNoteOnce(q: Queryable, note: NewNote & { idempotencyKey: string }): Promise<number> {
  const [inserted] = await q
    .insert(notes)
    .values(note)
    .onConflictDoNothing({ target: notes.idempotencyKey })
    .returning({ id: notes.id });
  if (inserted) return inserted.id;
  const [found] = await q.select({ id: notes.id }).from(notes).where(eq(notes.idempotencyKey, note.idempotencyKey));
  return found!.id;
}
