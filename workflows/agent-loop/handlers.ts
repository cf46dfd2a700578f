/** The loop's message handlers: the status query, notes, wake, pause/resume/stop, config. */
import { ApplicationFailure, currentUpdateInfo, setHandler, workflowInfo } from '@temporalio/workflow';
import { formatIssues } from '../../core/zod-issues.js';
import { firstApplication } from '../lib/loop-state.js';
import { handlerText } from '../lib/ui-text.js';
import type { Loop } from './loop.js';
import { failureMessage, isInfraFailure } from '../lib/infra.js';
import { records } from './proxies.js';
import {
  addNoteInput,
  addNoteUpdate,
  applyAgentFileUpdate,
  commandIdOf,
  type ApplyAgentFileRequest,
  pauseSignal,
  resumeSignal,
  setConfigInput,
  setConfigUpdate,
  statusQuery,
  stopSignal,
  wakeSignal,
} from './messages.js';
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
  setHandler(
    wakeSignal,
    () => {
      state.pendingWake = true;
    },
    { description: text.wake },
  );
  // A bus command's pause or resume is applied once per agent (its id is remembered).
  setHandler(
    pauseSignal,
    (arg) => {
      if (firstApplication(state.appliedCommands, commandIdOf(arg))) state.paused = true;
    },
    { description: text.pause },
  );
  setHandler(
    resumeSignal,
    (arg) => {
      if (firstApplication(state.appliedCommands, commandIdOf(arg))) state.paused = false;
    },
    { description: text.resume },
  );
  setHandler(
    stopSignal,
    () => {
      loop.stopRequested = true;
    },
    { description: text.stop },
  );
  setHandler(setConfigUpdate, (patch) => loop.applySettings(setConfigInput.parse(patch)), {
    description: text.setConfig,
    validator: (patch) => {
      const r = setConfigInput.strict().safeParse(patch);
      if (!r.success) throw new Error(`invalid config: ${formatIssues(r.error, 'config')}`);
    },
  });
  setHandler(applyAgentFileUpdate, (req) => applyAgentFile(loop, req), {
    description: text.applyAgentFile,
    validator: (req) => {
      const doc = (req as Partial<ApplyAgentFileRequest> | null)?.document;
      if (doc === null || typeof doc !== 'object' || Array.isArray(doc))
        throw new Error('invalid request: `document` is the agent file (an object)');
      if (doc.id !== loop.agentId)
        throw new Error(`invalid request: the file is for agent '${String(doc.id)}', this is '${loop.agentId}'`);
    },
  });
}

/**
 * The `applyAgentFile` update: the activity checks, compares and writes the file (or only
 * compares, on a dry run); its loop settings are then put in force here. Nothing is queued: with
 * the database away the update fails, saying so, and nothing was applied.
 */
async function applyAgentFile(loop: Loop, req: ApplyAgentFileRequest) {
  try {
    // The update id makes the write idempotent: a retried activity finds the first attempt's record.
    const updateId = currentUpdateInfo()?.id ?? `${workflowInfo().runId}:${loop.state.tick}`;
    const r = await records.applyAgentFile({
      agentId: loop.agentId,
      requestKey: `${loop.selfId}:file:${updateId}`,
      document: req.document,
      appliedBy: req.appliedBy ?? 'temporal-ui',
      ...(req.dryRun ? { dryRun: true } : {}),
      ...(req.overwriteDrift ? { overwriteDrift: true } : {}),
      ...(req.source ? { source: req.source } : {}),
      ...(req.deployment ? { deployment: req.deployment } : {}),
      ...(req.batchAgents?.length ? { batchAgents: req.batchAgents } : {}),
    });
    if (!req.dryRun) {
      loop.applySettings(r.loopSettings);
      loop.state.pendingWake = true;
    }
    return r;
  } catch (err) {
    const why = isInfraFailure(err)
      ? `the database is unavailable (${failureMessage(err)}); nothing was applied, send it again later`
      : failureMessage(err);
    throw ApplicationFailure.create({ type: 'AgentFileRefused', message: why, nonRetryable: true });
  }
}
