/**
 * agentLoopWorkflow's logic on the time-skipping server, with typed activity fakes: ticks,
 * pacing, idle/wake by note and by timeout, pause/resume, continue-as-new, bad input, Core
 * Outage and recovery, loop effects, task loops. (End to end with Postgres and real
 * activities: test/integration/agent-loop.test.ts.)
 */
import { WorkflowFailedError, type WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { autoPassReflexes, fakeThought, unlimitedLifeforce } from '../helpers/scripted.js';
import type { createActivities } from '../../activities/index.js';
import type { ThinkInput, ThinkResult } from '../../activities/tick/think.js';
import type { CommandOutcome, ParsedCommand } from '../../core/loop-types.js';
import type { AgentStatus, agentLoopWorkflow } from '../../workflows/agent-loop/index.js';
import { startLoop, untilStatus, withWorker, type WorkerSpec } from '../helpers/harness.js';
import { timeSkippingSuite } from '../helpers/temporal.js';

type Activities = ReturnType<typeof createActivities>;

const suite = timeSkippingSuite();

const hour = 3_600_000;

interface Fake {
  thinks: ThinkInput[];
  applied: Array<{ tick: number; mode: string; commands: ParsedCommand[] }>;
  notes: Array<{ text: string; idempotencyKey: string }>;
  processLog: Array<{ status: string; message: string }>;
  taskStatus: Array<{ taskId: number; replStatus: string }>;
  activities: Partial<Activities>;
}

/** Scriptable fakes: `reply(input)` decides each think; `effects(cmd)` what a command does to the loop. */
function fakes(
  opts: {
    reply?: (input: ThinkInput, n: number) => Partial<ThinkResult> | Error;
    effects?: (cmd: ParsedCommand) => CommandOutcome['effects'];
    probe?: (n: number) => boolean;
    /** What agent_config holds (loopStarted returns it). */
    config?: Record<string, unknown>;
  } = {},
): Fake {
  const f: Fake = { thinks: [], applied: [], notes: [], processLog: [], taskStatus: [], activities: {} };
  let probes = 0;
  f.activities = {
    async loopStarted() {
      return { interruptedTaskLoops: [], config: opts.config ?? {} };
    },
    ...unlimitedLifeforce,
    async loopStopped() {},
    async think(input) {
      f.thinks.push(input);
      const r = opts.reply?.(input, f.thinks.length) ?? {};
      if (r instanceof Error) throw r;
      return fakeThought(input, r);
    },
    async applyCommands(input) {
      f.applied.push({ tick: input.tick, mode: input.mode, commands: input.commands });
      return input.commands.map((c) => ({
        cmdId: c.cmdId,
        type: c.type,
        status: 'applied' as const,
        message: 'ok',
        duplicate: false,
        effects: opts.effects?.(c) ?? [],
      }));
    },
    async recordNote(input) {
      f.notes.push({ text: input.text, idempotencyKey: input.idempotencyKey });
      return { noteId: f.notes.length };
    },
    async logProcess(input) {
      f.processLog.push({ status: input.status, message: input.message });
    },
    async probeLlm() {
      probes++;
      return (opts.probe ?? (() => true))(probes)
        ? { ok: true, model: 'scripted:fake' }
        : { ok: false, error: 'still down' };
    },
    async setTaskLoopStatus(input) {
      f.taskStatus.push({ taskId: input.taskId, replStatus: input.replStatus });
      return { lastTick: 0, maxTicks: null };
    },
    tickReflexes: autoPassReflexes,
  };
  return f;
}

let queueSeq = 0;
/** A worker on a queue of its own with the fakes' activities. */
const fakeWorker = (f: Fake): WorkerSpec => ({
  taskQueue: `loop-${++queueSeq}`,
  workflowBundle: suite.bundle,
  activities: f.activities,
});

function start(
  taskQueue: string,
  input: Parameters<typeof agentLoopWorkflow>[0],
): Promise<WorkflowHandleWithFirstExecutionRunId<typeof agentLoopWorkflow>> {
  return startLoop(suite.env.client, taskQueue, input, `agent/${input.agentId}-${queueSeq}`);
}

describe('agentLoopWorkflow (time-skipping, fakes)', () => {
  it('ticks at delay_ms pace and completes after maxTicks', async () => {
    const f = fakes();
    const result = await withWorker(suite.env, fakeWorker(f), async (q) =>
      (await start(q, { agentId: 'ticker', maxTicks: 5, settings: { delayMs: 1000 } })).result(),
    );
    expect(result).toEqual({ agentId: 'ticker', ticks: 5, reason: 'max_ticks' });
    expect(f.thinks.map((t) => t.tick)).toEqual([1, 2, 3, 4, 5]);
    const gaps = f.thinks.slice(1).map((t, i) => Date.parse(t.now) - Date.parse(f.thinks[i]!.now));
    for (const g of gaps) expect(g).toBeGreaterThanOrEqual(1000);
  });

  it('idles until a note arrives, and wakes by itself at the idle timeout', async () => {
    const f = fakes();
    await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, {
        agentId: 'idler',
        maxTicks: 3,
        settings: { idle: { on: true, wakeOn: ['note', 'timeout'], timeoutMs: hour } },
      });
      await untilStatus(h, (s) => s.tick === 1 && s.phase === 'idle', 'first tick', 20_000, 50);
      const { noteId } = await h.executeUpdate<{ noteId: number }, [unknown]>('addNote', {
        args: [{ text: 'hello there' }],
      });
      expect(noteId).toBe(1);
      await untilStatus(h, (s) => s.tick === 2, 'tick woken by the note', 20_000, 50);
      // Nobody writes now: the third tick comes from the idle timeout (time skips an hour).
      expect(await h.result()).toMatchObject({ ticks: 3 });
    });
    const t = f.thinks.map((x) => Date.parse(x.now));
    expect(t[1]! - t[0]!).toBeLessThan(hour);
    expect(t[2]! - t[1]!).toBeGreaterThanOrEqual(hour);
    expect(f.notes).toEqual([{ text: 'hello there', idempotencyKey: expect.stringContaining(':note:') }]);
  });

  it('a note sent as a new agent starts is stored once loopStarted has written the agent', async () => {
    const f = fakes();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let startedDone = false;
    const startedAt: boolean[] = [];
    const loopStarted = f.activities.loopStarted!;
    f.activities.loopStarted = async (i) => {
      await gate;
      const r = await loopStarted(i);
      startedDone = true;
      return r;
    };
    const recordNote = f.activities.recordNote!;
    f.activities.recordNote = async (i) => {
      startedAt.push(startedDone);
      return recordNote(i);
    };
    await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, { agentId: 'newcomer', maxTicks: 1 });
      const note = h.executeUpdate<{ noteId: number }, [unknown]>('addNote', { args: [{ text: 'welcome' }] });
      try {
        await new Promise((r) => setTimeout(r, 500));
        expect(f.notes).toEqual([]);
      } finally {
        release();
      }
      expect(await note).toEqual({ noteId: 1 });
      expect(await h.result()).toMatchObject({ ticks: 1 });
    });
    expect(startedAt).toEqual([true]);
  });

  it('rejects a malformed note with a clear update error and keeps running', async () => {
    const f = fakes();
    await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, {
        agentId: 'noter',
        maxTicks: 2,
        settings: { idle: { on: true, wakeOn: ['note'], timeoutMs: hour } },
      });
      await untilStatus(h, (s) => s.tick === 1, 'first tick', 20_000, 50);
      const err = await h.executeUpdate('addNote', { args: [{ text: '', priority: 99 }] }).catch((e: unknown) => e);
      expect(String((err as Error & { cause?: Error }).cause?.message)).toMatch(/invalid note: .*text.*priority/s);
      await h.executeUpdate('addNote', { args: [{ text: 'valid' }] });
      expect(await h.result()).toMatchObject({ ticks: 2 });
    });
    expect(f.notes.map((n) => n.text)).toEqual(['valid']);
  });

  it('pauses and resumes; setConfig validates and applies', async () => {
    const f = fakes();
    await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, { agentId: 'pauser', maxTicks: 4, settings: { delayMs: 10_000 } });
      await untilStatus(h, (s) => s.tick >= 1, 'first tick', 20_000, 50);
      await h.signal('pause');
      const paused = await untilStatus(h, (s) => s.phase === 'paused', 'paused', 20_000, 50);
      await suite.env.sleep(10 * 60_000);
      expect((await h.query<AgentStatus>('status')).tick).toBe(paused.tick);

      const bad = await h.executeUpdate('setConfig', { args: [{ delayMs: -5, bogus: 1 }] }).catch((e: unknown) => e);
      expect(String((bad as Error & { cause?: Error }).cause?.message)).toMatch(/invalid config: .*delayMs/);
      const settings = await h.executeUpdate<AgentStatus['settings'], [unknown]>('setConfig', {
        args: [{ delayMs: 500, recentK: 9 }],
      });
      expect(settings).toMatchObject({ delayMs: 500, recentK: 9 });

      await h.signal('resume');
      expect(await h.result()).toMatchObject({ ticks: 4 });
    });
  });

  it('a fresh start resumes the saved agent_config; input settings win over it', async () => {
    const f = fakes({
      config: { delay_ms: 7000, recent_responses: 9, context_mode: 'meditation', max_tokens: 'lots' },
    });
    await withWorker(suite.env, fakeWorker(f), async (q) =>
      (await start(q, { agentId: 'configured', maxTicks: 2, settings: { recentK: 3 } })).result(),
    );
    // delay_ms and context_mode from the saved config, recentK from the input, a bad value ignored.
    expect(Date.parse(f.thinks[1]!.now) - Date.parse(f.thinks[0]!.now)).toBeGreaterThanOrEqual(7000);
    expect(f.thinks[0]!.loop).toMatchObject({ recentK: 3, contextMode: 'meditation' });
    expect(f.thinks[0]!.params.maxTokens).toBe(512);
  });

  it('continues-as-new under the tick cap, carrying settings and counters', async () => {
    const f = fakes({ reply: (i) => ({ commands: [{ cmdId: `c${i.tick}`, type: 'diary.add', args: {} }] }) });
    await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, {
        agentId: 'carrier',
        maxTicks: 7,
        ticksPerRun: 3,
        settings: { delayMs: 10, recentK: 11 },
      });
      const result = await h.result();
      expect(result).toMatchObject({ ticks: 7 });
      const last = await suite.env.client.workflow.getHandle(h.workflowId).describe();
      expect(last.runId).not.toBe(h.firstExecutionRunId);
    });
    expect(f.thinks.map((t) => t.tick)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(new Set(f.thinks.map((t) => t.loop.recentK))).toEqual(new Set([11]));
    expect(f.applied.map((a) => a.tick)).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  it('continues as new every 100 ticks when the input names no run length', async () => {
    // A worker taking an agent over replays its run so far: runs are kept short.
    const runOf = new Map<number, string>();
    const f = fakes({
      reply: (input) => {
        runOf.set(input.tick, Context.current().info.workflowExecution?.runId ?? 'none');
        return {};
      },
    });
    await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, { agentId: 'long-runner', maxTicks: 101, settings: { delayMs: 0 } });
      expect(await h.result()).toMatchObject({ ticks: 101 });
    });
    const runs = [...new Set(runOf.values())];
    expect(runs).toHaveLength(2);
    expect([...runOf].filter(([, r]) => r === runs[0]).map(([t]) => t)).toEqual(
      Array.from({ length: 100 }, (_, i) => i + 1),
    );
    expect(runOf.get(101)).toBe(runs[1]);
  });

  it('applies a pause/resume command once per command id, also when it comes again after continue-as-new', async () => {
    const f = fakes();
    await withWorker(suite.env, fakeWorker(f), async (q) => {
      const first = await start(q, {
        agentId: 'commanded',
        maxTicks: 6,
        ticksPerRun: 2,
        settings: { delayMs: 10_000 },
      });
      const h = suite.env.client.workflow.getHandle(first.workflowId);
      await untilStatus(h, (s) => s.tick >= 1, 'first tick', 20_000, 50);
      await h.signal('pause', { commandId: 'cmd-pause-1' });
      await untilStatus(h, (s) => s.phase === 'paused', 'paused', 20_000, 50);
      await h.signal('resume', { commandId: 'cmd-resume-1' });
      await suite.env.sleep(30_000);
      const later = await untilStatus(h, (s) => s.tick >= 3, 'a tick of the next run', 20_000, 50);
      expect((await h.describe()).runId).not.toBe(first.firstExecutionRunId);
      // The bus delivers the pause again (its ack was lost) after the loop continued as new.
      await h.signal('pause', { commandId: 'cmd-pause-1' });
      await suite.env.sleep(30_000);
      const after = await untilStatus(h, (s) => s.tick > later.tick, 'ticks after the repeated pause', 20_000, 50);
      expect(after.paused).toBe(false);
      expect(await h.result()).toMatchObject({ ticks: 6 });
    });
    expect(f.thinks.map((t) => t.tick)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('a pause signal whose argument is not a command id still pauses', async () => {
    const f = fakes();
    await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, { agentId: 'ui-paused', maxTicks: 3, settings: { delayMs: 10_000 } });
      await untilStatus(h, (s) => s.tick >= 1, 'first tick', 20_000, 50);
      await h.signal('pause', { commandId: 42 } as never);
      await untilStatus(h, (s) => s.phase === 'paused', 'paused', 20_000, 50);
      await h.signal('resume', 'garbage' as never);
      expect(await h.result()).toMatchObject({ ticks: 3 });
    });
  });

  it('rejects a malformed input at once, non-retryable, naming the fields', async () => {
    const f = fakes();
    const err = await withWorker(suite.env, fakeWorker(f), async (q) =>
      suite.env.client.workflow
        .execute('agentLoopWorkflow', {
          taskQueue: q,
          workflowId: 'agent/bad',
          args: [{ agentId: 'no/slash', settings: { delayMs: 'soon' } }],
        })
        .catch((e: unknown) => e),
    );
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const cause = (err as WorkflowFailedError).cause as ApplicationFailure;
    expect(cause.type).toBe('InvalidInput');
    expect(cause.nonRetryable).toBe(true);
    expect(cause.message).toMatch(/agentId: /);
    expect(cause.message).toMatch(/settings\.delayMs: /);
    expect(f.thinks).toHaveLength(0);
  });

  it('enters Core Outage when no LLM answers, keeps taking notes, and recovers by itself', async () => {
    const down = ApplicationFailure.create({
      type: 'LlmUnavailable',
      nonRetryable: true,
      message: 'all 2 candidates failed',
    });
    const f = fakes({ reply: (_i, n) => (n === 2 || n === 3 ? down : {}), probe: (n) => n >= 3 });
    await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, { agentId: 'outage', maxTicks: 3, settings: { delayMs: 1000 } });
      const s = await untilStatus(h, (x) => x.operatingMode === 'core_outage', 'core outage', 20_000, 50);
      expect(s.outage?.lastError).toContain('all 2 candidates failed');
      const { noteId } = await h.executeUpdate<{ noteId: number }, [unknown]>('addNote', {
        args: [{ text: 'are you there?' }],
      });
      expect(noteId).toBeGreaterThan(0);
      expect(await h.result()).toMatchObject({ ticks: 3 });
      const end = await h.query<AgentStatus>('status');
      expect(end.operatingMode).toBe('normal');
      expect(end.counters.outages).toBe(1);
    });
    expect(f.processLog.map((p) => p.status)).toEqual(['offline', 'close']);
    expect(f.processLog[1]!.message).toMatch(/recovered/);
    expect(f.notes.map((n) => n.text)).toEqual(['are you there?']);
    expect(f.thinks.map((t) => t.tick)).toEqual([1, 2, 2, 2, 3]);
  });

  it('applies loop effects of commands (responses, context mode, pause)', async () => {
    const f = fakes({
      reply: (i) =>
        i.tick === 1
          ? {
              commands: [
                { cmdId: 'a', type: 'cycle.responses', args: { n: 7 } },
                { cmdId: 'b', type: 'cycle.meditation', args: { on: true } },
              ],
            }
          : {},
      effects: (c) =>
        c.type === 'cycle.responses'
          ? [{ kind: 'setResponses', n: 7 }]
          : c.type === 'cycle.meditation'
            ? [{ kind: 'setContextMode', mode: 'meditation' }]
            : [],
    });
    await withWorker(suite.env, fakeWorker(f), async (q) =>
      (await start(q, { agentId: 'effects', maxTicks: 2, settings: { delayMs: 10 } })).result(),
    );
    expect(f.thinks[1]!.loop).toMatchObject({ recentK: 7, contextMode: 'meditation' });
  });

  it('starts an auxiliary task loop as a child that runs read-only and stops when its task is done', async () => {
    const f = fakes({
      reply: (i) => {
        if (i.mode === 'task')
          return {
            commands: [{ cmdId: 'n', type: 'notes.send', args: { text: 'proposal' } }],
            taskStatus: i.tick >= 2 ? 'done' : 'open',
          };
        return i.tick === 1 ? { commands: [{ cmdId: 't', type: 'llm_task.start', args: { title: 'research' } }] } : {};
      },
      effects: (c) => (c.type === 'llm_task.start' ? [{ kind: 'startTaskLoop', taskId: 42, title: 'research' }] : []),
    });
    await withWorker(suite.env, fakeWorker(f), async (q) => {
      const h = await start(q, { agentId: 'parent', maxTicks: 3, settings: { delayMs: 1000 } });
      await h.result();
      const child = suite.env.client.workflow.getHandle('agent/parent/task/42');
      expect(await child.result()).toMatchObject({ taskId: 42, ticks: 2, replStatus: 'stopped' });
    });
    const task = f.applied.filter((a) => a.mode === 'task');
    expect(task.length).toBe(2);
    expect(task[0]!.commands[0]!.cmdId).toBe('n');
    expect(f.taskStatus.map((s) => s.replStatus)).toEqual(['running', 'stopped']);
  });
});
