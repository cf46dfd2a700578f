/**
 * Replays the recorded histories (test/replay/histories, made by test/replay/record.ts from
 * real runs) against the current workflow code: a nondeterministic change fails here.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { beforeAll, describe, expect, it } from 'vitest';
import { replayHistory } from '../../cli/replay.js';
import { bundleWorkflows, workflowsPath } from '../../workers/queues.js';
import { bundle } from '../helpers/temporal.js';
import { repoRoot, run } from '../helpers/spawn.js';

const dir = join(import.meta.dirname, 'histories');
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .sort();
const load = (f: string) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as unknown;
type Started = { events: Array<{ workflowExecutionStartedEventAttributes?: { workflowType?: { name?: string } } }> };
/** The workflow type a history is of, from its first event. */
const historyType = (f: string) =>
  (load(f) as Started).events[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name;

let current: WorkflowBundleWithSourceMap;
let changed: WorkflowBundleWithSourceMap;
beforeAll(async () => {
  [current, changed] = await Promise.all([bundleWorkflows(), bundle('../fixtures/workflows-changed/index.ts')]);
});

describe('replay of recorded histories', () => {
  it('has a recorded history of every workflow type the worker registers', async () => {
    // What the worker registers: every function its workflowsPath exports (the bundle's entry).
    const exported = (await import(workflowsPath)) as Record<string, unknown>;
    const registered = Object.keys(exported).filter((name) => typeof exported[name] === 'function');
    expect(registered).toContain('agentLoopWorkflow');
    const recorded = new Set(files.map(historyType));
    const missing = registered.filter((type) => !recorded.has(type)).sort();
    expect(
      missing,
      'registered workflow types with no history in test/replay/histories (record one: test/replay/record.ts)',
    ).toEqual([]);
  });

  it('has a nerve recorded before the reflex arc (one nerveDecide a reading) and one on it, so both paths replay', () => {
    const nerves = files.filter((f) => f.startsWith('nerveWorkflow-')).map((f) => readFileSync(join(dir, f), 'utf8'));
    expect(nerves.some((text) => text.includes('"nerveDecide"') && !text.includes('nerveArmReflex'))).toBe(true);
    expect(nerves.some((text) => text.includes('"nerveArmReflex"') && text.includes('"nerveFlushReflex"'))).toBe(true);
  });

  it("has a peer exchange: each agent woken by the other's message (the wake signal), and an llm_task.ask answered after its command", () => {
    const peers = files
      .filter((f) => /^agentLoopWorkflow-agent_peer_[ab]-/.test(f))
      .map((f) => readFileSync(join(dir, f), 'utf8'));
    expect(peers).toHaveLength(2);
    for (const text of peers) {
      expect(text).toContain('EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED');
      expect(text).toContain('"signalName": "wake"');
    }
    expect(peers.some((text) => text.includes('"askLlmOnce"'))).toBe(true);
  });

  it('has a spawn started by an agent loop’s command (spawn-v1), one started directly, and one refused at its admission', () => {
    const loop = files
      .filter((f) => f.startsWith('agentLoopWorkflow-agent_spawner-'))
      .map((f) => readFileSync(join(dir, f), 'utf8'));
    expect(
      loop.some(
        (text) =>
          text.includes('EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED') &&
          text.includes('"name": "spawnWorkflow"'),
      ),
    ).toBe(true);
    const spawns = files.filter((f) => f.startsWith('spawnWorkflow-')).map((f) => readFileSync(join(dir, f), 'utf8'));
    // Born: its copy and its own loop started as an abandoned child; refused: neither.
    expect(
      spawns.filter(
        (text) =>
          text.includes('"spawnCopy"') &&
          text.includes('"name": "agentLoopWorkflow"') &&
          text.includes('PARENT_CLOSE_POLICY_ABANDON'),
      ),
    ).toHaveLength(2);
    expect(spawns.filter((text) => !text.includes('"spawnCopy"') && text.includes('"spawnFinish"'))).toHaveLength(1);
  });

  it('has a think cut by worker shutdowns before worker-shutdown-v1 (taken as a failed tick) and one after it (ridden out)', () => {
    // Recorded by `npm start` restarted while the demo agent's local model was thinking.
    type Payloads = { payloads?: Array<{ data?: string }> };
    type Event = {
      eventId: string;
      activityTaskFailedEventAttributes?: { failure?: { applicationFailureInfo?: { type?: string } } };
      activityTaskScheduledEventAttributes?: { activityType?: { name?: string }; input?: Payloads };
      markerRecordedEventAttributes?: { details?: Record<string, Payloads> };
    };
    const { events } = load('agentLoopWorkflow-agent_demo_worker_shutdown-01a21204.json') as { events: Event[] };
    const decoded = (p?: Payloads) => Buffer.from(p?.payloads?.[0]?.data ?? '', 'base64').toString();
    const at = (pred: (e: Event) => boolean) => events.filter(pred).map((e) => Number(e.eventId));
    const cut = at(
      (e) => e.activityTaskFailedEventAttributes?.failure?.applicationFailureInfo?.type === 'WorkerShutdown',
    );
    const marker = at((e) =>
      decoded(e.markerRecordedEventAttributes?.details?.['patch-data']).includes('"worker-shutdown-v1"'),
    );
    const tickFailures = at(
      (e) =>
        e.activityTaskScheduledEventAttributes?.activityType?.name === 'logProcess' &&
        decoded(e.activityTaskScheduledEventAttributes.input).includes('"kind":"tick_failure"'),
    );
    expect(cut).toHaveLength(2);
    expect(marker).toHaveLength(1);
    // The first cut, before the marker existed: a tick_failure logged after it, before the second.
    expect(tickFailures.some((id) => id > cut[0]! && id < cut[1]!)).toBe(true);
    // The second, ridden out: the marker follows it, and no tick_failure does.
    expect(marker[0]).toBeGreaterThan(cut[1]!);
    expect(tickFailures.some((id) => id > cut[1]!)).toBe(false);
  });

  it.each(files)('%s replays deterministically', async (file) => {
    const report = await replayHistory(file, load(file), current);
    expect(report.error).toBeUndefined();
    expect(report.ok).toBe(true);
    expect(report.events).toBeGreaterThan(5);
  });

  it('a deliberate nondeterministic change fails the replay', async () => {
    const file = files.find((f) => f.startsWith('provisionAgentWorkflow-'))!;
    const report = await replayHistory(file, load(file), changed);
    expect(report.ok).toBe(false);
    expect(report.nondeterministic).toBe(true);
  });

  it('`mindloop replay <file>` reports the result and exits 0', async () => {
    const file = files.find((f) => f.startsWith('agentLoopWorkflow-'))!;
    const r = await run(process.execPath, [join(repoRoot, 'bin/mindloop.mjs'), 'replay', join(dir, file)], {}, 120_000);
    expect(r.stdout).toMatch(/replay ok: .* events, deterministic/);
    expect(r.code).toBe(0);
  });

  it('`mindloop replay` of a file that is not JSON is a clear error', async () => {
    const r = await run(
      process.execPath,
      [join(repoRoot, 'bin/mindloop.mjs'), 'replay', join(repoRoot, 'README.md.json')],
      {},
      60_000,
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/no such file/);
  });
});
