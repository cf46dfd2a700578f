/**
 * What the speech-organ tests share: a real dev server and Postgres with a `mindloop`-queue
 * worker (the speech workflow and its activities, and the agent loop on a scripted LLM), WAV
 * files, and fake engines — TypeScript workers that register `transcribe` / `speak` on a speech
 * queue, standing in for the Python engine where routing and priority are what is tested.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { Worker, type NativeConnection } from '@temporalio/worker';
import { Context } from '@temporalio/activity';
import { and, eq } from 'drizzle-orm';
import { createActivities } from '../../activities/index.js';
import type { ScriptedReplyFn } from '../../activities/llm/index.js';
import { pcm16WavHeader } from '../../core/speech/wav.js';
import type {
  EngineSpeakInput,
  EngineSpeakResult,
  EngineTranscribeInput,
  EngineTranscribeResult,
} from '../../core/speech/engine.js';
import type { SpeechQueue } from '../../core/speech/route.js';
import { budgetIds } from '../../core/lifeforce.js';
import { ensureBudget, reserve, settle } from '../../db/queries/lifeforce.js';
import { agents, lifeforceLedger } from '../../db/schema/index.js';
import { migratedDatabase, repoToolsDir, tempDir, type MigratedDatabase } from '../helpers/env.js';
import { startDevTemporal, type DevTemporal } from '../helpers/temporal.js';
import { failoverWorkerOptions } from '../../workers/failover.js';

/** A WAV of `seconds` of quiet noise at `rate`, 16-bit mono. */
export function writeWav(path: string, seconds: number, rate = 16_000): string {
  const samples = Math.round(seconds * rate);
  const body = Buffer.alloc(samples * 2);
  for (let i = 0; i < samples; i++) body.writeInt16LE(Math.round(Math.sin(i / 7) * 300), i * 2);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, Buffer.concat([Buffer.from(pcm16WavHeader(samples, rate)), body]));
  return path;
}

export interface SpeechTestStack {
  temporal: DevTemporal;
  db: MigratedDatabase;
  dataDir: string;
  /** The `mindloop`-queue worker (workflows and activities). */
  worker: Worker;
  stop(): Promise<void>;
}

/** A dev server, a fresh database and a worker on `mindloop` running until `stop`. */
export async function speechTestStack(label: string, scriptedReply?: ScriptedReplyFn): Promise<SpeechTestStack> {
  const data = tempDir(label);
  const db = await migratedDatabase(`mindloop_${label.replace(/-/g, '_')}`);
  const temporal = await startDevTemporal(label);
  const worker = await Worker.create({
    connection: temporal.connection,
    taskQueue: 'mindloop',
    ...failoverWorkerOptions,
    workflowBundle: temporal.bundle,
    activities: createActivities({
      db: db.db,
      llm: { env: {}, toolsDir: repoToolsDir, ...(scriptedReply ? { scriptedReply } : {}) },
      dataDir: data.path,
      // Every job asks the server afresh: the tests start and stop engines between jobs.
      speech: { routeCacheMs: 0 },
    }),
  });
  const running = worker.run();
  return {
    temporal,
    db,
    dataDir: data.path,
    worker,
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
      await temporal.stop();
      await db.dispose();
      data.remove();
    },
  };
}

/** An agent row, with a budget of `capacity` of which `available` is left (null: unlimited). */
export async function agentWithLifeforce(
  db: MigratedDatabase,
  agentId: string,
  lifeforce: { capacity: number; available: number } | null = null,
): Promise<void> {
  await db.db.insert(agents).values({ id: agentId, name: agentId }).onConflictDoNothing();
  const budgetId = budgetIds.agent(agentId);
  await ensureBudget(db.db, {
    id: budgetId,
    agentId,
    scope: 'agent',
    settings: { capacity: lifeforce ? lifeforce.capacity : null },
  });
  if (lifeforce && lifeforce.available < lifeforce.capacity) {
    const spend = lifeforce.capacity - lifeforce.available;
    const held = await reserve(db.db, {
      key: `test-spend:${agentId}`,
      budgetId,
      amount: spend,
      operation: 'test',
      ttlMs: null,
    });
    if (!held.ok) throw new Error(`could not spend ${spend} of ${agentId}'s budget`);
    await settle(db.db, `test-spend:${agentId}`, spend);
  }
}

/** The agent's speech entries in the ledger, oldest first. */
export async function speechLedger(db: MigratedDatabase, agentId: string) {
  return db.db
    .select({
      kind: lifeforceLedger.kind,
      amount: lifeforceLedger.amount,
      key: lifeforceLedger.idempotencyKey,
      reservationKey: lifeforceLedger.reservationKey,
      metadata: lifeforceLedger.metadata,
    })
    .from(lifeforceLedger)
    .where(and(eq(lifeforceLedger.agentId, agentId), eq(lifeforceLedger.operation, 'speech')))
    .orderBy(lifeforceLedger.id);
}

export interface FakeEngineOptions {
  connection: NativeConnection;
  queue: SpeechQueue;
  backend: string;
  /** Each job's workflow id, in the order the worker took them. */
  ran?: string[];
  /** One job at a time, one poll: the order it takes a backlog in is the order matching hands it out. */
  oneAtATime?: boolean;
  transcribe?: (
    input: EngineTranscribeInput,
  ) => Partial<EngineTranscribeResult> | Promise<Partial<EngineTranscribeResult>>;
  /** The seconds a speak's audio lasts (default: 1.2). */
  speakSeconds?: number;
}

/** A TypeScript worker with the engine's activity names on a speech queue. */
export function fakeEngine(o: FakeEngineOptions): Promise<Worker> {
  const device = o.queue === 'speech-gpu' ? 'cuda' : 'cpu';
  const activities = {
    async transcribe(input: EngineTranscribeInput): Promise<EngineTranscribeResult> {
      o.ran?.push(Context.current().info.workflowExecution?.workflowId ?? '(no workflow)');
      const extra = (await o.transcribe?.(input)) ?? {};
      return {
        text: `heard ${input.audio_path.split('/').pop()}`,
        language: 'en',
        language_probability: 0.97,
        duration_s: 1,
        words: [],
        confidence: 0.9,
        backend: o.backend,
        device,
        model: 'fake-whisper',
        elapsed_ms: 5,
        rtf: 0.01,
        ...extra,
      };
    },
    async speak(input: EngineSpeakInput): Promise<EngineSpeakResult> {
      o.ran?.push(Context.current().info.workflowExecution?.workflowId ?? '(no workflow)');
      const seconds = o.speakSeconds ?? 1.2;
      writeWav(input.out_path, seconds, 22_050);
      return {
        audio_path: input.out_path,
        duration_s: seconds,
        sample_rate: 22_050,
        lang: input.lang ?? 'en',
        voice: 'fake-voice',
        backend: o.backend,
        device,
        elapsed_ms: 5,
        rtf: 0.01,
      };
    },
  };
  return Worker.create({
    connection: o.connection,
    taskQueue: o.queue,
    activities,
    ...(o.oneAtATime ? { maxConcurrentActivityTaskExecutions: 1, maxConcurrentActivityTaskPolls: 1 } : {}),
  });
}
