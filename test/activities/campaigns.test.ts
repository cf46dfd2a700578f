/**
 * The campaign checkpoint's LLM validator, on the real Postgres with the real LLM
 * router and scripted `validator` rows: a validator that passes, one that fails with its
 * reason, and malformed replies (not JSON, no boolean "pass") that fail the checkpoint with a
 * clear reason instead of crashing. Criteria that already fail never reach the validator, and a
 * worker without an LLM router refuses clearly. Compensation of a task stopped mid-run (no
 * result) is key-based and idempotent.
 */
import { MockActivityEnvironment } from '@temporalio/testing';
import { and, eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCampaignActivities, parseValidatorVerdict } from '../../activities/campaigns.js';
import { createLlmRouter } from '../../activities/llm/index.js';
import type { ChatMessage } from '../../activities/llm/types.js';
import type { Checkpoint, CheckpointVerdict, TaskOutcome } from '../../core/campaign.js';
import { agents, llmRegistry, notes } from '../../db/schema/index.js';
import { migratedDatabase, repoToolsDir, type MigratedDatabase } from '../helpers/env.js';

let h: MigratedDatabase;
let acts: ReturnType<typeof createCampaignActivities>;
/** Validator row id → its scripted reply; every call's prompt is kept. */
const replies = new Map<number, string>();
const calls: Array<{ registryId?: number; purpose?: string; messages: ChatMessage[] }> = [];
const rows: Record<'pass' | 'fail' | 'prose' | 'nopass', number> = { pass: 0, fail: 0, prose: 0, nopass: 0 };

beforeAll(async () => {
  h = await migratedDatabase('mindloop_campaign_acts');
  await h.db.insert(agents).values({ id: 'cato', name: 'Cato' });
  const script: Record<keyof typeof rows, string> = {
    pass: '```json\n{"pass": true, "reason": "All three files are in place and the tests pass."}\n```',
    fail: '{"pass": false, "reason": "The report misses the benchmark numbers."}',
    prose: 'Looks good to me, ship it!',
    nopass: '{"verdict": "yes", "reason": "fine"}',
  };
  for (const [i, k] of (Object.keys(rows) as Array<keyof typeof rows>).entries()) {
    const [r] = await h.db
      .insert(llmRegistry)
      .values({
        agentId: 'cato',
        name: `validator-${k}`,
        provider: 'scripted',
        model: `scripted-${k}`,
        role: 'validator',
        priority: i + 1,
      })
      .returning({ id: llmRegistry.id });
    rows[k] = r!.id;
    replies.set(r!.id, script[k]);
  }
  const llm = createLlmRouter({
    db: h.db,
    env: {},
    toolsDir: repoToolsDir,
    timeoutMs: 5_000,
    scriptedReply: ({ registryId, purpose, messages }) => {
      calls.push({ registryId, purpose, messages });
      return replies.get(registryId ?? -1) ?? 'no script for this row';
    },
  });
  acts = createCampaignActivities({ db: h.db, llm });
});
afterAll(async () => {
  await h?.dispose();
});

const outcomes: TaskOutcome[] = [
  { name: 'write', type: 'diary.write', ok: true, result: { id: 7 } },
  { name: 'check', type: 'noop', ok: true },
];
const phase = { name: 'Build', type: 'build', objectives: ['write the files', 'make the tests pass'] };
const checkpoint = (row: keyof typeof rows, extra: Partial<Checkpoint['criteria']> = {}): Checkpoint => ({
  validator: { role: 'validator', registryId: rows[row] },
  criteria: { description: 'the build is green', expect: [], ...extra },
});
type ValidateInput = Parameters<typeof acts.validateCheckpoint>[0];
const validate = (key: string, cp: Checkpoint, taskOutcomes = outcomes) =>
  new MockActivityEnvironment().run<[ValidateInput], CheckpointVerdict, typeof acts.validateCheckpoint>(
    acts.validateCheckpoint,
    {
      campaignId: 'c1',
      agentId: 'cato',
      key,
      phase,
      checkpoint: cp,
      outcomes: taskOutcomes,
    },
  );

describe('validateCheckpoint with an LLM validator', () => {
  it('passes when the validator says so (code fences tolerated), with its reason; the prompt carries the phase', async () => {
    const before = calls.length;
    expect(await validate('campaign/c1/p0', checkpoint('pass'))).toEqual({
      pass: true,
      reason: 'All three files are in place and the tests pass.',
      by: 'validator',
    });
    expect(calls.length).toBe(before + 1);
    const call = calls.at(-1)!;
    expect(call).toMatchObject({ registryId: rows.pass, purpose: 'campaign_checkpoint' });
    const prompt = call.messages.map((m) => m.content).join('\n');
    expect(prompt).toContain('phase "Build" (build) of campaign c1');
    expect(prompt).toContain('- make the tests pass');
    expect(prompt).toContain('Checkpoint: the build is green');
    expect(prompt).toContain('"name":"write"');
  });

  it('fails with the validator’s reason', async () => {
    expect(await validate('campaign/c1/p1', checkpoint('fail'))).toEqual({
      pass: false,
      reason: 'The report misses the benchmark numbers.',
      by: 'validator',
    });
  });

  it('a malformed validator reply fails the checkpoint with a clear reason, not a crash', async () => {
    const prose = await validate('campaign/c1/p2', checkpoint('prose'));
    expect(prose).toMatchObject({ pass: false, by: 'validator' });
    expect(prose.reason).toMatch(/^validator reply is not JSON \(.+\): Looks good to me, ship it!$/);
    const noPass = await validate('campaign/c1/p3', checkpoint('nopass'));
    expect(noPass).toEqual({
      pass: false,
      reason: 'validator reply lacks a boolean "pass": {"verdict": "yes", "reason": "fine"}',
      by: 'validator',
    });
  });

  it('criteria that fail decide without asking the validator', async () => {
    const before = calls.length;
    const v = await validate('campaign/c1/p4', checkpoint('pass'), [
      outcomes[0]!,
      { name: 'check', type: 'noop', ok: false, error: 'boom' },
    ]);
    expect(v).toEqual({ pass: false, reason: '1 of 2 tasks succeeded, 2 required', by: 'criteria' });
    expect(calls.length).toBe(before);
  });

  it('a worker without an LLM router refuses with a non-retryable error', async () => {
    const bare = createCampaignActivities({ db: h.db });
    await expect(
      bare.validateCheckpoint({
        campaignId: 'c1',
        agentId: 'cato',
        key: 'campaign/c1/p5',
        phase,
        checkpoint: checkpoint('pass'),
        outcomes,
      }),
    ).rejects.toMatchObject({
      nonRetryable: true,
      message: expect.stringContaining('no LLM router on this worker'),
    });
  });
});

describe('compensateCampaignTask for a task stopped mid-run', () => {
  it('undoes a committed effect without a result, once however often it runs; a task that never committed is a no-op', async () => {
    const key = 'campaign/c2/run-1/p0/t0';
    const task = { campaignId: 'c2', agentId: 'cato', key, type: 'note', args: { text: 'half done' } };
    // The task committed its note, then was cancelled before it returned: no result reached the workflow.
    await acts.runCampaignTask(task);
    for (let i = 0; i < 2; i++)
      expect(await acts.compensateCampaignTask(task)).toEqual({ compensated: true, by: 'note.compensate' });
    const rows = await h.db
      .select()
      .from(notes)
      .where(and(eq(notes.agentId, 'cato'), eq(notes.sender, 'campaign/c2')));
    expect(rows.map((n) => [n.text, n.hidden])).toEqual([['half done', true]]);
    // Stopped before it committed anything: nothing to hide, nothing written.
    expect(await acts.compensateCampaignTask({ ...task, key: 'campaign/c2/run-1/p0/t1' })).toEqual({
      compensated: true,
      by: 'note.compensate',
    });
    expect(await h.db.select().from(notes).where(eq(notes.sender, 'campaign/c2'))).toHaveLength(1);
  });
});

describe('parseValidatorVerdict', () => {
  it('defaults the reason and clips it; a JSON non-object is malformed', () => {
    expect(parseValidatorVerdict('{"pass": true}')).toEqual({ pass: true, reason: 'approved', by: 'validator' });
    expect(parseValidatorVerdict('{"pass": false, "reason": "  "}')).toEqual({
      pass: false,
      reason: 'rejected',
      by: 'validator',
    });
    expect(parseValidatorVerdict(`{"pass": false, "reason": "${'x'.repeat(600)}"}`).reason).toHaveLength(500);
    expect(parseValidatorVerdict('[true]')).toMatchObject({
      pass: false,
      reason: expect.stringMatching(/lacks a boolean "pass"/),
    });
    expect(parseValidatorVerdict('')).toMatchObject({
      pass: false,
      reason: expect.stringMatching(/^validator reply is not JSON/),
    });
  });
});
