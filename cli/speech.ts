/**
 * `mindloop note <agent> --audio file.wav [--lang de] [--wait]`: an audio note. The file is
 * checked (a WAV with audio in it), copied under `<MINDLOOP_DATA_DIR>/speech/<agent>/in/` where
 * the speech workers read it, and a speech workflow transcribes it into the agent's note.
 */
import { randomUUID } from 'node:crypto';
import { copyFile, mkdir, open } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { WorkflowFailedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { workflowIds } from '../core/ids.js';
import { parseWavHeader, wavHeadBytes, type WavInfo } from '../core/speech/wav.js';
import { workflowTaskQueue } from '../runtime/workflow-starts.js';
import { workflowFailover } from '../workflows/lib/activity-options.js';
import type { SpeechResult, speechWorkflow } from '../workflows/speech.js';
import { speechText } from '../workflows/lib/ui-text.js';
import { rootMessage } from '../core/failure.js';

/** Read a WAV's header, or fail saying what the file is not (nothing is sent then). */
async function readWav(file: string): Promise<WavInfo> {
  let handle;
  try {
    handle = await open(file, 'r');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new Error(
      `${file}: ${code === 'ENOENT' ? 'no such file' : `cannot read it (${code ?? (err as Error).message})`}; nothing was sent`,
    );
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new Error(`${file}: not a file; nothing was sent`);
    const head = new Uint8Array(Math.min(wavHeadBytes, info.size));
    await handle.read(head, 0, head.length, 0);
    const parsed = parseWavHeader(head, info.size);
    if (!parsed.ok) throw new Error(`${file}: ${parsed.reason} (${parsed.code}); give a WAV file; nothing was sent`);
    return parsed.wav;
  } finally {
    await handle.close();
  }
}

interface AudioNoteOptions {
  agentId: string;
  file: string;
  dataDir: string;
  language?: string;
  priority?: number;
  tags?: string[];
  taskQueue?: string;
}

/** Check the file, copy it where the speech workers read it, and start its transcription. */
export async function startAudioNote(
  client: Client,
  o: AudioNoteOptions,
): Promise<{ workflowId: string; audioPath: string; wav: WavInfo }> {
  const wav = await readWav(o.file);
  // The note needs the agent: one whose loop never ran has no row to hang it from.
  try {
    await client.workflow.getHandle(workflowIds.agent(o.agentId)).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError)
      throw new Error(`no agent ${o.agentId}: start it with \`mindloop start ${o.agentId}\` (nothing was sent)`);
    throw err;
  }
  const id = randomUUID();
  const dir = join(resolve(o.dataDir), 'speech', o.agentId, 'in');
  await mkdir(dir, { recursive: true });
  const audioPath = join(dir, `${id}.wav`);
  await copyFile(o.file, audioPath);
  const workflowId = workflowIds.speech(o.agentId, 'cli', id);
  await client.workflow.start<typeof speechWorkflow>('speechWorkflow', {
    workflowId,
    taskQueue: o.taskQueue ?? workflowTaskQueue,
    ...workflowFailover,
    args: [
      {
        kind: 'transcribe',
        agentId: o.agentId,
        audioPath,
        ...(o.language ? { language: o.language } : {}),
        note: { priority: o.priority ?? 1, tags: o.tags ?? [], source: 'user' },
      },
    ],
    ...speechText({ agentId: o.agentId, kind: 'transcribe', audioPath }),
  });
  return { workflowId, audioPath, wav };
}

/** Wait for a speech workflow's result; a refusal becomes an error naming the problem. */
export async function speechOutcome(client: Client, workflowId: string): Promise<SpeechResult> {
  try {
    return await client.workflow.getHandle<typeof speechWorkflow>(workflowId).result();
  } catch (err) {
    if (err instanceof WorkflowFailedError) throw new Error(rootMessage(err));
    throw err;
  }
}

/** One line per outcome, for a person. */
export function formatSpeechResult(r: SpeechResult): string {
  const engine = `${r.backend}${r.device ? ` on ${r.device}` : ''}, ${r.queue}; ${r.durationS.toFixed(1)} s, ${r.charged} LF`;
  if (r.kind === 'speak') return `spoke ${r.audioPath} (${engine})`;
  const where =
    r.delivered === 'loop'
      ? 'delivered to the loop'
      : r.delivered === 'queued'
        ? 'queued by the loop'
        : 'stored (no loop running)';
  return `note ${r.noteId === null ? '(queued)' : `#${r.noteId}`} ${where} — ${r.language} (${engine}):\n${r.text}`;
}
