/**
 * Notes to the agent: stored before `addNote` answers, queued in the workflow (durable in its
 * history) while the database is away and stored once, in order, when it returns; audio notes
 * transcribed by a speech child whose text comes back as a note.
 */
import {
  ApplicationFailure,
  condition,
  currentUpdateInfo,
  deprecatePatch,
  log,
  patched,
  workflowInfo,
} from '@temporalio/workflow';
import { workflowIds } from '../../core/ids.js';
import { maxQueuedNotes, type QueuedNote } from '../lib/loop-state.js';
import { failureMessage, isInfraFailure } from '../lib/infra.js';
import { speechText } from '../lib/ui-text.js';
import { startDetached } from './children.js';
import type { Loop } from './loop.js';
import { addNoteInput, type AddNoteInput, type AddNoteResult } from './messages.js';
import { records } from './proxies.js';
import type { speechWorkflow } from '../speech.js';

/** The `addNote` update: store the note, or queue it while the database is away. */
export async function addNote(loop: Loop, note: AddNoteInput): Promise<AddNoteResult> {
  const { state, agentId } = loop;
  const { audio, transcribedFrom, text, ...parsed } = addNoteInput.parse(note);
  // The update id makes the write idempotent: a retried activity finds the first note.
  const updateId = currentUpdateInfo()?.id ?? `${workflowInfo().runId}:${state.counters.notesReceived}`;
  const queued: QueuedNote = {
    ...parsed,
    text: text ?? '',
    ...(transcribedFrom ? { audio: transcribedFrom } : {}),
    idempotencyKey: `${loop.selfId}:note:${updateId}`,
  };
  // A note sent as a new agent starts waits for loopStarted, which writes the agent's row (the
  // note's row needs it); while the database is away at the start it is queued as below.
  if (!loop.started && !loop.input.carryOver && patched('note-after-start-v1'))
    await condition(() => loop.started || loop.degraded !== null);
  if (audio) {
    // speech-v1 (retired): histories from before it never carry audio (the validator refused it).
    deprecatePatch('speech-v1');
    return transcribeNote(loop, audio, parsed, updateId);
  }
  // Notes keep their order: while earlier ones wait for the database, this one waits too.
  if (state.pendingNotes.length === 0) {
    try {
      const { noteId } = await records.recordNote({ agentId, ...queued });
      state.counters.notesReceived++;
      state.pendingWake = true;
      return { noteId };
    } catch (err) {
      if (!isInfraFailure(err)) throw refused(`note not stored: ${failureMessage(err)}`);
    }
  }
  if (state.pendingNotes.length >= maxQueuedNotes) {
    throw refused(
      `note not stored: the database is unavailable and ${maxQueuedNotes} notes already wait for it; send it again later`,
    );
  }
  state.pendingNotes.push(queued);
  state.counters.notesReceived++;
  return {
    noteId: null,
    queued: true,
    message: `the database is unavailable: note queued (${state.pendingNotes.length} waiting); it is stored when the database returns`,
  };
}

/** Store the notes taken while the database was away, in order, each once (by its key). */
export async function flushNotes(loop: Loop): Promise<void> {
  const { state } = loop;
  while (state.pendingNotes.length > 0) {
    const note = state.pendingNotes[0]!;
    try {
      await loop.rideOut('recordNote', () => records.recordNote({ agentId: loop.agentId, ...note }));
    } catch (err) {
      log.warn('queued note refused by the database', { error: failureMessage(err) });
    }
    state.pendingNotes.shift();
    state.pendingWake = true;
  }
}

function refused(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: 'NoteRefused', message, nonRetryable: true });
}

/**
 * An audio note: check that the file is audio the engine can take (the update fails, naming
 * the problem, when it is not), then start its transcription as a detached child. Its text
 * comes back through `addNote`, which stores it and wakes the loop.
 */
async function transcribeNote(
  loop: Loop,
  audio: { path: string; language?: string },
  note: Pick<QueuedNote, 'priority' | 'tags' | 'source' | 'sender'>,
  updateId: string,
): Promise<AddNoteResult> {
  const { agentId } = loop;
  try {
    await records.speechCheckAudio({ path: audio.path });
  } catch (err) {
    const why = isInfraFailure(err)
      ? `the audio cannot be checked now (${failureMessage(err)}); send it again later`
      : failureMessage(err);
    throw refused(`audio note not taken: ${why}`);
  }
  const workflowId = workflowIds.speech(agentId, 'note', updateId);
  const tags = note.tags.filter((t) => t !== 'audio').slice(0, 19);
  const args: Parameters<typeof speechWorkflow> = [
    {
      kind: 'transcribe',
      agentId,
      audioPath: audio.path,
      ...(audio.language ? { language: audio.language } : {}),
      note: { priority: note.priority, tags, source: note.source, ...(note.sender ? { sender: note.sender } : {}) },
    },
  ];
  const failed = await startDetached<typeof speechWorkflow>(
    loop,
    'speechWorkflow',
    { workflowId, args, ...speechText({ agentId, kind: 'transcribe', audioPath: audio.path }) },
    'transcription',
    { workflowId },
  );
  if (failed !== null)
    throw refused(`audio note not taken: the transcription did not start (${failureMessage(failed)})`);
  return { noteId: null, transcribing: { workflowId } };
}
