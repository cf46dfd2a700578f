/** The loop's message handlers: the status query, notes, wake, pause/resume/stop, config. */
import { setHandler } from '@temporalio/workflow';
import { formatIssues } from '../../core/zod-issues.js';
import { firstApplication } from '../lib/loop-state.js';
import { handlerText } from '../lib/ui-text.js';
import type { Loop } from './loop.js';
import { addNoteInput, addNoteUpdate, commandIdOf, pauseSignal, resumeSignal, setConfigInput, setConfigUpdate, statusQuery, stopSignal, wakeSignal } from './messages.js';
import { addNote } from './notes.js';

export function registerHandlers(loop: Loop): void {
  const { state } = loop;
  const text = handlerText.agent;
  setHandler(statusQuery, () => loop.status(), { description: text.status });
  setHandler(addNoteUpdate, (note) => addNote(loop, note), {
    description: text.addNote,
    validator: (note) => {
      const r = addNoteInput.safeParse(note);
      if (!r.success) throw new Error(`invalid note: ${formatIssues(r.error, 'note')}`);
    },
  });
  setHandler(wakeSignal, () => {
    state.pendingWake = true;
  }, { description: text.wake });
  // A bus command's pause or resume is applied once per agent (its id is remembered).
  setHandler(pauseSignal, (arg) => {
    if (firstApplication(state.appliedCommands, commandIdOf(arg))) state.paused = true;
  }, { description: text.pause });
  setHandler(resumeSignal, (arg) => {
    if (firstApplication(state.appliedCommands, commandIdOf(arg))) state.paused = false;
  }, { description: text.resume });
  setHandler(stopSignal, () => {
    loop.stopRequested = true;
  }, { description: text.stop });
  setHandler(
    setConfigUpdate,
    (patch) => {
      const { idle, ...rest } = setConfigInput.parse(patch);
      Object.assign(state.settings, Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)));
      if (idle) state.settings.idle = { ...state.settings.idle, ...idle };
      return state.settings;
    },
    {
      description: text.setConfig,
      validator: (patch) => {
        const r = setConfigInput.strict().safeParse(patch);
        if (!r.success) throw new Error(`invalid config: ${formatIssues(r.error, 'config')}`);
      },
    },
  );
}
