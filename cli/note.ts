/**
 * `mindloop note <agent> <text…>` and `--audio <file>`: a note for the agent's loop (its
 * `addNote` update). A text note goes through the notebook of a running `npm start` when it
 * serves the same Temporal cluster (cli/notebook-client.ts), else straight to Temporal. Either
 * way it carries one update id, so a note the notebook may have delivered before it stopped
 * answering is not delivered twice when the command then sends it itself.
 */
import { randomUUID } from 'node:crypto';
import { InvalidArgumentError, type Command } from 'commander';
import { speechLanguageSchema } from '../core/speech/engine.js';
import { workflowIds } from '../core/ids.js';
import { loadEnvOrExit, type Env } from '../env.js';
import type { AddNoteResult, agentLoopWorkflow } from '../workflows/agent-loop/index.js';
import { agentIdArg, numberArg } from './args.js';
import { askNotebook } from './notebook-client.js';

interface TextNote {
  text: string;
  priority: number;
  tags: string[];
  updateId: string;
}

/** Through the notebook: the result, a refusal (its reason), or null when the notebook cannot take it. */
async function noteViaNotebook(env: Env, agentId: string, note: TextNote): Promise<AddNoteResult | Error | null> {
  const answer = await askNotebook(env, 'POST', `/api/agents/${encodeURIComponent(agentId)}/notes`, note);
  if (!answer) return null;
  if (answer.status === 201) return answer.body as unknown as AddNoteResult;
  // A refusal by the loop or its validation, or no loop: what Temporal would have said.
  if (answer.status === 400 || answer.status === 404 || answer.status === 409)
    return new Error(String(answer.body.error ?? `refused (${answer.status})`));
  return null;
}

async function noteViaTemporal(agentId: string, note: TextNote): Promise<AddNoteResult> {
  const [{ withClient, updateRefusal }, { onAgentLoop }] = await Promise.all([
    import('./client.js'),
    import('../runtime/operator.js'),
  ]);
  return withClient((client) =>
    onAgentLoop(agentId, 'nothing was stored', async () => {
      try {
        return await client.workflow
          .getHandle<typeof agentLoopWorkflow>(workflowIds.agent(agentId))
          .executeUpdate<AddNoteResult, [unknown]>('addNote', {
            args: [{ text: note.text, priority: note.priority, tags: note.tags }],
            updateId: note.updateId,
          });
      } catch (err) {
        // The loop refused it (a bad note, or the database away with a full queue): say why.
        throw updateRefusal(err);
      }
    }),
  );
}

/** Send a text note: through the notebook when it can take it, else to Temporal (`direct`: always). */
async function sendTextNote(
  agentId: string,
  note: Omit<TextNote, 'updateId'>,
  o: { direct?: boolean } = {},
): Promise<AddNoteResult> {
  const withId = { ...note, updateId: `cli-note-${randomUUID()}` };
  const viaNotebook = o.direct ? null : await noteViaNotebook(loadEnvOrExit(), agentId, withId);
  if (viaNotebook instanceof Error) throw viaNotebook;
  return viaNotebook ?? (await noteViaTemporal(agentId, withId));
}

async function audioNote(
  agentId: string,
  file: string,
  opts: { priority: number; tag?: string[]; lang?: string; wait?: boolean },
): Promise<void> {
  const env = loadEnvOrExit();
  const [{ withClient }, { formatSpeechResult, speechOutcome, startAudioNote }] = await Promise.all([
    import('./client.js'),
    import('./speech.js'),
  ]);
  await withClient(async (client) => {
    const started = await startAudioNote(client, {
      agentId,
      file,
      dataDir: env.MINDLOOP_DATA_DIR,
      language: opts.lang,
      priority: opts.priority,
      tags: opts.tag ?? [],
    });
    process.stdout.write(
      `transcribing ${file} (${started.wav.durationS.toFixed(1)} s) for ${agentId} as workflow ${started.workflowId}\n`,
    );
    if (opts.wait) process.stdout.write(`${formatSpeechResult(await speechOutcome(client, started.workflowId))}\n`);
  });
}

export function registerNoteCommand(program: Command): void {
  program
    .command('note')
    .description(
      'send the agent a note; it sees it in its next ticks. With --audio, a WAV file is transcribed into the note',
    )
    .argument('<agent>', 'agent id', agentIdArg)
    .argument('[text...]', 'the note (not with --audio)')
    .option('-p, --priority <n>', 'priority 0..10', numberArg('--priority', 0, 10), 1)
    .option('-t, --tag <tag...>', 'tags')
    .option(
      '--audio <file>',
      'a WAV file to transcribe: copied under <MINDLOOP_DATA_DIR>/speech/<agent>/in/, heard by the speech engine, stored as the note with the audio on it',
    )
    .option('--lang <code>', 'with --audio: the language spoken (en, de, …; default: detected)', (v: string) => {
      const r = speechLanguageSchema.safeParse(v);
      if (!r.success) throw new InvalidArgumentError(r.error.issues[0]?.message ?? 'bad language');
      return r.data;
    })
    .option('--wait', 'with --audio: wait for the transcription and print it')
    .option('--direct', 'send it to Temporal directly, not through the notebook')
    .action(
      async (
        id: string,
        words: string[],
        opts: { priority: number; tag?: string[]; audio?: string; lang?: string; wait?: boolean; direct?: boolean },
      ) => {
        if (opts.audio !== undefined) {
          if (words.length > 0) throw new Error('give either a text or --audio <file>, not both');
          return audioNote(id, opts.audio, opts);
        }
        if (opts.lang !== undefined || opts.wait) throw new Error('--lang and --wait go with --audio <file>');
        if (words.length === 0) throw new Error('give the note as text, or --audio <file>');
        const r = await sendTextNote(
          id,
          { text: words.join(' '), priority: opts.priority, tags: opts.tag ?? [] },
          opts,
        );
        process.stdout.write(
          r.queued
            ? `note queued for ${id}: ${r.message}\n`
            : r.noteId !== null
              ? `note #${r.noteId} delivered to ${id}\n`
              : `note for ${id} taken\n`,
        );
      },
    );
}
