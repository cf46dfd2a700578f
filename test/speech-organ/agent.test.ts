/**
 * The speech organ in an agent's life, on a real dev server and Postgres: the agent's `speak`
 * (from a scripted reply) starts `speech/<agent>/<tick>/<cmdId>`, whose outcome lands on the
 * command's row and as an outgoing note with its WAV; an empty `speak` is refused with the field
 * named. Audio notes through the loop's `addNote` update and through `mindloop note --audio`:
 * bad paths and files that are not WAV are refused with a clear error while the loop goes on,
 * and a good one arrives as the agent's note (through the loop, which wakes) with its audio.
 */
import { WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultPrices, speechCost } from '../../core/lifeforce.js';
import { renderCommandBlock } from '../../core/reply-parser.js';
import { speakSecondsBound } from '../../core/speech/engine.js';
import { commandLog, llmRegistry, notes } from '../../db/schema/index.js';
import type { AddNoteResult, AgentStatus, agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import type { SpeechResult } from '../../workflows/speech.js';
import { thinkScript } from '../helpers/scripted.js';
import { repoRoot, run } from '../helpers/spawn.js';
import { waitFor } from '../helpers/worker-process.js';
import {
  agentWithLifeforce,
  fakeEngine,
  speechLedger,
  speechTestStack,
  writeWav,
  type SpeechTestStack,
} from './helpers.js';

const agentId = 'voice';
let s: SpeechTestStack;
let engine: Worker;
let engineRun: Promise<void>;
let loop: WorkflowHandle<typeof agentLoopWorkflow>;

/** Tick 1 speaks twice (once with nothing to say); later ticks only think. */
const script = thinkScript((_messages, i) =>
  i === 0
    ? `I will greet my user aloud.\n${renderCommandBlock([
        { cmdId: 's1', type: 'speak', args: { text: 'Hallo Welt, hier spricht voice.', lang: 'de' } },
        { cmdId: 's2', type: 'speak', args: { text: '' } },
      ])}`
    : `Tick ${i + 1}: listening.`,
);

beforeAll(async () => {
  s = await speechTestStack('speech-agent', script);
  await agentWithLifeforce(s.db, agentId, { capacity: 500, available: 500 });
  await s.db.db
    .insert(llmRegistry)
    .values({ agentId, name: 'script', provider: 'scripted', model: 'scripted-speech', role: 'agent', priority: 1 });
  engine = await fakeEngine({
    connection: s.temporal.connection,
    queue: 'speech-cpu',
    backend: 'fake-cpu',
    speakSeconds: 1.5,
  });
  engineRun = engine.run();
  loop = await s.temporal.client.workflow.start<typeof agentLoopWorkflow>('agentLoopWorkflow', {
    taskQueue: 'mindloop',
    workflowId: `agent/${agentId}`,
    args: [{ agentId, settings: { delayMs: 250 } }],
  });
});

afterAll(async () => {
  await loop?.signal('stop').catch(() => undefined);
  await loop?.result().catch(() => undefined);
  if (engine?.getState() === 'RUNNING') engine.shutdown();
  await engineRun;
  await s?.stop();
});

const status = () => loop.query<AgentStatus>('status');
const addNote = (note: unknown) => loop.executeUpdate<AddNoteResult, [unknown]>('addNote', { args: [note] });
/** The message an update failed with (the loop's refusal, or the validator's). */
async function refusal(note: unknown): Promise<string> {
  const err = await addNote(note).then(
    () => new Error('the note was taken'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(WorkflowUpdateFailedError);
  return (err as WorkflowUpdateFailedError).cause?.message ?? '';
}

describe('the agent speaks', () => {
  it('a speak command starts speech/<agent>/<tick>/<cmdId>; its outcome reaches the command row and an outgoing note', async () => {
    const speech = s.temporal.client.workflow.getHandle('speech/voice/1/s1');
    const r = await waitFor('the speech workflow of s1', 60_000, () => speech.result() as Promise<SpeechResult>);
    expect(r).toMatchObject({
      kind: 'speak',
      lang: 'de',
      durationS: 1.5,
      backend: 'fake-cpu',
      queue: 'speech-cpu',
      charged: speechCost(defaultPrices, 1.5),
    });
    expect((await speech.describe()).parentExecution?.workflowId).toBe('agent/voice');

    const rows = await s.db.db
      .select()
      .from(commandLog)
      .where(and(eq(commandLog.agentId, agentId), eq(commandLog.tick, 1)));
    const s1 = rows.find((c) => c.cmdId === 's1')!;
    expect(s1.status).toBe('applied');
    expect((s1.result as { text?: string }).text).toMatch(
      /^speak \(speech\/voice\/1\/s1\): spoke 1\.5 s \(fake-cpu on cpu\) → .*\.wav \(note #\d+\)$/,
    );
    const s2 = rows.find((c) => c.cmdId === 's2')!;
    expect(s2.status).toBe('rejected');
    expect(s2.reason).toMatch(/^invalid args for speak: args\.text: /);
    // The empty speak started nothing.
    await expect(s.temporal.client.workflow.getHandle('speech/voice/1/s2').describe()).rejects.toThrow(/not found/i);

    const [spoken] = await s.db.db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, agentId), eq(notes.direction, 'out')));
    expect(spoken).toMatchObject({
      source: 'agent',
      recipient: 'user',
      text: 'Hallo Welt, hier spricht voice.',
      tags: ['speech'],
    });
    expect(spoken!.audio).toMatchObject({
      kind: 'spoken',
      durationS: 1.5,
      language: 'de',
      backend: 'fake-cpu',
      workflowId: 'speech/voice/1/s1',
    });
    expect(existsSync(spoken!.audio!.path)).toBe(true);

    const ledger = (await speechLedger(s.db, agentId)).filter((e) => e.key.includes('speech/voice/1/s1'));
    expect(ledger.map((e) => [e.kind, e.amount])).toEqual([
      ['reserve', speechCost(defaultPrices, speakSecondsBound('Hallo Welt, hier spricht voice.'))],
      ['settle', speechCost(defaultPrices, 1.5)],
    ]);
  });
});

describe('audio notes', () => {
  it('addNote {audio} refuses a missing file, a file that is not WAV, a relative path and text with audio; the loop goes on', async () => {
    const before = (await status()).tick;
    expect(await refusal({ audio: { path: join(s.dataDir, 'nowhere.wav') } })).toMatch(
      /^audio note not taken: audio file not found: .*nowhere\.wav$/,
    );
    const text = join(s.dataDir, 'minutes.txt');
    writeFileSync(text, 'meeting minutes, typed');
    expect(await refusal({ audio: { path: text } })).toMatch(/^audio note not taken: .*minutes\.txt: not a WAV file/);
    expect(await refusal({ audio: { path: 'relative/talk.wav' } })).toMatch(/audio\.path: an absolute path/);
    expect(await refusal({ text: 'hi', audio: { path: text } })).toMatch(
      /give either text, or audio \{path\} to transcribe/,
    );
    expect(await refusal({})).toMatch(/give either text, or audio/);
    await waitFor('the loop ticking on', 30_000, async () => ((await status()).tick > before ? true : undefined));
    const typed = await addNote({ text: 'a typed note still works' });
    expect(typed).toMatchObject({ noteId: expect.any(Number) });
  });

  it('addNote {audio} starts the transcription; its text arrives through the loop as a note with the audio', async () => {
    const path = writeWav(join(s.dataDir, 'in', 'question.wav'), 1.5);
    const received = (await status()).counters.notesReceived;
    const r = await addNote({ audio: { path, language: 'EN' }, priority: 3, tags: ['voice'] });
    expect(r).toMatchObject({
      noteId: null,
      transcribing: { workflowId: expect.stringMatching(/^speech\/voice\/note\//) },
    });
    if (!('transcribing' in r)) throw new Error('no transcription started');
    const done = await s.temporal.client.workflow.getHandle(r.transcribing.workflowId).result();
    expect(done).toMatchObject({
      kind: 'transcribe',
      delivered: 'loop',
      text: 'heard question.wav',
      noteId: expect.any(Number),
    });
    const [note] = await s.db.db.select().from(notes).where(eq(notes.id, done.noteId));
    expect(note).toMatchObject({
      direction: 'in',
      source: 'user',
      priority: 3,
      tags: ['audio', 'voice'],
      text: 'heard question.wav',
    });
    expect(note!.audio).toMatchObject({
      kind: 'heard',
      path,
      durationS: 1,
      backend: 'fake-cpu',
      device: 'cpu',
      model: 'fake-whisper',
    });
    // Through the loop: it counted the note (and was woken by it).
    expect((await status()).counters.notesReceived).toBe(received + 1);
  });

  it('`mindloop note --audio` refuses a file that is not WAV and an unknown agent, sending nothing', async () => {
    const env = {
      TEMPORAL_ADDRESS: s.temporal.server.address,
      MINDLOOP_DATA_DIR: s.dataDir,
      MINDLOOP_TOOLS_DIR: join(repoRoot, '.tools'),
    };
    const text = join(s.dataDir, 'memo.txt');
    writeFileSync(text, 'not a recording');
    const bad = await run(
      process.execPath,
      [join(repoRoot, 'bin/mindloop.mjs'), 'note', agentId, '--audio', text],
      env,
      60_000,
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(
      /memo\.txt: not a WAV file \(no RIFF\/WAVE header\) \(NotAudio\); give a WAV file; nothing was sent/,
    );
    const missing = await run(
      process.execPath,
      [join(repoRoot, 'bin/mindloop.mjs'), 'note', agentId, '--audio', join(s.dataDir, 'gone.wav')],
      env,
      60_000,
    );
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/gone\.wav: no such file; nothing was sent/);
    const good = writeWav(join(s.dataDir, 'hello.wav'), 1);
    const ghost = await run(
      process.execPath,
      [join(repoRoot, 'bin/mindloop.mjs'), 'note', 'ghost', '--audio', good],
      env,
      60_000,
    );
    expect(ghost.code).toBe(1);
    expect(ghost.stderr).toMatch(/no agent ghost: start it with `mindloop start ghost`/);
    expect(existsSync(join(s.dataDir, 'speech', 'ghost'))).toBe(false);
  });

  it('`mindloop note --audio file.wav --wait` copies the file under the data dir, prints the workflow and the transcription', async () => {
    const env = {
      TEMPORAL_ADDRESS: s.temporal.server.address,
      MINDLOOP_DATA_DIR: s.dataDir,
      MINDLOOP_TOOLS_DIR: join(repoRoot, '.tools'),
    };
    const file = writeWav(join(s.dataDir, 'outside', 'dictation.wav'), 2);
    const r = await run(
      process.execPath,
      [join(repoRoot, 'bin/mindloop.mjs'), 'note', agentId, '--audio', file, '--lang', 'de', '--wait'],
      env,
      90_000,
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const workflowId = /as workflow (speech\/voice\/cli\/[0-9a-f-]+)/.exec(r.stdout)?.[1];
    expect(r.stdout).toMatch(/^transcribing .*dictation\.wav \(2\.0 s\) for voice as workflow speech\/voice\/cli\//);
    expect(r.stdout).toMatch(
      /note #\d+ delivered to the loop — en \(fake-cpu on cpu, speech-cpu; 1\.0 s, 0\.5 LF\):\nheard [0-9a-f-]+\.wav/,
    );
    const copied = readdirSync(join(s.dataDir, 'speech', agentId, 'in'));
    expect(copied).toHaveLength(1);
    const result = await s.temporal.client.workflow.getHandle(workflowId!).result();
    expect(result).toMatchObject({
      kind: 'transcribe',
      audioPath: join(s.dataDir, 'speech', agentId, 'in', copied[0]!),
    });
  });

  it("with the loop stopped, a transcription is stored directly as the agent's note", async () => {
    await loop.signal('stop');
    await loop.result();
    const audioPath = writeWav(join(s.dataDir, 'in', 'after-hours.wav'), 1);
    const r = await s.temporal.client.workflow.execute('speechWorkflow', {
      taskQueue: 'mindloop',
      workflowId: 'speech/voice/after-hours',
      args: [{ kind: 'transcribe', agentId, audioPath }],
    });
    expect(r).toMatchObject({ kind: 'transcribe', delivered: 'stored', noteId: expect.any(Number) });
    const [note] = await s.db.db
      .select()
      .from(notes)
      .where(eq(notes.id, (r as { noteId: number }).noteId));
    expect(note).toMatchObject({
      direction: 'in',
      text: 'heard after-hours.wav',
      idempotencyKey: 'agent/voice:note:speech:speech/voice/after-hours',
    });
    expect(note!.audio).toMatchObject({ kind: 'heard', path: audioPath });
  });
});
